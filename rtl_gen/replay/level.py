"""One level of the K-ary sum tree: its memory, shared by the sampler and the updater."""

import functools
import operator

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, Value, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out
from amaranth.utils import ceil_log2

from sw.replay.spec import SumTreeConfig

from .layouts import op_layout

__all__ = ["SumTreeLevel", "prefix_sums", "sweep_width"]


def sweep_width(config: SumTreeConfig) -> int:
    """Bits of the clearing sweep's address: it counts the leaf level's groups."""
    return max(1, (config.level_groups[-1] - 1).bit_length())


def prefix_sums(m, values, width: int, *, name: str = "prefix") -> list:
    """Combinational: inclusive prefix sums of ``values``, each truncated to ``width`` bits.

    Sklansky's parallel prefix network: ``ceil(log2 n)`` adders deep, ``n/2`` adders per level.
    Every partial sum is a signal of module ``m`` (so that each adder exists once in the
    Verilog). The caller guarantees that no sum exceeds ``width`` bits.
    """
    out = [Value.cast(v) for v in values]
    span = 1
    while span < len(out):
        nxt = list(out)
        for i in range(len(out)):
            if (i // span) % 2:
                nxt[i] = Signal(width, name=f"{name}{span}_{i}")
                m.d.comb += nxt[i].eq(out[(i // span) * span - 1] + out[i])
        out, span = nxt, span * 2
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

    Three pipeline stages, one operation each, in the order the operations were issued:

    R (the record at ``i``)
        The group address is presented to the read port (samples: the node reached at level
        ``l - 1``; writes: the ancestor of the leaf at level ``l - 1``; DEBUG:
        ``index >> log2 K``). On the leaf level a write stores its new value here instead,
        through a lane-enabled write port that shares the address; leaf writes need no read
        because :class:`SumTree` already knows the old value. (So one operation never both
        reads and writes that port, and the lookup port's collisions with it are covered by
        :class:`SumTree`'s forwarding: the leaf ports need no transparency.)
    P (``tap_p``)
        The group word is available. Internal levels: a write adds its ``delta`` to its child and
        writes the word back in this cycle (read-modify-write: one adder and a ``fanout``-way
        multiplexer). The read port is transparent to that write, so the next operation, now in
        R, reads the updated word: back-to-back operations on one group need no stall. Samples
        compute the prefix sums ``P_j = c_0 + ... + c_j`` of the ``fanout`` children in parallel
        (:func:`prefix_sums`). DEBUG selects its node.
    S (``tap_s``)
        Samples compare all prefix sums with the remaining target ``t`` at once: ``d_j = t - P_j``
        for ``j < fanout - 1``; the child is the first ``j`` with ``P_j > t`` (strict-greater
        rule: its value ``P_j - P_{j-1} > 0``, a zero child is never taken), or the last child.
        The new target is ``d_{j-1}`` (``t`` for ``j = 0``) and the node ``fanout * n + j``; on
        the leaf level the child's value is the sampled priority.

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
        The operation after stage S, registered: 3 cycles after ``i``.
    tap_p, tap_s : ``Out(op_layout(config))``
        The operations in stages P and S (for the leaf-value forwarding of :class:`SumTree`).
    sweep : ``In(1)``
        Clearing sweep: write zero to word ``sweep_addr`` (if below the depth). Only used while
        the pipeline is empty.
    sweep_addr : ``In(sweep_width(config))``
    lookup_addr : ``In(max(1, ceil_log2(groups)))``, leaf level only
        Second read port of the leaf memory (non-transparent), for the old leaf value of a write.
    lookup_data : ``Out(fanout * priority_width)``, leaf level only
        The group word, one cycle after ``lookup_addr``.

    The stages never hold: latency 3 cycles, throughput one operation per cycle, for every
    operation.
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
            "tap_p":      Out(rec),
            "tap_s":      Out(rec),
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
        # memory, read combinationally one cycle after the address: the value a synchronous
        # read port transparent to the write would return (the leaf level's ports need no
        # transparency, see the class docstring, so they may see it too).
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
                rport = mem.read_port(transparent_for=(wport,))
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

        # -- P: the group word is here ------------------------------------------------------------
        p = self.tap_p
        m.d.sync += p.eq(i)
        children = lanes(rd_data)
        if not leaf:
            lane = (p.index >> below)[:lk] if k > 1 else Const(0, 1)
            old = Array(children)[lane] if k > 1 else children[0]
            new = Signal(w, name="rmw_new")
            m.d.comb += new.eq((old + p.delta)[:w])     # exact: the result fits the level
            word = Cat(Mux(lane == j, new, c) for j, c in enumerate(children))
            m.d.comb += [
                wr_addr.eq(Mux(self.sweep, sweep_addr, group_addr(p))),
                wr_data.eq(Mux(self.sweep, 0, word)),
                wr_en.eq(sweep_en | p.write),
            ]
        sums = prefix_sums(m, children, wp)
        s = self.tap_s
        s_pre = [Signal(wp, name=f"s_pre{j}") for j in range(k - 1)]
        s_child = [Signal(w, name=f"s_child{j}") for j in range(k)] if leaf else []
        m.d.sync += s.eq(p)
        m.d.sync += [a.eq(b) for a, b in zip(s_pre, sums)]
        m.d.sync += [a.eq(b) for a, b in zip(s_child, children)]
        with m.If(here(p)):
            m.d.sync += s.value.eq(Array(children)[p.index[:lk]] if k > 1 else children[0])

        # -- S: compare, select, descend ----------------------------------------------------------
        t = s.target[:wp]
        diffs = [Signal(wp + 1, name=f"s_diff{j}") for j in range(k - 1)]
        m.d.comb += [d.eq(t - pj) for d, pj in zip(diffs, s_pre)]
        le = Signal(k - 1, name="s_le")               # P_j <= t
        m.d.comb += le.eq(Cat(~d[wp] for d in diffs))
        onehot = Signal(k, name="s_onehot")           # the child taken
        m.d.comb += onehot.eq(Cat([~le[0]] + [le[j - 1] & ~le[j] for j in range(1, k - 1)]
                                  + [le[k - 2]]))
        child_idx = Cat(_any_of([oh for j, oh in enumerate(onehot) if (j >> b) & 1], 1)
                        for b in range(lk))
        t_new = _any_of([Mux(oh, t if j == 0 else diffs[j - 1][:w], 0)
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
