"""LearnerDriver, thorough tier: the same driver code on the Verilated learner RTL (SimDevice)
equal to the golden device bit for bit.

:func:`learner_session.session` (blocking driver code) runs in a cocotb ``bridge`` thread on
the RTL of :data:`~learner_session.SIM_CONFIG` through :class:`~sw.driver.sim.SimDevice` and on
the golden device; the transcripts (losses, STATUS words, CYCLES, Q values, TD errors, weights)
must be identical.
"""

import pytest

from cocotb_util import load_manifest, run_block
from fcov import blocks
from learner_session import SEED, SIM_CONFIG, compare, session


@pytest.mark.slow
def test_driver_on_learner_rtl_matches_golden_device():
    run_block("learner", SIM_CONFIG, __file__, seed=SEED)


try:
    import cocotb
except ImportError:  # pragma: no cover
    cocotb = None

if cocotb is not None:
    @cocotb.test()
    async def same_learner_driver_code_on_rtl_and_golden(dut):
        """session() through SimDevice == session() on LearnerGoldenDevice."""
        from sw.learner.spec import LearnerConfig
        from sw.driver import LearnerGoldenDevice, SimDevice
        from sw.learner.driver import LearnerDriver

        cfg = LearnerConfig.from_dict(load_manifest()["config"])
        sim = SimDevice(dut)
        await sim.start()
        with blocks.observing(LearnerDriver, "_write_and_start", blocks.learner_driver_start):
            rtl = await sim.call(session, sim)
        gold = session(LearnerGoldenDevice(cfg))
        compare(rtl, gold)
        dut._log.info("learner driver session identical on RTL and golden model; cycles %s, "
                      "loss sums %s", [s[3] for s in rtl["steps"]], [s[0] for s in rtl["steps"]])
