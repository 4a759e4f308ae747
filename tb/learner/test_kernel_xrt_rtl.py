"""XrtDevice + the unmodified LearnerDriver on the learner kernel's RTL (the window DMA shell).

The small learner of the driver tests (``tb/learner_session.py``: 4-8-8-2 DQN on 2 x 2 tensor
units, 32-bit memory words) inside :class:`~rtl_gen.learner.kernel.LearnerKernel` with a 64-bit
``m_axi_gmem``, Verilated; ``pyxrt`` is the fake of :mod:`xrt_fake`. The driver tests' whole
session -- weights in and out, training steps with details, target syncs, saturation, a
refused step, polling and a start during a step -- runs through
:class:`~sw.driver.xrt_device.XrtDevice` and must equal the same session on
:class:`~sw.learner.device.LearnerGoldenDevice` bit for bit.
"""

import pytest

from cocotb_util import load_manifest, run_block
from fcov import blocks
from learner_session import SEED, SIM_CONFIG, compare, session

RTL = dict(SIM_CONFIG, gmem_data_width=64, max_burst=16)


@pytest.mark.slow
def test_learner_driver_through_xrt_device_on_kernel_rtl():
    run_block("learner-kernel", RTL, __file__, seed=SEED)


try:
    import cocotb
except ImportError:  # pragma: no cover
    cocotb = None

if cocotb is not None:
    @cocotb.test()
    async def xrt_device_runs_the_learner_driver(dut):
        """session() through XrtDevice (fake pyxrt on the RTL) == on LearnerGoldenDevice."""
        from axi_host import AxiHost
        from rtl_gen.learner.kernel import LearnerKernel
        from sw.learner.spec import LearnerKernelConfig
        from sw.driver import LearnerGoldenDevice
        from sw.learner.driver import LearnerDriver
        from xrt_fake import xrt_session

        kcfg = LearnerKernelConfig.from_dict(load_manifest()["config"])
        host = AxiHost(dut, LearnerKernel(kcfg).regmap, mem="m_axi_gmem")
        await host.start()
        with blocks.observing(LearnerDriver, "_write_and_start", blocks.learner_driver_start):
            rtl, pyxrt = await xrt_session(host, lambda make: session(make()),
                                           kernel="learner_kernel", max_sleep=1e-6)
        assert ("ip", "learner_kernel:{learner_kernel_1}") in pyxrt.log
        gold = session(LearnerGoldenDevice(kcfg.accel))
        compare(rtl, gold)
        syncs = [e for e in pyxrt.log if e[0] in ("to_device", "from_device")]
        dut._log.info("LearnerDriver through XrtDevice == golden device (%d steps, %d buffer "
                      "syncs)", len(rtl["steps"]), len(syncs))
