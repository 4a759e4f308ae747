"""K-ary sum tree for prioritized replay (CF'22 Sec. 3.1): pipelined sampling and updating."""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import stream, wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

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


def _taps(level):
    """The stage records of a :class:`~rtl_gen.replay.level.SumTreeLevel` before its output."""
    return [level.taps[j] for j in range(level.config.level_latency - 1)]


def _chunks(value, size):
    return [(value[lo:lo + size], lo) for lo in range(0, len(value), size)]


class SumTree(wiring.Component):
    """K-ary sum tree with one operation per cycle: samples, updates, inserts and reads.

    The tree of :class:`~sw.replay.spec.SumTreeConfig`: the root in a register, level
    ``l`` (1..``levels``) in its own memory (:class:`~rtl_gen.replay.level.SumTreeLevel`) whose
    words are whole groups of ``fanout`` siblings, ``fanout * level_widths[l]`` bits, so one read
    returns all children of a node. Bit-exact with :class:`sw.golden.sumtree.FixedSumTree`.

    Pipeline and ordering
    ---------------------
    Every operation takes the same path through one in-order pipeline: ``A`` (command register),
    ``B`` and ``B2`` (old leaf value), ``C`` (root), ``M`` (target product), then the
    ``config.level_latency`` stages R, P, Q, Q1 .. Qn, S of each level from the root's children
    down to the leaves, then the response queue. Samples and updates share it: there is no
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
      the two writes its read missed, and the old leaf value of stages B and B2 is forwarded
      from every write still in flight, youngest first);
    * an operation issued before an update does not see it.

    The pipeline never stalls: no operation waits for another, and the stages have no clock
    enable. Responses go through a queue of :attr:`response_depth` entries, and a command that
    responds is only accepted while the queue has room for its response counting those in
    flight (``cmd.ready`` falls when ``rsp.ready`` has been low long enough; UPDATE is still
    accepted). ``rsp.ready`` thus reaches only the queue and that counter, not the pipeline.

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
        takes effect at the next edge; load while no ``SAMPLE_PRNG`` is in flight (``busy``
        low) to fix which samples use the new sequence.
    clear : ``In(1)``
        Clear the three sticky flags (an event in the same cycle wins).
    empty, saturated, invalid : ``Out(1)``
        Sticky flags.
    busy : ``Out(1)``
        An operation is in the pipeline (responses waiting in the queue do not count) or the
        tree is being cleared.
    total : ``Out(root_width)``
        The root (sum of all priorities), as seen by the next operation in stage C.
    max_priority : ``Out(priority_width)``
        The maximum-priority register.
    write_pointer : ``Out(index_width)``, size : ``Out(bits of capacity)``
        The slot the next INSERT writes and the number of slots inserted (at most capacity).

    Latency is :attr:`latency` = ``level_latency * levels + 7`` cycles from a command's
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
        (:attr:`~sw.replay.spec.SumTreeConfig.latency`, ``level_latency * levels + 7``)."""
        return self._config.latency

    @property
    def response_depth(self) -> int:
        """Entries of the response queue (``latency + 1``): enough for one response per cycle
        while ``rsp.ready`` stays high."""
        return self.latency + 1

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        k, lk, n_levels, cap = cfg.fanout, cfg.log2_fanout, cfg.levels, cfg.capacity
        wl, w0, tb = cfg.priority_width, cfg.root_width, cfg.target_bits
        rec = op_layout(cfg)
        cmd, rsp = self.cmd, self.rsp

        levels = [SumTreeLevel(cfg, level=l) for l in range(1, n_levels + 1)]
        for lvl in levels:
            m.submodules[f"level{lvl.level}"] = lvl
        leaf = levels[-1]
        m.submodules.prng = prng = Xorshift32()

        a_valid = Signal()
        a = Signal(command_layout(cfg), name="a")
        b = Signal(rec, name="b")
        b2 = Signal(rec, name="b2")
        c = Signal(rec, name="c")
        mr = Signal(rec, name="m")
        r1 = Signal(rec, name="r1")
        out = leaf.o
        m.d.comb += levels[0].i.eq(r1)
        for up, down in zip(levels, levels[1:]):
            m.d.comb += down.i.eq(up.o)

        root = self.total
        max_reg = self.max_priority
        ptr = self.write_pointer
        size = self.size
        sweeping = Signal(init=1)
        sweep_cnt = Signal(sweep_width(cfg))
        for lvl in levels:
            m.d.comb += [lvl.sweep.eq(sweeping), lvl.sweep_addr.eq(sweep_cnt)]

        # -- handshakes: the pipeline never stalls; a response is only issued with room for it ----
        rsp_fifo = SyncFIFO(width=len(rsp.payload.as_value()), depth=self.response_depth)
        m.submodules.rsp_fifo = rsp_fifo
        reserved = Signal(range(self.response_depth + 1))   # responses in flight or queued
        response = Signal(response_layout(cfg))
        stages = [b, b2, c, mr, r1] + [r for lvl in levels for r in (*_taps(lvl), lvl.o)]
        # ``pipe_busy`` without an OR of every stage in the cycle it is used: the stages but
        # the last are what the stages hold one cycle later, so their OR is registered.
        pipe_busy = Signal()
        stages_busy = Signal()
        m.d.sync += stages_busy.eq(a_valid | Cat(r.valid for r in stages[:-1]).any())
        m.d.comb += pipe_busy.eq(a_valid | stages_busy)
        is_reset = cmd.payload.op == SumTreeOp.RESET
        needs_room = Cat(cmd.payload.op == o for o in _RESPONDS_ORDERED).any()
        room = reserved < self.response_depth
        m.d.comb += [
            cmd.ready.eq(~sweeping & ~(is_reset & pipe_busy) & (room | ~needs_room)),
            self.busy.eq(pipe_busy | sweeping),
            rsp_fifo.w_en.eq(out.valid & out.respond),
            response.op.eq(out.op),
            response.index.eq(out.index),
            response.value.eq(out.value),
            response.empty.eq(out.empty),
            response.invalid.eq(out.invalid),
            rsp_fifo.w_data.eq(response),
            rsp.valid.eq(rsp_fifo.r_rdy),
            rsp.payload.eq(rsp_fifo.r_data),
            rsp_fifo.r_en.eq(rsp.ready),
        ]
        accept = cmd.valid & cmd.ready
        taken = accept & needs_room
        given = rsp.valid & rsp.ready
        with m.If(taken & ~given):
            m.d.sync += reserved.eq(reserved + 1)
        with m.Elif(given & ~taken):
            m.d.sync += reserved.eq(reserved - 1)
        a_insert = Signal()         # INSERT or INSERT_MAX in stage A, decoded a stage early
        m.d.sync += [
            a_valid.eq(accept & ~is_reset), a.eq(cmd.payload),
            a_insert.eq((cmd.payload.op == SumTreeOp.INSERT)
                        | (cmd.payload.op == SumTreeOp.INSERT_MAX)),
        ]

        # -- clearing sweep -----------------------------------------------------------------------
        last_group = cfg.level_groups[-1] - 1
        with m.If(sweeping):
            m.d.sync += sweep_cnt.eq(sweep_cnt + 1)
            with m.If(sweep_cnt == last_group):
                m.d.sync += [sweeping.eq(0), sweep_cnt.eq(0)]

        # -- A: decode, saturate, insert slot, maximum register, lookup of the old leaf -----------
        op = a.op
        is_sample = a_valid & ((op == SumTreeOp.SAMPLE) | (op == SumTreeOp.SAMPLE_PRNG))
        is_update = a_valid & (op == SumTreeOp.UPDATE)
        is_insert = a_valid & ((op == SumTreeOp.INSERT) | (op == SumTreeOp.INSERT_MAX))
        is_read = a_valid & (op == SumTreeOp.READ)
        is_debug = a_valid & (op == SumTreeOp.DEBUG)
        responds = a_valid & Cat(op == o for o in _RESPONDS_ORDERED).any()
        sat, over = saturate_fast(m, a.priority, cfg.priority_format, name="sat")
        # (comparisons that cannot be true are left out: Verilator's lint flags them)
        index_top = 1 << cfg.node_index_width
        leaf_bad = (a.index >= cap) if cap < index_top else Const(0)
        depths = cfg.level_depths
        debug_bad = Cat(
            [(a.level == l) & (a.index >= depths[l]) for l in range(n_levels + 1)
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
        new_value = Signal(wl)
        leaf_index = Signal(cfg.node_index_width)
        write = Signal()
        m.d.comb += [
            new_value.eq(Mux(op == SumTreeOp.INSERT_MAX, max_now, sat)),
            leaf_index.eq(Mux(is_insert, ptr, Mux(is_sample, 0, a.index))),
            write.eq(is_insert | (is_update & ~leaf_bad)),
            leaf.lookup_addr.eq(Mux(a_insert, ptr, a.index) >> lk),   # a sample's: unused
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
        with m.If(is_insert):
            m.d.sync += [
                ptr.eq(Mux(ptr == cap - 1, 0, ptr + 1)),
                size.eq(Mux(size == cap, cap, size + 1)),
            ]
        with m.If(max_raise):
            m.d.sync += max_reg.eq(b.prio)

        # -- B, B2: old leaf value, forwarded from the writes in flight (youngest first) ---------
        # The lookup (address in stage A, data in B) sees every leaf write up to the previous
        # cycle's; the writes of the operations from stage B2 down to the leaf level's P stage
        # (``taps``, youngest first) are not in it yet. Stage A compares the leaf with the
        # records one stage younger (each moves on by one at the clock edge) and registers the
        # hits; stage B picks the youngest hit, or the lookup if none, as one-hot selects;
        # stage B2 selects, with the records moved on by one more (``taps2``).
        taps = [b2, c, mr, r1]
        for lvl in levels[:-1]:
            taps += [*_taps(lvl), lvl.o]
        taps.append(leaf.taps[0])
        ahead = [b] + taps[:-1]                 # in stage A's cycle, where ``taps`` will be
        taps2 = taps[1:] + [leaf.taps[1]]       # in stage B2's cycle
        # The leaf a write or read accesses (``leaf_index`` without the decode of a sample,
        # whose old value is not used).
        hit_index = Mux(a_insert, ptr, a.index)
        hits = Signal(len(taps) + 1)            # stage B; the top bit: the lookup (always)
        lane = Signal(k)                        # stage B; one-hot: the lookup's lane
        m.d.sync += [
            hits.eq(Cat(*(r.write & (r.index == hit_index) for r in ahead), 1)),
            lane.eq(Cat(hit_index[:lk] == j for j in range(k)) if k > 1 else 1),
        ]
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
        old = Signal(wl)
        c_old = Signal(wl)                      # stage C subtracts it
        m.d.comb += old.eq(_any_of([Mux(sel, r.prio, 0) for r, sel in zip(taps2, sel_tap)]
                                   + [Mux(sel, v, 0) for v, sel in zip(lanes, sel_lane)], wl))
        m.d.sync += [c.eq(b2), c_old.eq(old)]
        with m.If(b2.read):
            m.d.sync += c.value.eq(old)

        # -- C: root, PRNG, partial products of the target ----------------------------------------
        root_zero = root == 0
        empty_now = c.sample & root_zero
        x = Signal(tb)
        m.d.comb += [
            prng.seed.eq(self.seed),
            prng.load.eq(self.seed_load),
            prng.step.eq(c.sample & c.prng & ~root_zero),
            x.eq(Mux(c.prng, prng.word[PRNG_BITS - tb:], c.target[:tb])),
        ]
        partials = []
        for xa, sa in _chunks(x, _MUL_B_CHUNK):
            for ra, sr in _chunks(root, _MUL_A_CHUNK):
                pp = Signal(len(xa) + len(ra), name=f"pp_{sa}_{sr}")
                partials.append((pp, sa + sr))
                m.d.sync += pp.eq(xa * ra)
        delta = Signal(signed(wl + 1))
        m.d.comb += delta.eq(c.prio - c_old)
        m.d.sync += [mr.eq(c), mr.delta.eq(delta)]
        with m.If(c.write):
            m.d.sync += root.eq((root + delta)[:w0])
        with m.If(empty_now):
            m.d.sync += [mr.sample.eq(0), mr.empty.eq(1)]
        with m.If(c.debug & (c.level == 0)):
            m.d.sync += mr.value.eq(root)

        # -- M: t = (x_raw * root) >> target_bits -------------------------------------------------
        product = Signal(tb + w0)
        m.d.comb += product.eq(sum(pp << s for pp, s in partials))
        m.d.sync += r1.eq(mr)
        with m.If(mr.sample):
            m.d.sync += r1.target.eq(product[tb:])

        # -- sticky flags, RESET ------------------------------------------------------------------
        with m.If(self.clear):
            m.d.sync += [self.empty.eq(0), self.saturated.eq(0), self.invalid.eq(0)]
        with m.If(empty_now):
            m.d.sync += self.empty.eq(1)
        with m.If((write & (op != SumTreeOp.INSERT_MAX)) & over):
            m.d.sync += self.saturated.eq(1)
        with m.If(invalid_now):
            m.d.sync += self.invalid.eq(1)
        with m.If(accept & is_reset):
            m.d.sync += [
                sweeping.eq(1), sweep_cnt.eq(0), root.eq(0), ptr.eq(0), size.eq(0),
                max_reg.eq(cfg.one_raw),
            ]
        return m
