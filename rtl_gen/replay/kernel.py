"""The prioritized replay accelerator as a Vitis/XRT kernel (the generic DMA shell)."""

from sw.replay.spec import (
    WORD_BYTES,
    ReplayKernelConfig,
    replay_kernel_register_map,
    replay_register_map,
)
from sw.shell.spec import CONTROL_ADDR_WIDTH

from ..shell.window import WindowKernel
from .accelerator import ReplayAccelerator

__all__ = ["ReplayKernel"]


class ReplayKernel(WindowKernel):
    """:class:`~rtl_gen.replay.accelerator.ReplayAccelerator` in the DMA shell of
    :class:`~rtl_gen.shell.window.WindowKernel`: ``s_axi_control`` (the replay registers,
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
            replay_kernel_register_map(config), replay_register_map(acfg),
            word_bits=8 * WORD_BYTES,
            gmem_data_width=config.gmem_data_width, max_burst=config.max_burst,
            max_outstanding=config.max_outstanding)

    @property
    def config(self) -> ReplayKernelConfig:
        return self._config

    @property
    def latency(self) -> int:
        return self.accelerator.latency
