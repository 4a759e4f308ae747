"""FW stage of the learner pipeline: one layer of the online or (DQN) target network."""

from amaranth.hdl import Cat, Mux, Signal, signed

from .buffers import block_addr, block_col, block_row, chunk, lane_mask, split
from .common import (StageBlock, StageStatus, done_counter, feed, gemm_loop, hw_name,
                     tensor_unit, writer_loop)

__all__ = ["FwStage"]


class FwStage(StageBlock):
    """FW of layer l on an R × C tensor unit: ``z = [x, 1]·W_l``, ReLU on hidden layers.

    Stage ``fw<l>`` reads ``obs`` (l = 0) or ``h<l-1>`` and ``w<l>``, and writes ``h<l>`` (with
    the ReLU mask ``mask<l>``, 1 where z > 0) or ``q`` for the last layer; the target network's
    ``tfw<l>`` (DQN, CF'22's parallel FW chain) reads ``next_obs`` or ``th<l-1>`` and ``tw<l>``
    and writes ``th<l>`` or ``tq`` (no mask). The bias is the last row of W: the input's
    feature ``n_in`` is the constant 1.0.

    An item (``cnt`` samples of a sub-batch) is ``ceil(cnt/R) · ceil(n_out/C)`` tiles of
    ``max(n_in + 1, R)`` slots, one per cycle: slot k reads column k mod S of an input block
    (R samples) and row k mod S of a weight block (C outputs); the operands enter the tensor
    unit 2 cycles later (:data:`~sw.learner.schedule.GEMM_OPERAND_LATENCY`). Each of the tile's
    R output rows (``act_width`` values, saturated by the unit) is registered and written one
    cycle after its beat into C lanes of a block row, so an item's last result is written
    ``2R + C + 5`` cycles after its last slot and counted in ``done`` the cycle after
    (:func:`~sw.learner.schedule.stage_tail`). Throughput: R·C multiply-accumulates per cycle
    while ``n_in + 1 ≥ R``.

    Status: ``done`` (13 bits) counts finished items; flags ``fw`` (``target_fw``) on a
    saturated output row of a valid sample. See :class:`~.common.StageBlock` for the
    parameters.
    """

    KINDS = ("fw", "tfw")

    def build(self, m) -> StageStatus:
        ctx, st = self.ctx, self.stage
        cfg, bufs = ctx.config, ctx.buffers
        flags = []
        num = cfg.numerics
        S, sb, w = cfg.array, cfg.log_array, cfg.width
        R, C = cfg.stage_array(st.name)
        lr_, lc = R.bit_length() - 1, C.bit_length() - 1
        L = cfg.n_layers
        l, d, nm = st.layer, st.pipe, hw_name(st.name)
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
        tu = tensor_unit(m, cfg, st.name)
        loop = gemm_loop(m, ctx, st, self.producers, outer=cfg.sub_batch // R, middle=ngo,
                         k_len=K, outer_runtime=True, k_runtime=False)
        o, n, k = loop["o"], loop["n"], loop["k"]
        ob, osub = split(o, R, S)           # sample block, R-chunk in it
        nbk, nsub = split(n, C, S)          # output block, C-chunk in it
        kk = Signal(range(K + 1), name=f"{nm}_kk")
        m.d.comb += kk.eq(k)
        bias = kk == n_in
        en = loop["elem"]
        # A: column k%S of the input block (samples of row group base + o/(S/R)), R of them.
        x_port = bufs.port(src, d, 0)
        x_cg = Mux(bias, 0, kk >> sb)
        x_rg = (loop["gbase"] if src in bufs.shared else loop["base"]) + ob
        x_data = x_port.use(en, block_addr(x_rg, x_cg, cfg.groups_pow2(n_in)),
                            read=ctx.busy)
        # B: row k%S of weight block (k/S, n/(S/C)), C of them.
        w_port = bufs.port(wname, d, 0)
        w_data = w_port.use(en, block_addr(kk >> sb, nbk, cfg.groups_pow2(n_out)),
                            read=ctx.busy)
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
        feed(m, ctx, nm, tu, loop, a_vals, b_vals)

        # Writer: relu (hidden layers) and the mask, one cycle after the beat.
        beat = tu.o.valid
        wl = writer_loop(m, ctx, nm, d, rows=R, outer=cfg.sub_batch // R, middle=ngo,
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
        m.d.sync += [r_v.eq(beat & ~ctx.clear), r_last.eq(wl["item_last"]),
                     r_row.eq(Cat(wl["i"], wosub) if R < S else wl["i"]),
                     r_lanes.eq(lane_mask(wnsub, C, S)),
                     r_addr.eq(block_addr(wl["base"] + wob, wnb, g_out))]
        m.d.sync += [r_c[j].eq(tu.o.payload.c[j]) for j in range(C)]
        valid_row = ((wl["o"] << lr_) + wl["i"]) < wl["cnt"]
        flags.append(("target_fw" if target else "fw", beat & tu.o.payload.overflow & valid_row))
        onehot = Signal(S, name=f"{nm}_onehot")
        m.d.comb += onehot.eq(Mux(r_v, 1 << r_row, 0))
        vals = r_c if last_layer else [Mux(c > 0, c, 0) for c in r_c]
        data = Cat(*[v[:w] for v in vals]).replicate(S // C)
        dbuf = bufs.get(dst, d)
        lanes = r_lanes if C < S else None
        dbuf.write(dbuf.row_enable(onehot, lanes), r_addr, data.replicate(S))
        if not last_layer and not target:
            mbuf = bufs.get(f"mask{l}", d)
            mdata = Cat(*[c > 0 for c in r_c]).replicate(S // C)
            mbuf.write(mbuf.row_enable(onehot, lanes), r_addr, mdata.replicate(S))
        event = r_v & r_last
        done, all_done = done_counter(m, ctx, st, event)
        return StageStatus(done, all_done, flags=flags, event=event)

