"""The learner accelerator as a Vitis/XRT kernel (the window DMA shell)."""

from sw.learner.spec import LearnerKernelConfig, learner_kernel_register_map

from ..shell.window import WindowKernel
from .accelerator import LearnerAccelerator

__all__ = ["LearnerKernel"]


class LearnerKernel(WindowKernel):
    """:class:`~rtl_gen.learner.accelerator.LearnerAccelerator` in the window DMA shell
    (:class:`~rtl_gen.shell.window.WindowKernel`): ``s_axi_control`` (the learner registers,
    then those of :func:`~sw.learner.spec.learner_kernel_register_map`), ``m_axi_gmem``,
    ``interrupt``. The buffer mirrors the learner's memory regions; a copy moves one
    ``axi_data_width``-bit word per cycle.

    Parameters
    ----------
    config : LearnerKernelConfig
    """

    def __init__(self, config: LearnerKernelConfig):
        if not isinstance(config, LearnerKernelConfig):
            raise TypeError(f"config must be a LearnerKernelConfig, not {config!r}")
        super().__init__(LearnerAccelerator, config, learner_kernel_register_map(config))
