"""The emitted Verilog behaves the same in Icarus (SystemVerilog semantics) as in Verilator.

Verilator is the project's simulator; its 2-state model and start-up evaluation hide behaviour
that a 4-state, event-driven simulator shows (an ``always @*`` block that never runs at time 0
under IEEE 1800, see :mod:`sw.verilog_text`). Here the cocotb tests of four blocks -- the GAE
PE, the GAE accelerator, the replay accelerator and the fused trainer -- run under Icarus ``-g2012`` (Debian
``iverilog``, installed by ``make``), must pass there, and must write the same per-cycle trace
of every output port as under Verilator (:func:`cocotb_util.start_trace`), same seed, same tests.

The emitted text itself: every ``always @*`` dummy register gets its time-0 wake-up, nothing
else changes, and what synthesis reads is exactly Amaranth's output.
"""

import re
import shutil
from pathlib import Path

import pytest

from cocotb_util import ROOT, SIM_ENV, TRACE_ENV, run_block, simulator_choice
from sw.verilog_text import SIM_ONLY_BEGIN, sim_safe, synthesis_text

HDL = ROOT / "hdl"
SHIPPED_V = sorted(HDL.glob("*/*.v"))
_DUMMY = re.compile(r"^  reg \\\$auto\$verilog_backend\.cc:\d+:dump_module\$\d+  = 0;$", re.M)

#: name: (block, parameters, test file, cocotb tests) -- small configurations, so Icarus takes
#: seconds; the same tests the Verilator tier runs at full size.
CASES = {
    "gae-pe": ("gae-pe", {"data_width": 20, "data_frac": 10, "coef_width": 14,
                          "rounding": "half_even", "k": 3, "mode": "interleaved"},
               "gae/test_pe_rtl.py", "random_back_to_back,coefficient_corners"),
    "gae-accel": ("gae-accel", {"n_pe": 5, "max_trajectories": 20, "capacity": 40,
                                "results": "full", "axi_data_width": 64,
                                "pe": {"k": 2, "mode": "interleaved"}},
                  "gae/test_accelerator_rtl.py", "odd_shapes,registers,reset_mid_run_recovers"),
    # the same build, the shapes that fill the memory: an expected failure (below)
    "gae-accel-capacity": ("gae-accel", {"n_pe": 5, "max_trajectories": 20, "capacity": 40,
                                         "results": "full", "axi_data_width": 64,
                                         "pe": {"k": 2, "mode": "interleaved"}},
                           "gae/test_accelerator_rtl.py", "capacity_shapes"),
    "replay-accel": ("replay-accel", {"fanout": 2, "capacity": 700, "priority_width": 20,
                                      "priority_frac": 8, "input_guard_bits": 4,
                                      "target_bits": 24, "max_batch": 96},
                     "replay/test_accelerator_rtl.py", "exact_cycles,registers"),
    # the tests' small trainer: two launches of the driver session
    "dqn-trainer": ("dqn-trainer", {
        "learner": {"sizes": [4, 8, 2], "array": 2, "max_batch": 16, "sub_batch": 4},
        "tree": {"fanout": 4, "capacity": 256, "max_batch": 16}, "append_window": 16,
        "delay": 1, "trace_depth": 8}, "trainer/test_accelerator_rtl.py", "short_session"),
}


# -- the text pass --------------------------------------------------------------------------------
@pytest.mark.parametrize("path", SHIPPED_V, ids=lambda p: p.stem)
def test_every_always_block_is_woken_at_time_zero(path):
    text = path.read_text()
    dummies = _DUMMY.findall(text)
    assert dummies, "no always @* dummy register: has Amaranth's backend changed?"
    assert text.count(f"{SIM_ONLY_BEGIN}: wake the always @* blocks") == len(dummies)
    memories = re.findall(r"^  reg (?:\[\d+:0\] )?\S+ \[\d+:0\];$", text, re.M)
    assert text.count(f"{SIM_ONLY_BEGIN}: memories start at zero") <= len(memories)
    assert sim_safe(text) == text                        # idempotent: emit applied it once
    plain = synthesis_text(text)
    assert SIM_ONLY_BEGIN not in plain and "initial #0" not in plain
    assert sim_safe(plain) == text


