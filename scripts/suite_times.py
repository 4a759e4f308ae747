#!/usr/bin/env python3
"""Where `make test`'s time goes: per tier, per folder and the slowest tests, from the JUnit
report `make test` writes (build/test-report.xml).

Times are the tests' own (call + setup + teardown, as pytest reports them), summed over both
workers, so they add up to about twice the wall time on 2 workers. The tier of a test is its
marker: `slow` (the thorough tier: cocotb + Verilator, the learning tests) or neither (the fast
tier), asked of pytest with --collect-only.

    .venv/bin/python scripts/suite_times.py                 # after make test
    .venv/bin/python scripts/suite_times.py --top 15 --json build/suite_times.json
"""

import argparse
import collections
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_REPORT = REPO / "build" / "test-report.xml"


def read_report(path) -> dict:
    """``{node id: seconds}`` of a JUnit XML report written by pytest."""
    times = {}
    for tc in ET.parse(path).iter("testcase"):
        cls, name = tc.get("classname", ""), tc.get("name", "")
        parts = cls.split(".")
        # pytest writes classname "tb.gae.test_x" (or "tb.gae.test_x.Class") for tb/gae/test_x.py
        i = next((k for k, p in enumerate(parts) if p.startswith("test_")), len(parts) - 1)
        node = "/".join(parts[:i + 1]) + ".py::" + "::".join(parts[i + 1:] + [name])
        times[node] = times.get(node, 0.0) + float(tc.get("time") or 0.0)
    return times


def slow_ids(python=sys.executable) -> set:
    """Node ids of the tests marked ``slow`` and not ``heavy`` (pytest --collect-only)."""
    out = subprocess.run([python, "-m", "pytest", "--collect-only", "-q", "-p",
                          "no:cacheprovider", "-m", "slow and not heavy"], cwd=REPO,
                         capture_output=True, text=True).stdout
    return {line.strip() for line in out.splitlines() if "::" in line}


def summarize(times: dict, slow: set, top: int) -> dict:
    tiers = collections.Counter()
    counts = collections.Counter()
    folders = collections.Counter()
    for node, t in times.items():
        tier = "thorough (slow)" if node in slow else "fast"
        tiers[tier] += t
        counts[tier] += 1
        folders[node.split("::")[0].rsplit("/", 1)[0]] += t
    return {"total_s": round(sum(times.values()), 1), "tests": len(times),
            "tiers": {k: {"tests": counts[k], "seconds": round(v, 1)} for k, v in tiers.items()},
            "folders": {k: round(v, 1) for k, v in folders.most_common()},
            "slowest": [[n, round(t, 1)] for n, t in
                        sorted(times.items(), key=lambda kv: -kv[1])[:top]]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("report", nargs="?", type=Path, default=DEFAULT_REPORT,
                    help="JUnit XML of a make test run (default build/test-report.xml)")
    ap.add_argument("--top", type=int, default=15, help="how many slowest tests (15)")
    ap.add_argument("--json", type=Path, help="also write the summary as JSON")
    args = ap.parse_args(argv)
    if not args.report.exists():
        ap.error(f"report {args.report} not found: run `make test` first")
    s = summarize(read_report(args.report), slow_ids(), args.top)
    print(f"{s['tests']} tests, {s['total_s'] / 60:.1f} min of test time over the workers")
    for tier, v in s["tiers"].items():
        print(f"  {tier:16s} {v['tests']:5d} tests  {v['seconds'] / 60:6.1f} min")
    print("per folder:")
    for folder, t in s["folders"].items():
        print(f"  {folder:24s} {t / 60:6.1f} min")
    print(f"slowest {args.top}:")
    for node, t in s["slowest"]:
        print(f"  {t:7.1f} s  {node}")
    if args.json:
        args.json.write_text(json.dumps(s, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
