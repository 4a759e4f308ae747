#!/usr/bin/env python3
"""End-to-end benchmark: every accelerator against the strongest CPU code, host and bus included.

For each block and shape a row: the CPU baseline (numba, numpy, torch, cpprb, timed in this
process, interleaved rounds, best of at least 5), and the accelerator's time as ``host_us`` (the
driver's own host code on this CPU, against a device stub that answers at once), ``bus_us``
(bytes moved and transfers through a stated bus model) and ``kernel_us`` (exact cycles of the
cycle model at ``min(300 MHz, the estimated Fmax)``, ``sw.timing.clock_mhz``), their total
and ``speedup = baseline_us / total_us``. The rows come from every module of ``scripts/bench/``
that has ``rows(quick, env)`` (``scripts/bench/common.py``: the row format, the timing helpers,
the bus models). The assumptions and the load average are printed with the table and written
beside the rows.

Usage::

    python scripts/bench_e2e.py                  # every block, build/bench_e2e.json
    python scripts/bench_e2e.py --quick          # under a minute
    python scripts/bench_e2e.py --only gae --json build/gae.json
"""

import argparse
import importlib
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

# One thread for every CPU baseline (numpy's BLAS, torch): the machines are shared 2-core VMs
# where a threaded BLAS is 10-60x slower under load, and the accelerators are compared with
# one host core. Set before numpy is imported.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from bench.common import ROW_KEYS, Env, load_average  # noqa: E402


def bench_modules(only=None) -> dict:
    """Name -> module of every ``scripts/bench/*.py`` with a ``rows`` function."""
    out = {}
    for path in sorted((HERE / "bench").glob("*.py")):
        name = path.stem
        if name.startswith("_") or name == "common" or (only and name not in only):
            continue
        module = importlib.import_module(f"bench.{name}")
        if callable(getattr(module, "rows", None)):
            out[name] = module
    return out


def _fmt(x):
    if x is None:
        return "-"
    if isinstance(x, float):
        if x != x or x in (float("inf"), float("-inf")):
            return str(x)
        return f"{x:,.3f}" if abs(x) < 10 else f"{x:,.1f}"
    return str(x)


def format_table(rows) -> str:
    """The rows as a Markdown table (what the docs quote)."""
    head = "| " + " | ".join(ROW_KEYS) + " |"
    sep = "|" + "|".join("---" if k in ROW_KEYS[:4] else "---:" for k in ROW_KEYS) + "|"
    lines = [head, sep]
    for r in rows:
        cells = [_fmt(r[k]) for k in ROW_KEYS]
        if r["speedup"] is not None:
            cells[-1] = f"{r['speedup']:.3g}x"
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


#: The project's goal for every driver call: host time at most this share of the modeled device
#: time. Read as bus + kernel (what the host waits for besides its own code: the bus model's
#: transfers, register accesses and launch, the kernel's copies and run); the share of the
#: kernel time alone is printed beside it.
HOST_SHARE_GOAL = 0.25


def host_shares(rows) -> list:
    """``(block, module, shape, host / (bus + kernel), host / kernel, met)`` of every row the
    accelerator ran (refused rows have no times); ``met``: the first share at most
    :data:`HOST_SHARE_GOAL`."""
    out = []
    for r in rows:
        if r["host_us"] is None:
            continue
        device, kernel = r["bus_us"] + r["kernel_us"], r["kernel_us"]
        share = r["host_us"] / device if device > 0 else math.inf
        label = r["config"].split(" (")[0].split(", ")[0]   # "gae_kernel_n8 streamed: ..."
        out.append((r["block"], label, r["shape"], share,
                    r["host_us"] / kernel if kernel > 0 else math.inf,
                    share <= HOST_SHARE_GOAL))
    return out


def format_shares(shares) -> str:
    lines = ["| block | module | shape | host / (bus + kernel) | host / kernel | "
             f"<= {HOST_SHARE_GOAL:.0%} of bus + kernel |", "|---|---|---|---:|---:|---|"]
    for block, module, shape, share, of_kernel, met in shares:
        lines.append(f"| {block} | {module} | {shape} | {share:.0%} | {of_kernel:.0%} | "
                     f"{'met' if met else 'not met'} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer rounds; finishes in < 60 s")
    ap.add_argument("--only", nargs="+", metavar="BLOCK",
                    help="only these modules of scripts/bench/ (e.g. gae replay)")
    ap.add_argument("--rounds", type=int, default=None,
                    help="rounds of the interleaved timing (at least 5)")
    ap.add_argument("--json", default=str(HERE.parent / "build" / "bench_e2e.json"),
                    help="where to write the rows (default build/bench_e2e.json)")
    args = ap.parse_args(argv)

    env = Env(quick=args.quick, rounds=args.rounds)
    env.note("CPU", f"baselines and host code on one thread of this machine "
             f"({platform.machine()}, {os.cpu_count()} cores shared with other jobs); "
             f"device stub: sw.driver.stub.InstantDevice (runs end at once, no simulation)")
    start_load = load_average()
    t0 = time.perf_counter()
    print(f"bench_e2e: Python {platform.python_version()}, {platform.machine()}, "
          f"{platform.processor() or 'cpu'}; numba "
          f"{env.numba.__version__ if env.numba else 'not installed'}; "
          f"load average {start_load}")
    rows = []
    for name, module in bench_modules(args.only).items():
        got = module.rows(args.quick, env)
        for r in got:
            missing = set(ROW_KEYS) - set(r)
            if missing or set(r) - set(ROW_KEYS):
                raise ValueError(f"scripts/bench/{name}.py: a row's keys must be {ROW_KEYS}, "
                                 f"not {sorted(r)}")
        rows += got
    end_load = load_average()
    print()
    print(format_table(rows))
    shares = host_shares(rows)
    print(f"\nHost time against the modeled device time (the goal: at most "
          f"{HOST_SHARE_GOAL:.0%}; device = bus + kernel, kernel alone beside it):\n")
    print(format_shares(shares))
    print("\nAssumptions:")
    for key, text in env.assumptions.items():
        print(f"* {key}: {text}")
    print(f"\nload average at start {start_load}, at end {end_load}; "
          f"{time.perf_counter() - t0:.0f} s")
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps([{k: r[k] for k in ROW_KEYS} for r in rows], indent=1) + "\n")
    meta = {"load_average": {"start": start_load, "end": end_load},
            "assumptions": env.assumptions, "quick": args.quick, "rounds": env.rounds,
            "host_share": [{"block": b, "module": m, "shape": sh, "share": x,
                            "share_of_kernel": k, "met": ok}
                           for b, m, sh, x, k, ok in shares]}
    out.with_suffix(".meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(f"wrote {out} and {out.with_suffix('.meta.json').name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
