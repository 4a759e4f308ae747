"""The learner as a Vivado/Vitis kernel: core + AXI4-Lite control + AXI4 memory."""

from amaranth.hdl import Module
from amaranth.lib import wiring

from sw.learner.layout import mem_addr_bits
from sw.learner.spec import (
    LEARNER_ARGS,
    STATUS_FLAGS,
    SYNC_ARGS,
    LearnerConfig,
    hw_info_values,
    learner_register_map,
)

from ..shell.accelerator import (
    accelerator_members,
    ap_ctrl_hs,
    check_host_options,
    drive_constants,
    host_shell,
)
from ..shell.lite_csr import AxiLiteCsr
from ..shell.mm_slave import AxiMemorySlave
from .core import LearnerCore

__all__ = ["LearnerAccelerator"]


class LearnerAccelerator(wiring.Component):
    """MLP learner with the ports a Vivado block design or a Vitis/XRT kernel expects.

    Ports: ``ap_clk``, ``ap_rst_n`` (active-low synchronous reset), ``s_axi_control_*``
    (AXI4-Lite, the registers of :func:`~sw.learner.spec.learner_register_map` in the Vitis
    HLS ``ap_ctrl_hs`` layout), ``s_axi_mem_*`` (AXI4, the memory regions of
    :mod:`sw.learner.layout`, locked with SLVERR during a step) and ``interrupt``.

    A host writes the weights (once; they stay on chip and are updated in place), per step the
    batch and the arguments (BATCH_SIZE, LR, GAMMA), sets CTRL.AP_START, waits for AP_DONE (or
    the interrupt) and reads STATUS, LOSS and whatever results it wants (Q values, TD errors
    δ, gradients, weights). DQN: the target network is synced in hardware (no extra cycles)
    on steps started with SYNC_TARGET = 1 and every SYNC_PERIOD-th step (SYNC_COUNT counts the
    steps since the last sync, STATUS.TARGET_SYNCED reports the last step's); the host may
    also write ``tw<l>`` itself. A start with a bad batch size completes at once with STATUS.ERROR
    set and memory untouched; AP_START written during a step is dropped and sets
    STATUS.START_REFUSED. Cycles of a step: :func:`sw.learner.schedule.step_cycles`
    (also in CYCLES).

    Parameters
    ----------
    config : LearnerConfig
    host_port : str
        ``"axi"`` (default): the memory behind ``s_axi_mem``, clocked by ``ap_clk``.
        ``"local"``: no ``s_axi_mem``, ``ap_clk``, ``ap_rst_n``; the core's host port on the
        local word port of :func:`~rtl_gen.shell.accelerator.host_port_members`
        (``axi_data_width``-bit
        words, the same word addresses), in the parent's ``sync`` domain: for a DMA shell
        (:class:`~rtl_gen.shell.window_kernel.WindowKernel`).
    regmap : RegisterMap or None
        The control map: :func:`~sw.learner.spec.learner_register_map` (default) or one
        that adds registers after it (a DMA shell drives them through :attr:`csr`).
    control_addr_width : int or None
        Address bits of ``s_axi_control`` (default the map's minimum).

    Raises
    ------
    TypeError
        If ``config`` is not a :class:`LearnerConfig`.
    """

    def __init__(self, config: LearnerConfig, *, host_port="axi", regmap=None,
                 control_addr_width=None):
        if not isinstance(config, LearnerConfig):
            self._MustUse__silence = True
            raise TypeError(f"config must be a LearnerConfig, not {config!r}")
        self._config = config
        self._regmap = check_host_options(learner_register_map(config), host_port, regmap)
        self._host_port = host_port
        D = config.axi_data_width
        abits = mem_addr_bits(config)
        self._csr = AxiLiteCsr(self._regmap, prefix="s_axi_control",
                               addr_width=control_addr_width)
        wbits = abits - (D // 8 - 1).bit_length()
        self._mem_words = 1 << wbits
        self._mem = (AxiMemorySlave(data_width=D, addr_width=abits, id_width=1,
                                    depth=self._mem_words, prefix="s_axi_mem")
                     if host_port == "axi" else None)
        super().__init__(accelerator_members(self._csr, self._mem, host_port, data_width=D,
                                             addr_width=max(1, wbits)))

    @property
    def config(self) -> LearnerConfig:
        return self._config

    @property
    def regmap(self):
        return self._regmap

    @property
    def csr(self) -> AxiLiteCsr:
        """The control port's register block (a DMA shell drives its extra registers)."""
        return self._csr

    @property
    def mem_words(self) -> int:
        """Words (``axi_data_width`` bits) of the memory window."""
        return self._mem_words

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        csr = self._csr
        core = LearnerCore(cfg)
        mem = host_shell(m, self, csr, self._mem, self._host_port, core_name="core", core=core)

        # Control: ap_ctrl_hs handshake; a start during a step is refused, not queued.
        start_refused, _ = ap_ctrl_hs(m, self, csr, busy=core.busy, ready=core.ready,
                                      done=core.done, start=core.start)
        for reg, (port, _) in LEARNER_ARGS.items():
            m.d.comb += getattr(core, port).eq(getattr(csr, reg.lower()))
        m.d.comb += [
            csr.status_error.eq(core.error),
            csr.status_start_refused.eq(start_refused),
            csr.loss_lo.eq(core.loss_sum[:32]),
            csr.loss_hi.eq(core.loss_sum[32:]),
            csr.cycles.eq(core.cycles),
        ]
        if cfg.loss == "dqn":                   # target-network sync
            for reg, (port, _, _) in SYNC_ARGS.items():
                m.d.comb += getattr(core, port).eq(getattr(csr, reg.lower()))
            m.d.comb += [csr.status_target_synced.eq(core.synced),
                         csr.sync_count.eq(core.sync_count)]
        for name, (_, flag, _) in STATUS_FLAGS.items():
            if flag:
                m.d.comb += getattr(csr, f"status_{name.lower()}").eq(
                    getattr(core, f"flag_{flag}"))
        drive_constants(m, csr, self._regmap, hw_info_values(cfg))

        # Memory: the host port of the core behind the AXI4 slave, locked during a step.
        m.d.comb += [
            mem.enable.eq(core.host_enable),
            core.host_addr.eq(mem.mem_addr),
            core.host_re.eq(mem.mem_re),
            core.host_we.eq(mem.mem_we),
            core.host_wdata.eq(mem.mem_wdata),
            mem.mem_rdata.eq(core.host_rdata),
        ]
        return m
