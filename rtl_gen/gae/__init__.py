"""GAE gateware (HEPPO): the processing element, the accelerator core and its top levels; the
specification is :mod:`sw.gae.spec`."""
from .pe import GaeProcessingElement, gae_input_layout, gae_output_layout

__all__ = ["GaeProcessingElement", "gae_input_layout", "gae_output_layout"]
