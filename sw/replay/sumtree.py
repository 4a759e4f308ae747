"""Golden models of the K-ary sum tree for prioritized replay (CF'22 Sec. 3.1, PAAL Sec. IV).

* :class:`SumTree` -- float64 tree (any numpy dtype), the CPU replay buffer's default backend.
* :class:`FixedSumTree` -- bit-exact model of the RTL: raw unsigned fixed-point integers with the
  per-level widths of :class:`~sw.replay.spec.SumTreeConfig`, saturation flags, the integer
  target computation and the on-chip xorshift32 PRNG.
* :func:`prefix_sum_index` -- the flat O(N) specification of sampling the tree must match.
* :class:`~sw.replay.prng.Xorshift32`, :func:`~sw.replay.prng.fixed_targets` -- the on-chip PRNG
  and the integer targets (:mod:`sw.replay.prng`, re-exported here).

Operations (both trees, all vectorised over a batch, level by level)
--------------------------------------------------------------------
Sample
    For a target ``t`` in ``[0, total)`` return the smallest leaf index ``i`` whose *inclusive*
    prefix sum ``P(0) + ... + P(i)`` is strictly greater than ``t``, and ``P(i)``. Hence
    ``P(i) > 0`` always: a leaf with priority zero is never returned (PAAL's ``>=`` rule would
    return leaf 0 for ``t = 0`` even when ``P(0) = 0``). At each level the descent picks the
    first child ``j`` of the current node whose running sum ``c_0 + ... + c_j`` exceeds ``t``
    and subtracts ``c_0 + ... + c_{j-1}`` from ``t``. With every priority zero no sample is
    drawn: the result is empty and the sticky ``empty`` flag is raised.
Update
    Set the priority of leaf ``i``; every ancestor changes by the difference. A batch behaves as
    the same updates applied one after another in batch order: for a repeated index the last
    write wins, and the maximum-priority register sees every value, overwritten ones included.
Insert
    Write the next slot in FIFO order (wrapping at ``capacity``) with the maximum priority seen
    so far (register reset to 1.0) or with given priorities.
Read
    :meth:`SumTree.get` returns leaf priorities.

Layout (PAAL Sec. IV-C.4)
-------------------------
All levels live in one flat array: the root padded to a group of ``fanout`` words, then each
level in turn. Every level starts at a multiple of ``fanout`` words, so the ``fanout`` children
of a node are contiguous and, with the array aligned to 64 bytes, a sibling group of 8-byte
words fills whole cache lines for ``fanout >= 8`` and never straddles one for ``fanout < 8``.
Children of node ``p`` of level ``l`` are nodes ``fanout * p + j`` of level ``l + 1``.

Float tree versus fixed tree
----------------------------
The fixed tree's sums are exact integers, so "each node equals the sum of its children" holds
with ``==`` forever. The float tree recomputes a parent as the left-to-right float sum of its
children (the same order the descent accumulates in), so it has no accumulated drift either, but
the float subtraction in the descent can overshoot a group; the descent then takes the last
non-zero child, which only happens for targets within rounding of the end of a group.
"""

import numpy as np

from sw.replay.spec import SumTreeConfig, check_fanout, tree_shape

from .prng import Xorshift32, fixed_targets, xorshift32

__all__ = [
    "xorshift32", "Xorshift32", "fixed_targets", "prefix_sum_index", "aligned_zeros",
    "SumTree", "FixedSumTree",
]

#: Batches (or groups) from this size on are summed child by child over the whole batch, which
#: is faster in numpy than a cumulative sum along short rows; the additions are the same.
_COLUMN_LOOP = 512


def prefix_sum_index(leaves, targets) -> np.ndarray:
    """Specification of sampling: smallest ``i`` with ``sum(leaves[:i+1]) > t``, per target.

    O(N) per call (a cumulative sum and a binary search); exact for integer leaves.
    """
    cs = np.cumsum(np.asarray(leaves))
    return np.searchsorted(cs, np.asarray(targets), side="right").astype(np.int64)


def aligned_zeros(n: int, dtype, *, align: int = 64) -> np.ndarray:
    """Zeroed 1-D array whose first element sits on an ``align``-byte boundary."""
    dtype = np.dtype(dtype)
    raw = np.zeros(n * dtype.itemsize + align, dtype=np.uint8)
    start = (-raw.ctypes.data) % align
    return raw[start:start + n * dtype.itemsize].view(dtype)


