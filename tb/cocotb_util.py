"""Helpers shared by the cocotb testbenches: building a block under Verilator, stream drivers.

Build side (runs in pytest): :func:`run_block` emits the Verilog of one block configuration with
``rtl_gen.emit.emit`` (the code path that writes ``hdl/``), builds it with Verilator once per
configuration and runs the cocotb tests of a module against it; :func:`run_component` does the
same for any Amaranth component built in the test (cached per Verilog text). The test folders
are packages (``tb/gae/__init__.py``, ...), so the simulator imports a test module by its
package name (``gae.test_kernel_rtl``) from ``tb/``, like pytest does.

Simulation side (runs inside cocotb): :func:`load_manifest` reads the configuration back, and
:class:`StreamTB` drives one input and one output Amaranth stream (``<p>__valid``,
``<p>__ready``, ``<p>__payload``) from a single coroutine, with optional random idle cycles on the
input and back-pressure on the output.
"""

import hashlib
import itertools
import json
import os
import random
import re
from pathlib import Path

# One switch for code and functional coverage: ``RLK_COVERAGE`` (fcov.COVERAGE_ENV).
from fcov import COVERAGE_ENV  # noqa: F401  (re-exported)
from fcov import enabled as coverage_enabled

ROOT = Path(__file__).resolve().parent.parent
WAIVERS = ROOT / "scripts" / "verilator_waivers.vlt"
MANIFEST_ENV = "RLK_MANIFEST"
_RUNS = itertools.count()


def _results_xml(build_dir) -> str:
    """A results file of its own for one cocotb run: two xdist workers may run tests on one
    model at the same time."""
    return str(Path(build_dir) / f"results-{os.getpid()}-{next(_RUNS)}.xml")


#: Environment variable naming the file :func:`start_trace` appends the output trace to.
TRACE_ENV = "RLK_TRACE"

#: ``RLK_COVERAGE=1``: :func:`run_block` and :func:`run_component` build coverage models
#: (``rtl_gen.sim_build.COVERAGE_ARGS``, in ``build/sim-coverage/``, never replacing the normal
#: builds of ``build/sim/``) and each Verilator run writes its counts to a file of its own,
#: ``build/coverage/dat/<build dir name>/<test module>-<pid>-<n>.dat``, which
#: ``scripts/rtl_coverage.py`` merges (``make coverage``, docs/testing.md).
COVERAGE_DAT = ROOT / "build" / "coverage" / "dat"


#: ``SIM``: the simulator of the cocotb tests, set the way cocotb-test's users set it
#: (``SIM=icarus pytest tb/gae/test_pe_rtl.py``): ``verilator`` (the default) or ``icarus``.
SIM_ENV = "SIM"
SIMULATORS = ("verilator", "icarus")


def simulator_choice(simulator=None) -> str:
    """``simulator`` if given, else ``$SIM``, else ``"verilator"``; checked."""
    sim = simulator or os.environ.get(SIM_ENV) or "verilator"
    if sim not in SIMULATORS:
        where = "simulator" if simulator else f"${SIM_ENV}"
        raise ValueError(f"{where} must be 'verilator' or 'icarus', not {sim!r}")
    return sim


def _build_icarus(runner, source: Path, module: str, build_dir: Path) -> Path:
    """Icarus Verilog with ``-g2012`` (SystemVerilog semantics), beside the Verilator build."""
    build_dir = build_dir / "icarus"
    runner.build(sources=[source], hdl_toplevel=module, build_dir=build_dir,
                 build_args=["-g2012"], timescale=("1ns", "1ps"))
    return build_dir


def _coverage_plusargs(build_dir, test_module: str) -> list:
    """The plusarg that makes one coverage run write its counts to a file of its own."""
    out = COVERAGE_DAT / Path(build_dir).name
    out.mkdir(parents=True, exist_ok=True)
    dat = out / f"{test_module}-{os.getpid()}-{next(_RUNS)}.dat"
    return [f"+verilator+coverage+file+{dat}"]


# -- pytest side ----------------------------------------------------------------------------------
def _test_module(test_file) -> tuple[str, Path]:
    """``(dotted module name, directory to import it from)`` of a test file: its package path
    (the folders above it that hold an ``__init__.py``) and the first folder that does not.
    The simulator runs in that folder, whose path cocotb puts first on ``sys.path``."""
    path = Path(test_file).resolve()
    parts, root = [path.stem], path.parent
    while (root / "__init__.py").exists():
        parts.insert(0, root.name)
        root = root.parent
    return ".".join(parts), root


