"""One bank of the banked prioritized replay of Scalable Policy Optimization (thesis 5.2.2.1).

The replay is split into one bank per learner; learner ``i`` samples and updates only bank
``i``, so learners never wait for each other (no global lock), while every actor inserts into
the banks in turn (Algorithm 6, line 12). A bank is a :class:`ReplayBank`, run by
:mod:`sw.dist.system` as a Ray actor, and owns one of:

* ``"cpu"``: :class:`sw.replay.PrioritizedReplayBuffer`, the float64 K-ary sum tree with PAAL's
  lazy writing (an insert zeroes the slots' priorities, copies the data with no lock held,
  then sets the maximum priority; Algorithm 3). The Ray actor is threaded, so actors' inserts
  and the learner's samples and updates of one bank run concurrently under the buffer's own
  tree and leaf locks;
* a device spec (``"golden"``, ``"pynq:..."``, ``"xrt:..."``, :mod:`sw.rl.devices`): the
  replay accelerator behind :class:`~sw.replay.driver.ReplayDriver`, transitions in host memory
  by slot (as :mod:`sw.rl.dqn` keeps them). The device runs one operation at a time, so the
  bank holds its own lock across an insert run and the copy of the rows (a slot is never
  visible with a priority but without its data); the Ray actor is sequential.

Priorities are ``(|td| + prio_eps) ** alpha`` on both paths; new transitions get the maximum
priority seen so far. Each transition carries a ``tid`` (a positive id given by its actor), so a
test can tell which bank a sampled transition came from and that no slot was sampled before it
was written (a never-written slot reads ``tid`` 0).
"""

import threading

import numpy as np

__all__ = ["FIELDS", "transition_fields", "ReplayBank"]

#: The transition fields (besides ``obs`` and ``next_obs`` of the environment's shape).
FIELDS = ("obs", "action", "reward", "next_obs", "done", "tid")


def transition_fields(obs_dim: int) -> dict:
    """``name -> (shape, dtype)`` of a stored transition."""
    return {"obs": ((obs_dim,), np.float32), "action": ((), np.int64),
            "reward": ((), np.float32), "next_obs": ((obs_dim,), np.float32),
            "done": ((), np.bool_), "tid": ((), np.int64)}


def _resolve(items):
    """Batches given as Ray object references (the lockstep coordinator forwards those)."""
    if any(type(b).__name__ == "ObjectRef" for b in items):
        import ray
        return ray.get(list(items))
    return list(items)


