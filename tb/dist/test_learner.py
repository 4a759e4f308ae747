"""SPO's local learners (sw.dist.learner) with the weight server, without Ray: local SGD
changes only the online network; the averaged weights every learner loads are exactly the
rounded mean of theirs in the learner's fixed-point format; the target network changes only
when an averaging says so."""

import numpy as np
import pytest

from sw.dist.actor import EnvActor
from sw.dist.learner import LearnerWorker
from sw.dist.replay import ReplayBank
from sw.dist.weights import WeightServer, mean_raw
from sw.rl.dqn import DQNConfig

SIZES = (4, 64, 64, 2)


def _system(spec, n=2, steps=150):
    """``n`` learners on ``spec`` with their CPU banks, filled by two actors."""
    ws = WeightServer()
    banks = [ReplayBank(i, "cpu", obs_dim=4, capacity=4096, seed=i) for i in range(n)]
    learners = [LearnerWorker(i, spec, bank=banks[i], weight_server=ws, init_seed=7,
                              sizes=SIZES, batch=32, lr=0.02) for i in range(n)]
    ws.reset(learners[0].weights(), learners[0].info()["weight_format"])
    dqn = DQNConfig(total_steps=10_000)
    for a in range(2):
        EnvActor(a, dqn=dqn, num_envs=2, stride=4, banks=banks, weight_server=ws,
                 seed=a).collect(steps, 0)
    return ws, banks, learners


def _equal(a, b):
    return all(np.array_equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("spec", ["golden", "cpu"])
def test_target_changes_only_after_averaging(spec):
    if spec == "cpu":
        pytest.importorskip("torch")
    ws, banks, learners = _system(spec)
    start = learners[0].weights()
    assert all(_equal(l.weights(), start) and _equal(l.weights(target=True), start)
               for l in learners)                           # one start for all
    fmt = learners[0].info()["weight_format"]
    targets = [start, start]
    for rnd, sync in enumerate([False, True, False, True], start=1):
        for l in learners:
            l.train(10)
        local = [l.weights() for l in learners]
        assert not _equal(local[0], local[1])               # each learned on its own bank
        for l, t in zip(learners, targets):
            assert _equal(l.weights(target=True), t)        # local SGD left it alone
        avg = ws.average(*local)
        for l in learners:
            assert l.set_weights(avg, sync_target=sync) == rnd
        for i, l in enumerate(learners):
            assert _equal(l.weights(), avg)
            if sync:
                targets[i] = avg
            assert _equal(l.weights(target=True), targets[i])
        if fmt is not None:                                 # exact, in the weight format
            for layer, m in enumerate(avg):
                np.testing.assert_array_equal(
                    m, mean_raw([w[layer] for w in local], fmt.rounding))
                assert m.dtype == np.int64 and fmt.check_raw(m) is not None
        else:
            for layer, m in enumerate(avg):
                np.testing.assert_allclose(m, (local[0][layer] + local[1][layer]) / 2,
                                           rtol=1e-6, atol=1e-7)
    assert [l.counters()["syncs"] for l in learners] == [[2, 4], [2, 4]]
    assert learners[0].counters()["steps"] == 40
    if spec == "golden":
        assert learners[0].counters()["cycles"] > 0
        assert fmt.rounding == "half_up" and str(fmt) == "sQ3.13/half_up"


def test_learner_priorities_reach_its_bank_only():
    """A learner's TD errors become its bank's priorities (fused with its next sample, or by
    flush); the other bank is untouched."""
    ws, banks, learners = _system("golden")
    before = [b.stats()["updated"] for b in banks]
    out = learners[0].train(3)
    assert banks[0].stats()["updated"] - before[0] == 2 * 32       # two fused updates
    assert banks[1].stats()["updated"] == before[1]
    learners[0].flush()
    assert banks[0].stats()["updated"] - before[0] == 3 * 32
    idx, td = learners[0]._pending or (None, None)
    assert idx is None                                             # flushed
    assert len(out["losses"]) == 3 and np.isfinite(out["losses"]).all()


def test_restarted_learner_starts_from_the_averaged_weights():
    ws, banks, learners = _system("golden")
    for l in learners:
        l.train(5)
    avg = ws.average(*[l.weights() for l in learners])
    again = LearnerWorker(1, "golden", bank=banks[1], weight_server=ws, init_seed=7,
                          sizes=SIZES)
    assert _equal(again.weights(), avg) and _equal(again.weights(target=True), avg)
    assert ws.restarts() == {"learner 1": 1}


def test_wrong_sizes_are_named():
    ws = WeightServer()
    bank = ReplayBank(0, "cpu", obs_dim=4)
    with pytest.raises(ValueError, match=r"has layer sizes \(4, 64, 64, 2\), the environment "
                                         r"and hidden size need \(4, 32, 32, 2\)"):
        LearnerWorker(0, "golden", bank=bank, weight_server=ws, sizes=(4, 32, 32, 2))
