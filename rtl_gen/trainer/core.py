"""The fused trainer's core in gateware, sequential: the loop of :class:`sw.trainer.golden.
TrainerCore` around :class:`~rtl_gen.trainer.replay.TrainerReplay`,
:class:`~rtl_gen.trainer.gather.RecordGather`,
:class:`~rtl_gen.trainer.learner_adapter.LearnerAdapter` and
:class:`~rtl_gen.learner.core.LearnerCore`, with the storage's LOAD, snapshot and trace
traffic on one AXI4 master."""

from contextlib import contextmanager
from dataclasses import dataclass

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from sw.trainer.spec import COUNT_BITS, TrainerConfig, trainer_register_map

from ..learner.core import FLAG_FIELDS, LearnerCore
from ..shell.signatures import ArgsSignature, RunControlSignature, StatusSignature
from ..stream import RegisterSlice
from .gather import RecordGather
from .learner_adapter import LearnerAdapter
from .replay import ReplayCmd, TrainerReplay
from .storage_io import StorageIO

__all__ = ["TrainerCore"]

_MASK = (1 << COUNT_BITS) - 1


def _log2(n):
    return n.bit_length() - 1


@dataclass
class _Counters:
    """The sequencer's counters, ``busy``, ``ERROR`` and flags (:meth:`TrainerCore._counters`):
    the launch's, the storage's (reset by CLEAR) and the trace period's Σ|td|."""
    steps_done: Signal
    steps_total: Signal
    sampled: Signal
    snap_seq: Signal
    trace_count: Signal
    since_snap: Signal
    since_trace: Signal
    trace_sum: Signal
    trace_n: Signal
    sync_count: Signal
    cycles: Signal
    err: Signal
    stopped: Signal
    lflag: Signal
    busy: Signal


@dataclass
class _Conditions:
    """What the sequencer's states decide on (:meth:`TrainerCore._conditions`): registered;
    ``final`` when the snapshot in progress ends the launch."""
    at_producer: Signal
    snap_due: Signal
    trace_due: Signal
    snap_last: Signal
    trace_last: Signal
    sync_due: Signal
    steps_reached: Signal
    final_snap: Signal
    tree_empty: Signal
    final: Signal
    refused: Signal


