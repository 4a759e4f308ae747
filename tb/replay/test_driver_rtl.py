"""ReplayDriver, thorough tier: the same blocking code on the Verilated RTL (SimDevice) and
ReplayGoldenDevice.

:func:`replay_session.session` runs in a cocotb ``bridge`` thread against the RTL of the
``replay-accel`` block (K = 4, a capacity that is not a power of 4) and directly against a
:class:`~sw.replay.device.ReplayGoldenDevice`; the transcripts (indices, weights,
priorities, warnings, errors, STATUS, CYCLES, RESPONSE_CYCLES) must be identical.
"""

import pytest

from cocotb_util import load_manifest, run_block
from fcov import blocks
from replay_session import RTL, same, session


@pytest.mark.slow
def test_replay_driver_on_rtl_matches_golden_device():
    run_block("replay-accel", RTL, __file__, seed=20261122)


try:
    import cocotb
except ImportError:  # pragma: no cover
    cocotb = None

if cocotb is not None:
    @cocotb.test()
    async def same_driver_code_on_rtl_and_golden(dut):
        """session() through SimDevice == session() on ReplayGoldenDevice, bit for bit."""
        from sw.replay.spec import SumTreeConfig
        from sw.driver import SimDevice
        from sw.replay.device import ReplayGoldenDevice
        from sw.replay.driver import ReplayDriver

        cfg = SumTreeConfig.from_dict(load_manifest()["config"])
        sim = SimDevice(dut)
        await sim.start()
        with blocks.observing(ReplayDriver, "_run", blocks.replay_driver_run):
            rtl = await sim.call(session, sim)
        gold = session(ReplayGoldenDevice(cfg))
        same(rtl, gold)
        n = sum(1 for e in rtl if isinstance(e, tuple) and isinstance(e[1][0], str))
        assert n == 3, [e for e in rtl if isinstance(e, tuple) and isinstance(e[1][0], str)]
        dut._log.info("replay driver session identical on RTL and golden device (%d steps)",
                      len(rtl))
