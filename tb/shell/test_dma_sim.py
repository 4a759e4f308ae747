"""AxiDma, the GAE kernel's copy engine: parameters, lint, and AXI behaviour (Amaranth sim).

The DMA runs inside :class:`DmaHarness`, its intended use: the local memory port drives an
``amaranth.lib.memory.Memory`` (one-cycle read port). :class:`axi_ram.SimAxiRam`
(tb/axi_ram.py) is a cycle-level AXI4 slave for Amaranth's simulator that checks the master side
of the protocol on every cycle (payload stable while VALID waits, INCR full-width bursts, no
4 KiB crossing, at most ``max_burst`` beats, WLAST on the burst's last beat, at most
``max_outstanding`` bursts in flight) and inserts random stalls on every channel. Tests copy
random blocks both ways and compare with the memories' contents, with the burst list of
:meth:`AxiDma.bursts`, and with exact cycle counts when nothing stalls; also with a slave that
takes W beats before their AW, and across a reset in the middle of a copy. With
``RLK_COVERAGE=1`` the slave samples the DMA's channels for the functional coverage (role
``dma``, :class:`axi_ram.SimAxiRam`).
"""

import random
import subprocess

import pytest
from amaranth.back import verilog
from amaranth.hdl import ClockDomain, Module, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from axi_ram import SimAxiRam, read_data_delayed
from cocotb_util import WAIVERS
from rtl_gen.shell.dma import AxiDma
from rtl_gen.shell.signatures import MemoryPortSignature

# Components built here and never elaborated: collect them while the filter hides their
# UnusedElaboratable warnings (tb/conftest.py, collect_components).
pytestmark = [pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable"),
              pytest.mark.usefixtures("collect_components")]


P = "m_axi_gmem"


class DmaHarness(wiring.Component):
    """An :class:`AxiDma` whose local port ``mem`` drives a ``Memory`` (``self.mem``), its read
    data through ``mem_read_latency - 1`` registers; the port's ``enable`` is the harness port
    ``enable`` (``In(1, init=1)``)."""

    def __init__(self, **params):
        self.dma = AxiDma(**params)
        d = self.dma
        self.mem = Memory(shape=unsigned(d.mem_data_width), depth=1 << d.mem_addr_width,
                          init=[])
        members = {name: member for name, member in d.signature.members.items()
                   if name != "mem"}
        members["enable"] = In(1, init=1)
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.dma = d = self.dma
        m.submodules.mem = self.mem
        wp = self.mem.write_port(granularity=8)
        rp = self.mem.read_port()
        port = d.mem
        rdata = read_data_delayed(m, rp.data, d.mem_read_latency)
        m.d.comb += [wp.addr.eq(port.addr), wp.en.eq(port.we), wp.data.eq(port.wdata),
                     rp.addr.eq(port.addr), rp.en.eq(port.re), port.rdata.eq(rdata),
                     port.enable.eq(self.enable)]
        m.d.comb += [d.cmd.valid.eq(self.cmd.valid), d.cmd.payload.eq(self.cmd.payload),
                     self.cmd.ready.eq(d.cmd.ready)]
        for name, member in d.signature.members.items():
            if name in ("mem", "cmd"):
                continue
            if member.flow == In:
                m.d.comb += getattr(d, name).eq(getattr(self, name))
            else:
                m.d.comb += getattr(self, name).eq(getattr(d, name))
        return m


def simulate(params, testbench, *, reset=False):
    """Run ``testbench(ctx, dut)`` on a :class:`DmaHarness`; with ``reset``, the harness sits
    in a top level with a ``sync`` domain of its own and the testbench gets the domain's reset
    signal too: ``testbench(ctx, dut, rst)``."""
    from amaranth.sim import Simulator

    dut = DmaHarness(**params)
    top, extra = dut, ()
    if reset:
        top = Module()
        top.domains.sync = cd = ClockDomain("sync")
        top.submodules.dut = dut
        extra = (cd.rst,)
    sim = Simulator(top)
    sim.add_clock(1e-8)
    result = {}

    async def bench(ctx):
        result["value"] = await testbench(ctx, dut, *extra)

    sim.add_testbench(bench)
    sim.run()
    return result["value"]


