"""The replay accelerator's run-level model (:mod:`sw.replay.model`): argument checks, relaxed
fused runs, invalid indices and saturation."""

import numpy as np

from sw.replay.model import ReplayAccelModel, check_run_args
from sw.replay.spec import ReplayOp, SumTreeConfig

SMALL = SumTreeConfig(fanout=4, capacity=100, priority_width=20, priority_frac=8,
                      input_guard_bits=4, target_bits=24, max_batch=48)


def test_argument_checks():
    mb = SMALL.max_batch
    assert check_run_args(SMALL, 8, 1, 1) == 1
    assert check_run_args(SMALL, ReplayOp.SAMPLE.value, 0, 1) == 2
    assert check_run_args(SMALL, ReplayOp.SAMPLE.value, mb + 1, 1) == 2
    assert check_run_args(SMALL, ReplayOp.UPDATE_SAMPLE.value, mb, mb + 1) == 3
    assert check_run_args(SMALL, ReplayOp.RESET.value, 0, 0) == 0
    assert check_run_args(SMALL, ReplayOp.SAMPLE.value, mb, 0) == 0


def test_model_relaxed_sees_the_tree_before_the_updates():
    one = SMALL.one_raw
    runs = {}
    for relaxed in (False, True):
        m = ReplayAccelModel(SMALL)
        m.run(ReplayOp.INSERT.value, 4, 1, buffers={"PRIO_IN": np.array([one, 0, 0, one])})
        bufs = {"IDX_IN": np.array([0, 1]), "PRIO_IN": np.array([0, one]),
                "TARGET_IN": np.array([0, (1 << SMALL.target_bits) - 1])}
        runs[relaxed] = m.run(ReplayOp.UPDATE_SAMPLE.value, 2, 2, relaxed=relaxed,
                              buffers=bufs)
        assert m.tree.total == 2 * one
    np.testing.assert_array_equal(runs[False].indices, [1, 3])
    np.testing.assert_array_equal(runs[True].indices, [0, 3])


def test_model_invalid_index_and_saturation():
    m = ReplayAccelModel(SMALL)
    hi = SMALL.priority_format.max_raw
    out = m.run(ReplayOp.INSERT.value, 3, 1, buffers={"PRIO_IN": np.array([1, hi + 5, 2])})
    np.testing.assert_array_equal(out.priorities, [1, hi, 2])
    assert m.saturated and not m.invalid
    out = m.run(ReplayOp.READ.value, 3, 1, buffers={"IDX_IN": np.array([1, 100, 2])})
    np.testing.assert_array_equal(out.indices, [1, 100, 2])
    np.testing.assert_array_equal(out.priorities, [hi, 0, 2])
    assert m.invalid and not m.saturated
    m.run(ReplayOp.UPDATE.value, 2, 1, buffers={"IDX_IN": np.array([127, 0]),
                                               "PRIO_IN": np.array([7, 9])})
    assert m.invalid and m.tree.get([0])[0] == 9 and m.tree.total == hi + 11
    out = m.run(ReplayOp.SAMPLE.value, 0, 1)
    assert out.error == 2 and not m.invalid
