"""Distributed DQN with prioritized replay on Ray: actors, banked replay, local-SGD learners.

Run ``python -m sw.dist.dqn --actors 2 --learners 2 --avg-every 10`` (golden accelerator
models, a local Ray on this machine), or on a cluster with one FPGA per node::

    python -m sw.dist.dqn --address auto --learners 4 --actors 8 \\
        --learner-device xrt:/opt/rlk/learner_kernel_s4.xclbin --replay-device cpu

With ``--learners 1 --learner-device trainer:golden`` the actors feed one fused trainer
(:mod:`sw.dist.trainer`), which holds the replay and runs each round's steps on the card.

Prints the final return, environment steps/s, gradient steps/s and where each component ran;
``--plot`` writes the learning curve, ``--json`` the whole result. See docs/dist.md.
"""

import argparse
import json
import os
import sys
from dataclasses import asdict

__all__ = ["build_parser", "config_from_args", "main"]


def build_parser() -> argparse.ArgumentParser:
    from sw.rl.dqn import DQNConfig

    d = DQNConfig()
    ap = argparse.ArgumentParser(prog="python -m sw.dist.dqn",
                                 description=__doc__.split("\n")[0])
    g = ap.add_argument_group("system")
    g.add_argument("--actors", type=int, default=2, help="actors (default 2)")
    g.add_argument("--envs-per-actor", type=int, default=1,
                   help="environments of each actor's vector environment (default 1)")
    g.add_argument("--learners", type=int, default=2,
                   help="learners, and replay banks (default 2)")
    g.add_argument("--avg-every", type=int, default=10, metavar="H",
                   help="local SGD steps between weight averagings (1: synchronous data "
                        "parallelism; default 10)")
    g.add_argument("--learner-device", default="golden",
                   help="cpu (float32 torch), golden (model of learner_cartpole_s4), "
                        "pynq:BITFILE[:NAME], xrt:XCLBIN[:KERNEL], or the fused trainer, "
                        "trainer:golden|sim|pynq:...|xrt:... (with --learners 1: the actors "
                        "feed one trainer, which holds the replay)")
    g.add_argument("--replay-device", default="golden",
                   help="cpu (sum tree with lazy writing), golden (model of replay_accel_k16), "
                        "pynq:BITFILE[:NAME] or xrt:XCLBIN[:KERNEL]")
    g.add_argument("--mode", choices=("lockstep", "async"), default="lockstep",
                   help="lockstep: reproducible rounds; async: actors and learners overlap")
    g.add_argument("--target-every", type=int, default=None, metavar="ROUNDS",
                   help="averagings between target syncs (default ceil(target_period / H))")
    g.add_argument("--max-restarts", type=int, default=3,
                   help="restarts of a failed actor or learner (default 3)")
    for role in ("actor", "learner", "replay"):
        g.add_argument(f"--{role}-resources", default=None, metavar="R=N,...",
                       help=f"Ray resources of each {role} (e.g. fpga=1); default fpga=1 for a "
                            f"hardware spec" if role != "actor" else
                            "Ray resources of each actor (e.g. CPU=1)")
    g = ap.add_argument_group("DQN")
    g.add_argument("--total-steps", type=int, default=10_000,
                   help="environment steps of all actors (default 10000)")
    g.add_argument("--learning-starts", type=int, default=d.learning_starts,
                   help=f"environment steps before learning (default {d.learning_starts})")
    g.add_argument("--batch", type=int, default=d.batch,
                   help=f"each learner's local batch (default {d.batch})")
    g.add_argument("--lr", type=float, default=d.lr, help=f"learning rate (default {d.lr})")
    g.add_argument("--train-freq", type=int, default=d.train_freq,
                   help=f"environment steps per policy update (default {d.train_freq})")
    g.add_argument("--target-period", type=int, default=d.target_period,
                   help=f"local steps between target syncs, rounded up to whole rounds "
                        f"(default {d.target_period})")
    g.add_argument("--seed", type=int, default=0, help="seed of everything (default 0)")
    g = ap.add_argument_group("Ray")
    g.add_argument("--address", default=None,
                   help="Ray cluster to join (auto, ray://HOST:10001); default: a local Ray")
    g.add_argument("--num-cpus", type=int, default=2, help="CPUs of a local Ray (default 2)")
    g.add_argument("--node-resources", default=None, metavar="R=N,...",
                   help="custom resources of a local Ray, e.g. fpga=1 on a machine with a card")
    g.add_argument("--ship-code", action="store_true",
                   help="upload this checkout's sw package to the cluster's workers")
    g = ap.add_argument_group("output")
    g.add_argument("--plot", default=None, metavar="PATH",
                   help="learning curve (an image: .png appended unless PATH ends in an image "
                        "format such as .png, .pdf or .svg; a directory: dist_dqn.png in it)")
    g.add_argument("--json", default=None, help="the result as JSON")
    g.add_argument("--quiet", action="store_true", help="no progress bar")
    return ap


