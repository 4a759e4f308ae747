"""The replay accelerator through its AXI ports, as a host uses it (cocotb + Verilator).

Each build (``CONFIGS``: K = 2, 16, 64 with capacities that are not powers of K; K = 4 is the
driver test's build, tb/replay/test_driver_rtl.py) runs every cocotb test below: buffers
loaded with AXI4 bursts, arguments through AXI4-Lite, AP_START, the interrupt, then STATUS,
CYCLES, RESPONSE_CYCLES, TOTAL, MAX_PRIORITY, SIZE, WRITE_POINTER and the output buffers
compared with :class:`sw.replay.model.ReplayAccelModel` -- outputs bit for bit, cycle
counts exactly (:func:`sw.replay.spec.run_cycles`).
"""

import numpy as np
import pytest

from cocotb_util import load_manifest, run_block
from fcov import blocks
from sw.replay import spec as replay_spec

CONFIGS = {
    "k2-n700": dict(fanout=2, capacity=700, priority_width=20, priority_frac=8,
                    input_guard_bits=4, target_bits=24, max_batch=96),
    "k16-n5000": dict(fanout=16, capacity=5000, priority_width=32, priority_frac=16,
                      input_guard_bits=8, max_batch=256),
    "k64-n3000": dict(fanout=64, capacity=3000, priority_width=28, priority_frac=12,
                      input_guard_bits=4, target_bits=30, max_batch=128),
}


def invalid_index(cfg, rng):
    """An index the accelerator must flag INVALID_INDEX, as a host writes it to IDX_IN, or None.

    IDX_IN keeps ``node_index_width`` bits of a word (:func:`sw.replay.spec.field_bits`), so an
    index is only invalid if it lies in ``capacity .. 2**node_index_width - 1``: ``capacity + 1``
    of a tree whose capacity fills its index width (the shipped ``replay_accel_k16``, 2**16
    leaves and 16-bit indices) wraps to a valid leaf. None when no invalid index exists.
    """
    top = 1 << replay_spec.field_bits(cfg, "IDX_IN")
    return int(rng.integers(cfg.capacity, top)) if top > cfg.capacity else None


@pytest.mark.parametrize("name", ["shipped", *CONFIGS])
def test_invalid_index_survives_the_idx_in_width(name):
    """What random_runs injects is really invalid after the IDX_IN mask (and nothing is injected
    when every representable index is a valid leaf)."""
    from sw.registry import shipped_config

    cfg = (shipped_config("replay_accel_k16")[1] if name == "shipped"
           else replay_spec.SumTreeConfig.from_dict(CONFIGS[name]))
    rng = np.random.default_rng(1)
    mask = (1 << replay_spec.field_bits(cfg, "IDX_IN")) - 1
    got = [invalid_index(cfg, rng) for _ in range(200)]
    if name == "shipped":
        assert cfg.capacity == mask + 1 and got == [None] * 200
    else:
        assert all(g is not None and cfg.capacity <= (g & mask) == g for g in got)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CONFIGS))
def test_replay_accel_rtl(name):
    run_block("replay-accel", CONFIGS[name], __file__, seed=20261122)


