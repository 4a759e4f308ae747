#!/usr/bin/env python3
"""Estimate the clock of generated modules (``make timing``): levels, worst paths, Fmax.

Usage::

    python scripts/timing.py                       # every shipped module (make timing)
    python scripts/timing.py --module gae_pe_k2    # one module (repeatable)
    python scripts/timing.py --manifest build/my_pe   # any generated configuration
    python scripts/timing.py --vivado build/vivado # also write Vivado OOC timing scripts

Each module of ``hdl/`` is synthesized by ``scripts/estimate.py`` (Yosys ``synth_xilinx
-family xcup -flatten``; resources, cached under ``build/estimate-cache/`` by the hash of the
Verilog), and its mapped netlist is walked by ``scripts/timing_model.py`` under an UltraScale+
-2 delay model (DS925 DSP48E2 and clock figures, assumed CLB and routing delays: see that
module and ``docs/timing.md``). For every module it prints the estimated worst
register-to-register path (ns), its logic levels (LUTs, CARRY8 units, DSPs crossed), the
estimated Fmax, the clock the project quotes, ``min(target, Fmax)`` (:func:`sw.timing.clock_mhz`),
how many pipeline stages the worst path needs at the target, and LUT/FF/DSP/BRAM.

Writes ``build/timing.json`` (``--json``: every path reported, every DSP and block RAM) and the
committed artefact ``hdl/timing.json`` (per module: the Verilog's SHA-256, the estimate, the
worst paths),
then refreshes the ``clock_mhz`` record of each manifest ``hdl/<module>/<module>.json`` from it.
``tb/test_timing.py`` fails, without Yosys, when an entry of ``hdl/timing.json`` no longer
matches its Verilog. An estimate: Vivado is the reference (``make vivado BOARD=ooc``).

``--manifest PATH`` takes any configuration ``python -m rtl_gen`` wrote (its manifest
``<module>.json``, or the ``--out`` directory; :func:`sw.manifest.load_manifest`): its entry goes
to ``<module>_timing.json`` beside the manifest (:func:`sw.timing.timing_file`), never into
``hdl/timing.json``, and its manifest's ``clock_mhz`` record is refreshed from that file
(``make timing MANIFEST=PATH``).
"""