def run_block(block: str, params: dict, test_file: str, *, testcase=None, seed=None,
              simulator=None, extra_env=None):
    """Emit, build (cached per configuration, :func:`rtl_gen.sim_build.build_sim`: the
    builds :func:`sw.driver.open_sim` runs) and run the cocotb tests in
    ``test_file`` under ``simulator`` (default ``$SIM``, else Verilator,
    :func:`simulator_choice`): ``"verilator"`` (the project's simulator) or ``"icarus"``
    (Icarus Verilog with ``-g2012``, SystemVerilog semantics: the second simulator that checks
    the emitted Verilog does not depend on Verilator's 2-state, time-0 behaviour)."""
    from cocotb_tools.runner import get_runner

    from rtl_gen.sim_build import build_sim

    simulator = simulator_choice(simulator)
    coverage = simulator == "verilator" and coverage_enabled()
    build_dir, manifest = build_sim(block, params, cache_dir=ROOT / "build" / "sim",
                                    coverage=coverage)
    src_dir = build_dir / "src"
    runner = get_runner(simulator)
    if simulator == "icarus":
        build_dir = _build_icarus(runner, src_dir / manifest["verilog"], manifest["module"],
                                  build_dir)
    test_module, test_dir = _test_module(test_file)
    env = {
        MANIFEST_ENV: str(src_dir / f"{manifest['module']}.json"),
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tb"),
                                       os.environ.get("PYTHONPATH", "")]),
        **(extra_env or {}),
    }
    runner.test(
        test_module=test_module,
        hdl_toplevel=manifest["module"],
        hdl_toplevel_lang="verilog",
        build_dir=build_dir,
        test_dir=test_dir,
        testcase=testcase,
        seed=seed,
        extra_env=env,
        results_xml=_results_xml(build_dir),
        plusargs=_coverage_plusargs(build_dir, test_module) if coverage else [],
    )


def run_component(component, module: str, test_file: str, *, manifest=None, vlt="",
                  testcase=None, seed=None, simulator=None):
    """Emit an arbitrary Amaranth ``component`` as Verilog ``module``, build it with Verilator
    (cached per Verilog text; with Icarus too where ``simulator``, default ``$SIM``, says
    ``"icarus"``) and run the cocotb tests in ``test_file``.

    ``manifest`` (a JSON-able dict) is written next to the Verilog together with the port table
    and read back in cocotb with :func:`load_manifest`. ``vlt`` is extra Verilator control-file
    text (``lint_off`` lines) for waivers that belong to one design rather than to Amaranth.
    """
    from amaranth.back import verilog
    from cocotb_tools.runner import VerilatorControlFile, get_runner

    from rtl_gen.emit import port_table
    from sw.verilog_text import sim_safe
    from rtl_gen.sim_build import (BUILD_ARGS, COVERAGE_ARGS, coverage_cache, public_ports,
                                   verilator_env, write_if_changed)

    simulator = simulator_choice(simulator)
    coverage = simulator == "verilator" and coverage_enabled()
    extra = list(COVERAGE_ARGS) if coverage else []
    text = verilog.convert(component, name=module, emit_src=False)
    if simulator == "icarus":
        text = sim_safe(text)     # the time-0 wake-ups SystemVerilog semantics need (emit's)
    key = hashlib.sha256(json.dumps([text, vlt, manifest, BUILD_ARGS] + ([extra] if extra else []),
                                    sort_keys=True).encode())
    cache = ROOT / "build" / "sim"
    build_dir = (coverage_cache(cache) if coverage else cache) / f"{module}-{key.hexdigest()[:12]}"
    src_dir = build_dir / "src"
    src_dir.mkdir(parents=True, exist_ok=True)
    write_if_changed(src_dir / f"{module}.v", text)
    full = {"module": module, "ports": port_table(component), **(manifest or {})}
    write_if_changed(src_dir / f"{module}.json", json.dumps(full, indent=2) + "\n")
    sources = [VerilatorControlFile(WAIVERS),
               VerilatorControlFile(public_ports(src_dir, module))]
    if vlt:
        sources.append(VerilatorControlFile(write_if_changed(
            src_dir / "extra.vlt", "`verilator_config\n" + vlt.strip() + "\n")))
    if simulator == "icarus":
        runner = get_runner("icarus")
        build_dir = _build_icarus(runner, src_dir / f"{module}.v", module, build_dir)
    else:
        runner = get_runner("verilator")
        verilator_env()
        runner.build(
            sources=sources + [src_dir / f"{module}.v"],
            hdl_toplevel=module,
            build_dir=build_dir,
            build_args=[*BUILD_ARGS, *extra],
        )
    test_module, test_dir = _test_module(test_file)
    env = {
        MANIFEST_ENV: str(src_dir / f"{module}.json"),
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tb"),
                                       os.environ.get("PYTHONPATH", "")]),
    }
    runner.test(
        test_module=test_module,
        hdl_toplevel=module,
        build_dir=build_dir,
        test_dir=test_dir,
        testcase=testcase,
        seed=seed,
        extra_env=env,
        results_xml=_results_xml(build_dir),
        plusargs=_coverage_plusargs(build_dir, test_module) if coverage else [],
    )


# -- cocotb side ----------------------------------------------------------------------------------
def load_manifest() -> dict:
    return json.loads(Path(os.environ[MANIFEST_ENV]).read_text())


