"""WU stage of the learner pipeline: the SGD update of one weight tensor."""

import functools
from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Mux, Signal, signed

from sw.learner.schedule import wu_block_need, wu_overlaps

from ...fixed import rshift_round, saturate_fast
from .adam import ADAM_WU_LATENCY, AdamLanes
from .buffers import block_addr, block_row, or_all, widen
from .common import StageBlock, StageStatus, deps_all, hw_name

__all__ = ["WuStage"]

#: The control that travels beside a row: valid, row, block address, last row.
_CTL = ("v", "r", "a", "e")


@dataclass
class _Walk:
    """WU's walk over the weight tensor's blocks (``mt`` row groups, ``ngo`` column groups)
    row by row: its registers, ``go`` and ``slot`` (a row read this cycle); ``r_last``,
    ``cg_last`` and ``rg_last`` set by :meth:`WuStage._walk`."""
    running: Signal
    finished: Signal
    rg: Signal
    cg: Signal
    r: Signal
    go: Signal
    slot: Signal
    mt: int
    ngo: int
    r_last: object = None
    cg_last: object = None
    rg_last: object = None


class WuStage(StageBlock):
    """WU of layer l: ``W_l ← saturate(W_l - rshift_round(η·G_l))``, S weights per cycle.

    Stage ``wu<l>`` reads ``w<l>`` (on port 0, the host's, idle during a step) and the
    gradient scratchpads ``grad<l>`` block by block, row by row (S slots per block, row-group
    major), and writes the updated row back; with DQN and ``ctx.sync_now`` the same row goes
    into ``tw<l>`` in the same cycle (the target sync costs no cycles). With dp > 1 pipelines
    it first adds the pipelines' scratchpads in pipeline order with saturation (one register
    stage per added pipeline; a pipeline whose WA finished no item adds nothing) and writes the
    sum into pipeline 0's scratchpad (what the host reads as ``grad<l>``).

    Start: with one pipeline (:func:`~sw.learner.schedule.wu_overlaps`) block (rg, cg) goes
    once BW of the layer finished every item and WA's last item has written the tile that
    completes the block (WA's ``tiles`` and ``in_last``, reading the scratchpad on a port of
    its own, port 1); with dp > 1 once every producer finished every item. Latency: a row is
    written ``7 + dp`` cycles after its slot (read enable and address registered, block read,
    row select, one stage per added pipeline, the two partial products of η·G, their sum,
    rounding, subtract, saturate); ``done`` rises the cycle after the last row
    (:func:`~sw.learner.schedule.stage_tail`). Throughput: S weights per cycle, ``η·G`` on
    ``2S`` multipliers (G's low 17 bits and its high bits × ``lr_width``), each with a register
    on either side. Whether the next block may start is registered (one cycle,
    :data:`~sw.learner.schedule.WU_READY_LATENCY`), from the index of the WA tile that
    completes it, also registered (loaded two slots before the block, from terms registered
    beside it).

    Status: ``done`` = ``all`` (1 bit): the weight tensor is updated; flags ``wu`` (a weight
    saturated) and ``wa`` (the reduction saturated). See :class:`~.common.StageBlock` for the
    parameters.
    """

    KINDS = ("wu",)

    def build(self, m) -> StageStatus:
        # Each step below adds its logic to ``m`` and returns what later steps use; the order
        # of the calls is the order of the signals and statements in the netlist.
        self._flags = []
        overlap = wu_overlaps(self.ctx.config)
        walk = self._walk_registers()
        if overlap:
            self._overlapped_start(m, walk)
        else:
            m.d.comb += [walk.go.eq(self.ctx.busy & ~walk.running & ~walk.finished
                                    & deps_all(self.producers)),
                         walk.slot.eq(walk.go | walk.running)]
        self._walk(m, walk)
        cur, gbufs, side_bufs = self._read_rows(m, walk, overlap)
        cur, acc = self._reduce(m, cur, gbufs)
        if self.ctx.config.optimizer == "adam":
            return self._adam_update(m, cur, acc, side_bufs)
        return self._sgd_update(m, cur, acc)

    @property
    def _name(self):
        return hw_name(self.stage.name)

    def _walk_registers(self):
        """The walk over the blocks, row by row (:class:`_Walk`)."""
        cfg, l, name = self.ctx.config, self.stage.layer, self._name
        S = cfg.array
        mt, ngo = cfg.groups(cfg.sizes[l] + 1), cfg.groups(cfg.sizes[l + 1])
        running = Signal(name=f"{name}_running")
        finished = Signal(name=f"{name}_finished")
        rg = Signal(range(mt + 1), name=f"{name}_rg")
        cg = Signal(range(ngo + 1), name=f"{name}_cg")
        r = Signal(range(S), name=f"{name}_r")
        go = Signal(name=f"{name}_go")
        slot = Signal(name=f"{name}_slot")
        return _Walk(running=running, finished=finished, rg=rg, cg=cg, r=r, go=go, slot=slot,
                     mt=mt, ngo=ngo)

    def _overlapped_start(self, m, walk):
        """With one pipeline, block by block behind WA's last item: block (rg, cg) once WA
        has written the tile that completes it (tile index wu_block_need, o-major), BW of
        the layer done; ``go`` and ``slot`` from a registered ``ready``."""
        ctx, st = self.ctx, self.stage
        cfg, l, name = ctx.config, st.layer, self._name
        S, n_in, n_out = cfg.array, cfg.sizes[l], cfg.sizes[l + 1]
        mt, ngo, r, slot = walk.mt, walk.ngo, walk.r, walk.slot
        wa = self.producers[f"wa{l}"]
        Rw, Cw = cfg.stage_array(f"wa{l}")
        mt_wa, ngo_wa = -(-(n_in + 1) // Rw), -(-n_out // Cw)
        qr, qc = (S // Rw).bit_length() - 1, (S // Cw).bit_length() - 1
        # ``need``: WA's last tile (o-major index) of the block WU starts next. It is
        # loaded with the following block's in slot S - 2 of a block (before the
        # compare for that block, slot S - 1, and after the one for this block), from
        # two terms registered every cycle from that block's coordinates ``ahead``
        # (rga, cga), which move on at the load: loads are S >= 2 cycles apart, so the
        # terms have settled. The last tile row / column of block (rg, cg) is
        # (rg+1)·2^qr - 1 but in the last row group (likewise cg): no adder.
        def o_end(x, last):
            return Mux(last, mt_wa - 1, (x << qr) | ((1 << qr) - 1))

        def n_end(x, last):
            return Mux(last, ngo_wa - 1, (x << qc) | ((1 << qc) - 1))

        rga = Signal(range(max(mt, 2)), name=f"{name}_rga")
        cga = Signal(range(max(ngo, 2)), name=f"{name}_cga")
        o_term = Signal(range(max(mt_wa * ngo_wa, 2)), name=f"{name}_oterm")
        n_term = Signal(range(max(ngo_wa, 2)), name=f"{name}_nterm")
        need = Signal(range(mt_wa * ngo_wa + 1), name=f"{name}_need")
        m.d.sync += [o_term.eq(o_end(rga, rga == mt - 1) * ngo_wa),
                     n_term.eq(n_end(cga, cga == ngo - 1))]
        with m.If(ctx.clear):
            m.d.sync += [need.eq(wu_block_need(cfg, l, 0, 0)),
                         rga.eq(1 if ngo == 1 and mt > 1 else 0),
                         cga.eq(1 if ngo > 1 else 0)]
        with m.Elif(slot & (r == S - 2)):
            m.d.sync += need.eq(o_term + n_term)
            with m.If(cga == ngo - 1):
                m.d.sync += [cga.eq(0), rga.eq(Mux(rga == mt - 1, 0, rga + 1))]
            with m.Else():
                m.d.sync += cga.eq(cga + 1)
        others = Const(1, 1)
        for dname in st.deps:
            if dname != f"wa{l}":
                others = others & self.producers[dname].all
        # Whether the next block may start, registered (schedule.WU_READY_LATENCY): no
        # compare between WA's tile count and WU's counters.
        ready = Signal(name=f"{name}_ready")
        with m.If(ctx.clear):
            m.d.sync += ready.eq(0)
        with m.Else():
            m.d.sync += ready.eq(others & (wa.all | (wa.in_last & (wa.tiles > need))))
        m.d.comb += [walk.go.eq(ctx.busy & ~walk.finished & ready),
                     slot.eq(ctx.busy & ~walk.finished & ((r != 0) | ready))]

    def _walk(self, m, walk):
        """The walk's counters: a row per slot, the blocks column group major; ``finished``
        after the last row."""
        S = self.ctx.config.array
        running, finished, rg, cg, r = walk.running, walk.finished, walk.rg, walk.cg, walk.r
        walk.r_last, walk.cg_last = r == S - 1, cg == walk.ngo - 1
        walk.rg_last = rg == walk.mt - 1
        with m.If(self.ctx.clear):
            m.d.sync += [running.eq(0), finished.eq(0), rg.eq(0), cg.eq(0), r.eq(0)]
        with m.Elif(walk.slot):
            m.d.sync += [r.eq(r + 1), running.eq(1)]
            with m.If(walk.r_last):
                m.d.sync += r.eq(0)
                with m.If(walk.cg_last):
                    m.d.sync += cg.eq(0)
                    with m.If(walk.rg_last):
                        m.d.sync += [rg.eq(0), running.eq(0), finished.eq(1)]
                    with m.Else():
                        m.d.sync += rg.eq(rg + 1)
                with m.Else():
                    m.d.sync += cg.eq(cg + 1)

    def _regs(self, m, tag, values):
        """One pipeline register stage for a dict of values (lists register lane-wise)."""
        name, clear = self._name, self.ctx.clear
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

    def _read_rows(self, m, walk, overlap):
        """Stage 0: the read (enable and address registered); stage 1: the blocks arrive;
        stage 2: their row r (the weights', the pipelines' gradients ``g<d>`` and, with
        Adam, its regions'). Returns stage 2's registers, the gradient scratchpads and
        Adam's region buffers."""
        ctx, l = self.ctx, self.stage.layer
        cfg, bufs = ctx.config, ctx.buffers
        num = cfg.numerics
        S, w, dp = cfg.array, cfg.width, cfg.dp
        addr = block_addr(walk.rg, walk.cg, cfg.groups_pow2(cfg.sizes[l + 1]))
        aw = num.acc_width
        s0 = self._regs(m, 0, {"v": walk.slot, "r": walk.r, "a": widen(addr, 24),
                               "e": walk.r_last & walk.cg_last & walk.rg_last})
        wbuf = bufs.get(f"w{l}", 0)
        gbufs = [bufs.get(f"grad{l}", d) for d in range(dp)]
        w_data = wbuf.read_port(0).use(s0["v"], s0["a"])
        # Adam: the rows of its regions (first moment, second-moment logarithm, master-weight
        # residual) read beside the weights' and travel with them: key -> (buffer, width, data)
        side_bufs = {}
        if cfg.optimizer == "adam":
            for key, region, fmt in (("mo", "m", num.moment_format), ("lv", "v", num.logv_format),
                                     ("res", "wl", num.residual_format)):
                buf = bufs.get(f"{region}{l}", 0)
                side_bufs[key] = (buf, fmt.width, buf.read_port(0).use(s0["v"], s0["a"]))
        # Overlapped with WA (which reads its scratchpad on port 0): a port of WU's own.
        g_data = [g.read_port(1 if overlap else 0).use(s0["v"], s0["a"]) for g in gbufs]
        s1 = self._regs(m, 1, {k: s0[k] for k in ("v", "r", "a", "e")})
        rows = {f"g{d}": [x.as_signed() for x in block_row(g_data[d], s1["r"], aw, S)]
                for d in range(dp)}
        side = {key: [x.as_signed() for x in block_row(data, s1["r"], width, S)]
                for key, (_, width, data) in side_bufs.items()}
        cur = self._regs(m, 2, {"v": s1["v"], "r": s1["r"], "a": s1["a"], "e": s1["e"],
                                "w": [x.as_signed() for x in block_row(w_data, s1["r"], w, S)],
                                **side, **rows})
        return cur, gbufs, side_bufs

    def _reduce(self, m, cur, gbufs):
        """Reduction over the pipelines' scratchpads, one pipeline per stage, in order; a
        pipeline without sub-batches (its WA did nothing this step) adds nothing. With
        dp > 1 the reduced gradient into pipeline 0's scratchpad, for the host (region
        grad<l>). Returns the last stage's registers and the gradient."""
        cfg, l, name = self.ctx.config, self.stage.layer, self._name
        S, dp, aw = cfg.array, cfg.dp, cfg.numerics.acc_width
        fmt = cfg.numerics.wgrad_format
        side = [k for k in ("mo", "lv", "res") if k in cur]
        acc = cur["g0"]
        for d in range(1, dp):
            has = self.producers[f"wa{l}@{d}"].done != 0
            sums, ovfs = [], []
            for j in range(S):
                sv, so = saturate_fast(m, acc[j] + cur[f"g{d}"][j], fmt, name=f"{name}_red{d}_{j}")
                sums.append(Mux(has, sv, acc[j]))
                ovfs.append(has & so)
            self._flags.append(("wa", cur["v"] & or_all(ovfs)))
            keep = {k: v for k, v in cur.items() if k.startswith("g") and int(k[1:]) > d}
            cur = self._regs(m, 2 + d, {"v": cur["v"], "r": cur["r"], "a": cur["a"],
                                        "e": cur["e"], "w": cur["w"], "acc": sums,
                                        **{k: cur[k] for k in side}, **keep})
            acc = cur["acc"]
        if dp > 1:          # the reduced gradient, for the host (region grad<l>)
            onehot = Signal(S, name=f"{name}_gonehot")
            m.d.comb += onehot.eq(Mux(cur["v"], 1 << cur["r"], 0))
            gbufs[0].write(gbufs[0].row_enable(onehot), cur["a"],
                           Cat(*[x[:aw] for x in acc]).replicate(S))
        return cur, acc

    def _adam_update(self, m, cur, acc, side_bufs):
        """Adam (rtl_gen.learner.stages.adam): ADAM_WU_LATENCY cycles, the control beside;
        the weights' and the regions' rows written back."""
        ctx, name = self.ctx, self._name
        cfg, S = ctx.config, ctx.config.array
        lanes = AdamLanes(cfg, ctx.adam, name)
        w_new, m_new, v_new, r_new, ovf = lanes.build(m, acc, cur["mo"], cur["lv"],
                                                      cur["w"], cur["res"])
        c = {k: cur[k] for k in _CTL}
        for k in range(ADAM_WU_LATENCY):
            c = self._regs(m, f"{3 + cfg.dp}a{k}", c)
        self._flags.append(("wu", c["v"] & or_all(ovf)))
        onehot = Signal(S, name=f"{name}_onehot")
        m.d.comb += onehot.eq(Mux(c["v"], 1 << c["r"], 0))
        self._write_rows(m, onehot, c["a"], w_new)
        for (buf, width, _), values in zip(side_bufs.values(), (m_new, v_new, r_new)):
            buf.write(buf.row_enable(onehot), c["a"],
                      Cat(*[x[:width] for x in values]).replicate(S))
        return self._done(m, c)

    def _sgd_update(self, m, cur, acc):
        """SGD: η·G; round; W - round(η·G), saturated; the row written back."""
        ctx, name = self.ctx, self._name
        cfg = ctx.config
        num, S, dp, aw = cfg.numerics, cfg.array, cfg.dp, cfg.numerics.acc_width
        regs = functools.partial(self._regs, m)
        ctl = _CTL
        shift = num.lr_frac + num.act_frac + num.grad_frac - num.weight_frac
        wfmt = num.weight_format
        # η·G in two products registered on both sides (a DSP48E2 each: A/B, M/P registers),
        # G's low LO (17) bits unsigned and its high bits signed, added the next cycle.
        LO = min(17, aw - 1)
        pshape = (acc[0] * ctx.eta).shape()
        s3 = regs(3 + dp, {**{k: cur[k] for k in ctl}, "w": cur["w"],
                           "pl": [g[:LO] * ctx.eta for g in acc],
                           "ph": [g[LO:].as_signed() * ctx.eta for g in acc]})
        s4 = regs(4 + dp, {**{k: s3[k] for k in ctl}, "w": s3["w"],
                           "p": [((h << LO) + lo).as_signed()[:pshape.width].as_signed()
                                 for h, lo in zip(s3["ph"], s3["pl"])]})
        s5 = regs(5 + dp, {**{k: s4[k] for k in ctl}, "w": s4["w"],
                           "u": [rshift_round(x, shift, wfmt.rounding) for x in s4["p"]]})
        s6 = regs(6 + dp, {**{k: s5[k] for k in ctl},
                           "d": [x - y for x, y in zip(s5["w"], s5["u"])]})
        news, ovfs = [], []
        for j in range(S):
            nv, no = saturate_fast(m, s6["d"][j], wfmt, name=f"{name}_new{j}")
            news.append(nv)
            ovfs.append(no)
        s5 = regs(7 + dp, {**{k: s6[k] for k in ctl}, "w": news, "o": or_all(ovfs)})
        self._flags.append(("wu", s5["v"] & s5["o"]))
        onehot = Signal(S, name=f"{name}_onehot")
        m.d.comb += onehot.eq(Mux(s5["v"], 1 << s5["r"], 0))
        self._write_rows(m, onehot, s5["a"], s5["w"])
        return self._done(m, s5)

    def _write_rows(self, m, onehot, addr, values):
        """The updated row into ``w<l>`` and, with DQN and ``ctx.sync_now``, ``tw<l>``."""
        ctx, w, S, l = self.ctx, self.ctx.config.width, self.ctx.config.array, self.stage.layer
        wbuf = ctx.buffers.get(f"w{l}", 0)
        wbuf.write(wbuf.row_enable(onehot), addr, Cat(*[x[:w] for x in values]).replicate(S))
        if ctx.config.loss == "dqn":       # target sync: the same row into the target weights
            twbuf = ctx.buffers.get(f"tw{l}", 0)
            twbuf.write(twbuf.row_enable(Mux(ctx.sync_now, onehot, 0)), addr,
                        Cat(*[x[:w] for x in values]).replicate(S))

    def _done(self, m, last):
        """``done``: set the cycle after the last row's write (``last``: its control)."""
        done = Signal(name=f"{hw_name(self.stage.name)}_done")
        with m.If(self.ctx.clear):
            m.d.sync += done.eq(0)
        with m.Elif(last["v"] & last["e"]):
            m.d.sync += done.eq(1)
        return StageStatus(done, done, flags=self._flags)