import argparse
import gzip
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
for p in (ROOT, ROOT / "scripts"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import estimate  # noqa: E402
import timing_model  # noqa: E402
from sw import registry, timing  # noqa: E402
from sw.manifest import load_manifest  # noqa: E402

BUILD_JSON = ROOT / "build" / "timing.json"


def analyze_estimate(est, *, paths: int = 3) -> dict:
    """Timing of one synthesized design (an :class:`estimate.Estimate` with its netlist)."""
    if est.netlist is None:
        raise estimate.EstimateError(f"{est.design.name}: no netlist in the cache; rerun with "
                                     "--no-cache")
    with gzip.open(est.netlist, "rt") as f:
        doc = json.load(f)
    nl = timing_model.Netlist.from_json(doc, est.design.top)
    return timing_model.analyze(nl, paths=paths)


def module_record(module: str, est, result: dict, target: float) -> dict:
    """The ``hdl/timing.json`` entry of a module."""
    text = est.design.verilog.read_text()
    s = est.summary
    period = result["period_ns"]
    return {
        "verilog_sha256": timing.verilog_sha256(text),
        "period_ns": period,
        "fmax_mhz": result["fmax_mhz"],
        "levels": result["levels"],
        "stages_at_target": math.ceil(period * target / 1000) if period else 0,
        "resources": {"lut": s["lut"], "ff": s["ff"], "dsp": s["dsp"], "bram36": s["bram36"],
                      "uram": s["uram"], "carry4": s["carry"], "ltp_depth": s["depth"]},
        "dsp": {"count": len(result["dsp"]),
                "combinational": sum(d["combinational"] for d in result["dsp"]),
                "with_mreg": sum(d["MREG"] > 0 for d in result["dsp"]),
                "inputs_from_ffs": sum(d["inputs_from_ffs"] for d in result["dsp"]),
                "outputs_to_ffs": sum(d["outputs_to_ffs"] for d in result["dsp"]),
                "internal_ns": result["dsp_internal_ns"]},
        "bram": {"count": len(result["bram"]),
                 "output_registered": sum(bool(b["DOA_REG"] or b["DOB_REG"])
                                          for b in result["bram"])},
        "paths": result["paths"],
        "unmodelled": result["unmodelled"],
    }


def format_table(records: dict, target: float) -> str:
    """The plain-text table ``make timing`` prints."""
    head = ["module", "levels", "LUT+C8+DSP", "est. ns", "est. Fmax", "clock", "stages",
            "LUT", "FF", "DSP", "BRAM36"]
    rows = []
    for m, r in records.items():
        lv = r["levels"] or {"total": 0, "lut": 0, "carry8": 0, "dsp": 0}
        fmax = r["fmax_mhz"]
        mhz, label = ((fmax, "estimated") if fmax and fmax < target
                      else (target, "target" if fmax else "assumed"))
        res = r["resources"]
        rows.append([m, str(lv["total"]), f"{lv['lut']}+{lv['carry8']}+{lv['dsp']}",
                     f"{r['period_ns']:.2f}", f"{r['fmax_mhz'] or 0:.0f} MHz",
                     f"{mhz:.0f} ({label})", str(r["stages_at_target"]), str(res["lut"]),
                     str(res["ff"]), str(res["dsp"]), str(res["bram36"])])
    widths = [max(len(row[c]) for row in [head] + rows) for c in range(len(head))]

    def line(row):
        return "  ".join(cell.ljust(w) if c == 0 else cell.rjust(w)
                         for c, (cell, w) in enumerate(zip(row, widths)))
    return "\n".join([line(head), line(["-" * w for w in widths])] + [line(r) for r in rows])


def worst_paths_text(records: dict) -> str:
    """For every module: the worst path, what it crosses, and what must be cut."""
    out = []
    for m, r in records.items():
        if not r["paths"]:
            out.append(f"{m}: no register-to-register path")
            continue
        p = r["paths"][0]
        lv = p["levels"]
        out.append(f"{m}: {p['ns']:.2f} ns, {lv['total']} levels ({lv['lut']} LUT, "
                   f"{lv['carry8']} CARRY8 from {lv['carry4']} CARRY4, {lv['dsp']} DSP)\n"
                   f"  from {p['start']}\n  to   {p['end']}\n"
                   f"  through {' -> '.join(c.split(':')[0] for c in p['cells'][1:])}")
        d = r["dsp"]
        if d["count"]:
            out.append(f"  DSP48E2: {d['count']}, {d['combinational']} without any register "
                       f"(Yosys leaves AREG/BREG/MREG/PREG unpacked), {d['inputs_from_ffs']} "
                       f"fed by flip-flops only (AREG/BREG absorbable), "
                       f"{d['outputs_to_ffs']} read by flip-flops only (PREG absorbable)")
        if r["bram"]["count"]:
            out.append(f"  block RAM: {r['bram']['count']}, {r['bram']['output_registered']} "
                       f"with DO*_REG")
    return "\n".join(out)


def refresh_manifest(man_path: Path, artefact: Path | None):
    """Rewrite the ``clock_mhz`` record of the manifest ``man_path`` (its Verilog beside it)
    from the artefact (None: ``hdl/timing.json``, with its own ``source`` text)."""
    man = json.loads(man_path.read_text())
    m = man["module"]
    text = (man_path.parent / man.get("verilog", f"{m}.v")).read_text()
    clock = timing.manifest_clock(m, text, man.get("throughput"), path=artefact)
    man.pop("clock_mhz", None)
    keys = list(man)        # where rtl_gen.emit.manifest puts it: after "throughput"
    at = keys.index("throughput") + 1 if "throughput" in keys else len(keys)
    man = {**{k: man[k] for k in keys[:at]}, "clock_mhz": clock,
           **{k: man[k] for k in keys[at:]}}
    man_path.write_text(json.dumps(man, indent=2) + "\n")


def refresh_manifests(hdl: Path, modules, artefact: Path):
    """Rewrite the ``clock_mhz`` record of each shipped module's manifest from the artefact."""
    for m in modules:
        man_path = hdl / m / f"{m}.json"
        if man_path.is_file():
            refresh_manifest(man_path, artefact)


def manifest_targets(paths, hdl: Path, shipped) -> tuple:
    """``(shipped_names, generated)`` of the ``--manifest`` paths: the names of those that are
    a shipped module's manifest in ``hdl`` (timed as ``--module``), and module ->
    :class:`~sw.manifest.Generated` of the others. ``ValueError`` naming ``--manifest``: a
    path that is not a manifest, or one module name twice."""
    names, generated = [], {}
    for p in paths:
        gen = load_manifest(p, argument="--manifest")
        if gen.module in shipped and gen.directory.resolve() == (hdl / gen.module).resolve():
            names.append(gen.module)
            continue
        if gen.module in generated:
            raise ValueError(f"--manifest {str(p)!r}: module {gen.module!r} is named twice "
                             f"(at {str(generated[gen.module].path)!r} too): give one another "
                             f"name (python -m rtl_gen ... --name)")
        generated[gen.module] = gen
    return names, generated


def write_generated(gen, record: dict, head: dict) -> Path:
    """The estimate of a generated configuration: ``<module>_timing.json`` beside its
    manifest (the format of ``hdl/timing.json``, one module), then its manifest's
    ``clock_mhz`` from it."""
    path = timing.timing_file(gen.directory, gen.module)
    doc = {**head, "modules": {gen.module: {**record, "paths": record["paths"][:3]}}}
    path.write_text(json.dumps(doc, indent=1) + "\n")
    refresh_manifest(gen.path, path)
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description="Estimate register-to-register timing of the shipped modules or of any "
                    "generated configuration (Yosys + an UltraScale+ -2 delay model; Vivado is "
                    "the reference).")
    ap.add_argument("--module", action="append", default=[], metavar="NAME",
                    help="a shipped module (repeatable; default all, unless --manifest is "
                         "given)")
    ap.add_argument("--manifest", action="append", default=[], type=Path, metavar="PATH",
                    help="any generated configuration: its manifest <module>.json or the "
                         "directory python -m rtl_gen wrote it to (repeatable); the estimate "
                         "goes to <module>_timing.json there and its manifest's clock_mhz")
    ap.add_argument("--hdl", type=Path, default=ROOT / "hdl", help="shipped Verilog (hdl/)")
    ap.add_argument("--json", type=Path,
                    help=f"full report (JSON; default {BUILD_JSON.relative_to(ROOT)} when a "
                         f"shipped module is timed)")
    ap.add_argument("--paths", type=int, default=5, help="worst paths per module in --json")
    ap.add_argument("--target-mhz", type=float, default=timing.TARGET_MHZ)
    ap.add_argument("-j", "--jobs", type=int, default=2, help="parallel Yosys runs")
    ap.add_argument("--no-cache", action="store_true", help="resynthesize even if cached")
    ap.add_argument("--no-artefact", action="store_true",
                    help="do not update hdl/timing.json, <module>_timing.json and the "
                         "manifests")
    ap.add_argument("--vivado", type=Path, metavar="DIR",
                    help="also write DIR/<module>/timing_ooc.tcl (Vivado OOC synthesis and "
                         "implementation: the real report)")
    args = ap.parse_args(argv)
    shipped = registry.shipped_modules()
    for m in args.module:
        if m not in shipped:
            ap.error(f"--module must be a shipped module ({', '.join(shipped)}), not {m!r}")
    if args.target_mhz <= 0:
        ap.error(f"--target-mhz must be positive, not {args.target_mhz}")
    if args.paths < 1:
        ap.error(f"--paths must be a positive integer, not {args.paths}")
    try:
        named, generated = manifest_targets(args.manifest, args.hdl, shipped)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    modules = list(dict.fromkeys(args.module + named)) if (args.module or args.manifest) \
        else shipped
    both = [m for m in modules if m in generated]
    if both:
        ap.error(f"--manifest: module {both[0]!r} is also a shipped module timed in this run: "
                 f"give it another name (python -m rtl_gen ... --name)")
    verilog = {**{m: args.hdl / m / f"{m}.v" for m in modules},
               **{m: gen.verilog for m, gen in generated.items()}}
    modules = [*modules, *generated]
    try:
        designs = [estimate.design_from_file(verilog[m]) for m in modules]
        results, errors = estimate.estimate(designs, jobs=args.jobs,
                                            use_cache=not args.no_cache)
    except estimate.EstimateError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for message in errors:
        print(f"error: {message}", file=sys.stderr)
    from sw.console import progress_bar
    records, full = {}, {}
    done = [(m, r) for m, r in zip(modules, results) if r is not None]
    for m, est in progress_bar(done, desc="timing walk", unit="module"):
        try:
            result = analyze_estimate(est, paths=args.paths)
        except estimate.EstimateError as e:
            print(f"error: {e}", file=sys.stderr)
            errors.append(str(e))
            continue
        records[m] = module_record(m, est, result, args.target_mhz)
        full[m] = {**records[m], "dsp_cells": result["dsp"], "bram_cells": result["bram"]}
    if not records:
        return 1
    print(format_table(records, args.target_mhz))
    print()
    print(worst_paths_text(records))
    head = {"tool": estimate.tool_name(),
            "flow": "synth_xilinx -family xcup -flatten; scripts/timing_model.py",
            "model": timing_model.MODEL, "target_mhz": args.target_mhz,
            "note": "an estimate from Yosys and a delay model; Vivado is the reference"}
    report = args.json or (BUILD_JSON if any(m not in generated for m in records) else None)
    if report is not None:
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(json.dumps({**head, "modules": full}, indent=1) + "\n")
        print(f"wrote {report}")
    if not args.no_artefact and any(m not in generated for m in records):
        artefact = args.hdl / "timing.json"
        old = json.loads(artefact.read_text()) if artefact.is_file() else {"modules": {}}
        kept = {m: r for m, r in old.get("modules", {}).items() if m in shipped}
        for m, r in records.items():
            if m not in generated:
                kept[m] = {**r, "paths": r["paths"][:3]}
        doc = {**head, "modules": {m: kept[m] for m in shipped if m in kept}}
        artefact.write_text(json.dumps(doc, indent=1) + "\n")
        refresh_manifests(args.hdl, shipped, artefact)
        print(f"wrote {artefact} and the clock_mhz of the {len(shipped)} manifests")
    if not args.no_artefact:
        for m, gen in generated.items():
            if m in records:
                path = write_generated(gen, records[m], head)
                print(f"wrote {path} and the clock_mhz of {gen.path}")
    if args.vivado:
        manifests = {**{m: args.hdl / m / f"{m}.json" for m in records},
                     **{m: gen.path for m, gen in generated.items()}}
        write_vivado(args.vivado, {m: manifests[m] for m in records}, args.target_mhz)
    return 1 if errors else 0


def write_vivado(out: Path, manifests: dict, target: float):
    """Vivado out-of-context synthesis + implementation scripts, ``out/<module>/timing_ooc.tcl``
    (:func:`rtl_gen.vivado.module_timing_tcl`), one per module of ``manifests`` (module ->
    the path of its manifest, the Verilog beside it)."""
    from rtl_gen.vivado.ooc_timing import module_timing_tcl
    for m, path in manifests.items():
        manifest = json.loads(path.read_text())
        d = out / m
        d.mkdir(parents=True, exist_ok=True)
        tcl = module_timing_tcl(manifest, path.parent / manifest["verilog"], d,
                                period_ns=1000 / target)
        (d / "timing_ooc.tcl").write_text(tcl)
        print(f"wrote {d / 'timing_ooc.tcl'}: vivado -mode batch -source "
              f"{d / 'timing_ooc.tcl'}")


if __name__ == "__main__":
    sys.exit(main())
