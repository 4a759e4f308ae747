"""CPU prioritized replay buffer: storage, FIFO eviction, weights, lazy writing, thread safety,
and bit-exact agreement of its fixed-point backend with the golden sum tree."""

import sys
import threading

import numpy as np
import pytest

from sw.replay.spec import SumTreeConfig
from sw.replay.sumtree import FixedSumTree
from sw.replay import PrioritizedReplayBuffer, importance_weights

SEED = 20261122
FIELDS = {"obs": ((3,), np.float32), "act": ((), np.int64), "rew": {"shape": 1}}


def _rows(ids):
    ids = np.asarray(ids)
    return {"obs": np.repeat(ids[:, None], 3, axis=1).astype(np.float32), "act": ids,
            "rew": (ids[:, None] * 0.5).astype(np.float32)}


def _consistent(data):
    a = data["act"]
    return (np.all(data["obs"] == a[:, None]) and np.all(data["rew"][:, 0] == a * 0.5))


def _buffer(capacity=100, **kw):
    return PrioritizedReplayBuffer(capacity, fields=FIELDS, seed=SEED, **kw)


# -- basic behaviour -------------------------------------------------------------------------------
def test_add_fifo_and_sample():
    b = _buffer(capacity=10, fanout=4)
    assert len(b) == 0
    slot = b.add({"obs": np.zeros(3), "act": 7, "rew": [3.5]})   # one transition
    assert slot.tolist() == [0] and len(b) == 1
    # 12 rows into 10 slots: rows 100 and 101 would be overwritten at once, so they are dropped.
    assert b.add(_rows(np.arange(100, 112))).tolist() == [3, 4, 5, 6, 7, 8, 9, 0, 1, 2]
    assert len(b) == 10
    idx, w, data = b.sample(64, beta=0.4)
    assert _consistent(data) and w.dtype == np.float32 and w.max() == 1.0
    assert set(data["act"].tolist()) <= set(range(102, 112))   # 7 and 100, 101 were evicted
    np.testing.assert_array_equal(b.get_priorities(np.arange(10)), np.ones(10))


def test_add_larger_than_capacity_keeps_last_rows():
    b = _buffer(capacity=8, fanout=2)
    slots = b.add(_rows(np.arange(20)))
    assert slots.tolist() == [4, 5, 6, 7, 0, 1, 2, 3]
    _, _, data = b.sample(200)
    assert set(data["act"].tolist()) == set(range(12, 20))


def test_update_alpha_and_max_priority():
    b = _buffer(alpha=0.5)
    b.add(_rows(np.arange(10)))
    b.update([2, 3, 3], [16.0, 100.0, 4.0])                     # last write wins for slot 3
    np.testing.assert_allclose(b.get_priorities([2, 3]), [4.0, 2.0])
    assert b.max_priority == 10.0                                # 100 ** 0.5 was seen
    slots = b.add(_rows([50]))
    np.testing.assert_allclose(b.get_priorities(slots), [10.0])
    b.add(_rows([51]), priorities=[9.0])
    np.testing.assert_allclose(b.get_priorities([11]), [3.0])


def test_sampling_follows_priorities_and_weights():
    b = _buffer(capacity=8, fanout=2, alpha=1.0)
    b.add(_rows(np.arange(8)))
    p = np.array([1, 2, 3, 4, 0, 0, 6, 8], dtype=float)
    b.update(np.arange(8), p)
    counts = np.zeros(8)
    for _ in range(50):
        idx, w, data = b.sample(1000, beta=0.7)
        counts += np.bincount(idx, minlength=8)
        assert np.array_equal(data["act"], idx)
        # w_i = (N P(i))^-beta / max_j w_j, N = 8 stored transitions.
        raw = (8 * p[idx] / p.sum()) ** -0.7
        np.testing.assert_allclose(w, raw / raw.max(), rtol=1e-6)
    assert counts[4] == counts[5] == 0
    np.testing.assert_allclose(counts / counts.sum(), p / p.sum(), atol=0.01)


def test_importance_weights():
    p = np.array([1.0, 2.0, 4.0])
    np.testing.assert_allclose(importance_weights(p, beta=1.0), [1.0, 0.5, 0.25])
    np.testing.assert_allclose(importance_weights(p, beta=0.0), [1.0, 1.0, 1.0])
    np.testing.assert_allclose(importance_weights(p, beta=0.5, total=7.0, size=3,
                                                  normalize=False),
                               (3 * p / 7.0) ** -0.5, rtol=1e-6)
    with pytest.raises(ValueError, match=r"beta must be a number in 0\.\.1, not 1\.5"):
        importance_weights(p, beta=1.5)
    with pytest.raises(ValueError, match=r"sampled priorities must be positive"):
        importance_weights([0.0, 1.0], beta=0.5)
    with pytest.raises(ValueError, match=r"total and size are needed when normalize is false"):
        importance_weights(p, beta=0.5, normalize=False)


