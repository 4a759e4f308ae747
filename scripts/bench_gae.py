#!/usr/bin/env python3
"""GAE on the CPU vs the GAE accelerator's cycle count at its estimated clock, in one run.

Baselines, each timed on the same rollout (default 64 trajectories x 1024 steps, HEPPO's shape):

* ``python``: a per-element Python loop, one trajectory at a time (what HEPPO §V-D3 measured);
* ``numpy``: the loop over time of Stable-Baselines3's ``compute_returns_and_advantage``,
  vectorised over environments;
* ``torch``: CleanRL's ``ppo.py`` loop with CPU tensors;
* ``golden``: this project's bit-exact fixed-point model (for reference, not a baseline).

The accelerator's time is its cycle count for the run, ``sw.gae.spec.run_cycles`` (the tests
assert that the RTL takes exactly these cycles), at ``min(300 MHz, estimated Fmax)`` of the
shipped GAE accelerators (:func:`sw.timing.clock_mhz`, ``make timing``; ``--clock-mhz``
overrides); it is compute only, with the data already in the on-chip stack memory, as in
HEPPO's SoC flow. Ratios are baseline time / accelerator time.

Usage: ``python scripts/bench_gae.py [--steps 1024] [--envs 64] [--repeat 5]``
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sw import registry, timing  # noqa: E402
from sw.gae import spec as gae_spec
from sw.gae.golden import gae_fixed, quantize_coefs  # noqa: E402
from sw.gae.spec import GaeCoreConfig, GaePeConfig  # noqa: E402

GAMMA, LAM = 0.99, 0.95


def gae_python(rewards, values, dones, last_values):
    T, N = len(rewards), len(rewards[0])
    adv = [[0.0] * N for _ in range(T)]
    for j in range(N):
        last = 0.0
        next_value = last_values[j]
        for t in range(T - 1, -1, -1):
            nonterminal = 0.0 if dones[t][j] else 1.0
            delta = rewards[t][j] + GAMMA * next_value * nonterminal - values[t][j]
            last = delta + GAMMA * LAM * nonterminal * last
            adv[t][j] = last
            next_value = values[t][j]
    return adv


def gae_numpy(rewards, values, dones, last_values):
    """Stable-Baselines3 RolloutBuffer.compute_returns_and_advantage (dones -> episode starts)."""
    T = rewards.shape[0]
    advantages = np.zeros_like(rewards)
    last_gae_lam = 0
    for step in reversed(range(T)):
        if step == T - 1:
            next_non_terminal = 1.0 - dones[step]
            next_values = last_values
        else:
            next_non_terminal = 1.0 - dones[step]
            next_values = values[step + 1]
        delta = rewards[step] + GAMMA * next_values * next_non_terminal - values[step]
        last_gae_lam = delta + GAMMA * LAM * next_non_terminal * last_gae_lam
        advantages[step] = last_gae_lam
    return advantages, advantages + values


def gae_torch(rewards, values, dones, last_values):
    import torch

    with torch.no_grad():
        num_steps = rewards.shape[0]
        advantages = torch.zeros_like(rewards)
        lastgaelam = 0
        for t in reversed(range(num_steps)):
            nextnonterminal = 1.0 - dones[t]
            nextvalues = last_values if t == num_steps - 1 else values[t + 1]
            delta = rewards[t] + GAMMA * nextvalues * nextnonterminal - values[t]
            advantages[t] = lastgaelam = delta + GAMMA * LAM * nextnonterminal * lastgaelam
        return advantages, advantages + values


def best_time(fn, repeat, label):
    times = []
    for _ in tqdm(range(repeat), desc=label, leave=False):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=1024)
    ap.add_argument("--envs", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--clock-mhz", type=float, default=None,
                    help="kernel clock (default: the lowest sw.timing.clock_mhz of the shipped "
                         "GAE accelerators)")
    args = ap.parse_args(argv)
    if args.clock_mhz is None:
        args.clock_mhz, clock_label = min(
            timing.clock_mhz(m) for m in registry.shipped_modules(family="gae",
                                                                  role="accelerator"))
    elif args.clock_mhz <= 0:
        ap.error(f"--clock-mhz must be positive, not {args.clock_mhz}")
    else:
        clock_label = "given"
    T, N = args.steps, args.envs

    rng = np.random.default_rng(0)
    rewards = rng.normal(size=(T, N))
    values = rng.normal(size=(T, N))
    dones = (rng.random((T, N)) < 0.01).astype(np.float64)
    last_values = rng.normal(size=N)

    results = {}
    lists = (rewards.tolist(), values.tolist(), dones.astype(bool).tolist(), last_values.tolist())
    results["python (per element)"] = best_time(lambda: gae_python(*lists), max(1, args.repeat // 2),
                                                "python")
    results["numpy (SB3 loop)"] = best_time(
        lambda: gae_numpy(rewards, values, dones, last_values), args.repeat, "numpy")
    try:
        import torch
        tt = [torch.as_tensor(x, dtype=torch.float32) for x in (rewards, values, dones,
                                                                 last_values)]
        results["torch CPU (CleanRL loop)"] = best_time(lambda: gae_torch(*tt), args.repeat,
                                                        "torch")
    except ImportError:
        print("torch not installed: skipping the CleanRL baseline")
    pe = GaePeConfig()
    f = pe.data_format
    q = (f.quantize(rewards), f.quantize(values), dones.astype(bool), f.quantize(last_values))
    g, gl = quantize_coefs(GAMMA, LAM, pe)
    results["golden model (bit-exact numpy)"] = best_time(lambda: gae_fixed(*q, g, gl, pe),
                                                          args.repeat, "golden")

    print(f"\nGAE on {N} trajectories x {T} steps ({N * T} elements), gamma={GAMMA}, "
          f"lambda={LAM}; best of {args.repeat} runs each\n")
    print(f"{'implementation':34s} {'time':>12s} {'Melem/s':>10s}")
    for name, sec in results.items():
        print(f"{name:34s} {sec * 1e3:10.3f} ms {N * T / sec / 1e6:10.3f}")

    print(f"\nAccelerator at {args.clock_mhz:.0f} MHz ({clock_label}) (cycles of "
          f"sw.gae.spec.run_cycles, k=2 lookahead PEs, data already on chip):")
    header = f"{'PEs':>5s} {'cycles':>9s} {'time':>10s} {'elem/cycle':>11s}"
    header += "".join(f" {'vs ' + name.split(' ')[0]:>12s}" for name in results)
    print(header)
    for n_pe in (8, 16, 64):
        if n_pe > N:
            continue
        cfg = GaeCoreConfig(n_pe=n_pe, max_trajectories=N, capacity=T)
        cycles = gae_spec.run_cycles(cfg, T, N)
        sec = cycles / (args.clock_mhz * 1e6)
        row = f"{n_pe:5d} {cycles:9d} {sec * 1e6:8.2f} us {N * T / cycles:11.3f}"
        row += "".join(f" {base / sec:11.0f}x" for base in results.values())
        print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
