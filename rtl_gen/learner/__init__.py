"""Learner blocks (CF'22 section 3.2): systolic tensor units and an MLP training pipeline.

* :class:`TensorUnit` -- an R × C output-stationary array (one output tile per reduction, any
  K, stream in / stream out, exact cycle model), configured by :class:`TensorUnitConfig`.
* :class:`LearnerNumerics` -- the fixed-point formats of a training step and the tensor-unit
  configuration of each GEMM kind.
* :class:`LearnerCore` -- one SGD step of an MLP (ReLU hidden layers, linear output; DQN with
  an on-chip target network, or MSE) as a pipeline of stages, each on its own R × C
  (default S × S) tensor unit: FW per layer (and target FW), LOSS, BW per layer, WA per weight tensor, WU per weight
  tensor; sub-batches stream through on-chip block buffers (:mod:`.layout`); ``dp`` parallel
  pipelines whose gradient scratchpads WU reduces; exact cycle model in :mod:`.schedule`.
  Configured by :class:`LearnerConfig`.
* :class:`LearnerAccelerator` -- the core behind AXI4-Lite (``ap_ctrl_hs`` registers of
  :func:`learner_register_map`) and AXI4 memory ports.

Golden models: ``sw.golden.gemm`` (tensor unit, tiled GEMM, cycles) and ``sw.golden.mlp``
(the bit-exact training step; ``sub_batch=`` and ``dp=`` for the pipelines' WA order).
``scripts/dse_learner.py`` sizes a learner (PI, DP, per-stage arrays) from these.

DQN target-network sync is in hardware: WU writes the updated weights into the target
weights too on steps chosen by SYNC_TARGET / SYNC_PERIOD (no extra cycles).

Per-stage array sizes: ``LearnerConfig(stage_arrays=...)`` gives each GEMM stage (or kind)
its own R × C unit on S × S blocks; ``scripts/dse_learner.py`` writes the configurations it
chooses in that form.

Not generated yet: actor-critic scheduling, and a host driver in ``sw/driver``.
"""
from .accelerator import LearnerAccelerator
from .config import GEMM_KINDS, LearnerConfig, LearnerNumerics, TensorUnitConfig
from .core import LearnerCore
from .regs import learner_register_map
from .tensor_unit import TensorUnit, pack_elements, tu_input_layout, tu_output_layout, unpack_beats

__all__ = ["GEMM_KINDS", "LearnerNumerics", "TensorUnitConfig", "TensorUnit",
           "tu_input_layout", "tu_output_layout", "pack_elements", "unpack_beats",
           "LearnerConfig", "LearnerCore", "LearnerAccelerator", "learner_register_map"]
