"""PAAL's fan-out sweep (Zhang et al., "Parallel Actors and Learners", section VI-D, Fig. 9):
latency of sampling and updating a batch in a K-ary sum tree for K = 2..64, on the CPU and in
the replay accelerator's cycle model (``make repro-paal``).

CPU: the float64 K-ary trees of the replay benchmark (``scripts/bench/cpu_sumtree.py``): the
numba-jitted batched tree (the strongest straightforward CPU code, PERF.md) and the numpy tree
vectorized level by level, plus the tree of the project's CPU buffer
(:class:`sw.replay.sumtree.SumTree`, what :class:`sw.replay.PrioritizedReplayBuffer` uses).
Each contender is timed in one process, interleaved rounds, best of ``--rounds``
(``bench.common.Env.best_of``), at 2^20 leaves of random priorities and a batch of 512.

Hardware: :func:`sw.replay.spec.run_cycles` of a ``SumTreeConfig(fanout=K, capacity=2**20)``
for a SAMPLE and an UPDATE run of 512 (exact for the RTL, asserted by tb/replay): one command
per cycle whatever K (the K children of a node are read in one cycle, compared in parallel),
so K only moves the pipeline latency (``SumTreeConfig.latency``). Converted to microseconds
at the clock of the shipped ``replay_accel_k16`` (:func:`sw.timing.clock_mhz`); 2^20 leaves and
the other K are not shipped (docs/replay.md), so those rows are the cycle model only.
"""

import argparse
import shutil
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from repro.common import (add_output_args, command, load_average, read_csv,  # noqa: E402
                          run_jobs, write_csv, write_section)

FANOUTS = (2, 4, 8, 16, 32, 64)
CAPACITY = 1 << 20
BATCH = 512
BETA = 0.4
ROUNDS = 9
#: The shipped replay accelerator whose clock converts cycles to microseconds.
MODULE = "replay_accel_k16"
CPU = ("numba", "numpy", "sumtree")
COLUMNS = (("fanout", "levels")
           + tuple(f"{c}_{op}_us" for c in CPU for op in ("sample", "update"))
           + ("hw_sample_cycles", "hw_update_cycles", "hw_sample_us", "hw_update_us", "mhz",
              "load"))


def contenders(fanout, capacity, batch, use_numba=True):
    """name -> callable for each CPU tree's sample and update at ``fanout``."""
    from bench.common import numba_or_none
    from bench.cpu_sumtree import make_numba_tree, make_numpy_tree, tree_layout

    from sw.replay.sumtree import SumTree

    rng = np.random.default_rng(fanout)
    prio = rng.random(capacity) + 0.01
    idx_u = rng.integers(0, capacity, batch)
    prio_u = rng.random(batch) + 0.01
    fns = {}
    nt = make_numba_tree(numba_or_none()) if use_numba else None
    if nt is not None:
        build, nsample, nupdate = nt
        offs, depth = tree_layout(capacity, fanout)
        offs = np.concatenate([offs, offs[-1:]])          # offs[depth + 2] for build
        tree = np.zeros(offs[-1])
        tree[offs[depth]:offs[depth] + capacity] = prio
        build(tree, offs, fanout, depth)
        idx, w = np.empty(batch, np.int64), np.empty(batch)
        fns["numba_sample"] = lambda: nsample(tree, offs, fanout, depth, capacity, BETA, idx, w)
        fns["numba_update"] = lambda: nupdate(tree, offs, fanout, depth, idx_u, prio_u)
    np_sample, np_update = make_numpy_tree(capacity, fanout, prio)
    np_rng = np.random.default_rng(1)
    fns["numpy_sample"] = lambda: np_sample(np_rng, batch, BETA)
    fns["numpy_update"] = lambda: np_update(idx_u, prio_u)
    st = SumTree(fanout=fanout, capacity=capacity, seed=1)
    st.update(np.arange(capacity), prio)
    fns["sumtree_sample"] = lambda: st.sample(batch)
    fns["sumtree_update"] = lambda: st.update(idx_u, prio_u)
    for fn in fns.values():                                # compile and check they run
        fn()
    return fns


def hardware(fanout, capacity, batch):
    from sw.replay.spec import ReplayOp, SumTreeConfig, run_cycles
    from sw.timing import clock_mhz

    cfg = SumTreeConfig(fanout=fanout, capacity=capacity)
    mhz, _ = clock_mhz(MODULE)
    s = run_cycles(cfg, ReplayOp.SAMPLE, batch)
    u = run_cycles(cfg, ReplayOp.UPDATE, batch)
    return {"levels": cfg.levels, "hw_sample_cycles": s, "hw_update_cycles": u,
            "hw_sample_us": s / mhz, "hw_update_us": u / mhz, "mhz": mhz}


def run_one(args):
    from bench.common import Env

    fanout, capacity, batch, rounds, use_numba = args
    env = Env(rounds=rounds)
    times = env.best_of(contenders(fanout, capacity, batch, use_numba), desc=f"K={fanout}")
    row = {"fanout": fanout, "load": load_average(), **hardware(fanout, capacity, batch)}
    for c in CPU:
        for op in ("sample", "update"):
            row[f"{c}_{op}_us"] = times.get(f"{c}_{op}", float("nan"))
    return [row], COLUMNS


