"""The timing estimate (``make timing``): delay model, path walker, artefact freshness, clock.

The model and walker tests run on hand-made netlists (no Yosys); the freshness tests read
``hdl/timing.json`` (no Yosys); the one marked ``slow`` runs ``scripts/timing.py`` on a small
GAE PE (Yosys, about 10 s).
"""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from sw import registry, timing

ROOT = Path(__file__).resolve().parent.parent


def _load(name):
    path = ROOT / "scripts" / f"{name}.py"
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module


tm = _load("timing_model")
M = tm.MODEL


# -- hand-made netlists -----------------------------------------------------------------------
class Builder:
    """A tiny Yosys-JSON-like netlist: cells with ports, bits numbered from 10."""

    def __init__(self):
        self.cells, self.next = {}, 10

    def bits(self, n=1):
        out = list(range(self.next, self.next + n))
        self.next += n
        return out

    def cell(self, name, ctype, ins, outs, **params):
        conns = {**ins, **outs}
        dirs = {**{p: "input" for p in ins}, **{p: "output" for p in outs}}
        self.cells[name] = {"type": ctype, "parameters": params, "port_directions": dirs,
                            "connections": conns}

    def ff(self, name, d, q):
        self.cell(name, "FDRE", {"C": ["0"], "CE": ["1"], "R": ["0"], "D": d}, {"Q": q})

    def netlist(self):
        return tm.Netlist(self.cells, {})


def reg_to_reg(extra):
    return M["ff_clk_to_q"] + extra + M["route"] + M["ff_setup"] + M["clock_uncertainty"]


def test_ff_lut_ff():
    b = Builder()
    q, o = b.bits(), b.bits()
    b.ff("a", ["0"], q)
    b.cell("l", "LUT2", {"I0": q, "I1": q}, {"O": o})
    b.ff("z", o, b.bits())
    r = tm.analyze(b.netlist())
    assert r["period_ns"] == pytest.approx(reg_to_reg(M["route"] + M["lut"]))
    assert r["levels"]["total"] == 1 and r["levels"]["lut"] == 1
    assert r["fmax_mhz"] == pytest.approx(min(1000 / r["period_ns"], M["fmax_cap_mhz"]), abs=0.1)
    assert r["paths"][0]["cells"][0].startswith("FDRE")


def carry_chain(b, n4, src):
    """``n4`` CARRY4 in a chain, S[0] of the first from ``src``; returns O[3] of the last."""
    ci = ["0"]
    for k in range(n4):
        co, o = b.bits(4), b.bits(4)
        b.cell(f"c{k}", "CARRY4", {"CI": ci, "CYINIT": ["0"], "DI": ["0"] * 4,
                                   "S": (src if k == 0 else ["0"]) + ["0"] * 3},
               {"CO": co, "O": o})
        ci = [co[3]]
    return [o[3]]


def test_16_bit_carry_chain_is_two_carry8():
    b = Builder()
    q = b.bits()
    b.ff("a", ["0"], q)
    out = carry_chain(b, 4, q)
    b.ff("z", out, b.bits())
    r = tm.analyze(b.netlist())
    lv = r["levels"]
    assert (lv["carry4"], lv["carry8"], lv["total"]) == (4, 2, 2)
    # one entry, one cascade into the second CARRY8, no routing hop along the chain
    assert r["period_ns"] == pytest.approx(reg_to_reg(M["route"] + M["carry8_in"]
                                                      + M["carry8_cascade"]))


def test_longer_chain_costs_more_and_counts_carry8_units():
    b = Builder()
    q = b.bits()
    b.ff("a", ["0"], q)
    out = carry_chain(b, 13, q)             # 13 CARRY4: 7 CARRY8
    b.ff("z", out, b.bits())
    r = tm.analyze(b.netlist())
    assert r["levels"]["carry8"] == 7
    assert r["period_ns"] == pytest.approx(reg_to_reg(M["route"] + M["carry8_in"]
                                                      + 6 * M["carry8_cascade"]))


def dsp_netlist(**regs):
    b = Builder()
    qa, p = b.bits(2), b.bits(2)
    b.ff("a", ["0"], qa[:1])
    b.ff("a1", ["0"], qa[1:])
    params = {"AREG": 0, "BREG": 0, "MREG": 0, "PREG": 0, "USE_MULT": "MULTIPLY", **regs}
    b.cell("m", "DSP48E2", {"A": qa, "B": ["0", "0"], "CLK": ["0"]}, {"P": p}, **params)
    b.ff("z", p[:1], b.bits())
    return b.netlist()


