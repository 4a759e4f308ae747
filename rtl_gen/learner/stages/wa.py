"""WA stage of the learner pipeline: a layer's weight gradient, sub-batch by sub-batch."""

from amaranth.hdl import Cat, Mux, Signal, signed

from ...fixed import saturate_fast
from .buffers import block_addr, block_row, chunk, lane_mask, or_all, split
from .common import (StageBlock, StageStatus, done_counter, feed, gemm_loop, hw_name,
                     tensor_unit, writer_loop)

__all__ = ["WaStage"]


class WaStage(StageBlock):
    """WA of layer l on an R × C tensor unit: ``G_l += [x, 1]ᵀ · δ_l`` into the scratchpad.

    Stage ``wa<l>`` reads ``obs`` (l = 0) or ``h<l-1>`` (row k mod S of a block: R features
    of sample k, the bias feature ``n_in`` the constant 1.0) and ``delta<l>`` (row k mod S: C
    outputs of sample k), each on a read port of its own (FW and BW, or LOSS's writes, use
    the others), and adds each tile into the pipeline's scratchpad ``grad<l>``
    (``acc_width`` lanes, :attr:`~sw.learner.numerics.LearnerNumerics.wgrad_format`): the
    first item of a step writes its tiles, later ones read the old row, add with saturation
    and write back.

    An item (``cnt`` samples) is ``ceil((n_in+1)/R) · ceil(n_out/C)`` tiles of
    ``T = max(cnt, R)`` slots, one per cycle, the first ``T - cnt`` bubbles; the operands enter
    the unit 2 cycles after their slot. An output row is written 3 cycles after its beat
    (scratchpad read, old row and product registered, sum registered): an item's last result
    is written ``2R + C + 7`` cycles after its last slot and counted in ``done`` the cycle
    after (:func:`~sw.learner.schedule.stage_tail`). Throughput: R·C multiply-accumulates per
    cycle while ``cnt ≥ R``.

    Status: ``done`` (13 bits) counts finished items; ``tiles`` counts the tiles written of
    the item being written and ``in_last`` says whether it is the pipeline's last (WU follows
    them block by block); flag ``wa`` on a saturated tile row or sum. See
    :class:`~.common.StageBlock` for the parameters.
    """

    KINDS = ("wa",)

    def build(self, m) -> StageStatus:
        ctx, st = self.ctx, self.stage
        cfg, bufs = ctx.config, ctx.buffers
        flags = []
        num = cfg.numerics
        S, sb, w = cfg.array, cfg.log_array, cfg.width
        R, C = cfg.stage_array(st.name)
        lr_, lc = R.bit_length() - 1, C.bit_length() - 1
        l, d, nm = st.layer, st.pipe, hw_name(st.name)
        n_in, n_out = cfg.sizes[l], cfg.sizes[l + 1]
        mt, ngo = -(-(n_in + 1) // R), -(-n_out // C)
        src = "obs" if l == 0 else f"h{l - 1}"
        tu = tensor_unit(m, cfg, st.name)
        loop = gemm_loop(m, ctx, st, self.producers, outer=mt, middle=ngo, k_len=cfg.sub_batch,
                         outer_runtime=False, k_runtime=True)
        o, n, k = loop["o"], loop["n"], loop["k"]
        ob, osub = split(o, R, S)           # feature block, R-chunk in it
        nbk, nsub = split(n, C, S)          # output block, C-chunk in it
        en = loop["elem"]
        rg = loop["base"] + (k >> sb)
        x_rg = (loop["gbase"] if src in bufs.shared else loop["base"]) + (k >> sb)
        x_port = bufs.port(src, d, 1)
        x_cg = Mux((o << lr_) >= n_in, 0, ob)
        x_data = x_port.use(en, block_addr(x_rg, x_cg, cfg.groups_pow2(n_in)),
                            read=ctx.busy)
        d_port = bufs.port(f"delta{l}", d, 1 if l >= 1 else 0)
        d_data = d_port.use(en, block_addr(rg, nbk, cfg.groups_pow2(n_out)), read=ctx.busy)
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
        feed(m, ctx, nm, tu, loop, a_vals, b_vals)

        # Writer: read-modify-write of the scratchpad (plain write for the first item).
        beat = tu.o.valid
        wl = writer_loop(m, ctx, nm, d, rows=R, outer=mt, middle=ngo, outer_runtime=False,
                         beat=beat)
        wob, wosub = split(wl["o"], R, S)
        wnb, wnsub = split(wl["n"], C, S)
        gbuf = bufs.get(f"grad{l}", d)
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
        m.d.sync += [r_v.eq(beat & ~ctx.clear), r_last.eq(wl["item_last"]),
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
        m.d.sync += [q_v.eq(r_v & ~ctx.clear), q_addr.eq(r_addr), q_row.eq(r_row),
                     q_lanes.eq(r_lanes), q_first.eq(r_first), q_ovf.eq(r_ovf),
                     q_last.eq(r_last), q_tend.eq(r_tend), q_lastitem.eq(r_lastitem)]
        m.d.sync += [x.eq(v) for x, v in zip(q_c, r_c)]
        old = chunk(block_row(gdata, r_row, aw, S), r_nsub, C, aw)
        m.d.sync += [x.eq(v) for x, v in zip(q_old, old)]
        fmt = num.wgrad_format
        sums, ovfs = [], []
        for j in range(C):
            s, o_ = saturate_fast(m, q_old[j] + q_c[j], fmt, name=f"{nm}_sum{j}")
            sums.append(Mux(q_first, q_c[j], s))
            ovfs.append(~q_first & o_)
        flags.append(("wa", q_v & (q_ovf | or_all(ovfs))))
        # ... and the sum registered before the write.
        u_v, u_last = Signal(name=f"{nm}_uv"), Signal(name=f"{nm}_ulast")
        u_addr = Signal(24, name=f"{nm}_uaddr")
        u_row = Signal(range(S), name=f"{nm}_urow")
        u_lanes = Signal(S, name=f"{nm}_ulanes")
        u_sum = Signal(C * aw, name=f"{nm}_usum")
        u_tend, u_lastitem = Signal(name=f"{nm}_utend"), Signal(name=f"{nm}_ulastitem")
        m.d.sync += [u_v.eq(q_v & ~ctx.clear), u_last.eq(q_last), u_addr.eq(q_addr),
                     u_row.eq(q_row), u_lanes.eq(q_lanes),
                     u_sum.eq(Cat(*[v[:aw] for v in sums])), u_tend.eq(q_tend),
                     u_lastitem.eq(q_lastitem)]
        onehot = Signal(S, name=f"{nm}_onehot")
        m.d.comb += onehot.eq(Mux(u_v, 1 << u_row, 0))
        gbuf.write(gbuf.row_enable(onehot, u_lanes if C < S else None), u_addr,
                   u_sum.replicate(S // C).replicate(S))
        event = u_v & u_last
        done, all_done = done_counter(m, ctx, st, event)
        # Tiles finished in the item being written, and whether it is the step's last: WU
        # starts on a gradient block once its last tile is written (schedule.wu_block_need).
        tiles = Signal(range(mt * ngo + 1), name=f"{nm}_tiles")
        in_last = Signal(name=f"{nm}_inlast")
        with m.If(ctx.clear):
            m.d.sync += [tiles.eq(0), in_last.eq(0)]
        with m.Elif(u_v):
            m.d.sync += in_last.eq(u_lastitem)
            with m.If(u_last):
                m.d.sync += tiles.eq(0)
            with m.Elif(u_tend):
                m.d.sync += tiles.eq(tiles + 1)
        return StageStatus(done, all_done, flags=flags, tiles=tiles, in_last=in_last,
                           event=event)

