"""AcceleratorShell (:mod:`rtl_gen.shell.accelerator`), fast tier: its checks, and a tiny fake core
run through it in both ``host_port`` modes in Amaranth's simulator.

:class:`CounterCore` has the four standard members (``ctrl``, ``args``, ``status``, ``host``) and
a register map with every kind of field the shell handles: run arguments (N, MODE), the shell's
STATUS.ERROR, STATUS.START_REFUSED and CYCLES, a status flag and a result the core reports,
constants (HW_*). A run counts N cycles; N = 0 and MODE.CODE = 3 are refused with error codes 1
and 2. Its memory (16 words of 32 bits) is on the host port while it is idle.

Through the shell's AXI ports (:class:`axi_sim.LiteBus`, :class:`axi_sim.SimMaster`): the
``ap_ctrl_hs`` handshake cycle by cycle (AP_START with BVALID, ``ready`` one cycle later,
AP_START falling after it, ``done`` N cycles after, the interrupt one cycle after ``done``),
AP_DONE/AP_IDLE/IP_ISR, STATUS.ERROR, START_REFUSED and CYCLES from ``ctrl``, a status field and
a result reaching their registers, the arguments reaching the core, constants reading back,
and the memory through ``s_axi_mem`` (``"axi"``: OKAY when idle, SLVERR while busy, DECERR past
the window) or the ``host`` port (``"local"``: ``enable`` low while busy, accesses ignored), the
latter with a control map that extends the core's (what a DMA shell does).
"""

import random
import types

import pytest
from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from axi_sim import LiteBus, SimMaster, clock_edge
from rtl_gen.shell.accelerator import AcceleratorShell
from rtl_gen.shell.lite_csr import OKAY
from rtl_gen.shell.mm_slave import AxiBurst, AxiResp
from rtl_gen.shell.signatures import (ArgsSignature, MemoryPortSignature, RunControlSignature,
                                      StatusSignature)
from sw.regmap import Field, Info, Register, RegisterMap

# Components built here and never elaborated: collect them while the filter hides their
# UnusedElaboratable warnings (tb/conftest.py, collect_components).
pytestmark = [pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable"),
              pytest.mark.usefixtures("collect_components")]


WORDS = 16                              # the core's memory: 16 words of 32 bits
CONFIG = types.SimpleNamespace(words=WORDS, a=7, b=200, extra=0xC0FFEE)
START, DONE, IDLE, READY = 1, 2, 4, 8   # CTRL bits


def counter_map():
    return RegisterMap.with_ap_ctrl_hs("counter", [
        Register.scalar("N", 8, doc="cycles of a run, 1..255"),
        Register("MODE", None, (Field("CODE", 0, 2, "rw"), Field("FLAG", 8, 1, "rw"))),
        Register("STATUS", None, (Field("ERROR", 0, 2, "ro"), Field("START_REFUSED", 2, 1, "ro"),
                                  Field("FLAG", 8, 1, "ro"))),
        Register.scalar("CYCLES", 32, "ro"),
        Register.scalar("RUNS", 16, "ro", doc="accepted runs"),
        Register.scalar("HW_WORDS", 32, "ro", info=Info("words")),
        Register("HW_SHAPE", None, (Field("A", 0, 8, "ro", info=Info("a")),
                                    Field("B", 16, 8, "ro", info=Info("b")))),
    ])


def kernel_map(base):
    """``base`` and two registers after it: an argument of the shell's, a constant."""
    return RegisterMap.with_ap_ctrl_hs("counter_kernel", base.user_registers + (
        Register.scalar("EXTRA", 16), Register.scalar("HW_EXTRA", 32, "ro", info=Info("extra"))))