async def copy(ctx, dut, ram, cycle, *, dev_addr, mem_addr, words, to_device,
               max_cycles=20000, on_cycle=None):
    """Issue one command and run the slave until ``done``; returns (cycle, accept, done,
    error). ``on_cycle(ctx, cycle)`` runs in every cycle after the slave's step."""
    pl = dut.cmd.payload
    ctx.set(pl.dev_addr, dev_addr)
    ctx.set(pl.mem_addr, mem_addr)
    ctx.set(pl.words, words)
    ctx.set(pl.to_device, to_device)
    ctx.set(dut.cmd.valid, 1)
    accepted = None
    for _ in range(max_cycles):
        await ram.step(ctx, cycle)
        if on_cycle is not None:
            on_cycle(ctx, cycle)
        if accepted is None and ctx.get(dut.cmd.ready):
            accepted = cycle
        done, error = ctx.get(dut.done), ctx.get(dut.error)
        await ctx.tick()
        if accepted is not None:
            ctx.set(dut.cmd.valid, 0)
        cycle += 1
        if done:
            return cycle, accepted, cycle - 1, error
    raise AssertionError(f"no done after {max_cycles} cycles")


def params_for(W, D, **kw):
    return dict(data_width=W, mem_data_width=D, mem_addr_width=kw.pop("mem_addr_width", 11),
                **kw)


