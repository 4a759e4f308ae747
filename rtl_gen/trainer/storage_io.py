"""The trainer core's storage traffic beside its loop, in gateware: LOAD (the load region's
weight image into the learner's ``w<l>`` and ``tw<l>``), weight snapshots and trace entries
(:mod:`sw.trainer.layout`), on the AR/R and AW/W/B channels of the core's AXI4 master and
the learner's host port."""

from contextlib import contextmanager
from dataclasses import dataclass

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, Value
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from sw.learner.layout import mem_addr_bits
from sw.shell.spec import HOST_READ_LATENCY
from sw.trainer.layout import (HEADER_BYTES, SNAPSHOT_BUSY, TRACE_BYTES, lane_bytes,
                               region_base, weight_offsets, weight_bytes)
from sw.trainer.spec import TrainerConfig

from ..shell.signatures import MemoryPortSignature
from sw.trainer.schedule import HOST_OUT_STAGES, burst_split

from .learner_port import element_addr, registered_host

__all__ = ["StorageIO"]

_MAX_BURST = 256
_PAGE = 4096


def _log2(n):
    return n.bit_length() - 1


class StorageIO(wiring.Component):
    """One storage job at a time beside the trainer's loop.

    Jobs (one-cycle starts while idle; ``done`` one cycle at the end):

    ``load``
        AR bursts of the load region (at most 256 beats, never across 4 KiB), one beat
        taken at a time; each lane of a beat that holds a weight is written into ``w<l>``
        (one cycle) and ``tw<l>`` (one cycle) through :attr:`host`, a padding lane takes one
        cycle (:func:`sw.trainer.schedule.sequential_load_cycles`).
    ``snapshot``
        Slot ``seq % 2``: the header as ``SNAPSHOT_BUSY``, the weight image (each beat's
        lanes read from ``w<l>``, one read per cycle, assembled, then written), the header
        with ``seq`` and ``steps_total``; each burst waits for its B response
        (:func:`~sw.trainer.schedule.sequential_snapshot_cycles`).
    ``trace``
        Entry ``trace_index % trace_depth`` (STEPS_TOTAL, CONSUMED, Σ|Q - y|, its count) with
        its byte strobes (:func:`~sw.trainer.schedule.sequential_trace_cycles`).

    Parameters
    ----------
    config : TrainerConfig

    Members
    -------
    load, snapshot, trace : ``In(1)``
    done : ``Out(1)``
    base : ``In(64)``
        The storage's byte address (4 KiB aligned), held from a job's start to its ``done``.
    seq, steps_total, consumed, trace_sum, trace_n, trace_index : ``In(32)``
        The snapshot's sequence number and the header and trace words, held from a job's
        start (the cycle of its one-cycle start) to its ``done``.
    host : ``Out(MemoryPortSignature(...))``
        To the learner's host port (the learner idle); registered outputs
        (:func:`~rtl_gen.trainer.learner_port.registered_host`), all zero between
        accesses.
    reading : ``Out(1)``
        A LOAD owns AR and R (the core's multiplexer); a register, set from LOAD's first
        address phase to its last lane.
    araddr, arlen, arvalid, rready : ``Out``; arready, rdata, rvalid : ``In``
        AR and R (INCR bursts of ``storage_width / 8``-byte beats; R's ID, RESP and LAST
        are not checked).
    awaddr, awlen, awvalid, wdata, wstrb, wlast, wvalid, bready : ``Out``;
    awready, wready, bvalid : ``In``
        AW, W and B.

    Raises
    ------
    TypeError
        ``config`` is not a :class:`~sw.trainer.spec.TrainerConfig`.
    """

    def __init__(self, config):
        if not isinstance(config, TrainerConfig):
            raise TypeError(f"config must be a TrainerConfig, not {config!r}")
        self._config = config
        lc = config.learner
        D = lc.axi_data_width
        W = config.storage_width
        super().__init__({
            "load": In(1), "snapshot": In(1), "trace": In(1), "done": Out(1),
            "base": In(64), "seq": In(32), "steps_total": In(32), "consumed": In(32),
            "trace_sum": In(32), "trace_n": In(32), "trace_index": In(32),
            "host": Out(MemoryPortSignature(
                data_width=D, addr_width=mem_addr_bits(lc) - (D // 8 - 1).bit_length(),
                read_latency=HOST_READ_LATENCY)),
            "reading": Out(1),
            "araddr": Out(64), "arlen": Out(8), "arvalid": Out(1), "arready": In(1),
            "rdata": In(W), "rvalid": In(1), "rready": Out(1),
            "awaddr": Out(64), "awlen": Out(8), "awvalid": Out(1), "awready": In(1),
            "wdata": Out(W), "wstrb": Out(W // 8), "wlast": Out(1), "wvalid": Out(1),
            "wready": In(1), "bvalid": In(1), "bready": Out(1),
        })

    @property
    def config(self) -> TrainerConfig:
        return self._config

    def elaborate(self, platform):
        m = Module()
        hp = registered_host(m, self.host, "io_hp")
        # the states one-hot: a state's logic starts at its own flip-flop, not at a decode of
        # the state number
        fsm = _OneHot(m, "io_st", ["IDLE", "L_AR", "L_R", "L_LANE", "W_AW", "W_FETCH",
                                   "W_BEAT", "W_B", "DONE"])
        walk = self._walker(m)
        bursts = self._bursts(m, fsm)
        beats = self._beats(m)
        wr = self._write_words(m, beats)
        go = self._starts(m)
        self._idle_state(m, fsm, go, walk, bursts, beats, wr)
        self._load_states(m, fsm, hp, walk, bursts, beats)
        self._write_states(m, fsm, hp, walk, bursts, beats, wr)
        self._end_states(m, fsm, bursts, beats, wr)
        fsm.finish()
        self._gather(m, beats)
        return m

    # Each step below adds its logic to ``m`` and returns what later steps use; the order of
    # the calls in :meth:`elaborate` is the order of the statements in the netlist.
    def _walker(self, m):
        """The weight walker: the image's lanes in order, their (layer, row, col) and the
        learner's host addresses of ``w<l>`` and ``tw<l>`` (:class:`_Walk`)."""
        cfg = self._config
        lc = cfg.learner
        nb = cfg.storage_width // 8
        NL = cfg.storage_width // (8 * lane_bytes(cfg))
        shapes = lc.numerics.weight_shapes()
        nlay = len(shapes)
        words = [(o2 - o1) // nb for o1, o2 in
                 zip(weight_offsets(cfg), list(weight_offsets(cfg)[1:]) + [weight_bytes(cfg)])]
        lay = Signal(range(nlay), name="io_layer")
        row = Signal(range(max(r for r, _ in shapes) + 1), name="io_row")
        col = Signal(range(max(c for _, c in shapes) + 1), name="io_col")
        k = Signal(range(NL), name="io_lane")
        # The walker's tests are registers, each set by the step before (a compare with the
        # layer's shape, a table lookup by LAYER, left no time for the muxes behind it): the
        # lane holds a weight (ROW < rows), its column and row are the layer's last, the
        # beat is the layer's last (WORDS_LEFT: the layer's beats after this one), the lane
        # is the beat's last.
        wl = Signal(range(max(words)), name="io_words_left")
        real = Signal(name="io_real", init=1)
        last_col = Signal(name="io_last_col", init=shapes[0][1] == 1)
        last_row = Signal(name="io_last_row", init=shapes[0][0] == 1)
        last_word = Signal(name="io_last_word", init=words[0] == 1)
        last_lane = Signal(name="io_last_lane", init=NL == 1)

        def start(table):
            """A layer's first lane (``table(f)``: ``f`` of the layer's index)."""
            return [row.eq(0), col.eq(0), real.eq(1),
                    wl.eq(table(lambda i: words[i] - 1)),
                    last_col.eq(table(lambda i: shapes[i][1] == 1)),
                    last_row.eq(table(lambda i: shapes[i][0] == 1)),
                    last_word.eq(table(lambda i: words[i] == 1))]

        def at(exprs):
            return Array(exprs)[lay]

        # the next layer's constants by LAYER (after the last layer: any)
        next_layer = lambda f: at(Const(int(f((i + 1) % nlay)), 16) for i in range(nlay))
        walk_reset = [lay.eq(0), k.eq(0), last_lane.eq(NL == 1),
                      *start(lambda f: int(f(0)))]

        def advance():
            """The next lane of the image."""
            with m.If(real):
                m.d.sync += [col.eq(Mux(last_col, 0, col + 1)),
                             row.eq(Mux(last_col, row + 1, row)),
                             last_col.eq(Mux(last_col, at(Const(c == 1) for _, c in shapes),
                                             at(col == c - 2 if c >= 2 else Const(0)
                                                for _, c in shapes)))]
                with m.If(last_col):
                    m.d.sync += [real.eq(~last_row),
                                 last_row.eq(at(row == r - 2 if r >= 2 else Const(0)
                                                for r, _ in shapes))]
            with m.If(last_lane):
                m.d.sync += [k.eq(0), last_lane.eq(NL == 1)]
                with m.If(last_word):
                    m.d.sync += [lay.eq(lay + 1), *start(next_layer)]
                with m.Else():
                    m.d.sync += [wl.eq(wl - 1), last_word.eq(wl == 1)]
            with m.Else():
                m.d.sync += [k.eq(k + 1), last_lane.eq(k == NL - 2)]

        def addr_of(prefix):
            addrs = [element_addr(lc, f"{prefix}{l}", row, col) for l in range(nlay)]
            return (Array(x for x, _ in addrs)[lay], Array(o for _, o in addrs)[lay])

        wa, wo = addr_of("w")
        ta, to = addr_of("tw")
        return _Walk(k=k, last_lane=last_lane, real=real, reset=walk_reset, advance=advance,
                     wa=wa, wo=wo, ta=ta, to=to)

    def _bursts(self, m, fsm):
        """The burst registers: the next burst's address and length (at most 256 beats,
        never across 4 KiB), the words left of the job, the beats left of the burst
        (:class:`_Bursts`)."""
        cfg = self._config
        nb = cfg.storage_width // 8
        total_words = weight_bytes(cfg) // nb
        addr = Signal(64, name="io_addr")          # next burst's byte address
        left = Signal(range(total_words + HEADER_BYTES // nb + 2), name="io_left")
        bcnt = Signal(9, name="io_bcnt")
        # BCNT == 1, set with BCNT (W_BEAT's beats follow each other)
        last_beat = Signal(name="io_last_beat")
        # BCNT != 0 and LEFT != 0 one cycle late: they are tested two or more cycles after
        # the handshake that changed them (L_LANE's last lane, W_B)
        bcnt_nz = Signal(name="io_bcnt_nz")
        left_nz = Signal(name="io_left_nz")
        m.d.sync += [bcnt_nz.eq(bcnt != 0), left_nz.eq(left != 0)]
        # the beats to the page's end and the length's compares, registered (a subtraction
        # and two compares before the muxes); ADDR is a multiple of the beat, so LEFT <
        # TO_PAGE is ADDR's beat in the page + LEFT < the page's beats
        to_page = Signal(range(_PAGE // nb + 1), name="io_to_page")
        left_lt = Signal(name="io_left_lt_page")
        left_le = Signal(name="io_left_le_max")
        m.d.sync += [to_page.eq((_PAGE - addr[:12]) >> _log2(nb)),
                     left_lt.eq(((addr[_log2(nb):12] + left) >> (12 - _log2(nb))) == 0),
                     left_le.eq(left <= _MAX_BURST)]

        def burst_len(to_page, left):
            # TO_PAGE is at most the page's beats
            return Mux(left_lt & left_le, left,
                       to_page if _PAGE // nb <= _MAX_BURST
                       else Mux(to_page <= _MAX_BURST, to_page, _MAX_BURST))

        # the next burst's length, registered: recomputed from TO_PAGE and LEFT outside the
        # address phases (one comes three or more cycles after the handshake that changed
        # ADDR and LEFT), held during them, or loaded with the constant of a job's first
        # burst where a job sets them
        nxt_len = Signal(9, name="io_next_len")
        with m.If(~(fsm["L_AR"] | fsm["W_AW"])):
            m.d.sync += nxt_len.eq(burst_len(to_page, left))
        return _Bursts(addr=addr, left=left, bcnt=bcnt, nxt_len=nxt_len, last_beat=last_beat,
                       bcnt_nz=bcnt_nz, left_nz=left_nz)

    def _beats(self, m):
        """The beat being assembled or taken apart, the job's phase and kind, the tags that
        follow the host reads of a snapshot's lanes, the lanes issued and arrived
        (:class:`_Beats`)."""
        W = self._config.storage_width
        NL = W // (8 * lane_bytes(self._config))
        lat = HOST_READ_LATENCY + HOST_OUT_STAGES
        beat = Signal(W, name="io_beat")
        phase = Signal(name="io_phase")
        job = Signal(2, name="io_job")               # 0 busy header, 1 weights, 2 header
        tags = [Signal(name=f"io_tag{t}") for t in range(lat)]
        otags = [Signal(range(NL), name=f"io_otag{t}") for t in range(lat)]
        offs = [Signal(range(W), name=f"io_off{t}") for t in range(lat)]
        rtags = [Signal(name=f"io_rtag{t}") for t in range(lat)]
        m.d.sync += [rtags[t + 1].eq(rtags[t]) for t in range(lat - 1)]
        m.d.sync += [tags[t + 1].eq(tags[t]) for t in range(lat - 1)]
        m.d.sync += [otags[t + 1].eq(otags[t]) for t in range(lat - 1)]
        m.d.sync += [offs[t + 1].eq(offs[t]) for t in range(lat - 1)]
        m.d.sync += tags[0].eq(0)
        issued = Signal(range(NL + 1), name="io_issued")
        arrived = Signal(range(NL + 1), name="io_arrived")
        return _Beats(beat=beat, phase=phase, job=job, tags=tags, otags=otags, offs=offs,
                      rtags=rtags, issued=issued, arrived=arrived)

    def _write_words(self, m, beats):
        """What the writes need beside the image: the first addresses (of a job, of a
        snapshot's next part), the trace entry's data and byte strobes and its beat index; B
        always ready (:class:`_Writes`)."""
        cfg = self._config
        base = self.base
        nb = cfg.storage_width // 8
        slot = Signal(64, name="io_slot")
        snap0 = region_base(cfg, "snap0")
        snap1 = region_base(cfg, "snap1")
        m.d.comb += slot.eq(base + Mux(self.seq[0], snap1, snap0))
        trace_beats = max(1, TRACE_BYTES // nb)
        entry = Cat(self.steps_total, self.consumed, self.trace_sum, self.trace_n)
        tr_addr = Signal(64, name="io_trace_addr")
        tr_index = (self.trace_index[:_log2(cfg.trace_depth)] if cfg.trace_depth > 1
                    else Const(0, 1))
        m.d.comb += tr_addr.eq(base + region_base(cfg, "trace")
                               + (tr_index << _log2(TRACE_BYTES)))
        tr_shift = Signal(range(max(nb, TRACE_BYTES) * 8), name="io_trace_shift")
        m.d.comb += tr_shift.eq((tr_addr[:_log2(nb)] if nb > TRACE_BYTES else 0) << 3)
        tr_data = Signal(max(nb, TRACE_BYTES) * 8, name="io_trace_data")
        tr_strb = Signal(max(nb, TRACE_BYTES), name="io_trace_strb")
        m.d.comb += [tr_data.eq(entry << tr_shift),
                     tr_strb.eq(Const((1 << TRACE_BYTES) - 1, TRACE_BYTES) << (tr_shift >> 3))]
        widx = Signal(range(trace_beats + 1), name="io_widx")
        # the 64-bit sums from BASE registered (BASE, SEQ and TRACE_INDEX are held from a
        # job's start pulse): a job's first address, loaded the cycle after the pulse, and
        # the snapshot's next part's (the image after the busy header, then the header)
        start = Signal(64, name="io_start_addr")
        m.d.sync += start.eq(Mux(self.trace, tr_addr & ~(nb - 1),
                                 Mux(self.snapshot, slot, base + region_base(cfg, "load"))))
        part = Signal(64, name="io_part_addr")
        m.d.sync += part.eq(Mux(beats.job[0], slot, slot + HEADER_BYTES))

        m.d.comb += self.bready.eq(1)
        return _Writes(tr_data=tr_data, tr_strb=tr_strb, widx=widx, start=start, part=part)

    def _starts(self, m):
        """The job starts registered: ``(go_load, go_snap, go_trace, go_any, go_write)``
        (any start, a snapshot's or a trace entry's: ORs registered beside them, one level of
        logic less before IDLE's muxes)."""
        # the starts registered: the job's first addresses (64-bit sums) load from stable
        # registers, not from the core's sequencer through them (one cycle per job)
        go_load, go_snap, go_trace = (Signal(name=f"io_go_{n}")
                                      for n in ("load", "snapshot", "trace"))
        go_any, go_write = Signal(name="io_go_any"), Signal(name="io_go_write")
        m.d.sync += [go_load.eq(self.load), go_snap.eq(self.snapshot),
                     go_trace.eq(self.trace),
                     go_any.eq(self.load | self.snapshot | self.trace),
                     go_write.eq(self.snapshot | self.trace)]
        return go_load, go_snap, go_trace, go_any, go_write

    def _idle_state(self, m, fsm, go, walk, bursts, beats, wr):
        """State IDLE: a job's start (``go``: LOAD, snapshot, trace), its first burst's
        address and length, its words."""
        cfg = self._config
        nb = cfg.storage_width // 8
        total_words = weight_bytes(cfg) // nb
        hdr_beats = HEADER_BYTES // nb
        trace_beats = max(1, TRACE_BYTES // nb)
        addr, left, nxt_len = bursts.addr, bursts.left, bursts.nxt_len
        go_load, go_snap, go_trace, go_any, go_write = go
        load = region_base(cfg, "load")
        with fsm.state("IDLE"):
            with m.If(go_load):
                m.d.sync += [self.reading.eq(1), *walk.reset]
            with m.If(go_snap):
                m.d.sync += [beats.job.eq(0), *walk.reset]
            with m.If(go_trace):
                m.d.sync += [beats.job.eq(3), wr.widx.eq(0)]
            # the first burst of the last start (LOAD, snapshot, trace): one mux behind the
            # flags, not a chain of three (an entry never crosses 4 KiB: one burst of all
            # its beats)
            with m.If(go_any):
                m.d.sync += [
                    addr.eq(wr.start),
                    left.eq(Mux(go_trace, trace_beats, Mux(go_snap, hdr_beats, total_words))),
                    nxt_len.eq(Mux(go_trace, trace_beats,
                                   Mux(go_snap, _slot_first_len(cfg, self.seq[0], 0, hdr_beats),
                                       _first_len(cfg, load, total_words))))]
            # the last start wins (one-hot transitions must exclude each other)
            with m.If(go_write):
                fsm.next("W_AW")
            with m.Elif(go_load):
                fsm.next("L_AR")

    def _load_states(self, m, fsm, hp, walk, bursts, beats):
        """LOAD's states: read bursts (L_AR, L_R), then two host writes per real lane of
        each beat (L_LANE)."""
        cfg = self._config
        nb = cfg.storage_width // 8
        LB = 8 * lane_bytes(cfg)
        w = cfg.learner.numerics.width
        addr, left, bcnt, nxt_len = bursts.addr, bursts.left, bursts.bcnt, bursts.nxt_len
        beat, phase, real = beats.beat, beats.phase, walk.real
        with fsm.state("L_AR"):
            m.d.comb += [self.arvalid.eq(1), self.araddr.eq(addr),
                         self.arlen.eq(nxt_len - 1)]
            with m.If(self.arready):
                m.d.sync += [addr.eq(addr + (nxt_len << _log2(nb))),
                             left.eq(left - nxt_len), bcnt.eq(nxt_len),
                             bursts.last_beat.eq(nxt_len == 1)]
                fsm.next("L_R")
        with fsm.state("L_R"):
            m.d.comb += self.rready.eq(1)
            with m.If(self.rvalid):
                m.d.sync += [beat.eq(self.rdata), bcnt.eq(bcnt - 1),
                             bursts.last_beat.eq(bcnt == 2), phase.eq(0)]
                fsm.next("L_LANE")
        with fsm.state("L_LANE"):
            v = beat[:w]
            o = Mux(phase, walk.to, walk.wo)
            with m.If(real):
                m.d.comb += [hp["addr"].eq(Mux(phase, walk.ta, walk.wa)),
                             hp["we"].eq(((1 << (w // 8)) - 1) << (o >> 3)),
                             hp["wdata"].eq(v << o)]
            with m.If(real & ~phase):
                m.d.sync += phase.eq(1)
            with m.Else():
                # the beat moves down a lane: the lane's value is its first bits, no
                # multiplexer by the lane (the beat is written before a snapshot reads it)
                m.d.sync += [phase.eq(0), beat.eq(beat >> LB)]
                walk.advance()
                with m.If(walk.last_lane):
                    with m.If(bursts.bcnt_nz):
                        fsm.next("L_R")
                    with m.Elif(bursts.left_nz):
                        fsm.next("L_AR")
                    with m.Else():
                        m.d.sync += self.reading.eq(0)
                        fsm.next("DONE")

    def _write_states(self, m, fsm, hp, walk, bursts, beats, wr):
        """The writes' states: AW (W_AW), a snapshot beat's lanes read from ``w<l>``
        (W_FETCH), the beats (W_BEAT)."""
        cfg = self._config
        W = cfg.storage_width
        nb = W // 8
        NL = W // (8 * lane_bytes(cfg))
        hdr_beats = HEADER_BYTES // nb
        trace_beats = max(1, TRACE_BYTES // nb)
        addr, left, bcnt, nxt_len = bursts.addr, bursts.left, bursts.bcnt, bursts.nxt_len
        beat, job, issued, arrived = beats.beat, beats.job, beats.issued, beats.arrived
        widx = wr.widx
        with fsm.state("W_AW"):
            m.d.comb += [self.awvalid.eq(1), self.awaddr.eq(addr), self.awlen.eq(nxt_len - 1)]
            with m.If(self.awready):
                m.d.sync += [addr.eq(addr + (nxt_len << _log2(nb))),
                             left.eq(left - nxt_len), bcnt.eq(nxt_len),
                             bursts.last_beat.eq(nxt_len == 1),
                             issued.eq(0), arrived.eq(0), beat.eq(0)]
                with m.If(job == 1):
                    fsm.next("W_FETCH")
                with m.Else():
                    fsm.next("W_BEAT")
        with fsm.state("W_FETCH"):
            # NL host reads of the beat's lanes (padding lanes read nothing)
            # ISSUED < NL (ISSUED is at most NL, a power of two): its top bit, not a compare
            with m.If(~issued[-1]):
                m.d.comb += [hp["addr"].eq(walk.wa), hp["re"].eq(walk.real)]
                m.d.sync += [beats.tags[0].eq(1), beats.rtags[0].eq(walk.real),
                             beats.otags[0].eq(walk.k), beats.offs[0].eq(walk.wo),
                             issued.eq(issued + 1)]
                walk.advance()
            with m.If(arrived == NL):
                fsm.next("W_BEAT")
        with fsm.state("W_BEAT"):
            first = bcnt == hdr_beats
            with m.Switch(job):
                with m.Case(0):
                    m.d.comb += self.wdata.eq(Mux(first, SNAPSHOT_BUSY, 0))
                with m.Case(1):
                    m.d.comb += self.wdata.eq(beat)
                with m.Case(2):
                    m.d.comb += self.wdata.eq(Mux(first, Cat(self.seq, self.steps_total), 0))
                with m.Case(3):
                    m.d.comb += self.wdata.eq(wr.tr_data.word_select(widx, W)
                                              if trace_beats > 1 else wr.tr_data[:W])
            m.d.comb += [self.wvalid.eq(1), self.wlast.eq(bursts.last_beat),
                         self.wstrb.eq((1 << nb) - 1)]
            with m.If(job == 3):
                m.d.comb += self.wstrb.eq(wr.tr_strb.word_select(widx, nb)
                                          if trace_beats > 1 else wr.tr_strb[:nb])
            with m.If(self.wready):
                m.d.sync += [bcnt.eq(bcnt - 1), bursts.last_beat.eq(bcnt == 2),
                             issued.eq(0), arrived.eq(0), beat.eq(0)]
                with m.If(job == 3):
                    m.d.sync += widx.eq(widx + 1)
                with m.If(bursts.last_beat):
                    fsm.next("W_B")
                with m.Elif(job == 1):
                    fsm.next("W_FETCH")

    def _end_states(self, m, fsm, bursts, beats, wr):
        """A write burst's end (W_B): B, then the next burst or the snapshot's next part
        (the image, then the header); a job's end (DONE)."""
        cfg = self._config
        nb = cfg.storage_width // 8
        total_words = weight_bytes(cfg) // nb
        hdr_beats = HEADER_BYTES // nb
        addr, left, nxt_len, job = bursts.addr, bursts.left, bursts.nxt_len, beats.job
        with fsm.state("W_B"):
            with m.If(self.bvalid):
                with m.If(bursts.left_nz):
                    fsm.next("W_AW")
                with m.Elif(~job[1]):
                    # job 0 (busy header) then the image, job 1 (the image) then the header
                    image = ~job[0]
                    m.d.sync += [job.eq(job + 1),
                                 left.eq(Mux(image, total_words, hdr_beats)),
                                 addr.eq(wr.part),
                                 nxt_len.eq(Mux(image,
                                                _slot_first_len(cfg, self.seq[0], HEADER_BYTES,
                                                                total_words),
                                                _slot_first_len(cfg, self.seq[0], 0,
                                                                hdr_beats)))]
                    fsm.next("W_AW")
                with m.Else():
                    fsm.next("DONE")
        with fsm.state("DONE"):
            m.d.comb += self.done.eq(1)
            fsm.next("IDLE")

    def _gather(self, m, beats):
        """The fetched lanes into the snapshot's beat (padding lanes stay 0)."""
        LB = 8 * lane_bytes(self._config)
        w = self._config.learner.numerics.width
        NL = self._config.storage_width // LB
        tl, fl = beats.tags[-1], beats.offs[-1]
        # the lanes' write enables decoded one stage ahead (the read's tags one cycle before
        # its data): a flip-flop per lane, not a decoder, before the beat's multiplexers
        lane_we = Signal(NL, name="io_lane_we")
        m.d.sync += lane_we.eq(Mux(beats.tags[-2] & beats.rtags[-2], 1 << beats.otags[-2], 0))
        with m.If(tl):
            m.d.sync += beats.arrived.eq(beats.arrived + 1)
        val = self.host.rdata.bit_select(fl, w).as_signed()
        for i in range(NL):
            with m.If(lane_we[i]):
                m.d.sync += beats.beat.word_select(i, LB).eq(val)


def _first_len(cfg, offset, words):
    """The first burst's length of a job at ``offset`` bytes from BASE (4 KiB aligned): a
    constant, the cycle model's split."""
    return burst_split(offset, words, cfg)[0]


def _slot_first_len(cfg, seq0, offset, words):
    """:func:`_first_len` at ``offset`` bytes into the snapshot slot ``seq0``."""
    return Mux(seq0, _first_len(cfg, region_base(cfg, "snap1") + offset, words),
               _first_len(cfg, region_base(cfg, "snap0") + offset, words))


@dataclass(frozen=True)
class _Walk:
    """The weight walker: the lane of the beat (``k``), whether it is the beat's last
    (``last_lane``, a register), whether it holds a weight
    (``real``), the statements that restart it, ``advance()`` (the next lane's statements,
    added where it is called), the host word address and bit offset of the lane's element of
    ``w<l>`` (``wa``, ``wo``) and ``tw<l>`` (``ta``, ``to``)."""
    k: Signal
    last_lane: Signal
    real: Signal
    reset: list
    advance: object
    wa: Value
    wo: Value
    ta: Value
    to: Value


@dataclass(frozen=True)
class _Bursts:
    """The next burst's byte address, the job's words left, the burst's beats left, the next
    burst's length (a register), and the flags ``bcnt == 1`` (exact), ``bcnt != 0`` and
    ``left != 0`` (one cycle late)."""
    addr: Signal
    left: Signal
    bcnt: Signal
    nxt_len: Signal
    last_beat: Signal
    bcnt_nz: Signal
    left_nz: Signal


@dataclass(frozen=True)
class _Beats:
    """The beat register, LOAD's lane phase (``w<l>`` then ``tw<l>``), the write job (0 busy
    header, 1 weights, 2 header, 3 trace entry), the host reads' tags (valid, real lane,
    lane, bit offset; ``[-1]`` is the read whose data is on the port), the lanes issued and
    arrived."""
    beat: Signal
    phase: Signal
    job: Signal
    tags: list
    otags: list
    offs: list
    rtags: list
    issued: Signal
    arrived: Signal


@dataclass(frozen=True)
class _Writes:
    """The trace entry's data and byte strobes shifted to the entry's place, its beat index,
    the first byte address of a starting job and of the snapshot's next part (registers)."""
    tr_data: Signal
    tr_strb: Signal
    widx: Signal
    start: Signal
    part: Signal


class _OneHot:
    """A state machine whose states are one-hot flip-flops (the first state's set at reset):
    ``state(name)`` opens a state's statements, ``next(name)`` moves to a state (the
    ``next`` of a state must exclude each other), ``finish()`` adds the flags' logic: a flag
    is set by a transition into its state and cleared by one out of it, two levels of logic
    from flip-flops where a chain of ``m.next`` would make a priority chain."""

    def __init__(self, m, name, states):
        self._m = m
        self._name = name
        self._flags = {s: Signal(name=f"{name}_{s.lower()}", init=i == 0)
                       for i, s in enumerate(states)}
        self._moves = []            # (from, to, taken)
        self._in = None

    def __getitem__(self, state):
        return self._flags[state]

    @contextmanager
    def state(self, state):
        with self._m.If(self._flags[state]):
            self._in = state
            yield
            self._in = None

    def next(self, state):
        assert state in self._flags and self._in is not None
        taken = Signal(name=f"{self._name}_{self._in.lower()}_to_{state.lower()}")
        self._m.d.comb += taken.eq(1)
        self._moves.append((self._in, state, taken))

    def finish(self):
        for s, f in self._flags.items():
            enter = [t for a, b, t in self._moves if b == s and a != s]
            leave = [t for a, b, t in self._moves if a == s and b != s]
            self._m.d.sync += f.eq(Cat(*enter, Const(0, 1)).any()
                                   | (f & ~Cat(*leave, Const(0, 1)).any()))
