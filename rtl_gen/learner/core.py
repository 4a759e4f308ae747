"""Learner core: an MLP training step as a pipeline of tensor-unit stages (CF'22 section 3.2)."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from sw.learner.adam import ADAM_ARGS
from sw.learner.layout import mem_addr_bits, region_bytes, regions, sub_words
from sw.learner.schedule import stages
from sw.learner.spec import (LEARNER_ERRORS, LEARNER_FLAGS, STATUS_FLAGS, SYNC_BITS,
                             LearnerConfig, learner_register_map)
from sw.shell.spec import HOST_READ_LATENCY

from ..shell.host_port import delayed, register_host_requests
from ..shell.signatures import (ArgsSignature, MemoryPortSignature, RunControlSignature,
                                StatusSignature)
from .stages import STAGE_BLOCKS
from .stages.buffers import LearnerBuffers, gt_const, lt_const_registered, or_all, widen
from .stages.common import StageContext

__all__ = ["LearnerCore", "FLAG_FIELDS"]

#: The STATUS field (a ``status`` member) of each saturation flag of :data:`LEARNER_FLAGS`.
FLAG_FIELDS = {flag: f"status_{name.lower()}" for name, (_, flag, _) in STATUS_FLAGS.items()
               if flag}


class LearnerCore(wiring.Component):
    """One SGD step of an MLP on a pipeline of tensor units, without the bus adapters.

    The stages of :func:`sw.learner.schedule.stages` -- FW of every layer (and of the
    target network for DQN: CF'22's parallel chain, section 3.2.4), LOSS, BW of every layer
    above the first, WA of every weight tensor, WU of every weight tensor -- each with its own
    :class:`~rtl_gen.learner.tensor_unit.TensorUnit` (LOSS and WU are element-wise), work on
    on-chip buffers in the S × S block layout of :mod:`sw.learner.layout`. Each GEMM
    stage's unit is R × C (:meth:`LearnerConfig.stage_array`: S × S unless
    ``config.stage_arrays`` sizes it, R and C powers of two up to S): a tile takes an R- or
    C-lane chunk of a block's row or column, and its results are written into C-lane groups of
    a block row (the buffers' write granularity is the narrowest C). The batch
    streams through them in sub-batches of ``config.sub_batch`` samples: a stage starts
    sub-batch p as soon as its producers finished it, so FW of one sub-batch overlaps BW and WA
    of the previous ones (CF'22's pipelining). The FIFOs between stages are the buffers
    themselves: they hold the whole batch (one slot per sample), a producer's *done* count is
    the FIFO's fill level, and no stage ever waits for a consumer. WU of a layer runs once BW
    (the other reader of its weights) finished the last sub-batch, gradient block by gradient
    block: with one pipeline each block as soon as WA has written its last tile of the last
    sub-batch (WU overlaps WA's last item, reading the scratchpad on a port of its own), with
    dp > 1 after WA finished every sub-batch.

    Each stage is a block of :mod:`rtl_gen.learner.stages` (:class:`~.stages.FwStage`,
    :class:`~.stages.LossStage`, :class:`~.stages.BwStage`, :class:`~.stages.WaStage`,
    :class:`~.stages.WuStage`), built into this module -- not a Verilog module of its own --
    from a :class:`~.stages.StageContext` (configuration, buffers, run control) and its
    producers' :class:`~.stages.StageStatus`; this module holds the run control, the host port
    and the wiring of the stages.

    Data parallelism (CF'22's DP, ``config.dp`` > 1): every stage but WU exists once per
    pipeline, with its own tensor unit, activation, error and mask buffers and gradient
    scratchpad; sub-batch p runs on pipeline ``p mod dp``. Inputs and weights are shared (each
    pipeline has its own read ports; synthesis replicates the memories per port). WU adds the
    pipelines' scratchpads row by row in pipeline order with saturation (one stage per added
    pipeline), writes the sum back to pipeline 0's scratchpad (what ``grad<l>`` reads) and
    updates the weights. The host's view is the same as with one pipeline: sample-indexed
    regions are decoded to the pipeline that holds each sub-batch.

    Arithmetic is that of :func:`sw.learner.mlp.train_step` with ``sub_batch=config.sub_batch``
    and ``dp=config.dp`` bit for bit: the tensor units of ``config.tensor_unit(kind)``, ReLU
    masks stored by FW and applied by BW, the WA partial sums of each sub-batch added into an
    ``acc_width`` scratchpad with saturation, the TD target
    ``saturate(r + round(γ·(1-d)·max Q'))``, and ``W ← saturate(W - rshift_round(η·G))``.
    Weights are read row by row for FW and column by column (Wᵀ) for BW from the same blocks:
    transposes are read orders, not copies.

    A step, started by ``start`` while idle with ``batch_size`` in 1..``max_batch``:
    ``ready`` pulses, the stages run, ``done`` pulses when every weight tensor is updated, and
    ``cycles`` then reads :func:`~sw.learner.schedule.step_cycles`. A bad batch size ends
    the start at once (``done`` in the next cycle) with ``error`` = 1 and memory untouched. The
    sticky flags (cleared at each start) report saturation per :data:`LEARNER_FLAGS`;
    ``loss_sum`` is ``Σ (Q - y)²`` over the batch (raw, ``2·act_frac`` fraction bits: the
    loss is ``loss_sum · 2**-2act_frac / B``). Weights persist between steps.

    Target-network sync (DQN): a step whose start sees ``sync_target`` high, or whose start
    makes the step counter reach ``sync_period`` (N > 0: every N-th step counted since the last
    sync, DQN's target update period; 0: off), copies the updated online weights into the
    target weights: WU writes each updated row into ``w<l>`` and ``tw<l>`` in the same cycle, so
    the sync costs no cycles (the target FW chain has finished every sub-batch before any WU
    starts). ``synced`` shows whether the last step synced, ``sync_count`` the steps since the
    last sync (saturating at 2**16 - 1; a refused start counts nothing). The host may still
    write ``tw<l>`` itself between steps.

    Timing and throughput: every GEMM stage issues one operand pair per cycle into its R × C
    unit (R·C multiply-accumulates per cycle) in tiles of ``max(K, R)`` cycles; an item's
    results are written ``2R + C + 5`` cycles after its last operand (``2R + C + 6`` for BW,
    which registers the row of the ReLU mask it applies, ``2R + C + 7`` for WA, which reads the
    scratchpad row, adds and writes it back). LOSS handles one sample and S
    outputs per cycle, WU S weights per layer per cycle. :mod:`sw.learner.schedule` gives
    every stage's item times; for CartPole's 4-64-64-2 and B = 32 a step takes 11987 cycles on
    4 × 4 units, 3534 on 8 × 8 (sub-batches of 8), and 3641 with 8 × 8 units on the
    64 × 64 layer only (4 × 8, 4 × 2 and 2 × 4 elsewhere: 384 instead of 704 multipliers).

    Resources: ``dp·(3L - 1)`` tensor units (``dp·(4L - 1)`` for DQN; layer 0 has no BW), each
    R·C multipliers; per buffer one
    memory of S × S blocks (``S²·width`` bits per word, ``acc_width`` lanes for gradients), a
    second read port where two stages read it (inputs of WA; weights for BW), 1-bit ReLU masks;
    S multipliers γ·Q (DQN) or S squarers (MSE) in LOSS, S η·G multipliers per layer in WU.

    Host port (only while idle, ``host_enable``): word addresses in ``axi_data_width`` units of
    the map of :mod:`sw.learner.layout`; read data :data:`~sw.shell.spec.HOST_READ_LATENCY`
    cycles after ``host_re``; ``host_we`` are byte enables, written one cycle after the port
    (the request is registered); writes to result regions and reads or writes past a region's
    words are ignored (reads return 0). ``host_enable`` is low during a step and while
    ``start`` is high.

    Parameters
    ----------
    config : LearnerConfig

    Members
    -------
    ctrl : ``In(RunControlSignature(error_bits=2))``
        ``start``; ``ready`` and ``done`` one-cycle pulses; ``busy`` high during a step;
        ``error``; ``cycles``.
    args : ``In(ArgsSignature(learner_register_map(config)))``
        ``batch_size`` (13 bits), ``lr`` (η raw, ``lr_width``), ``gamma`` (``coef_width``);
        DQN also ``sync_target`` (sync this step) and ``sync_period`` (every N-th step, 0:
        off). Sampled with ``ctrl.start``; they must be stable from the cycle before ``start``
        (their checks and what the counters load at the start are registered every cycle).
    status : ``Out(StatusSignature(...))``
        ``status_<flag>_overflow`` for each of :data:`LEARNER_FLAGS` (:data:`FLAG_FIELDS`),
        ``loss_lo``/``loss_hi`` (the 64-bit loss sum); DQN also ``status_target_synced`` (the
        last step copied w into tw) and ``sync_count`` (steps since the last sync).
    host : ``In(MemoryPortSignature(axi_data_width, ...))``
        The host's port into the memory regions (``host.enable`` low during a step).

    Raises
    ------
    TypeError
        If ``config`` is not a :class:`LearnerConfig`.
    """

    def __init__(self, config: LearnerConfig):
        if not isinstance(config, LearnerConfig):
            raise TypeError(f"config must be a LearnerConfig, not {config!r}")
        self._config = config
        D = config.axi_data_width
        host_bits = mem_addr_bits(config) - (D // 8 - 1).bit_length()
        regmap = learner_register_map(config)
        super().__init__({
            "ctrl": In(RunControlSignature(error_bits=2)),
            "args": In(ArgsSignature(regmap)),
            "status": Out(StatusSignature(regmap)),
            "host": In(MemoryPortSignature(data_width=D, addr_width=host_bits,
                                           read_latency=HOST_READ_LATENCY)),
        })

    @property
    def config(self) -> LearnerConfig:
        return self._config

    # -----------------------------------------------------------------------------------------
    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        num = cfg.numerics
        S = cfg.array
        w = num.width

        # -- run control --------------------------------------------------------------------
        busy = Signal()
        clear = Signal()          # the cycle a step starts: every stage resets its counters
        eta = Signal(num.lr_width)
        gamma = Signal(num.coef_width)
        cycles = Signal(32)
        err = Signal(2)
        m.d.comb += [self.ctrl.busy.eq(busy), self.ctrl.cycles.eq(cycles),
                     self.ctrl.error.eq(err)]
        with m.If(busy):
            m.d.sync += cycles.eq(cycles + 1)
        # This step copies the updated weights into tw<l> (the name is the shipped Verilog's).
        sync_now = Signal(name="_sync_now")

        # -- memories -----------------------------------------------------------------------
        bufs = LearnerBuffers(m, cfg)

        # -- stages -------------------------------------------------------------------------
        # Each stage is built into this Module in the order of stages(cfg), from the status of
        # its producers; their flags and loss terms are collected in the same order.
        flags = {f: [] for f in LEARNER_FLAGS}
        # Σ (Q - y)²: squares of (width + 1)-bit differences, S per row for MSE, over the batch.
        loss_bits = min(64, 2 * (w + 2) + (0 if cfg.loss == "dqn" else S.bit_length())
                        + cfg.max_batch.bit_length())
        loss_acc = Signal(loss_bits)
        loss_terms = []
        # Adam's arguments, held during the step like η and γ.
        adam = None
        if cfg.optimizer == "adam":
            adam = {port: Signal(signed(len(getattr(self.args, port))) if sgn
                                 else len(getattr(self.args, port)), name=f"{port}_q")
                    for port, sgn, _ in ADAM_ARGS.values()}
        ctx = StageContext(config=cfg, buffers=bufs, busy=busy, clear=clear,
                           batch_size=self.args.batch_size, eta=eta, gamma=gamma,
                           sync_now=sync_now, adam=adam)
        status = {}
        for st in stages(cfg):
            block = STAGE_BLOCKS[st.kind](ctx, st, {d: status[d] for d in st.deps})
            status[st.name] = block.build(m)
            for f, v in status[st.name].flags:
                flags[f].append(v)
            loss_terms += status[st.name].loss_terms
        all_done = Const(1, 1)
        for st in stages(cfg):
            if st.kind == "wu":
                all_done = all_done & status[st.name].all

        # -- control FSM --------------------------------------------------------------------
        m.d.sync += [self.ctrl.ready.eq(0), self.ctrl.done.eq(0)]
        m.d.comb += clear.eq(self.ctrl.start & ~busy)
        # Target-network sync (DQN): decided when the step starts, from SYNC_TARGET and the
        # period counter; WU then writes the updated weights into w<l> and tw<l> alike.
        if cfg.loss == "dqn":
            count = Signal(SYNC_BITS)
            count1 = Signal(SYNC_BITS + 1, init=1)      # count + 1, a register beside it
            top = (1 << SYNC_BITS) - 1
            # Registered every cycle: the arguments are stable from the cycle before start
            # and ``count`` changes only at a start.
            due = Signal(name="sync_due")
            m.d.sync += due.eq(self.args.sync_target | ((self.args.sync_period != 0)
                                                        & (count1 >= self.args.sync_period)))
            m.d.comb += [self.status.sync_count.eq(count),
                         self.status.status_target_synced.eq(sync_now)]
        # BATCH_SIZE's check, registered every cycle (the arguments are stable from the cycle
        # before start).
        bad_batch = Signal(name="bad_batch")
        m.d.sync += bad_batch.eq(~self.args.batch_size.any()
                                 | gt_const(self.args.batch_size, cfg.max_batch))
        with m.If(clear):
            m.d.sync += [self.ctrl.ready.eq(1), cycles.eq(0), eta.eq(self.args.lr),
                         gamma.eq(self.args.gamma), loss_acc.eq(0), sync_now.eq(0)]
            if adam is not None:
                m.d.sync += [v.eq(getattr(self.args, port)) for port, v in adam.items()]
            with m.If(bad_batch):
                m.d.sync += [err.eq(LEARNER_ERRORS["batch_size"]), self.ctrl.done.eq(1)]
            with m.Else():
                m.d.sync += [err.eq(0), busy.eq(1)]
                if cfg.loss == "dqn":
                    at_top = count == top
                    m.d.sync += [sync_now.eq(due),
                                 count.eq(Mux(due, 0, Mux(at_top, top, count + 1))),
                                 count1.eq(Mux(due, 1, Mux(at_top, top + 1, count + 2)))]
        with m.Elif(busy & all_done):
            m.d.sync += [busy.eq(0), self.ctrl.done.eq(1)]

        for name, srcs in flags.items():
            # Each source registered before the or (the flag shows one cycle later, still
            # by the cycle ``done`` rises: the last source is a WU row, a cycle before).
            reg = Signal(name=f"flag_{name}_reg")
            hit = Const(0, 1)
            if srcs:
                srcs_q = Signal(len(srcs), name=f"flag_{name}_src")
                m.d.sync += srcs_q.eq(Cat(*srcs))
                hit = srcs_q.any()
            with m.If(clear):
                m.d.sync += reg.eq(0)
            with m.Elif(hit):
                m.d.sync += reg.eq(1)
            m.d.comb += getattr(self.status, FLAG_FIELDS[name]).eq(reg)
        with m.If(~clear):
            total = 0
            for term in loss_terms:
                total = total + term
            m.d.sync += loss_acc.eq(loss_acc + total)
        loss_sum = Signal(64)
        m.d.comb += [loss_sum.eq(loss_acc),            # zero-extended to 64 bits
                     self.status.loss_lo.eq(loss_sum[:32]),
                     self.status.loss_hi.eq(loss_sum[32:])]

        self._host_port(m, bufs, busy)
        bufs.connect(m)
        return m

    # -- host port --------------------------------------------------------------------------------
    def _host_port(self, m, bufs, busy):
        """The host port on the buffers' port 0 and write ports, while not ``busy``: the
        request registered (:func:`~rtl_gen.shell.host_port.register_host_requests`), the
        block RAMs' data cut into D-bit pieces, every piece but the one read zeroed by a
        registered flag, the pieces of a word or-ed three at a time (one LUT level after the
        block RAM) into registers, then the or of those into a register (read latency
        :data:`~sw.shell.spec.HOST_READ_LATENCY`)."""
        cfg = self._config
        D = cfg.axi_data_width
        DB = D // 8
        local_bits = (region_bytes(cfg) // DB - 1).bit_length()
        req = register_host_requests(m, self.host, busy=busy, start=self.ctrl.start)
        addr = req.addr
        local = addr[:local_bits]
        idle = Signal(name="host_idle")
        m.d.comb += idle.eq(~busy)
        # Which region the request is in, and whether it is within the region's words:
        # decoded from the port's address into registers beside the request's (the decode
        # and the byte-enable and port-select logic after it would not fit one cycle), the
        # region's number and the word's bound apart (the port's address is a multiplexer
        # of the shell's, so each compare gets a cycle of its own before their and).
        p_local = self.host.addr[:local_bits]
        p_reg = self.host.addr[local_bits:]
        reg_q = Signal(len(regions(cfg)), name="host_region_q")
        m.d.sync += reg_q.eq(Cat(*[p_reg == idx for idx in range(len(regions(cfg)))]))
        bounds, inside = {}, []                     # (sub-word bits, depth) -> Value
        for r in regions(cfg):
            key = ((sub_words(cfg, r) - 1).bit_length(), r.depth(cfg))
            if key not in bounds:
                bounds[key] = lt_const_registered(m, p_local[key[0]:], key[1],
                                                   name=f"host_inside_{len(bounds)}")
            inside.append(bounds[key])
        # A signal, not an expression: Amaranth copies an expression's logic into every
        # statement that uses it (there is no sharing of common subexpressions), and each
        # region's hit is used once per D-bit piece of its word.
        hit_q = Signal(len(inside), name="host_hit")
        m.d.comb += hit_q.eq(Cat(*[reg_q[idx] & b for idx, b in enumerate(inside)]))

        def pieces_q(word, bits, sub, keep, name):
            """The word's D-bit pieces, each zeroed unless its bit of ``keep`` (registered
            beside the block RAM's data) selects it, or-ed in groups of three into registers:
            a LUT6 takes three pieces' bits and their flags, so one LUT level follows the block
            RAM (a single piece: a flip-flop reset, no LUT). The registers of a 1,024-bit word
            of 128-bit pieces are 3 instead of 8, and the or after them has a third of the
            inputs (its depth in LUTs grew with the pieces: 6 levels for 187 at S = 8)."""
            pieces = [Mux(keep[i], word[i * D:min((i + 1) * D, bits)], 0)
                      for i in range(sub) if i * D < bits]
            out = []
            for k in range(0, len(pieces), 3):
                group = pieces[k:k + 3]
                q = Signal(max(len(x) for x in group), name=f"{name}_{k // 3}")
                m.d.sync += q.eq(or_all(group))
                out.append(q)
            return out

        def keep_q(sel, lsel, sub, name):
            """Which piece of a region's word the read returns (``lsel``, the piece's index),
            registered beside the block RAM's data: one bit per piece, all 0 unless this
            region (and pipeline) was read."""
            return delayed(m, Cat(*[sel & (lsel == i) for i in range(sub)]), 1, name=name)

        rd = []
        dp = cfg.dp
        pb = (cfg.sub_batch // cfg.array - 1).bit_length()     # row groups per sub-batch
        db = (dp - 1).bit_length()
        rsel = Signal(name="host_rsel")
        m.d.comb += rsel.eq(idle & req.re)
        for idx, r in enumerate(regions(cfg)):
            sub = sub_words(cfg, r)
            sbits = (sub - 1).bit_length()
            bits = r.word_bits(cfg)
            blk = local[sbits:]
            lsel = local[:sbits] if sbits else Const(0, 1)     # the piece, read or written
            in_range = hit_q[idx]
            if r.name in bufs or r.name.startswith("grad"):
                # (the reduced gradient lives in pipeline 0)
                buf = bufs[r.name] if r.name in bufs else bufs[f"{r.name}@0"]
                buf.read_port(0).use(rsel & in_range, blk, idle)
                keep = keep_q(rsel & in_range, lsel, sub, f"host_keep_{r.name}")
                rd += pieces_q(buf.read_port(0).data, bits, sub, keep, f"host_data_{r.name}")
            else:
                # Sample-indexed result: row group rg = (sub-batch p, group in it); sub-batch
                # p lives in pipeline p mod dp as its local sub-batch p div dp.
                gb = (r.col_groups(cfg) - 1).bit_length()
                cgf, rgf = blk[:gb], blk[gb:]
                pipe = rgf[pb:pb + db]
                local_blk = Cat(cgf, rgf[:pb], rgf[pb + db:])
                for d in range(dp):
                    port = bufs[f"{r.name}@{d}"].read_port(0)
                    hit = rsel & in_range & ((pipe == d) if db else Const(1, 1))
                    port.use(hit, local_blk, idle)
                    keep = keep_q(hit, lsel, sub, f"host_keep_{r.name}_{d}")
                    rd += pieces_q(port.data, bits, sub, keep, f"host_data_{r.name}_{d}")
            if r.host_write:
                nbytes = r.word_bits(cfg) // 8
                full = Signal(sub * DB, name=f"host_en_{r.name}")
                hit = idle & in_range
                m.d.comb += full.eq(Cat(*[Mux(hit & (lsel == i), req.we, 0)
                                          for i in range(sub)]))
                assert buf.granularity == 8
                buf.write(full[:nbytes], blk,
                          Cat(*([req.wdata] * sub))[:r.word_bits(cfg)], sel=idle)
        # Every piece is 0 but the one read (0 if the read hit no region): their or.
        rdata = Signal(D, name="host_rdata_q")
        m.d.sync += rdata.eq(or_all(widen(x, D) for x in rd))
        m.d.comb += self.host.rdata.eq(rdata)

