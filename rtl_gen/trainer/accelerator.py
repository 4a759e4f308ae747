"""The fused trainer as an accelerator: :class:`~rtl_gen.trainer.core.TrainerCore` behind an
AXI4-Lite control port, with its AXI4 master to the transition storage."""

from amaranth.hdl import Module
from amaranth.lib import wiring

from sw.shell.spec import CONTROL_ADDR_WIDTH
from sw.trainer.spec import TrainerConfig, hw_info_values, trainer_register_map

from ..shell.accelerator import ap_ctrl_hs, connect_bridges, shell_domain, shell_members
from ..shell.lite_csr import AxiLiteCsr
from .core import TrainerCore

__all__ = ["TrainerAccelerator"]


class TrainerAccelerator(wiring.Component):
    """The fused DQN trainer with the ports of a Vivado IP and of a Vitis RTL kernel.

    Ports: ``ap_clk``, ``ap_rst_n`` (active-low synchronous reset), ``s_axi_control_*``
    (AXI4-Lite, a 4 KiB window as a Vitis kernel's: :func:`~sw.trainer.spec.trainer_register_map`
    in the Vitis HLS ``ap_ctrl_hs`` layout, its ``HW_*`` registers constant), ``m_axi_gmem_*`` (AXI4 master,
    ``storage_width`` data bits, 64-bit addresses: the storage of :mod:`sw.trainer.layout` at
    BASE_HI:BASE_LO, a ``pynq.allocate`` buffer on an S_AXI_HP port of a ZCU106, a card DDR
    buffer of an Alveo kernel) and ``interrupt``.

    The shell adds the ``ap_ctrl_hs`` handshake, STATUS.ERROR, STATUS.START_REFUSED (an
    AP_START written during a launch is dropped) and CYCLES; STOP is cleared when a step
    boundary takes it and at every accepted start (a stale STOP does not end the next
    launch). Everything else is the core's: a launch runs
    :func:`sw.trainer.schedule.sequential_launch_cycles` cycles (CYCLES), register accesses
    take the CSR's one cycle more.

    Parameters
    ----------
    config : TrainerConfig

    Raises
    ------
    TypeError
        ``config`` is not a :class:`~sw.trainer.spec.TrainerConfig`.
    """

    def __init__(self, config):
        if not isinstance(config, TrainerConfig):
            raise TypeError(f"config must be a TrainerConfig, not {config!r}")
        self._config = config
        regmap = trainer_register_map(config)
        self._regmap = regmap
        self._core = TrainerCore(config)
        self._csr = AxiLiteCsr(regmap, prefix="s_axi_control", constants=hw_info_values(config),
                               addr_width=CONTROL_ADDR_WIDTH)
        super().__init__(shell_members(self._csr, self._core))

    @property
    def config(self) -> TrainerConfig:
        return self._config

    @property
    def regmap(self):
        return self._regmap

    @property
    def core(self) -> TrainerCore:
        return self._core

    @property
    def csr(self) -> AxiLiteCsr:
        return self._csr

    def elaborate(self, platform):
        m = Module()
        core, csr = self._core, self._csr
        shell_domain(m, self)
        m.submodules.csr = csr
        m.submodules.core = core
        connect_bridges(m, self, csr, core)
        start_refused, _ = ap_ctrl_hs(m, self, csr, core.ctrl)
        wiring.connect(m, csr.args, core.args)
        wiring.connect(m, core.status, csr.status)
        m.d.comb += [csr.status_error.eq(core.ctrl.error),
                     csr.status_start_refused.eq(start_refused),
                     csr.cycles.eq(core.ctrl.cycles),
                     core.stop.eq(csr.stop),
                     csr.stop_clear.eq(core.stop_clear | core.ctrl.ready)]
        return m