class CounterCore(wiring.Component):
    """A run (``ctrl.start`` while idle, not in the cycle after a ``ready``) pulses ``ready``
    in the next cycle; with N = 0 or MODE.CODE = 3 it also pulses ``done`` then, with
    ``error`` 1 or 2, and changes nothing else; otherwise it is busy for N cycles, then pulses
    ``done``, counts the run in RUNS and shows its MODE.FLAG in STATUS.FLAG. ``cycles``: busy
    cycles of the last start. ``host``: 16 words, synchronous read; ``enable = ~busy`` and
    accesses while busy are ignored."""

    def __init__(self, regmap):
        super().__init__({
            "ctrl": In(RunControlSignature(error_bits=2)),
            "args": In(ArgsSignature(regmap)),
            "status": Out(StatusSignature(regmap)),
            "host": In(MemoryPortSignature(data_width=32, addr_width=4)),
        })

    def elaborate(self, platform):
        m = Module()
        ctrl, args, status, host = self.ctrl, self.args, self.status, self.host
        busy, ready, done = Signal(), Signal(), Signal()
        error, cycles, count = Signal(2), Signal(32), Signal(8)
        flag, runs = Signal(), Signal(16)
        m.d.sync += [ready.eq(0), done.eq(0)]
        with m.If(~busy):
            with m.If(ctrl.start & ~ready):
                fail = Mux(args.n == 0, 1, Mux(args.mode_code == 3, 2, 0))
                m.d.sync += [ready.eq(1), cycles.eq(0), error.eq(fail)]
                with m.If(fail != 0):
                    m.d.sync += done.eq(1)
                with m.Else():
                    m.d.sync += [busy.eq(1), count.eq(args.n), flag.eq(args.mode_flag)]
        with m.Else():
            m.d.sync += [cycles.eq(cycles + 1), count.eq(count - 1)]
            with m.If(count == 1):
                m.d.sync += [busy.eq(0), done.eq(1), runs.eq(runs + 1),
                             status.status_flag.eq(flag)]
        m.d.comb += [ctrl.busy.eq(busy), ctrl.ready.eq(ready), ctrl.done.eq(done),
                     ctrl.error.eq(error), ctrl.cycles.eq(cycles), status.runs.eq(runs)]

        m.submodules.mem = mem = Memory(shape=32, depth=WORDS, init=[])
        wp = mem.write_port(granularity=8)
        rp = mem.read_port()
        m.d.comb += [host.enable.eq(~busy),
                     wp.addr.eq(host.addr), wp.data.eq(host.wdata),
                     wp.en.eq(Mux(busy, 0, host.we)),
                     rp.addr.eq(host.addr), rp.en.eq(host.re & ~busy),
                     host.rdata.eq(rp.data)]
        return m


def constants(regmap):
    return regmap.info_values(CONFIG)


def make_shell(host_port, **kw):
    base = counter_map()
    regmap = kw.pop("regmap", base)
    kw.setdefault("constants", constants(regmap))
    kw.setdefault("mem_addr_bits", 7)       # 32 words of address space, 16 in the window
    kw.setdefault("mem_words", WORDS)
    return AcceleratorShell(CounterCore(base), base, host_port=host_port, regmap=regmap, **kw)


# -- checks ------------------------------------------------------------------------------------
class Shaped(wiring.Component):
    """A component with the given members (a core that is not one)."""

    def __init__(self, members):
        super().__init__(members)

    def elaborate(self, platform):
        return Module()


def good_members(rm):
    return {"ctrl": In(RunControlSignature(error_bits=2)), "args": In(ArgsSignature(rm)),
            "status": Out(StatusSignature(rm)),
            "host": In(MemoryPortSignature(data_width=32, addr_width=4))}


CORE_MSG = (r"core must have ctrl, args, status and host members with the signatures of "
            r"rtl_gen.shell.signatures for 'counter', not ")


@pytest.mark.parametrize("name", ["ctrl", "args", "status", "host"])
def test_refuses_a_core_without_a_member(name):
    rm = counter_map()
    members = good_members(rm)
    del members[name]
    with pytest.raises(TypeError, match=CORE_MSG):
        AcceleratorShell(Shaped(members), rm, constants=constants(rm), mem_addr_bits=7,
                         mem_words=WORDS)


