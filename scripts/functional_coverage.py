#!/usr/bin/env python3
"""Merge the functional coverage counts of a ``make coverage`` run into one report.

Each process of the run that sampled a point wrote its counts to
``build/coverage/functional/*.yml`` (cocotb-coverage's YAML export, ``tb/fcov``). This sums the
hits per bin over all files and writes ``build/coverage/functional.md`` and ``functional.json``:
per point (the catalogue of ``tb/fcov``: every point, sampled or not) each bin's hits, and
every bin not hit either with the reason no test can reach it or as ``MISSED``.

    .venv/bin/python scripts/functional_coverage.py            # after make coverage
    .venv/bin/python scripts/functional_coverage.py --check    # exit 1 if a bin is MISSED
"""

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tb"))

import fcov  # noqa: E402

DEFAULT_DIR = REPO / "build" / "coverage"


def merge(files) -> dict:
    """``{point: {bin: hits}}`` summed over cocotb-coverage YAML exports."""
    import yaml

    hits = {}
    for f in files:
        data = yaml.safe_load(Path(f).read_text()) or {}
        for name, item in data.items():
            bins = item.get("bins:_hits") if isinstance(item, dict) else None
            if bins is None:
                continue
            acc = hits.setdefault(name, {})
            for label, n in bins.items():
                acc[str(label)] = acc.get(str(label), 0) + int(n)
    return hits


def report(hits: dict, catalogue: dict) -> dict:
    """Per point of ``catalogue``: bins with hits, the reasons of unreachable bins, the missed
    bins; and the totals."""
    points, missed_total, bins_total, hit_total, justified_total = {}, 0, 0, 0, 0
    for name, p in sorted(catalogue.items()):
        got = hits.get(name, {})
        rows = []
        for label in p.bins:
            n = got.get(label, 0)
            reason = p.unreachable.get(label)
            status = "hit" if n else ("unreachable" if reason else "MISSED")
            rows.append({"bin": label, "hits": n, "status": status,
                         **({"reason": reason} if reason else {})})
        bins_total += len(rows)
        hit_total += sum(r["status"] == "hit" for r in rows)
        justified_total += sum(r["status"] == "unreachable" for r in rows)
        missed_total += sum(r["status"] == "MISSED" for r in rows)
        points[name] = {"doc": p.doc, "sampled": name in hits, "bins": rows}
    unknown = sorted(set(hits) - set(catalogue))
    return {"points": points, "bins": bins_total, "hit": hit_total,
            "unreachable": justified_total, "missed": missed_total,
            "not_in_catalogue": unknown}


def markdown(rep: dict, n_files: int) -> str:
    lines = ["# Functional coverage", "",
             f"{rep['bins']} bins in {len(rep['points'])} points, merged from {n_files} "
             f"runs: {rep['hit']} hit, {rep['unreachable']} unreachable (reason given), "
             f"**{rep['missed']} missed**.", "",
             "| point | what | bins hit | not hit |", "|---|---|---|---|"]
    for name, p in rep["points"].items():
        hit = ", ".join(f"{r['bin']} ({r['hits']})" for r in p["bins"] if r["status"] == "hit")
        not_hit = "; ".join(
            f"{r['bin']}: {r.get('reason', 'MISSED')}" if r["status"] == "unreachable"
            else f"**{r['bin']}: MISSED**" for r in p["bins"] if r["status"] != "hit")
        what = p["doc"] + ("" if p["sampled"] else " (never sampled)")
        lines.append(f"| `{name}` | {what} | {hit or '-'} | {not_hit or '-'} |")
    if rep["not_in_catalogue"]:
        lines += ["", "Sampled but not in the catalogue: "
                  + ", ".join(f"`{n}`" for n in rep["not_in_catalogue"])]
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, default=DEFAULT_DIR,
                    help="coverage directory (default build/coverage): reads functional/*.yml")
    ap.add_argument("--check", action="store_true", help="exit 1 if any bin is MISSED")
    args = ap.parse_args(argv)
    files = sorted((args.dir / "functional").glob("*.yml"))
    rep = report(merge(files), fcov.catalogue())
    args.dir.mkdir(parents=True, exist_ok=True)
    (args.dir / "functional.json").write_text(json.dumps(rep, indent=1) + "\n")
    (args.dir / "functional.md").write_text(markdown(rep, len(files)))
    print(f"functional coverage: {rep['hit']}/{rep['bins']} bins hit, {rep['unreachable']} "
          f"unreachable, {rep['missed']} missed ({len(files)} runs): "
          f"{args.dir / 'functional.md'}")
    return 1 if args.check and rep["missed"] else 0


if __name__ == "__main__":
    sys.exit(main())