# -- trees ----------------------------------------------------------------------------------------
class SumTree:
    """K-ary sum tree with vectorised batch operations, float64 by default.

    Parameters
    ----------
    fanout : int
        Children per node, a power of two in 2..64.
    capacity : int
        Leaves in use, >= 1.
    dtype : numpy dtype
        Type of every node (float64 default; int64 for exact integer priorities).
    seed : int
        Seed of :attr:`rng` (``np.random.default_rng``), used by :meth:`sample`.

    Members
    -------
    rng : the ``np.random.Generator`` of :meth:`sample`.
    total : root value, the sum of all priorities.
    max_priority : the maximum-priority register (largest value ever written; reset 1.0).
    size : leaves inserted so far, at most ``capacity``.
    write_pointer : slot the next :meth:`insert` writes.
    empty : sticky flag, a sample was requested while every priority was zero.
    """

    def __init__(self, *, fanout: int = 16, capacity: int, dtype=np.float64, seed: int = 0):
        check_fanout(fanout)
        if not isinstance(capacity, (int, np.integer)) or capacity < 1:
            raise ValueError(f"capacity must be a positive integer, not {capacity!r}")
        self._k = int(fanout)
        self._n = int(capacity)
        self._dtype = np.dtype(dtype)
        self._exact = self._dtype.kind in "iu"
        self._nlevels, depths = tree_shape(self._k, self._n)
        offsets = [0]
        pos = self._k                                   # root padded to a group of K
        for depth in depths[1:]:
            offsets.append(pos)
            pos += depth
        self._flat = aligned_zeros(pos, self._dtype)
        self._offsets = tuple(offsets)
        self._levels = [self._flat[o:o + d] for o, d in zip(offsets, depths)]
        self._groups = [None] + [lvl.reshape(-1, self._k) for lvl in self._levels[1:]]
        self._max = self._dtype.type(self._one())
        self._ptr = 0
        self._size = 0
        self.empty = False
        self.rng = np.random.default_rng(seed)

    def _one(self):
        return 1.0

    # -- description ------------------------------------------------------------------------------
    @property
    def fanout(self) -> int:
        return self._k

    @property
    def capacity(self) -> int:
        return self._n

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @property
    def n_levels(self) -> int:
        """Levels below the root."""
        return self._nlevels

    @property
    def level_offsets(self) -> tuple:
        """Start of each level in :attr:`flat`, root first (multiples of ``fanout``)."""
        return self._offsets

    @property
    def flat(self) -> np.ndarray:
        """The whole tree in its cache-aligned layout (read-only view)."""
        return self._readonly(self._flat)

    @property
    def levels(self) -> tuple:
        """One read-only array per level, root first; the last is the leaf level."""
        return tuple(self._readonly(lvl) for lvl in self._levels)

    @property
    def leaves(self) -> np.ndarray:
        """Leaf priorities ``0..capacity-1`` (read-only view)."""
        return self._readonly(self._levels[-1][:self._n])

    @staticmethod
    def _readonly(a):
        v = a.view()
        v.flags.writeable = False
        return v

    @property
    def total(self):
        return self._levels[0][0].item()

    @property
    def max_priority(self):
        return self._max.item()

    def set_max_priority(self, value):
        """Overwrite the maximum-priority register."""
        self._max = self._dtype.type(self._check_values(np.asarray([value]))[0])

    @property
    def size(self) -> int:
        return self._size

    @property
    def write_pointer(self) -> int:
        return self._ptr

    def clear_flags(self):
        self.empty = False

    # -- checks -----------------------------------------------------------------------------------
    def _check_indices(self, indices):
        idx = np.asarray(indices)
        if idx.dtype.kind not in "iu" and idx.size:
            raise ValueError(f"indices must be integers, not {idx.dtype}")
        idx = idx.astype(np.int64).reshape(-1)
        if idx.size and (idx.min() < 0 or idx.max() >= self._n):
            raise ValueError(f"indices must be in 0..{self._n - 1}")
        return idx

    def _check_values(self, values):
        v = np.asarray(values).reshape(-1)
        if self._exact:
            if v.size and v.dtype.kind not in "iu":
                raise ValueError(f"priorities must be integers, not {v.dtype}")
        else:
            v = v.astype(np.float64)
            if not np.all(np.isfinite(v)):
                raise ValueError("priorities must be finite and non-negative")
        if v.size and v.min() < 0:
            raise ValueError("priorities must be finite and non-negative")
        return v.astype(self._dtype)

    def check_invariants(self):
        """Raise ``AssertionError`` unless every node equals the sum of its children (exactly,
        in the tree's summation order) and the unused leaves are zero."""
        for l in range(self._nlevels, 0, -1):
            sums = self._group_sums(self._groups[l])
            parent = self._levels[l - 1]
            if np.any(parent[len(sums):] != 0):
                raise AssertionError(f"a node of level {l - 1} without children is not zero")
            bad = np.flatnonzero(parent[:len(sums)] != sums)
            if bad.size:
                p = int(bad[0])
                raise AssertionError(f"level {l - 1} node {p} = {parent[p]!r}, "
                                     f"sum of children = {sums[p]!r}")
        if np.any(self._levels[-1][self._n:] != 0):
            raise AssertionError("an unused leaf is not zero")

    # -- operations -------------------------------------------------------------------------------
    def get(self, indices) -> np.ndarray:
        """Priorities of leaves ``indices``."""
        return self._levels[-1][self._check_indices(indices)].copy()

    def update(self, indices, priorities):
        """Set leaf priorities; a batch acts as sequential updates (last write wins)."""
        self.propagate(self.write_leaves(indices, priorities))

    def write_leaves(self, indices, priorities) -> np.ndarray:
        """First half of :meth:`update`: check, write the leaves and the maximum-priority
        register, leave the ancestors stale. Returns the sorted distinct indices written, for
        :meth:`propagate`. Split so a thread-safe caller can hold a leaf lock for this half only
        (PAAL Alg. 3)."""
        idx = self._check_indices(indices)
        vals = self._check_values(priorities)
        if vals.shape != idx.shape:
            raise ValueError(f"indices and priorities must have one length, not {idx.size} "
                             f"and {vals.size}")
        return self._store(idx, vals)

    def _store(self, idx, vals):
        if not idx.size:
            return idx
        self._max = max(self._max, vals.max())
        # Last write wins: sort (index, position) keys, keep the last position of each index.
        n = idx.size
        key = np.sort(idx * n + np.arange(n, dtype=np.int64))
        uniq = key // n
        last = np.ones(n, dtype=bool)
        last[:-1] = uniq[1:] != uniq[:-1]
        uniq = uniq[last]
        self._levels[-1][uniq] = vals[key[last] % n]
        return uniq

    def _group_sums(self, groups):
        """Parent values of sibling groups ``(P, K)``: exact for integers; for floats the
        left-to-right sum, the order in which :meth:`_descend` accumulates."""
        if self._exact:
            return groups.sum(axis=1)
        if len(groups) < _COLUMN_LOOP:
            return np.cumsum(groups, axis=1)[:, -1]
        acc = groups[:, 0].copy()                      # same order, faster for many groups
        for c in range(1, self._k):
            acc += groups[:, c]
        return acc

    def propagate(self, idx):
        """Second half of :meth:`update`: recompute the ancestors of sorted distinct leaves
        ``idx``, level by level."""
        nodes = np.asarray(idx, dtype=np.int64)
        for l in range(self._nlevels, 0, -1):
            if not nodes.size:
                return
            parents = nodes // self._k
            keep = np.ones(parents.size, dtype=bool)
            keep[1:] = parents[1:] != parents[:-1]
            parents = parents[keep]
            self._levels[l - 1][parents] = self._group_sums(self._groups[l][parents])
            nodes = parents

    def update_sequential(self, index: int, priority):
        """Reference scalar update, PAAL Alg. 2: add the change to the leaf and each ancestor."""
        index = int(self._check_indices([index])[0])
        value = self._check_values([priority])[0]
        self._max = max(self._max, value)
        delta = value - self._levels[-1][index]
        node = index
        for l in range(self._nlevels, -1, -1):
            self._levels[l][node] += delta
            node //= self._k

    def insert(self, count: int | None = None, *, priorities=None) -> np.ndarray:
        """Write the next slots in FIFO order; returns their indices.

        Parameters
        ----------
        count : int, optional
            Slots to write, all with the maximum priority seen so far.
        priorities : array, optional
            Priorities of the slots (instead of ``count``).
        """
        if (count is None) == (priorities is None):
            raise ValueError("give exactly one of count and priorities")
        if priorities is None:
            if not isinstance(count, (int, np.integer)) or count < 0:
                raise ValueError(f"count must be a non-negative integer, not {count!r}")
            vals = np.full(int(count), self._max, dtype=self._dtype)
        else:
            vals = self._check_values(priorities)
        slots = (self._ptr + np.arange(vals.size, dtype=np.int64)) % self._n
        self._ptr = int((self._ptr + vals.size) % self._n)
        self._size = min(self._n, self._size + vals.size)
        self.propagate(self._store(slots, vals))
        return slots

    def find(self, targets):
        """Leaves for absolute targets in ``[0, total)``: ``(indices, priorities)``.

        Returns empty arrays and raises the ``empty`` flag if every priority is zero.
        """
        t = np.asarray(targets, dtype=self._dtype).reshape(-1)
        total = self._levels[0][0]
        if total <= 0:
            self.empty = True
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=self._dtype)
        hi_ok = (t < total) if self._exact else (t <= total)
        if t.size and (t.min() < 0 or not np.all(hi_ok)):
            raise ValueError(f"targets must be in [0, total) = [0, {total.item()!r})")
        return self._descend(t)

    def sample_fractions(self, x):
        """Leaves for target fractions ``x`` in [0, 1) of the total: ``(indices, priorities)``.

        ``t = x * total`` in float64; see :meth:`find`.
        """
        x = np.asarray(x, dtype=np.float64).reshape(-1)
        if x.size and (x.min() < 0 or x.max() >= 1):
            raise ValueError("x must be in [0, 1)")
        total = self._levels[0][0]
        return self.find(np.minimum(x * total, total))

    def sample(self, batch: int):
        """Sample ``batch`` leaves with fractions drawn from :attr:`rng` (uniform in [0, 1)).

        Returns ``(indices, priorities)``; empty, with the ``empty`` flag raised and nothing
        drawn, if every priority is zero.
        """
        if not isinstance(batch, (int, np.integer)) or batch < 0:
            raise ValueError(f"batch must be a non-negative integer, not {batch!r}")
        if self._levels[0][0] <= 0:
            self.empty = True
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=self._dtype)
        return self.sample_fractions(self.rng.random(int(batch)))

    def _descend(self, t):
        """Level-by-level search for the whole batch. Per level and target: the running sums
        ``c_0, c_0 + c_1, ...`` of the current node's children (one row of ``csz``, which starts
        with 0), ``j`` = how many are <= t, then ``t -= csz[j]`` and move to child ``j``."""
        k, n = self._k, t.size
        rows = np.arange(n)
        node = np.zeros(n, dtype=np.int64)
        t = t.copy()
        for l in range(1, self._nlevels + 1):
            if l == 1:                                  # one group, shared by every target
                g = self._groups[1][0]
                csz = np.concatenate([np.zeros(1, self._dtype), np.cumsum(g)])
                j = np.searchsorted(csz[1:], t, side="right")
            elif n < _COLUMN_LOOP:
                g = self._groups[l][node]               # (B, K) sibling groups, contiguous
                csz = np.zeros((n, k + 1), dtype=self._dtype)
                np.cumsum(g, axis=1, out=csz[:, 1:])
                j = (csz[:, 1:] <= t[:, None]).sum(axis=1)
            else:                                       # the same sums, child by child
                g = self._groups[l][node]
                gt = np.ascontiguousarray(g.T)
                cst = np.zeros((k + 1, n), dtype=self._dtype)
                j = np.zeros(n, dtype=np.int64)
                for c in range(k):
                    np.add(cst[c], gt[c], out=cst[c + 1])
                    j += cst[c + 1] <= t
                csz = cst.T
            over = None if self._exact else np.flatnonzero(j == k)   # float rounding only
            if over is not None and over.size:          # past the group: last non-zero child
                gz = g if l > 1 else np.broadcast_to(g, (n, k))
                j[over] = k - 1 - np.argmax(gz[over][:, ::-1] > 0, axis=1)
            if l == 1:
                before, child = csz[j], g[j]
            else:
                before, child = csz[rows, j], g[rows, j]
            t = t - before
            if over is not None and over.size:          # ... and the end of that child
                t[over] = np.nextafter(child[over], 0)
            node = node * k + j
        return node, child


