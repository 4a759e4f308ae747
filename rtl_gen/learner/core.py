"""Learner core: an MLP training step as a pipeline of tensor-unit stages (CF'22 section 3.2)."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from sw.learner.layout import mem_addr_bits, region_bytes, regions, sub_words
from sw.learner.schedule import stages, wu_overlaps
from sw.learner.spec import LEARNER_ERRORS, LEARNER_FLAGS, SYNC_BITS, LearnerConfig

from ..fixed import rshift_round, saturate
from .stages.buffers import (LearnerBuffers, block_addr, block_col, block_row, chunk,
                             lane_mask, or_all, split, widen)
from .tensor_unit import TensorUnit

__all__ = ["LearnerCore"]


def _hw(name):
    """Signal-name form of a stage name (``fw0@1`` -> ``fw0_p1``)."""
    return name.replace("@", "_p")


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
    results are written ``2R + C + 5`` cycles after its last operand (``2R + C + 7`` for WA,
    which reads the scratchpad row, adds and writes it back). LOSS handles one sample and S
    outputs per cycle, WU S weights per layer per cycle. :mod:`sw.learner.schedule` gives
    every stage's item times; for CartPole's 4-64-64-2 and B = 32 a step takes 11980 cycles on
    4 × 4 units, 3527 on 8 × 8 (sub-batches of 8), and 3634 with 8 × 8 units on the
    64 × 64 layer only (4 × 8, 4 × 2 and 2 × 4 elsewhere: 384 instead of 704 multipliers).

    Resources: ``dp·(3L - 1)`` tensor units (``dp·(4L - 1)`` for DQN; layer 0 has no BW), each
    R·C multipliers; per buffer one
    memory of S × S blocks (``S²·width`` bits per word, ``acc_width`` lanes for gradients), a
    second read port where two stages read it (inputs of WA; weights for BW), 1-bit ReLU masks;
    S multipliers γ·Q (DQN) or S squarers (MSE) in LOSS, S η·G multipliers per layer in WU.

    Host port (only while idle, ``host_enable``): word addresses in ``axi_data_width`` units of
    the map of :mod:`sw.learner.layout`; read data one cycle after ``host_re``; ``host_we``
    are byte enables; writes to result regions and reads or writes past a region's words are
    ignored (reads return 0).

    Parameters
    ----------
    config : LearnerConfig

    Members
    -------
    start : ``In(1)``; busy, ready, done : ``Out(1)``
        ``ready`` and ``done`` are one-cycle pulses; ``busy`` is high during a step.
    error : ``Out(2)``; cycles : ``Out(32)``
    batch_size : ``In(13)``; lr : ``In(lr_width)`` (η raw); gamma : ``In(coef_width)``
        Sampled with ``start``.
    sync_target : ``In(1)``; sync_period : ``In(16)``
        DQN only, sampled with ``start``: sync this step; sync every N-th step (0: off).
    sync_count : ``Out(16)``; synced : ``Out(1)``
        DQN only: steps since the last sync; the last step copied w into tw.
    flag_<name> : ``Out(1)`` for each of :data:`LEARNER_FLAGS`
    loss_sum : ``Out(64)``
    host_enable : ``Out(1)``; host_addr : ``In``; host_re : ``In(1)``; host_rdata : ``Out(D)``;
    host_we : ``In(D/8)``; host_wdata : ``In(D)``

    Raises
    ------
    TypeError
        If ``config`` is not a :class:`LearnerConfig`.
    """

    def __init__(self, config: LearnerConfig):
        if not isinstance(config, LearnerConfig):
            self._MustUse__silence = True
            raise TypeError(f"config must be a LearnerConfig, not {config!r}")
        self._config = config
        D = config.axi_data_width
        host_bits = mem_addr_bits(config) - (D // 8 - 1).bit_length()
        num = config.numerics
        ports = {
            "start": In(1), "busy": Out(1), "ready": Out(1), "done": Out(1),
            "error": Out(2), "cycles": Out(32),
            "batch_size": In(13), "lr": In(num.lr_width), "gamma": In(num.coef_width),
            "loss_sum": Out(64),
            "host_enable": Out(1), "host_addr": In(host_bits), "host_re": In(1),
            "host_rdata": Out(D), "host_we": In(D // 8), "host_wdata": In(D),
        }
        if config.loss == "dqn":
            ports.update({"sync_target": In(1), "sync_period": In(SYNC_BITS),
                          "sync_count": Out(SYNC_BITS), "synced": Out(1)})
        for f in LEARNER_FLAGS:
            ports[f"flag_{f}"] = Out(1)
        super().__init__(ports)

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
        self._m = m

        # -- run control --------------------------------------------------------------------
        busy = Signal()
        clear = Signal()          # the cycle a step starts: every stage resets its counters
        eta = Signal(num.lr_width)
        gamma = Signal(num.coef_width)
        cycles = Signal(32)
        err = Signal(2)
        m.d.comb += [self.busy.eq(busy), self.cycles.eq(cycles), self.error.eq(err),
                     self.host_enable.eq(~busy)]
        with m.If(busy):
            m.d.sync += cycles.eq(cycles + 1)
        self._busy, self._clear = busy, clear
        self._eta, self._gamma = eta, gamma
        self._sync_now = Signal()       # this step copies the updated weights into tw<l>

        # -- memories -----------------------------------------------------------------------
        bufs = LearnerBuffers(m, cfg)
        self._bufs = bufs

        # -- stages -------------------------------------------------------------------------
        flags = {f: [] for f in LEARNER_FLAGS}
        self._flags = flags
        self._stage = {}
        # Σ (Q - y)²: squares of (width + 1)-bit differences, S per row for MSE, over the batch.
        loss_bits = min(64, 2 * (w + 2) + (0 if cfg.loss == "dqn" else S.bit_length())
                        + cfg.max_batch.bit_length())
        loss_acc = Signal(loss_bits)
        self._loss_terms = []
        for st in stages(cfg):
            if st.kind in ("fw", "tfw"):
                self._fw_stage(st)
            elif st.kind == "bw":
                self._bw_stage(st)
            elif st.kind == "wa":
                self._wa_stage(st)
            elif st.kind == "loss":
                self._loss_stage(st)
            else:
                self._wu_stage(st)
        all_done = Const(1, 1)
        for st in stages(cfg):
            if st.kind == "wu":
                all_done = all_done & self._stage[st.name]["all"]

        # -- control FSM --------------------------------------------------------------------
        m.d.sync += [self.ready.eq(0), self.done.eq(0)]
        m.d.comb += clear.eq(self.start & ~busy)
        # Target-network sync (DQN): decided when the step starts, from SYNC_TARGET and the
        # period counter; WU then writes the updated weights into w<l> and tw<l> alike.
        sync_now = self._sync_now
        if cfg.loss == "dqn":
            count = Signal(SYNC_BITS)
            top = (1 << SYNC_BITS) - 1
            due = self.sync_target | ((self.sync_period != 0)
                                      & (count + 1 >= self.sync_period))
            m.d.comb += [self.sync_count.eq(count), self.synced.eq(sync_now)]
        with m.If(clear):
            m.d.sync += [self.ready.eq(1), cycles.eq(0), eta.eq(self.lr), gamma.eq(self.gamma),
                         loss_acc.eq(0), sync_now.eq(0)]
            with m.If((self.batch_size == 0) | (self.batch_size > cfg.max_batch)):
                m.d.sync += [err.eq(LEARNER_ERRORS["batch_size"]), self.done.eq(1)]
            with m.Else():
                m.d.sync += [err.eq(0), busy.eq(1)]
                if cfg.loss == "dqn":
                    m.d.sync += [sync_now.eq(due),
                                 count.eq(Mux(due, 0, Mux(count == top, top, count + 1)))]
        with m.Elif(busy & all_done):
            m.d.sync += [busy.eq(0), self.done.eq(1)]

        for name, srcs in flags.items():
            reg = Signal(name=f"flag_{name}_reg")
            with m.If(clear):
                m.d.sync += reg.eq(0)
            with m.Elif(or_all(srcs)):
                m.d.sync += reg.eq(1)
            m.d.comb += getattr(self, f"flag_{name}").eq(reg)
        with m.If(~clear):
            total = 0
            for term in self._loss_terms:
                total = total + term
            m.d.sync += loss_acc.eq(loss_acc + total)
        m.d.comb += self.loss_sum.eq(loss_acc)         # zero-extended to 64 bits

        self._host_port()
        bufs.connect(m)
        return m

    # -- shared pieces ----------------------------------------------------------------------------
    def _b(self, name, d):
        """Buffer ``name`` as pipeline d sees it."""
        return self._bufs.get(name, d)

    def _port(self, name, d, role):
        return self._bufs.port(name, d, role)

    def _item_counter(self, name, d):
        """Item bookkeeping of pipeline d (sub-batches d, d + dp, ...): local index p, first row
        group of the item in the pipeline's buffers, samples of the batch from it on."""
        m, cfg = self._m, self._config
        per = cfg.sub_batch // cfg.array
        p = Signal(13, name=f"{name}_p")
        base = Signal(13, name=f"{name}_base")             # item's first row group: pipeline's
        gbase = Signal(13, name=f"{name}_gbase")           # and the batch's (shared inputs)
        rem = Signal(signed(14), name=f"{name}_rem")       # B - (d + p·dp)·m
        cnt = Signal(range(cfg.sub_batch + 1), name=f"{name}_cnt")
        m.d.comb += cnt.eq(Mux(rem < cfg.sub_batch, rem, cfg.sub_batch))

        def advance():
            return [p.eq(p + 1), base.eq(base + per), gbase.eq(gbase + per * cfg.dp),
                    rem.eq(rem - cfg.sub_batch * cfg.dp)]

        with m.If(self._clear):
            m.d.sync += [p.eq(0), base.eq(0), gbase.eq(d * per),
                         rem.eq(self.batch_size - d * cfg.sub_batch)]
        self._gbase = gbase
        return p, base, rem, cnt, advance

    def _deps_ok(self, st, p):
        ok = Const(1, 1)
        for d in st.deps:
            ok = ok & (self._stage[d]["done"] > p)
        return ok

    def _deps_all(self, st):
        ok = Const(1, 1)
        for d in st.deps:
            ok = ok & self._stage[d]["all"]
        return ok

    def _done_counter(self, st, event):
        """Items finished (``event``: the write of an item's last result) and whether that is
        all of them; both visible the cycle after the write."""
        m, cfg = self._m, self._config
        name = _hw(st.name)
        done = Signal(13, name=f"{name}_done")
        left = Signal(signed(14), name=f"{name}_left")      # B - (d + done·dp)·m
        with m.If(self._clear):
            m.d.sync += [done.eq(0), left.eq(self.batch_size - st.pipe * cfg.sub_batch)]
        with m.Elif(event):
            m.d.sync += [done.eq(done + 1), left.eq(left - cfg.sub_batch * cfg.dp)]
        all_done = Signal(name=f"{name}_all")
        m.d.comb += all_done.eq(left <= 0)
        self._stage[st.name] = {"done": done, "all": all_done}

    def _tensor_unit(self, stage_name, kind):
        m = self._m
        name = _hw(stage_name)
        tu = TensorUnit(self._config.stage_tensor_unit(stage_name))
        m.submodules[f"tu_{name}"] = tu
        m.d.comb += [tu.o.ready.eq(1), tu.clear.eq(0)]
        return tu

    def _gemm_loop(self, st, *, outer, middle, k_len, outer_runtime, k_runtime):
        """Slot sequencer of a GEMM stage on an R × C unit.

        Loops: outer o (``outer`` tiles, or while ``o·R < cnt`` if ``outer_runtime``), middle n
        (``middle`` tiles), slot t in a tile of ``T = max(K, R)`` slots, the first ``T - K``
        bubbles, K = ``k_len`` (or ``cnt`` if ``k_runtime``). Returns a dict of signals.
        """
        m, cfg = self._m, self._config
        S = cfg.array
        R = cfg.stage_array(st.name)[0]
        lr = R.bit_length() - 1
        name = _hw(st.name)
        busy = self._busy
        p, base, rem, cnt, advance = self._item_counter(name, st.pipe)
        gbase = self._gbase
        running = Signal(name=f"{name}_running")
        kmax = max(k_len, cfg.sub_batch, S) if k_runtime else max(k_len, R)
        o = Signal(range(max(outer, cfg.sub_batch // R) + 1), name=f"{name}_o")
        n = Signal(range(middle + 1), name=f"{name}_n")
        t = Signal(range(kmax + 1), name=f"{name}_t")
        if k_runtime:
            K = Signal(range(kmax + 1), name=f"{name}_K")
            pad = Signal(range(R + 1), name=f"{name}_pad")
            m.d.comb += [K.eq(cnt), pad.eq(Mux(cnt < R, R - cnt, 0))]
        else:                       # constants: no compare against a zero pad
            K, pad = k_len, max(0, R - k_len)
        go = Signal(name=f"{name}_go")
        slot = Signal(name=f"{name}_slot")
        m.d.comb += [
            go.eq(busy & ~running & (rem > 0) & self._deps_ok(st, p)),
            slot.eq(go | running),
        ]
        k = Signal(range(kmax + 1), name=f"{name}_k")
        bubble = Signal(name=f"{name}_bubble")
        m.d.comb += [bubble.eq(t < pad) if not isinstance(pad, int) or pad else bubble.eq(0),
                     k.eq(t - pad)]
        t_last = t == pad + K - 1
        n_last = n == middle - 1
        if outer_runtime:
            o_last = ((o + 1) << lr) >= cnt
        else:
            o_last = o == outer - 1
        item_last = t_last & n_last & o_last
        with m.If(self._clear):
            m.d.sync += [running.eq(0), o.eq(0), n.eq(0), t.eq(0)]
        with m.Elif(slot):
            with m.If(t_last):
                m.d.sync += t.eq(0)
                with m.If(n_last):
                    m.d.sync += n.eq(0)
                    with m.If(o_last):
                        m.d.sync += [o.eq(0), running.eq(0)] + advance()
                    with m.Else():
                        m.d.sync += [o.eq(o + 1), running.eq(1)]
                with m.Else():
                    m.d.sync += [n.eq(n + 1), running.eq(1)]
            with m.Else():
                m.d.sync += [t.eq(t + 1), running.eq(1)]
        elem = Signal(name=f"{name}_elem")
        m.d.comb += elem.eq(slot & ~bubble)
        return {"p": p, "base": base, "gbase": gbase, "cnt": cnt, "o": o, "n": n, "k": k,
                "elem": elem, "last": t_last, "item_last": item_last}

    def _writer_loop(self, name, d, *, rows, outer, middle, outer_runtime, beat):
        """Beat counters of a GEMM stage's output (an R-row unit, R = ``rows``): row i,
        middle n, outer o, item p."""
        m, cfg = self._m, self._config
        R = rows
        p, base, rem, cnt, advance = self._item_counter(f"{name}_w", d)
        i = Signal(range(R), name=f"{name}_wi")
        o = Signal(range(max(outer, cfg.sub_batch // R) + 1), name=f"{name}_wo")
        n = Signal(range(middle + 1), name=f"{name}_wn")
        i_last = i == R - 1
        n_last = n == middle - 1
        lr = R.bit_length() - 1
        o_last = (((o + 1) << lr) >= cnt) if outer_runtime else (o == outer - 1)
        with m.If(self._clear):
            m.d.sync += [i.eq(0), o.eq(0), n.eq(0)]
        with m.Elif(beat):
            m.d.sync += i.eq(i + 1)
            with m.If(i_last):
                m.d.sync += i.eq(0)
                with m.If(n_last):
                    m.d.sync += n.eq(0)
                    with m.If(o_last):
                        m.d.sync += [o.eq(0)] + advance()
                    with m.Else():
                        m.d.sync += o.eq(o + 1)
                with m.Else():
                    m.d.sync += n.eq(n + 1)
        return {"p": p, "base": base, "rem": rem, "cnt": cnt, "i": i, "o": o, "n": n,
                "item_last": i_last & n_last & o_last}

    def _feed(self, name, tu, loop, a_vals, b_vals):
        """Register the operands (computed from memory data one cycle after the slot) into the
        tensor unit's input (R values of A, C of B)."""
        m = self._m
        v1 = Signal(name=f"{name}_v1")
        l1 = Signal(name=f"{name}_l1")
        m.d.sync += [v1.eq(loop["elem"] & ~self._clear), l1.eq(loop["last"])]
        v2 = Signal(name=f"{name}_v2")
        m.d.sync += v2.eq(v1)
        m.d.comb += tu.i.valid.eq(v2)
        pa = [Signal(signed(self._config.width), name=f"{name}_a{i}")
              for i in range(len(a_vals))]
        pb = [Signal(signed(self._config.width), name=f"{name}_b{j}")
              for j in range(len(b_vals))]
        pl = Signal(name=f"{name}_last")
        m.d.sync += [x.eq(v) for x, v in zip(pa, a_vals)]
        m.d.sync += [x.eq(v) for x, v in zip(pb, b_vals)]
        m.d.sync += pl.eq(l1)
        m.d.comb += [tu.i.payload.a[i].eq(x) for i, x in enumerate(pa)]
        m.d.comb += [tu.i.payload.b[j].eq(x) for j, x in enumerate(pb)]
        m.d.comb += tu.i.payload.last.eq(pl)

    # -- FW ---------------------------------------------------------------------------------------
    def _fw_stage(self, st):
        m, cfg = self._m, self._config
        num = cfg.numerics
        S, sb, w = cfg.array, cfg.log_array, cfg.width
        R, C = cfg.stage_array(st.name)
        lr_, lc = R.bit_length() - 1, C.bit_length() - 1
        L = cfg.n_layers
        l, d, nm = st.layer, st.pipe, _hw(st.name)
        target = st.kind == "tfw"
        n_in, n_out = cfg.sizes[l], cfg.sizes[l + 1]
        K = n_in + 1
        ngo = -(-n_out // C)
        if l == 0:
            src = "next_obs" if target else "obs"
        else:
            src = f"th{l - 1}" if target else f"h{l - 1}"
        wname = f"tw{l}" if target else f"w{l}"
        last_layer = l == L - 1
        dst = ("tq" if target else "q") if last_layer else (f"th{l}" if target else f"h{l}")
        tu = self._tensor_unit(st.name, "fw")
        loop = self._gemm_loop(st, outer=cfg.sub_batch // R, middle=ngo, k_len=K,
                               outer_runtime=True, k_runtime=False)
        o, n, k = loop["o"], loop["n"], loop["k"]
        ob, osub = split(o, R, S)           # sample block, R-chunk in it
        nbk, nsub = split(n, C, S)          # output block, C-chunk in it
        kk = Signal(range(K + 1), name=f"{nm}_kk")
        m.d.comb += kk.eq(k)
        bias = kk == n_in
        en = loop["elem"]
        # A: column k%S of the input block (samples of row group base + o/(S/R)), R of them.
        x_port = self._port(src, d, 0)
        x_cg = Mux(bias, 0, kk >> sb)
        x_rg = (loop["gbase"] if src in self._bufs.shared else loop["base"]) + ob
        x_data = x_port.use(en, block_addr(x_rg, x_cg, cfg.groups_pow2(n_in)))
        # B: row k%S of weight block (k/S, n/(S/C)), C of them.
        w_port = self._port(wname, d, 0)
        w_data = w_port.use(en, block_addr(kk >> sb, nbk, cfg.groups_pow2(n_out)))
        # Metadata for the cycle the data arrives.
        kl1 = Signal(range(S), name=f"{nm}_kl1")
        bias1 = Signal(name=f"{nm}_bias1")
        osub1 = Signal.like(osub, name=f"{nm}_osub1")
        nsub1 = Signal.like(nsub, name=f"{nm}_nsub1")
        svalid1 = Signal(R, name=f"{nm}_sv1")
        cvalid1 = Signal(C, name=f"{nm}_cv1")
        m.d.sync += [kl1.eq(kk[:sb]), bias1.eq(bias), osub1.eq(osub), nsub1.eq(nsub),
                     svalid1.eq(Cat(*[((o << lr_) + i) < loop["cnt"] for i in range(R)])),
                     cvalid1.eq(Cat(*[((n << lc) + j) < n_out for j in range(C)]))]
        one = 1 << num.act_frac
        col = chunk(block_col(x_data, kl1, w, S), osub1, R, w)
        row = chunk(block_row(w_data, kl1, w, S), nsub1, C, w)
        a_vals = [Mux(svalid1[i], Mux(bias1, one, col[i].as_signed()), 0) for i in range(R)]
        b_vals = [Mux(cvalid1[j], row[j].as_signed(), 0) for j in range(C)]
        self._feed(nm, tu, loop, a_vals, b_vals)

        # Writer: relu (hidden layers) and the mask, one cycle after the beat.
        beat = tu.o.valid
        wl = self._writer_loop(nm, d, rows=R, outer=cfg.sub_batch // R, middle=ngo,
                               outer_runtime=True, beat=beat)
        wob, wosub = split(wl["o"], R, S)
        wnb, wnsub = split(wl["n"], C, S)
        g_out = cfg.groups_pow2(n_out)
        r_v = Signal(name=f"{nm}_rv")
        r_addr = Signal(24, name=f"{nm}_raddr")
        r_row = Signal(range(S), name=f"{nm}_rrow")
        r_lanes = Signal(S, name=f"{nm}_rlanes")
        r_c = [Signal(signed(w), name=f"{nm}_rc{j}") for j in range(C)]
        r_last = Signal(name=f"{nm}_rlast")
        m.d.sync += [r_v.eq(beat & ~self._clear), r_last.eq(wl["item_last"]),
                     r_row.eq(Cat(wl["i"], wosub) if R < S else wl["i"]),
                     r_lanes.eq(lane_mask(wnsub, C, S)),
                     r_addr.eq(block_addr(wl["base"] + wob, wnb, g_out))]
        m.d.sync += [r_c[j].eq(tu.o.payload.c[j]) for j in range(C)]
        valid_row = ((wl["o"] << lr_) + wl["i"]) < wl["cnt"]
        self._flags["target_fw" if target else "fw"].append(
            beat & tu.o.payload.overflow & valid_row)
        onehot = Signal(S, name=f"{nm}_onehot")
        m.d.comb += onehot.eq(Mux(r_v, 1 << r_row, 0))
        vals = r_c if last_layer else [Mux(c > 0, c, 0) for c in r_c]
        data = Cat(*[v[:w] for v in vals]).replicate(S // C)
        dbuf = self._b(dst, d)
        lanes = r_lanes if C < S else None
        dbuf.write(dbuf.row_enable(onehot, lanes), r_addr, data.replicate(S))
        if not last_layer and not target:
            mbuf = self._b(f"mask{l}", d)
            mdata = Cat(*[c > 0 for c in r_c]).replicate(S // C)
            mbuf.write(mbuf.row_enable(onehot, lanes), r_addr, mdata.replicate(S))
        self._done_counter(st, r_v & r_last)

    # -- BW ---------------------------------------------------------------------------------------
    def _bw_stage(self, st):
        m, cfg = self._m, self._config
        S, sb, w = cfg.array, cfg.log_array, cfg.width
        R, C = cfg.stage_array(st.name)
        lr_, lc = R.bit_length() - 1, C.bit_length() - 1
        l, d, nm = st.layer, st.pipe, _hw(st.name)
        n_in, n_out = cfg.sizes[l], cfg.sizes[l + 1]
        K = n_out
        ngi = -(-n_in // C)
        tu = self._tensor_unit(st.name, "bw")
        loop = self._gemm_loop(st, outer=cfg.sub_batch // R, middle=ngi, k_len=K,
                               outer_runtime=True, k_runtime=False)
        o, n, k = loop["o"], loop["n"], loop["k"]
        ob, osub = split(o, R, S)
        nbk, nsub = split(n, C, S)
        kk = Signal(range(K + 1), name=f"{nm}_kk")
        m.d.comb += kk.eq(k)
        en = loop["elem"]
        d_port = self._port(f"delta{l}", d, 0)
        d_data = d_port.use(en, block_addr(loop["base"] + ob, kk >> sb, cfg.groups_pow2(n_out)))
        w_port = self._port(f"w{l}", d, 1)
        w_data = w_port.use(en, block_addr(nbk, kk >> sb, cfg.groups_pow2(n_out)))
        kl1 = Signal(range(S), name=f"{nm}_kl1")
        osub1 = Signal.like(osub, name=f"{nm}_osub1")
        nsub1 = Signal.like(nsub, name=f"{nm}_nsub1")
        svalid1 = Signal(R, name=f"{nm}_sv1")
        rvalid1 = Signal(C, name=f"{nm}_rv1")
        m.d.sync += [kl1.eq(kk[:sb]), osub1.eq(osub), nsub1.eq(nsub),
                     svalid1.eq(Cat(*[((o << lr_) + i) < loop["cnt"] for i in range(R)])),
                     rvalid1.eq(Cat(*[((n << lc) + j) < n_in for j in range(C)]))]
        dcol = chunk(block_col(d_data, kl1, w, S), osub1, R, w)
        wcol = chunk(block_col(w_data, kl1, w, S), nsub1, C, w)
        a_vals = [Mux(svalid1[i], dcol[i].as_signed(), 0) for i in range(R)]
        b_vals = [Mux(rvalid1[j], wcol[j].as_signed(), 0) for j in range(C)]
        self._feed(nm, tu, loop, a_vals, b_vals)

        beat = tu.o.valid
        wl = self._writer_loop(nm, d, rows=R, outer=cfg.sub_batch // R, middle=ngi,
                               outer_runtime=True, beat=beat)
        wob, wosub = split(wl["o"], R, S)
        wnb, wnsub = split(wl["n"], C, S)
        g_in = cfg.groups_pow2(n_in)
        addr = block_addr(wl["base"] + wob, wnb, g_in)
        mport = self._port(f"mask{l - 1}", d, 0)
        mdata = mport.use(beat, addr)
        r_v = Signal(name=f"{nm}_rv")
        r_addr = Signal(24, name=f"{nm}_raddr")
        r_row = Signal(range(S), name=f"{nm}_rrow")
        r_nsub = Signal.like(wnsub, name=f"{nm}_rnsub")
        r_lanes = Signal(S, name=f"{nm}_rlanes")
        r_c = [Signal(signed(w), name=f"{nm}_rc{j}") for j in range(C)]
        r_last = Signal(name=f"{nm}_rlast")
        m.d.sync += [r_v.eq(beat & ~self._clear), r_last.eq(wl["item_last"]),
                     r_row.eq(Cat(wl["i"], wosub) if R < S else wl["i"]), r_nsub.eq(wnsub),
                     r_lanes.eq(lane_mask(wnsub, C, S)), r_addr.eq(addr)]
        m.d.sync += [r_c[j].eq(tu.o.payload.c[j]) for j in range(C)]
        valid_row = ((wl["o"] << lr_) + wl["i"]) < wl["cnt"]
        self._flags["bw"].append(beat & tu.o.payload.overflow & valid_row)
        mrow = chunk(list(mdata.word_select(r_row, S)), r_nsub, C, 1)
        vals = [Mux(mrow[j], r_c[j], 0) for j in range(C)]
        onehot = Signal(S, name=f"{nm}_onehot")
        m.d.comb += onehot.eq(Mux(r_v, 1 << r_row, 0))
        dbuf = self._b(f"delta{l - 1}", d)
        dbuf.write(dbuf.row_enable(onehot, r_lanes if C < S else None), r_addr,
                   Cat(*[v[:w] for v in vals]).replicate(S // C).replicate(S))
        self._done_counter(st, r_v & r_last)

    # -- WA ---------------------------------------------------------------------------------------
    def _wa_stage(self, st):
        m, cfg = self._m, self._config
        num = cfg.numerics
        S, sb, w = cfg.array, cfg.log_array, cfg.width
        R, C = cfg.stage_array(st.name)
        lr_, lc = R.bit_length() - 1, C.bit_length() - 1
        l, d, nm = st.layer, st.pipe, _hw(st.name)
        n_in, n_out = cfg.sizes[l], cfg.sizes[l + 1]
        mt, ngo = -(-(n_in + 1) // R), -(-n_out // C)
        src = "obs" if l == 0 else f"h{l - 1}"
        tu = self._tensor_unit(st.name, "wa")
        loop = self._gemm_loop(st, outer=mt, middle=ngo, k_len=cfg.sub_batch,
                               outer_runtime=False, k_runtime=True)
        o, n, k = loop["o"], loop["n"], loop["k"]
        ob, osub = split(o, R, S)           # feature block, R-chunk in it
        nbk, nsub = split(n, C, S)          # output block, C-chunk in it
        en = loop["elem"]
        rg = loop["base"] + (k >> sb)
        x_rg = (loop["gbase"] if src in self._bufs.shared else loop["base"]) + (k >> sb)
        x_port = self._port(src, d, 1)
        x_cg = Mux((o << lr_) >= n_in, 0, ob)
        x_data = x_port.use(en, block_addr(x_rg, x_cg, cfg.groups_pow2(n_in)))
        d_port = self._port(f"delta{l}", d, 1 if l >= 1 else 0)
        d_data = d_port.use(en, block_addr(rg, nbk, cfg.groups_pow2(n_out)))
        kl1 = Signal(range(S), name=f"{nm}_kl1")
        o1 = Signal.like(o, name=f"{nm}_o1")
        osub1 = Signal.like(osub, name=f"{nm}_osub1")
        nsub1 = Signal.like(nsub, name=f"{nm}_nsub1")
        cvalid1 = Signal(C, name=f"{nm}_cv1")
        m.d.sync += [kl1.eq(k[:sb]), o1.eq(o), osub1.eq(osub), nsub1.eq(nsub),
                     cvalid1.eq(Cat(*[((n << lc) + j) < n_out for j in range(C)]))]
        xrow = chunk(block_row(x_data, kl1, w, S), osub1, R, w)
        drow = chunk(block_row(d_data, kl1, w, S), nsub1, C, w)
        one = 1 << num.act_frac
        a_vals = []
        for i in range(R):
            f = (o1 << lr_) + i
            a_vals.append(Mux(f < n_in, xrow[i].as_signed(), Mux(f == n_in, one, 0)))
        b_vals = [Mux(cvalid1[j], drow[j].as_signed(), 0) for j in range(C)]
        self._feed(nm, tu, loop, a_vals, b_vals)

        # Writer: read-modify-write of the scratchpad (plain write for the first item).
        beat = tu.o.valid
        wl = self._writer_loop(nm, d, rows=R, outer=mt, middle=ngo, outer_runtime=False,
                               beat=beat)
        wob, wosub = split(wl["o"], R, S)
        wnb, wnsub = split(wl["n"], C, S)
        gbuf = self._b(f"grad{l}", d)
        aw = num.acc_width
        addr = block_addr(wob, wnb, cfg.groups_pow2(n_out))
        gport = gbuf.read_port(0)
        gdata = gport.use(beat, addr)
        r_v = Signal(name=f"{nm}_rv")
        r_addr = Signal(24, name=f"{nm}_raddr")
        r_row = Signal(range(S), name=f"{nm}_rrow")
        r_nsub = Signal.like(wnsub, name=f"{nm}_rnsub")
        r_lanes = Signal(S, name=f"{nm}_rlanes")
        r_first = Signal(name=f"{nm}_rfirst")
        r_ovf = Signal(name=f"{nm}_rovf")
        r_c = [Signal(signed(aw), name=f"{nm}_rc{j}") for j in range(C)]
        r_last = Signal(name=f"{nm}_rlast")
        r_tend = Signal(name=f"{nm}_rtend")           # the tile's last row
        r_lastitem = Signal(name=f"{nm}_rlastitem")   # the step's last item (of this pipeline)
        m.d.sync += [r_v.eq(beat & ~self._clear), r_last.eq(wl["item_last"]),
                     r_row.eq(Cat(wl["i"], wosub) if R < S else wl["i"]), r_nsub.eq(wnsub),
                     r_lanes.eq(lane_mask(wnsub, C, S)),
                     r_addr.eq(addr), r_first.eq(wl["p"] == 0),
                     r_ovf.eq(tu.o.payload.overflow), r_tend.eq(wl["i"] == R - 1),
                     r_lastitem.eq(wl["rem"] <= cfg.sub_batch * cfg.dp)]
        m.d.sync += [r_c[j].eq(tu.o.payload.c[j]) for j in range(C)]
        # The old row is registered before the add (logic depth of the tensor unit's own).
        q_v = Signal(name=f"{nm}_qv")
        q_addr = Signal(24, name=f"{nm}_qaddr")
        q_row = Signal(range(S), name=f"{nm}_qrow")
        q_lanes = Signal(S, name=f"{nm}_qlanes")
        q_first, q_ovf, q_last = (Signal(name=f"{nm}_qfirst"),
                                  Signal(name=f"{nm}_qovf"), Signal(name=f"{nm}_qlast"))
        q_c = [Signal(signed(aw), name=f"{nm}_qc{j}") for j in range(C)]
        q_old = [Signal(signed(aw), name=f"{nm}_qold{j}") for j in range(C)]
        q_tend, q_lastitem = Signal(name=f"{nm}_qtend"), Signal(name=f"{nm}_qlastitem")
        m.d.sync += [q_v.eq(r_v & ~self._clear), q_addr.eq(r_addr), q_row.eq(r_row),
                     q_lanes.eq(r_lanes), q_first.eq(r_first), q_ovf.eq(r_ovf),
                     q_last.eq(r_last), q_tend.eq(r_tend), q_lastitem.eq(r_lastitem)]
        m.d.sync += [x.eq(v) for x, v in zip(q_c, r_c)]
        old = chunk(block_row(gdata, r_row, aw, S), r_nsub, C, aw)
        m.d.sync += [x.eq(v) for x, v in zip(q_old, old)]
        fmt = num.wgrad_format
        sums, ovfs = [], []
        for j in range(C):
            s, o_ = saturate(m, q_old[j] + q_c[j], fmt, name=f"{nm}_sum{j}")
            sums.append(Mux(q_first, q_c[j], s))
            ovfs.append(~q_first & o_)
        self._flags["wa"].append(q_v & (q_ovf | or_all(ovfs)))
        # ... and the sum registered before the write.
        u_v, u_last = Signal(name=f"{nm}_uv"), Signal(name=f"{nm}_ulast")
        u_addr = Signal(24, name=f"{nm}_uaddr")
        u_row = Signal(range(S), name=f"{nm}_urow")
        u_lanes = Signal(S, name=f"{nm}_ulanes")
        u_sum = Signal(C * aw, name=f"{nm}_usum")
        u_tend, u_lastitem = Signal(name=f"{nm}_utend"), Signal(name=f"{nm}_ulastitem")
        m.d.sync += [u_v.eq(q_v & ~self._clear), u_last.eq(q_last), u_addr.eq(q_addr),
                     u_row.eq(q_row), u_lanes.eq(q_lanes),
                     u_sum.eq(Cat(*[v[:aw] for v in sums])), u_tend.eq(q_tend),
                     u_lastitem.eq(q_lastitem)]
        onehot = Signal(S, name=f"{nm}_onehot")
        m.d.comb += onehot.eq(Mux(u_v, 1 << u_row, 0))
        gbuf.write(gbuf.row_enable(onehot, u_lanes if C < S else None), u_addr,
                   u_sum.replicate(S // C).replicate(S))
        self._done_counter(st, u_v & u_last)
        # Tiles finished in the item being written, and whether it is the step's last: WU
        # starts on a gradient block once its last tile is written (schedule.wu_block_need).
        tiles = Signal(range(mt * ngo + 1), name=f"{nm}_tiles")
        in_last = Signal(name=f"{nm}_inlast")
        with m.If(self._clear):
            m.d.sync += [tiles.eq(0), in_last.eq(0)]
        with m.Elif(u_v):
            m.d.sync += in_last.eq(u_lastitem)
            with m.If(u_last):
                m.d.sync += tiles.eq(0)
            with m.Elif(u_tend):
                m.d.sync += tiles.eq(tiles + 1)
        self._stage[st.name].update(tiles=tiles, in_last=in_last)

    # -- LOSS -------------------------------------------------------------------------------------
    def _loss_stage(self, st):
        m, cfg = self._m, self._config
        num = cfg.numerics
        S, sb, w = cfg.array, cfg.log_array, cfg.width
        act, gfmt = num.act_format, num.grad_format
        n_out = cfg.n_out
        G = cfg.groups(n_out)
        gq = cfg.groups_pow2(n_out)
        L = cfg.n_layers
        name, d = _hw(st.name), st.pipe
        dqn = cfg.loss == "dqn"
        p, base, rem, cnt, advance = self._item_counter(name, d)
        gbase = self._gbase
        running = Signal(name=f"{name}_running")
        s = Signal(range(cfg.sub_batch + 1), name=f"{name}_s")
        g = Signal(range(G + 1), name=f"{name}_g")
        go = Signal(name=f"{name}_go")
        slot = Signal(name=f"{name}_slot")
        m.d.comb += [go.eq(self._busy & ~running & (rem > 0) & self._deps_ok(st, p)),
                     slot.eq(go | running)]
        g_last = g == G - 1
        s_last = s == cnt - 1
        with m.If(self._clear):
            m.d.sync += [running.eq(0), s.eq(0), g.eq(0)]
        with m.Elif(slot):
            with m.If(g_last):
                m.d.sync += g.eq(0)
                with m.If(s_last):
                    m.d.sync += [s.eq(0), running.eq(0)] + advance()
                with m.Else():
                    m.d.sync += [s.eq(s + 1), running.eq(1)]
            with m.Else():
                m.d.sync += [g.eq(g + 1), running.eq(1)]
        rg = base + (s >> sb)
        grg = gbase + (s >> sb)                            # shared inputs: the batch's rows
        addr = block_addr(rg, g, gq)
        q_data = self._port("q", d, 0).use(slot, addr)
        # Stage 1: the data arrives.
        v1 = Signal(name=f"{name}_v1")
        i1 = Signal(range(S), name=f"{name}_i1")
        g1 = Signal.like(g, name=f"{name}_g1")
        first1 = Signal(name=f"{name}_first1")
        last1 = Signal(name=f"{name}_last1")
        end1 = Signal(name=f"{name}_end1")           # last slot of the item
        rg1 = Signal(13, name=f"{name}_rg1")
        m.d.sync += [v1.eq(slot & ~self._clear), i1.eq(s[:sb]), g1.eq(g), first1.eq(g == 0),
                     last1.eq(g_last), end1.eq(g_last & s_last), rg1.eq(rg)]
        qrow = [x.as_signed() for x in block_row(q_data, i1, w, S)]
        lvalid = [((g1 << sb) + j) < n_out for j in range(S)]
        dbuf = self._b(f"delta{L - 1}", d)
        dw = w + 2

        def convert(x, nm):
            if gfmt.frac >= act.frac:
                return saturate(m, x << (gfmt.frac - act.frac), gfmt, name=nm)
            return saturate(m, rshift_round(x, act.frac - gfmt.frac, gfmt.rounding), gfmt,
                            name=nm)

        if not dqn:
            y_data = self._port("targets", d, 0).use(slot, block_addr(grg, g, gq))
            yrow = [x.as_signed() for x in block_row(y_data, i1, w, S)]
            v2 = Signal(name=f"{name}_v2")
            end2 = Signal(name=f"{name}_end2")
            i2 = Signal(range(S), name=f"{name}_i2")
            a2 = Signal(24, name=f"{name}_a2")
            diff = [Signal(signed(dw), name=f"{name}_diff{j}") for j in range(S)]
            m.d.sync += [v2.eq(v1 & ~self._clear), end2.eq(end1), i2.eq(i1),
                         a2.eq(block_addr(rg1, g1, gq))]
            m.d.sync += [diff[j].eq(Mux(lvalid[j], qrow[j] - yrow[j], 0)) for j in range(S)]
            deltas, dovf = [], []
            for j in range(S):
                dv, do = convert(diff[j], f"{name}_delta{j}")
                deltas.append(dv)
                dovf.append(do)
            self._flags["delta"].append(v2 & or_all(dovf))
            onehot = Signal(S, name=f"{name}_onehot")
            m.d.comb += onehot.eq(Mux(v2, 1 << i2, 0))
            dbuf.write(dbuf.row_enable(onehot), a2, Cat(*[d[:w] for d in deltas]).replicate(S))
            sq = Signal(2 * dw + sb, name=f"{name}_sq")
            sq_v = Signal(name=f"{name}_sqv")
            total = diff[0] * diff[0]
            for j in range(1, S):
                total = total + diff[j] * diff[j]
            m.d.sync += [sq.eq(total), sq_v.eq(v2 & ~self._clear)]
            self._loss_terms.append(Mux(sq_v, sq, 0))
            self._done_counter(st, v2 & end2)
            return

        # DQN.
        t_data = self._port("tq", d, 0).use(slot, addr)
        smp = self._port("samples", d, 0).use(slot, grg)
        trow = [x.as_signed() for x in block_row(t_data, i1, w, S)]
        lb = w + cfg.action_bits + 1
        lane = smp.word_select(i1, lb)
        r1 = lane[:w].as_signed()
        a1 = lane[w:w + cfg.action_bits]
        d1 = lane[w + cfg.action_bits]
        # Max over the valid lanes of this group, then over groups.
        bmax = None
        for j in range(S):
            v = Mux(lvalid[j], trow[j], act.min_raw)
            if bmax is None:
                bmax = v
            else:
                t = Signal(signed(w), name=f"{name}_max{j}")
                m.d.comb += t.eq(Mux(v > bmax, v, bmax))
                bmax = t
        run_max = Signal(signed(w), name=f"{name}_runmax")
        run_qa = Signal(signed(w), name=f"{name}_runqa")
        cur_max = Mux(first1, bmax, Mux(bmax > run_max, bmax, run_max))
        hit = (a1 >> sb) == g1 if G > 1 else Const(1, 1)
        cur_qa = Mux(hit, Cat(*qrow).word_select(a1[:sb], w).as_signed(), run_qa)
        with m.If(v1):
            m.d.sync += [run_max.eq(cur_max), run_qa.eq(cur_qa)]
        # Stage 2: one sample's inputs.
        v2 = Signal(name=f"{name}_v2")
        end2 = Signal(name=f"{name}_end2")
        best2 = Signal(signed(w), name=f"{name}_best2")
        qa2 = Signal(signed(w), name=f"{name}_qa2")
        r2 = Signal(signed(w), name=f"{name}_r2")
        d2 = Signal(name=f"{name}_d2")
        a2 = Signal(cfg.action_bits, name=f"{name}_a2")
        i2 = Signal(range(S), name=f"{name}_i2")
        rg2 = Signal(13, name=f"{name}_rg2")
        m.d.sync += [v2.eq(v1 & last1 & ~self._clear), end2.eq(end1), best2.eq(cur_max),
                     qa2.eq(cur_qa), r2.eq(r1), d2.eq(d1), a2.eq(a1), i2.eq(i1), rg2.eq(rg1)]
        # Stage 3: γ·max Q' (0 at episode ends).
        cw = num.coef_width
        v3, end3 = Signal(name=f"{name}_v3"), Signal(name=f"{name}_end3")
        prod3 = Signal(signed(w + cw + 1), name=f"{name}_prod3")
        qa3, r3 = Signal(signed(w), name=f"{name}_qa3"), Signal(signed(w), name=f"{name}_r3")
        a3, i3, rg3 = Signal.like(a2, name=f"{name}_a3"), Signal.like(i2, name=f"{name}_i3"), \
            Signal.like(rg2, name=f"{name}_rg3")
        m.d.sync += [v3.eq(v2 & ~self._clear), end3.eq(end2),
                     prod3.eq(Mux(d2, 0, best2 * self._gamma)), qa3.eq(qa2), r3.eq(r2),
                     a3.eq(a2), i3.eq(i2), rg3.eq(rg2)]
        # Stages 4a-4c (one adder each): round(γ·max); y = saturate(r + ·); diff = Q[a] - y.
        disc = rshift_round(prod3, cw - 1, act.rounding)
        ctl3 = {"v": v3, "end": end3, "qa": qa3, "a": a3, "i": i3, "rg": rg3}

        def regs(tag, values):
            out = {}
            for key, v in values.items():
                out[key] = Signal(v.shape(), name=f"{name}_{key}{tag}")
                m.d.sync += out[key].eq(v & ~self._clear if key == "v" else v)
            return out

        s4a = regs("4a", {**ctl3, "r": r3, "disc": disc})
        y, yovf = saturate(m, s4a["r"] + s4a["disc"], act, name=f"{name}_y")
        self._flags["target"].append(s4a["v"] & yovf)
        s4b = regs("4b", {**{k: s4a[k] for k in ctl3}, "y": y})
        s4 = regs("4c", {**{k: s4b[k] for k in ctl3 if k != "qa"},
                         "diff": (s4b["qa"] - s4b["y"]).as_signed()})
        v4, end4, diff4 = s4["v"], s4["end"], s4["diff"]
        a4, i4, rg4 = s4["a"], s4["i"], s4["rg"]
        # Stage 5: δ, and the write sequencer (one group per cycle).
        dv, dovf = convert(diff4, f"{name}_delta")
        self._flags["delta"].append(v4 & dovf)
        sq = Signal(2 * dw, name=f"{name}_sq")
        sq_v = Signal(name=f"{name}_sqv")
        m.d.sync += [sq.eq(diff4 * diff4), sq_v.eq(v4 & ~self._clear)]
        self._loss_terms.append(Mux(sq_v, sq, 0))
        ws_v = Signal(name=f"{name}_wsv")
        ws_g = Signal(range(G + 1), name=f"{name}_wsg")
        ws_end = Signal(name=f"{name}_wsend")
        ws_d = Signal(signed(w), name=f"{name}_wsd")
        ws_a = Signal.like(a2, name=f"{name}_wsa")
        ws_i = Signal.like(i2, name=f"{name}_wsi")
        ws_rg = Signal.like(rg2, name=f"{name}_wsrg")
        ws_g_last = ws_g == G - 1
        with m.If(self._clear):
            m.d.sync += [ws_v.eq(0), ws_g.eq(0)]
        with m.Elif(v4):
            m.d.sync += [ws_v.eq(1), ws_g.eq(0), ws_end.eq(end4), ws_d.eq(dv), ws_a.eq(a4),
                         ws_i.eq(i4), ws_rg.eq(rg4)]
        with m.Elif(ws_v):
            with m.If(ws_g_last):
                m.d.sync += ws_v.eq(0)
            with m.Else():
                m.d.sync += ws_g.eq(ws_g + 1)
        ahit = ((ws_a >> sb) == ws_g) if G > 1 else Const(1, 1)
        lanes = [Mux(ahit & (ws_a[:sb] == j), ws_d, 0) for j in range(S)] if sb else \
            [Mux(ahit, ws_d, 0)]
        onehot = Signal(S, name=f"{name}_onehot")
        m.d.comb += onehot.eq(Mux(ws_v, 1 << ws_i, 0))
        dbuf.write(dbuf.row_enable(onehot), block_addr(ws_rg, ws_g, gq),
                   Cat(*[x[:w] for x in lanes]).replicate(S))
        self._done_counter(st, ws_v & ws_g_last & ws_end)

    # -- WU ---------------------------------------------------------------------------------------
    def _wu_stage(self, st):
        m, cfg = self._m, self._config
        num = cfg.numerics
        S, w, dp = cfg.array, cfg.width, cfg.dp
        l = st.layer
        n_in, n_out = cfg.sizes[l], cfg.sizes[l + 1]
        mt, ngo = cfg.groups(n_in + 1), cfg.groups(n_out)
        name = _hw(st.name)
        running = Signal(name=f"{name}_running")
        finished = Signal(name=f"{name}_finished")
        rg = Signal(range(mt + 1), name=f"{name}_rg")
        cg = Signal(range(ngo + 1), name=f"{name}_cg")
        r = Signal(range(S), name=f"{name}_r")
        go = Signal(name=f"{name}_go")
        slot = Signal(name=f"{name}_slot")
        overlap = wu_overlaps(cfg)
        if overlap:
            # Block by block behind WA's last item: block (rg, cg) once WA has written the
            # tile that completes it (tile index wu_block_need, o-major), BW of the layer done.
            wa = self._stage[f"wa{l}"]
            Rw, Cw = cfg.stage_array(f"wa{l}")
            mt_wa, ngo_wa = -(-(n_in + 1) // Rw), -(-n_out // Cw)
            qr, qc = (S // Rw).bit_length() - 1, (S // Cw).bit_length() - 1
            o_hi = Signal(range((mt + 1) << qr), name=f"{name}_ohi")
            n_hi = Signal(range((ngo + 1) << qc), name=f"{name}_nhi")
            need = Signal(range(mt_wa * ngo_wa + 1), name=f"{name}_need")
            m.d.comb += [o_hi.eq(Mux(((rg + 1) << qr) > mt_wa, mt_wa, (rg + 1) << qr)),
                         n_hi.eq(Mux(((cg + 1) << qc) > ngo_wa, ngo_wa, (cg + 1) << qc)),
                         need.eq((o_hi - 1) * ngo_wa + n_hi - 1)]
            others = Const(1, 1)
            for dname in st.deps:
                if dname != f"wa{l}":
                    others = others & self._stage[dname]["all"]
            ready = others & (wa["all"] | (wa["in_last"] & (wa["tiles"] > need)))
            m.d.comb += [go.eq(self._busy & ~finished & ready),
                         slot.eq(self._busy & ~finished & ((r != 0) | ready))]
        else:
            m.d.comb += [go.eq(self._busy & ~running & ~finished & self._deps_all(st)),
                         slot.eq(go | running)]
        r_last, cg_last, rg_last = r == S - 1, cg == ngo - 1, rg == mt - 1
        with m.If(self._clear):
            m.d.sync += [running.eq(0), finished.eq(0), rg.eq(0), cg.eq(0), r.eq(0)]
        with m.Elif(slot):
            m.d.sync += [r.eq(r + 1), running.eq(1)]
            with m.If(r_last):
                m.d.sync += r.eq(0)
                with m.If(cg_last):
                    m.d.sync += cg.eq(0)
                    with m.If(rg_last):
                        m.d.sync += [rg.eq(0), running.eq(0), finished.eq(1)]
                    with m.Else():
                        m.d.sync += rg.eq(rg + 1)
                with m.Else():
                    m.d.sync += cg.eq(cg + 1)
        addr = block_addr(rg, cg, cfg.groups_pow2(n_out))
        wbuf = self._b(f"w{l}", 0)
        gbufs = [self._b(f"grad{l}", d) for d in range(dp)]
        w_data = wbuf.read_port(0).use(slot, addr)
        # Overlapped with WA (which reads its scratchpad on port 0): a port of WU's own.
        g_data = [g.read_port(1 if overlap else 0).use(slot, addr) for g in gbufs]
        aw = num.acc_width
        clear = self._clear

        def regs(tag, values):
            """One pipeline register stage for a dict of values (lists register lane-wise)."""
            out = {}
            for key, v in values.items():
                if isinstance(v, list):
                    out[key] = [Signal(signed(len(x)) if x.shape().signed else len(x),
                                       name=f"{name}_{key}{tag}_{j}") for j, x in enumerate(v)]
                    m.d.sync += [a.eq(b) for a, b in zip(out[key], v)]
                else:
                    out[key] = Signal(v.shape(), name=f"{name}_{key}{tag}")
                    m.d.sync += out[key].eq(v & ~clear if key == "v" else v)
            return out

        # Stage 1: the block arrives; stage 2: its row r.
        s1 = regs(1, {"v": slot, "r": r, "a": widen(addr, 24), "e": r_last & cg_last & rg_last})
        rows = {f"g{d}": [x.as_signed() for x in block_row(g_data[d], s1["r"], aw, S)]
                for d in range(dp)}
        cur = regs(2, {"v": s1["v"], "r": s1["r"], "a": s1["a"], "e": s1["e"],
                       "w": [x.as_signed() for x in block_row(w_data, s1["r"], w, S)],
                       **rows})
        # Reduction over the pipelines' scratchpads, one pipeline per stage, in order; a
        # pipeline without sub-batches (its WA did nothing this step) adds nothing.
        fmt = num.wgrad_format
        acc = cur["g0"]
        for d in range(1, dp):
            has = self._stage[f"wa{l}@{d}"]["done"] != 0
            sums, ovfs = [], []
            for j in range(S):
                sv, so = saturate(m, acc[j] + cur[f"g{d}"][j], fmt, name=f"{name}_red{d}_{j}")
                sums.append(Mux(has, sv, acc[j]))
                ovfs.append(has & so)
            self._flags["wa"].append(cur["v"] & or_all(ovfs))
            keep = {k: v for k, v in cur.items() if k.startswith("g") and int(k[1:]) > d}
            cur = regs(2 + d, {"v": cur["v"], "r": cur["r"], "a": cur["a"], "e": cur["e"],
                               "w": cur["w"], "acc": sums, **keep})
            acc = cur["acc"]
        if dp > 1:          # the reduced gradient, for the host (region grad<l>)
            onehot = Signal(S, name=f"{name}_gonehot")
            m.d.comb += onehot.eq(Mux(cur["v"], 1 << cur["r"], 0))
            gbufs[0].write(gbufs[0].row_enable(onehot), cur["a"],
                           Cat(*[x[:aw] for x in acc]).replicate(S))
        # η·G; round; W - round(η·G), saturated.
        shift = num.lr_frac + num.act_frac + num.grad_frac - num.weight_frac
        wfmt = num.weight_format
        ctl = ("v", "r", "a", "e")
        s3 = regs(3 + dp, {**{k: cur[k] for k in ctl}, "w": cur["w"],
                           "p": [g * self._eta for g in acc]})
        s4 = regs(4 + dp, {**{k: s3[k] for k in ctl}, "w": s3["w"],
                           "u": [rshift_round(x, shift, wfmt.rounding) for x in s3["p"]]})
        news, ovfs = [], []
        for j in range(S):
            nv, no = saturate(m, s4["w"][j] - s4["u"][j], wfmt, name=f"{name}_new{j}")
            news.append(nv)
            ovfs.append(no)
        s5 = regs(5 + dp, {**{k: s4[k] for k in ctl}, "w": news, "o": or_all(ovfs)})
        self._flags["wu"].append(s5["v"] & s5["o"])
        onehot = Signal(S, name=f"{name}_onehot")
        m.d.comb += onehot.eq(Mux(s5["v"], 1 << s5["r"], 0))
        wbuf.write(wbuf.row_enable(onehot), s5["a"], Cat(*[x[:w] for x in s5["w"]]).replicate(S))
        if cfg.loss == "dqn":       # target sync: the same row into the target weights
            twbuf = self._b(f"tw{l}", 0)
            twbuf.write(twbuf.row_enable(Mux(self._sync_now, onehot, 0)), s5["a"],
                        Cat(*[x[:w] for x in s5["w"]]).replicate(S))
        done = Signal(name=f"{name}_done")
        with m.If(clear):
            m.d.sync += done.eq(0)
        with m.Elif(s5["v"] & s5["e"]):
            m.d.sync += done.eq(1)
        self._stage[st.name] = {"done": done, "all": done}

    # -- host port --------------------------------------------------------------------------------
    def _host_port(self):
        m, cfg = self._m, self._config
        D = cfg.axi_data_width
        DB = D // 8
        local_bits = (region_bytes(cfg) // DB - 1).bit_length()
        addr = self.host_addr
        local = addr[:local_bits]
        reg = addr[local_bits:]
        idle = ~self._busy
        rd = []
        r_reg = Signal(len(reg) if len(reg) else 1, name="host_region_q")
        r_loc = Signal(max(local_bits, 1), name="host_local_q")
        r_ok = Signal(name="host_ok_q")
        m.d.sync += [r_reg.eq(reg), r_loc.eq(local)]
        oks = []
        dp = cfg.dp
        pb = (cfg.sub_batch // cfg.array - 1).bit_length()     # row groups per sub-batch
        db = (dp - 1).bit_length()
        for idx, r in enumerate(regions(cfg)):
            sub = sub_words(cfg, r)
            sbits = (sub - 1).bit_length()
            blk = local[sbits:]
            in_range = (reg == idx) & (blk < r.depth(cfg))
            oks.append(in_range)
            if r.name in self._bufs:
                buf = self._bufs[r.name]
                buf.read_port(0).use(idle & self.host_re & in_range, blk)
                word = buf.read_port(0).data
            elif r.name.startswith("grad"):           # the reduced gradient, in pipeline 0
                buf = self._bufs[f"{r.name}@0"]
                buf.read_port(0).use(idle & self.host_re & in_range, blk)
                word = buf.read_port(0).data
            else:
                # Sample-indexed result: row group rg = (sub-batch p, group in it); sub-batch
                # p lives in pipeline p mod dp as its local sub-batch p div dp.
                gb = (r.col_groups(cfg) - 1).bit_length()
                cgf, rgf = blk[:gb], blk[gb:]
                pipe = rgf[pb:pb + db]
                local_blk = Cat(cgf, rgf[:pb], rgf[pb + db:])
                pipe_q = Signal(db, name=f"host_pipe_{r.name}")
                m.d.sync += pipe_q.eq(pipe)
                words = []
                for d in range(dp):
                    port = self._bufs[f"{r.name}@{d}"].read_port(0)
                    port.use(idle & self.host_re & in_range & (pipe == d), local_blk)
                    words.append(port.data)
                word = Const(0, len(words[0]))
                for d, x in enumerate(words):
                    word = Mux(pipe_q == d, x, word)
            pieces = [word[i * D:min((i + 1) * D, r.word_bits(cfg))] for i in range(sub)
                      if i * D < r.word_bits(cfg)]
            pieces += [Const(0, D)] * (sub - len(pieces))
            sel = r_loc[:sbits] if sbits else Const(0, 1)
            rd.append((idx, Cat(*pieces).word_select(sel, D) if sub > 1 else
                       widen(pieces[0], D)))
            if r.host_write:
                nbytes = r.word_bits(cfg) // 8
                full = Signal(sub * DB, name=f"host_en_{r.name}")
                hit = idle & in_range
                sel_w = local[:sbits] if sbits else Const(0, 1)
                m.d.comb += full.eq(Mux(hit, self.host_we, 0) << (sel_w * DB))
                assert buf.granularity == 8
                buf.write(full[:nbytes], blk, Cat(*([self.host_wdata] * sub))[:r.word_bits(cfg)])
        m.d.sync += r_ok.eq(self.host_re & idle & or_all(oks))
        out = Const(0, D)
        for idx, data in rd:
            out = Mux(r_reg == idx, data, out)
        m.d.comb += self.host_rdata.eq(Mux(r_ok, out, 0))
