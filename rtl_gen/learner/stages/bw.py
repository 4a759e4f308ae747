"""BW stage of the learner pipeline: the error of a hidden layer's output."""

from amaranth.hdl import Cat, Mux, Signal, signed

from .buffers import block_addr, block_col, chunk, lane_mask, split
from .common import (StageBlock, StageStatus, done_counter, feed, gemm_loop, hw_name,
                     tensor_unit, writer_loop)

__all__ = ["BwStage"]


class BwStage(StageBlock):
    """BW of layer l ≥ 1 on an R × C unit: ``δ_{l-1} = (δ_l · W_lᵀ) ⊙ [z_{l-1} > 0]``.

    Stage ``bw<l>`` reads ``delta<l>`` (column k mod S of a block: R samples), ``w<l>`` (column
    k mod S of a weight block: row k of Wᵀ, C inputs; the bias row is never read) and the ReLU
    mask ``mask<l-1>`` written by FW, and writes ``delta<l-1>`` (``grad_width`` values
    saturated by the unit, 0 where the mask is 0). W has a read port of its own (port 1; FW
    uses port 0).

    An item (``cnt`` samples) is ``ceil(cnt/R) · ceil(n_in/C)`` tiles of ``max(n_out, R)``
    slots, one per cycle; the operands enter the unit 2 cycles after their slot. The mask is
    read on an output beat, its row selected from the block word and registered the cycle
    after, and applied the cycle after that, with the write: an item's last result is written
    ``2R + C + 6`` cycles after its last slot and counted in ``done`` the cycle after
    (:func:`~sw.learner.schedule.stage_tail`). Throughput: R·C multiply-accumulates per
    cycle while ``n_out ≥ R``.

    Status: ``done`` (13 bits) counts finished items; flag ``bw`` on a saturated output row of
    a valid sample. See :class:`~.common.StageBlock` for the parameters.
    """

    KINDS = ("bw",)

    def build(self, m) -> StageStatus:
        ctx, st = self.ctx, self.stage
        cfg, bufs = ctx.config, ctx.buffers
        flags = []
        S, sb, w = cfg.array, cfg.log_array, cfg.width
        R, C = cfg.stage_array(st.name)
        lr_, lc = R.bit_length() - 1, C.bit_length() - 1
        l, d, nm = st.layer, st.pipe, hw_name(st.name)
        n_in, n_out = cfg.sizes[l], cfg.sizes[l + 1]
        K = n_out
        ngi = -(-n_in // C)
        tu = tensor_unit(m, cfg, st.name)
        loop = gemm_loop(m, ctx, st, self.producers, outer=cfg.sub_batch // R, middle=ngi,
                         k_len=K, outer_runtime=True, k_runtime=False)
        o, n, k = loop["o"], loop["n"], loop["k"]
        ob, osub = split(o, R, S)
        nbk, nsub = split(n, C, S)
        kk = Signal(range(K + 1), name=f"{nm}_kk")
        m.d.comb += kk.eq(k)
        en = loop["elem"]
        d_port = bufs.port(f"delta{l}", d, 0)
        d_data = d_port.use(en, block_addr(loop["base"] + ob, kk >> sb, cfg.groups_pow2(n_out)),
                            read=ctx.busy)
        w_port = bufs.port(f"w{l}", d, 1)
        w_data = w_port.use(en, block_addr(nbk, kk >> sb, cfg.groups_pow2(n_out)), read=ctx.busy)
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
        feed(m, ctx, nm, tu, loop, a_vals, b_vals)

        beat = tu.o.valid
        wl = writer_loop(m, ctx, nm, d, rows=R, outer=cfg.sub_batch // R, middle=ngi,
                         outer_runtime=True, beat=beat)
        wob, wosub = split(wl["o"], R, S)
        wnb, wnsub = split(wl["n"], C, S)
        g_in = cfg.groups_pow2(n_in)
        addr = block_addr(wl["base"] + wob, wnb, g_in)
        mport = bufs.port(f"mask{l - 1}", d, 0)
        mdata = mport.use(beat, addr)
        r_v = Signal(name=f"{nm}_rv")
        r_addr = Signal(24, name=f"{nm}_raddr")
        r_row = Signal(range(S), name=f"{nm}_rrow")
        r_nsub = Signal.like(wnsub, name=f"{nm}_rnsub")
        r_lanes = Signal(S, name=f"{nm}_rlanes")
        r_c = [Signal(signed(w), name=f"{nm}_rc{j}") for j in range(C)]
        r_last = Signal(name=f"{nm}_rlast")
        m.d.sync += [r_v.eq(beat & ~ctx.clear), r_last.eq(wl["item_last"]),
                     r_row.eq(Cat(wl["i"], wosub) if R < S else wl["i"]), r_nsub.eq(wnsub),
                     r_lanes.eq(lane_mask(wnsub, C, S)), r_addr.eq(addr)]
        m.d.sync += [r_c[j].eq(tu.o.payload.c[j]) for j in range(C)]
        valid_row = ((wl["o"] << lr_) + wl["i"]) < wl["cnt"]
        flags.append(("bw", beat & tu.o.payload.overflow & valid_row))
        # The mask's row (an S:1 multiplexer after the block RAM) is registered with the
        # results; they are masked and written the cycle after.
        w_v = Signal(name=f"{nm}_wv")
        w_last = Signal(name=f"{nm}_wlast")
        w_addr = Signal.like(r_addr, name=f"{nm}_waddr")
        w_row = Signal.like(r_row, name=f"{nm}_wrow")
        w_lanes = Signal.like(r_lanes, name=f"{nm}_wlanes")
        w_mask = Signal(C, name=f"{nm}_wmask")
        w_c = [Signal(signed(w), name=f"{nm}_wc{j}") for j in range(C)]
        m.d.sync += [w_v.eq(r_v & ~ctx.clear), w_last.eq(r_last), w_addr.eq(r_addr),
                     w_row.eq(r_row), w_lanes.eq(r_lanes),
                     w_mask.eq(Cat(*chunk(list(mdata.word_select(r_row, S)), r_nsub, C, 1)))]
        m.d.sync += [w_c[j].eq(r_c[j]) for j in range(C)]
        vals = [Mux(w_mask[j], w_c[j], 0) for j in range(C)]
        onehot = Signal(S, name=f"{nm}_onehot")
        m.d.comb += onehot.eq(Mux(w_v, 1 << w_row, 0))
        dbuf = bufs.get(f"delta{l - 1}", d)
        dbuf.write(dbuf.row_enable(onehot, w_lanes if C < S else None), w_addr,
                   Cat(*[v[:w] for v in vals]).replicate(S // C).replicate(S))
        event = w_v & w_last
        done, all_done = done_counter(m, ctx, st, event)
        return StageStatus(done, all_done, flags=flags, event=event)

