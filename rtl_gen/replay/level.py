"""One level of the K-ary sum tree: its memory, shared by the sampler and the updater."""

import functools
import operator

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, Value, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from sw.replay.spec import SumTreeConfig

from .layouts import op_layout

__all__ = ["SumTreeLevel", "prefix_sums", "sweep_width"]


def sweep_width(config: SumTreeConfig) -> int:
    """Bits of the clearing sweep's address: it counts the leaf level's groups."""
    return max(1, (config.level_groups[-1] - 1).bit_length())


def prefix_sums(m, values, width: int, *, name: str = "prefix", spans=None) -> list:
    """Combinational: inclusive prefix sums of ``values``, each truncated to ``width`` bits.

    Sklansky's parallel prefix network: ``ceil(log2 n)`` adders deep, ``n/2`` adders per level.
    Every partial sum is a signal of module ``m`` (so that each adder exists once in the
    Verilog). The caller guarantees that no sum exceeds ``width`` bits. ``spans`` (powers of
    two) selects the adder levels to build (default all: 1, 2, 4, ...): the network of spans
    ``(1, 2)`` followed by that of ``(4, 8)`` on its outputs is the whole network of 16 values,
    so a caller can put registers between its levels.
    """
    out = [Value.cast(v) for v in values]
    if spans is None:
        spans = [1 << b for b in range(max(0, (len(out) - 1).bit_length()))]
    for span in spans:
        if span >= len(out):
            break
        nxt = list(out)
        for i in range(len(out)):
            if (i // span) % 2:
                nxt[i] = Signal(width, name=f"{name}{span}_{i}")
                m.d.comb += nxt[i].eq(out[(i // span) * span - 1] + out[i])
        out = nxt
    return out


def _any_of(terms, width):
    """OR of ``terms`` (already gated to zero when not selected), as ``width`` bits."""
    return functools.reduce(operator.or_, terms, Const(0, width))[:width]


class SumTreeLevel(wiring.Component):
    """Level ``l`` (1..levels) of :class:`~rtl_gen.replay.sumtree.SumTree`.

    Storage: one :class:`~amaranth.lib.memory.Memory` of ``config.level_groups[l]`` words; a
    word is one group of ``fanout`` siblings, ``fanout * level_widths[l]`` bits, child ``j`` in
    bits ``j*w .. (j+1)*w - 1``. The group of node ``n`` of level ``l - 1`` is word ``n``. A
    level of one group (level 1 always) is a register. Internal levels use one read port and
    one write port (simple dual port); the leaf level one read-or-write port (stage R) and a
    read-only lookup port for :class:`SumTree`'s stage A (true dual port).

    ``config.level_latency`` pipeline stages (9 at K = 16), one operation each, in the order
    the operations were issued:

    R (the record at ``i``)
        The group address is presented to the read port (samples: the node reached at level
        ``l - 1``; writes: the ancestor of the leaf at level ``l - 1``; DEBUG:
        ``index >> log2 K``). On the leaf level a write stores its new value here instead,
        through a lane-enabled write port that shares the address; leaf writes need no read
        because :class:`SumTree` already knows the old value. (So one operation never both
        reads and writes that port, and the lookup port's collisions with it are covered by
        :class:`SumTree`'s forwarding: the leaf ports need no transparency.)
    P (``taps[0]``)
        The group word is available. Internal levels: a write adds its ``delta`` to its child and
        writes the word back in this cycle (read-modify-write: one adder and a ``fanout``-way
        multiplexer). The read port is transparent to that write, so the next operation, now in
        R, reads the updated word: back-to-back operations on one group need no stall. The word
        is registered as it is (DEBUG selects its node): what the operation must see is in it,
        and the samples' arithmetic runs from that register on.
    Q1 .. Qn (``taps[2]`` .. ``taps[n + 1]``, ``n = config.prefix_stages``)
        Samples compute the prefix sums ``P_j = c_0 + ... + c_j`` of the ``fanout`` children in
        parallel (:func:`prefix_sums`), one adder level per stage, registered between them.
    C (``taps[n + 2]``)
        Samples compare all prefix sums with the remaining target ``t`` at once: ``d_j = t - P_j``
        for ``j < fanout - 1``, registered with their signs (``P_j <= t``).
    S (``taps[n + 3]``)
        The child is the first ``j`` with ``P_j > t`` (strict-greater rule: its value
        ``P_j - P_{j-1} > 0``, a zero child is never taken), or the last child. The new target
        is ``d_{j-1}`` (``t`` for ``j = 0``) and the node ``fanout * n + j``; on the leaf level
        the child's value is the sampled priority.

    Parameters
    ----------
    config : SumTreeConfig
    level : int
        1..``config.levels`` (the root is a register of :class:`SumTree`).

    Members
    -------
    i : ``In(op_layout(config))``
        The operation in stage R (the previous stage's register).
    o : ``Out(op_layout(config))``
        The operation after stage S, registered: ``config.level_latency`` cycles after ``i``.
    taps : ``Out(ArrayLayout(op_layout(config), config.level_latency - 1))``
        The operations in stages P, Q, Q0, Q1 .. Qn, C and S (for the leaf-value forwarding of
        :class:`SumTree`).
    sweep : ``In(1)``
        Clearing sweep: write zero to word ``sweep_addr`` (if below the depth). Only used while
        the pipeline is empty.
    sweep_addr : ``In(sweep_width(config))``
    lookup_addr : ``In(max(1, ceil_log2(groups)))``, leaf level only
        Second read port of the leaf memory (non-transparent), for the old leaf value of a write.
    lookup_data : ``Out(fanout * priority_width)``, leaf level only
        The group word, one cycle after ``lookup_addr``.

    The stages never hold: latency ``config.level_latency`` cycles, throughput one operation
    per cycle, for every operation.
    """

    def __init__(self, config: SumTreeConfig, *, level: int):
        if not isinstance(config, SumTreeConfig):
            raise TypeError(f"config must be a SumTreeConfig, not {config!r}")
        if (not isinstance(level, int) or isinstance(level, bool)
                or not 1 <= level <= config.levels):
            raise ValueError(f"level must be an integer in 1..{config.levels}, not {level!r}")
        self._config = config
        self._level = level
        rec = op_layout(config)
        members = {
            "i":          In(rec),
            "o":          Out(rec),
            "taps":       Out(data.ArrayLayout(rec, config.level_latency - 1)),
            "sweep":      In(1),
            "sweep_addr": In(unsigned(sweep_width(config))),
        }
        if self.is_leaf:
            w = config.fanout * config.priority_width
            members.update({
                "lookup_addr": In(unsigned(max(1, ceil_log2(config.level_groups[level])))),
                "lookup_data": Out(unsigned(w)),
            })
        super().__init__(members)

    @property
    def config(self) -> SumTreeConfig:
        return self._config

    @property
    def level(self) -> int:
        return self._level

    @property
    def is_leaf(self) -> bool:
        return self._level == self._config.levels

    def elaborate(self, platform):
        m = Module()
        cfg, l = self._config, self._level
        k, lk, n_levels = cfg.fanout, cfg.log2_fanout, cfg.levels
        w, wp = cfg.level_widths[l], cfg.level_widths[l - 1]
        groups = cfg.level_groups[l]
        aw = max(1, ceil_log2(groups))      # a 1-group level keeps a (constant) 1-bit address
        below = lk * (n_levels - l)        # leaf-index bits below a node of this level
        leaf = self.is_leaf
        i = self.i

        # Storage ports. A level of one group (always level 1) is a register instead of a
        # memory, read combinationally one cycle after the address: it may return a write the
        # memory's read port would not yet (stage Q forwards that write's word anyway, and the
        # leaf level's ports need no transparency, see the class docstring).
        lanes_en = k if leaf else 1
        wr_addr, rd_addr = Signal(aw, name="wr_addr"), Signal(aw, name="rd_addr")
        wr_data, rd_data = Signal(k * w, name="wr_data"), Signal(k * w, name="rd_data")
        wr_en = Signal(lanes_en, name="wr_en")
        if groups > 1:
            mem = Memory(shape=unsigned(k * w), depth=groups, init=[])
            m.submodules.mem = mem
            if leaf:
                wport = mem.write_port(granularity=w)
                rport = mem.read_port()
                lport = mem.read_port()
                m.d.comb += [lport.addr.eq(self.lookup_addr), self.lookup_data.eq(lport.data)]
            else:
                wport = mem.write_port()
                rport = mem.read_port()         # not transparent: stage Q forwards
            m.d.comb += [
                wport.addr.eq(wr_addr), wport.data.eq(wr_data), wport.en.eq(wr_en),
                rport.addr.eq(rd_addr), rd_data.eq(rport.data),
            ]
        else:
            word = Signal(k * w, name="word")
            m.d.comb += rd_data.eq(word)
            if leaf:
                m.d.comb += self.lookup_data.eq(word)
            for j in range(lanes_en):
                span = slice(j * w, (j + 1) * w) if leaf else slice(0, k * w)
                with m.If(wr_en[j]):
                    m.d.sync += word[span].eq(wr_data[span])

        def here(r):
            return r.debug & (r.level == l)

        def group_addr(r):
            """Word of this level that the operation in record ``r`` accesses."""
            write_addr = r.index >> (below + lk)
            return Mux(r.sample, r.index, Mux(here(r), r.index >> lk, write_addr))[:aw]

        def lanes(word):
            return [word[j * w:(j + 1) * w] for j in range(k)]

        if (1 << len(self.sweep_addr)) > groups:
            sweep_en = self.sweep & (self.sweep_addr < groups)
        else:
            sweep_en = self.sweep
        sweep_addr = self.sweep_addr[:aw]

        # -- R: address; the leaf level also writes here ------------------------------------------
        r_addr = Signal(aw, name="r_addr")
        m.d.comb += r_addr.eq(group_addr(i))
        if leaf:
            # One address for the read and the write: a read-or-write port.
            lane_dec = Cat(i.index[:lk] == j for j in range(k)) if k > 1 else Const(1, 1)
            m.d.comb += [
                rd_addr.eq(Mux(self.sweep, sweep_addr, r_addr)),
                wr_addr.eq(rd_addr),
                wr_data.eq(Mux(self.sweep, 0, Cat(i.prio for _ in range(k)))),
                wr_en.eq(Mux(sweep_en, (1 << k) - 1, Mux(i.write, lane_dec, 0))),
            ]
        else:
            m.d.comb += rd_addr.eq(r_addr)

        # -- P: the group word is here; registered as read ------------------------------------
        p, q = self.taps[0], self.taps[1]
        m.d.sync += p.eq(i)
        pw = Signal(k * w, name="p_word")
        m.d.sync += [pw.eq(rd_data), q.eq(p)]
        # The group addresses of stages P, Q and the one after, registered from stage R's.
        p_addr, q_addr, o_addr = (Signal(aw, name=f"{n}_addr") for n in ("p", "q", "q0"))
        m.d.sync += [p_addr.eq(r_addr), q_addr.eq(p_addr), o_addr.eq(q_addr)]

        # -- Q: the word with the writes it missed; read-modify-write ---------------------------
        # The read (end of stage R) missed the writes of the two operations ahead, which write
        # at the end of their stage Q: the one in Q during this operation's P (written then)
        # and the one a stage further (written at the same clock edge as the read). Their
        # words are registered (``q_w1``, ``q_w2``), and stage P decides which of them hit.
        # A level's leaf writes happen in stage R instead and are all seen by the read.
        if leaf:
            children = lanes(pw)
        else:
            q_w1 = Signal(k * w, name="q_w1")           # the word written one cycle ago
            q_w2 = Signal(k * w, name="q_w2")           # two cycles ago
            hit1, hit2 = Signal(name="q_hit1"), Signal(name="q_hit2")
            older = self.taps[2]
            m.d.sync += [
                hit1.eq(q.write & (q_addr == p_addr)),
                hit2.eq(older.write & (o_addr == p_addr)),
            ]
            word = Signal(k * w, name="q_word")
            m.d.comb += word.eq(Mux(self.sweep, 0, Mux(hit1, q_w1, Mux(hit2, q_w2, pw))))
            children = lanes(word)
            # Every lane adds the delta masked to its own lane: no ``fanout``-way multiplexer
            # between the word and the adders (one adder per lane instead of one per level).
            lane = (q.index >> below)[:lk] if k > 1 else Const(0, 1)
            new_word = Signal(k * w, name="q_new")
            m.d.comb += new_word.eq(Cat(
                (c + Mux(q.write & (lane == j), q.delta, 0))[:w]       # exact: fits the level
                for j, c in enumerate(children)))
            m.d.sync += [q_w1.eq(new_word), q_w2.eq(q_w1)]
            m.d.comb += [
                wr_addr.eq(Mux(self.sweep, sweep_addr, q_addr)),
                wr_data.eq(new_word),
                wr_en.eq(sweep_en | q.write),
            ]
        # The children as this operation must see them (later writes are not its to see): the
        # samples' arithmetic runs from this register on.
        q0 = self.taps[2]
        vals = [Signal(w, name=f"q_child{j}") for j in range(k)]
        m.d.sync += q0.eq(q)
        m.d.sync += [a.eq(b) for a, b in zip(vals, children)]
        with m.If(here(q)):                             # DEBUG selects its node
            m.d.sync += q0.value.eq(Array(children)[q.index[:lk]] if k > 1 else children[0])
        q = q0

        # -- Q: the prefix sums, one adder level of Sklansky's network per stage ------------------
        kept = [Value.cast(v) for v in vals] if leaf else []     # the leaf's values, carried
        span = 1
        for st in range(cfg.prefix_stages):
            vals = prefix_sums(m, vals, wp, name=f"q{st}_prefix", spans=(span,))
            span *= 2
            nxt = self.taps[3 + st]
            regs = [Signal(wp, name=f"q{st + 1}_pre{j}") for j in range(k - 1)]
            m.d.sync += nxt.eq(q)
            m.d.sync += [a.eq(b) for a, b in zip(regs, vals)]
            if leaf:
                kregs = [Signal(w, name=f"q{st + 1}_child{j}") for j in range(k)]
                m.d.sync += [a.eq(b) for a, b in zip(kregs, kept)]
                kept = kregs
            vals, q = regs, nxt
        s, s_pre, s_child = q, vals, kept

        # -- C: compare: every prefix sum with the target at once, registered ------------------
        t = s.target[:wp]
        diffs = [Signal(wp + 1, name=f"c_diff{j}") for j in range(k - 1)]
        m.d.comb += [d.eq(t - pj) for d, pj in zip(diffs, s_pre)]
        c = self.taps[3 + cfg.prefix_stages]
        le = Signal(k - 1, name="s_le")               # P_j <= t
        s_diff = [Signal(w, name=f"s_diff{j}") for j in range(k - 1)]
        m.d.sync += [c.eq(s), le.eq(Cat(~d[wp] for d in diffs))]
        m.d.sync += [a.eq(d[:w]) for a, d in zip(s_diff, diffs)]
        if leaf:
            c_child = [Signal(w, name=f"s_child{j}") for j in range(k)]
            m.d.sync += [a.eq(b) for a, b in zip(c_child, s_child)]
            s_child = c_child
        s = c

        # -- S: select, descend ------------------------------------------------------------------
        onehot = Signal(k, name="s_onehot")           # the child taken
        m.d.comb += onehot.eq(Cat([~le[0]] + [le[j - 1] & ~le[j] for j in range(1, k - 1)]
                                  + [le[k - 2]]))
        child_idx = Cat(_any_of([oh for j, oh in enumerate(onehot) if (j >> b) & 1], 1)
                        for b in range(lk))
        t_new = _any_of([Mux(oh, s.target[:w] if j == 0 else s_diff[j - 1], 0)
                         for j, oh in enumerate(onehot)], w)
        o = self.o
        m.d.sync += o.eq(s)
        with m.If(s.sample):
            m.d.sync += [
                o.index.eq(Cat(child_idx, s.index)),
                o.target.eq(t_new),
            ]
            if leaf:
                m.d.sync += o.value.eq(_any_of([Mux(oh, c, 0) for oh, c in zip(onehot, s_child)],
                                               w))
        return m
