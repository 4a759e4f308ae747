"""rtl_gen.convert: Amaranth's Verilog without all-zero initialisers, in linear time and memory.

The Verilog has the lines of Amaranth's own with :func:`drop_zero_memory_init` applied, and is
Amaranth's text byte for byte when the zero initialisers are kept (small designs: a replay
accelerator, a GAE PE, a memory with a non-zero initialiser, a dynamic bit select; so the
faster passes of :mod:`rtl_gen._amaranth_private` change nothing else), no per-word data
reaches Yosys for a zeroed memory (the RTLIL of a 2**16-leaf sum tree holds no ``$meminit`` and
stays small), the Python heap of a 2**16-leaf replay accelerator's conversion stays bounded
(Amaranth's own path peaked at several times that), dynamic bit selects add edges linear in
their width to the combinational-cycle check, and a cycle through one is still found. Amaranth's
private API is used in :mod:`rtl_gen._amaranth_private` only, which refuses another Amaranth
version; :func:`convert` then falls back to Amaranth's public converter, with a warning.
"""

import importlib.util
import re
import tracemalloc
from pathlib import Path

import amaranth
import pytest
from amaranth.back import verilog
from amaranth.hdl import CombinationalCycle, Module, Signal
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

import rtl_gen.convert
from rtl_gen import _amaranth_private as private
from rtl_gen.convert import convert, drop_zero_memory_init, rtlil_text
from rtl_gen.gae.pe import GaeProcessingElement
from rtl_gen.replay.accelerator import ReplayAccelerator
from sw.gae.spec import GaePeConfig
from sw.replay.spec import SumTreeConfig


class _Rom(wiring.Component):
    """A memory with a non-zero initialiser and one with a zero one, a read port each."""
    addr: In(4)
    a: Out(12)
    b: Out(12)

    def elaborate(self, platform):
        m = Module()
        m.submodules.rom = rom = memory.Memory(shape=12, depth=16,
                                               init=[(7 * i) % 4096 for i in range(16)])
        m.submodules.ram = ram = memory.Memory(shape=12, depth=16, init=[])
        for mem, out in ((rom, self.a), (ram, self.b)):
            port = mem.read_port(domain="comb")
            m.d.comb += [port.addr.eq(self.addr), out.eq(port.data)]
        return m


class _Select(wiring.Component):
    """``o = word.word_select(i, 8)``; with ``loop``, ``i`` depends on ``o`` (a cycle)."""
    word: In(1024)
    i: In(7)
    o: Out(8)

    def __init__(self, loop=False):
        self.loop = loop
        super().__init__()

    def elaborate(self, platform):
        m = Module()
        idx = Signal(7)
        m.d.comb += idx.eq(self.o[:7] if self.loop else self.i)
        m.d.comb += self.o.eq(self.word.word_select(idx, 8))
        return m


@pytest.mark.parametrize("make", [
    lambda: ReplayAccelerator(SumTreeConfig(fanout=4, capacity=100, priority_width=20,
                                            priority_frac=8, target_bits=20, max_batch=32)),
    lambda: GaeProcessingElement(GaePeConfig(k=3)),
    _Rom,
    _Select])
def test_same_verilog_as_amaranth_without_zero_initialisers(make, monkeypatch):
    ours = convert(make(), "top")
    theirs = verilog.convert(make(), name="top", emit_src=False)
    # Without the zero initialisers in its input, Yosys may write an always block elsewhere
    # (it does for the replay accelerator): the same lines, in an order that carries no meaning.
    assert sorted(ours.splitlines()) == sorted(drop_zero_memory_init(theirs).splitlines())
    if make is _Rom:
        assert "initial begin" in ours and "12'h007" in ours    # the non-zero one is kept
    # With them, the text is Amaranth's byte for byte: the faster passes change nothing else.
    monkeypatch.delattr(private._ModuleEmitter, "emit_memory")
    assert convert(make(), "top") == theirs


def test_zero_memories_send_no_data_to_yosys_and_heap_bounded():
    component = ReplayAccelerator(SumTreeConfig(fanout=16, capacity=1 << 16))
    tracemalloc.start()
    try:
        text = rtlil_text(component, "top")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "$meminit" not in text
    # The leaf level alone is 4096 words of 16 x 32 bits: 2 Mbit, written as text before (over
    # 2 million characters for the data alone); the pipelined tree's logic is ~1.06 million.
    assert len(text) < 1_500_000
    # Amaranth's path builds one netlist object per initial bit (2.5 million here): a 290 MB peak
    # against ours of 57 MB (65.6 MB in CI, which failed a 60 MB bound); 120 MB still separates them.
    assert peak < 120e6, peak


def test_dynamic_select_edges_are_linear():
    netlist = private.build_netlist(_Select(), "top")
    parts = [cell for cell in netlist.cells if type(cell).__name__ == "Part"]
    assert parts
    for cell in parts:
        for bit in range(cell.width):
            edges = private.comb_edges(cell, bit)
            assert len(edges) == 1024 // 8 + len(cell.offset)    # not 1024 + 7 per bit
            assert set(edges) <= set(cell.value) | set(cell.offset)


def test_cycle_through_dynamic_select_found():
    with pytest.raises(CombinationalCycle):
        convert(_Select(loop=True), "top")


def test_private_module_refuses_another_amaranth(monkeypatch):
    # Loaded afresh (not the imported module) with another version: refused before it reads a
    # private name.
    path = Path(private.__file__)
    spec = importlib.util.spec_from_file_location("_amaranth_private_check", path)
    monkeypatch.setattr(amaranth, "__version__", "0.6.0")
    with pytest.raises(ImportError, match=r"0\.5\.10.*0\.6\.0"):
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


def test_private_api_used_in_one_module_only():
    # No other file of the generators and host code names a private Amaranth module or
    # imports a private name from Amaranth.
    root = Path(private.__file__).parents[1]
    private_use = re.compile(r"amaranth(?:\.\w+)*\._\w+|from amaranth\S* import [^\n]*\b_\w+")
    users = [str(p.relative_to(root)) for d in ("rtl_gen", "sw", "scripts")
             for p in sorted((root / d).rglob("*.py")) if private_use.search(p.read_text())]
    assert users == ["rtl_gen/_amaranth_private.py"]


def test_fallback_is_amaranths_public_converter(monkeypatch):
    monkeypatch.setattr(rtl_gen.convert, "_private", None)
    monkeypatch.setattr(rtl_gen.convert, "_NO_PRIVATE", "Amaranth 0.6.0 is installed")
    with pytest.warns(RuntimeWarning, match="0.6.0"):
        ours = convert(_Rom(), "top")
    assert ours == drop_zero_memory_init(verilog.convert(_Rom(), name="top", emit_src=False))
    with pytest.warns(RuntimeWarning):
        assert "$meminit_v2" in rtlil_text(_Rom(), "top")
