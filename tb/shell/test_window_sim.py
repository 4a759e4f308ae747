"""WindowKernel, the generic DMA shell (replay and learner as Vitis kernels), fast tier.

Parameters and register maps; then the replay kernel (K = 2, N = 10, 320-byte window) and a
tiny learner kernel in Amaranth's simulator with :class:`SimAxiRam` as device memory (it
checks the AXI master's protocol every cycle): copies both ways against the buffer, exact
DMA_CYCLES, a replay run between the copies against the run-level model, and the refusals
and error flags (RANGE, LOCKED while the accelerator runs or when it starts mid-copy,
READ_ERROR, WRITE_ERROR).
"""


import numpy as np
import pytest

from sw.shell.spec import DMA_FLAGS, SHELL_VERSION, window_kernel_register_map
from rtl_gen.shell.window import WindowKernel
from rtl_gen.learner.kernel import LearnerKernel
from sw.learner.spec import LearnerKernelConfig
from sw.replay.spec import SumTreeConfig
from rtl_gen.replay.accelerator import ReplayAccelerator
from rtl_gen.replay.kernel import ReplayKernel
from sw.replay.spec import ReplayKernelConfig
from sw.replay.spec import (REGIONS, ReplayOp, field_bits, region_base, replay_register_map,
                            replay_kernel_register_map)
from axi_ram import SimAxiRam
from axi_sim import LiteBus
from sw.shell import spec as shell_spec

# Components built here and never elaborated: collect them while the filter hides their
# UnusedElaboratable warnings (tb/conftest.py, collect_components).
pytestmark = [pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable"),
              pytest.mark.usefixtures("collect_components")]


SMALL = dict(fanout=2, capacity=10, priority_width=12, priority_frac=4, input_guard_bits=2,
             target_bits=16, max_batch=8)
TINY_LEARNER = dict(sizes=[2, 4, 2], array=2, max_batch=4, sub_batch=2, axi_data_width=32)
BUF = 0x1_0000_2000          # device address of the buffer (above 4 GiB)
L = 1                        # SimAxiRam latency


