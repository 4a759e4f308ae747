"""One bank of the banked replay (sw.dist.replay): on the CPU (PAAL lazy writing) and on the
replay accelerator's golden model. What a learner relies on: only written slots are sampled,
its priority updates are what its later samples see, rows are never torn by a concurrent
insert."""

import threading

import numpy as np
import pytest

from sw.dist.replay import FIELDS, ReplayBank

SPECS = ["cpu", "golden"]


def _batch(tids, obs_dim=4):
    tids = np.asarray(tids, np.int64)
    col = tids.astype(np.float32)[:, None]
    return {"obs": np.repeat(col, obs_dim, 1), "action": tids % 2,
            "reward": tids.astype(np.float32) / 1000, "next_obs": np.repeat(-col, obs_dim, 1),
            "done": tids % 5 == 0, "tid": tids}


def _consistent(s):
    """Every field of a sampled row belongs to the same transition (its tid)."""
    t = s["tid"].astype(np.float32)
    return (np.all(s["obs"] == t[:, None]) and np.all(s["next_obs"] == -t[:, None])
            and np.all(s["action"] == s["tid"] % 2) and np.all(s["done"] == (s["tid"] % 5 == 0)))


@pytest.mark.parametrize("spec", SPECS)
def test_only_written_slots_are_sampled(spec):
    bank = ReplayBank(0, spec, obs_dim=4, capacity=1024, seed=3, trace=True)
    assert bank.size() == 0
    tids = np.arange(1, 101)
    assert bank.insert(_batch(tids[:60])) == 60
    assert bank.insert_many([_batch(tids[60:90]), _batch(tids[90:])]) == 40
    assert bank.size() == 100
    seen = set()
    for _ in range(40):
        s = bank.sample(64, 0.4)
        assert set(s) == {"idx", "weights", "priorities", *FIELDS}
        assert s["idx"].min() >= 0 and s["idx"].max() < 100          # never an empty slot
        assert _consistent(s)
        seen.update(s["tid"].tolist())
    assert seen <= set(tids.tolist()) and len(seen) > 90
    assert bank.stats()["unwritten_samples"] == 0
    assert bank.stats()["inserted"] == 100 and bank.stats()["sampled"] == 40 * 64
    np.testing.assert_array_equal(np.sort(bank.inserted_tids()), tids)


@pytest.mark.parametrize("spec", SPECS)
def test_updates_are_seen_by_later_samples(spec):
    """A learner's update (its own bank, no one else writes it) is read back exactly and is
    the priority its next samples carry; the fused update + sample sees its updates too."""
    bank = ReplayBank(0, spec, obs_dim=4, capacity=1024, alpha=0.6, prio_eps=1e-3, seed=5)
    bank.insert(_batch(np.arange(1, 201)))
    s = bank.sample(64, 0.4)
    idx = np.unique(s["idx"])
    td = np.linspace(-3.0, 3.0, idx.size)
    bank.update(idx, td)
    want = bank.stored_priority(td)
    np.testing.assert_allclose(bank.priorities(idx), want, rtol=0, atol=2 ** -16)
    later = bank.sample(256, 0.4)
    hit = np.isin(later["idx"], idx)
    assert hit.any()
    by_slot = dict(zip(idx.tolist(), want))
    np.testing.assert_allclose(later["priorities"][hit],
                               [by_slot[i] for i in later["idx"][hit]], atol=2 ** -16)
    # one slot raised far above the rest gets its share of the fused run's samples
    top = int(idx[0])
    td2 = np.where(idx == top, 400.0, 0.0)
    fused = bank.update_and_sample(idx, td2, 256, 0.4)
    share = bank.priorities([top])[0] / bank.priorities(np.arange(200)).sum()
    assert share > 0.15
    assert abs(np.mean(fused["idx"] == top) - share) < 5 * np.sqrt(share * (1 - share) / 256)
    np.testing.assert_allclose(bank.priorities([top]), bank.stored_priority([400.0]),
                               atol=2 ** -16)
    if spec == "golden":
        assert bank.stats()["cycles"] > 0 and bank.stats()["runs"] == 9     # one per call


def test_lazy_writing_under_concurrent_inserts():
    """PAAL's lazy writing on the CPU bank: a thread overwrites a small bank in a loop while
    another samples and updates; no sampled row is torn, no slot is sampled unwritten."""
    bank = ReplayBank(0, "cpu", obs_dim=4, capacity=128, seed=1)
    bank.insert(_batch(np.arange(1, 129)))
    stop = threading.Event()
    errors = []

    def writer():
        t = 129
        while not stop.is_set():
            bank.insert(_batch(np.arange(t, t + 16)))
            t += 16

    th = threading.Thread(target=writer)
    th.start()
    try:
        for _ in range(300):
            s = bank.sample(32, 0.4)
            if not _consistent(s):
                errors.append(s["tid"])
            bank.update(s["idx"], np.ones(32))
    finally:
        stop.set()
        th.join()
    assert not errors
    assert bank.stats()["unwritten_samples"] == 0 and bank.stats()["inserted"] > 128


def test_bad_input_is_refused():
    bank = ReplayBank(0, "cpu", obs_dim=4, capacity=16)
    with pytest.raises(ValueError, match="tid must be positive"):
        bank.insert(_batch([0, 1]))
    bank.insert(_batch([1, 2]))
    with pytest.raises(ValueError, match="td errors must be finite"):
        bank.update([0], [np.nan])
    with pytest.raises(RuntimeError, match="without trace=True"):
        bank.inserted_tids()
    assert bank.info()["label"].startswith("CPU sum tree")
