"""Scaling of the distributed DQN (sw.dist) on this machine, and its projection to a cluster.

1. **Measured** (``make dist-scaling``): the system on a local Ray in asynchronous mode with no
   rate limit (``lag=None``: actors and learners run free), golden models of both
   accelerators, for actors 1 and 2, learners 1, 2 and 4, H = 1 and 10. Each configuration
   runs ``--rounds`` averaging rounds; environment steps/s and gradient steps/s (local steps
   of all learners) over the spans in which actors and learners were busy, best of
   ``--repeats`` interleaved repetitions, with the load average at the time. The scaling factor
   is ``thr(L) / (L thr(1))`` at the same actors and H. On a 2-core machine shared with other
   jobs this measures contention as much as the framework: read it as such.
2. **Inputs of the projection**, measured here: a Ray actor call on one node, the drivers' host
   time per learner step and per fused replay run against golden devices that answer at once
   (register accesses and bus bytes counted), the weight server's exact mean, an actor's
   environment steps/s.
3. **Projection** (:mod:`sw.dist.projection`): local steps/s and scaling factor for L = 1..32
   nodes with one FPGA each, H = 1 and 10, with the stated bus and network model.

Writes a two-panel figure (measured, projected) with ``--plot``, everything with ``--json``.
"""

import argparse
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sw.driver.golden_base import Run  # noqa: E402
from sw.learner.device import LearnerGoldenDevice  # noqa: E402
from sw.learner.driver import LearnerDriver  # noqa: E402
from sw.learner.schedule import step_cycles  # noqa: E402
from sw.registry import shipped_config  # noqa: E402
from sw.replay.device import ReplayGoldenDevice  # noqa: E402
from sw.replay.driver import ReplayDriver  # noqa: E402
from sw.replay.spec import ReplayOp, run_cycles  # noqa: E402


def load():
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


# -- devices that answer at once: the host side alone ------------------------------------------
class _Counting:
    """Counts register accesses and bus bytes; with ``instant`` a run does nothing and is done
    at once (the outputs keep what the last real run wrote)."""

    instant = False
    mmio = 0
    bytes = 0

    def count_reset(self):
        self.mmio = 0
        self.bytes = 0

    def _reg_read(self, offset):
        self.mmio += 1
        return super()._reg_read(offset)

    def _reg_write(self, offset, value):
        self.mmio += 1
        return super()._reg_write(offset, value)

    def _mem_read(self, offset, nbytes):
        self.bytes += nbytes
        return super()._mem_read(offset, nbytes)

    def _mem_write(self, offset, data):
        self.bytes += len(data)
        return super()._mem_write(offset, data)

    def _begin(self):
        return Run(length=2) if self.instant else super()._begin()


class InstantLearner(_Counting, LearnerGoldenDevice):
    pass


class InstantReplay(_Counting, ReplayGoldenDevice):
    pass


def _best(fn, n, repeats=5):
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        out.append((time.perf_counter() - t) / n)
    return min(out)


def host_costs(batch=64):
    """Host seconds, register accesses and bus bytes per learner step and per fused replay
    run, the weight bytes, and the server's mean per learner."""
    from sw.dist.weights import mean_raw
    from sw.rl.dqn_common import init_weights

    _, lcfg = shipped_config("learner_cartpole_s4")
    _, rcfg = shipped_config("replay_accel_k16")
    rng = np.random.default_rng(0)
    ldev = InstantLearner(lcfg)
    ldrv = LearnerDriver(ldev, lcfg, on_range="clip")
    ldrv.load_weights(*init_weights(list(lcfg.sizes), rng), target=True)
    obs = rng.normal(0, 0.5, (batch, 4))
    args = (obs, rng.integers(0, 2, batch), np.full(batch, 0.1), obs + 0.01,
            np.zeros(batch, bool))
    ldev.instant = True

    def lstep():
        ldrv.train_step(*args, gamma=0.99, lr=0.01, details=True)

    lstep()
    ldev.count_reset()
    lstep()
    l_mmio, l_bytes = ldev.mmio, ldev.bytes
    t_learner = _best(lstep, 50)
    ldev.count_reset()
    raw = ldrv.read_raw_weights()
    weight_bytes = ldev.bytes

    rdev = InstantReplay(rcfg)
    rdrv = ReplayDriver(rdev, rcfg)
    rdrv.insert(count=4096)
    idx, _, _ = rdrv.sample(batch, 0.4)
    prio = rng.uniform(0.1, 2.0, batch)
    rdev.instant = True

    def rstep():
        # As a bank calls it (sw.dist.replay): priorities computed by the bank, by keyword.
        rdrv.update_and_sample(idx, None, batch, 0.4, priorities=prio)

    rstep()
    rdev.count_reset()
    rstep()
    r_mmio, r_bytes = rdev.mmio, rdev.bytes
    t_replay = _best(rstep, 200)
    nets = [[m + rng.integers(-3, 4, m.shape) for m in raw] for _ in range(4)]
    t_mean = _best(lambda: [mean_raw([n[l] for n in nets]) for l in range(len(raw))], 200) / 4
    return {"host_learner_s": t_learner, "learner_mmio": l_mmio, "learner_bytes": l_bytes,
            "host_replay_s": t_replay, "replay_mmio": r_mmio, "replay_bytes": r_bytes,
            "weight_bytes": weight_bytes, "mean_s_per_learner": t_mean,
            "learner_cycles": step_cycles(lcfg, batch),
            "replay_cycles": run_cycles(rcfg, ReplayOp.UPDATE_SAMPLE, batch, batch),
            "insert_cycles": run_cycles(rcfg, ReplayOp.INSERT_MAX, 16)}


