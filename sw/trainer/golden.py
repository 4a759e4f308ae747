"""The golden fused trainer: bit for bit what the trainer core computes, step by step, on the
storage bytes it shares with the host (:mod:`sw.trainer.layout`).

:class:`TrainerCore` holds the core's state (network and target weights, the sum tree with its
PRNG and running maximum, the pending priority write-backs, the counters, the snapshot and
trace state) and carries out the loop of :mod:`sw.trainer.spec` one boundary and one step at a
time, so that a device model can interleave the host's doorbell writes with the steps exactly
where the hardware sees them. Every number is an integer of the formats the spec names: the
learner step is :func:`sw.learner.mlp.train_step`, the tree :class:`sw.replay.sumtree.FixedSumTree`,
the powers :mod:`sw.powers`.
"""

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from sw.learner.mlp import TargetSync, train_step
from sw.replay.prng import fixed_targets
from sw.replay.sumtree import FixedSumTree

from .layout import (HEADER_BYTES, SNAPSHOT_BUSY, TRACE_BYTES, pack_header, pack_trace,
                     record_bytes, region_base, unpack_records, unpack_weights, pack_weights,
                     weight_bytes)
from sw.powers import is_weights_raw, priorities_raw
from .spec import COUNT_BITS, TrainerCmd, TrainerConfig

__all__ = ["LaunchArgs", "StepRecord", "TrainerCore", "stratified_fractions"]

_MASK = (1 << COUNT_BITS) - 1


@dataclass(frozen=True)
class LaunchArgs:
    """The launch arguments as the core latches them (raw register values)."""
    steps: int = 1
    batch: int = 32
    lr: int = 0
    gamma: int = 0
    alpha: int = 0
    beta: int = 0
    eps: int = 0
    sync_period: int = 0
    snapshot_period: int = 0
    trace_period: int = 0
    seed: int = 0
    cmd: int = 0


@dataclass
class StepRecord:
    """What one step did, raw: the sampled slots and their priorities, the IS weights, the
    TD errors ``Q - y`` and new priorities, the loss sum, whether it synced the target, the
    learner's flags and :class:`~sw.learner.mlp.StepResult`, and the step's inputs
    (``args``: the gathered batch and the weights it started from)."""
    step: int
    indices: np.ndarray
    priorities: np.ndarray
    loss_weights: np.ndarray
    td: np.ndarray
    new_priorities: np.ndarray
    loss_sum: int
    synced: bool
    overflow: dict = field(default_factory=dict)
    learner: object = None
    args: dict = field(default_factory=dict)


def stratified_fractions(x_raw, batch: int, target_bits: int) -> np.ndarray:
    """The sum tree's SAMPLE fractions of a stratified batch: fraction ``b`` is
    ``b·F + ((x_b·F) >> target_bits)`` with ``F = 2**target_bits // batch``, so sample b lands
    in the b-th of B equal strata of the total (the tree turns a fraction x into the target
    ``(x·root) >> target_bits``). The remainder ``2**target_bits - B·F`` (< B parts in
    ``2**target_bits``) is never drawn."""
    F = (1 << target_bits) // int(batch)
    return (np.arange(batch, dtype=np.int64) * F
            + fixed_targets(x_raw, F, target_bits=target_bits))     # x·F exactly


