"""The HEPPO GAE accelerator as a Vivado/Vitis kernel: core + AXI4-Lite control + AXI4 memory."""

from amaranth.hdl import ClockDomain, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..axi.lite_csr import AxiLiteCsr
from ..axi.mm_slave import AxiMemorySlave
from .config import GaeCoreConfig
from .core import GAE_CORE_ARGS, GaeCore
from .regs import STATUS_FLAGS, gae_register_map, hw_info_values

__all__ = ["GaeAccelerator"]


class GaeAccelerator(wiring.Component):
    """GAE accelerator with the ports a Vivado block design or a Vitis/XRT kernel expects.

    Ports: ``ap_clk``, ``ap_rst_n`` (active-low synchronous reset), ``s_axi_control_*``
    (AXI4-Lite, the registers of :func:`~rtl_gen.gae.regs.gae_register_map` in the Vitis HLS
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
        members = {"ap_clk": In(1), "ap_rst_n": In(1), "interrupt": Out(1)}
        for bridge, prefix in ((self._csr, "s_axi_control_"), (self._mem, "s_axi_mem_")):
            for name, member in bridge.signature.members.items():
                if name.startswith(prefix):
                    members[name] = member
        super().__init__(members)

    @property
    def config(self) -> GaeCoreConfig:
        return self._config

    @property
    def regmap(self):
        return self._regmap

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        m.domains.sync = cd = ClockDomain("sync", local=True)
        m.d.comb += [cd.clk.eq(self.ap_clk), cd.rst.eq(~self.ap_rst_n)]

        csr, mem = self._csr, self._mem
        m.submodules.csr = csr
        m.submodules.mem = mem
        m.submodules.core = core = GaeCore(cfg)

        # Bus ports straight through.
        for bridge, prefix in ((csr, "s_axi_control_"), (mem, "s_axi_mem_")):
            for name, member in bridge.signature.members.items():
                if name.startswith(prefix):
                    outer, inner = getattr(self, name), getattr(bridge, name)
                    if member.flow == In:
                        m.d.comb += inner.eq(outer)
                    else:
                        m.d.comb += outer.eq(inner)

        # Control: ap_ctrl_hs handshake; a start while busy is refused, not queued.
        refused = Signal()
        m.d.comb += [
            core.start.eq(csr.ap_start),
            csr.ap_ready.eq(core.ready),
            csr.ap_done.eq(core.done),
            csr.ap_idle.eq(~core.busy),
            self.interrupt.eq(csr.interrupt),
            refused.eq(csr.ap_start_write & core.busy & ~csr.auto_restart),
            csr.ap_start_refuse.eq(refused),
        ]
        for name in GAE_CORE_ARGS(cfg):
            m.d.comb += getattr(core, name).eq(getattr(csr, name))

        # Status.
        start_refused = Signal()
        with m.If(core.ready):
            m.d.sync += start_refused.eq(0)
        with m.Elif(refused):
            m.d.sync += start_refused.eq(1)
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
        info = hw_info_values(cfg)
        m.d.comb += [csr.hw_n_pe.eq(info["HW_N_PE"]), csr.hw_depth.eq(info["HW_DEPTH"])]
        for reg in ("HW_FORMAT", "HW_MODE"):
            for f in self._regmap[reg].fields:
                m.d.comb += getattr(csr, f"{reg}_{f.name}".lower()).eq(f.get(info[reg]))

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
