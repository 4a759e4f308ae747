"""LOSS stage of the learner pipeline: the output error δ and the loss sum."""

from amaranth.hdl import Cat, Const, Mux, Signal, signed

from ...fixed import rshift_round, saturate_fast
from .buffers import block_addr, lanes, or_all
from .common import ItemCounter, StageBlock, StageStatus, deps_ready, done_counter, hw_name

__all__ = ["LossStage"]


def _to_grad(m, x, num, name, frac=None):
    """``x`` (``frac`` fraction bits, default act) in the grad format, rounded and saturated
    (combinational)."""
    gfmt = num.grad_format
    frac = num.act_format.frac if frac is None else frac
    if gfmt.frac >= frac:
        return saturate_fast(m, x << (gfmt.frac - frac), gfmt, name=name)
    return saturate_fast(m, rshift_round(x, frac - gfmt.frac, gfmt.rounding), gfmt, name=name)


def _regs(m, ctx, name, tag, values):
    """``values`` registered as ``<name>_<key><tag>`` (the valid bit ``v`` cleared by
    ``ctx.clear``); returns them by key."""
    out = {}
    for key, v in values.items():
        out[key] = Signal(v.shape(), name=f"{name}_{key}{tag}")
        m.d.sync += out[key].eq(v & ~ctx.clear if key == "v" else v)
    return out


