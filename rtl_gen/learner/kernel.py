"""The learner accelerator as a Vitis/XRT kernel (the generic DMA shell)."""

from sw.learner.spec import LearnerKernelConfig, learner_kernel_register_map, learner_register_map
from sw.shell.spec import CONTROL_ADDR_WIDTH

from ..shell.window import WindowKernel
from .accelerator import LearnerAccelerator

__all__ = ["LearnerKernel"]


class LearnerKernel(WindowKernel):
    """:class:`~rtl_gen.learner.accelerator.LearnerAccelerator` in the DMA shell of
    :class:`~rtl_gen.shell.window.WindowKernel`: ``s_axi_control`` (the learner
    registers, then MEM_PTR and the DMA_* registers), ``m_axi_gmem``, ``interrupt``. The buffer
    mirrors the learner's memory window (:mod:`sw.learner.layout`); a copy moves one
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
            learner_kernel_register_map(config), learner_register_map(acfg),
            word_bits=acfg.axi_data_width,
            gmem_data_width=config.gmem_data_width, max_burst=config.max_burst,
            max_outstanding=config.max_outstanding)

    @property
    def config(self) -> LearnerKernelConfig:
        return self._config
