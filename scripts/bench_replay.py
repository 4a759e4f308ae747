#!/usr/bin/env python3
"""Benchmark the CPU prioritized replay buffer against cpprb, and sum-tree sampling against K.

Usage::

    .venv/bin/python scripts/bench_replay.py                 # N = 2**20, batches 32/256/4096
    .venv/bin/python scripts/bench_replay.py --quick         # smaller, for a smoke run

Part 1 fills :class:`sw.replay.PrioritizedReplayBuffer` (float64 tree, K=16; and its bit-exact
fixed-point backend) and cpprb's ``PrioritizedReplayBuffer`` (C++ binary segment tree) with the
same N transitions and times ``sample`` (indices, weights and data) and ``update`` for each batch
size; ratios compare them within the same run. cpprb is optional (``pip install cpprb``):
without it part 1 times our buffers alone.

Part 2 times the golden :class:`sw.replay.sumtree.SumTree` descent alone for each fanout K:
``batch 1`` is the per-call latency of one sample (dominated by numpy call overhead per level,
so it falls with fewer levels), the larger batches the cost per sample when vectorised (PAAL
Sec. IV-C.5 and VI-D: a trade-off between levels and K reads per level).

Part 3 projects the replay accelerator (``rtl_gen.replay.accelerator``, K=16 at the same N): its
exact cycle counts (:func:`sw.replay.spec.run_cycles`, asserted against the RTL by
tb/replay/test_accelerator_rtl.py) at ``min(300 MHz, estimated Fmax)`` of ``replay_accel_k16``
(:func:`sw.timing.clock_mhz`, ``make timing``), against the CPU times measured in the same run.
That is kernel time with the batch already in the on-chip buffers: the driver's register
accesses and buffer transfers over AXI are not included.

Figures are medians over ``--repeats`` rounds; each round calls every contender once, so load
from other processes affects them alike and the ratios stay meaningful on a shared machine.
Nothing here is asserted: wall-clock time belongs to benchmarks, not tests.
"""

import argparse
import platform
import time

import numpy as np

from sw import timing
from sw.console import progress_bar
from sw.replay import PrioritizedReplayBuffer
from sw.replay import spec as replay_spec
from sw.replay.spec import ReplayOp, SumTreeConfig
from sw.replay.sumtree import SumTree

FIELDS = {"obs": ((4,), np.float32), "act": ((), np.int64), "rew": ((), np.float32),
          "next_obs": ((4,), np.float32), "done": ((), np.float32)}


def _transitions(rng, n):
    return {"obs": rng.random((n, 4), dtype=np.float32), "act": rng.integers(0, 2, n),
            "rew": rng.random(n, dtype=np.float32),
            "next_obs": rng.random((n, 4), dtype=np.float32),
            "done": (rng.random(n) < 0.01).astype(np.float32)}


def _interleaved_medians(fns, repeats, desc):
    """Median time of each callable in ``fns`` (dict), timed in rounds that call each once, so
    that background load varying over time affects all of them alike."""
    times = {name: [] for name in fns}
    for _ in progress_bar(range(repeats), desc=desc, leave=False):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {name: float(np.median(t)) for name, t in times.items()}


class _Ours:
    name = "ours"

    def __init__(self, capacity, seed):
        self.buf = PrioritizedReplayBuffer(capacity, fields=FIELDS, alpha=0.6, fanout=16,
                                           seed=seed)

    def add(self, rows):
        self.buf.add(rows)

    def sample(self, batch):
        idx, w, data = self.buf.sample(batch, beta=0.4)
        return idx

    def update(self, idx, pri):
        self.buf.update(idx, pri)


class _OursFixed(_Ours):
    name = "ours, fixed point"

    def __init__(self, capacity, seed):
        cfg = SumTreeConfig(fanout=16, capacity=capacity, priority_width=32, priority_frac=16)
        self.buf = PrioritizedReplayBuffer(capacity, fields=FIELDS, alpha=0.6, fanout=16,
                                           seed=seed, fixed_point=cfg)