class LossStage(StageBlock):
    """LOSS: the error δ of the last layer's output, element-wise on S lanes.

    The block words a slot reads arrive the next cycle (stage 1), where the sample's row of
    each is selected (an S:1 multiplexer of S·width bits) and registered (stage 1s) before any
    compare or adder uses it.

    MSE: ``δ = Q - Y`` from ``q`` and ``targets``, S outputs (one block row group) per cycle,
    written 4 cycles after the slot. DQN: ``y = saturate(r + round(γ·(1-d)·max_a Q'))`` from
    ``tq`` (the target network's Q values), ``samples`` (reward, action, done, loss weight w)
    and γ, and ``δ[a] = w·(Q[a] - y)``, 0 for the actions not taken: a sample's
    ``ceil(n_out/S)`` groups are read one per cycle and their rows registered (running max;
    none with a single group), then the target takes 5 register stages (γ product; rounding; saturation and, beside it,
    the difference; its product with w; δ) and the sample's δ row is written one group per
    cycle. δ is the exact product converted to the grad format with one rounding and
    saturation (w = 1.0: exactly ``Q[a] - y``), written into ``delta<L-1>``; the loss sum
    takes ``(Q[a] - y)²`` without w.

    An item (``cnt`` samples) is ``cnt · ceil(n_out/S)`` slots, one per cycle; it is counted
    in ``done`` :data:`~sw.learner.schedule.LOSS_TAIL` cycles after its last slot (DQN: plus
    ``ceil(n_out/S)``). Throughput: one sample's output group per cycle.

    Status: ``done`` (13 bits) counts finished items; flags ``delta`` (δ saturated) and
    ``target`` (DQN: y saturated); ``loss_terms``: ``(Q - y)²`` summed over a row
    (``2·(width + 2) + log2 S`` bits, MSE) or of one sample (``2·(width + 2)`` bits, DQN),
    0 in cycles without one. See :class:`~.common.StageBlock` for the parameters.
    """

    KINDS = ("loss",)

    def build(self, m) -> StageStatus:
        ctx, st = self.ctx, self.stage
        cfg, bufs = ctx.config, ctx.buffers
        flags, loss_terms = [], []
        S, sb, w = cfg.array, cfg.log_array, cfg.width
        n_out = cfg.n_out
        G = cfg.groups(n_out)
        gq = cfg.groups_pow2(n_out)
        L = cfg.n_layers
        name, d = hw_name(st.name), st.pipe
        items = ItemCounter(m, ctx, name, d)
        base, gbase = items.base, items.gbase
        running = Signal(name=f"{name}_running")
        s = Signal(range(cfg.sub_batch + 1), name=f"{name}_s")
        g = Signal(range(G + 1), name=f"{name}_g")
        go = Signal(name=f"{name}_go")
        slot = Signal(name=f"{name}_slot")
        advance = Signal(name=f"{name}_adv")     # the item's last slot: p moves on
        ready = deps_ready(m, ctx, name, self.producers, items.p, advance)
        m.d.comb += [go.eq(ctx.busy & ~running & items.more & ready),
                     slot.eq(go | running)]
        g_last = g == G - 1
        send = items.derived(f"{name}_send", range(cfg.sub_batch),
                             lambda lt, sub, rsub: Mux(lt(cfg.sub_batch), sub(1),
                                                       cfg.sub_batch - 1))
        s_last = s == send
        m.d.comb += advance.eq(slot & g_last & s_last)
        with m.If(ctx.clear):
            m.d.sync += [running.eq(0), s.eq(0), g.eq(0)]
        with m.Elif(slot):
            with m.If(g_last):
                m.d.sync += g.eq(0)
                with m.If(s_last):
                    m.d.sync += [s.eq(0), running.eq(0)] + items.advance()
                with m.Else():
                    m.d.sync += [s.eq(s + 1), running.eq(1)]
            with m.Else():
                m.d.sync += [g.eq(g + 1), running.eq(1)]
        rg = base + (s >> sb)
        grg = gbase + (s >> sb)                            # shared inputs: the batch's rows
        addr = block_addr(rg, g, gq)
        q_data = bufs.port("q", d, 0).use(slot, addr, read=ctx.busy)
        # Stage 1: the data arrives (the rows are selected from it and registered in stage 1s,
        # :meth:`_row_stage`).
        v1 = Signal(name=f"{name}_v1")
        i1 = Signal(range(S), name=f"{name}_i1")
        g1 = Signal.like(g, name=f"{name}_g1")
        first1 = Signal(name=f"{name}_first1")
        last1 = Signal(name=f"{name}_last1")
        end1 = Signal(name=f"{name}_end1")           # last slot of the item
        rg1 = Signal(13, name=f"{name}_rg1")
        m.d.sync += [v1.eq(slot & ~ctx.clear), i1.eq(s[:sb]), g1.eq(g), first1.eq(g == 0),
                     last1.eq(g_last), end1.eq(g_last & s_last), rg1.eq(rg)]
        ctl1 = {"v": v1, "i": i1, "g": g1, "first": first1, "last": last1, "end": end1,
                "rg": rg1}
        dbuf = bufs.get(f"delta{L - 1}", d)
        f = {"slot": slot, "addr": addr, "grg": grg, "g": g, "i1": i1, "ctl1": ctl1,
             "q_data": q_data, "dbuf": dbuf}
        if cfg.loss == "dqn":
            return self._dqn(m, f, flags, loss_terms)
        return self._mse(m, f, flags, loss_terms)

    def _row_stage(self, m, f, rows):
        """Stage 1s: the sample's row of ``q`` (selected by ``i1``) and the values in
        ``rows`` (the caller's selects by ``i1``), registered with stage 1's control. Returns
        the registers by key (``v``, ``i``, ``g``, ``first``, ``last``, ``end``, ``rg``, ``q``
        and the keys of ``rows``), ``qrow`` (q's S lanes, signed) and ``lvalid`` (the lanes
        of the group that hold outputs; constants with a single group)."""
        cfg = self.ctx.config
        S, sb, w = cfg.array, cfg.log_array, cfg.width
        G, n_out = cfg.groups(cfg.n_out), cfg.n_out
        q = f["q_data"].word_select(f["i1"], S * w)
        s1 = _regs(m, self.ctx, hw_name(self.stage.name), "1s", {**f["ctl1"], "q": q, **rows})
        s1["qrow"] = [x.as_signed() for x in lanes(s1["q"], S, w)]
        s1["lvalid"] = [((s1["g"] << sb) + j) < n_out if G > 1 else Const(int(j < n_out), 1)
                        for j in range(S)]
        return s1

    def _mse(self, m, f, flags, loss_terms):
        """δ = Q - Y for S outputs per cycle; the sum of their squares."""
        ctx = self.ctx
        cfg, bufs = ctx.config, ctx.buffers
        num = cfg.numerics
        S, sb, w = cfg.array, cfg.log_array, cfg.width
        gq = cfg.groups_pow2(cfg.n_out)
        name, d = hw_name(self.stage.name), self.stage.pipe
        dw = w + 2
        slot, grg, g, dbuf = f["slot"], f["grg"], f["g"], f["dbuf"]
        y_data = bufs.port("targets", d, 0).use(slot, block_addr(grg, g, gq),
                                                  read=ctx.busy)
        s1 = self._row_stage(m, f, {"y": y_data.word_select(f["i1"], S * w)})
        v1, i1, g1, end1, rg1 = s1["v"], s1["i"], s1["g"], s1["end"], s1["rg"]
        qrow, lvalid = s1["qrow"], s1["lvalid"]
        yrow = [x.as_signed() for x in lanes(s1["y"], S, w)]
        v2 = Signal(name=f"{name}_v2")
        end2 = Signal(name=f"{name}_end2")
        i2 = Signal(range(S), name=f"{name}_i2")
        a2 = Signal(24, name=f"{name}_a2")
        diff = [Signal(signed(dw), name=f"{name}_diff{j}") for j in range(S)]
        m.d.sync += [v2.eq(v1 & ~ctx.clear), end2.eq(end1), i2.eq(i1),
                     a2.eq(block_addr(rg1, g1, gq))]
        m.d.sync += [diff[j].eq(Mux(lvalid[j], qrow[j] - yrow[j], 0)) for j in range(S)]
        deltas, dovf = [], []
        for j in range(S):
            dv, do = _to_grad(m, diff[j], num, f"{name}_delta{j}")
            deltas.append(dv)
            dovf.append(do)
        flags.append(("delta", v2 & or_all(dovf)))
        onehot = Signal(S, name=f"{name}_onehot")
        m.d.comb += onehot.eq(Mux(v2, 1 << i2, 0))
        dbuf.write(dbuf.row_enable(onehot), a2, Cat(*[d[:w] for d in deltas]).replicate(S))
        sq = Signal(2 * dw + sb, name=f"{name}_sq")
        sq_v = Signal(name=f"{name}_sqv")
        total = diff[0] * diff[0]
        for j in range(1, S):
            total = total + diff[j] * diff[j]
        m.d.sync += [sq.eq(total), sq_v.eq(v2 & ~ctx.clear)]
        loss_terms.append(Mux(sq_v, sq, 0))
        event = v2 & end2
        done, all_done = done_counter(m, self.ctx, self.stage, event)
        return StageStatus(done, all_done, flags=flags, loss_terms=loss_terms, event=event)

    def _dqn(self, m, f, flags, loss_terms):
        """y = r + γ·(1-d)·max Q', δ = Q[a] - y for one sample per cycle (after its groups)."""
        ctx = self.ctx
        cfg, bufs = ctx.config, ctx.buffers
        num = cfg.numerics
        S, sb, w = cfg.array, cfg.log_array, cfg.width
        act = num.act_format
        G = cfg.groups(cfg.n_out)
        gq = cfg.groups_pow2(cfg.n_out)
        name, d = hw_name(self.stage.name), self.stage.pipe
        dw = w + 2
        slot, addr, grg, dbuf = f["slot"], f["addr"], f["grg"], f["dbuf"]
        t_data = bufs.port("tq", d, 0).use(slot, addr, read=ctx.busy)
        smp = bufs.port("samples", d, 0).use(slot, grg, read=ctx.busy)
        lwf = num.loss_weight_format
        lb = w + cfg.action_bits + 1 + lwf.width
        s1 = self._row_stage(m, f, {"t": t_data.word_select(f["i1"], S * w),
                                    "lane": smp.word_select(f["i1"], lb)})
        v1, i1, g1, rg1 = s1["v"], s1["i"], s1["g"], s1["rg"]
        first1, last1, end1 = s1["first"], s1["last"], s1["end"]
        qrow, lvalid = s1["qrow"], s1["lvalid"]
        trow = [x.as_signed() for x in lanes(s1["t"], S, w)]
        lane = s1["lane"]
        r1 = lane[:w].as_signed()
        a1 = lane[w:w + cfg.action_bits]
        d1 = lane[w + cfg.action_bits]
        wt1 = lane[w + cfg.action_bits + 1:]
        # Max over the valid lanes of this group (a tree of compares: log2 S deep; with one
        # group only over its n_out lanes), then over groups.
        if G > 1:
            level = [Mux(lvalid[j], trow[j], act.min_raw) for j in range(S)]
        else:
            level = trow[:cfg.n_out]
        while len(level) > 1:
            nxt = []
            for j in range(0, len(level) - 1, 2):
                t = Signal(signed(w), name=f"{name}_max{len(nxt) + 1}_{len(level)}")
                m.d.comb += t.eq(Mux(level[j + 1] > level[j], level[j + 1], level[j]))
                nxt.append(t)
            level = nxt + level[len(level) - len(level) % 2:]
        bmax = level[0]
        qa1 = Cat(*qrow).word_select(a1[:sb], w).as_signed()
        if G > 1:           # running max and Q[a] over the sample's groups
            run_max = Signal(signed(w), name=f"{name}_runmax")
            run_qa = Signal(signed(w), name=f"{name}_runqa")
            cur_max = Mux(first1, bmax, Mux(bmax > run_max, bmax, run_max))
            cur_qa = Mux((a1 >> sb) == g1, qa1, run_qa)
            with m.If(v1):
                m.d.sync += [run_max.eq(cur_max), run_qa.eq(cur_qa)]
        else:               # one group: every slot is a sample's first and last
            cur_max, cur_qa = bmax, qa1
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
        wt2 = Signal(lwf.width, name=f"{name}_wt2")
        m.d.sync += [v2.eq(v1 & last1 & ~ctx.clear), end2.eq(end1), best2.eq(cur_max),
                     qa2.eq(cur_qa), r2.eq(r1), d2.eq(d1), a2.eq(a1), i2.eq(i1), rg2.eq(rg1),
                     wt2.eq(wt1)]
        # Stage 3: γ·max Q' (0 at episode ends).
        cw = num.coef_width
        v3, end3 = Signal(name=f"{name}_v3"), Signal(name=f"{name}_end3")
        prod3 = Signal(signed(w + cw + 1), name=f"{name}_prod3")
        qa3, r3 = Signal(signed(w), name=f"{name}_qa3"), Signal(signed(w), name=f"{name}_r3")
        a3, i3, rg3 = Signal.like(a2, name=f"{name}_a3"), Signal.like(i2, name=f"{name}_i3"), \
            Signal.like(rg2, name=f"{name}_rg3")
        wt3 = Signal.like(wt2, name=f"{name}_wt3")
        m.d.sync += [v3.eq(v2 & ~ctx.clear), end3.eq(end2),
                     prod3.eq(Mux(d2, 0, best2 * ctx.gamma)), qa3.eq(qa2), r3.eq(r2),
                     a3.eq(a2), i3.eq(i2), rg3.eq(rg2), wt3.eq(wt2)]
        # Stages 4a-4c (one adder each): round(γ·max) (and Q[a] - r); y = saturate(r + ·)
        # and beside it diff = Q[a] - y; diff's exact product with the loss weight.
        disc = rshift_round(prod3, cw - 1, act.rounding)
        ctl3 = {"v": v3, "end": end3, "qa": qa3, "a": a3, "i": i3, "rg": rg3, "wt": wt3}

        def regs(tag, values):
            return _regs(m, ctx, name, tag, values)

        s4a = regs("4a", {**ctl3, "r": r3, "disc": disc, "qmr": qa3 - r3})
        ysum = Signal(signed(max(w, len(disc)) + 1), name=f"{name}_ysum")
        m.d.comb += ysum.eq(s4a["r"] + s4a["disc"])
        y, yovf = saturate_fast(m, ysum, act, name=f"{name}_y")
        flags.append(("target", s4a["v"] & yovf))
        # Q[a] - y registered with y: Q[a] - r - round(γ·max) unless y saturated, then
        # Q[a] minus the bound (three subtracts in parallel, no subtract after the clamp).
        diff = Signal(signed(w + 1), name=f"{name}_diff")
        m.d.comb += diff.eq(Mux(yovf, Mux(ysum[-1], s4a["qa"] - act.min_raw,
                                          s4a["qa"] - act.max_raw),
                                s4a["qmr"] - s4a["disc"]))
        s4b = regs("4b", {**{k: s4a[k] for k in ctl3 if k != "qa"}, "diff": diff})
        # ... and its exact product with the loss weight: a DSP between registers.
        s4 = regs("4c", {**{k: s4b[k] for k in ctl3 if k not in ("qa", "wt")},
                         "diff": s4b["diff"], "wdiff": s4b["diff"] * s4b["wt"]})
        v4, end4, diff4 = s4["v"], s4["end"], s4["diff"]
        a4, i4, rg4 = s4["a"], s4["i"], s4["rg"]
        # Stage 5: δ = round(w·diff), and the write sequencer (one group per cycle).
        dv, dovf = _to_grad(m, s4["wdiff"], num, f"{name}_delta", frac=act.frac + lwf.frac)
        flags.append(("delta", v4 & dovf))
        sq = Signal(2 * dw, name=f"{name}_sq")
        sq_v = Signal(name=f"{name}_sqv")
        m.d.sync += [sq.eq(diff4 * diff4), sq_v.eq(v4 & ~ctx.clear)]
        loss_terms.append(Mux(sq_v, sq, 0))
        ws_v = Signal(name=f"{name}_wsv")
        ws_g = Signal(range(G + 1), name=f"{name}_wsg")
        ws_end = Signal(name=f"{name}_wsend")
        ws_d = Signal(signed(w), name=f"{name}_wsd")
        ws_a = Signal.like(a2, name=f"{name}_wsa")
        ws_i = Signal.like(i2, name=f"{name}_wsi")
        ws_rg = Signal.like(rg2, name=f"{name}_wsrg")
        ws_g_last = ws_g == G - 1
        with m.If(ctx.clear):
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
        wlanes = [Mux(ahit & (ws_a[:sb] == j), ws_d, 0) for j in range(S)] if sb else \
            [Mux(ahit, ws_d, 0)]
        onehot = Signal(S, name=f"{name}_onehot")
        m.d.comb += onehot.eq(Mux(ws_v, 1 << ws_i, 0))
        dbuf.write(dbuf.row_enable(onehot), block_addr(ws_rg, ws_g, gq),
                   Cat(*[x[:w] for x in wlanes]).replicate(S))
        event = ws_v & ws_g_last & ws_end
        done, all_done = done_counter(m, ctx, self.stage, event)
        return StageStatus(done, all_done, flags=flags, loss_terms=loss_terms, event=event)
