"""The board table (``sw/boards.py``) is the one copy of the boards' facts: every consumer reads
it, and the scripts share code only through the modules meant for it, never by importing
another script. (That it imports on a board's host, without Amaranth, is
``tb/test_host_without_amaranth.py``'s walk over every module under ``sw/``.)"""

import ast
import importlib.util
import sys
from pathlib import Path

import pytest

from sw import boards
from sw.timing import TARGET_MHZ

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts"


def _load(name, path):
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module


# -- the table -----------------------------------------------------------------------------------
#: The numbers the table held when it was made the one copy (the learner DSE's budgets): a
#: change here is a change of fact, made on purpose, with its source.
PINNED = {
    "zcu106": ("xczu7ev-ffvc1156-2-e", "XCZU7EV-2FFVC1156", 230_400, 460_800, 1_728, 312, 96),
    "u200": ("xcu200-fsgd2104-2-e", "XCU200 (VU9P class)", 1_182_000, 2_364_000, 6_840, 2_160,
             960),
    "u250": ("xcu250-figd2104-2L-e", "XCU250 (VU13P class)", 1_728_000, 3_456_000, 12_288,
             2_688, 1_280),
}


def test_table_holds_every_board_with_its_sources():
    assert set(boards.BOARDS) == set(PINNED)
    for name, b in boards.BOARDS.items():
        d = b.device
        assert b.name == name
        assert (b.part, d.part, d.lut, d.ff, d.dsp, d.bram36, d.uram) == PINNED[name]
        assert d.source.startswith("AMD DS"), d.source
        assert b.clock_mhz == TARGET_MHZ
        assert b.flow in ("bd", "vitis") and (b.platform is not None) == (b.flow == "vitis")
        assert b.host_bus in ("zcu106", "alveo")
    z = boards.BOARDS["zcu106"]
    assert z.clock_divisors == (5, 1) and z.clock_actual_mhz == 299.997
    assert boards.DEVICES == {n: b.device for n, b in boards.BOARDS.items()}


# -- its consumers -------------------------------------------------------------------------------
def test_vivado_flows_read_the_table():
    from rtl_gen import vivado
    from rtl_gen.vivado import hwh, model
    assert model.BOARDS is boards.BOARDS and vivado.BOARDS is boards.BOARDS
    assert model.Board is boards.Board
    assert model.TARGET_FREQ_MHZ == boards.BOARDS["zcu106"].clock_mhz
    assert hwh.PL0_DIVISORS == boards.BOARDS["zcu106"].clock_divisors
    assert hwh.PL0_ACT_MHZ == boards.BOARDS["zcu106"].clock_actual_mhz


def test_dse_and_estimate_budgets_are_the_table():
    dse = _load("dse_learner_boards_check", SCRIPTS / "dse_learner.py")
    est = _load("estimate_boards_check", SCRIPTS / "estimate.py")
    assert dse.DEVICES is boards.DEVICES and est.DEVICES is boards.DEVICES
    assert dse.Device is boards.Device
    # every board the shipped trainers are configured for is in the table
    assert set(est.SHIPPED_BOARDS.values()) <= set(boards.DEVICES)


def test_benchmark_has_a_bus_model_for_every_board():
    common = _load("bench_common_boards_check", SCRIPTS / "bench" / "common.py")
    for b in boards.BOARDS.values():
        assert b.host_bus in common.BUSES, b


# -- scripts share code through library modules only ---------------------------------------------
#: Modules under ``scripts/`` that other scripts may import: libraries, not programs.
SHARED = {
    "bench.common": "what every benchmark shares (rows, timing, bus models)",
    "bench.cpu_sumtree": "the CPU sum trees the replay, trainer and PAAL benchmarks time",
    "repro.common": "the reproduction scripts' runner and output",
    "timing_model": "the delay model and path walker of scripts/timing.py",
    "estimate": "the Yosys flow scripts/timing.py runs (also a command)",
    "estimate_report": "the estimate's records, Yosys stat/ltp parsers and tables",
    "dse_learner_model": "the learner DSE's estimates, stages, design points and search",
}
#: The end-to-end benchmark's drivers, which run and summarize its blocks.
BENCH_DRIVERS = {"bench_e2e", "bench_floor"}


def _script_modules() -> dict:
    """Module name as the scripts import it (``estimate``, ``bench.replay``) -> path."""
    mods = {}
    for p in sorted(SCRIPTS.rglob("*.py")):
        parts = p.relative_to(SCRIPTS).with_suffix("").parts
        if "__pycache__" in parts:
            continue
        mods[".".join(parts).removesuffix(".__init__")] = p
    return mods


def _imports(path, known) -> set:
    """The modules of ``known`` that ``path`` imports (at any depth of the file)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        found |= {n for n in names if n in known}
    return found


def test_scripts_do_not_import_scripts():
    mods = _script_modules()
    assert set(SHARED) <= set(mods), sorted(set(SHARED) - set(mods))
    bad = []
    for name, path in mods.items():
        package = name.rpartition(".")[0]
        for dep in sorted(_imports(path, mods)):
            if dep in SHARED or dep in ("bench", "repro"):
                continue
            if package and dep.startswith(package + "."):
                continue                     # a block of the same package (bench/*, repro/*)
            if name in BENCH_DRIVERS and dep.startswith("bench."):
                continue
            bad.append(f"{path.relative_to(ROOT)} imports {dep}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("name", ["estimate", "repro.paal"])
def test_scan_sees_the_old_script_imports(name, tmp_path):
    """The scan would have caught what the shared modules replaced."""
    old = {"estimate": "from dse_learner import DEVICES\n",
           "repro.paal": "def f():\n    from bench.replay import tree_layout\n"}[name]
    path = tmp_path / "x.py"
    path.write_text(old)
    assert _imports(path, _script_modules()) - set(SHARED)