# == parameters and lint ==========================================================================
@pytest.mark.parametrize("kwargs,msg", [
    (dict(data_width=48, mem_data_width=32, mem_addr_width=8),
     r"data_width must be one of 32, 64, 128, 256, 512, not 48"),
    (dict(data_width=64, mem_data_width=128, mem_addr_width=8),
     r"mem_data_width must be one of .* and at most data_width \(64\), not 128"),
    (dict(data_width=64, mem_data_width=64, mem_addr_width=0),
     r"mem_addr_width must be an integer from 1 to 32, not 0"),
    (dict(data_width=64, mem_data_width=64, mem_addr_width=8, addr_width=12),
     r"addr_width must be an integer from 13 to 64, not 12"),
    (dict(data_width=64, mem_data_width=64, mem_addr_width=8, max_burst=257),
     r"max_burst must be an integer from 1 to 256, not 257"),
    (dict(data_width=64, mem_data_width=64, mem_addr_width=8, max_outstanding=0),
     r"max_outstanding must be an integer from 1 to 32, not 0"),
    (dict(data_width=64, mem_data_width=64, mem_addr_width=8, mem_read_latency=9),
     r"mem_read_latency must be an integer from 1 to 8, not 9"),
    (dict(data_width=64, mem_data_width=64, mem_addr_width=8, id_width=True),
     r"id_width must be an integer from 1 to 16, not True"),
    (dict(data_width=64, mem_data_width=64, mem_addr_width=8, prefix="m__x"),
     r"prefix must be letters and digits joined by single underscores, not 'm__x'"),
])
def test_parameter_checks(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        AxiDma(**kwargs)


def test_positional_parameters_rejected():
    with pytest.raises(TypeError):
        AxiDma(512, 128, 10)


def test_ports():
    d = AxiDma(data_width=512, mem_data_width=128, mem_addr_width=14, id_width=2)
    names = set(d.signature.members)
    for ch, sigs in (("aw", "id addr len size burst valid ready"), ("w", "data strb last valid "
                     "ready"), ("b", "id resp valid ready"), ("ar", "id addr len size burst "
                     "valid ready"), ("r", "id data resp last valid ready")):
        assert {f"{P}_{ch}{s}" for s in sigs.split()} <= names
    assert len(d.m_axi_gmem_araddr) == 64 and len(d.m_axi_gmem_wstrb) == 64
    assert len(d.m_axi_gmem_arid) == 2 and len(d.mem.wdata) == 128 and len(d.mem.addr) == 14
    # the local side: the DMA is the initiator of a MemoryPortSignature; dropped reports
    assert d.signature.members["mem"] == Out(MemoryPortSignature(data_width=128,
                                                                 addr_width=14))
    assert d.mem.enable.init == 1 and d.mem.wdata.name == "mem_wdata"
    assert d.signature.members["dropped"] == Out(1)
    assert len(d.cmd.payload.words) == 15 and d.axi("rready") is d.m_axi_gmem_rready
    assert (d.max_burst, d.max_outstanding, d.prefix) == (256, 4, P)


@pytest.mark.parametrize("params", [
    params_for(512, 128), params_for(128, 128, max_outstanding=1),
    params_for(64, 32, mem_addr_width=1, addr_width=13, max_burst=1),
], ids=["w512-d128", "w128", "tiny"])
def test_verilog_lint_clean(tmp_path, params):
    for name, comp in (("axi_dma", AxiDma(**params)), ("dma_harness", DmaHarness(**params))):
        path = tmp_path / f"{name}.v"
        path.write_text(verilog.convert(comp, name=name, emit_src=False))
        res = subprocess.run(["verilator", "--lint-only", "-Wall", str(WAIVERS), str(path)],
                             capture_output=True, text=True)
        assert res.returncode == 0, res.stdout + res.stderr


def test_burst_reference():
    b = AxiDma.bursts
    assert b(0, 300, data_width=128) == [(0, 256), (4096, 44)]
    assert b(0x0FC0, 5, data_width=512) == [(0x0FC0, 1), (0x1000, 4)]
    assert b(0x1010, 3, data_width=128, max_burst=2) == [(0x1010, 2), (0x1030, 1)]
    assert b(0x1234_5678_0000, 64 * 3, data_width=512) == [
        (0x1234_5678_0000 + 4096 * k, 64) for k in range(3)]
    assert b(12, 0, data_width=64) == []


# == simulation ===================================================================================
CASES = [
    # (W, D, max_burst, max_outstanding)
    (128, 128, 256, 4),
    (512, 128, 256, 4),
    (64, 32, 4, 1),
    (256, 64, 16, 2),
]


@pytest.mark.parametrize("W,D,max_burst,outstanding", CASES,
                         ids=[f"w{c[0]}-d{c[1]}-b{c[2]}-o{c[3]}" for c in CASES])
@pytest.mark.parametrize("stall,R", [(0.0, 1), (0.4, 1), (0.0, 3), (0.4, 3)])
def test_copies_both_ways(W, D, max_burst, outstanding, stall, R):
    """Random blocks in, then out to another address: bytes, bursts and limits as specified
    (local read latency R)."""
    ram = copies_both_ways(W, D, max_burst, outstanding, stall, R)
    if outstanding > 1 and stall == 0:
        assert ram.max_reads > 1 and ram.max_writes > 1, "never more than one burst in flight"


@pytest.mark.parametrize("W,D,stall,k", [(256, 32, 0.0, None), (256, 32, 0.4, 4),
                                         (128, 64, 0.0, 0), (128, 64, 0.4, 2)])
def test_copies_with_early_w(W, D, stall, k):
    """:func:`copies_both_ways` with a slave that takes W beats before their AW (AXI lets it;
    the DMA's W beats do not wait for the AW handshake) and, for an integer k, holds AWREADY
    until WVALID has been high in more than k cycles (k = 0: the AW with the first W beat);
    W / D = 8 local words a beat keeps RREADY low for 7 cycles after each beat."""
    ram = copies_both_ways(W, D, 16, 4, stall, 1, early_w=True, aw_after_w=k)
    if k:
        assert ram.max_early_w > 0, "no W beat before its AW"
    if k == 0:
        assert ram.aw_with_w > 0, "no AW taken with a W beat"


def copies_both_ways(W, D, max_burst, outstanding, stall, R, **ram_kw):
    """Random blocks in, then out to another address, checked: bytes, bursts and limits
    (``ram_kw``: more :class:`SimAxiRam` options). Returns the slave."""
    params = params_for(W, D, max_burst=max_burst, max_outstanding=outstanding,
                        mem_read_latency=R)
    rng = random.Random(hash((W, D, max_burst, stall)) & 0xFFFF)
    Wb, Db = W // 8, D // 8
    # Word counts: single, a beat and a bit, crossing 4 KiB and max_burst; not multiples of r.
    blocks = [(1, 0x0), (W // D + 1, 0x40), (4096 // Db + 3, 0x0FC0), (700, 0x1_0000_2000)]

    async def tb(ctx, dut):
        ram = SimAxiRam(dut, width=W, max_burst=max_burst, max_outstanding=outstanding,
                        stall=stall, latency=3, seed=rng.getrandbits(16), **ram_kw)
        cycle = 0
        for words, base in blocks:
            dev = base - base % Wb + 0x10_0000 * (W == 512)
            image = bytes(rng.getrandbits(8) for _ in range(words * Db))
            ram.load(dev, image)
            ram.load(dev + len(image), b"\xee" * Wb)           # must not land in local memory
            mem0 = rng.randrange(0, 64)
            ctx.set(dut.mem.data[mem0 + words], 0x5A)
            n_ar = len(ram.ar)
            cycle, acc, done, err = await copy(ctx, dut, ram, cycle, dev_addr=dev,
                                               mem_addr=mem0, words=words, to_device=0)
            assert not err
            got = b"".join(ctx.get(dut.mem.data[mem0 + i]).to_bytes(Db, "little")
                           for i in range(words))
            assert got == image, f"{words} words from {dev:#x}"
            assert ctx.get(dut.mem.data[mem0 + words]) == 0x5A, "wrote past the block"
            beats = -(-words // (W // D))
            assert [(a, n) for _, a, n in ram.ar[n_ar:]] == \
                AxiDma.bursts(dev, beats, data_width=W, max_burst=max_burst)
            # ... and back out, to a fresh place, next to bytes that must survive.
            out = dev + 0x8000
            ram.load(out - Wb, b"\x77" * Wb)
            ram.load(out + len(image), b"\x99" * (2 * Wb))
            n_aw = len(ram.aw)
            cycle, acc, done, err = await copy(ctx, dut, ram, cycle, dev_addr=out,
                                               mem_addr=mem0, words=words, to_device=1)
            assert not err
            assert not ram.b_queue and not ram.w_beats, "done before the last B response"
            assert ram.dump(out, len(image)) == image
            assert ram.dump(out - Wb, Wb) == b"\x77" * Wb
            assert ram.dump(out + len(image), 2 * Wb) == b"\x99" * (2 * Wb), "strobes"
            assert [(a, n) for _, a, n in ram.aw[n_aw:]] == \
                AxiDma.bursts(out, beats, data_width=W, max_burst=max_burst)
        return ram

    return simulate(params, tb)


def test_zero_words_and_errors():
    """words = 0 completes at once; SLVERR on a read or a write beat sets ``error``."""
    params = params_for(128, 64)

    async def tb(ctx, dut):
        ram = SimAxiRam(dut, width=128, max_burst=256, max_outstanding=4,
                        bad={0x2000 + 16 * 5, 0x9000 + 16 * 2})
        cycle, acc, done, err = await copy(ctx, dut, ram, 0, dev_addr=0x100, mem_addr=0,
                                           words=0, to_device=0)
        assert done - acc == 2 and not err and not ram.ar
        cycle, acc, done, err = await copy(ctx, dut, ram, cycle, dev_addr=0x100, mem_addr=0,
                                           words=0, to_device=1)
        assert done - acc == 2 and not err and not ram.aw
        cycle, *_, err = await copy(ctx, dut, ram, cycle, dev_addr=0x2000, mem_addr=0,
                                    words=40, to_device=0)
        assert err
        cycle, *_, err = await copy(ctx, dut, ram, cycle, dev_addr=0x3000, mem_addr=0,
                                    words=40, to_device=0)
        assert not err, "error not cleared by the next command"
        cycle, *_, err = await copy(ctx, dut, ram, cycle, dev_addr=0x9000, mem_addr=0,
                                    words=40, to_device=1)
        assert err

    simulate(params, tb)


@pytest.mark.parametrize("W,D", [(128, 128), (512, 128)])
@pytest.mark.parametrize("R", [1, 3])
def test_exact_cycles_without_stalls(W, D, R):
    """One local word per cycle both ways; the fixed costs per command are what the docstring
    says (latency L of the slave, local read latency R, no stalls)."""
    params = params_for(W, D, max_outstanding=4, mem_read_latency=R)
    L = 3
    words = 1000
    r = W // D

    async def tb(ctx, dut):
        ram = SimAxiRam(dut, width=W, max_burst=256, max_outstanding=4, latency=L)
        ram.load(0, bytes(words * D // 8))
        cycle, acc, done, _ = await copy(ctx, dut, ram, 0, dev_addr=0, mem_addr=0,
                                         words=words, to_device=0)
        t_in = done - acc
        cycle, acc, done, _ = await copy(ctx, dut, ram, cycle, dev_addr=0x10000, mem_addr=0,
                                         words=words, to_device=1)
        return t_in, done - acc, ram

    t_in, t_out, ram = simulate(params, tb)
    # Reads: the burst planner's two stages take the two cycles after the command, the AR
    # request is registered in the third and taken in the next, the first beat comes L cycles
    # later, then one beat (r words) per r cycles back to back across bursts (the next AR goes
    # out during the current burst); the last word is written in the cycle after its beat and
    # ``done`` rises one cycle later.
    assert t_in == 4 + L + words + 2, (t_in, t_out)
    # Writes: one local read per cycle from the third cycle after the command (the W beats'
    # planner); a beat leaves R + 1 cycles after its last read, its B comes L cycles after the
    # last beat, ``done`` one cycle later.
    assert t_out == 3 + words + R + L + 2, (t_in, t_out)
    beats = -(-words // r)
    assert [(a, n) for _, a, n in ram.ar] == AxiDma.bursts(0, beats, data_width=W)
    assert [(a, n) for _, a, n in ram.aw] == AxiDma.bursts(0x10000, beats, data_width=W)


@pytest.mark.parametrize("to_device,R", [(0, 1), (1, 1), (1, 3)],
                         ids=["to-local", "to-device", "to-device-r3"])
def test_enable_low_drops_local_accesses(to_device, R):
    """While ``mem.enable`` is 0 the DMA holds ``mem.re``/``mem.we`` low and raises ``dropped``
    in each cycle a local access was due; the copy goes on with the cycles of an undisturbed
    one. Enable is low for the first half of the accesses of a 40-word copy (W = 2 D), then
    for all of them: exactly the words accessed while enable was 1 move."""
    W, D, L, words = 128, 64, 3, 40
    params = params_for(W, D, mem_read_latency=R)
    rng = random.Random(5 + to_device)
    Db = D // 8
    image = bytes(rng.getrandbits(8) for _ in range(words * Db))
    old = [rng.getrandbits(D) for _ in range(words)]

    async def tb(ctx, dut):
        ram = SimAxiRam(dut, width=W, max_burst=256, max_outstanding=4, latency=L)
        port = dut.dma.mem
        results = []
        for gate in ("half", "all"):
            for i, v in enumerate(old):
                ctx.set(dut.mem.data[i], v)
            ram.load(0x1000, image if not to_device else bytes(len(image)))
            log = {"due": 0, "dropped": [], "access": []}

            def on_cycle(ctx, cycle):
                # an access is due in a cycle the DMA raises re/we or dropped; switch enable
                # from the access count, so the split does not depend on latencies
                ctx.set(dut.enable, gate == "half" and log["due"] >= words // 2)
                re, we = ctx.get(port.re), ctx.get(port.we)
                drop = ctx.get(dut.dropped)
                assert not ((re or we) and drop), f"access and drop in cycle {cycle}"
                if re or we:
                    assert ctx.get(dut.enable), f"access while enable is 0, cycle {cycle}"
                    log["access"].append(ctx.get(port.addr))
                if drop:
                    log["dropped"].append(ctx.get(port.addr))
                log["due"] += bool(re or we or drop)

            _, acc, done, err = await copy(ctx, dut, ram, 0, dev_addr=0x1000, mem_addr=0,
                                           words=words, to_device=to_device,
                                           on_cycle=on_cycle)
            ctx.set(dut.enable, 1)
            results.append((gate, done - acc, err, log, ram))
            if to_device:
                # the words read while enabled reach the device; the others are undefined
                got = ram.dump(0x1000, words * Db)
                for a in log["access"]:
                    assert got[a * Db:(a + 1) * Db] == \
                        ctx.get(dut.mem.data[a]).to_bytes(Db, "little"), a
            else:
                for a in range(words):
                    want = int.from_bytes(image[a * Db:(a + 1) * Db], "little") \
                        if a in log["access"] else old[a]
                    assert ctx.get(dut.mem.data[a]) == want, a
        return results

    for gate, cycles, err, log, _ in simulate(params, tb):
        assert not err
        assert log["due"] == words, (gate, log["due"])
        first = words // 2 if gate == "half" else words      # first word accessed
        assert log["dropped"] == list(range(first)), gate
        assert log["access"] == list(range(first, words)), gate
        # dropping does not change the copy's timing (docstring: N + L + 6 cycles in, N + L
        # + 5 + R out)
        assert cycles == words + L + (5 + R if to_device else 6), (gate, cycles)


@pytest.mark.parametrize("to_device", [0, 1], ids=["to-local", "to-device"])
def test_reset_mid_copy(to_device):
    """The ``sync`` domain's reset for 3 cycles while bursts of a copy are in flight (and once
    while idle, before the first command): the DMA drops the copy (``busy`` low, no VALID on
    any channel after the reset; the slave drops its bursts too) and then copies both ways as
    specified: bytes and bursts."""
    W, D, L = 128, 64, 3
    params = params_for(W, D, max_burst=16, max_outstanding=4)
    rng = random.Random(11 + to_device)
    Db = D // 8

    async def tb(ctx, dut, rst):
        ram = SimAxiRam(dut, width=W, max_burst=16, max_outstanding=4, latency=L, rst=rst)
        cycle = 0

        async def run(n, reset=False):
            nonlocal cycle
            ctx.set(rst, reset)
            for _ in range(n):
                await ram.step(ctx, cycle)
                await ctx.tick()
                ctx.set(dut.cmd.valid, 0)
                cycle += 1
            ctx.set(rst, 0)

        await run(3, reset=True)                     # while idle
        pl = dut.cmd.payload
        for k, v in (("dev_addr", 0x2000), ("mem_addr", 0), ("words", 400),
                     ("to_device", to_device)):
            ctx.set(getattr(pl, k), v)
        ctx.set(dut.cmd.valid, 1)
        await run(40)
        assert ctx.get(dut.busy)
        if to_device:
            assert ram.w_beats or ram.b_queue, "no write burst in flight"
        else:
            assert ram.reads, "no read burst in flight"
        await run(3, reset=True)
        assert not ctx.get(dut.busy)
        assert not any(ctx.get(ram.s(f"{ch}valid")) for ch in ("ar", "aw", "w"))
        n_ar, n_aw = len(ram.ar), len(ram.aw)
        words = 100
        image = bytes(rng.getrandbits(8) for _ in range(words * Db))
        ram.load(0x5000, image)
        cycle, _, _, err = await copy(ctx, dut, ram, cycle, dev_addr=0x5000, mem_addr=0,
                                      words=words, to_device=0)
        assert not err
        assert b"".join(ctx.get(dut.mem.data[i]).to_bytes(Db, "little")
                        for i in range(words)) == image
        cycle, _, _, err = await copy(ctx, dut, ram, cycle, dev_addr=0x9000, mem_addr=0,
                                      words=words, to_device=1)
        assert not err and ram.dump(0x9000, len(image)) == image
        beats = words * D // W
        assert [(a, n) for _, a, n in ram.ar[n_ar:]] == \
            AxiDma.bursts(0x5000, beats, data_width=W, max_burst=16)
        assert [(a, n) for _, a, n in ram.aw[n_aw:]] == \
            AxiDma.bursts(0x9000, beats, data_width=W, max_burst=16)

    simulate(params, tb, reset=True)
