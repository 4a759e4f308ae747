"""XrtDevice + the unmodified ReplayDriver on the replay kernel's RTL (the window DMA shell).

Two kernels: the replay accelerator of the driver tests (``tb/replay_session.py``: K = 4,
N = 1000, batches up to 64) inside :class:`~rtl_gen.replay.kernel.ReplayKernel` with a 128-bit
``m_axi_gmem``, and the shipped ``replay_kernel_k16_1m`` (K = 16, N = 2^20, 512-bit port),
Verilated; ``pyxrt`` is the fake of :mod:`xrt_fake` (buffer in a cocotbext-axi ``AxiRam``,
registers over AXI4-Lite). The driver tests' whole session -- inserts, samples,
updates, fused runs, a refused run, reset, polling -- runs through
:class:`~sw.driver.xrt_device.XrtDevice` (every buffer access a host-commanded copy) and must
equal the same session on :class:`~sw.replay.device.ReplayGoldenDevice` bit for bit.
"""

import pytest

from cocotb_util import load_manifest, run_block
from fcov import blocks
from replay_session import same, session

RTL = dict(fanout=4, capacity=1000, priority_width=24, priority_frac=12, input_guard_bits=4,
           target_bits=28, max_batch=64, gmem_data_width=128, max_burst=16)


#: The shipped Alveo kernel of 2^20 leaves (sw.registry.SHIPPED): 5 levels, 512-bit m_axi.
SHIPPED_1M = "replay_kernel_k16_1m"


@pytest.mark.slow
@pytest.mark.parametrize("name", ["small", SHIPPED_1M])
def test_replay_driver_through_xrt_device_on_kernel_rtl(name):
    from sw.registry import SHIPPED

    params = RTL if name == "small" else next(p for m, _, p in SHIPPED if m == name)
    run_block("replay-kernel", params, __file__, seed=20261126)


try:
    import cocotb
except ImportError:  # pragma: no cover
    cocotb = None

if cocotb is not None:
    @cocotb.test()
    async def xrt_device_runs_the_replay_driver(dut):
        """session() through XrtDevice (fake pyxrt on the RTL) == on ReplayGoldenDevice."""
        from axi_host import AxiHost
        from rtl_gen.replay.kernel import ReplayKernel
        from sw.replay.device import ReplayGoldenDevice
        from sw.replay.driver import ReplayDriver
        from sw.replay.spec import ReplayKernelConfig
        from xrt_fake import xrt_session

        kcfg = ReplayKernelConfig.from_dict(load_manifest()["config"])
        host = AxiHost(dut, ReplayKernel(kcfg).regmap, mem="m_axi_gmem")
        await host.start()
        copies = []

        def run(make_device):
            card = make_device()
            log = session(card)
            copies.append(card.memory.last_copy_cycles)
            return log

        with blocks.observing(ReplayDriver, "_run", blocks.replay_driver_run):
            rtl, pyxrt = await xrt_session(host, run, kernel="replay_kernel", max_sleep=1e-6)
        assert ("ip", "replay_kernel:{replay_kernel_1}") in pyxrt.log
        gold = session(ReplayGoldenDevice(kcfg.accel))
        same(rtl, gold)
        syncs = [e for e in pyxrt.log if e[0] in ("to_device", "from_device")]
        assert {d for d, _, _ in syncs} == {"to_device", "from_device"}
        dut._log.info("ReplayDriver through XrtDevice == golden device (%d steps, %d buffer "
                      "syncs, last copy %s cycles)", len(rtl), len(syncs), copies[0])