def ray_call_s():
    """Median round trip of a Ray actor call on this node (a 64-transition sample's size),
    and the time to submit one call without waiting (best of 5 bursts of 100)."""
    import ray

    @ray.remote(num_cpus=0)
    class Echo:
        def f(self, x):
            return x

    e = Echo.remote()
    payload = {"obs": np.zeros((64, 4), np.float32), "idx": np.zeros(64, np.int64)}
    ray.get(e.f.remote(payload))
    ts = []
    for _ in range(300):
        t = time.perf_counter()
        ray.get(e.f.remote(payload))
        ts.append(time.perf_counter() - t)
    bursts = []
    for _ in range(5):
        t = time.perf_counter()
        refs = [e.f.remote(None) for _ in range(100)]
        bursts.append((time.perf_counter() - t) / 100)
        ray.get(refs)
    ray.kill(e)
    return float(np.median(ts)), min(bursts)


def actor_rate():
    """Environment steps/s of one actor (vector environment of 1, epsilon-greedy forward)."""
    from sw.dist.actor import EnvActor
    from sw.dist.replay import ReplayBank
    from sw.dist.weights import WeightServer
    from sw.rl.dqn import DQNConfig
    from sw.rl.dqn_common import init_weights

    ws = WeightServer()
    net = init_weights([4, 64, 64, 2], np.random.default_rng(0))
    ws.reset([np.vstack([w, b[None]]) for w, b in zip(*net)])
    bank = ReplayBank(0, "cpu", obs_dim=4, capacity=1 << 16)
    a = EnvActor(0, dqn=DQNConfig(total_steps=10**6), num_envs=1, stride=1, banks=[bank],
                 weight_server=ws)
    a.collect(200, 10**6)
    return 1.0 / _best(lambda: a.collect(500, 10**6), 1, repeats=5) * 500


