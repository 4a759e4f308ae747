"""The shell every accelerator shares: the core/shell interfaces (:mod:`.signatures`), the
AXI4-Lite control/status register slave (:mod:`.lite_csr`), the AXI4 memory-mapped slave
(:mod:`.mm_slave`), the AXI4 DMA master (:mod:`.dma`; its write direction: :mod:`.dma_write`),
the accelerator shell (:mod:`.accelerator`) and the window DMA shell that makes an accelerator
a Vitis kernel (:mod:`.window`)."""
from .lite_csr import AxiLiteCsr
from .mm_slave import AxiBurst, AxiMemorySlave, AxiResp

__all__ = ["AxiLiteCsr", "AxiBurst", "AxiMemorySlave", "AxiResp"]
