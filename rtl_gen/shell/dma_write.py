"""The write direction of :class:`~rtl_gen.shell.dma.AxiDma` (local memory to device memory):
the local reads, beat after beat, and the W buffer the words are assembled into."""

from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Mux, Signal, Value, unsigned
from amaranth.lib import memory

__all__ = ["DmaWrites"]


class DmaWrites:
    """The steps of :class:`~rtl_gen.shell.dma.AxiDma`'s write direction, mixed into it: they
    use its ports, parameters, ``_widths`` and ``_planner``."""

    def _local_reads(self, m, cs):
        """Writes, first half: one local read a cycle, beat after beat as the W planner's
        bursts and the buffer's free slots allow, and the tags of each read up to the memory's
        read latency (:class:`_LocalReads`)."""
        wd = self._widths()
        r, lw, F = wd.r, wd.lw, self.write_buffer_depth
        go_w, tail = cs.go_w, cs.tail
        wp = self._planner(m, "wp", page_bits=wd.page_bits, cw=wd.cw)
        p_beats = Signal(wd.cw)                     # beats not yet started
        p_more = Signal()                           # p_beats != 0
        p_lastbeat = Signal()                       # p_beats == 1
        p_burst = Signal(9)                         # beats left in the current burst
        p_b0 = Signal(init=1)                       # p_burst == 0: the next beat starts a burst
        p_b1 = Signal()                             # p_burst == 1
        p_idx = Signal(lw)                          # lane of the next local read
        p_last_lane = Signal(lw)                    # last lane of the current beat
        p_wlast = Signal()                          # the current beat ends its burst
        used = Signal(F)                            # slots reserved, not yet sent (thermometer)
        used_full = used[F - 1]
        mid_beat = Signal() if r > 1 else Const(0)  # p_idx != 0
        start_beat = Signal()
        rd_issue = Signal()
        m.d.comb += [
            start_beat.eq(go_w & ~mid_beat & p_more & ~used_full & (~p_b0 | wp.ready)),
            rd_issue.eq(start_beat | (go_w & mid_beat)),
        ]
        beat_wlast = Mux(p_b0, wp.n1, p_b1)
        beat_last_lane = Mux(p_lastbeat, tail, r - 1) if r > 1 else Const(0)
        cur_last_lane = Mux(mid_beat, p_last_lane, beat_last_lane) if r > 1 else Const(0)
        cur_wlast = Mux(mid_beat, p_wlast, beat_wlast) if r > 1 else beat_wlast
        # Tags of the read in flight: data arrives on mem_rdata mem_read_latency cycles later.
        # Their names are the ones Amaranth's tracer gave them (the default "$signal" for all
        # but q_wlast), kept so that the Verilog does not change.
        q_valid, q_idx, q_final = (Signal(name="$signal"), Signal(lw, name="$signal"),
                                   Signal(name="$signal"))
        q_last_lane, q_wlast = Signal(lw, name="$signal"), Signal(name="q_wlast")
        m.d.sync += q_valid.eq(rd_issue)
        with m.If(rd_issue):
            final = (p_idx == cur_last_lane) if r > 1 else Const(1)
            m.d.sync += [
                cs.l_addr.eq(cs.l_addr + 1),
                q_idx.eq(p_idx), q_final.eq(final), q_last_lane.eq(cur_last_lane),
                q_wlast.eq(cur_wlast),
            ]
            if r > 1:
                m.d.sync += [p_idx.eq(Mux(final, 0, p_idx + 1)), mid_beat.eq(~final)]
        with m.If(start_beat):
            m.d.sync += [p_beats.eq(p_beats - 1), p_more.eq(~p_lastbeat),
                         p_lastbeat.eq(p_beats == 2)]
            with m.If(p_b0):
                m.d.sync += [p_burst.eq(wp.nm1), p_b0.eq(wp.n1), p_b1.eq(wp.n2),
                             wp.off.eq(wp.off + wp.n), wp.left.eq(wp.left - wp.n)]
                m.d.comb += wp.chg.eq(1)
            with m.Else():
                m.d.sync += [p_burst.eq(p_burst - 1), p_b0.eq(p_b1), p_b1.eq(p_burst == 2)]
            if r > 1:
                m.d.sync += [p_last_lane.eq(beat_last_lane), p_wlast.eq(beat_wlast)]

        # Further stages of the tags up to the local memory's read latency.
        for k in range(1, self._mem_read_latency):
            tags = (q_valid, q_idx, q_final, q_last_lane, q_wlast)
            nxt = tuple(Signal.like(t, name=f"{t.name}_d{k}") for t in tags)
            m.d.sync += [n.eq(t) for n, t in zip(nxt, tags)]
            q_valid, q_idx, q_final, q_last_lane, q_wlast = nxt
        return _LocalReads(planner=wp, beats=p_beats, more=p_more, lastbeat=p_lastbeat,
                           burst=p_burst, b0=p_b0, b1=p_b1, idx=p_idx, mid_beat=mid_beat,
                           used=used, start_beat=start_beat, rd_issue=rd_issue,
                           q_valid=q_valid, q_idx=q_idx, q_final=q_final,
                           q_last_lane=q_last_lane, q_wlast=q_wlast)

    def _write_buffer(self, m, cs, lr):
        """Writes, second half: the read words assembled into beats, the beats through the
        (:attr:`write_buffer_depth`)-entry buffer to the W channel; B responses. Returns the
        B handshake."""
        a, wd = self.axi, self._widths()
        W, D, r, lw, F = wd.W, wd.D, wd.r, wd.lw, self.write_buffer_depth
        q_valid, q_idx, used = lr.q_valid, lr.q_idx, lr.used
        asm = [Signal(D, name=f"asm{j}") for j in range(r)]
        for j in range(r):
            with m.If(q_valid & ((q_idx == j) if r > 1 else 1)):
                m.d.sync += asm[j].eq(self.mem.rdata)
        push_data = Cat(*(Mux((q_idx == j) if r > 1 else 1, self.mem.rdata, asm[j])
                          for j in range(r)))
        push = q_valid & lr.q_final

        buf = memory.Memory(shape=unsigned(W + lw + 1), depth=F, init=[])
        m.submodules.wbuf = buf
        bw = buf.write_port()
        br = buf.read_port(domain="comb")
        wr_ptr = Signal(range(F))
        rd_ptr = Signal(range(F))
        count = Signal(range(F + 1))
        m.d.comb += [bw.addr.eq(wr_ptr), bw.en.eq(push),
                     bw.data.eq(Cat(push_data, lr.q_last_lane, lr.q_wlast)), br.addr.eq(rd_ptr)]
        head_data = br.data[:W]
        head_last_lane = br.data[W:W + lw]
        head_wlast = br.data[W + lw]
        wvalid = Signal()                           # count != 0
        pop = wvalid & a("wready")
        with m.If(push):
            m.d.sync += wr_ptr.eq(Mux(wr_ptr == F - 1, 0, wr_ptr + 1))
        with m.If(pop):
            m.d.sync += rd_ptr.eq(Mux(rd_ptr == F - 1, 0, rd_ptr + 1))
        with m.If(push & ~pop):
            m.d.sync += [count.eq(count + 1), wvalid.eq(1)]
        with m.Elif(pop & ~push):
            m.d.sync += [count.eq(count - 1), wvalid.eq(count != 1)]
        with m.If(lr.start_beat & ~pop):
            m.d.sync += used.eq(Cat(Const(1), used[:-1]))
        with m.Elif(pop & ~lr.start_beat):
            m.d.sync += used.eq(used[1:])
        # Lane j of the head beat holds data iff j <= its last lane (lane 0 always does).
        lane_on = Signal(r)
        m.d.comb += lane_on.eq(Cat(Const(1), *(head_last_lane >= j for j in range(1, r))))
        strb = Cat(*(lane_on[j].replicate(D // 8) for j in range(r)))
        m.d.comb += [a("wvalid").eq(wvalid), a("wdata").eq(head_data), a("wstrb").eq(strb),
                     a("wlast").eq(head_wlast), a("bready").eq(1)]
        b_hs = a("bvalid")
        with m.If(b_hs & cs.go_w & (a("bresp") != 0)):
            m.d.sync += cs.err.eq(1)
        return b_hs


@dataclass(frozen=True)
class _LocalReads:
    """The writes' local reads: the W planner, the beat and burst counters with their flags,
    the next lane, the buffer's reserved slots, ``start_beat`` and ``rd_issue`` this cycle,
    and the tags of the read whose data is on ``mem.rdata``."""
    planner: object
    beats: Signal
    more: Signal
    lastbeat: Signal
    burst: Signal
    b0: Signal
    b1: Signal
    idx: Signal
    mid_beat: Value
    used: Signal
    start_beat: Signal
    rd_issue: Signal
    q_valid: Signal
    q_idx: Signal
    q_final: Signal
    q_last_lane: Signal
    q_wlast: Signal
