"""rtl_gen.convert.shared_instance: a component converted once per configuration.

A design with N equal tensor units holds one module definition per distinct configuration,
instantiated N times, so its RTLIL grows by an instance cell, not by a tensor unit, per unit;
in an emitted learner every GEMM stage instantiates the module of its configuration and
nothing else defines one, and an emitted GAE accelerator defines its PE once. Outside
conversion (Amaranth's simulator and Verilog backend, and the conversion's fallback to it) the
component elaborates itself; a shared component on a domain other than ``sync`` is refused.
(Cycle-exact equality of the emitted learners: tb/learner's cocotb tests.)
"""

import re
from collections import Counter

import pytest
from amaranth.back import verilog
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

import rtl_gen.convert
from rtl_gen.convert import convert, drop_zero_memory_init, rtlil_text, shared_instance
from rtl_gen.emit import emit
from rtl_gen.learner.tensor_unit import TensorUnit
from sw.learner.numerics import LearnerNumerics
from sw.learner.schedule import stages
from sw.learner.spec import LearnerConfig

TU = LearnerNumerics(sizes=(4, 8, 2), max_k=16).tensor_unit("fw", rows=2, cols=3)
TU_OTHER = LearnerNumerics(sizes=(4, 8, 2), max_k=16).tensor_unit("wa", rows=2, cols=3)


class _Units(wiring.Component):
    """``configs``' tensor units side by side, their inputs and outputs chained."""
    go: In(1)
    busy: Out(1)

    def __init__(self, configs):
        self.configs = configs
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        units = [TensorUnit(c) for c in self.configs]
        prev = self.go
        for n, tu in enumerate(units):
            m.submodules[f"tu{n}"] = tu
            m.d.comb += [tu.i.valid.eq(prev), tu.i.payload.eq(n), tu.o.ready.eq(1)]
            prev = tu.o.valid
        m.d.comb += self.busy.eq(prev)
        return m


def _definitions(text):
    return re.findall(r"^module \\?(\S+)", text, re.M)


def test_equal_units_share_one_module():
    rtlil = rtlil_text(_Units([TU, TU, TU_OTHER, TU]), "top")
    modules = re.findall(r"^module \\(\S+)", rtlil, re.M)
    assert sorted(modules) == ["top", "top.tensor_unit_2x3", "top.tensor_unit_2x3_1"]
    cells = Counter(re.findall(r"^  cell \\(top\.tensor_unit\S*) ", rtlil, re.M))
    assert cells == {"top.tensor_unit_2x3": 3, "top.tensor_unit_2x3_1": 1}


def test_rtlil_grows_by_instances_not_units():
    one, six = (len(rtlil_text(_Units([TU] * n), "top")) for n in (1, 6))
    unit = len(rtlil_text(TensorUnit(TU), "u"))
    assert six - one < unit / 10


def test_whole_unit_and_amaranth_backend_elaborate_in_full():
    # The component being converted is never replaced by an instance of itself, and
    # Amaranth's own backend (no conversion scope) sees the tensor unit's logic.
    assert _definitions(rtlil_text(TensorUnit(TU), "u")) == ["u"]
    assert "tensor_unit" not in verilog.convert(_Units([TU, TU]), name="top", emit_src=False)


def test_fallback_elaborates_in_full(monkeypatch):
    # Without rtl_gen._amaranth_private (another Amaranth), convert is Amaranth's backend.
    monkeypatch.setattr(rtl_gen.convert, "_private", None)
    monkeypatch.setattr(rtl_gen.convert, "_NO_PRIVATE", "Amaranth 0.6.0 is installed")
    with pytest.warns(RuntimeWarning):
        text = convert(_Units([TU, TU]), "top")
    assert "tensor_unit" not in text
    assert text == drop_zero_memory_init(verilog.convert(_Units([TU, TU]), name="top",
                                                         emit_src=False))


class _FastDomain(wiring.Component):
    a: In(1)
    b: Out(1)

    def elaborate(self, platform):
        shared = shared_instance(self, "fast", "fast", _FastDomain)
        if shared is not None:
            return shared
        m = Module()
        m.d.fast += self.b.eq(self.a)
        return m


class _UsesFast(wiring.Component):
    a: In(1)
    b: Out(1)

    def elaborate(self, platform):
        m = Module()
        m.submodules.f = f = _FastDomain()
        m.d.comb += [f.a.eq(self.a), self.b.eq(f.b)]
        return m


def test_other_domain_refused():
    with pytest.raises(ValueError, match="fast_clk"):
        rtlil_text(_UsesFast(), "top")


@pytest.mark.parametrize("params", [
    {"sizes": [3, 4, 2], "array": 2, "max_batch": 8, "sub_batch": 2, "loss": "mse"},
    {"sizes": [4, 9, 6, 2], "array": 4, "max_batch": 16, "sub_batch": 8, "dp": 2,
     "stage_arrays": "fw:2x4,tfw:4x2,bw1:2x2,wa:2x4,wa2:4x2"},
])
def test_learner_defines_each_tensor_unit_once(tmp_path, params):
    cfg = LearnerConfig.from_dict(params)
    gemms = [st.name for st in stages(cfg) if st.kind in ("fw", "tfw", "bw", "wa")]
    text = (tmp_path / emit("learner", params, tmp_path)["verilog"]).read_text()
    defined = [d for d in _definitions(text) if ".tensor_unit_" in d]
    assert len(defined) == len(set(defined)) == len({cfg.stage_tensor_unit(s) for s in gemms})
    used = Counter(re.findall(r"^  \\(learner\.tensor_unit_\S*) +\S+ \(", text, re.M))
    assert set(used) == set(defined) and sum(used.values()) == len(gemms)
    assert "tensor_unit" not in " ".join(d for d in _definitions(text) if d not in defined)


@pytest.mark.parametrize("n_pe", [1, 3])
def test_gae_accelerator_defines_its_pe_once(tmp_path, n_pe):
    params = {"n_pe": n_pe, "max_trajectories": 4, "capacity": 8}
    text = (tmp_path / emit("gae-accel", params, tmp_path)["verilog"]).read_text()
    assert [d for d in _definitions(text) if "gae_pe" in d] == ["gae_accel.gae_pe"]
    used = re.findall(r"^  \\(gae_accel\.gae_pe) +\S+ \(", text, re.M)
    assert len(used) == n_pe
