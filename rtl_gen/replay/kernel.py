"""The prioritized replay accelerator as a Vitis/XRT kernel (the generic DMA shell)."""

from dataclasses import dataclass

from ..axi.window_kernel import (CONTROL_ADDR_WIDTH, WindowKernel, check_dma_params,
                                 without_dma_params)
from .accelerator import ReplayAccelerator
from .config import SumTreeConfig
from .regs import WORD_BYTES, replay_register_map

__all__ = ["ReplayKernelConfig", "ReplayKernel"]


@dataclass(frozen=True)
class ReplayKernelConfig(SumTreeConfig):
    """:class:`SumTreeConfig` and the DMA shell's parameters.

    Parameters
    ----------
    gmem_data_width : int
        Data width of ``m_axi_gmem``: 64, 128, 256 or 512 (Alveo DDR: 512).
    max_burst : int
        Most beats per AXI burst, 1..256.
    max_outstanding : int
        Most bursts in flight per direction, 1..32.

    :attr:`accel` is the :class:`SumTreeConfig` part (what the accelerator and driver use).
    """
    gmem_data_width: int = 512
    max_burst: int = 256
    max_outstanding: int = 4

    def __post_init__(self):
        super().__post_init__()
        check_dma_params(gmem_data_width=self.gmem_data_width, max_burst=self.max_burst,
                         max_outstanding=self.max_outstanding, word_bits=8 * WORD_BYTES)

    @property
    def accel(self) -> SumTreeConfig:
        return without_dma_params(self, SumTreeConfig)


class ReplayKernel(WindowKernel):
    """:class:`~rtl_gen.replay.accelerator.ReplayAccelerator` in the DMA shell of
    :class:`~rtl_gen.axi.window_kernel.WindowKernel`: ``s_axi_control`` (the replay registers,
    then MEM_PTR and the DMA_* registers), ``m_axi_gmem``, ``interrupt``. The buffer mirrors
    the five batch buffers (``5 * region_words * 8`` bytes); a copy moves one 64-bit word per
    cycle (``N + L + 5`` cycles for N words, device-memory latency L).

    Parameters
    ----------
    config : ReplayKernelConfig
    """

    def __init__(self, config: ReplayKernelConfig):
        if not isinstance(config, ReplayKernelConfig):
            raise TypeError(f"config must be a ReplayKernelConfig, not {config!r}")
        self._config = config
        acfg = config.accel
        super().__init__(
            lambda rm: ReplayAccelerator(acfg, host_port="local", regmap=rm,
                                         control_addr_width=CONTROL_ADDR_WIDTH),
            replay_register_map(acfg), name="replay_kernel", word_bits=8 * WORD_BYTES,
            gmem_data_width=config.gmem_data_width, max_burst=config.max_burst,
            max_outstanding=config.max_outstanding,
            doc="prioritized replay accelerator as a Vitis kernel (DMA shell)")

    @property
    def config(self) -> ReplayKernelConfig:
        return self._config

    @property
    def latency(self) -> int:
        return self.accelerator.latency
