"""Learner blocks (CF'22 section 3.2): systolic tensor units for the GEMMs of MLP training."""
from .config import GEMM_KINDS, LearnerNumerics, TensorUnitConfig
from .tensor_unit import TensorUnit, pack_elements, tu_input_layout, tu_output_layout, unpack_beats

__all__ = ["GEMM_KINDS", "LearnerNumerics", "TensorUnitConfig", "TensorUnit",
           "tu_input_layout", "tu_output_layout", "pack_elements", "unpack_beats"]
