"""XrtDevice + the unmodified GaeDriver on the GAE kernel's RTL (the window DMA shell).

The kernels of tb/gae/test_kernel_rtl.py (the shipped ``gae_kernel_n8`` and full results on 5
interleaved PEs; the same Verilator models), with ``pyxrt`` the fake of :mod:`xrt_fake`: the
buffer object lives in the cocotbext-axi ``AxiRam`` the kernel's ``m_axi_gmem`` reads and
writes, ``xrt::ip`` register access goes through ``AxiLiteMaster``. The driver session of
``tb/gae_session.py`` -- :meth:`~sw.gae.driver.GaeDriver.compute` on several shapes (one with
retried saturated results), the code-level :meth:`~sw.gae.driver.GaeDriver.run`, a refused run,
a second start, a memory access and a raw AP_START during a run -- runs through
:class:`~sw.driver.xrt_device.XrtDevice` (every memory access a host-commanded copy) and must
equal the same session on :class:`~sw.gae.device.GoldenDevice` bit for bit, STATUS and CYCLES
included.
"""

import pytest

from gae_kernel_cases import CONFIGS, rtl_params, run_kernel

SEED = 20261125


@pytest.mark.slow
@pytest.mark.parametrize("name", rtl_params())
def test_gae_driver_through_xrt_device_on_kernel_rtl(name):
    run_kernel(name, __file__, seed=SEED)


try:
    import cocotb
except ImportError:  # pragma: no cover
    cocotb = None

if cocotb is not None:
    @cocotb.test()
    async def xrt_device_runs_the_gae_driver(dut):
        """session() through XrtDevice (fake pyxrt on the RTL) == on GoldenDevice."""
        from cocotb_util import load_manifest
        from fcov import blocks
        from gae_session import compare, session
        from rtl_gen.gae.kernel import GaeKernel
        from sw.driver import GoldenDevice
        from sw.driver.xrt_device import XRT_KERNEL_NAME
        from sw.gae.driver import GaeDriver
        from sw.gae.spec import GaeKernelConfig
        from sw.shell.spec import copy_cycles
        from window_host import AXI_RAM_LATENCY, WindowHost
        from xrt_fake import xrt_session

        kcfg = GaeKernelConfig.from_dict(load_manifest()["config"])
        # The shipped kernel by its default name, the other by the block's module name.
        shipped = kcfg == GaeKernelConfig.from_dict(CONFIGS["n8"])
        kernel = XRT_KERNEL_NAME if shipped else "gae_kernel"
        host = WindowHost(dut, GaeKernel(kcfg).regmap)
        await host.start()                              # (XrtDevice rewrites MEM_PTR)
        cards = []

        def run(make_device):
            card = make_device()
            cards.append(card)
            return session(card, kcfg.accel)

        with blocks.observing(GaeDriver, "_run", blocks.gae_driver_run):
            rtl, pyxrt = await xrt_session(host, run, kernel=kernel, max_sleep=1e-6)
        gold = session(GoldenDevice(kcfg.accel), kcfg.accel)
        compare(rtl, gold)
        card = cards[0]
        assert card.block == "gae-kernel" and card.config.depth == kcfg.depth
        assert ("ip", f"{kernel}:{{{kernel}_1}}") in pyxrt.log
        syncs = [e for e in pyxrt.log if e[0] in ("to_device", "from_device")]
        assert {d for d, _, _ in syncs} == {"to_device", "from_device"}
        assert all(off + n <= kcfg.window_bytes for _, off, n in syncs)
        # The last access read a block back: one copy of that block, exact cycles.
        direction, _, nbytes = syncs[-1]
        assert direction == "from_device"
        assert card.last_copy_cycles == copy_cycles(nbytes, kcfg.axi_data_width // 8,
                                                    latency=AXI_RAM_LATENCY, to_device=True)
        dut._log.info("GaeDriver through XrtDevice == GoldenDevice (%d computes, runs %s; %d "
                      "buffer syncs, %d bursts in, %d out)", len(rtl["compute"]),
                      [c[2] for c in rtl["compute"]], len(syncs), len(host.reads),
                      len(host.writes))
