"""Learner blocks (CF'22 section 3.2): systolic tensor units for the GEMMs of MLP training.

What exists: :class:`TensorUnit`, an R × C output-stationary array (one output tile per
reduction, any K, stream in / stream out, exact cycle model), its configuration
:class:`TensorUnitConfig`, and :class:`LearnerNumerics`, the fixed-point formats of a training
step and the tensor-unit configuration of each GEMM kind. Golden models: ``sw.golden.gemm``
(tensor unit, tiled GEMM, cycles) and ``sw.golden.mlp`` (a bit-exact DQN/MSE training step).
``scripts/dse_learner.py`` sizes a learner (PI, DP, per-stage arrays) from these.

Not generated yet (the golden model defines what they must compute): the learner pipeline
around the units -- weight and activation buffers with their transposed read orders, the
FIFOs between stages, ReLU masks, the LOSS unit (TD target and δ), the WA scratchpad adders,
the DP gradient reduction and weight update (WU), the target-network copy, and the
control/AXI/driver integration.
"""
from .config import GEMM_KINDS, LearnerNumerics, TensorUnitConfig
from .tensor_unit import TensorUnit, pack_elements, tu_input_layout, tu_output_layout, unpack_beats

__all__ = ["GEMM_KINDS", "LearnerNumerics", "TensorUnitConfig", "TensorUnit",
           "tu_input_layout", "tu_output_layout", "pack_elements", "unpack_beats"]
