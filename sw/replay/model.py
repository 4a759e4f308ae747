"""Bit-exact run-level model of the replay accelerator (:mod:`rtl_gen.replay.accelerator`).

:class:`ReplayAccelModel` holds the state the accelerator keeps between runs (the
:class:`~sw.replay.sumtree.FixedSumTree` with its PRNG, maximum-priority register, write pointer
and size, and the sticky flags) and executes one run the way the RTL does, from the stored
buffer contents (:data:`~sw.replay.spec.REGIONS`) to the output entries, the STATUS fields
and the cycle counts. Used by the cocotb tests and by the register-level golden device
(:mod:`sw.replay.device`).
"""

from dataclasses import dataclass, field

import numpy as np

from sw.replay import spec as replay_spec
from sw.replay.spec import REPLAY_ERRORS, ReplayOp, SumTreeConfig, field_bits

from .sumtree import FixedSumTree

__all__ = ["ReplayAccelModel", "ReplayRun", "check_run_args"]


def check_run_args(config: SumTreeConfig, code: int, batch: int, update_size: int) -> int:
    """STATUS.ERROR of a start with these register values (0: accepted)."""
    if not 0 <= code <= max(o.value for o in ReplayOp):
        return REPLAY_ERRORS["op"]
    op = ReplayOp(code)
    if op in (ReplayOp.RESET, ReplayOp.SEED):
        return 0
    if not 1 <= batch <= config.max_batch:
        return REPLAY_ERRORS["batch_size"]
    if op == ReplayOp.UPDATE_SAMPLE and not 1 <= update_size <= config.max_batch:
        return REPLAY_ERRORS["update_size"]
    return 0


@dataclass
class ReplayRun:
    """Outcome of one run: STATUS.ERROR, the output entries (``indices``, ``priorities``,
    written to IDX_OUT/PRIO_OUT from entry 0), CYCLES and RESPONSE_CYCLES."""
    error: int = 0
    indices: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    priorities: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    cycles: int = 0
    response_cycles: int = 0
    run_cycles: int = 1


class ReplayAccelModel:
    """The accelerator's state and runs, bit for bit.

    Parameters
    ----------
    config : SumTreeConfig

    Members
    -------
    tree : FixedSumTree
        Tree, PRNG (``tree.prng``), maximum register, write pointer, size.
    empty, saturated, invalid : bool
        STATUS.EMPTY, SATURATED, INVALID_INDEX (cleared at each start).
    """

    def __init__(self, config: SumTreeConfig):
        if not isinstance(config, SumTreeConfig):
            raise TypeError(f"config must be a SumTreeConfig, not {config!r}")
        self.config = config
        self.reset()

    def reset(self):
        """``ap_rst_n``: empty tree, maximum 1.0, PRNG at its reset state, flags clear."""
        self.tree = FixedSumTree(self.config, seed=0)
        self.empty = self.saturated = self.invalid = False

    def _clear_tree(self):
        prng = self.tree.prng
        self.tree = FixedSumTree(self.config, seed=0)
        self.tree.prng = prng

    # -- operations on the tree, as the RTL executes them -----------------------------------
    def _sample(self, n, targets, prng):
        t = self.tree
        if t.total == 0:
            self.empty = True
            return np.zeros(n, np.int64), np.zeros(n, np.int64)
        if prng:
            return t.sample(n)
        return t.sample_fractions(np.asarray(targets[:n], np.int64))

    def _update(self, idx, prio):
        ok = idx < self.config.capacity
        if not ok.all():
            self.invalid = True
        t = self.tree
        t.saturated = False
        if ok.any():
            t.update(idx[ok], prio[ok])
        self.saturated |= t.saturated

    def _read(self, idx):
        ok = idx < self.config.capacity
        if not ok.all():
            self.invalid = True
        out = np.zeros(idx.size, np.int64)
        out[ok] = self.tree.get(idx[ok])
        return idx.copy(), out

    def _insert(self, n, prio):
        t = self.tree
        t.saturated = False
        if prio is None:
            slots = t.insert(n)
        else:
            slots = t.insert(priorities=prio[:n])
        self.saturated |= t.saturated
        return slots, t.leaves[slots].astype(np.int64)

    def run(self, code, batch, update_size, *, prng=False, relaxed=False, seed=0,
            buffers=None) -> ReplayRun:
        """Execute one start with these register values on the stored ``buffers``
        (``{"IDX_IN": array, "PRIO_IN": ..., "TARGET_IN": ...}``, already cut to their
        :func:`~sw.replay.spec.field_bits`; missing regions read as zeros)."""
        cfg = self.config
        self.empty = self.saturated = self.invalid = False
        err = check_run_args(cfg, code, batch, update_size)
        if err:
            return ReplayRun(error=err)
        op = ReplayOp(code)
        rw = cfg.max_batch

        def buf(name):
            b = np.zeros(rw, np.int64) if buffers is None or name not in buffers else \
                np.asarray(buffers[name], np.int64)
            if b.size and (b.min() < 0 or b.max() >> field_bits(cfg, name)):
                raise ValueError(f"{name} entries must fit {field_bits(cfg, name)} bits")
            return b

        idx, prio, tgt = buf("IDX_IN"), buf("PRIO_IN"), buf("TARGET_IN")
        out = (np.zeros(0, np.int64), np.zeros(0, np.int64))
        B, U = batch, update_size
        if op == ReplayOp.SAMPLE:
            out = self._sample(B, tgt, prng)
        elif op == ReplayOp.UPDATE:
            self._update(idx[:B], prio[:B])
        elif op == ReplayOp.INSERT:
            out = self._insert(B, prio)
        elif op == ReplayOp.INSERT_MAX:
            out = self._insert(B, None)
        elif op == ReplayOp.READ:
            out = self._read(idx[:B])
        elif op == ReplayOp.UPDATE_SAMPLE:
            if relaxed:
                out = self._sample(B, tgt, prng)
                self._update(idx[:U], prio[:U])
            else:
                self._update(idx[:U], prio[:U])
                out = self._sample(B, tgt, prng)
        elif op == ReplayOp.RESET:
            self._clear_tree()
        elif op == ReplayOp.SEED:
            self.tree.prng.seed(seed)
        n = replay_spec.run_cycles(cfg, op, B, U, relaxed)
        return ReplayRun(error=0, indices=np.asarray(out[0], np.int64),
                         priorities=np.asarray(out[1], np.int64), cycles=n - 1,
                         response_cycles=replay_spec.response_cycles(cfg, op, B, U,
                                                                           relaxed),
                         run_cycles=n)