class TrainerCore:
    """The trainer core's state and its loop, on a storage byte array.

    Parameters
    ----------
    config : TrainerConfig
    storage : numpy.ndarray of uint8
        The device memory the core reaches through its AXI4 master, at least
        :func:`~sw.trainer.layout.storage_bytes` from ``base``.
    base : int
        BASE_HI:BASE_LO, the storage's byte offset in ``storage``.
    """

    def __init__(self, config: TrainerConfig, storage: np.ndarray, base: int = 0):
        if not isinstance(config, TrainerConfig):
            raise TypeError(f"config must be a TrainerConfig, not {type(config).__name__}")
        self.config = config
        self.storage = storage
        self.base = base
        self.num = config.learner.numerics
        zero = [np.zeros(s, np.int64) for s in self.num.weight_shapes()]
        self.weights = [w.copy() for w in zero]
        self.target = [w.copy() for w in zero]
        self.clear(0)

    # -- commands ----------------------------------------------------------------------------
    def clear(self, seed: int):
        """CLEAR: an empty tree (running maximum 1.0), the PRNG seeded, no pending write-back,
        every counter 0. The weights stay."""
        self.tree = FixedSumTree(self.config.tree, seed=int(seed))
        self.pending = deque()
        self.consumed = 0
        self.steps_total = 0
        self.sampled = 0
        self.snapshot_seq = 0
        self.trace_count = 0
        self.sync = TargetSync(0, 0, bits=self.config.sync_bits)
        self._since_snapshot = self._since_trace = self.steps_in_launch = 0
        self._trace_sum = self._trace_n = 0

    def load(self):
        """LOAD: network and target weights from the load region."""
        off = self.base + region_base(self.config, "load")
        image = self.storage[off:off + weight_bytes(self.config)]
        ws = unpack_weights(self.config, image)
        for l, w in enumerate(ws):
            self.num.weight_format.check_raw(w, f"load region layer {l}")
        self.weights = [w.copy() for w in ws]
        self.target = [w.copy() for w in ws]

    def begin(self, args: LaunchArgs):
        """The start of a launch: CMD's CLEAR then LOAD, the sync period latched."""
        if args.cmd & TrainerCmd.CLEAR:
            self.clear(args.seed)
        if args.cmd & TrainerCmd.LOAD:
            self.load()
        self.sync.period = int(args.sync_period)
        self.tree.clear_flags()
        self.steps_in_launch = 0
        self.flags = dict.fromkeys(("learner", "saturated", "underflow", "overrun"), False)

    # -- the loop ----------------------------------------------------------------------------
    def _host_window(self, idx):
        """Slots the host may be writing now (the append window from CONSUMED)."""
        c = self.config
        return (np.asarray(idx, np.int64) - self.consumed) % c.capacity < c.append_window

    def boundary(self, producer: int) -> int:
        """The step boundary: the due priority write-back, then the host's inserts.
        Returns the records inserted."""
        c = self.config
        if len(self.pending) > c.delay:
            idx, prio = self.pending.popleft()
            keep = ~self._host_window(idx)
            self._write_leaves(idx[keep], prio[keep])
            self.flags["saturated"] |= bool(self.tree.saturated)
        ahead = (int(producer) - self.consumed) & _MASK
        k = min(ahead, c.append_window)
        self.flags["overrun"] |= ahead > c.append_window
        if k:
            slots = (self.consumed + np.arange(k, dtype=np.int64)) % c.capacity
            evict = (slots + c.append_window) % c.capacity
            self._write_leaves(slots, np.full(k, self.tree.max_priority, np.int64))
            self._write_leaves(evict, np.zeros(k, np.int64))
            self.consumed = (self.consumed + k) & _MASK
        return k

    def _write_leaves(self, idx, vals):
        """Leaf writes in order (the tree takes one per cycle; last write wins)."""
        n = self.config.tree.max_batch
        for s in range(0, len(idx), n):
            self.tree.update(idx[s:s + n], vals[s:s + n])

    def can_step(self) -> bool:
        return self.tree.total > 0

    def gather(self, idx) -> tuple:
        """The records of slots ``idx`` from the ring."""
        rb = record_bytes(self.config)
        off = self.base + region_base(self.config, "ring")
        rows = self.storage[off:off + self.config.capacity * rb].reshape(-1, rb)[idx]
        return unpack_records(self.config, rows)

    def sample(self, batch: int, beta: int) -> tuple:
        """The replay side of a step: ``batch`` stratified samples and their IS weights
        ``(slots, priorities, weights)`` (raw: leaf format, learner loss-weight format)."""
        c, tc = self.config, self.config.tree
        lw_fmt = self.num.loss_weight_format
        x = self.tree.prng.fractions(int(batch), bits=tc.target_bits)
        idx, prio = self.tree.sample_fractions(stratified_fractions(x, batch, tc.target_bits))
        self.sampled = (self.sampled + int(batch)) & _MASK
        w = is_weights_raw(c.power, prio, tc.priority_frac, beta, c.coef_frac, lw_fmt.frac,
                           lw_fmt.width)
        self.flags["underflow"] |= bool((w == 0).any())
        return idx, prio, w

    def queue_priorities(self, idx, td, alpha: int, eps: int) -> np.ndarray:
        """New priorities ``(|td| + ε)**α`` of the raw TD errors ``td`` of slots ``idx``,
        queued for the write-back ``delay`` steps later; returns them (raw input format)."""
        c, tc = self.config, self.config.tree
        new, _ = priorities_raw(c.power, td, self.num.act_frac, eps, c.eps_frac, alpha,
                                c.coef_frac, tc.priority_frac, tc.input_width)
        self.pending.append((np.asarray(idx, np.int64), new))
        return new

    def step(self, args: LaunchArgs) -> StepRecord:
        """One gradient step (after :meth:`boundary`); the tree must not be empty:
        :meth:`sample`, :meth:`gather`, the learner step, :meth:`queue_priorities`."""
        c, num, B = self.config, self.num, int(args.batch)
        idx, prio, w = self.sample(B, args.beta)
        obs, act, rew, nxt, done = self.gather(idx)
        synced = self.sync.step()
        weights, target = self.weights, self.target
        r = train_step(self.weights, obs, num, lr=args.lr, actions=act, rewards=rew,
                       dones=done, next_obs=nxt, target_weights=self.target, gamma=args.gamma,
                       loss_weights=w, sub_batch=c.learner.sub_batch, dp=c.learner.dp,
                       sync_target=synced)
        self.flags["learner"] |= r.any_overflow
        self.weights, self.target = r.weights, r.next_target_weights
        td = r.q[np.arange(B), act] - r.target
        new = self.queue_priorities(idx, td, args.alpha, args.eps)
        self.steps_total = (self.steps_total + 1) & _MASK
        self.steps_in_launch += 1
        self._trace(args, np.abs(td))
        self._snapshot(args)
        inputs = dict(obs=obs, actions=act, rewards=rew, next_obs=nxt, dones=done,
                      weights=weights, target_weights=target)
        return StepRecord(self.steps_total, idx, prio, w, td, new, r.loss_sum, synced,
                          dict(r.overflow), r, inputs)

    # -- outputs for the actors and the monitor ---------------------------------------------
    def _write(self, offset, data):
        data = np.asarray(data, np.uint8).ravel()
        self.storage[self.base + offset:self.base + offset + data.size] = data

    def _snapshot(self, args):
        self._since_snapshot += 1
        if args.snapshot_period and self._since_snapshot >= args.snapshot_period:
            self._write_snapshot()

    def final_snapshot(self) -> bool:
        """The end of a launch that ran a step: a snapshot unless its last step wrote one."""
        if self._since_snapshot == 0:
            return False
        self._write_snapshot()
        return True

    def _write_snapshot(self):
        self._since_snapshot = 0
        seq = (self.snapshot_seq + 1) & _MASK
        off = region_base(self.config, f"snap{seq % 2}")
        self._write(off, pack_header(SNAPSHOT_BUSY, 0))
        self._write(off + HEADER_BYTES, pack_weights(self.config, self.weights))
        self._write(off, pack_header(seq, self.steps_total))
        self.snapshot_seq = seq

    def _trace(self, args, abs_td):
        if not args.trace_period:
            return
        self._trace_sum = min(self._trace_sum + int(abs_td.sum()), _MASK)
        self._trace_n += abs_td.size
        self._since_trace += 1
        if self._since_trace < args.trace_period:
            return
        entry = pack_trace(self.config, self.steps_total, self.consumed, self._trace_sum,
                           self._trace_n)
        at = region_base(self.config, "trace") + (self.trace_count % self.config.trace_depth) \
            * TRACE_BYTES
        self._write(at, entry.ravel())
        self.trace_count = (self.trace_count + 1) & _MASK
        self._since_trace = self._trace_sum = self._trace_n = 0