def test_dsp_without_registers_is_combinational():
    r = tm.analyze(dsp_netlist())
    assert r["levels"]["dsp"] == 1
    assert r["period_ns"] == pytest.approx(
        reg_to_reg(M["route"] + M["dsp_mult"] + M["dsp_alu"]))
    (d,) = r["dsp"]
    assert d["combinational"] and d["inputs_from_ffs"] and d["outputs_to_ffs"]
    nl = dsp_netlist()
    p1 = nl.cells["m"]["connections"]["P"][1]
    nl.cells["l"] = {"type": "LUT1", "parameters": {}, "connections": {"I0": [p1], "O": [99]},
                     "port_directions": {"I0": "input", "O": "output"}}
    assert not tm.analyze(tm.Netlist(nl.cells))["dsp"][0]["outputs_to_ffs"]


def test_dsp_with_mreg_cuts_the_path():
    without = tm.analyze(dsp_netlist())["period_ns"]
    r = tm.analyze(dsp_netlist(MREG=1))
    into = M["ff_clk_to_q"] + M["route"] + M["dsp_setup"] + M["clock_uncertainty"]
    out_of = reg_to_reg(M["dsp_clk_to_out"] + M["dsp_alu"] - M["ff_clk_to_q"])
    assert r["period_ns"] == pytest.approx(max(into, out_of))
    assert r["period_ns"] < without
    assert r["dsp"][0]["MREG"] == 1 and not r["dsp"][0]["combinational"]


def test_dsp_fully_pipelined_reaches_ds925_fmax():
    r = tm.analyze(dsp_netlist(AREG=1, BREG=1, MREG=1, PREG=1))
    assert r["dsp_internal_ns"] == pytest.approx(M["dsp_mult"])      # 1 / 775 MHz
    assert r["fmax_mhz"] == pytest.approx(775, abs=1)
    r = tm.analyze(dsp_netlist(AREG=1, BREG=1, PREG=1))             # no MREG: 544 MHz
    assert r["fmax_mhz"] == pytest.approx(544, abs=1)


def test_bram_output_register():
    def period(reg):
        b = Builder()
        do = b.bits()
        b.cell("r", "RAMB36E2", {"CLKARDCLK": ["0"], "ADDRARDADDR": ["0"]},
               {"DOUTADOUT": do}, DOA_REG=reg)
        o = b.bits()
        b.cell("l", "LUT1", {"I0": do}, {"O": o})
        b.ff("z", o, b.bits())
        return tm.analyze(b.netlist())
    slow, fast = period(0), period(1)
    assert slow["period_ns"] - fast["period_ns"] == pytest.approx(
        M["bram_clk_to_out"] - M["bram_clk_to_out_reg"])
    assert slow["bram"][0]["DOA_REG"] == 0 and fast["bram"][0]["DOA_REG"] == 1


def test_ports_are_not_timed_and_loops_terminate():
    b = Builder()
    i, o1, o2 = b.bits(), b.bits(), b.bits()
    b.cell("ib", "IBUF", {"I": ["0"]}, {"O": i})
    b.cell("l1", "LUT2", {"I0": i, "I1": o2}, {"O": o1})
    b.cell("l2", "LUT1", {"I0": o1}, {"O": o2})
    b.ff("z", o2, b.bits())
    r = tm.analyze(b.netlist())
    assert r["paths"] == [] and r["period_ns"] == 0 and r["fmax_mhz"] is None


def test_bad_arguments_name_the_argument():
    with pytest.raises(ValueError, match="paths must be a positive integer"):
        tm.analyze(Builder().netlist(), paths=0)
    with pytest.raises(ValueError, match="period_ns must be positive"):
        tm.fmax_mhz(0)
    with pytest.raises(ValueError, match="top must be a module"):
        tm.Netlist.from_json({"modules": {"a": {}}}, "b")


# -- the clock ------------------------------------------------------------------------------
def artefact(tmp_path, module, text, fmax):
    p = tmp_path / "timing.json"
    p.write_text(json.dumps({"modules": {module: {"verilog_sha256": timing.verilog_sha256(text),
                                                  "fmax_mhz": fmax}}}))
    return p


def test_clock_is_min_of_target_and_estimate(tmp_path):
    p = artefact(tmp_path, "m", "module m; endmodule", 250.0)
    assert timing.clock_mhz("m", verilog_text="module m; endmodule", path=p) == \
        (250.0, "estimated")
    p = artefact(tmp_path, "m", "module m; endmodule", 420.0)
    assert timing.clock_mhz("m", verilog_text="module m; endmodule", path=p) == \
        (timing.TARGET_MHZ, "target")
    # stale: the Verilog changed since the estimate
    assert timing.clock_mhz("m", verilog_text="module m2; endmodule", path=p) == \
        (timing.TARGET_MHZ, "assumed")
    assert timing.status("m", path=p) == "stale" and timing.status("x", path=p) == "missing"
    man = timing.manifest_clock("m", "module m; endmodule", {"per_cycle": 2}, path=p)
    assert man["used"] == timing.TARGET_MHZ and man["throughput_per_second"] == 2 * 300e6
    with pytest.raises(ValueError, match="target must be a positive number"):
        timing.clock_mhz("m", target=0, path=p)
    with pytest.raises(ValueError, match="module must be a module name"):
        timing.clock_mhz("", path=p)


