"""K-ary sum tree for prioritized replay (CF'22 Sec. 3.1): pipelined sampling and updating."""

from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, signed, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from sw.replay.spec import PRNG_BITS, SumTreeConfig

from ..fixed import saturate_fast
from .layouts import RESPONDS, SumTreeOp, command_layout, op_layout, response_layout
from .level import SumTreeLevel, _any_of, sweep_width
from .prng import Xorshift32

__all__ = ["SumTree"]

#: The responding operations in a fixed order (a frozenset's order follows the string hashes,
#: which vary between interpreter runs, and so would the Verilog).
_RESPONDS_ORDERED = tuple(sorted(RESPONDS, key=lambda o: o.value))

#: Operand chunks of the target multiplier: unsigned 26 x 17 bits fits one DSP48E2 (27 x 18
#: signed), so every partial product is one DSP with its output register.
_MUL_A_CHUNK = 26
_MUL_B_CHUNK = 17

#: Terms (one per record in flight and per lane of the lookup) of one registered OR of the old
#: leaf value's selection in stage B2: eight one-hot AND-OR terms are two LUT levels a bit.
_OLD_GROUP = 8

#: Bits of the root whose zero tests one registered flag ANDs (two LUT levels).
_ZERO_GROUP = 4


def _taps(level):
    """The stage records of a :class:`~rtl_gen.replay.level.SumTreeLevel` before its output."""
    return [level.taps[j] for j in range(level.config.level_latency - 1)]


def _chunks(value, size):
    return [(value[lo:lo + size], lo) for lo in range(0, len(value), size)]


def _at_least(value, bound):
    """``value >= bound``; for a power of two, the OR of the bits from its bit up (LUTs that
    the mapper can merge with what follows, not a carry chain)."""
    if bound > 0 and bound & (bound - 1) == 0:
        return value[bound.bit_length() - 1:].any()
    return value >= bound