def plot(rows, capacity, batch, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    k = np.array([int(r["fanout"]) for r in rows])
    col = {c: np.array([float(r[c]) for r in rows]) for c in COLUMNS[2:-1]}
    fig, ax = plt.subplots(figsize=(7.5, 5.2))
    styles = {"numba": "C0", "numpy": "C1", "sumtree": "C2"}
    names = {"numba": "CPU numba tree", "numpy": "CPU numpy tree",
             "sumtree": "CPU sw.replay SumTree"}
    for c, colour in styles.items():
        s, u = col[f"{c}_sample_us"], col[f"{c}_update_us"]
        if np.all(np.isnan(s)):
            continue
        ax.plot(k, s, "o-", color=colour, label=f"{names[c]}: sample")
        ax.plot(k, u, "s--", color=colour, label=f"{names[c]}: update")
        best = k[np.nanargmin(s + u)]
        ax.axvline(best, color=colour, lw=0.6, alpha=0.5)
    ax.plot(k, col["hw_sample_us"], "^-", color="k", label="accelerator model: sample")
    ax.plot(k, col["hw_update_us"], "v--", color="k", label="accelerator model: update")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(k, [str(x) for x in k])
    ax.set_xlabel("fan-out K")
    ax.set_ylabel(f"µs per batch of {batch}")
    mhz = float(rows[0]["mhz"])
    ax.set_title(f"K-ary sum tree, 2^{capacity.bit_length() - 1} leaves: CPU (best of rounds; "
                 f"vertical lines: best K of sample + update)\nvs the replay accelerator's "
                 f"cycle model at {mhz:.0f} MHz", fontsize=9)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.13))
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    plt.close(fig)


def table(rows, args):
    full = args.capacity == CAPACITY and args.batch == BATCH
    size = "full size" if full else "**reduced size**"
    lines = [f"{size}: 2^{args.capacity.bit_length() - 1} leaves, batch {args.batch}, best of "
             f"{args.rounds} interleaved rounds, load average {rows[0]['load']} (first K) to "
             f"{rows[-1]['load']} (last K). {args.command}.", "",
             "| K | levels | numba sample µs | numba update µs | numpy sample µs | "
             "numpy update µs | SumTree sample µs | SumTree update µs | HW sample cycles | "
             "HW update cycles |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        f = {c: float(r[c]) for c in COLUMNS[2:8]}
        lines.append(f"| {r['fanout']} | {r['levels']} | "
                     + " | ".join(f"{f[c]:,.1f}" if np.isfinite(f[c]) else "n/a"
                                  for c in COLUMNS[2:8])
                     + f" | {int(r['hw_sample_cycles']):,} | {int(r['hw_update_cycles']):,} |")
    best = {}
    for c in CPU:
        tot = [float(r[f"{c}_sample_us"]) + float(r[f"{c}_update_us"]) for r in rows]
        if np.any(np.isfinite(tot)):
            best[c] = rows[int(np.nanargmin(tot))]["fanout"]
    lines.append("")
    lines.append("Best K (least sample + update time): "
                 + ", ".join(f"{c} K = {k}" for c, k in best.items())
                 + f"; PAAL: K = 16. Hardware cycles at {float(rows[0]['mhz']):.0f} MHz "
                   f"(`{MODULE}`'s clock).")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fanouts", nargs="+", type=int, default=list(FANOUTS), metavar="K")
    ap.add_argument("--capacity", type=int, default=CAPACITY, help="leaves")
    ap.add_argument("--batch", type=int, default=BATCH)
    ap.add_argument("--rounds", type=int, default=ROUNDS, help="timing rounds (at least 5)")
    ap.add_argument("--no-numba", action="store_true", help="skip the numba tree")
    add_output_args(ap, "paal")
    args = ap.parse_args(argv)
    from sw.replay.spec import SumTreeConfig
    try:
        for k in args.fanouts:
            SumTreeConfig(fanout=k, capacity=args.capacity, max_batch=max(args.batch, 1))
    except ValueError as e:
        ap.error(str(e))
    if args.batch < 1:
        ap.error(f"--batch must be a positive integer, not {args.batch}")
    args.command = command("paal", argv, args.summarize_only)
    out = Path(args.out)
    tag = f"n{args.capacity}_b{args.batch}"
    jobs = [(f"K{k}_{tag}", (k, args.capacity, args.batch, args.rounds, not args.no_numba))
            for k in sorted(args.fanouts)]
    run_jobs(jobs, run_one, out, desc="PAAL K sweep",
             summarize_only=args.summarize_only)
    rows = [read_csv(out / "runs" / f"{n}.csv")[0] for n, _ in jobs
            if (out / "runs" / f"{n}.csv").exists()]
    if not rows:
        print("no finished runs: nothing to summarize")
        return 0
    write_csv(out / "paal.csv", rows, COLUMNS)
    fig = out / "paal.png"
    plot(rows, args.capacity, args.batch, fig)
    text = table(rows, args)
    (out / "paal.md").write_text(text + "\n")
    print(text)
    print(f"wrote {out / 'paal.csv'}, {fig}, {out / 'paal.md'}")
    if args.docs:
        write_section(args.docs, "paal", text)
    if args.docs_figure:
        shutil.copyfile(fig, args.docs_figure)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