# -- measured scaling ------------------------------------------------------------------------
def measure(grid, rounds, repeats, progress):
    from sw.dist import DistConfig
    from sw.dist.system import train
    from sw.rl.dqn import DQNConfig

    best = {}
    for rep in range(repeats):
        for A, L, H in grid:
            cfg = DistConfig(actors=A, learners=L, avg_every=H, mode="async", lag=None,
                             dqn=DQNConfig(total_steps=10**7, learning_starts=500))
            res = train(cfg, progress=False, max_rounds=max(2, rounds // H if H > 1 else rounds))
            k = (A, L, H)
            row = {"env_steps_per_s": res.env_steps_per_s,
                   "grad_steps_per_s": res.grad_steps_per_s, "load": load(),
                   "grad_steps": res.grad_steps, "env_steps": res.env_steps}
            if k not in best or row["grad_steps_per_s"] > best[k]["grad_steps_per_s"]:
                best[k] = row
            if progress:
                print(f"  rep {rep} A={A} L={L} H={H}: {row['env_steps_per_s']:8,.0f} env "
                      f"steps/s, {row['grad_steps_per_s']:6,.0f} gradient steps/s "
                      f"(load {row['load']})", flush=True)
    for (A, L, H), row in best.items():
        one = best.get((A, 1, H))
        row["scaling_factor"] = row["grad_steps_per_s"] / (L * one["grad_steps_per_s"]) \
            if one else float("nan")
    return best


def plot(best, proj, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for (A, H), style in {(1, 1): "C0o--", (1, 10): "C0o-", (2, 1): "C1s--",
                          (2, 10): "C1s-"}.items():
        pts = sorted((L, r["scaling_factor"]) for (a_, L, h), r in best.items()
                     if a_ == A and h == H)
        if pts:
            a.plot(*zip(*pts), style, label=f"{A} actor{'s' * (A > 1)}, H={H}")
    a.set_title("measured: this 2-core machine (golden models)", fontsize=10)
    for H, style in ((1, "C2^--"), (10, "C2^-")):
        pts = [(L, sf) for L, h, _, sf in proj if h == H]
        b.plot(*zip(*pts), style, label=f"H={H}")
    b.set_xscale("log", base=2)
    b.set_title("PROJECTION: one FPGA per node (cost model)", fontsize=10)
    for ax in (a, b):
        ax.set_xlabel("learners L")
        ax.set_ylabel("scaling factor thr(L) / (L thr(1))")
        ax.set_ylim(0, 1.1)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=200,
                    help="averaging rounds per measured configuration at H = 1 (H = 10: a "
                         "tenth; default 200)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--skip-measure", action="store_true", help="projection only")
    ap.add_argument("--plot", default=None, metavar="PATH",
                    help="the figure (.png appended unless PATH ends in an image format; a "
                         "directory: dist_scaling.png in it)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    for name in ("rounds", "repeats"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} must be a positive integer, not {getattr(args, name)}")
    if args.plot is not None:
        from sw.rl.plot import plot_path
        try:
            args.plot = plot_path(args.plot, "dist_scaling.png")
        except ValueError as e:
            ap.error(str(e))
    import ray

    from sw.dist.projection import ClusterModel, projection_table, step_cost
    from sw.dist.system import init_ray

    print(f"load average at start: {load()}")
    init_ray(num_cpus=2)
    rpc, submit = ray_call_s()
    host = host_costs()
    rate = actor_rate()
    print(f"Ray actor call on this node: {rpc * 1e6:.0f} us (submitting one: "
          f"{submit * 1e6:.0f} us); one actor: {rate:,.0f} env steps/s")
    for k, v in host.items():
        print(f"  {k}: {v * 1e6:.1f} us" if k.endswith("_s") or k.endswith("_learner")
              else f"  {k}: {v:,}")
    best = {}
    if not args.skip_measure:
        grid = [(A, L, H) for H in (1, 10) for A in (1, 2) for L in (1, 2, 4)]
        print(f"measuring {len(grid)} configurations x {args.repeats} (async, lag None, "
              f"golden models)")
        best = measure(grid, args.rounds, args.repeats, True)
        print("\n| actors | learners | H | env steps/s | gradient steps/s | scaling factor | "
              "load |\n|---|---|---|---|---|---|---|")
        for (A, L, H), r in sorted(best.items(), key=lambda x: (x[0][2], x[0][0], x[0][1])):
            print(f"| {A} | {L} | {H} | {r['env_steps_per_s']:,.0f} | "
                  f"{r['grad_steps_per_s']:,.0f} | {r['scaling_factor']:.2f} | {r['load']} |")
    ray.shutdown()
    model = ClusterModel(rpc_local_s=rpc, submit_s=submit, **host)
    sc = step_cost(model)
    print(f"\nPROJECTION (sw/dist/projection.py), model: {asdict(model)}")
    print(f"one local step: learner {sc.learner * 1e6:.0f} us, replay {sc.replay * 1e6:.0f} us,"
          f" inserts {sc.insert * 1e6:.0f} us, Ray call {sc.rpc * 1e6:.0f} us")
    proj = projection_table(model)
    print("\n| nodes L | H | local steps/s (all) | per learner | scaling factor |\n"
          "|---|---|---|---|---|")
    for L, H, thr, sf in proj:
        print(f"| {L} | {H} | {thr:,.0f} | {thr / L:,.0f} | {sf:.2f} |")
    print(f"\nactors needed per learner, one transition per local step: "
          f"{max(r[2] / r[0] for r in proj) / rate:.2f} (one actor: {rate:,.0f} steps/s)")
    print(f"load average at end: {load()}")
    if args.plot:
        args.plot.parent.mkdir(parents=True, exist_ok=True)
        plot(best, proj, args.plot)
        print(f"wrote {args.plot}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({
            "measured": {f"A{A} L{L} H{H}": r for (A, L, H), r in best.items()},
            "model": asdict(model), "projection": proj, "actor_steps_per_s": rate}, indent=1))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