@pytest.mark.parametrize("name,member", [
    ("ctrl", Out(RunControlSignature(error_bits=2))),                 # the wrong way round
    ("ctrl", In(1)),                                                  # a port, no interface
    ("ctrl", In(MemoryPortSignature(data_width=32, addr_width=4))),
    ("args", In(ArgsSignature(kernel_map(counter_map())))),           # another map's
    ("args", In(1)),
    ("status", In(StatusSignature(counter_map()))),
    ("status", Out(StatusSignature(RegisterMap.with_ap_ctrl_hs("x", [
        Register.scalar("RUNS", 8, "ro")])))),
    ("host", Out(MemoryPortSignature(data_width=32, addr_width=4))),
    ("host", In(RunControlSignature(error_bits=2))),
    ("host", In(32)),
], ids=lambda v: v if isinstance(v, str) else None)
def test_refuses_a_core_with_mismatched_signatures(name, member):
    rm = counter_map()
    members = {**good_members(rm), name: member}
    with pytest.raises(TypeError, match=CORE_MSG):
        AcceleratorShell(Shaped(members), rm, constants=constants(rm), mem_addr_bits=7,
                         mem_words=WORDS)


def test_refuses_a_regmap_that_does_not_extend_base():
    base = counter_map()
    msg = r"regmap must start with the registers of 'counter' unchanged, not "
    changed = RegisterMap.with_ap_ctrl_hs("k", (Register.scalar("N", 9),)
                                          + base.user_registers[1:])
    shorter = RegisterMap.with_ap_ctrl_hs("k", base.user_registers[:-1])
    plain = RegisterMap("k", base.registers)                          # not ap_ctrl_hs
    for regmap in (changed, shorter, plain):
        with pytest.raises(ValueError, match=msg):
            make_shell("axi", regmap=regmap, constants=constants(base))
    with pytest.raises(TypeError, match=r"base must be an ap_ctrl_hs RegisterMap, not "):
        AcceleratorShell(CounterCore(base), plain, constants={}, mem_addr_bits=7,
                         mem_words=WORDS)
    make_shell("local", regmap=kernel_map(base))                      # an extension is fine


def test_refuses_missing_constants():
    base = counter_map()
    with pytest.raises(ValueError, match=r"constants must give every constant register, not "
                                         r"miss HW_SHAPE, HW_WORDS"):
        make_shell("axi", constants={})
    with pytest.raises(ValueError, match=r"constants must give every constant register, not "
                                         r"miss HW_EXTRA$"):
        make_shell("local", regmap=kernel_map(base), constants=constants(base))


def test_other_parameter_checks():
    with pytest.raises(ValueError, match=r"host_port must be one of 'axi', 'local', not 'pcie'"):
        make_shell("pcie")
    with pytest.raises(ValueError, match=r"mem_words must be an integer in 1..16, not 17"):
        make_shell("axi", mem_words=17)
    with pytest.raises(ValueError, match=r"mem_words must be an integer in 1..16, not 0"):
        make_shell("local", mem_words=0)
    with pytest.raises(ValueError, match=r"mem_addr_bits must be a positive integer, not 0"):
        make_shell("axi", mem_addr_bits=0)


def test_members_per_host_port():
    axi, local = make_shell("axi"), make_shell("local", regmap=kernel_map(counter_map()))
    a, lo = set(axi.signature.members), set(local.signature.members)
    assert {"ap_clk", "ap_rst_n", "interrupt", "s_axi_control_awaddr",
            "s_axi_mem_awaddr", "s_axi_mem_rdata"} <= a and "host" not in a
    assert {"interrupt", "s_axi_control_awaddr", "host"} <= lo
    assert not any(n.startswith("s_axi_mem_") or n in ("ap_clk", "ap_rst_n") for n in lo)
    assert local.signature.members["host"] == In(MemoryPortSignature(data_width=32,
                                                                     addr_width=4))
    assert len(axi.s_axi_mem_araddr) == 7 and len(axi.s_axi_mem_wdata) == 32
    assert axi.regmap is axi.base and local.regmap != local.base
    assert (axi.host_port, local.host_port, axi.mem_words) == ("axi", "local", WORDS)
    assert isinstance(axi.core, CounterCore) and axi.csr.regmap is axi.regmap