class ReplayBank:
    """One replay bank (module docstring).

    Parameters
    ----------
    index : int
        Bank number (= the learner that samples it).
    spec : str
        ``"cpu"`` or a replay device spec.
    obs_dim : int
        Observation size.
    capacity : int
        Transitions of a CPU bank; an accelerator bank has its hardware's capacity.
    alpha, prio_eps : float
        Priority exponent and the constant added to ``|td|``.
    seed : int
        Seed of the CPU tree's target generator, or of the accelerator's on-chip PRNG.
    module : str
        Shipped replay configuration the ``golden`` spec models.
    trace : bool
        Remember every inserted ``tid`` (:meth:`inserted_tids`), for tests.
    """

    def __init__(self, index, spec, *, obs_dim, capacity=1 << 16, alpha=0.6, prio_eps=1e-3,
                 seed=0, module="replay_accel_k16", trace=False):
        self.index = int(index)
        self.spec = spec
        self._alpha = float(alpha)
        self._eps = float(prio_eps)
        self._fields = transition_fields(int(obs_dim))
        self._trace = [] if trace else None
        self._stats_lock = threading.Lock()
        self._stats = {"inserted": 0, "sampled": 0, "updated": 0, "runs": 0, "cycles": 0,
                       "unwritten_samples": 0}
        if spec == "cpu":
            from sw.replay.buffer import PrioritizedReplayBuffer

            self._buf = PrioritizedReplayBuffer(int(capacity), fields=self._fields,
                                                alpha=self._alpha, seed=int(seed))
            self.capacity = int(capacity)
            self.label = "CPU sum tree (lazy writing)"
            self._drv = None
        else:
            from sw.replay.driver import ReplayDriver
            from sw.rl.devices import open_device

            dev, cfg, self.label = open_device(spec, "replay", module)
            self._drv = ReplayDriver(dev, cfg)
            self._drv.seed((int(seed) * 0x9E3779B1 + 1) & 0xFFFF_FFFF or 1)
            self.capacity = self._drv.config.capacity
            self._max_batch = self._drv.config.max_batch
            self._store = {n: np.zeros((self.capacity,) + shape, dtype)
                           for n, (shape, dtype) in self._fields.items()}
            self._lock = threading.Lock()           # this bank's device, not a global lock

    # -- description ---------------------------------------------------------------------------
    def info(self) -> dict:
        """Where the bank runs: its label, capacity and node."""
        import socket
        return {"bank": self.index, "spec": self.spec, "label": self.label,
                "capacity": self.capacity, "node": socket.gethostname()}

    def size(self) -> int:
        """Transitions stored (at most the capacity)."""
        return len(self._buf) if self._drv is None else self._drv.size

    def stats(self) -> dict:
        """Counters: transitions inserted, sampled and updated, accelerator runs and cycles,
        and samples of slots not yet written (always 0 unless something is broken)."""
        with self._stats_lock:
            return dict(self._stats)

    def inserted_tids(self) -> np.ndarray:
        """Every ``tid`` inserted into this bank (``trace=True``)."""
        if self._trace is None:
            raise RuntimeError("this bank was built without trace=True")
        with self._stats_lock:
            return np.concatenate(self._trace) if self._trace else np.zeros(0, np.int64)

    def _count(self, **kw):
        with self._stats_lock:
            for k, v in kw.items():
                self._stats[k] += v

    def _run_done(self):
        self._count(runs=1, cycles=int(self._drv.last_status.get("CYCLES", 0)))

    # -- operations ------------------------------------------------------------------------------
    def insert(self, batch: dict) -> int:
        """Insert a batch (dict of arrays with a leading axis, :data:`FIELDS`) at the maximum
        priority; returns the count."""
        rows = {n: np.asarray(batch[n], self._fields[n][1]) for n in self._fields}
        n = len(rows["tid"])
        if n == 0:
            return 0
        if rows["tid"].min() <= 0:
            raise ValueError("tid must be positive (0 marks a slot never written)")
        if self._drv is None:
            self._buf.add(rows)                     # PAAL lazy writing inside
        else:
            with self._lock:
                for lo in range(0, n, self._max_batch):
                    hi = min(n, lo + self._max_batch)
                    slots = self._drv.insert(count=hi - lo)
                    self._run_done()
                    for name, a in rows.items():
                        self._store[name][slots] = a[lo:hi]
        if self._trace is not None:
            with self._stats_lock:
                self._trace.append(rows["tid"].copy())
        self._count(inserted=n)
        return n

    def insert_many(self, batches) -> int:
        """Insert batches in the order given (batches or Ray object references to them)."""
        return sum(self.insert(b) for b in _resolve(batches))

    def _priorities_of(self, td):
        td = np.asarray(td, np.float64).reshape(-1)
        if not np.all(np.isfinite(td)):
            raise ValueError("td errors must be finite")
        return np.abs(td) + self._eps

    def _gather(self, idx, weights, prio, data=None):
        if data is None:
            data = {n: a[idx] for n, a in self._store.items()}
        unwritten = int(np.count_nonzero(data["tid"] <= 0))
        self._count(sampled=len(idx), unwritten_samples=unwritten)
        out = {"idx": np.asarray(idx, np.int64), "weights": np.asarray(weights, np.float64),
               "priorities": np.asarray(prio, np.float64)}
        out.update(data)
        return out

    def sample(self, n: int, beta: float = 0.4) -> dict:
        """``n`` transitions drawn in proportion to their priorities: a dict with ``idx``
        (slots, for :meth:`update`), ``weights`` (importance weights, normalised),
        ``priorities`` (the stored ``p ** alpha`` as sampled) and the transition fields."""
        if self._drv is None:
            idx, w, data = self._buf.sample(int(n), beta=beta)
            return self._gather(idx, w, self._buf.get_priorities(idx), data)
        with self._lock:
            idx, w, p = self._drv.sample(int(n), beta)
            self._run_done()
            return self._gather(idx, w, p)

    def update(self, idx, td) -> None:
        """Set the priorities of slots ``idx`` from their TD errors ``td``."""
        p = self._priorities_of(td)
        idx = np.asarray(idx, np.int64)
        if self._drv is None:
            self._buf.update(idx, p)                # the buffer applies alpha
        else:
            with self._lock:
                self._drv.update(idx, priorities=p ** self._alpha)
                self._run_done()
        self._count(updated=len(idx))

    def update_and_sample(self, idx, td, n: int, beta: float = 0.4) -> dict:
        """:meth:`update`, then :meth:`sample` seeing it; one fused run on the accelerator
        (``ReplayDriver.update_and_sample``: the updates strictly before the samples)."""
        if self._drv is None:
            self.update(idx, td)
            return self.sample(n, beta)
        p = self._priorities_of(td) ** self._alpha
        idx = np.asarray(idx, np.int64)
        with self._lock:
            new, w, pr = self._drv.update_and_sample(idx, None, int(n), beta, priorities=p)
            self._run_done()
            self._count(updated=len(idx))
            return self._gather(new, w, pr)

    def priorities(self, idx) -> np.ndarray:
        """Stored priorities ``p ** alpha`` of slots ``idx`` (float64)."""
        idx = np.asarray(idx, np.int64)
        if self._drv is None:
            return np.asarray(self._buf.get_priorities(idx), np.float64)
        with self._lock:
            out = self._drv.read(idx)
            self._run_done()
            return np.asarray(out, np.float64)

    def stored_priority(self, td) -> np.ndarray:
        """What :meth:`priorities` reads after an update with ``td``: ``(|td| + eps) ** alpha``
        in the bank's own number format (the accelerator's fixed-point leaves)."""
        p = self._priorities_of(td) ** self._alpha
        if self._drv is None:
            return p
        cfg = self._drv.config
        raw = cfg.input_format.quantize(np.minimum(p, cfg.input_format.max_value))
        return cfg.priority_format.to_float(np.minimum(raw, cfg.priority_format.max_raw))
