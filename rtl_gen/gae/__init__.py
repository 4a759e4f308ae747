"""GAE (Generalized Advantage Estimation) blocks, after HEPPO."""
from .config import GAE_MODES, GaePeConfig
from .pe import GaeProcessingElement, gae_input_layout, gae_output_layout

__all__ = ["GAE_MODES", "GaePeConfig", "GaeProcessingElement",
           "gae_input_layout", "gae_output_layout"]