def start_trace(dut, clk):
    """If ``$RLK_TRACE`` names a file, record every output port of the top level (from the
    manifest's port table) once per cycle, at the falling edge of ``clk`` after the signals
    settle, and append a line ``<time ns> <port>=<value> ...`` to the file whenever any of them
    changed (each cocotb test starts its own monitor; sim time runs on across tests). Two simulators that run the same cocotb tests with the same seed must write
    the same file (:func:`compare_traces`); X and Z are written as such."""
    path = os.environ.get(TRACE_ENV)
    if not path:
        return
    import cocotb
    from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge
    from cocotb.utils import get_sim_time

    names = [p["name"] for p in load_manifest()["ports"] if p["dir"] == "output"]
    handles = [getattr(dut, n) for n in names]
    # A payload is defined only while its valid is high (a stream's ``<p>__payload``; an AXI
    # slave's R and B channel fields): written as "-" otherwise, since an idle pipeline
    # register holds X in a 4-state simulator and 0 in Verilator.
    qualifier = {}
    for i, n in enumerate(names):
        if n.endswith("__payload"):
            valid = n[:-len("payload")] + "valid"
        elif re.search(r"_(rdata|rresp|rid|rlast|ruser|bresp|bid|buser)$", n):
            valid = re.sub(r"_([rb])[a-z]+$", r"_\1valid", n)
        else:
            continue
        if valid in names:
            qualifier[i] = names.index(valid)

    async def monitor():
        last = None
        # From the first rising edge: 4-state simulators see the clock's X -> 0 at time 0 as a
        # falling edge, Verilator does not.
        await RisingEdge(clk)
        with open(path, "a") as f:
            while True:
                await FallingEdge(clk)
                await ReadOnly()
                raw = [str(h.value) for h in handles]
                now = tuple("-" if i in qualifier and raw[qualifier[i]] != "1" else v
                            for i, v in enumerate(raw))
                if now != last:
                    t = get_sim_time("ns")
                    f.write(f"{t:.0f} " + " ".join(
                        f"{n}={v}" for n, v in zip(names, now)) + "\n")
                    last = now

    cocotb.start_soon(monitor())


class StreamTB:
    """Clock, reset and a combined source/sink for a one-in, one-out stream component.

    Each cycle, at the falling edge, the source drives the next payload (or idles with
    probability ``idle``) and the sink drives ``ready`` (low with probability ``stall``); after
    the signals settle it records which transfers will happen at the next rising edge. Transfer
    times are cycle numbers, so latency and throughput can be asserted exactly.
    """

    def __init__(self, dut, *, inp="i", out="o", period_ns=4):
        self.dut = dut
        self.period_ns = period_ns
        self.i_valid = getattr(dut, f"{inp}__valid")
        self.i_ready = getattr(dut, f"{inp}__ready")
        self.i_payload = getattr(dut, f"{inp}__payload")
        self.o_valid = getattr(dut, f"{out}__valid")
        self.o_ready = getattr(dut, f"{out}__ready")
        self.o_payload = getattr(dut, f"{out}__payload")

    async def start(self):
        """Start the clock (once per cocotb test) and reset."""
        import cocotb
        from cocotb.clock import Clock

        self.i_valid.value = 0
        self.i_payload.value = 0
        self.o_ready.value = 0
        self.dut.rst.value = 1
        cocotb.start_soon(Clock(self.dut.clk, self.period_ns, unit="ns", impl="gpi").start(
            start_high=False))
        start_trace(self.dut, self.dut.clk)
        await self.reset()

    async def reset(self):
        from cocotb.triggers import ClockCycles

        self.i_valid.value = 0
        self.o_ready.value = 0
        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, 2)
        self.dut.rst.value = 0
        await ClockCycles(self.dut.clk, 1)

    async def run(self, words, *, idle=0.0, stall=0.0, rng=None, max_cycles=None):
        """Send ``words`` (ints), collect as many outputs. Returns (outputs, in_cycles, out_cycles)."""
        from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge

        rng = rng or random.Random(0)
        n = len(words)
        max_cycles = max_cycles or 20 * (n + 100)
        outs, in_cycles, out_cycles = [], [], []
        sent = 0
        for cycle in range(max_cycles):
            await FallingEdge(self.dut.clk)
            offer = sent < n and not (idle and rng.random() < idle)
            self.i_valid.value = int(offer)
            if offer:
                self.i_payload.value = words[sent]
            self.o_ready.value = int(not (stall and rng.random() < stall))
            await ReadOnly()
            if offer and self.i_ready.value:
                in_cycles.append(cycle)
                sent += 1
            if self.o_valid.value and self.o_ready.value:
                outs.append(self.o_payload.value.to_unsigned())
                out_cycles.append(cycle)
                if len(outs) == n:
                    break
        await FallingEdge(self.dut.clk)
        self.i_valid.value = 0
        if len(outs) != n:
            raise AssertionError(f"timeout: {len(outs)} of {n} outputs after {max_cycles} cycles")
        return outs, in_cycles, out_cycles