def test_rejects():
    with pytest.raises(ValueError, match=r"capacity must be a positive integer, not 0"):
        PrioritizedReplayBuffer(0, fields=FIELDS)
    with pytest.raises(ValueError, match=r"alpha must be a non-negative number, not -1"):
        PrioritizedReplayBuffer(10, fields=FIELDS, alpha=-1)
    with pytest.raises(ValueError, match=r"fields must name at least one field"):
        PrioritizedReplayBuffer(10, fields={})
    with pytest.raises(ValueError, match=r"field 'x' must be \(shape, dtype\)"):
        PrioritizedReplayBuffer(10, fields={"x": 3})
    with pytest.raises(ValueError, match=r"fanout must be a power of two in 2\.\.64, not 6"):
        PrioritizedReplayBuffer(10, fields=FIELDS, fanout=6)
    with pytest.raises(ValueError, match=r"fixed_point has capacity 64 and fanout 4, "
                                         r"the buffer 10 and 16"):
        PrioritizedReplayBuffer(10, fields=FIELDS, fixed_point=SumTreeConfig(fanout=4,
                                                                             capacity=64))
    b = _buffer()
    with pytest.raises(RuntimeError, match=r"cannot sample: every priority is zero"):
        b.sample(4)
    with pytest.raises(ValueError, match=r"data must have exactly the fields \['act', 'obs', "
                                         r"'rew'\]; missing \['rew'\], unknown \[\]"):
        b.add({"obs": np.zeros(3), "act": 1})
    with pytest.raises(ValueError, match=r"field 'obs' must have shape \(3,\) or "
                                         r"\(batch, \*\(3,\)\), not \(2, 4\)"):
        b.add({"obs": np.zeros((2, 4)), "act": [1, 2], "rew": [[1], [2]]})
    with pytest.raises(ValueError, match=r"fields must have one batch size; 'act' has 3, "
                                         r"not 2"):
        b.add({"obs": np.zeros((2, 3)), "act": [1, 2, 3], "rew": [[1], [2]]})
    b.add(_rows(np.arange(4)))
    with pytest.raises(ValueError, match=r"batch_size must be a positive integer, not 0"):
        b.sample(0)
    with pytest.raises(ValueError, match=r"beta must be a number in 0\.\.1, not -0\.1"):
        b.sample(4, beta=-0.1)
    with pytest.raises(ValueError, match=r"indices must be in 0\.\.99"):
        b.update([100], [1.0])
    with pytest.raises(ValueError, match=r"priorities must be finite and non-negative"):
        b.update([1], [-1.0])
    with pytest.raises(ValueError, match=r"expected 2 priorities, not 1"):
        b.update([1, 2], [1.0])


