"""AxiDma, the GAE kernel's copy engine: parameters, lint, and AXI behaviour (Amaranth sim).

The DMA runs inside :class:`DmaHarness`, its intended use: the local memory port drives an
``amaranth.lib.memory.Memory`` (one-cycle read port). :class:`SimAxiRam` is a cycle-level AXI4
slave for Amaranth's simulator that checks the master side of the protocol on every cycle
(payload stable while VALID waits, INCR full-width bursts, no 4 KiB crossing, at most
``max_burst`` beats, WLAST on the burst's last beat, at most ``max_outstanding`` bursts in
flight) and inserts random stalls on every channel. Tests copy random blocks both ways and
compare with the memories' contents, with the burst list of :meth:`AxiDma.bursts`, and with
exact cycle counts when nothing stalls.
"""

import random
import subprocess

import pytest
from amaranth.back import verilog
from amaranth.hdl import Module, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In

from cocotb_util import WAIVERS
from rtl_gen.shell.dma import BOUNDARY_BYTES, AxiDma

pytestmark = pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")

P = "m_axi_gmem"


class DmaHarness(wiring.Component):
    """An :class:`AxiDma` whose local port drives a ``Memory`` (``self.mem``)."""

    def __init__(self, **params):
        self.dma = AxiDma(**params)
        d = self.dma
        self.mem = Memory(shape=unsigned(d.mem_data_width), depth=1 << d.mem_addr_width,
                          init=[])
        super().__init__({name: member for name, member in d.signature.members.items()
                          if not name.startswith("mem_")})

    def elaborate(self, platform):
        m = Module()
        m.submodules.dma = d = self.dma
        m.submodules.mem = self.mem
        wp = self.mem.write_port(granularity=8)
        rp = self.mem.read_port()
        m.d.comb += [wp.addr.eq(d.mem_addr), wp.en.eq(d.mem_we), wp.data.eq(d.mem_wdata),
                     rp.addr.eq(d.mem_addr), rp.en.eq(d.mem_re), d.mem_rdata.eq(rp.data)]
        m.d.comb += [d.cmd.valid.eq(self.cmd.valid), d.cmd.payload.eq(self.cmd.payload),
                     self.cmd.ready.eq(d.cmd.ready)]
        for name, member in d.signature.members.items():
            if name.startswith("mem_") or name == "cmd":
                continue
            if member.flow == In:
                m.d.comb += getattr(d, name).eq(getattr(self, name))
            else:
                m.d.comb += getattr(self, name).eq(getattr(d, name))
        return m


