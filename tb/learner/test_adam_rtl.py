"""The learner's Adam weight update in RTL: a session of six DQN steps through the AXI ports of
a small Adam learner (:data:`~adam_session.ADAM_SIM_CONFIG`, Verilator) equal bit for bit to
the golden device's -- updated weights, target weights, first moments, second-moment
logarithms, gradients, STATUS (saturation flags included), CYCLES (exact, the cycle model's
Adam tail) and the loss -- with optimizer states from a fresh one to random ones (zeros and
``log_min`` among them), β1 = 0, β2 = 0, ε = 0, per-sample loss weights, a target sync and a
saturating step."""

import numpy as np
import pytest

from adam_session import ADAM_SIM_CONFIG, SEED, adam_session, compare
from cocotb_util import load_manifest, run_block
from fcov import blocks


#: The session's learner, and the same with two pipelines (WU first adds their gradient
#: scratchpads, the moments' rows travel beside).
CONFIGS = {"dp1": ADAM_SIM_CONFIG, "dp2": {**ADAM_SIM_CONFIG, "dp": 2}}


@pytest.mark.slow
@pytest.mark.parametrize("name", ["dp1", pytest.param("dp2", marks=pytest.mark.heavy)])
def test_adam_learner_rtl_matches_golden_device(name):
    """dp1 in ``make test``; dp2 (the same lanes behind the pipelines' reduction, 35 s of
    Verilator build) in ``make test-heavy``."""
    run_block("learner", CONFIGS[name], __file__, seed=SEED)


def test_golden_session_follows_the_update_and_the_cycle_model():
    """The golden transcript itself: CYCLES is step_cycles + Adam's tail, the moments and
    weights are those of adam_update_raw on the gradients it reports."""
    from sw.driver import LearnerGoldenDevice
    from sw.learner.adam import ADAM_WU_LATENCY
    from sw.learner.schedule import WU_SGD_LATENCY, step_cycles
    from sw.learner.spec import LearnerConfig

    cfg = LearnerConfig.from_dict(ADAM_SIM_CONFIG)
    sgd = LearnerConfig.from_dict({**ADAM_SIM_CONFIG, "optimizer": "sgd"})
    gold = adam_session(LearnerGoldenDevice(cfg))
    for s in gold["steps"]:
        assert s["cycles"] == step_cycles(cfg, s["B"])
        assert s["cycles"] == step_cycles(sgd, s["B"]) + ADAM_WU_LATENCY - WU_SGD_LATENCY
    # Three states of the first step saturate their updates (m != 0 where v = 0), the last
    # step's huge rewards its errors; the weights pinned at the bounds stay few.
    assert gold["steps"][0]["status"] >> 14 & 1
    assert gold["steps"][-1]["status"] & 0x7F00
    top = (1 << 15) - 1
    w = np.concatenate([gold["steps"][-1][f"w{l}"].ravel() for l in range(3)])
    assert 3 <= np.sum(np.abs(w) >= top) <= 0.1 * w.size


try:
    import cocotb
except ImportError:  # pragma: no cover
    cocotb = None

if cocotb is not None:
    @cocotb.test()
    async def adam_session_identical_on_rtl_and_golden(dut):
        from sw.driver import LearnerGoldenDevice, SimDevice
        from sw.learner.spec import LearnerConfig

        cfg = LearnerConfig.from_dict(load_manifest()["config"])
        sim = SimDevice(dut)
        await sim.start()
        rtl = await sim.call(adam_session, sim, cfg.to_dict())
        gold = adam_session(LearnerGoldenDevice(cfg), cfg.to_dict())
        compare(rtl, gold)
        for s in rtl["steps"]:                     # the batches the session started
            blocks.learner_step(s["B"], cfg.sub_batch, cfg.max_batch)
        dut._log.info("Adam session identical on RTL and golden model; cycles %s",
                      [s["cycles"] for s in rtl["steps"]])