class FixedSumTree(SumTree):
    """Bit-exact model of the RTL sum tree: raw fixed-point integers (int64 storage).

    Parameters
    ----------
    config : SumTreeConfig
        Fanout, capacity, widths, target bits and batch limit.
    seed : int
        Initial seed of the on-chip PRNG (:class:`Xorshift32`).

    Priorities are raw integers of ``config.input_format`` (``input_width`` bits, unsigned);
    leaves hold ``config.priority_format``. A value above the leaf maximum is stored as the
    maximum and raises the sticky ``saturated`` flag. Level ``l`` never exceeds
    ``config.level_widths[l]`` bits (checked by :meth:`check_invariants`).

    Members
    -------
    saturated : sticky flag, an update or insert priority exceeded the leaf maximum.
    empty : sticky flag, a sample was requested while every priority was zero.
    prng : the :class:`Xorshift32` generator used by :meth:`sample`.
    """

    def __init__(self, config: SumTreeConfig, *, seed: int = 0):
        if not isinstance(config, SumTreeConfig):
            raise TypeError(f"config must be a SumTreeConfig, not {type(config).__name__}")
        self.config = config
        super().__init__(fanout=config.fanout, capacity=config.capacity, dtype=np.int64,
                         seed=seed)
        self.saturated = False
        self.prng = Xorshift32(seed)

    def _one(self):
        return self.config.one_raw

    def clear_flags(self):
        self.empty = False
        self.saturated = False

    def _check_values(self, values):
        v = np.asarray(values).reshape(-1)
        if v.size and v.dtype.kind not in "iu":
            raise ValueError(f"priorities must be raw integers, not {v.dtype}")
        v = self.config.input_format.check_raw(v.astype(np.int64), "priorities")
        sat, over = self.config.priority_format.saturate(v)
        if over.any():
            self.saturated = True
        return sat

    def _check_batch(self, n, what):
        if n > self.config.max_batch:
            raise ValueError(f"{what} batch of {n} exceeds max_batch {self.config.max_batch}")

    def write_leaves(self, indices, priorities):
        """Set raw leaf priorities (saturating); see :meth:`SumTree.update`."""
        self._check_batch(np.size(indices), "update")
        return super().write_leaves(indices, priorities)

    def check_invariants(self):
        super().check_invariants()
        for l, (lvl, fmt) in enumerate(zip(self._levels, self.config.level_formats)):
            if lvl.min() < 0 or lvl.max() > fmt.max_raw:
                raise AssertionError(f"level {l} leaves its {fmt.width}-bit format")

    def targets(self, x_raw) -> np.ndarray:
        """Integer targets for fractions ``x_raw`` against the current root (see
        :func:`fixed_targets`)."""
        return fixed_targets(x_raw, self.total, target_bits=self.config.target_bits)

    def sample_fractions(self, x_raw):
        """Sample with host-supplied target fractions (``target_bits``-bit integers).

        Returns ``(indices, priorities)``; empty (and the ``empty`` flag raised) if every
        priority is zero.
        """
        x_raw = np.asarray(x_raw).reshape(-1)
        self._check_batch(x_raw.size, "sample")
        if self.total == 0:
            self.empty = True
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        return self.find(self.targets(x_raw))

    def sample(self, batch: int):
        """Sample ``batch`` leaves with the on-chip PRNG, one word per sample in batch order.

        No word is consumed when every priority is zero (empty result, ``empty`` flag).
        """
        if not isinstance(batch, (int, np.integer)) or batch < 0:
            raise ValueError(f"batch must be a non-negative integer, not {batch!r}")
        self._check_batch(int(batch), "sample")
        if self.total == 0:
            self.empty = True
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        return self.sample_fractions(self.prng.fractions(int(batch),
                                                         bits=self.config.target_bits))

    def quantize(self, priorities):
        """Host side: real priorities to raw inputs (``config.rounding``; saturating at the
        input format, which also raises ``saturated``)."""
        raw, over = self.config.input_format.quantize(priorities, return_overflow=True)
        if np.any(over):
            self.saturated = True
        return raw

    def to_float(self, raw):
        """Real values of raw priorities or node sums."""
        return self.config.priority_format.to_float(raw)
