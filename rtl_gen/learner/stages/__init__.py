"""The stages of the learner pipeline (:class:`~rtl_gen.learner.core.LearnerCore`), one block
per module, and what they share.

* :mod:`.buffers` -- the on-chip block memories (:class:`~.buffers.LearnerBuffers`) with read
  and write ports shared by several stages, and the bit fields of a block word.
* :mod:`.common` -- the context every stage is built in (:class:`~.common.StageContext`: the
  configuration, the buffers, the run control), the status it shows its consumers
  (:class:`~.common.StageStatus`), item counters and dependencies, and the GEMM stages' issue
  loop, writer loop and operand feed.
* :class:`FwStage` (FW and the DQN target network's FW), :class:`LossStage`,
  :class:`BwStage`, :class:`WaStage`, :class:`WuStage` -- one per stage kind of
  :func:`sw.learner.schedule.stages`.
* :class:`~.harness.StageHarness` -- one stage alone with the pipeline's buffers and the core's
  run control, to simulate (tb/learner/test_stages_sim.py) or emit a stage by itself.

A stage block is not a Verilog module: ``build(m)`` adds its logic to the core's Module (the
core's Verilog is the same as before the split, and stages share memory ports, which a module
boundary would turn into ports of their own).
"""
from .bw import BwStage
from .common import StageBlock, StageContext, StageStatus
from .fw import FwStage
from .loss import LossStage
from .wa import WaStage
from .wu import WuStage

#: The block that builds each stage kind of :func:`sw.learner.schedule.stages`.
STAGE_BLOCKS = {"fw": FwStage, "tfw": FwStage, "loss": LossStage, "bw": BwStage,
                "wa": WaStage, "wu": WuStage}

__all__ = ["StageBlock", "StageContext", "StageStatus", "FwStage", "LossStage", "BwStage",
           "WaStage", "WuStage", "STAGE_BLOCKS"]
