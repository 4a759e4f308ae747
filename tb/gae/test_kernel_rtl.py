"""The GAE Vitis kernel (:class:`~rtl_gen.gae.kernel.GaeKernel`, the window DMA shell), thorough
tier: cocotb + Verilator.

The sessions of the fast tier (tb/gae/test_kernel_sim.py, from tb/gae_kernel_cases.py) through
the Verilated kernel's AXI ports (:class:`window_host.WindowHost`: cocotbext-axi's
``AxiLiteMaster`` on ``s_axi_control``, ``AxiRam`` as device memory on ``m_axi_gmem``), on the
shipped ``gae_kernel_n8`` (HEPPO's 64 x 1024 on 8 PEs, 512-bit m_axi) and on full results with 5
interleaved PEs: whole batches through host-commanded copies -- bit for bit against
:func:`sw.gae.model.gae_core`, the bursts of every copy, no other buffer byte changed,
DMA_CYCLES of every copy (:func:`sw.shell.spec.copy_cycles` with ``AxiRam``'s latency), CYCLES
(:func:`sw.gae.spec.run_cycles`) and their sum (:func:`sw.gae.spec.kernel_run_cycles`) exact --
then under random back-pressure on every channel; refused runs, copies and starts refused
during a run, RANGE, the register file, a reset in the middle of a copy.
"""

import numpy as np
import pytest

from gae_kernel_cases import CONFIGS, rtl_params, run_kernel

SEED = 20261124


@pytest.mark.slow
@pytest.mark.parametrize("name", rtl_params())
def test_gae_kernel_rtl(name):
    run_kernel(name, __file__, seed=SEED)


try:
    import cocotb
except ImportError:  # pragma: no cover
    cocotb = None

if cocotb is not None:
    async def _host(dut):
        from cocotb_util import load_manifest
        from rtl_gen.gae.kernel import GaeKernel
        from sw.gae.spec import GaeKernelConfig
        from window_host import WindowHost

        cfg = GaeKernelConfig.from_dict(load_manifest()["config"])
        host = WindowHost(dut, GaeKernel(cfg).regmap)
        await host.start()
        return host, cfg

    def _rng(k):
        return np.random.default_rng(cocotb.RANDOM_SEED + k)

    @cocotb.test()
    async def batches_with_exact_cycles(dut):
        """The largest batch (HEPPO's 64 x 1024 on the shipped kernel), one trajectory, a
        partial group: bit-exact, every copy N + L + 7 cycles, the run run_cycles; then scale
        words at shifts 0, 31 and random ones with random offsets (tb/gae_cases.py)."""
        from gae_cases import random_args, random_codes
        from gae_kernel_cases import gae_batch
        from sw.gae.spec import kernel_run_cycles
        from window_host import AXI_RAM_LATENCY

        host, cfg = await _host(dut)
        rng = _rng(0)
        for T, M in ((cfg.capacity, cfg.max_trajectories), (1, 1), (7, cfg.n_pe + 1)):
            got = await gae_batch(host, cfg, random_codes(cfg, T, M, rng),
                                  random_args(cfg, T, M), latency=AXI_RAM_LATENCY)
            copied = sum(n for _, n, _ in got["copies"])
            copy = sum(c for _, _, c in got["copies"])
            total = copy + got["cycles"]
            assert total == kernel_run_cycles(cfg, T, M, latency=AXI_RAM_LATENCY)
            dut._log.info(
                "%d x %d on %d PEs, m_axi %d bits: %d cycles = %d in %d copies + %d run; "
                "%d bytes copied, %.2f B/cycle of copy (%d-bit words: %.3f words/cycle)",
                M, T, cfg.n_pe, cfg.gmem_data_width, total, copy, len(got["copies"]),
                got["cycles"], copied, copied / copy, cfg.axi_data_width,
                copied / (cfg.axi_data_width // 8) / copy)
        # Scale words at the extreme shifts and random ones, random offsets (saturating).
        from gae_cases import random_scale_args
        for shift in (0, 31, None):
            T, M = 7, cfg.n_pe + 1
            await gae_batch(host, cfg, random_codes(cfg, T, M, rng),
                            random_scale_args(cfg, T, M, rng, shift), latency=AXI_RAM_LATENCY)

    @cocotb.test()
    async def random_backpressure(dut):
        """Random pauses on AR, R, AW, W and B: results still bit-exact, bursts as planned,
        nothing else in the buffer touched."""
        from gae_cases import random_args, random_codes
        from gae_kernel_cases import gae_batch

        host, cfg = await _host(dut)
        rng = _rng(1)
        host.stalls(0.4, cocotb.RANDOM_SEED)
        for T, M in ((min(cfg.capacity, 120), cfg.max_trajectories), (7, cfg.n_pe + 1), (1, 1)):
            await gae_batch(host, cfg, random_codes(cfg, T, M, rng, p_done=0.1),
                            random_args(cfg, T, M))
        host.stalls(0, 0)

    @cocotb.test()
    async def refused_runs_touch_nothing(dut):
        """Each STATUS.ERROR: AP_DONE, no burst, the accelerator's memory unchanged."""
        from gae_kernel_cases import refused_runs

        host, cfg = await _host(dut)
        await refused_runs(host, cfg, _rng(2))

    @cocotb.test()
    async def refusals_during_a_run(dut):
        """Copies either way refused while a run is in progress (LOCKED), AP_START refused,
        the run's results right; a run started during a copy drops its remaining words."""
        from gae_kernel_cases import locked_copies

        host, cfg = await _host(dut)
        await locked_copies(host, cfg, _rng(3))

    @cocotb.test()
    async def range_refusals_and_registers(dut):
        """RANGE on misaligned or out-of-window copies; constants, SHELL_VERSION, read-back."""
        from gae_kernel_cases import range_refusals, registers
        from window_host import AXI_RAM_LATENCY

        host, cfg = await _host(dut)
        await range_refusals(host, cfg, latency=AXI_RAM_LATENCY)
        await registers(host, cfg)

    @cocotb.test()
    async def reset_mid_copy(dut):
        """A reset in the middle of a copy in: the shell idles with its registers cleared
        (MEM_PTR too); after MEM_PTR is written again a batch is right."""
        from gae_cases import random_args, random_codes
        from gae_kernel_cases import gae_batch, region_spans
        from window_host import AXI_RAM_LATENCY

        host, cfg = await _host(dut)
        _, off, n = max(region_spans(cfg), key=lambda s: s[2])
        await host.copy(off, n, 0, wait=False)
        await host.idle(40)
        assert await host.rd("DMA_STATUS") & 1, "the copy is not running"
        await host.reset()
        assert (await host.rd("CTRL")) & 0b100, "not idle after reset"
        for name in ("DMA_STATUS", "DMA_CYCLES", "MEM_PTR_LO", "MEM_PTR_HI"):
            assert await host.rd(name) == 0, name
        await host.set_pointer()
        rng = _rng(4)
        T, M = min(cfg.capacity, 100), cfg.max_trajectories
        await gae_batch(host, cfg, random_codes(cfg, T, M, rng), random_args(cfg, T, M),
                        latency=AXI_RAM_LATENCY)
