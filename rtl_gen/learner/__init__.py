"""Learner gateware (CF'22 section 3.2): systolic tensor units and an MLP training pipeline.

* :class:`TensorUnit` -- an R × C output-stationary array (one output tile per reduction, any
  K, stream in / stream out), configured by :class:`~sw.learner.numerics.TensorUnitConfig`.
* :class:`LearnerCore` -- one SGD step of an MLP (ReLU hidden layers, linear output; DQN with
  an on-chip target network, or MSE) as a pipeline of stages, each on its own R × C tensor
  unit: FW per layer (and target FW), LOSS, BW per layer, WA per weight tensor, WU per weight
  tensor; sub-batches stream through on-chip block buffers (:mod:`sw.learner.layout`); ``dp``
  parallel pipelines whose gradient scratchpads WU reduces.
* :mod:`.stages` -- the stage blocks of the core (FW, LOSS, BW, WA, WU; one module each), the
  buffers and sequencing they share, and :class:`~.stages.harness.StageHarness` to simulate one
  stage alone.
* :class:`LearnerAccelerator` -- the core behind AXI4-Lite (``ap_ctrl_hs`` registers of
  :func:`~sw.learner.spec.learner_register_map`) and AXI4 memory ports.

The specification (configuration, formats, register map, memory layout, exact cycle model
:func:`sw.learner.schedule.step_cycles`) is :mod:`sw.learner.spec` and its neighbours; the
golden models are :mod:`sw.learner.gemm` and :mod:`sw.learner.mlp`.
"""
from .accelerator import LearnerAccelerator
from .core import LearnerCore
from .tensor_unit import TensorUnit, pack_elements, tu_input_layout, tu_output_layout, unpack_beats

__all__ = ["TensorUnit", "tu_input_layout", "tu_output_layout", "pack_elements", "unpack_beats",
           "LearnerCore", "LearnerAccelerator"]
