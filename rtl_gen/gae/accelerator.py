"""The HEPPO GAE accelerator: :class:`~rtl_gen.gae.core.GaeCore` in the accelerator shell."""

from sw.gae.spec import GaeCoreConfig, gae_register_map

from ..shell.accelerator import AcceleratorShell
from .core import GaeCore

__all__ = ["GaeAccelerator"]


class GaeAccelerator(AcceleratorShell):
    """GAE accelerator with the ports a Vivado block design or a Vitis/XRT kernel expects.

    :class:`~rtl_gen.shell.accelerator.AcceleratorShell` around :class:`GaeCore`. Ports:
    ``ap_clk``, ``ap_rst_n`` (active-low synchronous reset), ``s_axi_control_*`` (AXI4-Lite,
    the registers of :func:`~sw.gae.spec.gae_register_map` in the Vitis HLS ``ap_ctrl_hs``
    layout), ``s_axi_mem_*`` (AXI4, ``axi_data_width`` bits, the stack memory regions of
    :mod:`sw.gae.layout`, locked with SLVERR while a run is in progress) and ``interrupt``.

    A host writes the codes into the memory regions, the arguments into the registers, sets
    CTRL.AP_START, waits for AP_DONE (or the interrupt) and reads STATUS and the results. A start
    with invalid arguments completes at once with STATUS.ERROR set and memory untouched; writing
    AP_START while a run is in progress is dropped (not queued) and sets STATUS.START_REFUSED.
    Cycles of a run: :func:`sw.gae.spec.run_cycles` (CYCLES reads one less).

    Parameters
    ----------
    config : GaeCoreConfig
    host_port, regmap, control_addr_width, constants
        As :class:`~rtl_gen.shell.accelerator.AcceleratorShell` (``constants`` default: the
        ``HW_*`` words of ``config``) (``host_port="local"``: the
        memory on the word port ``host``, for :class:`~rtl_gen.gae.kernel.GaeKernel`).

    Raises
    ------
    TypeError
        If ``config`` is not a :class:`GaeCoreConfig`.
    """

    def __init__(self, config: GaeCoreConfig, *, host_port="axi", regmap=None,
                 control_addr_width=None, constants=None):
        if not isinstance(config, GaeCoreConfig):
            raise TypeError(f"config must be a GaeCoreConfig, not {config!r}")
        self._config = config
        base = gae_register_map(config)
        if constants is None:
            constants = base.info_values(config)
        D = config.axi_data_width
        super().__init__(GaeCore(config), base, constants=constants,
                         host_port=host_port,
                         mem_addr_bits=config.mem_addr_bits,
                         mem_words=len(config.regions) * config.region_bytes // (D // 8),
                         regmap=regmap, control_addr_width=control_addr_width)

    @property
    def config(self) -> GaeCoreConfig:
        return self._config
