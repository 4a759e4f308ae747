"""The prioritized replay accelerator as a Vitis/XRT kernel (the window DMA shell)."""

from sw.replay.spec import ReplayKernelConfig, replay_kernel_register_map

from ..shell.window import WindowKernel
from .accelerator import ReplayAccelerator

__all__ = ["ReplayKernel"]


class ReplayKernel(WindowKernel):
    """:class:`~rtl_gen.replay.accelerator.ReplayAccelerator` in the window DMA shell
    (:class:`~rtl_gen.shell.window.WindowKernel`): ``s_axi_control`` (the replay registers,
    then MEM_PTR and the DMA_* registers of :func:`~sw.replay.spec.replay_kernel_register_map`),
    ``m_axi_gmem``, ``interrupt``. The buffer mirrors the five batch buffers
    (``5 * region_words * 8`` bytes); a copy moves one 64-bit word per cycle (``N + L + 7``
    cycles for N words, device-memory latency L).

    Parameters
    ----------
    config : ReplayKernelConfig
    """

    def __init__(self, config: ReplayKernelConfig):
        if not isinstance(config, ReplayKernelConfig):
            raise TypeError(f"config must be a ReplayKernelConfig, not {config!r}")
        super().__init__(ReplayAccelerator, config, replay_kernel_register_map(config))

    @property
    def latency(self) -> int:
        return self._config.latency
