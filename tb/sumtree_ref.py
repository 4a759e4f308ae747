"""Sum tree RTL tests, shared part: commands, the golden reference of a command sequence, random
operation mixes. Used by both tiers (``tb/replay/test_sumtree_sim.py``: Amaranth simulator,
``tb/replay/test_sumtree_rtl.py``: cocotb + Verilator); ``tb/replay/test_sumtree_ref.py``
checks the helpers themselves.

A command is a tuple ``(op, level, index, priority, target)`` of ints (:class:`SumTreeOp` codes)
and a response a tuple ``(op, index, value, empty, invalid)``: the fields of
:func:`~rtl_gen.replay.command_layout` and :func:`~rtl_gen.replay.response_layout`.
:class:`Reference` turns a command sequence into the responses and flags that
:class:`sw.replay.sumtree.FixedSumTree` (executing the same operations one after another)
implies, so an RTL run is checked with ``assert rtl == reference``.
"""

import numpy as np
from amaranth.hdl import Shape

from rtl_gen.replay import RESPONDS, SumTreeOp, command_layout, response_layout
from sw.replay.spec import SumTreeConfig
from sw.replay.sumtree import FixedSumTree

OP = SumTreeOp
RESPONDING = frozenset(int(o.value) for o in RESPONDS)
_BATCHED = (OP.SAMPLE.value, OP.SAMPLE_PRNG.value, OP.UPDATE.value, OP.INSERT.value,
            OP.INSERT_MAX.value)


# -- commands ----------------------------------------------------------------------------------
def sample(x):
    return (OP.SAMPLE.value, 0, 0, 0, int(x))


def sample_prng():
    return (OP.SAMPLE_PRNG.value, 0, 0, 0, 0)


def update(index, priority):
    return (OP.UPDATE.value, 0, int(index), int(priority), 0)


def insert(priority=None):
    if priority is None:
        return (OP.INSERT_MAX.value, 0, 0, 0, 0)
    return (OP.INSERT.value, 0, 0, int(priority), 0)


def read(index):
    return (OP.READ.value, 0, int(index), 0, 0)


def debug(level, index):
    return (OP.DEBUG.value, int(level), int(index), 0, 0)


def reset():
    return (OP.RESET.value, 0, 0, 0, 0)


def dump(cfg: SumTreeConfig):
    """DEBUG reads of every word of every level, root first."""
    return [debug(l, i) for l, d in enumerate(cfg.level_depths) for i in range(d)]


def _width(field):
    return Shape.cast(field.shape).width


class Codec:
    """Packing of commands and unpacking of responses (plain shifts, fast enough for 10^5)."""

    def __init__(self, cfg: SumTreeConfig):
        self.cmd_layout = command_layout(cfg)
        self.rsp_layout = response_layout(cfg)
        self._cmd = [(f.offset, (1 << _width(f)) - 1) for _, f in self.cmd_layout]
        self._rsp = [(f.offset, (1 << _width(f)) - 1) for _, f in self.rsp_layout]
        assert [n for n, _ in self.cmd_layout] == ["op", "level", "index", "priority", "target"]
        assert [n for n, _ in self.rsp_layout] == ["op", "index", "value", "empty", "invalid"]

    def encode(self, cmd) -> int:
        word = 0
        for v, (off, mask) in zip(cmd, self._cmd):
            assert 0 <= v <= mask, (cmd, v, mask)
            word |= v << off
        return word

    def decode(self, word: int) -> tuple:
        return tuple((word >> off) & mask for off, mask in self._rsp)


# -- reference -----------------------------------------------------------------------------------
class Reference:
    """The responses and flags of a command sequence, from :class:`FixedSumTree`.

    Runs of one operation (samples, updates, inserts) go to the golden model as one batch: a
    batch behaves exactly as its operations one after another. ``invalid`` is tracked here (the
    golden model raises ``ValueError`` for bad indices; the RTL ignores the operation). RESET
    starts a new tree but keeps the PRNG state and the sticky flags, as the RTL does.
    """

    def __init__(self, cfg: SumTreeConfig, *, seed: int = 0):
        self.cfg = cfg
        self.tree = FixedSumTree(cfg, seed=seed)
        self.invalid = False

    @property
    def flags(self) -> dict:
        return {"empty": int(self.tree.empty), "saturated": int(self.tree.saturated),
                "invalid": int(self.invalid)}

    @property
    def status(self) -> dict:
        t = self.tree
        return {"total": int(t.total), "max_priority": int(t.max_priority),
                "write_pointer": t.write_pointer, "size": t.size}

    def clear_flags(self):
        self.tree.clear_flags()
        self.invalid = False

    def seed(self, seed: int):
        self.tree.prng.seed(seed)

    def run(self, cmds) -> list:
        cfg, out = self.cfg, []
        n, i = len(cmds), 0
        while i < n:
            op = cmds[i][0]
            j = i + 1
            bad = op == OP.UPDATE.value and cmds[i][2] >= cfg.capacity
            if op in _BATCHED and not bad:
                while (j < n and cmds[j][0] == op and j - i < cfg.max_batch
                       and not (op == OP.UPDATE.value and cmds[j][2] >= cfg.capacity)):
                    j += 1
            out += self._run(op, cmds[i:j])
            i = j
        return out

    def _run(self, op, run):
        t, cfg = self.tree, self.cfg
        if op in (OP.SAMPLE.value, OP.SAMPLE_PRNG.value):
            if op == OP.SAMPLE.value:
                idx, pri = t.sample_fractions(np.array([c[4] for c in run], dtype=np.int64))
            else:
                idx, pri = t.sample(len(run))
            if not len(idx):
                return [(op, 0, 0, 1, 0)] * len(run)
            return [(op, int(a), int(b), 0, 0) for a, b in zip(idx, pri)]
        if op == OP.UPDATE.value:
            if run[0][2] >= cfg.capacity:
                self.invalid = True
                return []
            t.update(np.array([c[2] for c in run], dtype=np.int64),
                     np.array([c[3] for c in run], dtype=np.int64))
            return []
        if op == OP.INSERT.value:
            p = np.array([c[3] for c in run], dtype=np.int64)
            slots = t.insert(priorities=p)
            vals = cfg.priority_format.saturate(p)[0]
            return [(op, int(s), int(v), 0, 0) for s, v in zip(slots, vals)]
        if op == OP.INSERT_MAX.value:
            value = int(t.max_priority)
            slots = t.insert(len(run))
            return [(op, int(s), value, 0, 0) for s in slots]
        (_, level, index, _, _), = run
        if op == OP.READ.value:
            if index >= cfg.capacity:
                self.invalid = True
                return [(op, index, 0, 0, 1)]
            return [(op, index, int(t.get([index])[0]), 0, 0)]
        if op == OP.DEBUG.value:
            if level > cfg.levels or index >= cfg.level_depths[level]:
                self.invalid = True
                return [(op, index, 0, 0, 1)]
            return [(op, index, int(t.levels[level][index]), 0, 0)]
        if op == OP.RESET.value:
            new = FixedSumTree(cfg)
            new.prng, new.empty, new.saturated = t.prng, t.empty, t.saturated
            self.tree = new
            return []
        raise AssertionError(f"unknown op {op}")