class SimAxiRam:
    """Cycle-level AXI4 slave over a sparse byte memory, checking the master's behaviour.

    ``stall``: probability of dropping a READY or VALID in a cycle; ``latency``: cycles from
    an AR handshake to its first R beat and from the last W beat to B; ``bad``: byte addresses
    whose beats answer SLVERR (``bad_writes``: only when written). Records every AR/AW
    ``(cycle, addr, beats)``.
    """

    def __init__(self, dut, *, width, max_burst, max_outstanding, stall=0.0, latency=1,
                 seed=0, bad=(), bad_writes=()):
        self.dut, self.width = dut, width
        self.nbytes = width // 8
        self.max_burst, self.max_outstanding = max_burst, max_outstanding
        self.stall, self.latency = stall, latency
        self.rng = random.Random(seed)
        self.bad, self.bad_writes = set(bad), set(bad_writes)
        self.bytes = {}
        self.ar, self.aw = [], []
        self.reads, self.writes = [], []        # pending: [ready_cycle, addr, beats_left]
        self.w_beats = []                       # write bursts awaiting W: [addr, beats, n_got]
        self.b_queue = []                       # [ready_cycle, resp]
        self.w_resp = []
        self.max_reads = self.max_writes = 0
        self.held = {}

    def s(self, name):
        return getattr(self.dut, f"{P}_{name}")

    def load(self, addr, data):
        for i, b in enumerate(data):
            self.bytes[addr + i] = b

    def dump(self, addr, n):
        return bytes(self.bytes.get(addr + i, 0) for i in range(n))

    def _check_burst(self, ctx, ch, cycle):
        addr, ln = ctx.get(self.s(f"{ch}addr")), ctx.get(self.s(f"{ch}len"))
        size, burst = ctx.get(self.s(f"{ch}size")), ctx.get(self.s(f"{ch}burst"))
        beats = ln + 1
        assert burst == 1 and 1 << size == self.nbytes, (ch, burst, size)
        assert addr % self.nbytes == 0, f"{ch} address {addr:#x} not aligned"
        assert beats <= self.max_burst, f"{ch} burst of {beats} > {self.max_burst}"
        assert addr // BOUNDARY_BYTES == (addr + beats * self.nbytes - 1) // BOUNDARY_BYTES, \
            f"{ch} burst {addr:#x}+{beats} beats crosses 4 KiB"
        return addr, beats

    def _hold(self, ctx, ch, names):
        """A VALID that was not taken must stay up with the same payload."""
        valid = ctx.get(self.s(f"{ch}valid"))
        now = tuple(ctx.get(self.s(n)) for n in names)
        prev = self.held.get(ch)
        if prev is not None:
            assert valid and now == prev, f"{ch}: VALID or payload changed before READY"
        return valid, now

    async def step(self, ctx, cycle):
        rng, st = self.rng, self.stall
        go = lambda: not (st and rng.random() < st)           # noqa: E731
        # -- drive ------------------------------------------------------------------------
        ctx.set(self.s("arready"), go())
        ctx.set(self.s("awready"), go())
        ctx.set(self.s("wready"), bool(self.w_beats) and go())
        r_beat = None
        if self.reads and self.reads[0][0] <= cycle and go():
            _, addr, left = self.reads[0]
            data = self.dump(addr, self.nbytes)
            r_beat = (addr, left == 1)
            ctx.set(self.s("rdata"), int.from_bytes(data, "little"))
            ctx.set(self.s("rresp"), 2 if addr in self.bad else 0)
            ctx.set(self.s("rlast"), left == 1)
        ctx.set(self.s("rvalid"), r_beat is not None)
        b = bool(self.b_queue) and self.b_queue[0][0] <= cycle and go()
        ctx.set(self.s("bvalid"), bool(b))
        if b:
            ctx.set(self.s("bresp"), self.b_queue[0][1])
        # -- sample -----------------------------------------------------------------------
        ar_v, ar_p = self._hold(ctx, "ar", ("araddr", "arlen"))
        aw_v, aw_p = self._hold(ctx, "aw", ("awaddr", "awlen"))
        if ar_v and ctx.get(self.s("arready")):
            addr, beats = self._check_burst(ctx, "ar", cycle)
            self.ar.append((cycle, addr, beats))
            self.reads.append([cycle + self.latency, addr, beats])
            self.held.pop("ar", None)
        else:
            self.held["ar"] = ar_p if ar_v else None
        if aw_v and ctx.get(self.s("awready")):
            addr, beats = self._check_burst(ctx, "aw", cycle)
            self.aw.append((cycle, addr, beats))
            self.w_beats.append([addr, beats, 0, 0])
            self.held.pop("aw", None)
        else:
            self.held["aw"] = aw_p if aw_v else None
        if r_beat is not None and ctx.get(self.s("rready")):
            self.reads[0][1] += self.nbytes
            self.reads[0][2] -= 1
            if not self.reads[0][2]:
                self.reads.pop(0)
        if self.w_beats and ctx.get(self.s("wvalid")) and ctx.get(self.s("wready")):
            burst = self.w_beats[0]
            addr = burst[0] + burst[2] * self.nbytes
            data = ctx.get(self.s("wdata")).to_bytes(self.nbytes, "little")
            strb = ctx.get(self.s("wstrb"))
            for i in range(self.nbytes):
                if strb >> i & 1:
                    self.bytes[addr + i] = data[i]
            burst[2] += 1
            burst[3] = max(burst[3], 2 if addr in self.bad | self.bad_writes else 0)
            assert ctx.get(self.s("wlast")) == (burst[2] == burst[1]), "WLAST misplaced"
            if burst[2] == burst[1]:
                self.b_queue.append([cycle + self.latency, burst[3]])
                self.w_beats.pop(0)
        if b and ctx.get(self.s("bready")):
            self.b_queue.pop(0)
        # In flight per direction: address handshake done, last R / B not yet delivered.
        self.max_reads = max(self.max_reads, len(self.reads))
        self.max_writes = max(self.max_writes, len(self.w_beats) + len(self.b_queue))
        assert len(self.reads) <= self.max_outstanding
        assert len(self.w_beats) + len(self.b_queue) <= self.max_outstanding


