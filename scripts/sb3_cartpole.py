"""Stable-Baselines3 PPO on CartPole-v1 with SB3's own rollout buffer and with
:class:`sw.adapters.sb3.AcceleratedRolloutBuffer` (GAE on the golden model of
``gae_accel_n8``, bit-exact with the RTL): the learning result of each, per seed.

SB3's PPO defaults (``n_steps=2048``, ``batch_size=64``, 10 epochs, gamma = 0.99,
lambda = 0.95), one environment, torch on one thread. For each run: the mean return of the last
20 episodes, the number of GAE calls and accelerator runs. The figures in
docs/use_from_rl.md come from::

    PYTHONPATH=. python scripts/sb3_cartpole.py --steps 100000 --seeds 0 1
"""

import argparse
import json

import numpy as np
import torch

from sw.console import progress_bar


def run(buffer, seed, steps):
    from stable_baselines3 import PPO

    from sw.adapters.sb3 import AcceleratedRolloutBuffer

    kw = {} if buffer == "sb3" else {"rollout_buffer_class": AcceleratedRolloutBuffer,
                                     "rollout_buffer_kwargs": {"gae": "golden"}}
    model = PPO("MlpPolicy", "CartPole-v1", seed=seed, device="cpu", **kw)
    model.learn(steps)
    returns = [e["r"] for e in model.ep_info_buffer][-20:]
    out = {"buffer": buffer, "seed": seed, "steps": steps,
           "mean_return_last_20": float(np.mean(returns))}
    if buffer != "sb3":
        out["accelerator_runs"] = model.rollout_buffer.accelerator_runs
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--buffers", nargs="+", choices=("sb3", "accelerator"),
                    default=["sb3", "accelerator"])
    args = ap.parse_args(argv)
    if args.steps < 2048:
        ap.error(f"--steps must be at least 2048 (one rollout), not {args.steps}")
    torch.set_num_threads(1)
    jobs = [(b, s) for s in args.seeds for b in args.buffers]
    for b, s in progress_bar(jobs, desc="PPO runs"):
        print(json.dumps(run(b, s, args.steps)), flush=True)


if __name__ == "__main__":
    main()
