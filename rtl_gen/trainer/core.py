"""The fused trainer's core in gateware, sequential: the loop of :class:`sw.trainer.golden.
TrainerCore` around :class:`~rtl_gen.trainer.replay.TrainerReplay`,
:class:`~rtl_gen.trainer.gather.RecordGather`,
:class:`~rtl_gen.trainer.learner_adapter.LearnerAdapter` and
:class:`~rtl_gen.learner.core.LearnerCore`, with the storage's LOAD, snapshot and trace
traffic on one AXI4 master."""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from sw.shell.spec import HOST_READ_LATENCY
from sw.trainer.layout import (HEADER_BYTES, SNAPSHOT_BUSY, TRACE_BYTES, lane_bytes,
                               region_base, weight_offsets, weight_bytes)
from sw.trainer.spec import COUNT_BITS, TrainerConfig, trainer_register_map

from ..learner.core import FLAG_FIELDS, LearnerCore
from ..shell.signatures import ArgsSignature, RunControlSignature, StatusSignature
from .gather import RecordGather
from .learner_adapter import LearnerAdapter, element_addr
from .replay import ReplayCmd, TrainerReplay

__all__ = ["TrainerCore"]

_MAX_BURST = 256
_PAGE = 4096
_MASK = (1 << COUNT_BITS) - 1


def _log2(n):
    return n.bit_length() - 1


