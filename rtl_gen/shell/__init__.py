"""AXI blocks shared by the accelerators: the AXI4-Lite control/status register slave
(:mod:`.lite_csr`), the AXI4 memory-mapped slave (:mod:`.mm_slave`), the AXI4 DMA master
(:mod:`.dma`), the kernel shell glue (:mod:`.shell`) and the generic window DMA shell that makes
an accelerator a Vitis kernel (:mod:`.window_kernel`)."""
from .lite_csr import AxiLiteCsr
from .mm_slave import AxiBurst, AxiMemorySlave, AxiResp

__all__ = ["AxiLiteCsr", "AxiBurst", "AxiMemorySlave", "AxiResp"]
