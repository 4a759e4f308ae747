"""Prioritized replay accelerator: the K-ary sum tree behind AXI4-Lite control and AXI4 buffers."""

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory

from sw.replay.spec import (
    REGIONS,
    REPLAY_ERRORS,
    TAIL,
    WORD_BYTES,
    ReplayOp,
    SumTreeConfig,
    field_bits,
    hw_info_values,
    mem_addr_bits,
    region_bits,
    region_words,
    replay_register_map,
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
from .layouts import SumTreeOp
from .sumtree import SumTree

__all__ = ["ReplayAccelerator"]

class ReplayAccelerator(wiring.Component):
    """Prioritized replay with the ports a Vivado block design or a Vitis/XRT kernel expects.

    A :class:`~rtl_gen.replay.sumtree.SumTree` (one operation per cycle, latency
    ``L = 3 * levels + 6``), five batch buffers (:data:`~sw.replay.spec.REGIONS`, one
    memory each, ``region_words`` deep, only their used bits wide) and a batch engine. Ports:
    ``ap_clk``, ``ap_rst_n`` (active-low synchronous reset), ``s_axi_control_*`` (AXI4-Lite,
    :func:`~sw.replay.spec.replay_register_map`, ``ap_ctrl_hs``), ``s_axi_mem_*`` (AXI4,
    64-bit, the buffers; SLVERR while a run is in progress) and ``interrupt``.

    A run (OP, BATCH_SIZE, UPDATE_SIZE latched at AP_START): the engine reads one command per
    cycle from the input buffers into the tree (a one-cycle buffer read, then the command
    register) and writes every response into IDX_OUT/PRIO_OUT at the next free entry in the
    cycle it leaves the tree. It ends when every command has been taken, every response is
    written and :data:`TAIL` cycles have passed since the last command. Updates are *posted*:
    the run does not wait for them to leave the tree, because the tree is sequentially
    consistent: every later operation, of this run or the next, sees them. Hence

    * B samples, inserts or reads: ``B + L + 3`` cycles (:func:`sw.replay.spec.run_cycles`);
    * B updates: ``B + 6``;
    * UPDATE_SAMPLE, U updates then B samples: ``U + B + L + 3``; RELAXED (samples first,
      updates after them: the samples see the tree before this run's updates):
      ``B + max(L, U + 3) + 3``: the samples' trip through the tree overlaps the issue of
      the updates, which saves ``L - 3`` cycles once ``U >= L - 3``. One operation per cycle
      either way: relaxing the order adds no throughput to a pipeline that never stalls.

    A start with invalid arguments (OP.CODE > 7, BATCH_SIZE or UPDATE_SIZE 0 or above
    ``max_batch``) ends at once with STATUS.ERROR set, tree and buffers untouched; AP_START
    written during a run is dropped and flagged STATUS.START_REFUSED. The tree's sticky flags
    (STATUS.EMPTY, SATURATED, INVALID_INDEX) are cleared at each accepted start.

    After ``ap_rst_n`` (and a RESET run) the tree zeroes its memories in ``level_groups[-1]``
    cycles (STATUS.TREE_BUSY); a run started meanwhile waits for it, and a RESET run ends after
    it. SEED waits until no operation is in the tree, then loads the PRNG.

    Parameters
    ----------
    config : SumTreeConfig
        The tree; ``max_batch`` sizes the buffers.
    host_port : str
        ``"axi"`` (default): the buffers behind ``s_axi_mem``, clocked by ``ap_clk``.
        ``"local"``: no ``s_axi_mem``, ``ap_clk``, ``ap_rst_n``; the buffers on the local word
        port of :func:`~rtl_gen.shell.accelerator.host_port_members` (64-bit words, the same word
        addresses, ``host_enable = ~busy``), in the parent's ``sync`` domain: for a DMA shell
        (:class:`~rtl_gen.shell.window_kernel.WindowKernel`).
    regmap : RegisterMap or None
        The control map: :func:`~sw.replay.spec.replay_register_map` (default) or one
        that adds registers after it (a DMA shell drives them through :attr:`csr`).
    control_addr_width : int or None
        Address bits of ``s_axi_control`` (default the map's minimum).

    Members
    -------
    ap_clk, ap_rst_n : ``In(1)``
        Clock (rising edge) and synchronous active-low reset.
    s_axi_control_* : AXI4-Lite slave, 32-bit data, ``regmap.min_addr_width`` address bits
        The registers of :func:`~sw.replay.spec.replay_register_map`.
    s_axi_mem_* : AXI4 slave, 64-bit data, ``mem_addr_bits(config)`` address bits, 1-bit IDs
        The batch buffers (:mod:`sw.replay.spec`).
    interrupt : ``Out(1)``
        ``GIER & |IP_ISR``.

    Raises
    ------
    TypeError
        If ``config`` is not a :class:`SumTreeConfig` (its own parameters are checked there).
    """

    def __init__(self, config: SumTreeConfig, *, host_port="axi", regmap=None,
                 control_addr_width=None):
        if not isinstance(config, SumTreeConfig):
            self._MustUse__silence = True    # no "created but never used" warning for this
            raise TypeError(f"config must be a SumTreeConfig, not {config!r}")
        self._config = config
        self._regmap = check_host_options(replay_register_map(config), host_port, regmap)
        self._host_port = host_port
        self._csr = AxiLiteCsr(self._regmap, prefix="s_axi_control",
                               addr_width=control_addr_width)
        self._mem_words = len(REGIONS) * region_words(config)
        self._mem = (AxiMemorySlave(data_width=8 * WORD_BYTES, addr_width=mem_addr_bits(config),
                                    id_width=1, depth=self._mem_words, prefix="s_axi_mem")
                     if host_port == "axi" else None)
        super().__init__(accelerator_members(self._csr, self._mem, host_port,
                                             data_width=8 * WORD_BYTES,
                                             addr_width=max(1, (self._mem_words - 1)
                                                            .bit_length())))

    @property
    def config(self) -> SumTreeConfig:
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
        """Words (64-bit) of the memory window: five regions of ``region_words``."""
        return self._mem_words

    @property
    def latency(self) -> int:
        """Latency of the tree (:attr:`~sw.replay.spec.SumTreeConfig.latency`): a response
        leaves the tree that many cycles after its command entered it."""
        return self._config.latency

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        csr = self._csr
        tree = SumTree(cfg)
        hmem = host_shell(m, self, csr, self._mem, self._host_port, core_name="tree", core=tree)

        rw = region_words(cfg)
        rbits = (rw - 1).bit_length()
        busy = Signal()

        # -- buffers: one memory per region; the host port while idle, the engine while busy --
        mems, rports, wports = {}, {}, {}
        for name in REGIONS:
            mem = Memory(shape=unsigned(region_bits(cfg, name)), depth=rw, init=[])
            m.submodules[f"buf_{name.lower()}"] = mem
            mems[name] = mem
            rports[name] = mem.read_port()
            wports[name] = mem.write_port(granularity=8)
        h_region = Signal(range(len(REGIONS) + 1))
        h_word = Signal(max(1, rbits))
        m.d.comb += [h_region.eq(hmem.mem_addr >> rbits), h_word.eq(hmem.mem_addr[:rbits]
                                                                   if rbits else 0)]
        h_region_q = Signal.like(h_region)
        m.d.sync += h_region_q.eq(h_region)
        rdata = 0
        for r, name in enumerate(REGIONS):
            bits = region_bits(cfg, name)
            rdata = rdata | Mux(h_region_q == r, rports[name].data, 0)
            with m.If(~busy):
                m.d.comb += [
                    rports[name].addr.eq(h_word),
                    rports[name].en.eq(hmem.mem_re & (h_region == r)),
                    wports[name].addr.eq(h_word),
                    wports[name].data.eq(hmem.mem_wdata[:field_bits(cfg, name)]),
                    wports[name].en.eq(Mux(h_region == r, hmem.mem_we[:bits // 8], 0)),
                ]
        m.d.comb += [hmem.mem_rdata.eq(rdata), hmem.enable.eq(~busy)]

        # -- control --------------------------------------------------------------------------
        ready = Signal()
        done = Signal()
        start_refused, _ = ap_ctrl_hs(m, self, csr, busy=busy, ready=ready, done=done)
        error = Signal(2)
        cycles = Signal(32)
        rsp_cycles = Signal(32)
        m.d.sync += [ready.eq(0), done.eq(0)]
        with m.If(busy):
            m.d.sync += cycles.eq(cycles + 1)

        # Latched run: up to two phases (tree operation, count) issued one after the other.
        bw = max(cfg.batch_width, 1)
        ph_op = [Signal(SumTreeOp, name=f"ph{p}_op") for p in range(2)]
        ph_n = [Signal(bw, name=f"ph{p}_n") for p in range(2)]
        phase = Signal()                        # the phase being issued
        issue_i = Signal(bw)                    # next element of the phase to read
        issuing = Signal()                      # elements left to read
        n_rsp = Signal(bw)                      # output entries expected
        rsp_j = Signal(bw)                      # output entries written
        wait_tree = Signal()                    # RESET: end when the tree is idle again
        tail = Signal(range(TAIL + 1))

        cur_op = Mux(phase, ph_op[1], ph_op[0])
        cur_n = Mux(phase, ph_n[1], ph_n[0])

        # Issue: buffer read (cycle 1), command register (cycle 2, valid until taken).
        c_valid = Signal()
        c_op = Signal(SumTreeOp)
        advance = ~c_valid | tree.cmd.ready
        fetch = issuing & advance
        with m.If(busy):
            for name in ("IDX_IN", "PRIO_IN", "TARGET_IN"):
                m.d.comb += [rports[name].addr.eq(issue_i), rports[name].en.eq(advance)]
        with m.If(advance):
            m.d.sync += [c_valid.eq(fetch), c_op.eq(cur_op)]
        with m.If(fetch):
            m.d.sync += issue_i.eq(issue_i + 1)
            with m.If(issue_i == cur_n - 1):
                m.d.sync += issue_i.eq(0)
                with m.If(~phase & (ph_n[1] != 0)):
                    m.d.sync += phase.eq(1)
                with m.Else():
                    m.d.sync += issuing.eq(0)
        m.d.comb += [
            tree.cmd.valid.eq(c_valid),
            tree.cmd.payload.op.eq(c_op),
            tree.cmd.payload.index.eq(rports["IDX_IN"].data),
            tree.cmd.payload.priority.eq(rports["PRIO_IN"].data),
            tree.cmd.payload.target.eq(rports["TARGET_IN"].data),
            tree.rsp.ready.eq(1),
        ]
        taken = tree.cmd.valid & tree.cmd.ready
        with m.If(taken):
            m.d.sync += tail.eq(TAIL)
        with m.Elif(tail != 0):
            m.d.sync += tail.eq(tail - 1)

        # Responses: written to the output buffers in order.
        got = tree.rsp.valid & busy
        with m.If(busy):
            for name, field in (("IDX_OUT", "index"), ("PRIO_OUT", "value")):
                bits = region_bits(cfg, name)
                m.d.comb += [
                    wports[name].addr.eq(rsp_j),
                    wports[name].data.eq(getattr(tree.rsp.payload, field)[:bits]),
                    wports[name].en.eq(Mux(got, (1 << (bits // 8)) - 1, 0)),
                ]
        with m.If(got):
            m.d.sync += [rsp_j.eq(rsp_j + 1), rsp_cycles.eq(cycles + 1)]

        # Arguments.
        code = csr.op_code
        batch = csr.batch_size
        usize = csr.update_size
        sample_op = Mux(csr.op_prng, SumTreeOp.SAMPLE_PRNG, SumTreeOp.SAMPLE)
        bad_batch = (batch == 0) | (batch > cfg.max_batch)
        bad_usize = (usize == 0) | (usize > cfg.max_batch)
        b_n = batch[:bw]
        u_n = usize[:bw]

        with m.FSM(name="engine"):
            with m.State("IDLE"):
                # (not in the cycle after an accept: AP_START falls only then)
                with m.If(csr.ap_start & ~ready):
                    m.d.sync += [ready.eq(1), cycles.eq(0), rsp_cycles.eq(0), error.eq(0),
                                 phase.eq(0), issue_i.eq(0), rsp_j.eq(0), n_rsp.eq(0),
                                 wait_tree.eq(0), ph_n[1].eq(0)]
                    m.d.comb += tree.clear.eq(1)
                    fail = Signal(2)
                    with m.If(code > max(o.value for o in ReplayOp)):
                        m.d.comb += fail.eq(REPLAY_ERRORS["op"])
                    with m.Elif((code != ReplayOp.RESET) & (code != ReplayOp.SEED) & bad_batch):
                        m.d.comb += fail.eq(REPLAY_ERRORS["batch_size"])
                    with m.Elif((code == ReplayOp.UPDATE_SAMPLE) & bad_usize):
                        m.d.comb += fail.eq(REPLAY_ERRORS["update_size"])
                    with m.If(fail != 0):
                        m.d.sync += [error.eq(fail), done.eq(1)]
                    with m.Elif(code == ReplayOp.SEED):
                        m.d.sync += busy.eq(1)
                        m.next = "SEED"
                    with m.Else():
                        m.d.sync += [busy.eq(1), issuing.eq(1), ph_n[0].eq(b_n)]
                        m.next = "RUN"
                        with m.Switch(code):
                            with m.Case(ReplayOp.SAMPLE):
                                m.d.sync += [ph_op[0].eq(sample_op), n_rsp.eq(b_n)]
                            with m.Case(ReplayOp.UPDATE):
                                m.d.sync += ph_op[0].eq(SumTreeOp.UPDATE)
                            with m.Case(ReplayOp.INSERT):
                                m.d.sync += [ph_op[0].eq(SumTreeOp.INSERT), n_rsp.eq(b_n)]
                            with m.Case(ReplayOp.INSERT_MAX):
                                m.d.sync += [ph_op[0].eq(SumTreeOp.INSERT_MAX), n_rsp.eq(b_n)]
                            with m.Case(ReplayOp.READ):
                                m.d.sync += [ph_op[0].eq(SumTreeOp.READ), n_rsp.eq(b_n)]
                            with m.Case(ReplayOp.UPDATE_SAMPLE):
                                m.d.sync += n_rsp.eq(b_n)
                                with m.If(csr.op_relaxed):
                                    m.d.sync += [ph_op[0].eq(sample_op),
                                                 ph_op[1].eq(SumTreeOp.UPDATE), ph_n[1].eq(u_n)]
                                with m.Else():
                                    m.d.sync += [ph_op[0].eq(SumTreeOp.UPDATE), ph_n[0].eq(u_n),
                                                 ph_op[1].eq(sample_op), ph_n[1].eq(b_n)]
                            with m.Case(ReplayOp.RESET):
                                m.d.sync += [ph_op[0].eq(SumTreeOp.RESET), ph_n[0].eq(1),
                                             wait_tree.eq(1)]
            with m.State("RUN"):
                finished = (~issuing & ~c_valid & (rsp_j == n_rsp) & (tail == 0)
                            & ~(wait_tree & tree.busy))
                with m.If(finished):
                    m.d.sync += [busy.eq(0), done.eq(1)]
                    m.next = "IDLE"
            with m.State("SEED"):
                with m.If(~tree.busy):
                    m.d.comb += tree.seed_load.eq(1)
                    m.d.sync += [busy.eq(0), done.eq(1)]
                    m.next = "IDLE"
        m.d.comb += tree.seed.eq(csr.seed)

        # -- status and results ---------------------------------------------------------------
        root, mx = tree.total, tree.max_priority
        m.d.comb += [
            csr.status_error.eq(error),
            csr.status_empty.eq(tree.empty),
            csr.status_saturated.eq(tree.saturated),
            csr.status_invalid_index.eq(tree.invalid),
            csr.status_start_refused.eq(start_refused),
            csr.status_tree_busy.eq(tree.busy),
            csr.cycles.eq(cycles),
            csr.response_cycles.eq(rsp_cycles),
            csr.total_lo.eq(root[:32]),
            csr.total_hi.eq(root[32:] if len(root) > 32 else 0),
            csr.max_priority_lo.eq(mx[:32]),
            csr.max_priority_hi.eq(mx[32:] if len(mx) > 32 else 0),
            csr.size.eq(tree.size),
            csr.write_pointer.eq(tree.write_pointer),
        ]
        drive_constants(m, csr, self._regmap, hw_info_values(cfg))
        return m