# -- simulation --------------------------------------------------------------------------------
def simulate(dut, testbench, *, max_cycles=30_000):
    """Run ``testbench(ctx, bus, trace)``; ``trace[c]`` holds the core's run-control signals,
    ``enable``, AP_START, BVALID and ``interrupt`` in cycle ``c`` (all register outputs).
    ``"axi"``: the testbench toggles ``ap_clk`` and resets with ``ap_rst_n``; ``"local"``: the
    ``sync`` clock."""
    from amaranth.sim import Simulator

    sim = Simulator(dut)
    core = dut.core
    axi = dut.host_port == "axi"
    trace, finished, result = [], [], {}

    if axi:
        async def clock(ctx):
            for _ in range(max_cycles):
                if finished:
                    return
                ctx.set(dut.ap_clk, 0)
                await ctx.delay(5e-9)
                ctx.set(dut.ap_clk, 1)
                await ctx.delay(5e-9)
            raise AssertionError("simulation timed out")
        sim.add_process(clock)
    else:
        sim.add_clock(1e-8)

    async def monitor(ctx):
        sigs = {"start": core.ctrl.start, "ready": core.ctrl.ready, "done": core.ctrl.done,
                "busy": core.ctrl.busy, "enable": core.host.enable,
                "bvalid": dut.s_axi_control_bvalid, "interrupt": dut.interrupt}
        while True:
            await clock_edge(ctx, dut)
            trace.append({k: ctx.get(s) for k, s in sigs.items()})
            assert axi or len(trace) < max_cycles, "simulation timed out"

    async def bench(ctx):
        if axi:
            ctx.set(dut.ap_rst_n, 0)
            for _ in range(2):
                await clock_edge(ctx, dut)
            ctx.set(dut.ap_rst_n, 1)
        await clock_edge(ctx, dut)
        try:
            result["value"] = await testbench(ctx, LiteBus(dut, dut.regmap), trace)
        finally:
            finished.append(1)

    sim.add_testbench(monitor, background=True)
    sim.add_testbench(bench)
    sim.run()
    return result["value"]


async def run(ctx, bus, trace, *, wait=True):
    """Write CTRL.AP_START; with ``wait``, wait for the interrupt, check AP_DONE and clear
    IP_ISR. Returns the trace index where AP_START reached the core."""
    t0 = len(trace)
    await bus.wr(ctx, "CTRL", START)
    start = next(c for c in range(t0, len(trace)) if trace[c]["start"])
    if wait:
        while not ctx.get(bus.dut.interrupt):
            await bus.edge(ctx)
        assert await bus.rd(ctx, "CTRL") & DONE
        await bus.wr(ctx, "IP_ISR", 1)
        assert not ctx.get(bus.dut.interrupt)
    return start


async def status(bus, ctx):
    word = await bus.rd(ctx, "STATUS")
    return {f.name: f.get(word) for f in bus.rm["STATUS"].fields}