class _Cpprb:
    name = "cpprb"

    def __init__(self, capacity, seed):
        import cpprb
        np.random.seed(seed)                            # cpprb draws from numpy's global RNG
        env = {"obs": {"shape": 4}, "act": {"dtype": np.int64}, "rew": {}, "next_obs":
               {"shape": 4}, "done": {}}
        self.buf = cpprb.PrioritizedReplayBuffer(capacity, env, alpha=0.6)

    def add(self, rows):
        self.buf.add(**rows)

    def sample(self, batch):
        return self.buf.sample(batch, beta=0.4)["indexes"]

    def update(self, idx, pri):
        self.buf.update_priorities(idx, pri)


def bench_buffers(capacity, batches, repeats, seed):
    rng = np.random.default_rng(seed)
    impls = [_Ours(capacity, seed)]
    if capacity <= 1 << 20:
        impls.append(_OursFixed(capacity, seed))
    try:
        impls.append(_Cpprb(capacity, seed))
    except ImportError:
        print("cpprb is not installed (pip install cpprb): timing our buffer alone")
    chunk = 1 << 16
    with progress_bar(total=capacity * len(impls), desc="fill", unit="tr", leave=False) as bar:
        for start in range(0, capacity, chunk):
            rows = _transitions(rng, min(chunk, capacity - start))
            for impl in impls:
                impl.add(rows)
                bar.update(len(rows["act"]))
    results = {}
    for batch in batches:
        pri = rng.random(batch) + 1e-3
        idx = {impl.name: impl.sample(batch) for impl in impls}
        samples = _interleaved_medians(
            {impl.name: (lambda impl=impl: impl.sample(batch)) for impl in impls},
            repeats, f"sample B={batch}")
        updates = _interleaved_medians(
            {impl.name: (lambda impl=impl: impl.update(idx[impl.name], pri)) for impl in impls},
            repeats, f"update B={batch}")
        for impl in impls:
            results[batch, impl.name] = samples[impl.name], updates[impl.name]
    print(f"\nReplay buffer, N = {capacity}, median of {repeats} calls, us per call; "
          f"x cpprb = our time / cpprb's time (< 1: ours is faster)")
    has_ref = any(impl.name == "cpprb" for impl in impls)
    head = f"{'batch':>6} {'buffer':<18} | {'sample':>9} {'x cpprb':>8} | " \
           f"{'update':>9} {'x cpprb':>8}"
    print(head)
    print("-" * len(head))
    for batch in batches:
        for impl in impls:
            s_t, u_t = results[batch, impl.name]
            if has_ref:
                s_c, u_c = results[batch, "cpprb"]
                rs, ru = f"{s_t / s_c:>8.2f}", f"{u_t / u_c:>8.2f}"
            else:
                rs = ru = f"{'-':>8}"
            print(f"{batch:>6} {impl.name:<18} | {s_t * 1e6:>9.1f} {rs} | {u_t * 1e6:>9.1f} {ru}")
    return results


def bench_fanout(capacity, fanouts, batches, repeats, seed):
    rng = np.random.default_rng(seed)
    pri = rng.random(capacity)
    trees = {}
    for k in progress_bar(fanouts, desc="build trees", leave=False):
        trees[k] = SumTree(fanout=k, capacity=capacity)
        trees[k].update(np.arange(capacity), pri)
    results = {}
    for batch in batches:
        x = rng.random(batch)
        fns = {k: (lambda t=t: t.sample_fractions(x)) for k, t in trees.items()}
        times = _interleaved_medians(fns, repeats, f"descent B={batch}")
        for k in fanouts:
            results[k, batch] = times[k], trees[k].n_levels
    print(f"\nSum tree descent vs fanout K, N = {capacity} (float64, median of {repeats})")
    head = f"{'K':>3} {'levels':>6} | " + " ".join(
        f"{'B=' + str(b) + ' us/call' if b == 1 else 'B=' + str(b) + ' ns/sample':>18}"
        for b in batches)
    print(head)
    print("-" * len(head))
    for k in fanouts:
        cells = []
        for b in batches:
            t, levels = results[k, b]
            cells.append(f"{t * 1e6:>18.1f}" if b == 1 else f"{t / b * 1e9:>18.1f}")
        print(f"{k:>3} {results[k, batches[0]][1]:>6} | " + " ".join(cells))
    for b in batches:
        best = min(fanouts, key=lambda k: results[k, b][0])
        print(f"fastest K for batch {b}: {best}")
    return results


