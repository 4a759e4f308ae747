"""AXI blocks shared by the accelerators: the AXI4-Lite control/status register slave
(:mod:`.lite_csr`) and the AXI4 memory-mapped slave (:mod:`.mm_slave`)."""
from .lite_csr import AxiLiteCsr
from .mm_slave import AxiBurst, AxiMemorySlave, AxiResp

__all__ = ["AxiLiteCsr", "AxiBurst", "AxiMemorySlave", "AxiResp"]