class TrainerCore(wiring.Component):
    """The trainer core, sequential (no overlap of a step's replay side with the previous
    learner step).

    A launch (``ctrl.start`` while idle; the arguments latched): BATCH_SIZE outside
    1..max_batch ends it with ERROR 1; else CLEAR (the tree, the queue, the counters, the
    target-sync count; the PRNG seeded), then LOAD (the load region's weight image into the
    learner's ``w<l>`` and ``tw<l>``), then steps. A step: BOUNDARY with PRODUCER; the launch
    ends if STOP is set (STATUS.STOPPED, ``stop_clear`` pulses), STEPS steps are done, or the
    tree is empty (ERROR 2); INSERT launches repeat BOUNDARY until PRODUCER is reached. Else
    SAMPLE(B, β): the slots through the gather engine, the records and IS weights into the
    learner adapter, a learner step (target sync per SYNC_PERIOD, the golden's
    ``TargetSync``), the TD errors back into TD(α, ε); then the counters, a trace entry and a
    weight snapshot when due. A launch that ran a step ends with a snapshot unless its last
    step wrote one. ``ctrl.cycles`` counts the launch's cycles
    (:func:`sw.trainer.schedule.sequential_launch_cycles`).

    Parameters
    ----------
    config : TrainerConfig

    Members
    -------
    ctrl : ``In(RunControlSignature(error_bits=2))``
    args : ``In(ArgsSignature(trainer_register_map(config)))``
        The launch arguments (latched at the start), PRODUCER and STOP (read at every
        boundary).
    status : ``Out(StatusSignature(trainer_register_map(config)))``
        The sticky flags and the counters.
    stop_clear : ``Out(1)``
        One cycle when a boundary took STOP (the register's clear).
    m_axi_gmem_* : AXI4 master (read and write), ``storage_width`` data bits, 64-bit
        addresses, one ID.

    Raises
    ------
    TypeError
        ``config`` is not a :class:`~sw.trainer.spec.TrainerConfig`.
    """

    def __init__(self, config):
        if not isinstance(config, TrainerConfig):
            raise TypeError(f"config must be a TrainerConfig, not {config!r}")
        self._config = config
        regmap = trainer_register_map(config)
        W = config.storage_width
        p = "m_axi_gmem"
        self.replay = TrainerReplay(config)
        self.gather = RecordGather(config, prefix="g")
        self.adapter = LearnerAdapter(config)
        self.learner = LearnerCore(config.learner)
        super().__init__({
            "ctrl": In(RunControlSignature(error_bits=2)),
            "args": In(ArgsSignature(regmap)),
            "status": Out(StatusSignature(regmap)),
            "stop_clear": Out(1),
            f"{p}_arid": Out(1), f"{p}_araddr": Out(64), f"{p}_arlen": Out(8),
            f"{p}_arsize": Out(3), f"{p}_arburst": Out(2), f"{p}_arvalid": Out(1),
            f"{p}_arready": In(1),
            f"{p}_rid": In(1), f"{p}_rdata": In(W), f"{p}_rresp": In(2), f"{p}_rlast": In(1),
            f"{p}_rvalid": In(1), f"{p}_rready": Out(1),
            f"{p}_awid": Out(1), f"{p}_awaddr": Out(64), f"{p}_awlen": Out(8),
            f"{p}_awsize": Out(3), f"{p}_awburst": Out(2), f"{p}_awvalid": Out(1),
            f"{p}_awready": In(1),
            f"{p}_wdata": Out(W), f"{p}_wstrb": Out(W // 8), f"{p}_wlast": Out(1),
            f"{p}_wvalid": Out(1), f"{p}_wready": In(1),
            f"{p}_bid": In(1), f"{p}_bresp": In(2), f"{p}_bvalid": In(1), f"{p}_bready": Out(1),
        })

    @property
    def config(self) -> TrainerConfig:
        return self._config

    def axi(self, name):
        return getattr(self, f"m_axi_gmem_{name}")

    # -----------------------------------------------------------------------------------------
    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        m.submodules.replay = rp = self.replay
        m.submodules.gather = ga = self.gather
        m.submodules.adapter = ad = self.adapter
        m.submodules.learner = ln = self.learner
        wiring.connect(m, ad.learner_ctrl, ln.ctrl)
        wiring.connect(m, ad.learner_args, ln.args)
        wiring.connect(m, ga.rec, ad.rec)
        wiring.connect(m, rp.weight, ad.weight)
        wiring.connect(m, ad.td, rp.td)
        m.d.comb += [ga.idx.payload.eq(rp.sample.payload.slot),
                     ga.idx.valid.eq(rp.sample.valid), rp.sample.ready.eq(ga.idx.ready)]

        a = self.args
        # -- latched arguments --------------------------------------------------------------
        L = {n: Signal(len(getattr(a, n)), name=f"arg_{n}") for n in (
            "cmd", "steps", "batch_size", "lr", "gamma", "alpha", "beta", "eps",
            "sync_period", "snapshot_period", "trace_period", "seed")}
        base = Signal(64)
        m.d.comb += ga.base.eq(base)

        # -- counters -----------------------------------------------------------------------
        steps_done, steps_total, sampled = Signal(32), Signal(32), Signal(32)
        snap_seq, trace_count = Signal(32), Signal(32)
        since_snap, since_trace = Signal(32), Signal(32)
        trace_sum, trace_n = Signal(32), Signal(32)
        sync_count = Signal(16)
        cycles = Signal(32)
        err = Signal(2)
        stopped = Signal()
        lflag = Signal()
        busy = Signal()
        st = self.status
        m.d.comb += [st.consumed.eq(rp.consumed), st.steps_done.eq(steps_done),
                     st.steps_total.eq(steps_total), st.sampled.eq(sampled),
                     st.snapshot_seq.eq(snap_seq), st.trace_count.eq(trace_count),
                     st.status_learner_overflow.eq(lflag),
                     st.status_priority_saturated.eq(rp.saturated),
                     st.status_weight_underflow.eq(rp.underflow),
                     st.status_overrun.eq(rp.overrun), st.status_stopped.eq(stopped),
                     self.ctrl.busy.eq(busy), self.ctrl.cycles.eq(cycles),
                     self.ctrl.error.eq(err)]
        with m.If(busy):
            m.d.sync += cycles.eq(cycles + 1)
        lflags = Cat(getattr(ln.status, f) for f in FLAG_FIELDS.values())
        with m.If(ln.ctrl.done):
            m.d.sync += lflag.eq(lflag | lflags.any())
        # Σ|td| of the trace period, saturating
        with m.If(ad.td.valid & ad.td.ready):
            td = ad.td.payload
            mag = Mux(td < 0, -td, td)
            tot = Signal(33)
            m.d.comb += tot.eq(trace_sum + mag)
            m.d.sync += [trace_sum.eq(Mux(tot[32], _MASK, tot[:32])), trace_n.eq(trace_n + 1)]

        # -- the storage traffic (LOAD, snapshots, trace) -----------------------------------
        io = _StorageIO(self, m, base)

        # -- the learner's host port: the adapter's, or the storage traffic's ---------------
        for name in ("addr", "re", "we", "wdata"):
            m.d.comb += getattr(ln.host, name).eq(
                Mux(ad.busy, getattr(ad.host, name), getattr(io.host, name)))
        m.d.comb += [ad.host.rdata.eq(ln.host.rdata), io.host.rdata.eq(ln.host.rdata)]

        # -- the AXI master: AR/R to the gather engine or to LOAD ---------------------------
        for n in ("arid", "araddr", "arlen", "arsize", "arburst", "arvalid"):
            m.d.comb += self.axi(n).eq(Mux(io.reading, getattr(io, n),
                                           getattr(ga, f"g_{n}")))
        m.d.comb += [self.axi("rready").eq(Mux(io.reading, io.rready, ga.g_rready)),
                     ga.g_arready.eq(self.axi("arready") & ~io.reading),
                     ga.g_rvalid.eq(self.axi("rvalid") & ~io.reading)]
        for n in ("rid", "rdata", "rresp", "rlast"):
            m.d.comb += getattr(ga, f"g_{n}").eq(self.axi(n))

        # -- the sequencer ------------------------------------------------------------------
        rc = rp.cmd.payload
        B = L["batch_size"]
        ahead = Signal(32)
        m.d.comb += ahead.eq(a.producer - rp.consumed)
        snap_due = Signal()
        trace_due = Signal()
        m.d.comb += [snap_due.eq((L["snapshot_period"] != 0)
                                 & (since_snap >= L["snapshot_period"])),
                     trace_due.eq((L["trace_period"] != 0)
                                  & (since_trace >= L["trace_period"]))]
        sync_due = Signal()
        m.d.comb += sync_due.eq((L["sync_period"] != 0)
                                & (sync_count + 1 >= L["sync_period"]))
        final = Signal()              # the snapshot in progress ends the launch
        with m.FSM(name="trainer"):
            with m.State("IDLE"):
                with m.If(self.ctrl.start):
                    m.d.comb += self.ctrl.ready.eq(1)
                    m.d.sync += [L[n].eq(getattr(a, n)) for n in L]
                    m.d.sync += [base.eq(Cat(a.base_lo, a.base_hi)), busy.eq(1),
                                 cycles.eq(0), err.eq(0), stopped.eq(0), lflag.eq(0),
                                 steps_done.eq(0)]
                    m.d.comb += rp.clear_flags.eq(1)
                    with m.If((a.batch_size == 0) | (a.batch_size > cfg.max_batch)):
                        m.d.sync += err.eq(1)
                        m.next = "END"
                    with m.Elif(a.cmd[0]):
                        m.next = "CLEAR"
                    with m.Elif(a.cmd[1]):
                        m.next = "LOAD"
                    with m.Else():
                        m.next = "BOUNDARY"
            with m.State("CLEAR"):
                m.d.comb += [rp.cmd.valid.eq(1), rc.op.eq(ReplayCmd.CLEAR),
                             rc.word.eq(L["seed"])]
                with m.If(rp.cmd.ready):
                    m.d.sync += [steps_total.eq(0), sampled.eq(0), snap_seq.eq(0),
                                 trace_count.eq(0), since_snap.eq(0), since_trace.eq(0),
                                 trace_sum.eq(0), trace_n.eq(0), sync_count.eq(0)]
                    m.next = "CLEAR_WAIT"
            with m.State("CLEAR_WAIT"):
                with m.If(rp.done):
                    with m.If(L["cmd"][1]):
                        m.next = "LOAD"
                    with m.Else():
                        m.next = "BOUNDARY"
            with m.State("LOAD"):
                m.d.comb += io.load.eq(1)
                m.next = "LOAD_WAIT"
            with m.State("LOAD_WAIT"):
                with m.If(io.done):
                    m.next = "BOUNDARY"
            with m.State("BOUNDARY"):
                m.d.comb += [rp.cmd.valid.eq(1), rc.op.eq(ReplayCmd.BOUNDARY),
                             rc.word.eq(a.producer)]
                with m.If(rp.cmd.ready):
                    m.next = "BOUNDARY_WAIT"
            with m.State("BOUNDARY_WAIT"):
                with m.If(rp.done):
                    m.next = "DECIDE"
            with m.State("DECIDE"):
                with m.If(L["cmd"][2]):
                    with m.If(ahead == 0):
                        m.next = "END"
                    with m.Else():
                        m.next = "BOUNDARY"
                with m.Elif(a.stop):
                    m.d.comb += self.stop_clear.eq(1)
                    m.d.sync += stopped.eq(1)
                    m.next = "FINAL"
                with m.Elif((L["steps"] != 0) & (steps_done >= L["steps"])):
                    m.next = "FINAL"
                with m.Elif(rp.total == 0):
                    m.d.sync += err.eq(2)
                    m.next = "FINAL"
                with m.Else():
                    m.next = "SAMPLE"
            with m.State("SAMPLE"):
                m.d.comb += [rp.cmd.valid.eq(1), rc.op.eq(ReplayCmd.SAMPLE), rc.count.eq(B),
                             rc.coef.eq(L["beta"])]
                with m.If(rp.cmd.ready):
                    m.d.sync += sampled.eq(sampled + B)
                    m.next = "LEARN"
            with m.State("LEARN"):
                p = ad.cmd.payload
                m.d.comb += [ad.cmd.valid.eq(1), p.batch.eq(B), p.lr.eq(L["lr"]),
                             p.gamma.eq(L["gamma"]), p.sync.eq(sync_due)]
                with m.If(ad.cmd.ready):
                    m.d.sync += sync_count.eq(Mux(sync_due, 0, Mux(sync_count == 0xFFFF,
                                                                  sync_count,
                                                                  sync_count + 1)))
                    m.next = "SAMPLE_WAIT"
            with m.State("SAMPLE_WAIT"):
                with m.If(rp.done):
                    m.next = "TD"
            with m.State("TD"):
                m.d.comb += [rp.cmd.valid.eq(1), rc.op.eq(ReplayCmd.TD),
                             rc.coef.eq(L["alpha"]), rc.eps.eq(L["eps"])]
                with m.If(rp.cmd.ready):
                    m.next = "TD_WAIT"
            with m.State("TD_WAIT"):
                with m.If(ad.done):
                    m.d.sync += [steps_total.eq(steps_total + 1), steps_done.eq(steps_done + 1),
                                 since_snap.eq(since_snap + 1), since_trace.eq(since_trace + 1)]
                    m.next = "TRACE"
            with m.State("TRACE"):
                with m.If(trace_due):
                    m.d.comb += io.trace.eq(1)
                    m.next = "TRACE_WAIT"
                with m.Else():
                    m.next = "SNAP"
            with m.State("TRACE_WAIT"):
                with m.If(io.done):
                    m.d.sync += [trace_count.eq(trace_count + 1), since_trace.eq(0),
                                 trace_sum.eq(0), trace_n.eq(0)]
                    m.next = "SNAP"
            with m.State("SNAP"):
                with m.If(snap_due):
                    m.d.comb += io.snapshot.eq(1)
                    m.d.sync += final.eq(0)
                    m.next = "SNAP_WAIT"
                with m.Else():
                    m.next = "BOUNDARY"
            with m.State("FINAL"):
                with m.If((steps_done != 0) & (since_snap != 0)):
                    m.d.comb += io.snapshot.eq(1)
                    m.d.sync += final.eq(1)
                    m.next = "SNAP_WAIT"
                with m.Else():
                    m.next = "END"
            with m.State("SNAP_WAIT"):
                with m.If(io.done):
                    m.d.sync += [snap_seq.eq(snap_seq + 1), since_snap.eq(0)]
                    with m.If(final):
                        m.next = "END"
                    with m.Else():
                        m.next = "BOUNDARY"
            with m.State("END"):
                m.d.comb += self.ctrl.done.eq(1)
                m.d.sync += busy.eq(0)
                m.next = "IDLE"

        m.d.comb += [io.seq.eq(snap_seq + 1), io.steps_total.eq(steps_total),
                     io.consumed.eq(rp.consumed), io.trace_sum.eq(trace_sum),
                     io.trace_n.eq(trace_n), io.trace_index.eq(trace_count)]
        return m


class _StorageIO:
    """The storage traffic beside the loop, built into the core's module: LOAD (AR/R bursts
    of the load region, each weight lane into ``w<l>`` and ``tw<l>``), a snapshot (AW/W/B:
    the BUSY header, the weights read from ``w<l>``, the header) and a trace entry. One job
    at a time (``load``, ``snapshot``, ``trace``: one-cycle starts while idle), ``done`` one
    cycle at its end."""

    def __init__(self, core, m, base):
        cfg = core.config
        lc = cfg.learner
        W = cfg.storage_width
        nb = W // 8
        LB = 8 * lane_bytes(cfg)
        NL = W // LB
        w = lc.numerics.width
        lat = HOST_READ_LATENCY
        host_sig = core.learner.host.signature.flip()
        self.host = host_sig.create(path=("io_host",))
        for n in ("load", "snapshot", "trace", "done", "reading", "rready", "arvalid"):
            setattr(self, n, Signal(name=f"io_{n}"))
        self.arid, self.arburst = Const(0, 1), Const(1, 2)
        self.araddr, self.arlen = Signal(64, name="io_araddr"), Signal(8, name="io_arlen")
        self.arsize = Const(_log2(nb), 3)
        self.seq = Signal(32, name="io_seq")
        self.steps_total = Signal(32, name="io_steps_total")
        self.consumed = Signal(32, name="io_consumed")
        self.trace_sum = Signal(32, name="io_trace_sum")
        self.trace_n = Signal(32, name="io_trace_n")
        self.trace_index = Signal(32, name="io_trace_index")
        ax = core.axi

        # -- the weight walker: image lanes in order, their (layer, row, col) --------------
        shapes = lc.numerics.weight_shapes()
        nlay = len(shapes)
        words = [(o2 - o1) // nb for o1, o2 in
                 zip(weight_offsets(cfg), list(weight_offsets(cfg)[1:]) + [weight_bytes(cfg)])]
        total_words = weight_bytes(cfg) // nb
        lay = Signal(range(nlay), name="io_layer")
        row = Signal(range(max(r for r, _ in shapes) + 1), name="io_row")
        col = Signal(range(max(c for _, c in shapes) + 1), name="io_col")
        k = Signal(range(NL), name="io_lane")
        lw = Signal(range(max(words) + 1), name="io_layer_word")
        rows_a = Array(Const(r, len(row)) for r, _ in shapes)
        cols_a = Array(Const(c, len(col)) for _, c in shapes)
        words_a = Array(Const(n, len(lw)) for n in words)
        real = Signal(name="io_real")
        m.d.comb += real.eq(row < rows_a[lay])
        walk_reset = [lay.eq(0), row.eq(0), col.eq(0), k.eq(0), lw.eq(0)]

        def advance():
            """The next lane of the image."""
            last_col = col == cols_a[lay] - 1
            with m.If(real):
                m.d.sync += [col.eq(Mux(last_col, 0, col + 1)),
                             row.eq(Mux(last_col, row + 1, row))]
            with m.If(k == NL - 1):
                m.d.sync += k.eq(0)
                with m.If(lw == words_a[lay] - 1):
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

        # -- bursts: at most 256 beats, never across 4 KiB -----------------------------------
        addr = Signal(64, name="io_addr")          # next burst's byte address
        left = Signal(range(total_words + HEADER_BYTES // nb + 2), name="io_left")
        bcnt = Signal(9, name="io_bcnt")
        to_page = Signal(range(_PAGE // nb + 1), name="io_to_page")
        m.d.comb += to_page.eq((_PAGE - addr[:12]) >> _log2(nb))
        nxt_len = Signal(9, name="io_next_len")
        m.d.comb += nxt_len.eq(Mux((left < to_page) & (left <= _MAX_BURST), left,
                                   Mux(to_page <= _MAX_BURST, to_page, _MAX_BURST)))

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
        slot = Signal(64, name="io_slot")
        snap0 = region_base(cfg, "snap0")
        snap1 = region_base(cfg, "snap1")
        m.d.comb += slot.eq(base + Mux(self.seq[0], snap1, snap0))
        hdr_beats = HEADER_BYTES // nb
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

        m.d.comb += [ax("awid").eq(0), ax("awsize").eq(_log2(nb)), ax("awburst").eq(1),
                     ax("bready").eq(1)]

        with m.FSM(name="storage_io"):
            with m.State("IDLE"):
                with m.If(self.load):
                    m.d.sync += [addr.eq(base + region_base(cfg, "load")),
                                 left.eq(total_words), *walk_reset]
                    m.next = "L_AR"
                with m.If(self.snapshot):
                    m.d.sync += [addr.eq(slot), left.eq(hdr_beats), job.eq(0), *walk_reset]
                    m.next = "W_AW"
                with m.If(self.trace):
                    m.d.sync += [addr.eq(tr_addr & ~(nb - 1)), left.eq(trace_beats),
                                 job.eq(3), widx.eq(0)]
                    m.next = "W_AW"
            # -- LOAD: read bursts, two host writes per real lane ----------------------------
            with m.State("L_AR"):
                m.d.comb += [self.reading.eq(1), self.arvalid.eq(1), self.araddr.eq(addr),
                             self.arlen.eq(nxt_len - 1)]
                with m.If(ax("arready")):
                    m.d.sync += [addr.eq(addr + (nxt_len << _log2(nb))),
                                 left.eq(left - nxt_len), bcnt.eq(nxt_len)]
                    m.next = "L_R"
            with m.State("L_R"):
                m.d.comb += [self.reading.eq(1), self.rready.eq(1)]
                with m.If(ax("rvalid")):
                    m.d.sync += [beat.eq(ax("rdata")), bcnt.eq(bcnt - 1), phase.eq(0)]
                    m.next = "L_LANE"
            with m.State("L_LANE"):
                m.d.comb += self.reading.eq(1)
                v = beat.word_select(k, LB)[:w]
                o = Mux(phase, to, wo)
                with m.If(real):
                    m.d.comb += [self.host.addr.eq(Mux(phase, ta, wa)),
                                 self.host.we.eq(((1 << (w // 8)) - 1) << (o >> 3)),
                                 self.host.wdata.eq(v << o)]
                last_lane = k == NL - 1
                with m.If(real & ~phase):
                    m.d.sync += phase.eq(1)
                with m.Else():
                    m.d.sync += phase.eq(0)
                    advance()
                    with m.If(last_lane):
                        with m.If(bcnt != 0):
                            m.next = "L_R"
                        with m.Elif(left != 0):
                            m.next = "L_AR"
                        with m.Else():
                            m.next = "DONE"
            # -- writes: AW, then beats, then B ------------------------------------------
            with m.State("W_AW"):
                m.d.comb += [ax("awvalid").eq(1), ax("awaddr").eq(addr),
                             ax("awlen").eq(nxt_len - 1)]
                with m.If(ax("awready")):
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
                    m.d.comb += [self.host.addr.eq(wa), self.host.re.eq(real)]
                    m.d.sync += [tags[0].eq(1), rtags[0].eq(real), otags[0].eq(k),
                                 offs[0].eq(wo),
                                 issued.eq(issued + 1)]
                    advance()
                with m.If(arrived == NL):
                    m.next = "W_BEAT"
            with m.State("W_BEAT"):
                first = bcnt == hdr_beats
                with m.Switch(job):
                    with m.Case(0):
                        m.d.comb += ax("wdata").eq(Mux(first, SNAPSHOT_BUSY, 0))
                    with m.Case(1):
                        m.d.comb += ax("wdata").eq(beat)
                    with m.Case(2):
                        m.d.comb += ax("wdata").eq(Mux(first, Cat(self.seq, self.steps_total),
                                                       0))
                    with m.Case(3):
                        m.d.comb += ax("wdata").eq(tr_data.word_select(widx, W)
                                                   if trace_beats > 1 else tr_data[:W])
                m.d.comb += [ax("wvalid").eq(1), ax("wlast").eq(bcnt == 1),
                             ax("wstrb").eq((1 << nb) - 1)]
                with m.If(job == 3):
                    m.d.comb += ax("wstrb").eq(tr_strb.word_select(widx, nb)
                                               if trace_beats > 1 else tr_strb[:nb])
                with m.If(ax("wready")):
                    m.d.sync += [bcnt.eq(bcnt - 1), issued.eq(0), arrived.eq(0),
                                 beat.eq(0)]
                    with m.If(job == 3):
                        m.d.sync += widx.eq(widx + 1)
                    with m.If(bcnt == 1):
                        m.next = "W_B"
                    with m.Elif(job == 1):
                        m.next = "W_FETCH"
            with m.State("W_B"):
                with m.If(ax("bvalid")):
                    with m.If(left != 0):
                        m.next = "W_AW"
                    with m.Elif(job == 0):
                        m.d.sync += [job.eq(1), left.eq(total_words),
                                     addr.eq(slot + HEADER_BYTES)]
                        m.next = "W_AW"
                    with m.Elif(job == 1):
                        m.d.sync += [job.eq(2), left.eq(hdr_beats), addr.eq(slot)]
                        m.next = "W_AW"
                    with m.Else():
                        m.next = "DONE"
            with m.State("DONE"):
                m.d.comb += self.done.eq(1)
                m.next = "IDLE"

        # the fetched lanes into the beat (padding lanes stay 0)
        tl, rl, ol, fl = tags[-1], rtags[-1], otags[-1], offs[-1]
        with m.If(tl):
            m.d.sync += arrived.eq(arrived + 1)
            with m.If(rl):
                val = self.host.rdata.bit_select(fl, w).as_signed()
                m.d.sync += beat.word_select(ol, LB).eq(val)