class HostMemory:
    """The core's memory through the shell: ``s_axi_mem`` (``"axi"``, SimMaster bursts) or the
    ``host`` port (``"local"``, one word per cycle). ``write`` returns the response (``"local"``:
    OKAY, or SLVERR when ``host.enable`` was low for some word), ``read`` ``(words, resp)``."""

    def __init__(self, dut):
        self.dut = dut

    async def write(self, ctx, word, values):
        dut = self.dut
        if dut.host_port == "axi":
            rec = await SimMaster(dut).run(ctx, writes=[(1, 4 * word, len(values) - 1, 2,
                                                         AxiBurst.INCR,
                                                         [(v, 0xF) for v in values])])
            (_, bid, resp), = rec["b"]
            assert bid == 1
            return resp
        resp = AxiResp.OKAY
        for i, v in enumerate(values):
            ctx.set(dut.host.addr, word + i)
            ctx.set(dut.host.we, 0xF)
            ctx.set(dut.host.wdata, v)
            if not ctx.get(dut.host.enable):
                resp = AxiResp.SLVERR
            await clock_edge(ctx, dut)
        ctx.set(dut.host.we, 0)
        return resp

    async def read(self, ctx, word, n):
        dut = self.dut
        if dut.host_port == "axi":
            rec = await SimMaster(dut).run(ctx, reads=[(0, 4 * word, n - 1, 2, AxiBurst.INCR)])
            return [d for _, _, d, _, _ in rec["r"]], max(rs for *_, rs, _ in rec["r"])
        out, resp = [], AxiResp.OKAY
        for i in range(n):
            ctx.set(dut.host.addr, word + i)
            ctx.set(dut.host.re, 1)
            if not ctx.get(dut.host.enable):
                resp = AxiResp.SLVERR
            await clock_edge(ctx, dut)
            ctx.set(dut.host.re, 0)
            out.append(ctx.get(dut.host.rdata))
        return out, resp