def config_from_args(args):
    """The :class:`~sw.dist.config.DistConfig` of parsed arguments (``ValueError`` naming the
    bad one)."""
    from sw.rl.dqn import DQNConfig

    from .config import DistConfig

    dqn = DQNConfig(total_steps=args.total_steps, learning_starts=args.learning_starts,
                    batch=args.batch, lr=args.lr, train_freq=args.train_freq,
                    target_period=args.target_period, seed=args.seed)
    return DistConfig(actors=args.actors, envs_per_actor=args.envs_per_actor,
                      learners=args.learners, avg_every=args.avg_every,
                      learner_device=args.learner_device, replay_device=args.replay_device,
                      mode=args.mode, target_every=args.target_every,
                      max_restarts=args.max_restarts, actor_resources=args.actor_resources,
                      learner_resources=args.learner_resources,
                      replay_resources=args.replay_resources, dqn=dqn)


def _option(ap, message: str) -> str:
    """The message prefixed with the option it names (``--avg-every: avg_every must ...``)."""
    first = message.split(" ", 1)[0].rstrip(",").replace("dqn.", "")
    opt = "--" + first.replace("_", "-")
    known = {o for a in ap._actions for o in a.option_strings}
    return f"{opt}: {message}" if opt in known else message


def report(res, file=sys.stdout):
    """Print what a run measured (and the load average, since the machine is shared)."""
    p = lambda *a: print(*a, file=file)  # noqa: E731
    p(f"{res.name}: mean return of the last 20 episodes {res.mean_return():.1f} "
      f"({len(res.episodes)} episodes)")
    p(f"  {res.env_steps} environment steps, {res.rounds} averaging rounds, "
      f"{res.policy_updates} policy updates ({res.grad_steps} local steps of all learners), "
      f"{res.seconds:.1f} s")
    p(f"  environment steps/s {res.env_steps_per_s:,.0f} (actors busy {res.actor_seconds:.1f} s)"
      f", gradient steps/s {res.grad_steps_per_s:,.0f} (learners busy "
      f"{res.learner_seconds:.1f} s)")
    if res.learner_cycles:
        p(f"  accelerator cycles: learners {res.learner_cycles:,}, replay banks "
          f"{res.replay_cycles:,} ({res.learner_cycles / max(res.grad_steps, 1):,.0f} learner "
          f"cycles per local step)")
    if res.restarts:
        p("  restarted: " + ", ".join(f"{k} x{v}" for k, v in res.restarts.items()))
    for role, items in res.placement.items():
        p(f"  {role}: " + "; ".join(f"{x.get('label', role)} on {x['node']}" for x in items))
    p(f"  load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def main(argv=None):
    ap = build_parser()
    args = ap.parse_args(argv)
    try:
        cfg = config_from_args(args)
        from .config import parse_resources
        node_res = parse_resources("--node-resources", args.node_resources)
    except ValueError as e:
        ap.error(_option(ap, str(e)))
    if args.address is not None and (node_res or args.num_cpus != 2):
        ap.error("--num-cpus and --node-resources describe a local Ray; a cluster's nodes "
                 "declare theirs with `ray start`")
    if args.address is None:        # a local Ray opens the devices here: their files exist
        from sw.rl.devices import check_files
        specs = {"--learner-device": cfg.learner_device}
        if not cfg.fused:
            specs["--replay-device"] = cfg.replay_device
        for opt, spec in specs.items():
            try:
                if spec != "cpu":
                    check_files(spec)
            except ValueError as e:
                ap.error(f"{opt}: {e}")
    if args.plot is not None:
        from sw.rl.plot import plot_path
        try:
            args.plot = plot_path(args.plot, "dist_dqn.png")
        except ValueError as e:
            ap.error(str(e))
    try:
        import ray
    except ImportError:
        ap.exit(2, "error: Ray is not installed: pip install -e '.[dist]' (make installs it)\n")
    from .system import DeviceOpenError, DistError, init_ray, train

    started = not ray.is_initialized()
    try:
        init_ray(args.address, num_cpus=args.num_cpus, resources=node_res,
                 ship_code=args.ship_code)
        res = train(cfg, progress=not args.quiet)
    except DeviceOpenError as e:            # a device spec that its node could not open
        ap.exit(2, f"error: {e}\n")
    except DistError as e:
        ap.exit(1, f"error: {e}\n")
    except ConnectionError as e:
        ap.exit(1, f"error: cannot reach the Ray cluster at {args.address!r}: {e}\n")
    finally:
        if started and ray.is_initialized():
            ray.shutdown()
    report(res)
    if args.plot:
        from sw.rl.plot import plot_returns
        args.plot.parent.mkdir(parents=True, exist_ok=True)
        plot_returns([res], args.plot, title=f"DQN + PER on Ray, {cfg.dqn.env_id}",
                     legend="upper left")
        print(f"wrote {args.plot}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(asdict(res), f, indent=1, default=str)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
