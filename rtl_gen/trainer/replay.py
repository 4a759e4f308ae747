"""The fused trainer's replay side in gateware: the sum tree, the step boundary (priority
write-back and the host's inserts), stratified sampling with IS weights and the new
priorities' queue, bit for bit as :meth:`sw.trainer.golden.TrainerCore.boundary`,
:meth:`~sw.trainer.golden.TrainerCore.sample` and
:meth:`~sw.trainer.golden.TrainerCore.queue_priorities`."""

from types import SimpleNamespace

from amaranth.hdl import Array, Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from sw.trainer.schedule import POWER_TABLES
from sw.trainer.schedule import (SETTLE, boundary_cycles, clear_cycles, read_cycles,
                                 sample_cycles, td_cycles)
from sw.trainer.spec import COUNT_BITS, TrainerConfig

from ..replay.layouts import SumTreeOp
from ..replay.sumtree import SumTree
from ..powers import PowerUnit
from .strata import FRACTION_LATENCY, StratifiedFractions
from .weights import WEIGHTS_TAIL, ISWeightUnit

__all__ = ["TrainerReplay", "ReplayCmd", "replay_command_layout", "clear_cycles",
           "boundary_cycles", "sample_cycles", "td_cycles", "read_cycles"]



class ReplayCmd(enum.Enum, shape=3):
    """Commands of :class:`TrainerReplay` (``cmd.payload.op``) and the fields they read.

    ==============  ==  ==============================================================
    name            #   fields
    ==============  ==  ==============================================================
    ``CLEAR``       0   ``word``: the PRNG seed (0: the default seed)
    ``BOUNDARY``    1   ``word``: PRODUCER
    ``SAMPLE``      2   ``count``: B (1..max_batch; other values do nothing), ``coef``: β
    ``TD``          3   ``coef``: α, ``eps``: ε; the B TD errors follow on ``td``
    ``READ``        4   ``word``: first slot, ``count``: leaves (debug: on ``sample``)
    ==============  ==  ==============================================================
    """
    CLEAR = 0
    BOUNDARY = 1
    SAMPLE = 2
    TD = 3
    READ = 4


def replay_command_layout(config: TrainerConfig) -> data.StructLayout:
    """The payload of :attr:`TrainerReplay.cmd`: ``op`` (:class:`ReplayCmd`), ``word`` (32
    bits), ``count`` (enough bits for ``max(max_batch, capacity)``), ``coef``
    (``coef_frac + 1`` bits, α or β) and ``eps`` (:attr:`~TrainerConfig.eps_format`)."""
    return data.StructLayout({
        "op": ReplayCmd,
        "word": unsigned(COUNT_BITS),
        "count": unsigned(max(config.max_batch, config.capacity).bit_length()),
        "coef": unsigned(config.coef_frac + 1),
        "eps": unsigned(config.eps_format.width),
    })


class _S(enum.Enum, shape=4):
    """States of the command sequencer (the bit of each in :class:`_States`)."""
    BOOT = 0
    IDLE = 1
    CLR_WAIT = 2
    CLR_RESET = 3
    CLR_SWEEP = 4
    B_START = 5
    B_WAIT = 6
    B_WB = 7
    B_INS = 8
    B_EVICT = 9
    B_SETTLE = 10
    S_START = 11
    S_RUN = 12
    R_RUN = 13
    T_WAIT = 14


class _States:
    """The command sequencer's state, one-hot: one flip-flop per :class:`_S` state.

    ``states[S]`` is the bit of S; ``go(a, b)`` leaves state a for b (the bit of a cleared,
    b's set), written in a's context. Each bit's next value thus depends only on the
    transitions into and out of its own state, not on a decode of the whole state."""

    def __init__(self):
        self.bits = Signal(len(_S), init=1 << _S.BOOT.value, name="state")

    def __getitem__(self, state):
        return self.bits[state.value]

    def go(self, frm, to):
        return [self.bits[frm.value].eq(0), self.bits[to.value].eq(1)]

    def go_either(self, frm, cond, a, b):
        """Leave ``frm`` for ``a`` if ``cond``, else for ``b``."""
        return [self.bits[frm.value].eq(0), self.bits[a.value].eq(cond),
                self.bits[b.value].eq(~cond)]


def _greater(value, bound):
    """``value > bound`` for a constant ``bound``; for a power of two, from the bits (LUTs
    that the mapper merges with what follows, not a carry chain)."""
    if bound > 0 and bound & (bound - 1) == 0:
        b = bound.bit_length() - 1
        return value[b + 1:].any() | (value[b] & value[:b].any())
    return value > bound