# -- host side, inside cocotb ---------------------------------------------------------------------
class Host:
    """What a driver does, with cocotbext-axi masters on the two AXI ports."""

    def __init__(self, dut):
        from sw.replay.spec import SumTreeConfig
        from sw.replay.spec import replay_register_map
        from sw.replay.model import ReplayAccelModel

        self.dut = dut
        self.cfg = SumTreeConfig.from_dict(load_manifest()["config"])
        self.regs = replay_register_map(self.cfg)
        self.model = ReplayAccelModel(self.cfg)
        self.bufs = {}
        self.seen = set()                     # STATUS flags raised so far

    async def start(self):
        import cocotb
        from cocotb.clock import Clock
        from cocotbext.axi import AxiBus, AxiLiteBus, AxiLiteMaster, AxiMaster

        from axi_host import CLOCK_NS, hold_in_reset
        from cocotb_util import start_trace

        dut = self.dut
        hold_in_reset(dut)
        cocotb.start_soon(Clock(dut.ap_clk, CLOCK_NS, unit="ns", impl="gpi").start(
            start_high=False))
        start_trace(dut, dut.ap_clk)
        self.ctl = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axi_control"), dut.ap_clk,
                                 dut.ap_rst_n, reset_active_level=False)
        self.mem = AxiMaster(AxiBus.from_prefix(dut, "s_axi_mem"), dut.ap_clk, dut.ap_rst_n,
                             reset_active_level=False)
        for master in (self.ctl, self.mem):
            for side in ("write_if", "read_if"):
                getattr(master, side).log.setLevel("WARNING")
        await self.reset()
        await self.wr("GIER", 1)
        await self.wr("IP_IER", 1)

    async def reset(self):
        from cocotb.triggers import ClockCycles

        self.dut.ap_rst_n.value = 0
        await ClockCycles(self.dut.ap_clk, 3)
        self.dut.ap_rst_n.value = 1
        await ClockCycles(self.dut.ap_clk, 2)
        self.model.reset()
        self.bufs = {}
        await self.tree_idle()

    async def tree_idle(self):
        from cocotb.triggers import Timer

        for _ in range(10000):
            if not (await self.status())["TREE_BUSY"]:
                return
            await Timer(400, "ns")
        raise AssertionError("tree still busy")

    async def rd(self, reg):
        return await self.ctl.read_dword(self.regs.offset(reg))

    async def wr(self, reg, value):
        await self.ctl.write_dword(self.regs.offset(reg), int(value) & 0xFFFF_FFFF)

    async def status(self):
        word = await self.rd("STATUS")
        return {f.name: f.get(word) for f in self.regs["STATUS"].fields}

    async def load(self, name, values):
        """Write ``values`` (64-bit words) to region ``name`` from entry 0 in one burst; the
        model's copy keeps what the memory keeps (the low field bits)."""
        from sw.replay.spec import field_bits, region_base

        v = np.asarray(values, np.uint64)
        await self.mem.write(region_base(self.cfg, name), v.astype("<u8").tobytes())
        buf = self.bufs.setdefault(name, np.zeros(self.cfg.max_batch, np.int64))
        mask = np.uint64((1 << field_bits(self.cfg, name)) - 1)
        buf[:v.size] = (v & mask).astype(np.int64)

    async def fetch(self, name, n):
        from sw.replay.spec import region_base

        data = await self.mem.read(region_base(self.cfg, name), 8 * n)
        return np.frombuffer(bytes(data.data), "<u8").astype(np.int64)

    async def run(self, op, batch=1, update_size=1, *, prng=False, relaxed=False, seed=0,
                  wait=True):
        from sw.replay.spec import ReplayOp

        code = op.value if isinstance(op, ReplayOp) else int(op)
        await self.wr("OP", code | prng << 8 | relaxed << 9)
        await self.wr("BATCH_SIZE", batch)
        await self.wr("UPDATE_SIZE", update_size)
        await self.wr("SEED", seed)
        await self.wr("CTRL", 1)
        if wait:
            await self.wait_done()
        blocks.replay_run(self.cfg, code, batch, update_size, prng=prng, relaxed=relaxed,
                          indices=self.bufs.get("IDX_IN"))
        return self.model.run(code, batch, update_size, prng=prng, relaxed=relaxed,
                              seed=seed, buffers=self.bufs)

    async def wait_done(self, timeout_cycles=200_000):
        from cocotb.triggers import RisingEdge, with_timeout

        if not int(self.dut.interrupt.value):
            await with_timeout(RisingEdge(self.dut.interrupt), timeout_cycles * 4, "ns")
        ctrl = await self.rd("CTRL")
        assert ctrl & 0b10, f"interrupt without AP_DONE (CTRL={ctrl:#x})"
        await self.wr("IP_ISR", 1)

    async def check(self, exp, what=""):
        """STATUS, cycles, results and outputs of the last run against the model's."""
        m = self.model
        st = await self.status()
        self.seen |= {name for name in ("EMPTY", "SATURATED", "INVALID_INDEX") if st[name]}
        assert st["ERROR"] == exp.error, (what, st)
        for name, want in (("EMPTY", m.empty), ("SATURATED", m.saturated),
                           ("INVALID_INDEX", m.invalid)):
            assert st[name] == int(want), (what, name, st)
        assert await self.rd("CYCLES") == exp.cycles, what
        assert await self.rd("RESPONSE_CYCLES") == exp.response_cycles, what
        t = m.tree
        total = await self.rd("TOTAL_LO") | await self.rd("TOTAL_HI") << 32
        mx = await self.rd("MAX_PRIORITY_LO") | await self.rd("MAX_PRIORITY_HI") << 32
        assert (total, mx) == (t.total, t.max_priority), what
        assert (await self.rd("SIZE"), await self.rd("WRITE_POINTER")) == \
            (t.size, t.write_pointer), what
        n = exp.indices.size
        if n:
            idx = await self.fetch("IDX_OUT", n)
            pri = await self.fetch("PRIO_OUT", n)
            bad = np.flatnonzero((idx != exp.indices) | (pri != exp.priorities))
            assert bad.size == 0, (f"{what}: {bad.size} of {n} outputs differ, first at "
                                   f"{bad[0]}: ({idx[bad[0]]}, {pri[bad[0]]}) vs "
                                   f"({exp.indices[bad[0]]}, {exp.priorities[bad[0]]})")
        return st


