"""The trainer core's storage traffic beside its loop, in gateware: LOAD (the load region's
weight image into the learner's ``w<l>`` and ``tw<l>``), weight snapshots and trace entries
(:mod:`sw.trainer.layout`), on the AR/R and AW/W/B channels of the core's AXI4 master and
the learner's host port."""

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
        The storage's byte address (4 KiB aligned), held during a job.
    seq, steps_total, consumed, trace_sum, trace_n, trace_index : ``In(32)``
        The snapshot's sequence number and the header and trace words, held during a job.
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
        walk = self._walker(m)
        bursts = self._bursts(m)
        beats = self._beats(m)
        wr = self._write_words(m)
        go = self._starts(m)
        with m.FSM(name="storage_io"):
            self._idle_state(m, go, walk, bursts, beats, wr)
            self._load_states(m, hp, walk, bursts, beats)
            self._write_states(m, hp, walk, bursts, beats, wr)
            self._end_states(m, bursts, beats, wr)
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
        lw = Signal(range(max(words) + 1), name="io_layer_word")
        rows_a = Array(Const(r, len(row)) for r, _ in shapes)
        last_col_a = Array(Const(c - 1, len(col)) for _, c in shapes)
        last_word_a = Array(Const(n - 1, len(lw)) for n in words)
        real = Signal(name="io_real")
        m.d.comb += real.eq(row < rows_a[lay])
        walk_reset = [lay.eq(0), row.eq(0), col.eq(0), k.eq(0), lw.eq(0)]

        def advance():
            """The next lane of the image."""
            last_col = col == last_col_a[lay]
            with m.If(real):
                m.d.sync += [col.eq(Mux(last_col, 0, col + 1)),
                             row.eq(Mux(last_col, row + 1, row))]
            with m.If(k == NL - 1):
                m.d.sync += k.eq(0)
                with m.If(lw == last_word_a[lay]):
                    m.d.sync += [lw.eq(0), lay.eq(lay + 1), row.eq(0), col.eq(0)]
                with m.Else():
                    m.d.sync += lw.eq(lw + 1)
            with m.Else():
                m.d.sync += k.eq(k + 1)

        def addr_of(prefix):
            addrs = [element_addr(lc, f"{prefix}{l}", row, col) for l in range(nlay)]
            return (Array(x for x, _ in addrs)[lay], Array(o for _, o in addrs)[lay])

        wa, wo = addr_of("w")
        ta, to = addr_of("tw")
        return _Walk(k=k, real=real, reset=walk_reset, advance=advance, wa=wa, wo=wo, ta=ta,
                     to=to)

    def _bursts(self, m):
        """The burst registers: the next burst's address and length (at most 256 beats,
        never across 4 KiB), the words left of the job, the beats left of the burst
        (:class:`_Bursts`)."""
        cfg = self._config
        nb = cfg.storage_width // 8
        total_words = weight_bytes(cfg) // nb
        addr = Signal(64, name="io_addr")          # next burst's byte address
        left = Signal(range(total_words + HEADER_BYTES // nb + 2), name="io_left")
        bcnt = Signal(9, name="io_bcnt")
        to_page = Signal(range(_PAGE // nb + 1), name="io_to_page")
        m.d.comb += to_page.eq((_PAGE - addr[:12]) >> _log2(nb))

        def burst_len(to_page, left):
            return Mux((left < to_page) & (left <= _MAX_BURST), left,
                       Mux(to_page <= _MAX_BURST, to_page, _MAX_BURST))

        # the next burst's length, registered: recomputed every cycle from ADDR and LEFT
        # (an address phase comes two or more cycles after the handshake that changed
        # them), or loaded with the constant of a job's first burst where a job sets them
        nxt_len = Signal(9, name="io_next_len")
        m.d.sync += nxt_len.eq(burst_len(to_page, left))
        return _Bursts(addr=addr, left=left, bcnt=bcnt, nxt_len=nxt_len)

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

    def _write_words(self, m):
        """What the writes need beside the image: the snapshot slot's address, the trace
        entry's address, data and byte strobes and its beat index; B always ready
        (:class:`_Writes`)."""
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

        m.d.comb += self.bready.eq(1)
        return _Writes(slot=slot, snap0=snap0, snap1=snap1, tr_addr=tr_addr, tr_data=tr_data,
                       tr_strb=tr_strb, widx=widx)

    def _starts(self, m):
        """The job starts registered: ``(go_load, go_snap, go_trace)``."""
        # the starts registered: the job's first addresses (64-bit sums) load from stable
        # registers, not from the core's sequencer through them (one cycle per job)
        go_load, go_snap, go_trace = (Signal(name=f"io_go_{n}")
                                      for n in ("load", "snapshot", "trace"))
        m.d.sync += [go_load.eq(self.load), go_snap.eq(self.snapshot),
                     go_trace.eq(self.trace)]
        return go_load, go_snap, go_trace

    def _idle_state(self, m, go, walk, bursts, beats, wr):
        """State IDLE: a job's start (``go``: LOAD, snapshot, trace), its first burst's
        address and length, its words."""
        cfg = self._config
        base = self.base
        nb = cfg.storage_width // 8
        total_words = weight_bytes(cfg) // nb
        hdr_beats = HEADER_BYTES // nb
        trace_beats = max(1, TRACE_BYTES // nb)
        addr, left, nxt_len = bursts.addr, bursts.left, bursts.nxt_len
        snap0, snap1 = wr.snap0, wr.snap1
        go_load, go_snap, go_trace = go
        with m.State("IDLE"):
            with m.If(go_load):
                load = region_base(cfg, "load")
                m.d.sync += [self.reading.eq(1), addr.eq(base + load), left.eq(total_words),
                             *walk.reset, nxt_len.eq(_first_len(cfg, load, total_words))]
                m.next = "L_AR"
            with m.If(go_snap):
                m.d.sync += [addr.eq(wr.slot), left.eq(hdr_beats), beats.job.eq(0),
                             *walk.reset,
                             nxt_len.eq(Mux(self.seq[0], _first_len(cfg, snap1, hdr_beats),
                                            _first_len(cfg, snap0, hdr_beats)))]
                m.next = "W_AW"
            with m.If(go_trace):
                # an entry never crosses 4 KiB: one burst of all its beats
                m.d.sync += [addr.eq(wr.tr_addr & ~(nb - 1)), left.eq(trace_beats),
                             beats.job.eq(3), wr.widx.eq(0), nxt_len.eq(trace_beats)]
                m.next = "W_AW"

    def _load_states(self, m, hp, walk, bursts, beats):
        """LOAD's states: read bursts (L_AR, L_R), then two host writes per real lane of
        each beat (L_LANE)."""
        cfg = self._config
        nb = cfg.storage_width // 8
        LB = 8 * lane_bytes(cfg)
        NL = cfg.storage_width // LB
        w = cfg.learner.numerics.width
        addr, left, bcnt, nxt_len = bursts.addr, bursts.left, bursts.bcnt, bursts.nxt_len
        beat, phase, k, real = beats.beat, beats.phase, walk.k, walk.real
        with m.State("L_AR"):
            m.d.comb += [self.arvalid.eq(1), self.araddr.eq(addr),
                         self.arlen.eq(nxt_len - 1)]
            with m.If(self.arready):
                m.d.sync += [addr.eq(addr + (nxt_len << _log2(nb))),
                             left.eq(left - nxt_len), bcnt.eq(nxt_len)]
                m.next = "L_R"
        with m.State("L_R"):
            m.d.comb += self.rready.eq(1)
            with m.If(self.rvalid):
                m.d.sync += [beat.eq(self.rdata), bcnt.eq(bcnt - 1), phase.eq(0)]
                m.next = "L_LANE"
        with m.State("L_LANE"):
            v = beat.word_select(k, LB)[:w]
            o = Mux(phase, walk.to, walk.wo)
            with m.If(real):
                m.d.comb += [hp["addr"].eq(Mux(phase, walk.ta, walk.wa)),
                             hp["we"].eq(((1 << (w // 8)) - 1) << (o >> 3)),
                             hp["wdata"].eq(v << o)]
            last_lane = k == NL - 1
            with m.If(real & ~phase):
                m.d.sync += phase.eq(1)
            with m.Else():
                m.d.sync += phase.eq(0)
                walk.advance()
                with m.If(last_lane):
                    with m.If(bcnt != 0):
                        m.next = "L_R"
                    with m.Elif(left != 0):
                        m.next = "L_AR"
                    with m.Else():
                        m.d.sync += self.reading.eq(0)
                        m.next = "DONE"

    def _write_states(self, m, hp, walk, bursts, beats, wr):
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
        with m.State("W_AW"):
            m.d.comb += [self.awvalid.eq(1), self.awaddr.eq(addr), self.awlen.eq(nxt_len - 1)]
            with m.If(self.awready):
                m.d.sync += [addr.eq(addr + (nxt_len << _log2(nb))),
                             left.eq(left - nxt_len), bcnt.eq(nxt_len),
                             issued.eq(0), arrived.eq(0), beat.eq(0)]
                with m.If(job == 1):
                    m.next = "W_FETCH"
                with m.Else():
                    m.next = "W_BEAT"
        with m.State("W_FETCH"):
            # NL host reads of the beat's lanes (padding lanes read nothing)
            with m.If(issued < NL):
                m.d.comb += [hp["addr"].eq(walk.wa), hp["re"].eq(walk.real)]
                m.d.sync += [beats.tags[0].eq(1), beats.rtags[0].eq(walk.real),
                             beats.otags[0].eq(walk.k), beats.offs[0].eq(walk.wo),
                             issued.eq(issued + 1)]
                walk.advance()
            with m.If(arrived == NL):
                m.next = "W_BEAT"
        with m.State("W_BEAT"):
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
            m.d.comb += [self.wvalid.eq(1), self.wlast.eq(bcnt == 1),
                         self.wstrb.eq((1 << nb) - 1)]
            with m.If(job == 3):
                m.d.comb += self.wstrb.eq(wr.tr_strb.word_select(widx, nb)
                                          if trace_beats > 1 else wr.tr_strb[:nb])
            with m.If(self.wready):
                m.d.sync += [bcnt.eq(bcnt - 1), issued.eq(0), arrived.eq(0), beat.eq(0)]
                with m.If(job == 3):
                    m.d.sync += widx.eq(widx + 1)
                with m.If(bcnt == 1):
                    m.next = "W_B"
                with m.Elif(job == 1):
                    m.next = "W_FETCH"

    def _end_states(self, m, bursts, beats, wr):
        """A write burst's end (W_B): B, then the next burst or the snapshot's next part
        (the image, then the header); a job's end (DONE)."""
        cfg = self._config
        nb = cfg.storage_width // 8
        total_words = weight_bytes(cfg) // nb
        hdr_beats = HEADER_BYTES // nb
        addr, left, nxt_len, job = bursts.addr, bursts.left, bursts.nxt_len, beats.job
        slot, snap0, snap1 = wr.slot, wr.snap0, wr.snap1
        with m.State("W_B"):
            with m.If(self.bvalid):
                with m.If(left != 0):
                    m.next = "W_AW"
                with m.Elif(job == 0):
                    m.d.sync += [job.eq(1), left.eq(total_words), addr.eq(slot + HEADER_BYTES),
                                 nxt_len.eq(Mux(self.seq[0],
                                                _first_len(cfg, snap1 + HEADER_BYTES,
                                                           total_words),
                                                _first_len(cfg, snap0 + HEADER_BYTES,
                                                           total_words)))]
                    m.next = "W_AW"
                with m.Elif(job == 1):
                    m.d.sync += [job.eq(2), left.eq(hdr_beats), addr.eq(slot),
                                 nxt_len.eq(Mux(self.seq[0], _first_len(cfg, snap1, hdr_beats),
                                                _first_len(cfg, snap0, hdr_beats)))]
                    m.next = "W_AW"
                with m.Else():
                    m.next = "DONE"
        with m.State("DONE"):
            m.d.comb += self.done.eq(1)
            m.next = "IDLE"

    def _gather(self, m, beats):
        """The fetched lanes into the snapshot's beat (padding lanes stay 0)."""
        LB = 8 * lane_bytes(self._config)
        w = self._config.learner.numerics.width
        tl, rl, ol, fl = beats.tags[-1], beats.rtags[-1], beats.otags[-1], beats.offs[-1]
        with m.If(tl):
            m.d.sync += beats.arrived.eq(beats.arrived + 1)
            with m.If(rl):
                val = self.host.rdata.bit_select(fl, w).as_signed()
                m.d.sync += beats.beat.word_select(ol, LB).eq(val)


def _first_len(cfg, offset, words):
    """The first burst's length of a job at ``offset`` bytes from BASE (4 KiB aligned): a
    constant, the cycle model's split."""
    return burst_split(offset, words, cfg)[0]


@dataclass(frozen=True)
class _Walk:
    """The weight walker: the lane of the beat (``k``), whether it holds a weight
    (``real``), the statements that restart it, ``advance()`` (the next lane's statements,
    added where it is called), the host word address and bit offset of the lane's element of
    ``w<l>`` (``wa``, ``wo``) and ``tw<l>`` (``ta``, ``to``)."""
    k: Signal
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
    burst's length (a register)."""
    addr: Signal
    left: Signal
    bcnt: Signal
    nxt_len: Signal


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
    """The snapshot slot's byte address (and the two slots' offsets), the trace entry's
    address, its data and byte strobes shifted to the entry's place, its beat index."""
    slot: Signal
    snap0: int
    snap1: int
    tr_addr: Signal
    tr_data: Signal
    tr_strb: Signal
    widx: Signal
