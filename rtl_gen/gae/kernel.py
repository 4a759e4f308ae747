"""The HEPPO GAE accelerator as a Vitis/XRT kernel (the window DMA shell)."""

from sw.gae.spec import GaeKernelConfig, gae_kernel_register_map

from ..shell.window import WindowKernel
from .accelerator import GaeAccelerator

__all__ = ["GaeKernel"]


class GaeKernel(WindowKernel):
    """:class:`~rtl_gen.gae.accelerator.GaeAccelerator` in the window DMA shell
    (:class:`~rtl_gen.shell.window.WindowKernel`): ``s_axi_control`` (the GAE registers, then
    those of :func:`~sw.gae.spec.gae_kernel_register_map`), ``m_axi_gmem``, ``interrupt``.

    The buffer mirrors the accelerator's memory regions (:mod:`sw.gae.layout`); the host
    copies the rows a run reads in (:func:`~sw.gae.spec.copy_plan`), runs the accelerator and
    copies the result rows out, one ``axi_data_width``-bit word per cycle (``N + L + 7`` cycles
    per copy of N words, device-memory latency L; :func:`~sw.gae.spec.kernel_run_cycles`).
    Since the register layout version 1 of the window shell (``SHELL_VERSION``) this is the
    same shell as the replay and learner kernels; the earlier GAE kernel copied inside its
    runs (docs/changelog.md).

    Parameters
    ----------
    config : GaeKernelConfig
    """

    def __init__(self, config: GaeKernelConfig):
        if not isinstance(config, GaeKernelConfig):
            raise TypeError(f"config must be a GaeKernelConfig, not {config!r}")
        super().__init__(GaeAccelerator, config, gae_kernel_register_map(config))