class TrainerReplay(wiring.Component):
    """The trainer's replay side: one command at a time on the sum tree, TD errors beside.

    Parameters
    ----------
    config : TrainerConfig
        The tree (``tree``: capacity N, ``latency`` L, ``target_bits`` X, the leaf and input
        formats), ``append_window`` W, ``delay`` D, ``max_batch``, the power unit, ``coef_frac``,
        ``eps_frac`` and the learner's activation and loss-weight formats.

    Members
    -------
    cmd : ``In(stream.Signature(replay_command_layout(config)))``
        Commands (:class:`ReplayCmd`); ``ready`` (a register) is high while no command runs.
    td : ``In(stream.Signature(signed(act_width + 1)))``
        The TD errors ``Q - y`` of a TD command, raw with ``act_frac`` fraction bits, in sample
        order; taken only while a TD batch is open (B of them, B of the last SAMPLE).
    sample : ``Out(stream.Signature(StructLayout({"slot": unsigned(index_width),
        "priority": unsigned(priority_width)})))``
        SAMPLE's leaves in sample order (the gather engine takes the slots); READ's leaves.
    weight : ``Out(stream.Signature(unsigned(loss_weight_width)))``
        SAMPLE's IS weights in sample order, after the last sample.
    clear_flags : ``In(1)``
        Clear the sticky flags (a launch's start; the golden core's ``begin``).
    consumed : ``Out(32)``
        CONSUMED, the records taken since CLEAR (mod 2**32).
    queued : ``Out(range(D + 2))``
        Batches in the queue (the golden core's ``len(pending)``; a TD counts from its
        handoff).
    total, max_priority : ``Out``
        The tree's root and running maximum; ``total`` holds every write of the commands done
        (``total == 0``: no step is possible, the golden's ``can_step``).
    saturated, underflow, overrun : ``Out(1)``
        Sticky: a written-back priority saturated to the leaf format (the tree's flag); an IS
        weight was 0; PRODUCER was more than W records ahead.
    busy, done : ``Out(1)``
        A command runs; ``done`` is high for one cycle, the first in which ``cmd.ready`` is
        high again.
    td_busy, td_done : ``Out(1)``
        A TD batch is open; ``td_done`` is high for one cycle after its last priority was
        queued.
    tree, strata, weights, power : attributes
        The :class:`~rtl_gen.replay.sumtree.SumTree`, the fractions, the IS-weight unit and
        the new priorities' :class:`~rtl_gen.powers.PowerUnit` (tests watch
        ``power.o``: one new priority per valid cycle, in order).

    Commands
    --------
    CLEAR
        Waits for an open TD batch, zeroes CONSUMED and empties the queue, RESETs the tree
        (every leaf 0, the running maximum 1.0; it waits for the tree's pipeline, then
        sweeps) and loads the PRNG seed (``word``; 0: the default seed). The flags stay.
    BOUNDARY
        If more than D batches are queued, the oldest is written back: UPDATE of each entry
        whose slot is outside the host's window ``(slot - CONSUMED) mod N < W``, in sample
        order (one cycle per entry, skipped ones too). Then ``k = min(PRODUCER - CONSUMED,
        W)`` (mod 2**32; more than W ahead sets ``overrun``): k UPDATEs of slots
        ``CONSUMED .. CONSUMED + k - 1`` (mod N) with the running maximum (the tree's
        register or a larger value just written back, whichever is larger), then k UPDATEs
        of 0 at those slots + W (mod N). CONSUMED += k. (UPDATE, not INSERT_MAX: the slots
        follow CONSUMED, also across its wrap at 2**32 when N is not a power of two.)
    SAMPLE
        B (``count``, 1..max_batch; any other value does nothing) SAMPLE fractions from
        :class:`~rtl_gen.trainer.strata.StratifiedFractions` (the trainer's xorshift32), the
        leaves to ``sample`` and their slots into the queue, the priorities through
        :class:`~rtl_gen.trainer.weights.ISWeightUnit` (β: ``coef``) to ``weight``;
        ``underflow`` if a weight is 0. If ``total`` is 0 it draws the B PRNG words (as the
        golden does) and outputs nothing.
    TD
        Hands α (``coef``) and ε (``eps``) to the TD engine once it is idle, which opens the
        batch of the last SAMPLE (it counts in ``queued`` from now on): each TD error
        becomes ``(|td|·2**(eps_frac - act_frac) + ε)**α`` (a
        :class:`~rtl_gen.powers.PowerUnit`, output saturated to the tree's input
        format) into the queue beside its slot. Other commands run meanwhile; a BOUNDARY
        whose write-back is the open batch (delay 0) waits for it, CLEAR too.
    READ
        ``count`` leaves from slot ``word`` on (mod N) to ``sample`` (debug).

    The commands keep the golden core's order: CLEAR; then per step BOUNDARY, SAMPLE, TD
    (its TD errors may still stream during the next step's BOUNDARY and SAMPLE). The queue
    holds D + 1 batches of ``max_batch`` entries, which that order never exceeds.

    Cycles
    ------
    From a command's transfer (cycle 0) to its ``done`` cycle, without back-pressure on
    ``sample`` and ``weight``; ``d = X`` if B differs from the previous SAMPLE's (the
    stratum width is divided anew, one bit per cycle), else 0:

    =========  ===========================================================================
    CLEAR      ``level_groups[-1] + 6`` (:func:`clear_cycles`; more if a TD batch is open
               or the tree still has operations in flight)
    BOUNDARY   ``w + [w > 0] + 2k + 10``: w entries written back (0 if none is due) and
               k records (:func:`boundary_cycles`); ``SETTLE`` = 7 of the 10 let the root
               take the last write
    SAMPLE     ``2B + d + L + 26`` (:func:`sample_cycles`): B fractions one per cycle, the
               tree's latency, the IS weights' 20-cycle tail, B weights; ``B + d + 7`` on an
               empty tree; 2 for a B out of range
    TD         2 to ``done`` (the handoff, when the engine is idle); ``B + 21`` to
               ``td_done`` (:func:`td_cycles`: ``B + TD_POWER_LATENCY + 4``) with the TD errors
               offered from the transfer on, taken in cycles 2 .. B + 1
    READ       ``n + L + 2`` for n leaves (:func:`read_cycles`), 2 for none
    =========  ===========================================================================

    A step of the trainer thus costs its replay side ``w + [w > 0] + 2k + 2B + d + L + 36``
    cycles for BOUNDARY and SAMPLE, one after the other; the TD batch's ``B + 21`` overlap
    the next step's BOUNDARY and SAMPLE when D >= 1.

    Raises
    ------
    TypeError
        ``config`` is not a :class:`~sw.trainer.spec.TrainerConfig`.
    """

    def __init__(self, config):
        if not isinstance(config, TrainerConfig):
            raise TypeError(f"config must be a TrainerConfig, not {config!r}")
        self._config = config
        tc, num = config.tree, config.learner.numerics
        act = num.act_format
        self._td_width = act.width + 1
        # |td| << (eps_frac - act_frac), plus eps: one bit more than the wider addend.
        self._u_width = max(act.width + 1 + config.eps_frac - act.frac,
                            config.eps_format.width) + 1
        self.tree = SumTree(tc)
        self.strata = StratifiedFractions(config)
        self.weights = ISWeightUnit(config)
        self.power = PowerUnit(config.power, in_width=self._u_width, in_frac=config.eps_frac,
                               p_width=config.coef_frac + 1, p_frac=config.coef_frac,
                               out_frac=tc.priority_frac, out_width=tc.input_width,
                               tables=POWER_TABLES)
        lw = num.loss_weight_format
        super().__init__({
            "cmd": In(stream.Signature(replay_command_layout(config))),
            "td": In(stream.Signature(signed(self._td_width))),
            "sample": Out(stream.Signature(data.StructLayout({
                "slot": unsigned(tc.index_width), "priority": unsigned(tc.priority_width)}))),
            "weight": Out(stream.Signature(unsigned(lw.width))),
            "clear_flags": In(1),
            "consumed": Out(COUNT_BITS),
            "queued": Out(range(config.delay + 2)),
            "total": Out(unsigned(tc.root_width)),
            "max_priority": Out(unsigned(tc.priority_width)),
            "saturated": Out(1),
            "underflow": Out(1),
            "overrun": Out(1),
            "busy": Out(1),
            "done": Out(1),
            "td_busy": Out(1),
            "td_done": Out(1),
        })

    @property
    def config(self) -> TrainerConfig:
        return self._config

    @property
    def td_width(self) -> int:
        """Bits of a TD error on :attr:`td` (signed): the activation format's and one more,
        the difference of two activations."""
        return self._td_width

    # -- gateware ---------------------------------------------------------------------------
    def elaborate(self, platform):
        m = Module()
        m.submodules.tree, m.submodules.strata = self.tree, self.strata
        m.submodules.weights, m.submodules.power = self.weights, self.power
        r = self._registers(m)
        self._tree_port(m, r)
        self._commands(m, r)
        self._clear(m, r)
        self._boundary(m, r)
        self._sample(m, r)
        self._read(m, r)
        self._td(m, r)
        self._tree_commands(m, r)
        return m

    def _registers(self, m):
        """The state shared by the commands: the sequencer, the counters, the queue."""
        cfg, tc = self._config, self._config.tree
        D, nmax = cfg.delay, cfg.max_batch

        r = SimpleNamespace()
        r.state = _States()
        r.cmod = Signal(range(tc.capacity), name="consumed_mod")   # CONSUMED mod capacity
        # A batch's place in the queue (at least one bit: no zero-width wires at delay 0).
        r.slot_shape = range(max(D + 1, 2))
        r.head = Signal(r.slot_shape, name="q_head")               # the oldest batch
        r.count = Signal(range(D + 2), name="q_count")             # batches queued
        r.nb = Array(Signal(range(nmax + 1), name=f"q_n{i}") for i in range(D + 1))
        r.last_slot = Signal(r.slot_shape, name="last_slot")       # the last SAMPLE's batch
        r.last_n = Signal(range(nmax + 1), name="last_n")
        r.jb = ceil_log2(nmax)
        depth = (D + 1) << r.jb
        m.submodules.q_slots = r.q_slots = Memory(shape=tc.index_width, depth=depth, init=[])
        m.submodules.q_prios = r.q_prios = Memory(shape=tc.input_width, depth=depth, init=[])
        r.word = Signal(COUNT_BITS, name="word")
        r.td_active = Signal()
        r.td_slot = Signal(r.slot_shape, name="td_slot")
        r.td_start = Signal()
        m.d.comb += [self.queued.eq(r.count), self.td_busy.eq(r.td_active)]
        m.d.sync += [self.done.eq(0), self.td_done.eq(0)]
        return r

    def _tree_port(self, m, r):
        """The tree's command register (``tc``): each command loads it while it is free
        (:meth:`_load` records the loads, :meth:`_tree_commands` builds the register)."""
        tree = self.tree
        r.loads = []
        r.tc = Signal.like(tree.cmd.payload, name="tc")
        r.tc_valid = Signal(name="tc_valid")
        r.tc_free = Signal(name="tc_free")
        m.d.comb += [
            tree.cmd.valid.eq(r.tc_valid), tree.cmd.payload.eq(r.tc),
            r.tc_free.eq(~r.tc_valid | tree.cmd.ready),
            tree.clear.eq(self.clear_flags),
            self.total.eq(tree.total), self.max_priority.eq(tree.max_priority),
            self.saturated.eq(tree.saturated),
            tree.rsp.ready.eq(1),                   # (overridden where responses are used)
        ]
        with m.If(self.clear_flags):
            m.d.sync += [self.underflow.eq(0), self.overrun.eq(0)]

    @staticmethod
    def _load(r, state, op, *, when=1, index=0, priority=0, target=0, valid=1):
        """In ``state``, load the tree's command register with ``op`` when it is free and
        ``when`` holds (one load per state)."""
        assert all(s is not state for s, *_ in r.loads)
        r.loads.append((state, when, op, index, priority, target, valid))

    def _tree_commands(self, m, r):
        """The command register's loads: each field selected by the state's bit alone (at
        most one is set), the clock enable from ``tc_free`` and the states' conditions, so
        the tree's ready and the conditions do not pass through the fields'
        multiplexers."""
        load = Signal(name="tc_load")
        m.d.comb += load.eq(r.tc_free & Cat(r.state[s] & w for s, w, *_ in r.loads).any())

        def pick(k):
            out = 0
            for entry in r.loads:
                out = Mux(r.state[entry[0]], entry[k], out)
            return out
        with m.If(r.tc_free):
            m.d.sync += r.tc_valid.eq(0)
        with m.If(load):
            m.d.sync += [r.tc_valid.eq(pick(6)), r.tc.op.eq(pick(2)), r.tc.index.eq(pick(3)),
                         r.tc.priority.eq(pick(4)), r.tc.target.eq(pick(5)),
                         r.tc.level.eq(0)]

    def _finish(self, m, r, frm):
        m.d.sync += [*r.state.go(frm, _S.IDLE), self.done.eq(1)]

    def _commands(self, m, r):
        """IDLE: take a command; BOOT: wait for the tree's clearing sweep after reset."""
        tree, cmd, cfg = self.tree, self.cmd, self._config
        p = cmd.payload
        m.d.comb += [
            cmd.ready.eq(r.state[_S.IDLE]),
            self.busy.eq(~r.state[_S.IDLE]),
        ]
        with m.If(r.state[_S.BOOT]):
            with m.If(~tree.busy):
                m.d.sync += r.state.go(_S.BOOT, _S.IDLE)
        r.n_s = Signal(range(cfg.max_batch + 1), name="sample_n")
        r.bad_s = Signal(name="sample_bad")
        r.n_s_last = Signal(range(cfg.max_batch + 1), name="sample_n_last")    # B - 1
        r.empty_s = Signal(name="sample_empty")
        r.beta = Signal(cfg.coef_frac + 1, name="beta")
        r.alpha = Signal(cfg.coef_frac + 1, name="alpha")
        r.eps = Signal(cfg.eps_format.width, name="eps")
        with m.If(cmd.valid & cmd.ready):
            m.d.sync += r.word.eq(p.word)
            with m.Switch(p.op):
                with m.Case(ReplayCmd.CLEAR):
                    m.d.sync += r.state.go(_S.IDLE, _S.CLR_WAIT)
                with m.Case(ReplayCmd.BOUNDARY):
                    m.d.sync += r.state.go(_S.IDLE, _S.B_START)
                with m.Case(ReplayCmd.SAMPLE):
                    m.d.sync += [
                        *r.state.go(_S.IDLE, _S.S_START), r.n_s.eq(p.count), r.beta.eq(p.coef),
                        r.n_s_last.eq(p.count - 1),
                        r.bad_s.eq((p.count == 0) | (p.count > cfg.max_batch)),
                        r.empty_s.eq(tree.total == 0),
                    ]
                with m.Case(ReplayCmd.TD):
                    m.d.sync += [*r.state.go(_S.IDLE, _S.T_WAIT), r.alpha.eq(p.coef),
                                 r.eps.eq(p.eps)]
                with m.Case(ReplayCmd.READ):
                    m.d.sync += r.state.go(_S.IDLE, _S.R_RUN)
                with m.Default():
                    m.d.sync += self.done.eq(1)

    def _clear(self, m, r):
        """CLEAR: wait for a TD in progress, RESET the tree (it waits for its pipeline, then
        sweeps), zero the counters and the queue, load the seed."""
        m.d.comb += self.strata.seed.eq(r.word)
        with m.If(r.state[_S.CLR_WAIT]):
            with m.If(~r.td_active):
                m.d.sync += [*r.state.go(_S.CLR_WAIT, _S.CLR_RESET), self.consumed.eq(0),

                             r.cmod.eq(0), r.head.eq(0), r.count.eq(0), r.last_n.eq(0),
                             r.last_slot.eq(0)]
        self._load(r, _S.CLR_RESET, SumTreeOp.RESET)
        with m.If(r.state[_S.CLR_RESET]):
            with m.If(r.tc_free):
                m.d.sync += r.state.go(_S.CLR_RESET, _S.CLR_SWEEP)
        with m.If(r.state[_S.CLR_SWEEP]):
            with m.If(~r.tc_valid & ~self.tree.busy):
                m.d.comb += self.strata.seed_load.eq(1)
                self._finish(m, r, _S.CLR_SWEEP)

    def _boundary(self, m, r):
        """BOUNDARY: the due write-back (outside the host's window), k inserts at the running
        maximum, k evictions, then the root settles."""
        cfg, tc, tree = self._config, self._config.tree, self.tree
        cap, W, D = tc.capacity, cfg.append_window, cfg.delay
        pw = tc.priority_width
        ahead = Signal(COUNT_BITS, name="ahead")
        # PRODUCER - CONSUMED from the command's word while IDLE (for a BOUNDARY), so that
        # B_START registers its tests and B_WAIT decides from flip-flops
        ahead_m1 = Signal(COUNT_BITS, name="ahead_m1")     # ahead - 1
        a_zero = Signal(name="ahead_zero")                 # ahead == 0
        a_one = Signal(name="ahead_one")                   # ahead == 1
        a_over = Signal(name="ahead_over")                 # ahead > W
        with m.If(r.state[_S.IDLE]):
            m.d.sync += ahead.eq(self.cmd.payload.word - self.consumed)
        k = Signal(range(W + 1), name="k")
        k_last = Signal(range(W + 1), name="k_last")        # k - 1 (k > 0 where read)
        k_zero = Signal(name="k_zero")
        k_one = Signal(name="k_one")                        # k == 1
        # the inserts (then the evictions) left after this one: a down-counter, so that
        # ``i_last`` is a compare of a register with a constant, not an increment and a
        # compare with k - 1
        left = Signal(range(W + 1), name="ins_left")
        i_last = Signal(name="i_last")                      # left == 0, registered
        pop = Signal(name="pop")
        wb_n = Signal(range(cfg.max_batch + 1), name="wb_n")
        j = Signal(range(cfg.max_batch + 1), name="wb_j")
        j_end = Signal(name="wb_j_end")                     # j == wb_n
        wb_last = Signal(range(cfg.max_batch), name="wb_last")   # wb_n - 1
        rv = Signal(name="wb_valid")
        wb_max = Signal(pw, name="wb_max")
        lo, hi = Signal(range(cap), name="win_lo"), Signal(range(cap + 1), name="win_hi")
        wrap = Signal(name="win_wrap")
        ins, ev = Signal(range(cap), name="ins_slot"), Signal(range(cap), name="ev_slot")
        wait = Signal(range(SETTLE + 1), name="settle")
        wait_end = Signal(name="settle_end")                # wait == 0, registered
        state = r.state

        def inc(slot):
            return Mux(slot == cap - 1, 0, slot + 1)

        slot_rd, prio_rd = r.q_slots.read_port(), r.q_prios.read_port()
        addr = Cat(j[:r.jb], r.head)
        m.d.comb += [slot_rd.addr.eq(addr), prio_rd.addr.eq(addr),
                     slot_rd.en.eq(r.tc_free), prio_rd.en.eq(r.tc_free)]
        # one register stage after the queue's block RAM (advancing with it, on tc_free):
        # the window test's comparisons are registered, the tree command and the running
        # maximum start at flip-flops
        slot = Signal.like(slot_rd.data, name="wb_slot")
        prio = Signal.like(prio_rd.data, name="wb_prio")
        rv2 = Signal(name="wb_valid2")
        ge_lo, lt_hi = Signal(name="wb_ge_lo"), Signal(name="wb_lt_hi")
        sat = Signal(pw, name="wb_sat")       # the priority saturated to the leaf format
        with m.If(r.tc_free):
            m.d.sync += [slot.eq(slot_rd.data), prio.eq(prio_rd.data), rv2.eq(rv),
                         ge_lo.eq(slot_rd.data >= lo), lt_hi.eq(slot_rd.data < hi),
                         sat.eq(Mux(prio_rd.data[pw:].any(), (1 << pw) - 1,
                                    prio_rd.data[:pw]))]
        inside = Mux(wrap, ge_lo | lt_hi, ge_lo & lt_hi)
        over = a_over                                   # more than W records ahead
        k_next = Mux(over, W, ahead)
        # k_next == 0 and == 1 (W >= 1), k_next - 1 and the compare with W from the flags
        # B_START registered
        one = ~a_zero if W == 1 else a_one
        k_less = Mux(over, W - 1, ahead_m1[:len(k_last)])
        mx = tree.max_priority
        ins_val = Mux(mx > wb_max, mx, wb_max)
        end = Signal(COUNT_BITS + 1, name="consumed_next")
        m.d.comb += end.eq(self.consumed + k)
        cmod_next = ins
        rest = (1 << COUNT_BITS) % cap           # 2**32 mod capacity: the slot jump at the wrap
        if rest:
            cmod_next = Mux(end[COUNT_BITS], Mux(ins >= rest, ins - rest, ins + (cap - rest)),
                            ins)
        with m.If(~state[_S.B_SETTLE]):
            m.d.sync += [wait.eq(SETTLE - 1), wait_end.eq(SETTLE == 1)]
        with m.If(state[_S.B_START]):
            h = r.cmod + W
            m.d.sync += [
                *state.go(_S.B_START, _S.B_WAIT), ahead_m1.eq(ahead - 1),
                a_zero.eq(ahead == 0), a_one.eq(ahead == 1), a_over.eq(_greater(ahead, W)),
                lo.eq(r.cmod), wrap.eq(h > cap), hi.eq(Mux(h > cap, h - cap, h)),
                ins.eq(r.cmod), ev.eq(Mux(h >= cap, h - cap, h)), pop.eq(r.count > D),
                wb_n.eq(r.nb[r.head]), wb_max.eq(0), j.eq(0), rv.eq(0), rv2.eq(0),
                j_end.eq(r.nb[r.head] == 0), wb_last.eq(r.nb[r.head] - 1),
            ]
        with m.If(state[_S.B_WAIT]):
            m.d.sync += [k.eq(k_next), k_last.eq(k_less), k_zero.eq(a_zero),
                         k_one.eq(one)]
            with m.If(over):
                m.d.sync += self.overrun.eq(1)
            with m.If(pop & r.td_active & (r.td_slot == r.head)):
                pass                            # the batch's priorities are on their way
            with m.Elif(pop):
                m.d.sync += state.go(_S.B_WAIT, _S.B_WB)
            with m.Else():                      # k_next == 0: no inserts
                m.d.sync += state.go_either(_S.B_WAIT, a_zero, _S.B_SETTLE, _S.B_INS)
        self._load(r, _S.B_WB, SumTreeOp.UPDATE, when=rv2 & ~inside, index=slot, priority=prio)
        with m.If(state[_S.B_WB]):
            with m.If(r.tc_free):
                m.d.sync += [rv.eq(~j_end), j.eq(j + ~j_end),
                             j_end.eq(j_end | (j == wb_last))]
                # the compare into the data, tc_free into the enable only
                m.d.sync += wb_max.eq(Mux(rv2 & ~inside & (sat > wb_max), sat, wb_max))
                with m.If(j_end & ~rv):
                    m.d.sync += [*state.go_either(_S.B_WB, k_zero, _S.B_SETTLE, _S.B_INS),
                                 r.head.eq(Mux(r.head == D, 0, r.head + 1)),
                                 r.count.eq(r.count - 1)]
        self._load(r, _S.B_INS, SumTreeOp.UPDATE, index=ins, priority=ins_val)
        with m.If(state[_S.B_INS]):
            with m.If(r.tc_free):
                m.d.sync += ins.eq(inc(ins))
                with m.If(i_last):
                    m.d.sync += state.go(_S.B_INS, _S.B_EVICT)
        self._load(r, _S.B_EVICT, SumTreeOp.UPDATE, index=ev, priority=0)
        with m.If(state[_S.B_EVICT]):
            with m.If(r.tc_free):
                m.d.sync += ev.eq(inc(ev))
                with m.If(i_last):
                    m.d.sync += state.go(_S.B_EVICT, _S.B_SETTLE)
        # the count of inserts, then evictions: one register update with its enable from
        # tc_free, the data from the states' bits (not a priority chain through tc_free)
        adv = Signal(name="ins_advance")
        turn = state[_S.B_INS] & i_last                    # the last insert: evictions next
        m.d.comb += adv.eq(r.tc_free & (state[_S.B_INS] | state[_S.B_EVICT]))
        with m.If(state[_S.B_WAIT]):
            m.d.sync += [left.eq(k_less), i_last.eq(one)]
        with m.Elif(adv):
            m.d.sync += [left.eq(Mux(turn, k_last, left - 1)),
                         i_last.eq(Mux(turn, k_one, left == 1))]
        with m.If(state[_S.B_SETTLE]):
            m.d.sync += [wait.eq(wait - 1), wait_end.eq(wait == 1)]
            with m.If(wait_end):
                m.d.sync += [self.consumed.eq(end[:COUNT_BITS]), r.cmod.eq(cmod_next)]
                self._finish(m, r, _S.B_SETTLE)

    def _sample(self, m, r):
        """SAMPLE: B fractions into the tree, its responses to ``sample``, the slots into the
        queue and the priorities to the IS weights, then the weights to ``weight``."""
        cfg, tree, st, wu = self._config, self.tree, self.strata, self.weights
        D, iw, pw = cfg.delay, cfg.tree.index_width, cfg.tree.priority_width
        rsp = tree.rsp
        jr = Signal(range(cfg.max_batch + 1), name="rsp_j")
        jr_last = Signal(name="rsp_j_last")      # jr == B - 1, registered
        jr_left = Signal(range(cfg.max_batch + 1), name="rsp_j_left")   # B - 1 - jr
        wslot = Signal(r.slot_shape, name="sample_slot")
        sl_wr = r.q_slots.write_port()
        running = r.state[_S.S_RUN]
        took = rsp.valid & rsp.ready
        m.d.comb += [
            st.batch.eq(r.n_s),
            wu.beta.eq(r.beta),
            wu.i.payload.priority.eq(rsp.payload.value[:pw]),
            wu.i.payload.last.eq(jr_last),
            self.sample.payload.slot.eq(rsp.payload.index[:iw]),
            self.sample.payload.priority.eq(rsp.payload.value[:pw]),
            self.weight.valid.eq(wu.o.valid),
            self.weight.payload.eq(wu.o.payload.weight),
            wu.o.ready.eq(self.weight.ready),
            sl_wr.addr.eq(Cat(jr[:r.jb], wslot)), sl_wr.data.eq(rsp.payload.index[:iw]),
            sl_wr.en.eq(running & took),
        ]
        with m.If(running):
            m.d.comb += [
                self.sample.valid.eq(rsp.valid & wu.i.ready),
                wu.i.valid.eq(rsp.valid & self.sample.ready),
                rsp.ready.eq(self.sample.ready & wu.i.ready),
                st.o.ready.eq(r.tc_free),
            ]
        with m.If(self.weight.valid & self.weight.ready & (self.weight.payload == 0)):
            m.d.sync += self.underflow.eq(1)
        with m.If(r.state[_S.S_START]):
            nxt = r.head + r.count
            with m.If(r.bad_s):
                self._finish(m, r, _S.S_START)
            with m.Else():
                m.d.comb += st.start.eq(1)
                slot = Mux(nxt > D, nxt - (D + 1), nxt)
                m.d.sync += [*r.state.go(_S.S_START, _S.S_RUN), wslot.eq(slot),
                             r.last_slot.eq(slot), r.last_n.eq(r.n_s), jr.eq(0),
                             jr_left.eq(r.n_s_last), jr_last.eq(r.n_s_last == 0)]
        self._load(r, _S.S_RUN, SumTreeOp.SAMPLE, when=st.o.valid, target=st.o.payload.fraction,
                   valid=~r.empty_s)
        with m.If(r.state[_S.S_RUN]):
            with m.If(took):
                m.d.sync += [jr.eq(jr + 1), jr_left.eq(jr_left - 1), jr_last.eq(jr_left == 1)]
            with m.If(r.empty_s & ~st.busy):
                self._finish(m, r, _S.S_RUN)
            with m.If(self.weight.valid & self.weight.ready & wu.o.payload.last):
                self._finish(m, r, _S.S_RUN)

    def _read(self, m, r):
        """READ (debug): ``count`` leaves from slot ``word`` on, wrapping, to ``sample``."""
        cap, iw, tree = self._config.capacity, self._config.tree.index_width, self.tree
        p = self.cmd.payload
        slot = Signal(range(cap), name="read_slot")
        # down-counters with their end tests registered (no compare of two counters)
        to_issue = Signal.like(p.count, name="read_to_issue")
        to_get = Signal.like(p.count, name="read_to_get")
        issuing = Signal(name="read_issuing")               # to_issue != 0
        get_one = Signal(name="read_get_one")               # to_get == 1
        none = Signal(name="read_none")                     # count == 0
        rsp = tree.rsp
        took = rsp.valid & rsp.ready
        with m.If(~r.state[_S.R_RUN]):
            m.d.sync += [slot.eq(p.word[:iw]), to_issue.eq(p.count), to_get.eq(p.count),
                         issuing.eq(p.count != 0), get_one.eq(p.count == 1),
                         none.eq(p.count == 0)]
        self._load(r, _S.R_RUN, SumTreeOp.READ, when=issuing, index=slot)
        with m.If(r.state[_S.R_RUN]):
            m.d.comb += [self.sample.valid.eq(rsp.valid), rsp.ready.eq(self.sample.ready)]
            with m.If(r.tc_free & issuing):
                m.d.sync += [slot.eq(Mux(slot == cap - 1, 0, slot + 1)),
                             to_issue.eq(to_issue - 1), issuing.eq(to_issue != 1)]
            with m.If(took):
                m.d.sync += [to_get.eq(to_get - 1), get_one.eq(to_get == 2)]
            with m.If(none | (took & get_one)):
                self._finish(m, r, _S.R_RUN)

    def _td(self, m, r):
        """TD: the handoff to the TD engine, which turns the batch's TD errors into priorities
        ``(|td| << (eps_frac - act_frac) + eps)**alpha`` in the queue while other commands
        run."""
        cfg, pu = self._config, self.power
        nmax = cfg.max_batch
        act = cfg.learner.numerics.act_format
        tn = Signal(range(nmax + 1), name="td_n")
        tn_last = Signal(range(nmax), name="td_last")       # tn - 1
        td_open = Signal(name="td_open")                    # j_in != tn
        j_in = Signal(range(nmax + 1), name="td_in")
        j_out = Signal(range(nmax + 1), name="td_out")
        alpha = Signal.like(r.alpha, name="td_alpha")
        eps = Signal.like(r.eps, name="td_eps")
        u = Signal(self._u_width, name="td_u")
        u_valid = Signal(name="td_u_valid")
        pr_wr = r.q_prios.write_port()
        with m.If(r.state[_S.T_WAIT]):
            with m.If(~r.td_active):
                m.d.comb += r.td_start.eq(1)
                self._finish(m, r, _S.T_WAIT)
        with m.If(r.td_start):
            m.d.sync += [r.td_slot.eq(r.last_slot), tn.eq(r.last_n),
                         tn_last.eq(r.last_n - 1), td_open.eq(r.last_n != 0),
                         alpha.eq(r.alpha),
                         eps.eq(r.eps), j_in.eq(0), j_out.eq(0), r.count.eq(r.count + 1),
                         r.nb[r.last_slot].eq(r.last_n)]
            with m.If(r.last_n == 0):
                m.d.sync += self.td_done.eq(1)
            with m.Else():
                m.d.sync += r.td_active.eq(1)
        # two stages with one enable: |td| registered (the TD errors may come from a block
        # RAM's output), then u
        td = self.td.payload
        mag = Signal(self._td_width, name="td_mag")
        mag_v = Signal(name="td_mag_valid")
        en = Signal(name="td_en")
        took = self.td.valid & self.td.ready
        m.d.comb += [
            en.eq(~u_valid | pu.i.ready),
            self.td.ready.eq(r.td_active & td_open & en),
            pu.i.valid.eq(u_valid), pu.i.payload.x.eq(u), pu.i.payload.p.eq(alpha),
            pu.o.ready.eq(1),
            pr_wr.addr.eq(Cat(j_out[:r.jb], r.td_slot)), pr_wr.data.eq(pu.o.payload.value),
            pr_wr.en.eq(pu.o.valid),
        ]
        with m.If(took):
            m.d.sync += [j_in.eq(j_in + 1), td_open.eq(j_in != tn_last)]
        with m.If(en):
            m.d.sync += [mag.eq(Mux(td < 0, -td, td)[:self._td_width]), mag_v.eq(took),
                         u.eq((mag << (cfg.eps_frac - act.frac)) + eps), u_valid.eq(mag_v)]
        with m.If(pu.o.valid):
            m.d.sync += j_out.eq(j_out + 1)
            with m.If(j_out == tn_last):
                m.d.sync += [r.td_active.eq(0), self.td_done.eq(1)]
