"""CartPole learning curves of the distributed DQN (sw.dist): 1 vs 2 learners, H = 1 vs 10,
golden accelerator models vs the CPU (``make dist-curves``).

Every configuration runs in lockstep (reproducible for a seed) on a local Ray with 2 actors;
the hyper-parameters are those of the learning test (tb/dist/test_system.py) over a longer
run. Prints each run's final return, wall time and throughput with the load average, and
writes one figure (``--plot``) with a curve per configuration.
"""

import argparse
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

#: (learners, H, learner device, replay device)
CONFIGS = [
    (1, 1, "golden", "golden"),
    (2, 1, "golden", "golden"),
    (2, 10, "golden", "golden"),
    (2, 10, "cpu", "cpu"),
]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--total-steps", type=int, default=10_000)
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--plot", default=None, metavar="PATH",
                    help="the figure (.png appended unless PATH ends in an image format; a "
                         "directory: dist_curves.png in it)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    from sw.dist import DistConfig
    from sw.dist.system import init_ray, train
    from sw.rl.dqn import DQNConfig
    from sw.rl.plot import plot_path, plot_returns

    if args.plot is not None:
        try:
            args.plot = plot_path(args.plot, "dist_curves.png")
        except ValueError as e:
            ap.error(str(e))

    try:
        dqns = [DQNConfig(total_steps=args.total_steps, learning_starts=500, target_period=100,
                          seed=s) for s in range(args.seeds)]
    except ValueError as e:
        ap.error(str(e))
    if args.seeds < 1:
        ap.error(f"--seeds must be a positive integer, not {args.seeds}")
    init_ray(num_cpus=2)
    results = []
    for learners, H, ldev, rdev in CONFIGS:
        for dqn in dqns:
            cfg = DistConfig(actors=2, learners=learners, avg_every=H, learner_device=ldev,
                             replay_device=rdev, dqn=dqn)
            res = train(cfg)
            res.name = (f"{learners} learner{'s' * (learners > 1)}, H={H}, "
                        + ("golden accelerators" if ldev == "golden" else "CPU (torch, sum tree)"))
            results.append(res)
            load = " ".join(f"{x:.2f}" for x in os.getloadavg())
            print(f"{res.name}, seed {dqn.seed}: final return {res.mean_return(20):.1f} (last 10 "
                  f"{res.mean_return(10):.1f}), {res.seconds:.0f} s, {res.grad_steps_per_s:,.0f} "
                  f"gradient steps/s, load {load}", flush=True)
    if args.plot:
        args.plot.parent.mkdir(parents=True, exist_ok=True)
        plot_returns(results, args.plot, title="DQN + PER on Ray, CartPole-v1 (2 actors, "
                     "lockstep)", legend="upper left")
        print(f"wrote {args.plot}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps([asdict(r) for r in results], default=str))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
