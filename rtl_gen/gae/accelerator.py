"""The HEPPO GAE accelerator as a Vivado/Vitis kernel: core + AXI4-Lite control + AXI4 memory."""

from amaranth.hdl import Module
from amaranth.lib import wiring

from sw.gae.spec import GAE_CORE_ARGS, STATUS_FLAGS, GaeCoreConfig, gae_register_map, hw_info_values

from ..shell.accelerator import (
    ap_ctrl_hs,
    connect_bridges,
    drive_constants,
    shell_domain,
    shell_members,
)
from ..shell.lite_csr import AxiLiteCsr
from ..shell.mm_slave import AxiMemorySlave
from .core import GaeCore

__all__ = ["GaeAccelerator"]


class GaeAccelerator(wiring.Component):
    """GAE accelerator with the ports a Vivado block design or a Vitis/XRT kernel expects.

    Ports: ``ap_clk``, ``ap_rst_n`` (active-low synchronous reset), ``s_axi_control_*``
    (AXI4-Lite, the registers of :func:`~sw.gae.spec.gae_register_map` in the Vitis HLS
    ``ap_ctrl_hs`` layout), ``s_axi_mem_*`` (AXI4, the stack memory regions of
    :mod:`sw.gae.layout`, locked with SLVERR while a run is in progress) and ``interrupt``.

    A host writes the codes into the memory regions, the arguments into the registers, sets
    CTRL.AP_START, waits for AP_DONE (or the interrupt) and reads STATUS and the results. A start
    with invalid arguments completes at once with STATUS.ERROR set and memory untouched; writing
    AP_START while a run is in progress is dropped (not queued) and sets STATUS.START_REFUSED.
    """

    def __init__(self, config: GaeCoreConfig):
        if not isinstance(config, GaeCoreConfig):
            raise TypeError(f"config must be a GaeCoreConfig, not {config!r}")
        self._config = config
        self._regmap = gae_register_map(config)
        D = config.axi_data_width
        self._csr = AxiLiteCsr(self._regmap, prefix="s_axi_control")
        self._mem = AxiMemorySlave(
            data_width=D, addr_width=config.mem_addr_bits, id_width=1,
            depth=len(config.regions) * config.region_bytes // (D // 8), prefix="s_axi_mem")
        super().__init__(shell_members(self._csr, self._mem))

    @property
    def config(self) -> GaeCoreConfig:
        return self._config

    @property
    def regmap(self):
        return self._regmap

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        shell_domain(m, self)

        csr, mem = self._csr, self._mem
        m.submodules.csr = csr
        m.submodules.mem = mem
        m.submodules.core = core = GaeCore(cfg)

        connect_bridges(m, self, csr, mem)

        # Control: ap_ctrl_hs handshake; a start while busy is refused, not queued.
        start_refused, _ = ap_ctrl_hs(m, self, csr, busy=core.busy, ready=core.ready,
                                      done=core.done, start=core.start)
        for name in GAE_CORE_ARGS(cfg):
            m.d.comb += getattr(core, name).eq(getattr(csr, name))

        # Status.
        m.d.comb += [
            csr.status_error.eq(core.error),
            csr.status_dequant_overflow.eq(core.dequant_overflow),
            csr.status_pe_overflow.eq(core.pe_overflow),
            csr.status_requant_overflow.eq(core.requant_overflow),
            csr.status_start_refused.eq(start_refused),
            csr.cycles.eq(core.cycles),
        ]
        assert set(STATUS_FLAGS) == {"DEQUANT_OVERFLOW", "PE_OVERFLOW", "REQUANT_OVERFLOW",
                                     "START_REFUSED"}
        drive_constants(m, csr, self._regmap, hw_info_values(cfg))

        # Memory: the host port of the core behind the AXI4 slave, locked while busy.
        m.d.comb += [
            mem.enable.eq(core.host_enable),
            core.host_addr.eq(mem.mem_addr),
            core.host_re.eq(mem.mem_re),
            core.host_we.eq(mem.mem_we),
            core.host_wdata.eq(mem.mem_wdata),
            mem.mem_rdata.eq(core.host_rdata),
        ]
        return m