class SumTree(wiring.Component):
    """K-ary sum tree with one operation per cycle: samples, updates, inserts and reads.

    The tree of :class:`~sw.replay.spec.SumTreeConfig`: the root in a register, level
    ``l`` (1..``levels``) in its own memory (:class:`~rtl_gen.replay.level.SumTreeLevel`) whose
    words are whole groups of ``fanout`` siblings, ``fanout * level_widths[l]`` bits, so one read
    returns all children of a node. Bit-exact with :class:`sw.replay.sumtree.FixedSumTree`.

    Pipeline and ordering
    ---------------------
    Every operation takes the same path through one in-order pipeline: the input buffer (its
    head is the register the accept decision is made from), ``A`` (command register), ``B``,
    ``B2`` and ``B3`` (old leaf value and delta), ``C`` (root, partial products of the
    target), ``M`` and ``M2`` (the target: rows of partial products, their sum), then the
    ``config.level_latency`` stages R, P, Q, Q1 .. Qn, C, S of each level from the root's
    children down to the leaves, then the response queue. Samples and updates share it: there is no
    separate sampler and updater pipeline to keep apart. A sample walks root -> leaves, reading
    one group per level. An update reads the old leaf value first (stage A's lookup port, stages
    B and B2), so it knows its change ``delta = new - old`` before it reaches the root and it
    too walks root -> leaves, adding ``delta`` to its ancestor on each level (read-modify-write
    in stages R to Q) and writing the leaf last. This is CF'22's leaf -> root updater turned
    around (its memoised path is just the index bits): going the same way as the samples, every
    operation visits every level memory in issue order, one per cycle, with one read port and
    one write port (the leaf level: one read-or-write port and the lookup port), and the result
    is exactly that of executing the operations one after another:

    * an operation issued after an update sees it (samples, reads, debug reads, and updates of
      the same leaf or of any ancestor, back to back: a level's stage Q forwards the words of
      the two writes its read missed, and the old leaf value of stages B to B3 is forwarded
      from every write still in flight, youngest first);
    * an operation issued before an update does not see it.

    The pipeline never stalls: no operation waits for another, and the stages have no clock
    enable. ``cmd.ready`` is a register: the input buffer holds :attr:`input_depth` commands
    and takes one per cycle while it is not full (and the tree is not being cleared). Responses
    go through a queue of :attr:`response_depth` entries, and a command that responds only
    leaves the buffer for stage A while the queue has room for its response counting those in
    flight (an UPDATE behind it waits too; ``cmd.ready`` falls once the buffer is full).
    ``rsp.ready`` thus reaches only the queue and that counter, not the pipeline.

    Samples compute ``t = (x_raw * root) >> target_bits`` from the root as stage C sees it and
    select a child per level with a parallel prefix compare (see
    :class:`~rtl_gen.replay.level.SumTreeLevel`). A sample while every priority is zero
    responds with ``empty`` set, raises the sticky ``empty`` flag and draws no PRNG word.
    ``SAMPLE_PRNG`` draws ``x_raw`` from the :class:`~rtl_gen.replay.prng.Xorshift32` in stage C.

    Operations and flags
    --------------------
    See :class:`~rtl_gen.replay.layouts.SumTreeOp` for the operations and their responses.
    UPDATE and INSERT saturate priorities above the leaf maximum (sticky ``saturated``); the
    maximum-priority register takes the maximum of every value written (reset 1.0). UPDATE or
    READ with ``index >= capacity`` and DEBUG with ``level > levels`` or ``index`` beyond the
    level's words raise the sticky ``invalid`` flag and change nothing; READ and DEBUG still
    respond, with ``invalid`` set and value 0. RESET waits until the pipeline is empty, then
    clears like a reset does.

    After reset (and RESET) the tree is cleared by a sweep of ``level_groups[-1]`` cycles that
    zeroes every level memory (FPGA memories keep their contents through a reset); ``cmd.ready``
    is low and ``busy`` high meanwhile.

    Parameters
    ----------
    config : SumTreeConfig

    Members
    -------
    cmd : ``In(stream.Signature(command_layout(config)))``
        Operations, one per cycle.
    rsp : ``Out(stream.Signature(response_layout(config)))``
        One response per SAMPLE, SAMPLE_PRNG, INSERT, INSERT_MAX, READ and DEBUG, in command
        order (UPDATE and RESET respond with nothing).
    seed : ``In(32)``, seed_load : ``In(1)``
        Load the PRNG seed (0 loads ``XORSHIFT32_ZERO_SEED``, also the reset state). The load
        takes effect at the next edge, of a ``seed`` stable for the two cycles before; load
        while no ``SAMPLE_PRNG`` is in flight (``busy`` low) to fix which samples use the new
        sequence.
    clear : ``In(1)``
        Clear the three sticky flags (an event in the same cycle wins).
    empty, saturated, invalid : ``Out(1)``
        Sticky flags.
    busy : ``Out(1)``
        An operation is in the input buffer or the pipeline (responses waiting in the queue do
        not count) or the tree is being cleared.
    total : ``Out(root_width)``
        The root (sum of all priorities), as seen by the next operation in stage C.
    max_priority : ``Out(priority_width)``
        The maximum-priority register.
    write_pointer : ``Out(index_width)``, size : ``Out(bits of capacity)``
        The slot the next INSERT writes and the number of slots inserted (at most capacity).

    Latency is :attr:`latency` = ``level_latency * levels + 10`` cycles from a command's
    transfer to its response's transfer (``rsp.ready`` high); throughput one operation per
    cycle of any kind and mix. ``B`` operations take ``B + latency`` cycles from the first
    command to the last response; ``B`` updates have left the pipeline (``busy`` low) after
    ``B + latency - 1``. An update's effect is visible to the operation issued right after
    it, whatever the kinds of the two.
    """

    def __init__(self, config: SumTreeConfig):
        if not isinstance(config, SumTreeConfig):
            raise TypeError(f"config must be a SumTreeConfig, not {config!r}")
        self._config = config
        super().__init__({
            "cmd":           In(stream.Signature(command_layout(config))),
            "rsp":           Out(stream.Signature(response_layout(config))),
            "seed":          In(PRNG_BITS),
            "seed_load":     In(1),
            "clear":         In(1),
            "empty":         Out(1),
            "saturated":     Out(1),
            "invalid":       Out(1),
            "busy":          Out(1),
            "total":         Out(unsigned(config.root_width)),
            "max_priority":  Out(unsigned(config.priority_width), init=config.one_raw),
            "write_pointer": Out(unsigned(config.index_width)),
            "size":          Out(unsigned(config.capacity.bit_length())),
        })

    @property
    def config(self) -> SumTreeConfig:
        return self._config

    @property
    def latency(self) -> int:
        """Cycles from a command's transfer to its response's
        (:attr:`~sw.replay.spec.SumTreeConfig.latency`, ``level_latency * levels + 10``)."""
        return self._config.latency

    @property
    def input_depth(self) -> int:
        """Commands the input buffer holds (2): ``cmd.ready`` is a register, low once both
        entries wait."""
        return 2

    @property
    def response_depth(self) -> int:
        """Responses the queue holds (``latency + 1``; its memory has the next power of two
        entries, so its pointers wrap without a compare): enough for one response per cycle
        while ``rsp.ready`` stays high."""
        return self.latency + 1

    def elaborate(self, platform):
        m = Module()
        p = self._pipeline(m)
        inp = self._input_buffer(m, p)
        self._response_queue(m, p, inp)
        a_insert, s_insert = self._take_command(m, p, inp)
        self._clearing_sweep(m, p)
        hit_index, saturates, invalid_now = self._stage_a(m, p, inp, a_insert, s_insert)
        c_delta = self._old_leaf(m, p, hit_index)
        rows, empty_now, zero_groups = self._stage_c(m, p, c_delta)
        self._target(m, p, rows)
        self._flags(m, p, inp, saturates, invalid_now, empty_now, zero_groups)
        return m

    # Each step below adds its logic to ``m`` and returns what later steps use; the order of
    # the calls in :meth:`elaborate` is the order of the statements in the netlist.
    def _pipeline(self, m):
        """The level memories (root's children first) and the PRNG as submodules, the stage
        records from A to R1 chained into the levels, and the clearing sweep's registers
        (:class:`_Pipeline`)."""
        cfg = self._config
        n_levels = cfg.levels
        rec = op_layout(cfg)

        levels = [SumTreeLevel(cfg, level=l) for l in range(1, n_levels + 1)]
        for lvl in levels:
            m.submodules[f"level{lvl.level}"] = lvl
        m.submodules.prng = prng = Xorshift32()

        a_valid = Signal()
        a = Signal(command_layout(cfg), name="a")
        b = Signal(rec, name="b")
        b2 = Signal(rec, name="b2")
        b3 = Signal(rec, name="b3")
        c = Signal(rec, name="c")
        mr = Signal(rec, name="m")
        m2 = Signal(rec, name="m2")
        r1 = Signal(rec, name="r1")
        m.d.comb += levels[0].i.eq(r1)
        for up, down in zip(levels, levels[1:]):
            m.d.comb += down.i.eq(up.o)

        sweeping = Signal(init=1)
        sweep_cnt = Signal(sweep_width(cfg))
        for lvl in levels:
            m.d.comb += [lvl.sweep.eq(sweeping), lvl.sweep_addr.eq(sweep_cnt)]
        return _Pipeline(levels=levels, prng=prng, a_valid=a_valid, a=a, b=b, b2=b2, b3=b3,
                         c=c, mr=mr, m2=m2, r1=r1, sweeping=sweeping, sweep_cnt=sweep_cnt)

    def _input_buffer(self, m, p):
        """The two-entry input buffer (``cmd.ready`` a register) and the accept decision of
        the command at its head: room in the response queue, RESET only into an empty
        pipeline; ``busy`` (:class:`_Input`)."""
        cfg = self._config
        cmd = self.cmd
        sweeping, a_valid = p.sweeping, p.a_valid
        # -- input buffer: ``cmd.ready`` is a register (two entries, full rate) ---------------
        # The command at the head (``s``) goes on to stage A when the tree takes it; the decision
        # depends on its operation, so it is made here, from registers, and not in the
        # producer's cycle.
        s_valid, k_valid = Signal(), Signal()
        s = Signal(command_layout(cfg), name="s")
        k_cmd = Signal(command_layout(cfg), name="skid")
        push = cmd.valid & cmd.ready
        m.d.comb += cmd.ready.eq(~k_valid & ~sweeping)

        # -- handshakes: the pipeline never stalls; a response is only issued with room for it ----
        depth = self.response_depth
        reserved = Signal(range(depth + 1))     # responses of the stages after A, and queued
        a_resp = Signal()                       # the command in stage A responds
        response = Signal(response_layout(cfg))
        stages = [p.b, p.b2, p.b3, p.c, p.mr, p.m2, p.r1] + [
            r for lvl in p.levels for r in (*_taps(lvl), lvl.o)]
        # ``pipe_busy`` without an OR of every stage in the cycle it is used: the stages but
        # the last are what the stages hold one cycle later, so their OR is registered.
        pipe_busy = Signal()
        stages_busy = Signal()
        m.d.sync += stages_busy.eq(a_valid | Cat(r.valid for r in stages[:-1]).any())
        m.d.comb += pipe_busy.eq(a_valid | stages_busy)
        is_reset = s.op == SumTreeOp.RESET
        needs_room = Cat(s.op == o for o in _RESPONDS_ORDERED).any()
        room = Mux(a_resp, reserved < depth - 1, reserved < depth)
        accept = Signal()
        m.d.comb += [
            accept.eq(s_valid & ~sweeping & ~(is_reset & pipe_busy) & (room | ~needs_room)),
            self.busy.eq(pipe_busy | sweeping | s_valid),
        ]
        with m.If(accept | ~s_valid):
            with m.If(k_valid):
                m.d.sync += [s.eq(k_cmd), s_valid.eq(1), k_valid.eq(0)]
            with m.Else():
                m.d.sync += [s.eq(cmd.payload), s_valid.eq(push)]
        with m.Elif(push):
            m.d.sync += [k_cmd.eq(cmd.payload), k_valid.eq(1)]
        return _Input(s=s, accept=accept, is_reset=is_reset, needs_room=needs_room,
                      reserved=reserved, a_resp=a_resp, response=response)

    def _response_queue(self, m, p, inp):
        """The response queue after the leaf level, and the count of responses reserved in
        it (the reservation guarantees room, so only its read side is checked)."""
        rsp = self.rsp
        depth = self.response_depth
        out = p.levels[-1].o
        response, reserved, a_resp = inp.response, inp.reserved, inp.a_resp
        qbits = max(1, ceil_log2(depth))
        queue = Memory(shape=len(rsp.payload.as_value()), depth=1 << qbits, init=[])
        m.submodules.rsp_queue = queue
        q_wr = queue.write_port()
        q_rd = queue.read_port(domain="comb")
        q_wp, q_rp = Signal(qbits, name="q_wp"), Signal(qbits, name="q_rp")
        q_rp1 = Signal(qbits, name="q_rp1", init=1)  # q_rp + 1
        q_ne = Signal(name="q_nonempty")             # registered: rsp.valid
        given = rsp.valid & rsp.ready
        q_push = out.valid & out.respond
        m.d.comb += [
            response.op.eq(out.op),
            response.index.eq(out.index),
            response.value.eq(out.value),
            response.empty.eq(out.empty),
            response.invalid.eq(out.invalid),
            q_wr.addr.eq(q_wp), q_wr.data.eq(response), q_wr.en.eq(q_push),
            q_rd.addr.eq(q_rp),
            rsp.valid.eq(q_ne),
            rsp.payload.eq(q_rd.data),
        ]
        with m.If(q_push):
            m.d.sync += [q_wp.eq(q_wp + 1), q_ne.eq(1)]
        with m.Elif(given):
            m.d.sync += q_ne.eq(q_rp1 != q_wp)
        with m.If(given):
            m.d.sync += [q_rp.eq(q_rp1), q_rp1.eq(q_rp1 + 1)]
        with m.If(a_resp & ~given):
            m.d.sync += reserved.eq(reserved + 1)
        with m.Elif(given & ~a_resp):
            m.d.sync += reserved.eq(reserved - 1)

    def _take_command(self, m, p, inp):
        """The accepted command into stage A (RESET goes no further), an insert decoded a
        stage early. Returns ``(a_insert, s_insert)``: the register and the head's term."""
        s = inp.s
        a_insert = Signal()         # INSERT or INSERT_MAX in stage A, decoded a stage early
        s_insert = (s.op == SumTreeOp.INSERT) | (s.op == SumTreeOp.INSERT_MAX)
        m.d.sync += [
            p.a_valid.eq(inp.accept & ~inp.is_reset), p.a.eq(s), a_insert.eq(s_insert),
            inp.a_resp.eq(inp.accept & inp.needs_room),
        ]
        return a_insert, s_insert

    def _clearing_sweep(self, m, p):
        """The clearing sweep's counter: one group of every level memory a cycle."""
        cfg = self._config
        sweeping, sweep_cnt = p.sweeping, p.sweep_cnt
        last_group = cfg.level_groups[-1] - 1
        with m.If(sweeping):
            m.d.sync += sweep_cnt.eq(sweep_cnt + 1)
            with m.If(sweep_cnt == last_group):
                m.d.sync += [sweeping.eq(0), sweep_cnt.eq(0)]

    def _stage_a(self, m, p, inp, a_insert, s_insert):
        """Stage A: the command decoded, its priority saturated and its index (DEBUG: level
        and index) checked; the insert slot (write pointer, size), the maximum-priority
        register, the leaf lookup's address and the record into stage B. Returns
        ``(hit_index, saturates, invalid_now)``: the registered leaf index, and whether the
        command raises the ``saturated`` or ``invalid`` flag."""
        cfg = self._config
        lk, n_levels, cap, wl = cfg.log2_fanout, cfg.levels, cfg.capacity, cfg.priority_width
        a, a_valid, b, leaf = p.a, p.a_valid, p.b, p.levels[-1]
        max_reg, ptr, size = self.max_priority, self.write_pointer, self.size
        # -- A: decode, saturate, insert slot, maximum register, lookup of the old leaf -----------
        op = a.op
        is_sample = a_valid & ((op == SumTreeOp.SAMPLE) | (op == SumTreeOp.SAMPLE_PRNG))
        is_update = a_valid & (op == SumTreeOp.UPDATE)
        is_insert = a_valid & a_insert
        is_read = a_valid & (op == SumTreeOp.READ)
        is_debug = a_valid & (op == SumTreeOp.DEBUG)
        responds = a_valid & Cat(op == o for o in _RESPONDS_ORDERED).any()
        sat, over = saturate_fast(m, a.priority, cfg.priority_format, name="sat")
        # (comparisons that cannot be true are left out: Verilator's lint flags them)
        index_top = 1 << cfg.node_index_width
        leaf_bad = _at_least(a.index, cap) if cap < index_top else Const(0)
        depths = cfg.level_depths
        debug_bad = Cat(
            [(a.level == l) & _at_least(a.index, depths[l]) for l in range(n_levels + 1)
             if depths[l] < index_top]
            + ([a.level > n_levels] if (1 << cfg.level_select_width) > n_levels + 1 else [])
        ).any()
        # The maximum-priority register takes a write's value in stage B; INSERT_MAX in stage A
        # sees the write in B through ``max_now``.
        max_raise = Signal()
        max_now = Signal(wl)
        m.d.comb += [
            max_raise.eq(b.write & (b.prio > max_reg)),
            max_now.eq(Mux(max_raise, b.prio, max_reg)),
        ]
        # The leaf a write or read accesses (the write pointer for inserts), registered as the
        # command enters stage A: the pointer then is the one stage A will see.
        ptr_next = Signal.like(ptr)
        m.d.comb += ptr_next.eq(Mux(is_insert, Mux(ptr == cap - 1, 0, ptr + 1), ptr))
        hit_index = Signal(cfg.node_index_width, name="a_leaf")
        m.d.sync += hit_index.eq(Mux(s_insert, ptr_next, inp.s.index))
        new_value = Signal(wl)
        leaf_index = Signal(cfg.node_index_width)
        write = Signal()
        m.d.comb += [
            new_value.eq(Mux(op == SumTreeOp.INSERT_MAX, max_now, sat)),
            leaf_index.eq(Mux(is_sample, 0, hit_index)),
            write.eq(is_insert | (is_update & ~leaf_bad)),
            leaf.lookup_addr.eq(hit_index >> lk),   # a sample's: unused
        ]
        invalid_now = ((is_update | is_read) & leaf_bad) | (is_debug & debug_bad)
        m.d.sync += [
            b.valid.eq(a_valid),
            b.op.eq(op),
            b.sample.eq(is_sample),
            b.prng.eq(op == SumTreeOp.SAMPLE_PRNG),
            b.write.eq(write),
            b.read.eq(is_read & ~leaf_bad),
            b.debug.eq(is_debug & ~debug_bad),
            b.respond.eq(responds),
            b.empty.eq(0),
            b.invalid.eq(invalid_now),
            b.level.eq(a.level),
            b.index.eq(leaf_index),
            b.prio.eq(new_value),
            b.delta.eq(0),
            b.target.eq(a.target),
            b.value.eq(Mux(is_insert, new_value, 0)),
        ]
        m.d.sync += ptr.eq(ptr_next)
        with m.If(is_insert):
            m.d.sync += size.eq(Mux(size == cap, cap, size + 1))
        with m.If(max_raise):
            m.d.sync += max_reg.eq(b.prio)
        saturates = (write & (op != SumTreeOp.INSERT_MAX)) & over
        return hit_index, saturates, invalid_now

    def _old_leaf(self, m, p, hit_index):
        """Stages B, B2 and B3: the old leaf value, the lookup's or forwarded from the writes
        in flight (youngest first), and its difference to the new one. Returns the delta
        stage C adds to the root."""
        cfg = self._config
        k, lk, wl = cfg.fanout, cfg.log2_fanout, cfg.priority_width
        b, b2, b3, c = p.b, p.b2, p.b3, p.c
        levels = p.levels
        leaf = levels[-1]
        # -- B, B2, B3: old leaf value, forwarded from the writes in flight (youngest first) -----
        # The lookup (address in stage A, data in B) sees every leaf write up to the previous
        # cycle's; the writes of the operations from stage B down to the leaf level's R stage
        # (``ahead``, youngest first) are not in it yet. Stage A compares the leaf with them
        # and registers the hits; stage B picks the youngest hit, or the lookup if none, as
        # one-hot selects; stage B2 selects, with the records moved on by two (``taps2``), in
        # groups whose ORs it registers; stage B3 ORs the groups and subtracts.
        pipe = [b, b2, b3, c, p.mr, p.m2, p.r1]
        for lvl in levels[:-1]:
            pipe += [*_taps(lvl), lvl.o]
        pipe += [leaf.taps[0], leaf.taps[1]]
        ahead, taps, taps2 = pipe[:-2], pipe[1:-1], pipe[2:]
        # The index compares in two halves, each registered (one wide compare per record maps
        # to a chain of LUTs); stage B ANDs them.
        hits = Signal(len(taps) + 1)            # stage B; the top bit: the lookup (always)
        hits_lo = Signal(len(taps), name="b_hits_lo")
        hits_hi = Signal(len(taps), name="b_hits_hi")
        lane = Signal(k)                        # stage B; one-hot: the lookup's lane
        half = (len(hit_index) + 1) // 2
        m.d.sync += [
            hits_lo.eq(Cat(*(r.write & (r.index[:half] == hit_index[:half]) for r in ahead))),
            hits_hi.eq(Cat(*(r.index[half:] == hit_index[half:] for r in ahead))),
            lane.eq(Cat(hit_index[:lk] == j for j in range(k)) if k > 1 else 1),
        ]
        m.d.comb += hits.eq(Cat(hits_lo & hits_hi, 1))
        youngest = Signal(len(taps) + 1)
        sel_tap = Signal(len(taps))             # stage B2: one-hot (or 0: the lookup)
        sel_lane = Signal(k)                    # stage B2: one-hot (or 0: a record hit)
        looked = Signal(k * wl)                 # stage B2: the lookup's word
        m.d.comb += youngest.eq(hits & (~hits + 1)[:len(hits)])   # lowest set bit
        m.d.sync += [
            b2.eq(b),
            sel_tap.eq(youngest[:len(taps)]),
            sel_lane.eq(Mux(youngest[-1], lane, 0)),
            looked.eq(leaf.lookup_data),
        ]
        lanes = [looked[j * wl:(j + 1) * wl] for j in range(k)]
        terms = ([Mux(sel, r.prio, 0) for r, sel in zip(taps2, sel_tap)]
                 + [Mux(sel, v, 0) for v, sel in zip(lanes, sel_lane)])
        groups = [Signal(wl, name=f"b3_old{g}") for g in range(-(-len(terms) // _OLD_GROUP))]
        m.d.sync += b3.eq(b2)
        m.d.sync += [g.eq(_any_of(terms[i * _OLD_GROUP:(i + 1) * _OLD_GROUP], wl))
                     for i, g in enumerate(groups)]
        old = Signal(wl)
        c_delta = Signal(signed(wl + 1))        # stage C adds it to the root
        m.d.comb += old.eq(_any_of(groups, wl))
        m.d.sync += [c.eq(b3), c_delta.eq(b3.prio - old)]
        with m.If(b3.read):
            m.d.sync += c.value.eq(old)
        return c_delta

    def _stage_c(self, m, p, c_delta):
        """Stage C: the root and its zero flags, the PRNG's step, the partial products of
        the target (of the PRNG word and of the host's), an empty tree's samples. Returns
        ``(rows, empty_now, zero_groups)``: the partial products by row and column offset
        (``rows[sa][sr][kind]``), an empty tree's sample this cycle, the zero flags."""
        cfg = self._config
        w0, tb = cfg.root_width, cfg.target_bits
        c, mr, prng = p.c, p.mr, p.prng
        root = self.total
        # ``root_zero`` comes from registers: whether the root will be zero is decided from the
        # root and the delta without their carry chain (a + b = 0 modulo 2^n exactly when
        # a_i ^ b_i = a_{i-1} | b_{i-1} for every bit i, with a_{-1} | b_{-1} = 0).
        # The bit tests are ANDed in groups of _ZERO_GROUP bits, registered (one flag per
        # group), and the flags ANDed where they are used.
        d_ext = Signal(w0)
        m.d.comb += d_ext.eq(c_delta)           # sign-extended (root + delta fits w0 bits)
        carry_in = Cat(Const(0, 1), (root | d_ext)[:w0 - 1])
        bit_ok = ~(root ^ d_ext ^ carry_in)
        n_zg = -(-w0 // _ZERO_GROUP)
        zero_groups = Signal(n_zg, name="root_zero_groups", init=(1 << n_zg) - 1)
        root_zero = Signal()
        m.d.comb += root_zero.eq(zero_groups.all())
        empty_now = c.sample & root_zero
        m.d.comb += [
            prng.seed.eq(self.seed),
            prng.load.eq(self.seed_load),
            prng.step.eq(c.sample & c.prng & ~root_zero),
        ]
        # Two products, of the PRNG word and of the host's target, each operand straight from
        # a register and each partial product registered (a DSP48E2 with AREG/BREG and PREG
        # absorbable); stage M picks one per row as it adds the row.
        rows = {}
        for kind, x in (("p", prng.word[PRNG_BITS - tb:]), ("t", c.target[:tb])):
            for xa, sa in _chunks(x, _MUL_B_CHUNK):
                for ra, sr in _chunks(root, _MUL_A_CHUNK):
                    pp = Signal(len(xa) + len(ra), name=f"pp{kind}_{sa}_{sr}")
                    rows.setdefault(sa, {}).setdefault(sr, {})[kind] = pp
                    m.d.sync += pp.eq(xa * ra)
        m.d.sync += [mr.eq(c), mr.delta.eq(c_delta)]
        with m.If(c.write):
            m.d.sync += [
                root.eq((root + c_delta)[:w0]),
                zero_groups.eq(Cat(bit_ok[g * _ZERO_GROUP:(g + 1) * _ZERO_GROUP].all()
                                   for g in range(n_zg))),
            ]
        with m.If(empty_now):
            m.d.sync += [mr.sample.eq(0), mr.empty.eq(1)]
        with m.If(c.debug & (c.level == 0)):
            m.d.sync += mr.value.eq(root)
        return rows, empty_now, zero_groups

    def _target(self, m, p, rows):
        """Stages M and M2: ``t = (x_raw * root) >> target_bits``, the rows of partial
        products, then their sum, into a sample's record in R1."""
        cfg = self._config
        w0, tb = cfg.root_width, cfg.target_bits
        mr, m2, r1 = p.mr, p.m2, p.r1
        row_sums = []
        for sa, parts in rows.items():
            row = Signal(tb + w0, name=f"m_row{sa}")
            m.d.sync += row.eq(sum(Mux(mr.prng, pp["p"], pp["t"]) << sr
                                   for sr, pp in parts.items()))
            row_sums.append((row, sa))
        product = Signal(tb + w0)
        m.d.comb += product.eq(sum(row << sa for row, sa in row_sums))
        m.d.sync += [m2.eq(mr), r1.eq(m2)]
        with m.If(m2.sample):
            m.d.sync += r1.target.eq(product[tb:])

    def _flags(self, m, p, inp, saturates, invalid_now, empty_now, zero_groups):
        """The sticky flags (``clear`` first, an event wins) and RESET: the sweep restarted,
        the root, slots and maximum-priority register to their reset values."""
        cfg = self._config
        with m.If(self.clear):
            m.d.sync += [self.empty.eq(0), self.saturated.eq(0), self.invalid.eq(0)]
        with m.If(empty_now):
            m.d.sync += self.empty.eq(1)
        with m.If(saturates):
            m.d.sync += self.saturated.eq(1)
        with m.If(invalid_now):
            m.d.sync += self.invalid.eq(1)
        with m.If(inp.accept & inp.is_reset):
            m.d.sync += [
                p.sweeping.eq(1), p.sweep_cnt.eq(0), self.total.eq(0),
                zero_groups.eq((1 << len(zero_groups)) - 1), self.write_pointer.eq(0),
                self.size.eq(0), self.max_priority.eq(cfg.one_raw),
            ]


@dataclass(frozen=True)
class _Pipeline:
    """The level memories (``levels[-1]`` the leaves), the PRNG, the stage records (``a``
    and its valid bit, then ``b`` .. ``r1``; ``mr`` is stage M's) and the clearing sweep's
    registers."""
    levels: list
    prng: Xorshift32
    a_valid: Signal
    a: Signal
    b: Signal
    b2: Signal
    b3: Signal
    c: Signal
    mr: Signal
    m2: Signal
    r1: Signal
    sweeping: Signal
    sweep_cnt: Signal


@dataclass(frozen=True)
class _Input:
    """The input buffer's head ``s``, whether it is accepted this cycle (``accept``), is a
    RESET or needs room for a response; the responses reserved, stage A's responding bit and
    the response record into the queue."""
    s: Signal
    accept: Signal
    is_reset: Value
    needs_room: Value
    reserved: Signal
    a_resp: Signal
    response: Signal

