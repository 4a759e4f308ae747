"""Thread-safe prioritized replay buffer on the K-ary sum tree (PAAL Sec. IV, Schaul et al.).

Transitions live in a dict of numpy arrays, one row per slot; priorities ``p ** alpha`` live in
a :class:`~sw.replay.sumtree.SumTree` (float64) or, given a
:class:`~sw.replay.spec.SumTreeConfig`, in the bit-exact
:class:`~sw.replay.sumtree.FixedSumTree`, so the buffer then behaves exactly as the FPGA's
replay manager (same priorities, same PRNG stream, same samples).

Synchronisation (PAAL Alg. 3)
-----------------------------
* ``tree lock``: held by sampling (index search) and by every priority change, whole tree.
* ``leaf lock``: held while leaves are written and by :meth:`get_priorities`, so reading a
  priority never waits for the upper levels to be recomputed.
* Lazy writing: :meth:`add` sets the slots' priorities to zero, copies the data without the tree
  lock, then sets the priorities to the maximum priority. Adds take turns (a writers' lock):
  two concurrent adds could otherwise own one slot when the ring wraps during a slow copy, and
  their interleaved rows and counter steps would leave a torn row sampleable. A slot being written has priority zero, so it
  is never sampled; :meth:`update` ignores such slots (a learner's late update must not make a
  half-written slot sampleable).
* A per-slot sequence counter (odd while the slot is written) closes the remaining race PAAL
  leaves open: a slot sampled just before an :meth:`add` starts overwriting it. :meth:`sample`
  copies the rows, re-reads the counters and draws again if one changed.

Known and accepted, as in PAAL: an :meth:`update` for an index whose slot was overwritten after
it was sampled applies the old transition's priority to the new one.
"""

import threading

import numpy as np

from sw.replay.spec import SumTreeConfig
from sw.replay.sumtree import FixedSumTree, SumTree

__all__ = ["PrioritizedReplayBuffer", "importance_weights"]

_MAX_RETRIES = 16


def importance_weights(priorities, *, beta: float, total=None, size=None,
                       normalize: bool = True) -> np.ndarray:
    """Importance-sampling weights ``w_i = (size * P(i)) ** -beta``, ``P(i) = p_i / total``.

    Parameters
    ----------
    priorities : array of float
        Sampled priorities ``p_i`` (already raised to ``alpha``), all > 0.
    beta : float
        Exponent, 0..1 (0: uniform weights, 1: full correction).
    total, size : float, int
        Sum of all priorities and number of stored transitions; needed only when
        ``normalize`` is false.
    normalize : bool
        Divide by the batch maximum (Schaul et al.). The normalised weights are
        ``(min_j p_j / p_i) ** beta``, which needs neither ``total`` nor ``size``.

    Returns
    -------
    float32 array, in (0, 1] when normalised.
    """
    if not isinstance(beta, (int, float)) or not 0.0 <= beta <= 1.0:
        raise ValueError(f"beta must be a number in 0..1, not {beta!r}")
    p = np.asarray(priorities, dtype=np.float64)
    if p.size and p.min() <= 0:
        raise ValueError("sampled priorities must be positive")
    if normalize:
        if not p.size:
            return p.astype(np.float32)
        return ((p.min() / p) ** beta).astype(np.float32)
    if total is None or size is None:
        raise ValueError("total and size are needed when normalize is false")
    return ((size * p / total) ** -beta).astype(np.float32)


def _field_spec(name, spec):
    if isinstance(spec, dict):
        shape, dtype = spec.get("shape", ()), spec.get("dtype", np.float32)
    elif isinstance(spec, tuple) and len(spec) == 2:
        shape, dtype = spec
    else:
        raise ValueError(f"field {name!r} must be (shape, dtype) or {{'shape', 'dtype'}}, "
                         f"not {spec!r}")
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    return shape, np.dtype(dtype)