def _prios(cfg, rng, n, *, over=0.0):
    """Raw input priorities, mostly in the leaf range, a fraction ``over`` above it."""
    hi = cfg.priority_format.max_raw
    p = rng.integers(0, min(hi, 64 << cfg.priority_frac) + 1, n)
    p[rng.random(n) < 0.1] = 0
    sat = rng.random(n) < over
    p[sat] = rng.integers(hi + 1, cfg.input_format.max_raw + 1, int(sat.sum()))
    return p


try:
    import cocotb
except ImportError:  # pragma: no cover
    cocotb = None

if cocotb is not None:
    @cocotb.test()
    async def random_runs(dut):
        """Every operation, random sizes, inserts wrapping, interleaved updates and samples
        (strict and relaxed, host and PRNG targets), update batches repeating each leaf back to
        back, B = U = 1: outputs, flags and cycles exact."""
        from sw.replay.spec import ReplayOp as Op

        host = Host(dut)
        await host.start()
        cfg = host.cfg
        B = cfg.max_batch
        rng = np.random.default_rng(cocotb.RANDOM_SEED)
        # An empty tree: samples flag EMPTY, answer (0, 0) and draw no PRNG word.
        await host.load("TARGET_IN", rng.integers(0, 1 << cfg.target_bits, B))
        await host.check(await host.run(Op.SAMPLE, 5), "empty")
        await host.check(await host.run(Op.SAMPLE, 3, prng=True), "empty prng")
        await host.check(await host.run(Op.SEED, seed=int(rng.integers(1, 1 << 32))), "seed")
        # Fill past the capacity (FIFO wrap), some priorities saturating.
        inserted = 0
        while inserted < cfg.capacity + B // 2:
            n = int(rng.integers(1, B + 1))
            if rng.random() < 0.3:
                exp = await host.run(Op.INSERT_MAX, n)
            else:
                await host.load("PRIO_IN", _prios(cfg, rng, n, over=0.05))
                exp = await host.run(Op.INSERT, n)
            await host.check(exp, f"insert {n}")
            inserted += n
        kinds = ["sample", "sample_prng", "update", "fused", "fused_relaxed", "read",
                 "insert_max"]
        for step in range(24):
            kind = kinds[step % len(kinds)] if step < len(kinds) else str(rng.choice(kinds))
            n = int(rng.integers(1, B + 1)) if step % 3 else B
            u = int(rng.integers(1, B + 1))
            if kind in ("update", "fused", "fused_relaxed", "read"):
                m = u if kind.startswith("fused") else n
                idx = rng.integers(0, cfg.capacity, m)
                bad = invalid_index(cfg, rng)
                if kind in ("update", "read") and (step in (2, 5) or step % 4 == 0) \
                        and bad is not None:
                    idx[rng.integers(0, m)] = bad
                await host.load("IDX_IN", idx)
                await host.load("PRIO_IN", _prios(cfg, rng, m, over=0.02))
            if kind in ("sample", "fused", "fused_relaxed"):
                await host.load("TARGET_IN", rng.integers(0, 1 << cfg.target_bits, n))
            prng = kind == "sample_prng" or (kind.startswith("fused") and step % 2 == 0)
            op = {"sample": Op.SAMPLE, "sample_prng": Op.SAMPLE, "update": Op.UPDATE,
                  "fused": Op.UPDATE_SAMPLE, "fused_relaxed": Op.UPDATE_SAMPLE,
                  "read": Op.READ, "insert_max": Op.INSERT_MAX}[kind]
            exp = await host.run(op, n, u, prng=prng, relaxed=kind == "fused_relaxed")
            await host.check(exp, f"step {step} {kind} B={n} U={u}")
        # Update batches with every leaf twice back to back (the last write wins); B = U = 1.
        await host.load("IDX_IN", np.repeat(rng.integers(0, cfg.capacity, B), 2)[:B])
        await host.load("PRIO_IN", _prios(cfg, rng, B))
        await host.check(await host.run(Op.UPDATE, B), "update, leaves repeated")
        await host.load("TARGET_IN", rng.integers(0, 1 << cfg.target_bits, B))
        for n, u, relaxed in ((B, B, True), (1, 1, False)):
            exp = await host.run(Op.UPDATE_SAMPLE, n, u, relaxed=relaxed)
            await host.check(exp, f"fused B={n} U={u}, leaves repeated")
        # RESET: empty again, maximum back to 1.0, the PRNG keeps its state.
        await host.check(await host.run(Op.RESET), "reset")
        await host.check(await host.run(Op.SAMPLE, 2, prng=True), "empty after reset")
        await host.check(await host.run(Op.INSERT_MAX, 4), "insert after reset")
        can_be_invalid = invalid_index(cfg, rng) is not None
        assert host.seen == {"EMPTY", "SATURATED"} | ({"INVALID_INDEX"} if can_be_invalid
                                                      else set()), host.seen

    @cocotb.test()
    async def exact_cycles(dut):
        """B + latency + 3 for a full batch; relaxed UPDATE_SAMPLE saves the tree latency."""
        from sw.replay.spec import ReplayOp as Op

        host = Host(dut)
        await host.start()
        cfg = host.cfg
        B = cfg.max_batch
        L = cfg.latency
        rng = np.random.default_rng(cocotb.RANDOM_SEED + 1)
        await host.load("PRIO_IN", _prios(cfg, rng, B))
        await host.check(await host.run(Op.INSERT, B), "insert")
        await host.load("IDX_IN", rng.integers(0, min(B, cfg.capacity), B))
        await host.load("TARGET_IN", rng.integers(0, 1 << cfg.target_bits, B))
        strict = await host.run(Op.UPDATE_SAMPLE, B, B, prng=True)
        await host.check(strict, "strict")
        relaxed = await host.run(Op.UPDATE_SAMPLE, B, B, prng=True, relaxed=True)
        await host.check(relaxed, "relaxed")
        sample = await host.run(Op.SAMPLE, B)
        await host.check(sample, "sample")
        assert sample.run_cycles == B + L + 3
        assert strict.run_cycles == 2 * B + L + 3
        assert relaxed.run_cycles == 2 * B + 6 and relaxed.response_cycles == B + L + 1
        dut._log.info("K=%d N=%d B=%d (tree latency %d): sample %d cycles, update+sample "
                      "strict %d, relaxed %d (samples complete after %d)", cfg.fanout,
                      cfg.capacity, B, L, sample.run_cycles, strict.run_cycles,
                      relaxed.run_cycles, relaxed.response_cycles)
        upd = await host.run(Op.UPDATE, B)
        await host.check(upd, "update")
        assert upd.run_cycles == replay_spec.run_cycles(cfg, Op.UPDATE, B) == B + 6

    @cocotb.test()
    async def refused_starts(dut):
        """Bad arguments: ERROR, nothing changes; AP_START while busy: dropped and flagged,
        memory port answers SLVERR during the run."""
        from cocotbext.axi import AxiResp

        from sw.replay.spec import REPLAY_ERRORS, ReplayOp as Op, region_base

        host = Host(dut)
        await host.start()
        cfg = host.cfg
        B = cfg.max_batch
        rng = np.random.default_rng(cocotb.RANDOM_SEED + 2)
        await host.load("PRIO_IN", _prios(cfg, rng, B))
        await host.check(await host.run(Op.INSERT, B), "insert")
        await host.load("IDX_IN", rng.integers(0, cfg.capacity, B))
        before = {n: await host.fetch(n, B) for n in ("IDX_IN", "PRIO_IN", "IDX_OUT")}
        for code, b, u, err in ((8, 1, 1, "op"), (15, 1, 1, "op"), (Op.UPDATE.value, 0, 1,
                                "batch_size"), (Op.SAMPLE.value, B + 1, 1, "batch_size"),
                                (Op.UPDATE_SAMPLE.value, 4, 0, "update_size"),
                                (Op.UPDATE_SAMPLE.value, 4, B + 1, "update_size"),
                                (Op.UPDATE_SAMPLE.value, 1 << 31, 1, "batch_size")):
            exp = await host.run(code, b, u)
            assert exp.error == REPLAY_ERRORS[err]
            await host.check(exp, f"refused {code} {b} {u}")
        for n, v in before.items():
            assert (await host.fetch(n, B) == v).all(), f"{n} changed by a refused start"
        # A long run; a second start during it is refused.
        exp = await host.run(Op.UPDATE_SAMPLE, B, B, prng=True, wait=False)
        assert (await host.rd("CTRL")) & 0b100 == 0, "AP_IDLE during a run"
        await host.wr("CTRL", 1)
        w = await host.mem.write(region_base(cfg, "IDX_IN"), bytes(8))
        r = await host.mem.read(region_base(cfg, "IDX_OUT"), 8)
        assert w.resp == AxiResp.SLVERR and r.resp == AxiResp.SLVERR
        await host.wait_done()
        st = await host.check(exp, "run with refused start")
        assert st["START_REFUSED"] == 1
        for _ in range(20):                                # nothing queued
            assert (await host.rd("CTRL")) & 0b101 == 0b100
        await host.check(await host.run(Op.READ, 3), "next start")
        assert (await host.status())["START_REFUSED"] == 0

    @cocotb.test()
    async def registers(dut):
        """HW_* describe the configuration; rw registers read back; unmapped -> SLVERR."""
        from cocotbext.axi import AxiResp

        from sw.replay.spec import hw_info_values

        host = Host(dut)
        await host.start()
        info = hw_info_values(host.cfg)
        for name, value in info.items():
            assert await host.rd(name) == value, name
        for reg in host.regs.user_registers:
            rw_mask = sum(f.mask for f in reg.fields if f.access == "rw")
            if rw_mask and reg.name != "CTRL":
                await host.wr(reg.name, 0xFFFF_FFFF)
                assert await host.rd(reg.name) == rw_mask, reg.name
                await host.wr(reg.name, 0)
        span = host.regs.span
        for addr in (span, (1 << len(dut.s_axi_control_awaddr)) - 4):
            w = await host.ctl.write(addr, b"\x01\x02\x03\x04")
            r = await host.ctl.read(addr, 4)
            assert w.resp == AxiResp.SLVERR and r.resp == AxiResp.SLVERR, hex(addr)