# -- freshness (no Yosys) ---------------------------------------------------------------------
@pytest.mark.parametrize("module", registry.shipped_modules())
def test_timing_artefact_is_fresh(module):
    """No estimate computed from other Verilog is quoted; the manifest's clock is the
    artefact's. A module ``make timing`` has not reached is skipped (its clock is labelled
    "assumed" everywhere), a stale one fails."""
    assert timing.TIMING_JSON.is_file(), "hdl/timing.json missing: run `make timing`"
    man = json.loads((timing.HDL / module / f"{module}.json").read_text())
    text = (timing.HDL / module / f"{module}.v").read_text()
    assert man["clock_mhz"] == timing.manifest_clock(module, text, man["throughput"]), \
        f"hdl/{module}/{module}.json clock_mhz is stale: run `make timing`"
    state = timing.status(module)
    assert state != "stale", (f"hdl/timing.json's entry for {module} was computed from other "
                              f"Verilog than hdl/{module}/{module}.v: run `make timing`")
    if state == "missing":
        assert man["clock_mhz"]["label"] == "assumed"
        pytest.skip(f"no timing estimate of {module} yet: run "
                    f"`python scripts/timing.py --module {module}`")
    e = timing.entry(module)
    assert e["fmax_mhz"] > 0 and e["levels"]["total"] >= 0 and e["paths"]
    assert man["clock_mhz"]["label"] in ("estimated", "target")


# -- end to end -------------------------------------------------------------------------------
@pytest.mark.slow
def test_make_timing_on_a_pe(tmp_path, capsys):
    script = _load("timing")
    out = tmp_path / "timing.json"
    rc = script.main(["--module", "gae_pe_il4", "--json", str(out), "--no-artefact",
                      "--vivado", str(tmp_path / "viv")])
    assert rc == 0
    text = capsys.readouterr().out
    assert "gae_pe_il4" in text and "est. Fmax" in text and "CARRY8" in text
    rec = json.loads(out.read_text())["modules"]["gae_pe_il4"]
    assert rec["fmax_mhz"] > 0 and rec["levels"]["total"] > 0
    assert rec["resources"]["dsp"] == rec["dsp"]["count"]
    tcl = (tmp_path / "viv" / "gae_pe_il4" / "timing_ooc.tcl").read_text()
    assert "synth_design -top $module" in tcl and "create_clock -period 3.333 -name clk" in tcl


def test_vivado_ooc_script_for_any_module(tmp_path):
    """The Vivado check of the estimate: a unit (no register map) constrains its own clock."""
    from rtl_gen.vivado.ooc_timing import module_timing_tcl

    for module, clock in (("gae_pe_k2", "clk"), ("replay_kernel_k16", "ap_clk")):
        man = json.loads((timing.HDL / module / f"{module}.json").read_text())
        tcl = module_timing_tcl(man, timing.HDL / module / f"{module}.v", tmp_path,
                                period_ns=1000 / 300)
        assert f"-name {clock} [get_ports {clock}]" in tcl and "-period 3.333" in tcl
        assert "report_design_analysis -logic_level_distribution" in tcl
        assert f"set module {module}" in tcl and "-mode out_of_context" in tcl
    with pytest.raises(ValueError, match="period_ns must be a positive number"):
        module_timing_tcl(man, "x.v", tmp_path, period_ns=0)
    with pytest.raises(ValueError, match="manifest must name its module and clock"):
        module_timing_tcl({}, "x.v", tmp_path, period_ns=3.0)


def test_vivado_ooc_script_runs_under_the_stubs(tmp_path):
    """The script runs to the end under tclsh with stub Vivado commands, reads the XDC it
    writes before synthesis and prints the Fmax line."""
    sys.path.insert(0, str(ROOT / "tb" / "vivado"))
    from tclstub import needs_tclsh, run_stubbed  # noqa: F401
    from rtl_gen.vivado.ooc_timing import module_timing_tcl

    if needs_tclsh.args[0]:
        pytest.skip("tclsh not on PATH")
    man = json.loads((timing.HDL / "gae_pe_k2" / "gae_pe_k2.json").read_text())
    script = tmp_path / "timing_ooc.tcl"
    script.write_text(module_timing_tcl(man, timing.HDL / "gae_pe_k2" / "gae_pe_k2.v",
                                        tmp_path, period_ns=1000 / 300))
    rec = run_stubbed(script)
    names = [c[0] for c in rec.calls]
    assert names.index("read_xdc") < names.index("synth_design") < names.index("route_design")
    xdc = next(tmp_path.rglob("clock.xdc")).read_text()
    assert "create_clock -period 3.333 -name clk [get_ports clk]" in xdc


