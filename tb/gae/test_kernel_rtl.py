"""The GAE Vitis kernel (GaeKernel), thorough tier: cocotb + Verilator.

cocotbext-axi's ``AxiRam`` is the device memory on ``m_axi_gmem`` and ``AxiLiteMaster`` drives
the control port (:class:`gae_kernel_cases.Host`): HEPPO's 64 x 1024 on 8 PEs (the shipped
kernel) with its cycle count and copy bandwidth, random back-pressure on every channel, refused
runs, registers, a reset in the middle of a copy. Every run is checked as in the fast tier
(tb/gae/test_kernel_sim.py): results bit for bit against :func:`sw.gae.model.gae_core`, the
AXI bursts, and no other byte of device memory changed.
"""

import numpy as np
import pytest

from cocotb_util import run_block
from gae_kernel_cases import CONFIGS, IMAGE_BASE, Host, random_args, random_codes
from sw.gae import spec as gae_spec
from sw.gae.spec import copy_plan


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CONFIGS))
def test_gae_kernel_rtl(name):
    run_block("gae-kernel", CONFIGS[name], __file__, seed=20261124)


try:
    import cocotb
except ImportError:  # pragma: no cover
    cocotb = None

if cocotb is not None:
    @cocotb.test()
    async def heppo_shape_cycles_and_bandwidth(dut):
        """64 x 1024 (or the largest shape): bit-exact; copy-in + run + copy-out cycles."""
        host = Host(dut)
        await host.start()
        cfg = host.cfg
        T, M = (1024, 64) if cfg.capacity >= 1024 else (cfg.capacity, cfg.max_trajectories)
        rng = np.random.default_rng(cocotb.RANDOM_SEED)
        codes = random_codes(cfg, T, M, rng)
        total, run = await host.check_run(codes, random_args(cfg, T, M))
        plan = copy_plan(cfg, T, M)
        b_in = sum(n for _, _, n in plan["in"])
        b_out = sum(n for _, _, n in plan["out"])
        copy = total - run
        words = (b_in + b_out) // (cfg.axi_data_width // 8)
        dut._log.info(
            "%d x %d on %d PEs, m_axi %d bits: %d cycles = %d copy + %d core run; copied %d B "
            "in + %d B out = %.2f B/cycle (%d-bit core words: %.3f words/cycle)",
            M, T, cfg.n_pe, cfg.gmem_data_width, total, copy, run, b_in, b_out,
            (b_in + b_out) / copy, cfg.axi_data_width, words / copy)
        # One core word per cycle, plus per block the memory's latency and 5 cycles.
        fixed = gae_spec.kernel_run_cycles(cfg, T, M, latency=0)
        assert fixed < total <= fixed + 5 * 20, (total, fixed)
        dut._log.info("that is sw.gae.spec.kernel_run_cycles with a mean AxiRam latency of %.1f "
                      "cycles", (total - fixed) / 5)

    @cocotb.test()
    async def random_backpressure(dut):
        """Random stalls on AR, R, AW, W and B: results still bit-exact, nothing else touched."""
        host = Host(dut)
        await host.start()
        cfg = host.cfg
        rng = np.random.default_rng(cocotb.RANDOM_SEED + 1)
        host.stalls(0.4, cocotb.RANDOM_SEED)
        for T, M in ((min(cfg.capacity, 120), cfg.max_trajectories), (7, cfg.n_pe + 1), (1, 1)):
            await host.check_run(random_codes(cfg, T, M, rng, p_done=0.1),
                                 random_args(cfg, T, M), base=IMAGE_BASE + 0x40 * T)

    @cocotb.test()
    async def refused_runs_copy_nothing(dut):
        """Each core error code: AP_DONE, STATUS.ERROR, not one device-memory beat."""
        host = Host(dut)
        await host.start()
        cfg = host.cfg
        rng = np.random.default_rng(cocotb.RANDOM_SEED + 2)
        before = host.load(random_codes(cfg, 4, 3, rng))
        one = 1 << cfg.pe.coef_frac
        for (T, M), change, err in [((0, 3), {}, 1), ((4, 0), {}, 2), ((cfg.depth, 1), {}, 3),
                                    ((3, 5000), {}, 3), ((4, 3), {"gamma": one + 1}, 4)]:
            args = random_args(cfg, T, M)
            for k, v in change.items():
                setattr(args, k, v)
            await host.run(args)
            assert (await host.status())["ERROR"] == err
            assert host.reads == host.writes == 0, (T, M, change)
        assert host.ram.read(IMAGE_BASE, len(before)) == before
        await host.check_run(random_codes(cfg, 4, 3, rng), random_args(cfg, 4, 3))

    @cocotb.test()
    async def registers_and_reset_mid_copy(dut):
        """Register read-back; AP_START during a run refused; reset during the copy-in."""
        from cocotb.triggers import ClockCycles

        host = Host(dut)
        await host.start()
        cfg = host.cfg
        for reg in host.regs.user_registers:
            rw = sum(f.mask for f in reg.fields if f.access == "rw")
            if rw:
                await host.wr(reg.name, 0xFFFF_FFFF)
                assert await host.rd(reg.name) == rw, reg.name
        assert await host.rd("HW_N_PE") == cfg.n_pe
        rng = np.random.default_rng(cocotb.RANDOM_SEED + 3)
        T, M = min(cfg.capacity, 100), cfg.max_trajectories
        codes, args = random_codes(cfg, T, M, rng), random_args(cfg, T, M)
        host.load(codes)
        await host.run(args, wait=False)
        await ClockCycles(dut.ap_clk, 30)
        await host.wr("CTRL", 1)                                   # refused
        await host.wait_done()
        assert (await host.status())["START_REFUSED"] == 1
        await host.run(args, wait=False)
        await ClockCycles(dut.ap_clk, 60)                          # in the copy-in
        await host.reset()
        assert (await host.rd("CTRL")) & 0b100, "not idle after reset"
        await host.check_run(random_codes(cfg, T, M, rng), args)