# -- random operation mixes --------------------------------------------------------------------
MIX = {"sample": 3, "sample_prng": 2, "update": 4, "insert": 1, "insert_max": 1, "read": 1,
       "debug": 1}


def random_ops(cfg: SumTreeConfig, rng, n: int, *, mix=None, p_dup=0.25, p_invalid=0.02,
               p_zero=0.15, p_sat=0.03, small=False) -> list:
    """``n`` random commands: a mix of every operation (``mix``: relative weights), updates that
    repeat the previous index back to back (``p_dup``), zero and saturating priorities,
    out-of-range indices and extreme targets. ``small`` draws small priorities (sums of few
    leaves then decide the samples, and zero children are frequent)."""
    mix = dict(MIX, **(mix or {}))
    names = list(mix)
    weights = np.array([mix[k] for k in names], dtype=float)
    kinds = rng.choice(len(names), size=n, p=weights / weights.sum())
    cap, pw = cfg.capacity, cfg.priority_width
    leaf_max, in_max = cfg.priority_format.max_raw, cfg.input_format.max_raw
    idx_top = 1 << cfg.node_index_width
    tmax = (1 << cfg.target_bits) - 1
    last = 0
    out = []

    def priority():
        u = rng.random()
        if u < p_zero:
            return 0
        if u < p_zero + p_sat and in_max > leaf_max:
            return int(rng.integers(leaf_max + 1, in_max + 1))
        if small:
            return int(rng.integers(1, 8))
        return int(rng.integers(1, leaf_max + 1)) >> int(rng.integers(0, pw))

    def index():
        nonlocal last
        if rng.random() < p_invalid and idx_top > cap:
            return int(rng.integers(cap, idx_top))
        if rng.random() >= p_dup:
            last = int(rng.integers(0, cap))
        return last

    for kind in kinds:
        name = names[kind]
        if name == "sample":
            u = rng.random()
            out.append(sample(0 if u < 0.05 else tmax if u < 0.1 else rng.integers(0, tmax + 1)))
        elif name == "sample_prng":
            out.append(sample_prng())
        elif name == "update":
            out.append(update(index(), priority()))
        elif name == "insert":
            out.append(insert(priority()))
        elif name == "insert_max":
            out.append(insert())
        elif name == "read":
            out.append(read(index()))
        else:
            level = int(rng.integers(0, cfg.levels + 1))
            if rng.random() < p_invalid and (1 << cfg.level_select_width) > cfg.levels + 1:
                level = cfg.levels + 1
            depth = cfg.level_depths[min(level, cfg.levels)]
            hi = idx_top if rng.random() < p_invalid else depth
            out.append(debug(level, int(rng.integers(0, hi))))
    return out


def check_tree_dump(cfg: SumTreeConfig, responses, ref: Reference):
    """Responses of :func:`dump` equal the golden levels, and each node is the sum of its
    children (the tree invariant, checked on the RTL's own values)."""
    vals = [r[2] for r in responses]
    assert all(r[0] == OP.DEBUG.value and not r[4] for r in responses)
    levels, pos = [], 0
    for d in cfg.level_depths:
        levels.append(np.array(vals[pos:pos + d], dtype=np.int64))
        pos += d
    for l, (got, want) in enumerate(zip(levels, ref.tree.levels)):
        bad = np.flatnonzero(got != want)
        assert not bad.size, f"level {l} word {bad[0]}: rtl {got[bad[0]]} golden {want[bad[0]]}"
    k = cfg.fanout
    for l in range(cfg.levels, 0, -1):
        sums = levels[l].reshape(-1, k).sum(axis=1)
        assert np.array_equal(levels[l - 1][:sums.size], sums), f"level {l - 1} != sum of {l}"
        assert not levels[l - 1][sums.size:].any()
    assert not levels[-1][cfg.capacity:].any(), "an unused leaf is not zero"
