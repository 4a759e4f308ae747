"""AxiMemorySlave, thorough tier: random AXI traffic from cocotbext-axi under Verilator.

The slave runs inside :class:`axi_ram.AxiRamHarness`, as in the fast tier
(tb/shell/test_mm_slave_sim.py). cocotbext-axi's ``AxiMaster``, data widths 32 and 128: random
reads and writes of random lengths, alignments and sizes with random stalls on every channel,
concurrent transactions with IDs, ``enable = 0``, out-of-range accesses, FIXED/WRAP bursts,
throughput in cycles, beats without strobes, long stalls on every channel with reads queued
behind them, and reset in the middle of transfers. With ``RLK_COVERAGE=1`` every test samples
the port (:func:`fcov.cocotb_monitor.start_axi_monitor`, role ``mm_slave``).
"""

import random

import pytest

from axi_ram import AxiRamHarness
from cocotb_util import load_manifest, run_component
from rtl_gen.shell.mm_slave import AxiMemorySlave, AxiResp

pytestmark = pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")

PREFIX = "s_axi_mem"


def random_pause(rng, p):
    """Endless pause generator for cocotbext-axi channels: True (stall) with probability p."""
    while True:
        yield rng.random() < p


RTL_CONFIGS = [
    dict(data_width=32, addr_width=16, id_width=4, depth=1024),    # 4 KiB in 64 KiB
    dict(data_width=128, addr_width=20, id_width=6, depth=700,     # 10.9 KiB in 1 MiB, the
         mem_read_latency=3),                                      # cores' read latency
]


@pytest.mark.slow
@pytest.mark.parametrize("params", RTL_CONFIGS, ids=lambda p: f"w{p['data_width']}")
def test_mm_slave_rtl(params):
    run_component(AxiRamHarness(**params), f"axi_ram_w{params['data_width']}", __file__,
                  manifest={"params": params}, seed=20261122)


try:
    import cocotb
except ImportError:  # pragma: no cover
    cocotb = None