# -- lazy writing (PAAL Alg. 3) ------------------------------------------------------------------
class _PausingBuffer(PrioritizedReplayBuffer):
    """Stops inside the data copy of an add until released."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.pause = False
        self.writing = threading.Event()
        self.release = threading.Event()

    def _write_storage(self, slots, rows):
        if self.pause:
            self.writing.set()
            assert self.release.wait(10)
        super()._write_storage(slots, rows)


def test_lazy_writing_slot_is_invisible_while_written():
    b = _PausingBuffer(8, fields=FIELDS, fanout=2, seed=SEED)
    b.add(_rows(np.arange(8)))
    b.update(np.arange(8), np.full(8, 2.0))
    b.pause = True
    writer = threading.Thread(target=b.add, args=(_rows([99, 98]),), kwargs={"priorities": [5, 5]})
    writer.start()
    assert b.writing.wait(10)
    # Slots 0 and 1 are being overwritten: priority 0, never sampled, updates ignored.
    np.testing.assert_array_equal(b.get_priorities([0, 1]), [0.0, 0.0])
    idx, _, data = b.sample(500)
    assert not np.isin(idx, [0, 1]).any() and _consistent(data)
    b.update([0, 1, 2], [7.0, 7.0, 7.0])
    np.testing.assert_allclose(b.get_priorities([0, 1, 2]), [0.0, 0.0, 7.0 ** 0.6])
    b.tree.check_invariants()
    b.release.set()
    writer.join(10)
    np.testing.assert_allclose(b.get_priorities([0, 1]), [5.0 ** 0.6] * 2)
    _, _, data = b.sample(500)
    assert _consistent(data) and {99, 98} <= set(data["act"].tolist())


def test_adds_take_turns_so_a_wrapping_ring_never_gives_a_slot_two_writers():
    """An add that wraps the ring onto the slots of a paused add waits for it: its rows land
    after the paused add's, no row is torn and every slot's counter ends even."""
    b = _PausingBuffer(8, fields=FIELDS, fanout=2, seed=SEED)
    b.add(_rows(np.arange(8)))
    b.pause = True
    slow = threading.Thread(target=b.add, args=(_rows([50, 51]),))
    slow.start()
    assert b.writing.wait(10)
    b.pause = False
    fast = threading.Thread(target=b.add, args=(_rows(np.arange(100, 108)),))
    fast.start()
    fast.join(0.3)
    assert fast.is_alive()                 # waits for the paused add (it owns slots 0 and 1)
    b.release.set()
    slow.join(10)
    fast.join(10)
    assert not fast.is_alive() and not slow.is_alive()
    assert (b._seq % 2 == 0).all()
    _, _, data = b.sample(500)
    assert _consistent(data) and set(data["act"].tolist()) <= set(range(100, 108))


def test_sample_retries_when_a_sampled_slot_is_overwritten():
    calls = []

    class Racing(PrioritizedReplayBuffer):
        def _read_storage(self, indices):
            if not calls:                  # an actor overwrites everything between the index
                self.add(_rows(np.arange(1000, 1004)))     # search and the data copy
            calls.append(indices)
            return super()._read_storage(indices)

    b = Racing(4, fields=FIELDS, fanout=2, seed=SEED)
    b.add(_rows(np.arange(4)))
    idx, _, data = b.sample(16)
    assert len(calls) == 2 and _consistent(data)
    assert set(data["act"].tolist()) <= set(range(1000, 1004))


def test_concurrent_actors_and_learners():
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)                        # switch threads often: more interleaving
    try:
        _run_concurrent()
    finally:
        sys.setswitchinterval(old)


def _run_concurrent():
    b = _buffer(capacity=512, fanout=8, alpha=0.7)
    b.add(_rows(np.arange(64)))
    errors, samples = [], []
    stop = threading.Event()

    def actor(base):
        try:
            for k in range(300):
                ids = base + 1000 * k + np.arange(int(1 + k % 7))
                b.add(_rows(ids))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    def learner(seed):
        rng = np.random.default_rng(seed)
        try:
            while not stop.is_set():
                idx, w, data = b.sample(32, beta=0.5)
                if not _consistent(data) or not (0 < w).all() or w.max() != 1:
                    errors.append(AssertionError("inconsistent sample"))
                b.update(idx, rng.random(32) + 1e-3)
                samples.append(len(idx))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    actors = [threading.Thread(target=actor, args=(i * 10**6,)) for i in range(3)]
    learners = [threading.Thread(target=learner, args=(SEED + i,)) for i in range(2)]
    for t in actors + learners:
        t.start()
    for t in actors:
        t.join(60)
    stop.set()
    for t in learners:
        t.join(60)
    assert not errors, errors[:3]
    assert len(samples) >= 20
    b.tree.check_invariants()
    assert len(b) == 512 and np.all(b._seq % 2 == 0)
    assert (b.get_priorities(np.arange(512)) > 0).all()


# -- fixed-point backend ---------------------------------------------------------------------------
def test_fixed_point_backend_is_bit_exact_with_golden_tree():
    cfg = SumTreeConfig(fanout=4, capacity=200, priority_width=16, priority_frac=8,
                        max_batch=64)
    b = PrioritizedReplayBuffer(200, fields=FIELDS, fanout=4, alpha=0.6, seed=SEED,
                                fixed_point=cfg)
    g = FixedSumTree(cfg, seed=SEED)                   # the RTL's model, driven directly
    rng = np.random.default_rng(SEED)
    b.add(_rows(np.arange(150)))                       # 150 > max_batch: written in chunks
    g.insert(150)
    for _ in range(20):
        idx, w, data = b.sample(64, beta=0.6)
        gi, gp = g.sample(64)
        assert np.array_equal(idx, gi) and _consistent(data)
        pri = rng.exponential(3.0, 64)
        b.update(idx, pri)
        g.update(gi, g.quantize(pri ** 0.6))
        n_new = int(rng.integers(0, 20))
        b.add(_rows(np.arange(n_new)))
        g.insert(n_new)
        assert np.array_equal(b.tree.flat, g.flat)
    assert not b.saturated
    b.update([0], [1e12])                              # beyond even the input format
    assert b.saturated and b.get_priorities([0])[0] == cfg.priority_format.max_value