class PrioritizedReplayBuffer:
    """Proportional prioritized replay with FIFO eviction, safe for concurrent actors and
    learners.

    Parameters
    ----------
    capacity : int
        Transitions stored; the oldest is evicted first when full.
    fields : dict
        ``name -> (shape, dtype)`` (or cpprb-style ``{"shape": ..., "dtype": ...}``).
    alpha : float
        Priority exponent, >= 0: a transition is stored with ``priority ** alpha``.
    fanout : int
        Sum tree fanout K, a power of two in 2..64 (PAAL: 16 is near the CPU optimum).
    seed : int
        Seed of the target generator (``np.random.default_rng``, or the on-chip xorshift32 of
        the fixed-point tree).
    fixed_point : SumTreeConfig, optional
        Keep priorities in the RTL's fixed-point format; its ``capacity`` and ``fanout`` must
        match. Priorities then saturate at the format maximum (sticky :attr:`saturated`).

    Members
    -------
    tree : the sum tree; hold :attr:`lock` to read it consistently while other threads run.
    lock : the tree lock (PAAL's ``global_tree_lock``).
    """

    def __init__(self, capacity: int, *, fields: dict, alpha: float = 0.6, fanout: int = 16,
                 seed: int = 0, fixed_point: SumTreeConfig | None = None):
        if not isinstance(capacity, (int, np.integer)) or capacity < 1:
            raise ValueError(f"capacity must be a positive integer, not {capacity!r}")
        if not isinstance(alpha, (int, float)) or not alpha >= 0:
            raise ValueError(f"alpha must be a non-negative number, not {alpha!r}")
        if not fields:
            raise ValueError("fields must name at least one field")
        self._n = int(capacity)
        self._alpha = float(alpha)
        self._specs = {name: _field_spec(name, spec) for name, spec in fields.items()}
        self._storage = {name: np.zeros((self._n,) + shape, dtype=dtype)
                         for name, (shape, dtype) in self._specs.items()}
        if fixed_point is None:
            self._tree = SumTree(fanout=fanout, capacity=self._n, seed=seed)
        else:
            if not isinstance(fixed_point, SumTreeConfig):
                raise ValueError(f"fixed_point must be a SumTreeConfig, not {fixed_point!r}")
            if (fixed_point.capacity, fixed_point.fanout) != (self._n, fanout):
                raise ValueError(f"fixed_point has capacity {fixed_point.capacity} and fanout "
                                 f"{fixed_point.fanout}, the buffer {self._n} and {fanout}")
            self._tree = FixedSumTree(fixed_point, seed=seed)
        self._fixed = fixed_point is not None
        self.lock = threading.Lock()                   # PAAL's global tree lock
        self._leaf_lock = threading.Lock()             # PAAL's last-level lock
        # One add at a time: two adds owning one slot (the ring wrapping while a slow add
        # still writes) would break the slot's odd/even sequence and tear its row.
        self._slot_lock = threading.Lock()             # writers: pointer, size, rows
        self._seq = np.zeros(self._n, dtype=np.int64)  # odd while a slot is being written
        self._ptr = 0
        self._size = 0

    # -- description ----------------------------------------------------------------------------
    @property
    def capacity(self) -> int:
        return self._n

    @property
    def alpha(self) -> float:
        return self._alpha

    @property
    def tree(self) -> SumTree:
        return self._tree

    @property
    def fields(self) -> dict:
        return dict(self._specs)

    @property
    def saturated(self) -> bool:
        """Sticky: a priority exceeded the fixed-point format (always false in float)."""
        return bool(getattr(self._tree, "saturated", False))

    @property
    def max_priority(self) -> float:
        """Largest stored priority so far (``p ** alpha`` units; reset 1.0)."""
        m = self._tree.max_priority
        return float(self._tree.to_float(m)) if self._fixed else float(m)

    def __len__(self) -> int:
        return self._size

    # -- helpers -----------------------------------------------------------------------------------
    def _stored(self, priorities, n):
        p = np.asarray(priorities, dtype=np.float64).reshape(-1)
        if p.size != n:
            raise ValueError(f"expected {n} priorities, not {p.size}")
        if not np.all(np.isfinite(p)) or (p.size and p.min() < 0):
            raise ValueError("priorities must be finite and non-negative")
        p = p ** self._alpha
        return self._tree.quantize(p) if self._fixed else p

    def _rows(self, data):
        missing = set(self._specs) - set(data)
        extra = set(data) - set(self._specs)
        if missing or extra:
            raise ValueError(f"data must have exactly the fields {sorted(self._specs)}; "
                             f"missing {sorted(missing)}, unknown {sorted(extra)}")
        rows, count = {}, None
        for name, (shape, dtype) in self._specs.items():
            a = np.asarray(data[name])
            if a.shape == shape:
                a = a[None]
            if a.shape[1:] != shape:
                raise ValueError(f"field {name!r} must have shape {shape} or (batch, *{shape}), "
                                 f"not {a.shape}")
            if count is not None and len(a) != count:
                raise ValueError(f"fields must have one batch size; {name!r} has {len(a)}, "
                                 f"not {count}")
            count = len(a)
            rows[name] = a
        return rows, count

    def _set_priorities(self, slots, values):
        """PAAL Alg. 3 PRIORITYUPDATE; the caller holds the tree lock. The fixed-point tree
        takes at most ``max_batch`` updates at a time, so longer batches go in order, in
        chunks (same result as sequential updates)."""
        step = self._tree.config.max_batch if self._fixed else max(1, len(slots))
        for start in range(0, len(slots), step):
            with self._leaf_lock:
                written = self._tree.write_leaves(slots[start:start + step],
                                                  values[start:start + step])
            self._tree.propagate(written)

    def _write_storage(self, slots, rows):
        for name, a in rows.items():
            self._storage[name][slots] = a

    def _read_storage(self, indices):
        return {name: a[indices] for name, a in self._storage.items()}

    # -- operations ------------------------------------------------------------------------------
    def add(self, data: dict, *, priorities=None) -> np.ndarray:
        """Insert one transition or a batch (leading axis) with FIFO eviction.

        Parameters
        ----------
        data : dict
            Every field; arrays of the field's shape, or with a leading batch axis.
        priorities : array, optional
            Initial priorities (before ``alpha``); default the maximum priority so far.

        Returns the slots written. A batch larger than the capacity keeps its last
        ``capacity`` rows, as sequential inserts would.
        """
        rows, count = self._rows(data)
        stored = None if priorities is None else self._stored(priorities, count)
        if count > self._n:
            rows = {name: a[count - self._n:] for name, a in rows.items()}
            stored = None if stored is None else stored[count - self._n:]
        with self._slot_lock:
            slots = (self._ptr + np.arange(count, dtype=np.int64)) % self._n
            self._ptr = (self._ptr + count) % self._n
            self._size = min(self._n, self._size + count)
            slots = slots[-self._n:]
            zero = np.zeros(len(slots), dtype=self._tree.dtype)
            with self.lock:
                self._seq[slots] += 1                                 # odd: being written
                self._set_priorities(slots, zero)
            self._write_storage(slots, rows)                          # the tree lock not held
            with self.lock:
                self._seq[slots] += 1
                if stored is None:
                    stored = np.full(len(slots), self._tree.max_priority,
                                     dtype=self._tree.dtype)
                self._set_priorities(slots, stored)
        return slots

    def sample(self, batch_size: int, *, beta: float = 0.4):
        """Draw ``batch_size`` transitions with probability proportional to priority.

        Returns
        -------
        indices : int64 array
            Slots, for :meth:`update`.
        weights : float32 array
            Importance weights, normalised by the batch maximum (:func:`importance_weights`).
        data : dict
            One array per field, a copy.

        Raises
        ------
        RuntimeError
            If every priority is zero (empty buffer).
        """
        if not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, not {batch_size!r}")
        importance_weights([], beta=beta)                              # check beta first
        for _ in range(_MAX_RETRIES):
            with self.lock:
                indices, pri = self._tree.sample(int(batch_size))
                seq = self._seq[indices]
            if indices.size == 0:
                raise RuntimeError("cannot sample: every priority is zero (empty buffer?)")
            data = self._read_storage(indices)
            if np.array_equal(seq, self._seq[indices]):                # no slot was rewritten
                break
        else:  # pragma: no cover - needs a writer overwriting the batch 16 times in a row
            raise RuntimeError("sample kept colliding with concurrent inserts")
        p = self._tree.to_float(pri) if self._fixed else pri
        return indices, importance_weights(p, beta=beta), data

    def update(self, indices, priorities):
        """Set new priorities (e.g. ``|TD error| + eps``) of sampled slots; ``alpha`` is
        applied here. A repeated index keeps its last priority. Slots being written by a
        concurrent :meth:`add` are skipped."""
        indices = np.asarray(indices, dtype=np.int64).reshape(-1)
        stored = self._stored(priorities, indices.size)
        if indices.size and (indices.min() < 0 or indices.max() >= self._n):
            raise ValueError(f"indices must be in 0..{self._n - 1}")
        with self.lock:
            keep = self._seq[indices] % 2 == 0
            self._set_priorities(indices[keep], stored[keep])

    def get_priorities(self, indices) -> np.ndarray:
        """Stored priorities (``p ** alpha``, float) of slots; PAAL's PRIORITYRETRIEVAL."""
        with self._leaf_lock:
            p = self._tree.get(indices)
        return self._tree.to_float(p) if self._fixed else p