def test_synthesis_text_is_amaranths_output():
    """What synthesis (and the timing key) reads is Amaranth's Verilog, not the pass's."""
    from amaranth.back import verilog

    from rtl_gen.blocks import build
    from rtl_gen.emit import drop_zero_memory_init, to_verilog
    from sw.registry import block

    b = block("gae-pe")
    comp = build(b, b.config.from_dict(CASES["gae-pe"][1]))
    raw = drop_zero_memory_init(verilog.convert(comp, name="pe", emit_src=False))
    comp = build(b, b.config.from_dict(CASES["gae-pe"][1]))
    assert synthesis_text(to_verilog(comp, "pe")) == raw


def test_timing_key_ignores_the_pass():
    from sw.timing import verilog_sha256

    text = SHIPPED_V[0].read_text()
    assert verilog_sha256(text) == verilog_sha256(synthesis_text(text))
    assert verilog_sha256(text) != verilog_sha256(text + "\n// changed\n")


# -- Icarus against Verilator ---------------------------------------------------------------------
def _run(name, simulator, trace: Path, monkeypatch):
    """The block's cocotb tests under ``simulator``, chosen as a user chooses it: ``$SIM``."""
    blk, params, test_file, tests = CASES[name]
    trace.unlink(missing_ok=True)
    with monkeypatch.context() as m:
        m.setenv(SIM_ENV, simulator)
        run_block(blk, params, str(ROOT / "tb" / test_file), testcase=tests.split(","),
                  seed=20261124, extra_env={TRACE_ENV: str(trace)})
    assert trace.exists() and trace.stat().st_size, f"{simulator} wrote no trace"
    return trace.read_text().splitlines()


#: Cases Icarus does not pass yet, with what it shows: strict, so a fix makes them fail here.
KNOWN_DIFFERENCES = {
    "gae-accel-capacity": "a read of the results returns X (4-state) under Icarus in the runs "
                          "that fill the memory; Verilator reads the golden values; not yet "
                          "diagnosed",
}


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=[pytest.mark.xfail(reason=KNOWN_DIFFERENCES[n], strict=True)]
                 if n in KNOWN_DIFFERENCES else []) for n in CASES])
def test_icarus_matches_verilator(name, tmp_path, monkeypatch):
    if shutil.which("iverilog") is None:
        pytest.fail("iverilog not found: `make` installs it (Debian package iverilog)")
    ver = _run(name, "verilator", tmp_path / "verilator.trace", monkeypatch)
    ica = _run(name, "icarus", tmp_path / "icarus.trace", monkeypatch)
    for i, (a, b) in enumerate(zip(ver, ica)):
        assert a == b, f"traces differ at line {i}:\n  verilator {a[:300]}\n  icarus    {b[:300]}"
    assert len(ver) == len(ica), f"trace lengths differ: verilator {len(ver)}, icarus {len(ica)}"


def test_the_simulator_is_chosen_by_sim(monkeypatch):
    """``SIM`` picks the simulator as under cocotb-test; an argument overrides it; anything else
    is refused with the variable's name."""
    monkeypatch.delenv(SIM_ENV, raising=False)
    assert simulator_choice() == "verilator"
    monkeypatch.setenv(SIM_ENV, "icarus")
    assert simulator_choice() == "icarus"
    assert simulator_choice("verilator") == "verilator"
    monkeypatch.setenv(SIM_ENV, "questa")
    with pytest.raises(ValueError, match=r"\$SIM must be 'verilator' or 'icarus', not 'questa'"):
        simulator_choice()
    with pytest.raises(ValueError, match="simulator must be"):
        simulator_choice("xcelium")