class TrainerCore(wiring.Component):
    """The trainer core, sequential (no overlap of a step's replay side with the previous
    learner step).

    A launch (``ctrl.start`` while idle; the arguments latched): BATCH_SIZE outside
    1..max_batch ends it with ERROR 1, a BASE not 4 KiB aligned with ERROR 3; else CLEAR
    (the tree, the queue, the counters, the target-sync count; the PRNG seeded), then LOAD
    (the load region's weight image into the learner's ``w<l>`` and ``tw<l>``), then steps.
    A step: BOUNDARY with PRODUCER; the launch ends if STOP is set (STATUS.STOPPED,
    ``stop_clear`` pulses), STEPS steps are done, or the
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
        The launch arguments (latched at the start) and PRODUCER (read at every boundary).
    stop : ``In(1)``
        STOP (read at every boundary).
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
        self.storage_io = StorageIO(config)
        super().__init__({
            "ctrl": In(RunControlSignature(error_bits=2)),
            "args": In(ArgsSignature(regmap)),
            "status": Out(StatusSignature(regmap)),
            "stop": In(1),
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

    @property
    def prefix(self) -> str:
        """Prefix of the AXI4 master's flat ports (what a shell passes through)."""
        return "m_axi_gmem"

    def axi(self, name):
        return getattr(self, f"m_axi_gmem_{name}")

    # -----------------------------------------------------------------------------------------
    def elaborate(self, platform):
        m = Module()
        m.submodules.replay = self.replay
        m.submodules.gather = self.gather
        m.submodules.adapter = self.adapter
        m.submodules.learner = self.learner
        m.submodules.storage_io = self.storage_io
        self._connect_blocks(m)
        base = Signal(64)
        self._bind_bus(m, base)
        self._sequencer(m, base)
        return m

    def _connect_blocks(self, m):
        """The loop's data path: replay slots to the gather engine, records and IS weights
        to the learner adapter, the adapter on the learner, TD errors back to the replay."""
        rp, ga, ad, ln = self.replay, self.gather, self.adapter, self.learner
        wiring.connect(m, ad.learner_ctrl, ln.ctrl)
        wiring.connect(m, ad.learner_args, ln.args)
        wiring.connect(m, ga.rec, ad.rec)
        wiring.connect(m, rp.weight, ad.weight)
        wiring.connect(m, ad.td, rp.td)
        # the slots through a register slice: the replay side's handshake (its state, the
        # tree's response) and the gather's (its outstanding count, ARREADY) meet at flip-flops
        m.submodules.slots = slots = RegisterSlice(len(ga.idx.payload))
        m.d.comb += [slots.i.payload.eq(rp.sample.payload.slot),
                     slots.i.valid.eq(rp.sample.valid), rp.sample.ready.eq(slots.i.ready)]
        wiring.connect(m, slots.o, ga.idx)

    def _bind_bus(self, m, base):
        """The AXI4 master (AR/R: the gather engine, or StorageIO during LOAD; AW/W/B:
        StorageIO) and the learner's host port (the adapter while it runs, else
        StorageIO)."""
        ga, ad, ln, io = self.gather, self.adapter, self.learner, self.storage_io
        W = self._config.storage_width
        m.d.comb += [ga.base.eq(base), io.base.eq(base)]
        # -- the storage traffic (LOAD, snapshots, trace) -----------------------------------
        for n in ("awaddr", "awlen", "awvalid", "wdata", "wstrb", "wlast", "wvalid",
                  "bready"):
            m.d.comb += self.axi(n).eq(getattr(io, n))
        for n in ("awready", "wready", "bvalid"):
            m.d.comb += getattr(io, n).eq(self.axi(n))
        m.d.comb += [self.axi("awid").eq(0), self.axi("awsize").eq(_log2(W // 8)),
                     self.axi("awburst").eq(1), io.rdata.eq(self.axi("rdata")),
                     io.arready.eq(self.axi("arready")), io.rvalid.eq(self.axi("rvalid"))]

        # -- the learner's host port: the adapter's or the storage traffic's, ORed: both
        # drive it from registers that hold zeros while they do not access it, and the
        # sequencer never runs them at once (no select from a state decoder)
        for name in ("addr", "re", "we", "wdata"):
            m.d.comb += getattr(ln.host, name).eq(getattr(ad.host, name)
                                                  | getattr(io.host, name))
        m.d.comb += [ad.host.rdata.eq(ln.host.rdata), io.host.rdata.eq(ln.host.rdata)]

        # -- the AXI master: AR/R to the gather engine or to LOAD ---------------------------
        for n in ("araddr", "arlen", "arvalid"):
            m.d.comb += self.axi(n).eq(Mux(io.reading, getattr(io, n),
                                           getattr(ga, f"g_{n}")))
        m.d.comb += [self.axi("arid").eq(Mux(io.reading, 0, ga.g_arid)),
                     self.axi("arsize").eq(Mux(io.reading, _log2(W // 8), ga.g_arsize)),
                     self.axi("arburst").eq(Mux(io.reading, 1, ga.g_arburst))]
        m.d.comb += [self.axi("rready").eq(Mux(io.reading, io.rready, ga.g_rready)),
                     ga.g_arready.eq(self.axi("arready") & ~io.reading),
                     ga.g_rvalid.eq(self.axi("rvalid") & ~io.reading)]
        for n in ("rid", "rdata", "rresp", "rlast"):
            m.d.comb += getattr(ga, f"g_{n}").eq(self.axi(n))

    def _sequencer(self, m, base):
        """The launch and step sequence, the latched arguments, the counters and flags: the
        steps below, in this order (the order of the signals and statements in the
        netlist); the states in the order of their flags."""
        L = self._latched_args()
        c = self._counters(m)
        self._trace_sum(m, c)
        k = self._conditions(m, L, c)
        # the states one-hot: a state's logic (its transitions, the replay side's command,
        # the starts) starts at its own flip-flop, not at a decode of the state number
        fsm = _OneHot(m, "trainer", [
            "IDLE", "CLEAR", "CLEAR_WAIT", "LOAD", "LOAD_WAIT",
            "BOUNDARY", "BOUNDARY_WAIT", "DECIDE",
            "SAMPLE", "LEARN", "SAMPLE_WAIT", "TD", "TD_WAIT",
            "TRACE", "TRACE_WAIT", "SNAP", "FINAL", "SNAP_WAIT", "END"])
        self._launch_states(m, fsm, L, c, k, base)
        self._boundary_states(m, fsm, L, c, k)
        self._step_states(m, fsm, L, c, k)
        self._write_states(m, fsm, c, k)
        self._storage_words(m, c)

    def _latched_args(self):
        """The launch arguments' registers (``arg_<name>``), latched at the start, by
        name."""
        a = self.args
        return {n: Signal(len(getattr(a, n)), name=f"arg_{n}") for n in (
            "cmd", "steps", "batch_size", "lr", "gamma", "alpha", "beta", "eps",
            "sync_period", "snapshot_period", "trace_period", "seed")}

    def _counters(self, m):
        """The counters, ``busy``, ``ERROR`` and the flags (:class:`_Counters`) onto
        ``status`` and ``ctrl``; ``cycles`` counting while busy, the learner's overflow
        flags gathered at each learner step's end."""
        ln = self.learner
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
        st, rp = self.status, self.replay
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
        return _Counters(steps_done=steps_done, steps_total=steps_total, sampled=sampled,
                         snap_seq=snap_seq, trace_count=trace_count, since_snap=since_snap,
                         since_trace=since_trace, trace_sum=trace_sum, trace_n=trace_n,
                         sync_count=sync_count, cycles=cycles, err=err, stopped=stopped,
                         lflag=lflag, busy=busy)

    def _trace_sum(self, m, c):
        """Σ|td| of the trace period, saturating, and its count; |td| registered first (the
        sum is read two or more cycles after the step's last TD error)."""
        ad = self.adapter
        mag = Signal(len(ad.td.payload), name="td_mag")
        mag_v = Signal(name="td_mag_valid")
        td = ad.td.payload
        m.d.sync += [mag.eq(Mux(td < 0, -td, td)), mag_v.eq(ad.td.valid & ad.td.ready)]
        with m.If(mag_v):
            tot = Signal(33)
            m.d.comb += tot.eq(c.trace_sum + mag)
            m.d.sync += [c.trace_sum.eq(Mux(tot[32], _MASK, tot[:32])),
                         c.trace_n.eq(c.trace_n + 1)]

    def _conditions(self, m, L, c):
        """What the states decide on (:class:`_Conditions`): PRODUCER reached, the periods'
        dues, the steps reached, the final snapshot, the empty tree."""
        rp, a = self.replay, self.args
        # PRODUCER == CONSUMED, registered every cycle: CONSUMED changes with the replay
        # side's done, the cycle before DECIDE reads it (an INSERT launch's end)
        at_producer = Signal()
        m.d.sync += at_producer.eq(a.producer == rp.consumed)
        # due after this step (TD_WAIT's increments): since + 1 >= period, registered there
        snap_due = Signal()
        trace_due = Signal()
        snap_last, trace_last = Signal(32, name="snap_last"), Signal(32, name="trace_last")
        m.d.sync += [snap_last.eq(L["snapshot_period"] - 1),
                     trace_last.eq(L["trace_period"] - 1)]
        # registered every cycle: their inputs change only in states two or more cycles
        # before the states that read them (sync_count at LEARN, steps_done and since_snap
        # at TD_WAIT, SNAP_WAIT and IDLE), so the registers are exact where they are read
        sync_due = Signal()
        # SYNC_PERIOD - 1 registered: no adder before the compare
        sync_last = Signal.like(L["sync_period"], name="sync_last")
        m.d.sync += [sync_last.eq(L["sync_period"] - 1),
                     sync_due.eq((L["sync_period"] != 0) & (c.sync_count >= sync_last))]
        steps_reached = Signal()
        m.d.sync += steps_reached.eq((L["steps"] != 0) & (c.steps_done >= L["steps"]))
        # in two stages (read three or more cycles after steps_done or since_snap changed)
        final_snap = Signal()
        stepped, unsnapped = Signal(), Signal()
        m.d.sync += [stepped.eq(c.steps_done != 0), unsnapped.eq(c.since_snap != 0),
                     final_snap.eq(stepped & unsnapped)]
        tree_empty = Signal()           # the root settled before the replay's done
        m.d.sync += tree_empty.eq(rp.total == 0)
        final = Signal()              # the snapshot in progress ends the launch
        refused = Signal()            # the launch's BATCH_SIZE or BASE is refused
        return _Conditions(at_producer=at_producer, snap_due=snap_due, trace_due=trace_due,
                           snap_last=snap_last, trace_last=trace_last, sync_due=sync_due,
                           steps_reached=steps_reached, final_snap=final_snap,
                           tree_empty=tree_empty, final=final, refused=refused)

    # The states, in groups; each group's states in the order of their flags.
    def _launch_states(self, m, fsm, L, c, k, base):
        """IDLE (the start: the arguments latched, BATCH_SIZE and BASE checked), CLEAR and
        LOAD with their waits. A refused launch's first state (CLEAR, LOAD or BOUNDARY, by
        CMD as for any launch) is its END: the checks set ``refused`` and ERROR, not the
        next state's flags."""
        cfg, rp, io, a = self._config, self.replay, self.storage_io, self.args
        rc = rp.cmd.payload
        with fsm.state("IDLE"):
            with m.If(self.ctrl.start):
                m.d.comb += self.ctrl.ready.eq(1)
                m.d.sync += [L[n].eq(getattr(a, n)) for n in L]
                m.d.sync += [base.eq(Cat(a.base_lo, a.base_hi)), c.busy.eq(1),
                             c.cycles.eq(0), c.err.eq(0), c.stopped.eq(0), c.lflag.eq(0),
                             c.steps_done.eq(0)]
                m.d.comb += rp.clear_flags.eq(1)
                bad_batch = (a.batch_size == 0) | (a.batch_size > cfg.max_batch)
                bad_base = a.base_lo[:12] != 0          # BASE not 4 KiB aligned
                m.d.sync += [k.refused.eq(bad_batch | bad_base),
                             c.err.eq(Mux(bad_batch, 1, Mux(bad_base, 3, 0)))]
                with m.If(a.cmd[0]):
                    fsm.next("CLEAR")
                with m.Elif(a.cmd[1]):
                    fsm.next("LOAD")
                with m.Else():
                    fsm.next("BOUNDARY")
        with fsm.state("CLEAR"):
            with m.If(k.refused):
                self._end(m, fsm, c)
            with m.Else():
                m.d.comb += [rp.cmd.valid.eq(1), rc.op.eq(ReplayCmd.CLEAR),
                             rc.word.eq(L["seed"])]
                with m.If(rp.cmd.ready):
                    m.d.sync += [c.steps_total.eq(0), c.sampled.eq(0), c.snap_seq.eq(0),
                                 c.trace_count.eq(0), c.since_snap.eq(0),
                                 c.since_trace.eq(0), c.trace_sum.eq(0), c.trace_n.eq(0),
                                 c.sync_count.eq(0)]
                    fsm.next("CLEAR_WAIT")
        with fsm.state("CLEAR_WAIT"):
            with m.If(rp.done):
                with m.If(L["cmd"][1]):
                    fsm.next("LOAD")
                with m.Else():
                    fsm.next("BOUNDARY")
        with fsm.state("LOAD"):
            with m.If(k.refused):
                self._end(m, fsm, c)
            with m.Else():
                m.d.comb += io.load.eq(1)
                fsm.next("LOAD_WAIT")
        with fsm.state("LOAD_WAIT"):
            with m.If(io.done):
                fsm.next("BOUNDARY")

    def _boundary_states(self, m, fsm, L, c, k):
        """BOUNDARY with PRODUCER, its wait, and DECIDE: an INSERT launch's next boundary
        or end; STOP, STEPS reached or an empty tree to FINAL; else a step."""
        rp = self.replay
        rc = rp.cmd.payload
        with fsm.state("BOUNDARY"):
            with m.If(k.refused):
                self._end(m, fsm, c)
            with m.Else():
                m.d.comb += [rp.cmd.valid.eq(1), rc.op.eq(ReplayCmd.BOUNDARY),
                             rc.word.eq(self.args.producer)]
                with m.If(rp.cmd.ready):
                    fsm.next("BOUNDARY_WAIT")
        with fsm.state("BOUNDARY_WAIT"):
            with m.If(rp.done):
                fsm.next("DECIDE")
        with fsm.state("DECIDE"):
            with m.If(L["cmd"][2]):
                with m.If(k.at_producer):
                    fsm.next("END")
                with m.Else():
                    fsm.next("BOUNDARY")
            with m.Elif(self.stop):
                m.d.comb += self.stop_clear.eq(1)
                m.d.sync += c.stopped.eq(1)
                fsm.next("FINAL")
            with m.Elif(k.steps_reached):
                fsm.next("FINAL")
            with m.Elif(k.tree_empty):
                m.d.sync += c.err.eq(2)
                fsm.next("FINAL")
            with m.Else():
                fsm.next("SAMPLE")

    def _step_states(self, m, fsm, L, c, k):
        """A step: SAMPLE(B, β), LEARN (the adapter's command, the target sync when due),
        SAMPLE_WAIT, TD(α, ε) and TD_WAIT (the counters, the periods' dues)."""
        rp, ad = self.replay, self.adapter
        rc = rp.cmd.payload
        B = L["batch_size"]
        with fsm.state("SAMPLE"):
            m.d.comb += [rp.cmd.valid.eq(1), rc.op.eq(ReplayCmd.SAMPLE), rc.count.eq(B),
                         rc.coef.eq(L["beta"])]
            with m.If(rp.cmd.ready):
                m.d.sync += c.sampled.eq(c.sampled + B)
                fsm.next("LEARN")
        with fsm.state("LEARN"):
            p = ad.cmd.payload
            m.d.comb += [ad.cmd.valid.eq(1), p.batch.eq(B), p.lr.eq(L["lr"]),
                         p.gamma.eq(L["gamma"]), p.sync.eq(k.sync_due)]
            with m.If(ad.cmd.ready):
                m.d.sync += c.sync_count.eq(Mux(k.sync_due, 0,
                                                Mux(c.sync_count == 0xFFFF, c.sync_count,
                                                    c.sync_count + 1)))
                fsm.next("SAMPLE_WAIT")
        with fsm.state("SAMPLE_WAIT"):
            with m.If(rp.done):
                fsm.next("TD")
        with fsm.state("TD"):
            m.d.comb += [rp.cmd.valid.eq(1), rc.op.eq(ReplayCmd.TD),
                         rc.coef.eq(L["alpha"]), rc.eps.eq(L["eps"])]
            with m.If(rp.cmd.ready):
                fsm.next("TD_WAIT")
        with fsm.state("TD_WAIT"):
            with m.If(ad.done):
                m.d.sync += [c.steps_total.eq(c.steps_total + 1),
                             c.steps_done.eq(c.steps_done + 1),
                             c.since_snap.eq(c.since_snap + 1),
                             c.since_trace.eq(c.since_trace + 1),
                             k.snap_due.eq((L["snapshot_period"] != 0)
                                           & (c.since_snap >= k.snap_last)),
                             k.trace_due.eq((L["trace_period"] != 0)
                                            & (c.since_trace >= k.trace_last))]
                fsm.next("TRACE")

    def _write_states(self, m, fsm, c, k):
        """The storage writes after a step or at the launch's end: TRACE and SNAP when due,
        FINAL (the launch's last snapshot unless its last step wrote one), their waits,
        and END."""
        io = self.storage_io
        with fsm.state("TRACE"):
            with m.If(k.trace_due):
                m.d.comb += io.trace.eq(1)
                fsm.next("TRACE_WAIT")
            with m.Else():
                fsm.next("SNAP")
        with fsm.state("TRACE_WAIT"):
            with m.If(io.done):
                m.d.sync += [c.trace_count.eq(c.trace_count + 1), c.since_trace.eq(0),
                             c.trace_sum.eq(0), c.trace_n.eq(0)]
                fsm.next("SNAP")
        with fsm.state("SNAP"):
            with m.If(k.snap_due):
                m.d.comb += io.snapshot.eq(1)
                m.d.sync += k.final.eq(0)
                fsm.next("SNAP_WAIT")
            with m.Else():
                fsm.next("BOUNDARY")
        with fsm.state("FINAL"):
            with m.If(k.final_snap):
                m.d.comb += io.snapshot.eq(1)
                m.d.sync += k.final.eq(1)
                fsm.next("SNAP_WAIT")
            with m.Else():
                fsm.next("END")
        with fsm.state("SNAP_WAIT"):
            with m.If(io.done):
                m.d.sync += [c.snap_seq.eq(c.snap_seq + 1), c.since_snap.eq(0)]
                with m.If(k.final):
                    fsm.next("END")
                with m.Else():
                    fsm.next("BOUNDARY")
        with fsm.state("END"):
            self._end(m, fsm, c)

    def _end(self, m, fsm, c):
        """A launch's end: ``done``, not busy, to IDLE."""
        m.d.comb += self.ctrl.done.eq(1)
        m.d.sync += c.busy.eq(0)
        fsm.next("IDLE")

    def _storage_words(self, m, c):
        """What StorageIO writes: the next snapshot's sequence number and the trace entry's
        words."""
        io, rp = self.storage_io, self.replay
        m.d.comb += [io.seq.eq(c.snap_seq + 1), io.steps_total.eq(c.steps_total),
                     io.consumed.eq(rp.consumed), io.trace_sum.eq(c.trace_sum),
                     io.trace_n.eq(c.trace_n), io.trace_index.eq(c.trace_count)]


class _OneHot:
    """The sequencer's states as one-hot flip-flops (the first state's set at reset):
    ``state(name)`` opens a state's statements, ``next(name)`` inside them clears that
    state's flag and sets the next state's."""

    def __init__(self, m, name, states):
        self._m = m
        self._flags = {s: Signal(name=f"{name}_{s.lower()}", init=i == 0)
                       for i, s in enumerate(states)}
        self._cur = None

    def __getitem__(self, state):
        return self._flags[state]

    @contextmanager
    def state(self, state):
        self._cur = state
        with self._m.If(self._flags[state]):
            yield
        self._cur = None

    def next(self, state):
        assert self._cur is not None and state in self._flags
        self._m.d.sync += [self._flags[self._cur].eq(0), self._flags[state].eq(1)]