# -- configurations of your own (--manifest) ------------------------------------------------
#: A small GAE PE (Yosys takes seconds on it), not a shipped configuration.
SMALL_PE = {"data_width": 16, "data_frac": 8, "coef_width": 12, "k": 1}


def test_manifest_targets_and_errors(tmp_path, capsys):
    """``--manifest`` of a shipped module in hdl/ times it as ``--module`` does; another
    generated configuration is timed beside its manifest; bad paths exit 2 naming the flag."""
    script = _load("timing")
    shipped = registry.shipped_modules()
    man = tmp_path / "pe_custom"
    man.mkdir()
    src = json.loads((timing.HDL / "gae_pe_k2" / "gae_pe_k2.json").read_text())
    (man / "pe_custom.json").write_text(json.dumps({**src, "module": "pe_custom",
                                                    "verilog": "pe_custom.v"}))
    (man / "pe_custom.v").write_text("module pe_custom; endmodule\n")
    names, generated = script.manifest_targets([timing.HDL / "gae_pe_k2", man], timing.HDL,
                                               shipped)
    assert names == ["gae_pe_k2"] and list(generated) == ["pe_custom"]
    assert generated["pe_custom"].verilog == man / "pe_custom.v"
    assert script.main(["--manifest", str(tmp_path / "nope")]) == 2
    assert "--manifest must be a manifest <module>.json" in capsys.readouterr().err
    other = tmp_path / "other"
    other.mkdir()
    for name in ("pe_custom.json", "pe_custom.v"):
        (other / name).write_text((man / name).read_text())
    assert script.main(["--manifest", str(man), "--manifest", str(other)]) == 2
    assert "module 'pe_custom' is named twice" in capsys.readouterr().err


def test_regenerating_keeps_a_fresh_estimate(tmp_path):
    """``python -m rtl_gen`` regenerating a configuration into its directory quotes the
    estimate of its ``<module>_timing.json`` while the Verilog is the same; other Verilog is
    "assumed" again."""
    from rtl_gen.emit import emit

    man = emit("gae-pe", SMALL_PE, tmp_path, module="pe_custom")
    assert man["clock_mhz"]["label"] == "assumed"
    assert "run scripts/timing.py --manifest" in man["clock_mhz"]["source"]
    text = (tmp_path / "pe_custom.v").read_text()
    art = timing.timing_file(tmp_path, "pe_custom")
    art.write_text(json.dumps({"modules": {"pe_custom": {
        "verilog_sha256": timing.verilog_sha256(text), "fmax_mhz": 250.0}}}))
    man = emit("gae-pe", SMALL_PE, tmp_path, module="pe_custom")
    assert man["clock_mhz"] == {**man["clock_mhz"], "estimated_fmax": 250.0, "used": 250.0,
                                "label": "estimated",
                                "source": "pe_custom_timing.json (scripts/timing.py --manifest)"}
    man = emit("gae-pe", {**SMALL_PE, "k": 2}, tmp_path, module="pe_custom")
    assert man["clock_mhz"]["label"] == "assumed"


@pytest.mark.slow
def test_timing_of_a_generated_configuration(tmp_path, capsys):
    """``scripts/timing.py --manifest DIR`` (``make timing MANIFEST=DIR``) on a configuration
    that is not shipped: the estimate goes to ``DIR/<module>_timing.json`` and the manifest's
    ``clock_mhz``, never into ``hdl/timing.json``."""
    from rtl_gen.emit import emit

    script = _load("timing")
    emit("gae-pe", SMALL_PE, tmp_path / "pe_custom", module="pe_custom")
    before = timing.TIMING_JSON.read_bytes()
    rc = script.main(["--manifest", str(tmp_path / "pe_custom"), "-j", "1",
                      "--vivado", str(tmp_path / "viv")])
    assert rc == 0
    out = capsys.readouterr().out
    assert "pe_custom" in out and "est. Fmax" in out
    assert timing.TIMING_JSON.read_bytes() == before
    art = timing.timing_file(tmp_path / "pe_custom", "pe_custom")
    text = (tmp_path / "pe_custom" / "pe_custom.v").read_text()
    e = timing.entry("pe_custom", text, path=art)
    assert e is not None and e["fmax_mhz"] > 0 and e["levels"]["total"] > 0
    man = json.loads((tmp_path / "pe_custom" / "pe_custom.json").read_text())
    assert man["clock_mhz"] == timing.manifest_clock("pe_custom", text, man["throughput"],
                                                     path=art)
    assert man["clock_mhz"]["label"] in ("estimated", "target")
    assert man["clock_mhz"]["estimated_fmax"] == e["fmax_mhz"]
    assert (tmp_path / "viv" / "pe_custom" / "timing_ooc.tcl").is_file()