class TB:
    """Clock, reset, cocotbext-axi master, memory model and a cycle-counting bus monitor."""

    def __init__(self, dut):
        from cocotb.clock import Clock
        from cocotbext.axi import AxiBus, AxiMaster

        self.dut = dut
        self.cfg = load_manifest()["params"]
        self.read_latency = AxiMemorySlave(**self.cfg).read_latency
        self.nbytes = self.cfg["data_width"] // 8
        self.mem_bytes = self.cfg["depth"] * self.nbytes
        self.space = 1 << self.cfg["addr_width"]
        self.model = bytearray(self.mem_bytes)
        self.rng = random.Random(cocotb.RANDOM_SEED)
        dut._log.info("config %s, seed %d", self.cfg, cocotb.RANDOM_SEED)
        cocotb.start_soon(Clock(dut.clk, 4, unit="ns", impl="gpi").start())
        dut.enable.value = 1
        self.axi = AxiMaster(AxiBus.from_prefix(dut, PREFIX), dut.clk, dut.rst)
        self.cycle = 0
        self.hs = {ch: [] for ch in ("aw", "w", "b", "ar", "r")}
        self.accesses = 0
        self.accesses_disabled = 0
        cocotb.start_soon(self._monitor())
        from fcov.cocotb_monitor import start_axi_monitor

        start_axi_monitor(dut, dut.clk, dut.rst, {PREFIX: "mm_slave"})

    def channels(self):
        w, r = self.axi.write_if, self.axi.read_if
        return [w.aw_channel, w.w_channel, w.b_channel, r.ar_channel, r.r_channel]

    def backpressure(self, p):
        """Random stalls with probability p on all five channels (p = 0: none)."""
        for ch in self.channels():
            if p:
                ch.set_pause_generator(random_pause(random.Random(self.rng.getrandbits(32)), p))
            else:
                ch.clear_pause_generator()
                ch.pause = False        # the generator may have stopped in a pause

    async def reset(self):
        from cocotb.triggers import ClockCycles

        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, 3)
        self.dut.rst.value = 0
        await ClockCycles(self.dut.clk, 2)

    async def _monitor(self):
        from cocotb.triggers import FallingEdge

        d = self.dut
        sig = {ch: (getattr(d, f"{PREFIX}_{ch}valid"), getattr(d, f"{PREFIX}_{ch}ready"))
               for ch in self.hs}
        while True:
            await FallingEdge(d.clk)
            self.cycle += 1
            for ch, (v, r) in sig.items():
                if v.value and r.value:
                    self.hs[ch].append(self.cycle)
            re, we = int(d.dbg_mem_re.value), int(d.dbg_mem_we.value)
            assert not (re and we), "memory read and write in the same cycle"
            if re or we:
                self.accesses += 1
                if not d.enable.value:
                    self.accesses_disabled += 1

    # -- model ------------------------------------------------------------------------------
    def expect_write(self, addr, data):
        """Apply a write to the model; return the expected response."""
        end = min(addr + len(data), self.mem_bytes)
        if addr < end:
            self.model[addr:end] = data[:end - addr]
        return AxiResp.OKAY if addr + len(data) <= self.mem_bytes else AxiResp.DECERR

    def expect_read(self, addr, length):
        data = bytes(self.model[addr:addr + length])
        data += bytes(length - len(data))
        return data, AxiResp.OKAY if addr + length <= self.mem_bytes else AxiResp.DECERR

    async def write(self, addr, data, **kw):
        exp = self.expect_write(addr, data)
        res = await self.axi.write(addr, data, **kw)
        assert res.resp == exp, f"write {addr:#x}+{len(data)}: {res.resp!r}, expected {exp!r}"

    async def read(self, addr, length, **kw):
        data, exp = self.expect_read(addr, length)
        res = await self.axi.read(addr, length, **kw)
        assert res.resp == exp, f"read {addr:#x}+{length}: {res.resp!r}, expected {exp!r}"
        assert res.data == data, f"read {addr:#x}+{length}: data differs"

    def sig(self, name):
        """The value of port ``<PREFIX>_<name>``."""
        return int(getattr(self.dut, f"{PREFIX}_{name}").value)

    def random_span(self, max_len, *, beyond=0):
        """A random (addr, length) inside the memory (or up to ``beyond`` bytes past it)."""
        length = self.rng.randint(1, max_len)
        top = min(self.mem_bytes + beyond, self.space) - length
        return self.rng.randint(0, max(top, 0)), length


async def _setup(dut):
    tb = TB(dut)
    await tb.reset()
    # Known contents to start from.
    await tb.write(0, bytes(tb.rng.getrandbits(8) for _ in range(tb.mem_bytes)))
    return tb