@pytest.mark.parametrize("host_port", ["axi", "local"])
def test_fake_core_through_the_shell(host_port):
    base = counter_map()
    regmap = base if host_port == "axi" else kernel_map(base)
    dut = make_shell(host_port, regmap=regmap)
    core = dut.core
    rng = random.Random(20261124)
    image = [rng.getrandbits(32) for _ in range(WORDS)]

    async def tb(ctx, bus, trace):
        mem = HostMemory(dut)
        # -- idle after reset; constants ---------------------------------------------------
        assert await bus.rd(ctx, "CTRL") == IDLE
        assert await bus.rd(ctx, "HW_WORDS") == WORDS
        assert await bus.rd(ctx, "HW_SHAPE") == 7 | 200 << 16
        await bus.wr(ctx, "HW_WORDS", 0)                        # constants ignore writes
        assert await bus.rd(ctx, "HW_WORDS") == WORDS
        assert await bus.rd(ctx, "STATUS") == 0 and await bus.rd(ctx, "RUNS") == 0
        if host_port == "local":                               # the kernel's own registers
            assert await bus.rd(ctx, "HW_EXTRA") == 0xC0FFEE
            await bus.wr(ctx, "EXTRA", 0x1234)
            assert await bus.rd(ctx, "EXTRA") == 0x1234 and ctx.get(dut.csr.extra) == 0x1234
        # -- memory while idle -------------------------------------------------------------
        assert trace[-1]["enable"] == 1
        assert await mem.write(ctx, 0, image) == AxiResp.OKAY
        assert await mem.read(ctx, 0, WORDS) == (image, AxiResp.OKAY)
        if host_port == "axi":                                 # words 16..31: past the window
            words, resp = await mem.read(ctx, WORDS - 1, 3)
            assert resp == AxiResp.DECERR and words[0] == image[-1]
        # -- arguments reach the core; one run, cycle by cycle --------------------------------
        await bus.wr(ctx, "GIER", 1)
        await bus.wr(ctx, "IP_IER", 1)
        n = 9
        await bus.wr(ctx, "N", n)
        await bus.wr(ctx, "MODE", 1 | 1 << 8)
        assert (ctx.get(core.args.n), ctx.get(core.args.mode_code),
                ctx.get(core.args.mode_flag)) == (n, 1, 1)
        t = await run(ctx, bus, trace)
        assert trace[t]["bvalid"] and not trace[t - 1]["start"]   # AP_START with BVALID
        ready = [c for c in range(t, len(trace)) if trace[c]["ready"]]
        done = [c for c in range(t, len(trace)) if trace[c]["done"]]
        busy = [c for c in range(t, len(trace)) if trace[c]["busy"]]
        irq = next(c for c in range(t, len(trace)) if trace[c]["interrupt"])
        assert ready == [t + 1] and trace[t + 1]["start"] and not trace[t + 2]["start"]
        assert busy == list(range(t + 1, t + 1 + n)) and done == [t + n + 1]
        assert irq == t + n + 2
        assert all(trace[c]["enable"] == (not trace[c]["busy"]) for c in range(t, irq + 1))
        assert await status(bus, ctx) == {"ERROR": 0, "START_REFUSED": 0, "FLAG": 1}
        assert await bus.rd(ctx, "CYCLES") == n and await bus.rd(ctx, "RUNS") == 1
        assert await bus.rd(ctx, "CTRL") == IDLE                  # AP_DONE cleared on read
        # -- refused starts: ERROR from ctrl, nothing else changes -------------------------------
        for n_arg, code, err in ((0, 0, 1), (5, 3, 2)):
            await bus.wr(ctx, "N", n_arg)
            await bus.wr(ctx, "MODE", code)
            t = await run(ctx, bus, trace)
            assert not any(trace[c]["busy"] for c in range(t, len(trace)))
            assert await status(bus, ctx) == {"ERROR": err, "START_REFUSED": 0, "FLAG": 1}
            assert await bus.rd(ctx, "CYCLES") == 0 and await bus.rd(ctx, "RUNS") == 1
        # -- a long run: memory locked, a second AP_START refused ---------------------------------
        await bus.wr(ctx, "N", 200)
        await bus.wr(ctx, "MODE", 0)
        t = await run(ctx, bus, trace, wait=False)
        while not ctx.get(core.ctrl.busy):
            await bus.edge(ctx)
        await bus.edge(ctx)                 # AP_START falls and AP_IDLE follows a cycle late
        assert await bus.rd(ctx, "CTRL") == READY                 # taken, running
        assert await bus.rd(ctx, "CTRL") == 0                     # (READY clears on read)
        new = [w ^ 0xFFFF_FFFF for w in image[:4]]
        assert await mem.write(ctx, 2, new) == AxiResp.SLVERR
        words, resp = await mem.read(ctx, 2, 4)
        assert resp == AxiResp.SLVERR
        if host_port == "axi":
            assert words == [0] * 4                                # SLVERR beats read 0
        else:
            assert not ctx.get(dut.host.enable)
        await bus.wr(ctx, "CTRL", START)                          # refused: no handshake
        assert await bus.rd(ctx, "CTRL") == 0                     # AP_START cleared
        while not ctx.get(dut.interrupt):
            await bus.edge(ctx)
        await bus.wr(ctx, "IP_ISR", 1)
        ready = [c for c in range(t, len(trace)) if trace[c]["ready"]]
        assert len(ready) == 1, "the refused start reached the core"
        assert await status(bus, ctx) == {"ERROR": 0, "START_REFUSED": 1, "FLAG": 0}
        assert await bus.rd(ctx, "CYCLES") == 200 and await bus.rd(ctx, "RUNS") == 2
        assert await mem.read(ctx, 0, WORDS) == (image, AxiResp.OKAY)   # untouched
        # -- the next accepted start clears START_REFUSED ------------------------------------
        await bus.wr(ctx, "N", 3)
        await bus.wr(ctx, "MODE", 1 << 8)
        await run(ctx, bus, trace)
        assert await status(bus, ctx) == {"ERROR": 0, "START_REFUSED": 0, "FLAG": 1}
        assert await bus.rd(ctx, "CYCLES") == 3 and await bus.rd(ctx, "RUNS") == 3
        # the interrupt is GIER & IP_ISR: disabled, a run leaves it low
        await bus.wr(ctx, "GIER", 0)
        await run(ctx, bus, trace, wait=False)
        for _ in range(10):
            await bus.edge(ctx)
        assert not ctx.get(dut.interrupt) and await bus.rd(ctx, "IP_ISR") == 1
        assert await bus.rd(ctx, "CTRL") == DONE | READY | IDLE
        return True

    assert simulate(dut, tb)