def bench_rtl(capacity, batches, cpu, clock_hz=None, fanout=16):
    """Projected accelerator times (exact cycles at ``clock_hz``, by default the clock
    :func:`sw.timing.clock_mhz` quotes for ``replay_accel_k16``) and their ratios to the CPU
    times of :func:`bench_buffers` (``cpu[batch, name] = (sample_s, update_s)``)."""
    label = "given"
    if clock_hz is None:
        mhz, label = timing.clock_mhz("replay_accel_k16")
        clock_hz = mhz * 1e6
    cfg = SumTreeConfig(fanout=fanout, capacity=capacity, max_batch=max(batches))
    L = cfg.latency
    names = sorted({name for _, name in cpu})
    print(f"\nReplay accelerator (RTL), K = {fanout}, N = {capacity} ({cfg.levels} levels, tree "
          f"latency {L}), exact cycles at {clock_hz / 1e6:.0f} MHz ({label}), kernel only; "
          f"speed-up = CPU time / accelerator time")
    head = f"{'batch':>6} {'run':<22} | {'cycles':>7} {'us':>8} | " + " ".join(
        f"{'vs ' + n:>20}" for n in names)
    print(head)
    print("-" * len(head))
    out = {}
    for b in batches:
        rows = [("sample (PRNG)", ReplayOp.SAMPLE, {}, 0),
                ("update", ReplayOp.UPDATE, {}, 1),
                ("update+sample strict", ReplayOp.UPDATE_SAMPLE, {"update_size": b}, None),
                ("update+sample relaxed", ReplayOp.UPDATE_SAMPLE,
                 {"update_size": b, "relaxed": True}, None)]
        for label, op, kw, which in rows:
            cyc = replay_spec.run_cycles(cfg, op, b, **kw)
            t = cyc / clock_hz
            cells = []
            for n in names:
                s_t, u_t = cpu[b, n]
                ref = (s_t, u_t)[which] if which is not None else s_t + u_t
                cells.append(f"{ref / t:>19.0f}x")
            out[b, label] = cyc, t
            print(f"{b:>6} {label:<22} | {cyc:>7} {t * 1e6:>8.2f} | " + " ".join(cells))
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--capacity", type=int, default=1 << 20)
    p.add_argument("--batches", type=int, nargs="+", default=[32, 256, 4096])
    p.add_argument("--fanouts", type=int, nargs="+", default=[2, 4, 8, 16, 32, 64])
    p.add_argument("--repeats", type=int, default=50)
    p.add_argument("--seed", type=int, default=20261122)
    p.add_argument("--quick", action="store_true", help="N = 2**16, 10 repeats")
    args = p.parse_args(argv)
    if args.quick:
        args.capacity, args.repeats = 1 << 16, 10
    print(f"numpy {np.__version__}, Python {platform.python_version()}, {platform.machine()}")
    cpu = bench_buffers(args.capacity, args.batches, args.repeats, args.seed)
    bench_rtl(args.capacity, args.batches, cpu)
    bench_fanout(args.capacity, args.fanouts, [1] + args.batches, args.repeats, args.seed)


if __name__ == "__main__":
    main()