@pytest.mark.parametrize("kwargs,msg", [
    (dict(gmem_data_width=32), "gmem_data_width must be one of .* at least"),
    (dict(gmem_data_width=96), "gmem_data_width must be one of"),
    (dict(max_burst=0), "max_burst must be an integer in 1..256"),
    (dict(max_outstanding=33), "max_outstanding must be an integer in 1..32"),
    (dict(fanout=3), "fanout"),
])
def test_replay_kernel_parameter_checks(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        ReplayKernelConfig(**{**SMALL, **kwargs})


def test_shell_option_checks():
    cfg = SumTreeConfig(**SMALL)
    with pytest.raises(ValueError, match="host_port must be one of"):
        ReplayAccelerator(cfg, host_port="pcie")
    with pytest.raises(ValueError, match="regmap must start with the registers"):
        ReplayAccelerator(cfg, regmap=replay_register_map(SumTreeConfig(**{**SMALL,
                                                                           "max_batch": 9})))
    with pytest.raises(TypeError, match="config must be a ReplayKernelConfig"):
        ReplayKernel(cfg)
    with pytest.raises(TypeError, match="config must be a LearnerKernelConfig"):
        LearnerKernel(SMALL)
    kcfg = ReplayKernelConfig(**SMALL, gmem_data_width=128)
    base = replay_register_map(cfg)
    kmap = window_kernel_register_map("k", base, gmem_data_width=128)
    with pytest.raises(TypeError, match=r"config must be a kernel configuration \(DmaParams\), "
                                        r"not SumTreeConfig"):
        WindowKernel(ReplayAccelerator, cfg, kmap)
    with pytest.raises(TypeError, match="accelerator must be an AcceleratorShell class, not None"):
        WindowKernel(None, kcfg, kmap)
    with pytest.raises(TypeError, match="accelerator must be an AcceleratorShell class"):
        WindowKernel(ReplayAccelerator(cfg), kcfg, kmap)        # an instance, not the class
    with pytest.raises(ValueError, match="regmap must be window_kernel_register_map of the "
                                         "accelerator's map with gmem_data_width=128"):
        WindowKernel(ReplayAccelerator, kcfg,
                     window_kernel_register_map("k", base, gmem_data_width=64))

    class WideWindow(ReplayKernelConfig):                         # a window the accelerator
        @property                                                 # does not have
        def window_bytes(self):
            return 2 * super().window_bytes

    with pytest.raises(ValueError, match=r"config's window \(640 bytes of 64-bit words\) is "
                                         r"not the accelerator's \(40 words of 64 bits\)"):
        WindowKernel(ReplayAccelerator, WideWindow(**SMALL, gmem_data_width=128), kmap)
    with pytest.raises(ValueError, match="base must be an ap_ctrl_hs RegisterMap"):
        window_kernel_register_map("k", None, gmem_data_width=64)


def test_register_map_and_kernel_args():
    """The kernel's map is the accelerator's, then the shell's registers; DMA_WINDOW,
    DMA_ALIGN and SHELL_VERSION are constants of the configuration (no ports); the registry's
    kernel arguments (what kernel.xml needs) are the gateware's."""
    from sw.registry import BLOCKS
    from rtl_gen.shell.signatures import arg_fields

    cfg = ReplayKernelConfig(**SMALL, gmem_data_width=128)
    k = ReplayKernel(cfg)
    base = replay_register_map(cfg.accel)
    rm = k.regmap
    assert rm == replay_kernel_register_map(cfg) and k.accelerator.regmap is rm
    assert k.accelerator.base == base and k.config is cfg
    assert rm.registers[:len(base.registers)] == base.registers
    names = ["MEM_PTR_LO", "MEM_PTR_HI", "DMA_OFFSET", "DMA_BYTES", "DMA_CTRL", "DMA_STATUS",
             "DMA_CYCLES", "DMA_WINDOW", "DMA_ALIGN", "SHELL_VERSION"]
    assert [r.name for r in rm.registers[len(base.registers):]] == names
    assert [rm.offset(n) for n in names] == [base.span + 4 * i for i in range(len(names))]
    assert rm["MEM_PTR_LO"].fields[0].lsb == 4                  # 16-byte aligned pointer
    assert {f.name: f.lsb for f in rm["DMA_STATUS"].fields} == DMA_FLAGS
    assert k.window_bytes == 5 * 8 * 8 and k.pointer_align == 16 and k.word_bytes == 8
    # the shell's constants, next to the accelerator's HW_* registers
    consts = rm.info_values(cfg)
    assert {n: consts[n] for n in ("DMA_WINDOW", "DMA_ALIGN", "SHELL_VERSION")} == {
        "DMA_WINDOW": 320, "DMA_ALIGN": 16 | 8 << 16, "SHELL_VERSION": SHELL_VERSION}
    assert set(consts) == {r.name for r in base.info_registers} | {
        "DMA_WINDOW", "DMA_ALIGN", "SHELL_VERSION"}
    ports = [n for n, *_ in k.accelerator.csr.core_ports]
    assert not any(n.startswith(("dma_window", "dma_align", "shell_version", "hw_"))
                   for n in ports if not n.endswith("_wr_pulse")), ports
    assert {"dma_offset", "dma_bytes", "dma_ctrl_start", "dma_status_locked", "mem_ptr_lo",
            "mem_ptr_hi"} <= set(ports)
    # kernel.xml: the registry's arguments are the gateware's pointer, port and scalars
    args = BLOCKS["replay-kernel"].kernel_args(cfg)
    assert args == shell_spec.kernel_args(cfg, rm, base)
    assert args["pointers"] == [{"name": "MEM_PTR", "port": "m_axi_gmem", "lo": "MEM_PTR_LO",
                                 "hi": "MEM_PTR_HI", "offset": base.span}]
    assert args["m_axi"] == {"m_axi_gmem": {"data_width": len(k.m_axi_gmem_wdata),
                                            "max_burst": 256, "outstanding": 4}}
    assert len(k.m_axi_gmem_wdata) == 128 and len(k.m_axi_gmem_araddr) == 64
    scalars = list(dict.fromkeys(r.name for r, _ in arg_fields(base)))   # the core's args
    assert args["scalars"] == scalars == ["OP", "BATCH_SIZE", "UPDATE_SIZE", "SEED"]
    assert cfg.accel == SumTreeConfig(**SMALL) and k.latency == cfg.latency
    assert shell_spec.copy_cycles(80, 8, latency=2) == 10 + 2 + 7
    assert shell_spec.copy_cycles(80, 8, latency=2, to_device=True) == \
        10 + 2 + 6 + shell_spec.HOST_READ_LATENCY
    assert k.accelerator.host.signature.read_latency == shell_spec.HOST_READ_LATENCY
    ports = set(k.signature.members)
    assert "s_axi_mem_awaddr" not in ports and "m_axi_gmem_araddr" in ports
    assert {"ap_clk", "ap_rst_n", "interrupt", "s_axi_control_awaddr"} <= ports
    assert len(k.s_axi_control_awaddr) == 12
    # the accelerator inside is the local-port variant
    assert k.accelerator.host_port == "local" and "host" in k.accelerator.signature.members


# -- simulation --------------------------------------------------------------------------------
class Bus(LiteBus):
    """:class:`axi_sim.LiteBus` on a kernel's control port, a cycle counter (advanced by the
    device-memory process) and the copy commands."""

    def __init__(self, dut, rm):
        super().__init__(dut, rm)
        self.cycle = 0

    async def copy(self, ctx, offset, nbytes, to_buffer, *, wait=True):
        """Command a copy; returns DMA_STATUS once DONE (and DMA_CYCLES)."""
        await self.wr(ctx, "DMA_OFFSET", offset)
        await self.wr(ctx, "DMA_BYTES", nbytes)
        await self.wr(ctx, "DMA_CTRL", 1 | to_buffer << 1)
        if not wait:
            return None, None
        for _ in range(10_000):
            st = await self.rd(ctx, "DMA_STATUS")
            if st & 2 and not st & 1:
                return st, await self.rd(ctx, "DMA_CYCLES")
        raise AssertionError("copy never done")

    async def wait_done(self, ctx):
        while not ctx.get(self.dut.interrupt):
            await self.edge(ctx)
        assert await self.rd(ctx, "CTRL") & 0b10
        await self.wr(ctx, "IP_ISR", 1)


def simulate(dut, ram_kw, testbench, *, max_cycles=200_000):
    """Run ``testbench(ctx, bus, ram)`` with the clock, reset and SimAxiRam processes."""
    from amaranth.sim import Simulator

    sim = Simulator(dut)
    bus = Bus(dut, dut.regmap)
    ram = SimAxiRam(dut, **ram_kw)
    finished, result = [], {}

    async def clock(ctx):
        for _ in range(max_cycles):
            if finished:
                return
            ctx.set(dut.ap_clk, 0)
            await ctx.delay(5e-9)
            ctx.set(dut.ap_clk, 1)
            await ctx.delay(5e-9)
        raise AssertionError("simulation timed out")

    async def memory(ctx):
        while not finished:
            await ram.step(ctx, bus.cycle)
            await ctx.posedge(dut.ap_clk)
            bus.cycle += 1

    async def bench(ctx):
        ctx.set(dut.ap_rst_n, 0)
        for _ in range(2):
            await bus.edge(ctx)
        ctx.set(dut.ap_rst_n, 1)
        await bus.edge(ctx)
        await bus.wr(ctx, "MEM_PTR_LO", BUF & 0xFFFF_FFFF)
        await bus.wr(ctx, "MEM_PTR_HI", BUF >> 32)
        try:
            result["value"] = await testbench(ctx, bus, ram)
        finally:
            finished.append(1)

    sim.add_process(clock)
    sim.add_testbench(memory, background=True)
    sim.add_testbench(bench)
    sim.run()
    return result["value"]


def _words(values):
    return b"".join(int(v).to_bytes(8, "little") for v in values)


def test_replay_kernel_in_amaranth_simulator():
    """Copies both ways (exact cycles), a run between them (== the run-level model), refusals
    and error flags."""
    from sw.replay.model import ReplayAccelModel

    kcfg = ReplayKernelConfig(**SMALL, gmem_data_width=128, max_burst=4)
    cfg = kcfg.accel
    dut = ReplayKernel(kcfg)
    model = ReplayAccelModel(cfg)
    rng = np.random.default_rng(7)
    window = dut.window_bytes
    bad = BUF + window + 16                                  # beyond the buffer: SLVERR

    async def tb(ctx, bus, ram):
        assert await bus.rd(ctx, "DMA_WINDOW") == window == 320
        assert await bus.rd(ctx, "DMA_ALIGN") == 16 | 8 << 16
        assert await bus.rd(ctx, "SHELL_VERSION") == SHELL_VERSION
        await bus.wr(ctx, "SHELL_VERSION", 0)                   # a constant: writes ignored
        assert await bus.rd(ctx, "SHELL_VERSION") == SHELL_VERSION
        assert await bus.rd(ctx, "DMA_STATUS") == 0
        assert await bus.rd(ctx, "MEM_PTR_LO") == BUF & 0xFFFF_FFFF
        # 1. The whole window in, out again into a cleared buffer: identical, exact cycles.
        # (the buffers keep only their used bits: random values of that width)
        image = b"".join(_words(rng.integers(0, 1 << min(field_bits(cfg, r), 62), 8))
                         for r in REGIONS)
        ram.load(BUF, image)
        st, cyc = await bus.copy(ctx, 0, window, 0)
        assert st == 2 and cyc == shell_spec.copy_cycles(window, 8, latency=L), cyc
        ram.load(BUF, bytes(window))
        st, cyc = await bus.copy(ctx, 0, window, 1)
        assert st == 2 and cyc == shell_spec.copy_cycles(window, 8, latency=L,
                                                         to_device=True), cyc
        assert ram.dump(BUF, window) == image
        # 2. A run between copies: INSERT of 6 priorities, outputs copied out.
        pr = rng.integers(1, 1 << 10, 6)
        ram.load(BUF + region_base(cfg, "PRIO_IN"), _words(pr))
        st, cyc = await bus.copy(ctx, region_base(cfg, "PRIO_IN"), 48, 0)
        assert st == 2 and cyc == 6 + L + 7
        await bus.wr(ctx, "OP", ReplayOp.INSERT.value)
        await bus.wr(ctx, "BATCH_SIZE", 6)
        await bus.wr(ctx, "UPDATE_SIZE", 1)
        await bus.wr(ctx, "GIER", 0)
        await bus.wr(ctx, "CTRL", 1)
        while await bus.rd(ctx, "CTRL") & 0b10 == 0:          # AP_DONE
            pass
        bufs = {"PRIO_IN": pr}
        exp = model.run(ReplayOp.INSERT.value, 6, 1, buffers=bufs)
        for name, want in (("IDX_OUT", exp.indices), ("PRIO_OUT", exp.priorities)):
            st, _ = await bus.copy(ctx, region_base(cfg, name), 8 * len(want), 1)
            assert st == 2
            got = ram.dump(BUF + region_base(cfg, name), 8 * len(want))
            assert got == _words(want), name
        # A copy whose last beat is partial (3 words, 128-bit beats): 24 bytes, not 32.
        ram.load(BUF + 0x100, b"\xee" * 32)
        st, _ = await bus.copy(ctx, 0x100, 24, 1)
        assert st == 2 and ram.dump(BUF + 0x118, 8) == b"\xee" * 8
        # 3. Refused: misaligned offset, misaligned length, past the window.
        for off, n in ((8, 16), (16, 12), (window - 16, 32)):
            st, cyc = await bus.copy(ctx, off, n, 0)
            assert st == 1 << DMA_FLAGS["RANGE"] | 2 and cyc == 0, (off, n, st)
        st, cyc = await bus.copy(ctx, 0, 0, 0)                   # 0 bytes: fine
        assert st == 2 and cyc == 3
        # 4. Refused while the accelerator runs (a RESET takes long enough).
        await bus.wr(ctx, "OP", ReplayOp.INSERT.value)
        await bus.wr(ctx, "BATCH_SIZE", 8)
        await bus.wr(ctx, "CTRL", 1)
        ram.load(BUF, bytes(window))
        st, cyc = await bus.copy(ctx, 0, 64, 0)
        assert st == 1 << DMA_FLAGS["LOCKED"] | 2 and cyc == 0, st
        while await bus.rd(ctx, "CTRL") & 0b10 == 0:
            pass
        model.run(ReplayOp.INSERT.value, 8, 1, buffers={"PRIO_IN": np.r_[pr, 0, 0]})
        # 5. The accelerator started during a copy: the rest of the copy is dropped, LOCKED.
        ram.load(BUF, b"\x55" * window)
        await bus.copy(ctx, 0, window, 0, wait=False)
        await bus.wr(ctx, "CTRL", 1)                             # INSERT of 8 again
        while (st := await bus.rd(ctx, "DMA_STATUS")) & 1:
            pass
        assert st == 1 << DMA_FLAGS["LOCKED"] | 2, st
        while await bus.rd(ctx, "CTRL") & 0b10 == 0:
            pass
        st, _ = await bus.copy(ctx, 0, window, 1)                # flags clear at a start
        assert st == 2
        out = ram.dump(BUF, window)
        # (the run started before the first word arrived: nothing moved; INSERT leaves the
        # index and target buffers alone)
        for name in ("IDX_IN", "TARGET_IN"):
            t = region_base(cfg, name)
            assert out[t:t + 64] == image[t:t + 64], name
        # 6. Error responses: reads and writes of a bad device address.
        ram.bad.update(range(bad, bad + 64))
        await bus.wr(ctx, "MEM_PTR_LO", (BUF + window + 16) & 0xFFFF_FFFF)
        st, _ = await bus.copy(ctx, 0, 16, 0)
        assert st == 1 << DMA_FLAGS["READ_ERROR"] | 2, st
        st, _ = await bus.copy(ctx, 0, 16, 1)
        assert st == 1 << DMA_FLAGS["WRITE_ERROR"] | 2, st
        return True

    assert simulate(dut, dict(width=128, max_burst=4, max_outstanding=4, latency=L), tb)


def test_learner_kernel_in_amaranth_simulator():
    """A tiny learner in the shell (32-bit words, 64-bit device memory: two words a beat):
    weights copied in and out unchanged, exact cycles, a copy refused while a step runs."""
    from sw.learner.layout import pack_matrix, region_base as l_base

    kcfg = LearnerKernelConfig(**TINY_LEARNER, gmem_data_width=64, max_burst=8)
    cfg = kcfg.accel
    dut = LearnerKernel(kcfg)
    rng = np.random.default_rng(3)
    shapes = cfg.numerics.weight_shapes()
    imgs = {f"w{l}": pack_matrix(cfg, f"w{l}", rng.integers(-500, 500, s))
            for l, s in enumerate(shapes)}

    async def tb(ctx, bus, ram):
        assert await bus.rd(ctx, "DMA_WINDOW") == dut.window_bytes
        assert await bus.rd(ctx, "DMA_ALIGN") == 8 | 4 << 16
        assert await bus.rd(ctx, "SHELL_VERSION") == SHELL_VERSION
        for name, img in imgs.items():
            ram.load(BUF + l_base(cfg, name), img)
            st, cyc = await bus.copy(ctx, l_base(cfg, name), len(img), 0)
            assert st == 2 and cyc == shell_spec.copy_cycles(len(img), 4, latency=L)
        ram.load(BUF, bytes(dut.window_bytes))
        for name, img in imgs.items():
            st, cyc = await bus.copy(ctx, l_base(cfg, name), len(img), 1)
            assert st == 2 and cyc == shell_spec.copy_cycles(len(img), 4, latency=L,
                                                             to_device=True)
            assert ram.dump(BUF + l_base(cfg, name), len(img)) == img, name
        await bus.wr(ctx, "BATCH_SIZE", 4)
        await bus.wr(ctx, "CTRL", 1)
        st, cyc = await bus.copy(ctx, 0, 8, 1)
        assert st == 1 << DMA_FLAGS["LOCKED"] | 2 and cyc == 0, st
        while await bus.rd(ctx, "CTRL") & 0b10 == 0:
            pass
        st, _ = await bus.copy(ctx, 0, 8, 1)
        assert st == 2
        return True

    assert simulate(dut, dict(width=64, max_burst=8, max_outstanding=4, latency=L), tb)