if cocotb is not None:
    @cocotb.test()
    @cocotb.parametrize(stall=[0.0, 0.3])
    async def random_reads_and_writes(dut, stall):
        """Random lengths, alignments and sizes (full and narrow), random stalls: data, resp."""
        tb = await _setup(dut)
        tb.backpressure(stall)
        max_size = (tb.nbytes - 1).bit_length()
        for _ in range(120):
            size = max_size if tb.rng.random() < 0.7 else tb.rng.randint(0, max_size - 1)
            addr, length = tb.random_span(min(1 << size, 4) * 100, beyond=64)
            if tb.rng.random() < 0.5:
                data = bytes(tb.rng.getrandbits(8) for _ in range(length))
                await tb.write(addr, data, size=size)
            else:
                await tb.read(addr, length, size=size)
        tb.backpressure(0)
        await tb.read(0, tb.mem_bytes)

    @cocotb.test()
    async def concurrent_transactions(dut):
        """Many reads and writes in flight at once on disjoint regions, random IDs and stalls."""
        from cocotb.triggers import Combine

        tb = await _setup(dut)
        tb.backpressure(0.2)
        n_ids = 1 << tb.cfg["id_width"]
        slot = tb.mem_bytes // 16
        ops = []
        for k in range(16):
            base = k * slot + tb.rng.randint(0, slot // 4)
            length = tb.rng.randint(1, slot - (base - k * slot))
            tid = tb.rng.randrange(n_ids)
            if k % 2:
                data = bytes(tb.rng.getrandbits(8) for _ in range(length))
                tb.expect_write(base, data)
                ops.append(("w", base, data, tb.axi.init_write(base, data, awid=tid)))
            else:
                ops.append(("r", base, tb.expect_read(base, length)[0],
                            tb.axi.init_read(base, length, arid=tid)))
        await Combine(*[ev.wait() for *_, ev in ops])
        for kind, base, data, ev in ops:
            assert ev.data.resp == AxiResp.OKAY, (kind, base)
            if kind == "r":
                assert ev.data.data == data, f"read at {base:#x} differs"
        tb.backpressure(0)
        await tb.read(0, tb.mem_bytes)

    @cocotb.test()
    async def enable_low_locks_memory(dut):
        """enable = 0: every access answers SLVERR, reads return 0, the memory is untouched."""
        from cocotb.triggers import ClockCycles

        tb = await _setup(dut)
        before = bytes(tb.model)
        dut.enable.value = 0
        await ClockCycles(dut.clk, 1)
        accesses = tb.accesses
        for _ in range(8):
            addr, length = tb.random_span(700)
            res = await tb.axi.write(addr, bytes(tb.rng.getrandbits(8) for _ in range(length)))
            assert res.resp == AxiResp.SLVERR
            res = await tb.axi.read(addr, length)
            assert res.resp == AxiResp.SLVERR and res.data == bytes(length)
        assert tb.accesses == accesses and tb.accesses_disabled == 0
        dut.enable.value = 1
        await tb.read(0, tb.mem_bytes)
        assert bytes(tb.model) == before

    @cocotb.test()
    async def out_of_range(dut):
        """Beats at or above depth answer DECERR and do not alias into the memory."""
        tb = await _setup(dut)
        end = tb.mem_bytes
        for addr, length in ((end - 5, 40), (end, 16), (end + 3 * tb.nbytes + 1, 9),
                             (tb.space - 64, 64), (end - 2 * tb.nbytes, 2 * tb.nbytes)):
            await tb.write(addr, bytes(tb.rng.getrandbits(8) for _ in range(length)))
            await tb.read(addr, length)
        await tb.read(0, tb.mem_bytes)     # nothing aliased (the model was not touched)

    @cocotb.test()
    async def fixed_and_wrap_bursts(dut):
        """FIXED writes keep the last beat and reads repeat the word; WRAP wraps at its span."""
        from cocotbext.axi import AxiBurstType

        tb = await _setup(dut)
        nb = tb.nbytes
        words = [bytes(tb.rng.getrandbits(8) for _ in range(nb)) for _ in range(16)]
        # FIXED, full width: 5 beats to one word
        res = await tb.axi.write(8 * nb, b"".join(words[:5]), burst=AxiBurstType.FIXED)
        assert res.resp == AxiResp.OKAY
        tb.expect_write(8 * nb, words[4])
        res = await tb.axi.read(8 * nb, 3 * nb, burst=AxiBurstType.FIXED)
        assert res.data == words[4] * 3
        # WRAP of 4 and 8 beats starting mid-span (cocotbext-axi sends the beats in order and
        # its own address bookkeeping is linear, which is fine for full-width beats).
        for beats, start in ((4, 2), (8, 5), (16, 15), (2, 1)):
            base = 32 * nb
            addr = base + start * nb
            data = words[:beats]
            res = await tb.axi.write(addr, b"".join(data), burst=AxiBurstType.WRAP)
            assert res.resp == AxiResp.OKAY
            for i, w in enumerate(data):
                tb.expect_write(base + (start + i) % beats * nb, w)
            await tb.read(base, beats * nb)
            res = await tb.axi.read(addr, beats * nb, burst=AxiBurstType.WRAP)
            assert res.data == b"".join(tb.model[base + (start + i) % beats * nb:][:nb]
                                        for i in range(beats))
        # A WRAP of 5 beats is not a legal burst: SLVERR, memory untouched
        res = await tb.axi.write(64 * nb, b"".join(words[:5]), burst=AxiBurstType.WRAP)
        assert res.resp == AxiResp.SLVERR
        await tb.read(0, tb.mem_bytes)

    @cocotb.test()
    async def throughput(dut):
        """256-beat bursts move one beat per cycle: 256 + a few cycles, back to back N + 1."""
        tb = await _setup(dut)
        nb = tb.nbytes
        n = 256 * nb
        data = bytes(tb.rng.getrandbits(8) for _ in range(n))
        assert n <= tb.mem_bytes
        base = 0
        for ch in tb.hs.values():
            ch.clear()
        await tb.write(base, data)
        aw, w, b = tb.hs["aw"], tb.hs["w"], tb.hs["b"]
        assert len(aw) == 1 and len(w) == 256
        assert w[-1] - w[0] == 255, "W beats not one per cycle"
        wr_cycles = b[0] - aw[0] + 1
        await tb.read(base, n)
        ar, r = tb.hs["ar"], tb.hs["r"]
        assert r[-1] - r[0] == 255, "R beats not one per cycle"
        rd_cycles = r[-1] - ar[0] + 1
        dut._log.info("256-beat write: AW to B %d cycles (W %d..%d after AW, B %d after last W)",
                      wr_cycles, w[0] - aw[0], w[-1] - aw[0], b[0] - w[-1])
        dut._log.info("256-beat read: AR to last R %d cycles (first R %d after AR)",
                      rd_cycles, r[0] - ar[0])
        assert wr_cycles == 256 + 1 + AxiMemorySlave.write_response_latency
        assert r[0] - ar[0] == tb.read_latency
        assert rd_cycles == 256 + tb.read_latency
        # Back-to-back bursts (cocotbext-axi splits at 4 KiB): N + 1 cycles per burst
        span = min(tb.mem_bytes // 4096 * 4096, 4 * 4096) or 2048
        blen = min(256, 4096 // nb)
        for ch in tb.hs.values():
            ch.clear()
        await tb.read(0, span)
        ar, r = tb.hs["ar"], tb.hs["r"]
        k = span // (blen * nb)
        assert len(ar) == k and len(r) == k * blen
        rd_total = r[-1] - ar[0] + 1
        dut._log.info("%d x %d-beat reads: %d cycles (%.3f beats/cycle)",
                      k, blen, rd_total, k * blen / rd_total)
        assert rd_total <= k * (blen + 1) + tb.read_latency
        for ch in tb.hs.values():
            ch.clear()
        await tb.write(0, bytes(tb.rng.getrandbits(8) for _ in range(span)))
        aw, b = tb.hs["aw"], tb.hs["b"]
        wr_total = b[-1] - aw[0] + 1
        dut._log.info("%d x %d-beat writes: %d cycles (%.3f beats/cycle)",
                      k, blen, wr_total, k * blen / wr_total)
        assert wr_total <= k * (blen + 1) + AxiMemorySlave.write_response_latency + 1
        await tb.read(0, tb.mem_bytes)

    @cocotb.test()
    async def zero_strobes_and_long_stalls(dut):
        """Beats without strobes (cocotbext-axi writes no bytes at an unaligned address as one
        beat with WSTRB 0): OKAY, nothing written. R held for 12 cycles behind a burst longer
        than the R queue: AW, W and AR wait as long. B held while the next write waits. Four
        single-beat reads behind a held R: each AR is taken once the one before is issued, so
        up to three wait in the R queue. Every transfer completes as the model says."""
        from cocotb.triggers import ClockCycles, Combine

        tb = await _setup(dut)
        nb = tb.nbytes
        for k in range(1, nb, max(1, nb // 4)):
            await tb.write(5 * nb + k, b"")
        await tb.read(0, 8 * nb)
        wr, rd = tb.axi.write_if, tb.axi.read_if
        rnd = lambda n: bytes(tb.rng.getrandbits(8) for _ in range(n))       # noqa: E731

        rd.r_channel.pause = True
        long_read = tb.axi.init_read(0, 16 * nb)
        await ClockCycles(dut.clk, 2)
        data = rnd(2 * nb)
        write = tb.axi.init_write(32 * nb, data)
        short_read = tb.axi.init_read(40 * nb, nb)
        await ClockCycles(dut.clk, 12)
        assert [tb.sig(s) for s in ("rvalid", "awvalid", "awready", "wvalid", "wready",
                                    "arvalid", "arready")] == [1, 1, 0, 1, 0, 1, 0]
        rd.r_channel.pause = False
        await Combine(long_read.wait(), write.wait(), short_read.wait())
        assert long_read.data.data == tb.expect_read(0, 16 * nb)[0]
        assert write.data.resp == tb.expect_write(32 * nb, data) == AxiResp.OKAY
        assert short_read.data.data == tb.expect_read(40 * nb, nb)[0]

        wr.b_channel.pause = True
        first, second = rnd(nb), rnd(3 * nb)
        ops = [tb.axi.init_write(48 * nb, first), tb.axi.init_write(56 * nb, second)]
        await ClockCycles(dut.clk, 12)
        assert [tb.sig(s) for s in ("bvalid", "bready", "wvalid", "wready")] == [1, 0, 1, 0]
        wr.b_channel.pause = False
        await Combine(*[ev.wait() for ev in ops])
        assert [ev.data.resp for ev in ops] == [tb.expect_write(48 * nb, first),
                                                tb.expect_write(56 * nb, second)]

        rd.r_channel.pause = True
        tb.hs["ar"].clear()
        ops = [tb.axi.init_read(k * 3 * nb, nb) for k in range(4)]
        await ClockCycles(dut.clk, 24)
        assert len(tb.hs["ar"]) == 4 and tb.sig("rvalid") and not tb.sig("rready")
        rd.r_channel.pause = False
        await Combine(*[ev.wait() for ev in ops])
        for k, ev in enumerate(ops):
            assert ev.data.data == tb.expect_read(k * 3 * nb, nb)[0], k
        await tb.read(0, tb.mem_bytes)

    @cocotb.test()
    async def reset_mid_transfer(dut):
        """Reset while a write waits for its W beats, while its B is held, in the middle of a
        burst's W beats, and while a read's R beats are held: cocotbext-axi drops the
        operation; the memory keeps exactly the beats written before the reset (a prefix of
        the burst), and the slave works as before afterwards."""
        from cocotb.triggers import ClockCycles

        tb = await _setup(dut)
        nb = tb.nbytes
        wr, rd = tb.axi.write_if, tb.axi.read_if
        base = 64 * nb
        for phase in ("w", "b", "mid", "r"):
            old = bytes(tb.model[base:base + 32 * nb])
            new = bytes(b ^ 0xFF for b in old)
            hold = {"w": wr.w_channel, "b": wr.b_channel, "r": rd.r_channel}.get(phase)
            if hold is not None:
                hold.pause = True
            else:
                wr.w_channel.set_pause_generator(random_pause(random.Random(7), 0.5))
            for ch in tb.hs.values():
                ch.clear()
            if phase == "r":
                task = cocotb.start_soon(tb.axi.read(base, 32 * nb))
            else:
                task = cocotb.start_soon(tb.axi.write(base, new))
            await ClockCycles(dut.clk, {"b": 40, "mid": 12}.get(phase, 8))
            if phase == "mid":
                assert 0 < len(tb.hs["w"]) < 32, f"{len(tb.hs['w'])} W beats at the reset"
            if phase in ("w", "r"):
                assert len(tb.hs["aw" if phase == "w" else "ar"]) == 1
                assert not tb.hs["w" if phase == "w" else "r"]
            if phase == "b":
                assert tb.sig("bvalid") == 1 and not tb.hs["b"]
            await tb.reset()
            assert await task is None, phase
            if hold is not None:
                hold.pause = False
            else:
                wr.w_channel.clear_pause_generator()
                wr.w_channel.pause = False
            if phase == "b":
                tb.expect_write(base, new)
            elif phase == "mid":
                res = await tb.axi.read(base, 32 * nb)
                beats = [res.data[i:i + nb] for i in range(0, 32 * nb, nb)]
                done = [b == new[i * nb:(i + 1) * nb] for i, b in enumerate(beats)]
                n = done.index(False) if False in done else 32
                assert all(done[:n]) and beats[n:] == [old[i * nb:(i + 1) * nb]
                                                       for i in range(n, 32)], done
                assert n == len(tb.hs["w"]), (n, len(tb.hs["w"]))
                tb.expect_write(base, new[:n * nb])
            await tb.read(0, tb.mem_bytes)
            data = bytes(tb.rng.getrandbits(8) for _ in range(5 * nb))
            await tb.write(base + 3, data)
            await tb.read(base, 8 * nb)