def simulate(params, testbench):
    from amaranth.sim import Simulator

    dut = DmaHarness(**params)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    result = {}

    async def bench(ctx):
        result["value"] = await testbench(ctx, dut)

    sim.add_testbench(bench)
    sim.run()
    return result["value"]


async def copy(ctx, dut, ram, cycle, *, dev_addr, mem_addr, words, to_device,
               max_cycles=20000):
    """Issue one command and run the slave until ``done``; returns (cycle, accept, done,
    error)."""
    pl = dut.cmd.payload
    ctx.set(pl.dev_addr, dev_addr)
    ctx.set(pl.mem_addr, mem_addr)
    ctx.set(pl.words, words)
    ctx.set(pl.to_device, to_device)
    ctx.set(dut.cmd.valid, 1)
    accepted = None
    for _ in range(max_cycles):
        await ram.step(ctx, cycle)
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
    assert len(d.m_axi_gmem_arid) == 2 and len(d.mem_wdata) == 128 and len(d.mem_addr) == 14
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
@pytest.mark.parametrize("stall", [0.0, 0.4])
def test_copies_both_ways(W, D, max_burst, outstanding, stall):
    """Random blocks in, then out to another address: bytes, bursts and limits as specified."""
    params = params_for(W, D, max_burst=max_burst, max_outstanding=outstanding)
    rng = random.Random(hash((W, D, max_burst, stall)) & 0xFFFF)
    Wb, Db = W // 8, D // 8
    # Word counts: single, a beat and a bit, crossing 4 KiB and max_burst; not multiples of r.
    blocks = [(1, 0x0), (W // D + 1, 0x40), (4096 // Db + 3, 0x0FC0), (700, 0x1_0000_2000)]

    async def tb(ctx, dut):
        ram = SimAxiRam(dut, width=W, max_burst=max_burst, max_outstanding=outstanding,
                        stall=stall, latency=3, seed=rng.getrandbits(16))
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

    ram = simulate(params, tb)
    if outstanding > 1 and stall == 0:
        assert ram.max_reads > 1 and ram.max_writes > 1, "never more than one burst in flight"


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
def test_exact_cycles_without_stalls(W, D):
    """One local word per cycle both ways; the fixed costs per command are what the docstring
    says (latency L of the slave, no stalls)."""
    params = params_for(W, D, max_outstanding=4)
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
    # Reads: the AR request is registered in the cycle after the command and taken in the
    # next, the first beat comes L cycles later, then one beat (r words) per r cycles back to
    # back across bursts (the next AR goes out during the current burst); the last word is
    # written in the cycle after its beat and ``done`` rises one cycle later.
    assert t_in == 2 + L + words + 2, (t_in, t_out)
    # Writes: one local read per cycle from the cycle after the command; a beat leaves 2 cycles
    # after its last read, its B comes L cycles after the last beat, ``done`` one cycle later.
    assert t_out == 1 + words + 1 + L + 2, (t_in, t_out)
    beats = -(-words // r)
    assert [(a, n) for _, a, n in ram.ar] == AxiDma.bursts(0, beats, data_width=W)
    assert [(a, n) for _, a, n in ram.aw] == AxiDma.bursts(0x10000, beats, data_width=W)
