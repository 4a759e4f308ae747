"""The learner accelerator as a Vitis/XRT kernel (the generic DMA shell)."""

from dataclasses import dataclass

from ..axi.window_kernel import (CONTROL_ADDR_WIDTH, WindowKernel, check_dma_params,
                                 without_dma_params)
from .accelerator import LearnerAccelerator
from .config import LearnerConfig
from .regs import learner_register_map

__all__ = ["LearnerKernelConfig", "LearnerKernel"]


@dataclass(frozen=True)
class LearnerKernelConfig(LearnerConfig):
    """:class:`LearnerConfig` and the DMA shell's parameters.

    Parameters
    ----------
    gmem_data_width : int
        Data width of ``m_axi_gmem``: 32..512, at least ``axi_data_width`` (Alveo DDR: 512).
    max_burst : int
        Most beats per AXI burst, 1..256.
    max_outstanding : int
        Most bursts in flight per direction, 1..32.

    :attr:`accel` is the :class:`LearnerConfig` part (what the accelerator and driver use).
    """
    gmem_data_width: int = 512
    max_burst: int = 256
    max_outstanding: int = 4

    def __post_init__(self):
        super().__post_init__()
        check_dma_params(gmem_data_width=self.gmem_data_width, max_burst=self.max_burst,
                         max_outstanding=self.max_outstanding, word_bits=self.axi_data_width)

    @property
    def accel(self) -> LearnerConfig:
        return without_dma_params(self, LearnerConfig)


class LearnerKernel(WindowKernel):
    """:class:`~rtl_gen.learner.accelerator.LearnerAccelerator` in the DMA shell of
    :class:`~rtl_gen.axi.window_kernel.WindowKernel`: ``s_axi_control`` (the learner
    registers, then MEM_PTR and the DMA_* registers), ``m_axi_gmem``, ``interrupt``. The buffer
    mirrors the learner's memory window (:mod:`rtl_gen.learner.layout`); a copy moves one
    ``axi_data_width``-bit word per cycle (``N + L + 5`` cycles for N words, device-memory
    latency L).

    Parameters
    ----------
    config : LearnerKernelConfig
    """

    def __init__(self, config: LearnerKernelConfig):
        if not isinstance(config, LearnerKernelConfig):
            raise TypeError(f"config must be a LearnerKernelConfig, not {config!r}")
        self._config = config
        acfg = config.accel
        super().__init__(
            lambda rm: LearnerAccelerator(acfg, host_port="local", regmap=rm,
                                          control_addr_width=CONTROL_ADDR_WIDTH),
            learner_register_map(acfg), name="learner_kernel", word_bits=acfg.axi_data_width,
            gmem_data_width=config.gmem_data_width, max_burst=config.max_burst,
            max_outstanding=config.max_outstanding,
            doc="MLP learner accelerator as a Vitis kernel (DMA shell)")

    @property
    def config(self) -> LearnerKernelConfig:
        return self._config
