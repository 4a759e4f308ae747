"""TrainerDriver on the golden trainer device: launches, inserts while training, stop, reset,
snapshots, trace, cycles against the cycle model, and bad input refused before any write."""

import numpy as np
import pytest

from sw.learner.spec import LearnerConfig
from sw.replay.spec import SumTreeConfig
from sw.trainer.device import TrainerGoldenDevice
from sw.trainer.driver import TrainerDriver, TrainerError, TrainerWarning
from sw.trainer.schedule import sequential_launch_cycles
from sw.trainer.spec import TrainerConfig

CFG = TrainerConfig(learner=LearnerConfig(sizes=(4, 16, 2), array=4, max_batch=32, sub_batch=8),
                    tree=SumTreeConfig(fanout=4, capacity=256, max_batch=32),
                    append_window=16, delay=1, trace_depth=8)
HYPER = dict(batch=16, lr=0.02, sync_period=4)


def batch(n, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.normal(0, 0.5, (n, 4)), rng.integers(0, 2, n), np.full(n, 0.1),
            rng.normal(0, 0.5, (n, 4)), rng.random(n) < 0.05)


@pytest.fixture
def drv():
    d = TrainerDriver(TrainerGoldenDevice(CFG, keep_log=True), seed=3)
    d.init_weights(0)
    return d


def test_insert_beyond_the_window_when_idle(drv):
    assert drv.insert(*batch(100)) == 100
    dev = drv.device
    assert drv.produced == 100 and dev.core.consumed >= 100 - CFG.append_window
    drv.train(3, **HYPER)
    assert dev.core.consumed == 100                   # the launch's boundary took the rest
    assert np.count_nonzero(dev.core.tree.leaves) == 100


def test_train_counts_cycles_snapshot_and_trace(drv):
    drv.insert(*batch(64))
    drv.train(1, **HYPER)                             # takes the last window
    st = drv.train(12, **HYPER, snapshot_period=5, trace_period=4)
    assert st["STEPS_DONE"] == 12 and st["ERROR"] == 0
    # The sequential core's CYCLES: no inserts; from the first step on a write-back at every
    # boundary (delay 1: one batch queued by the previous launch); B as before (no divide);
    # snapshots after steps 5 and 10, trace entries after steps 4, 8, 12 (counted from the
    # trace's start: the previous launch had none), the end snapshot, the closing boundary.
    steps = [(16, 0, {"batch": 16, "divide": False, "trace": (i + 1) % 4 == 0,
                      "snapshot": (i + 1) % 5 == 0}) for i in range(12)]
    steps[0] = (0,) + steps[0][1:]
    bounds = steps + [(16, 0, None)]
    assert st["CYCLES"] == sequential_launch_cycles(CFG, bounds, final_snapshot=True)
    s = drv.stats()
    assert s["steps_total"] == 13 and s["snapshot_seq"] == 4 and s["trace_count"] == 3
    assert s["trace"].shape == (3, 3) and list(s["trace"][:, 0]) == [5, 9, 13]
    assert np.all(s["trace"][:, 2] > 0)
    raw = drv.raw_weights()
    for a, b in zip(raw, drv.device.core.weights):
        np.testing.assert_array_equal(a, b)


def test_inserts_during_a_launch_are_all_taken(drv):
    drv.insert(*batch(32))
    drv.start(0, **HYPER, snapshot_period=2)
    total = 32
    for i in range(30):
        total += drv.insert(*batch(3, seed=i + 1))
    st = drv.stop()
    assert st["STOPPED"] == 1 and st["STEPS_DONE"] >= 1
    drv.train(1, **HYPER)                             # the last doorbell's records
    assert drv.device.core.consumed == total == drv.produced
    log = drv.device.log
    assert all(r.indices.max() < total for r in log)  # only written slots were sampled


def test_stop_then_a_new_launch_and_reset(drv):
    drv.insert(*batch(40))
    drv.start(0, **HYPER, snapshot_period=1)
    drv.device.sleep(1e-3)
    st = drv.stop()
    done = st["STEPS_DONE"]
    assert st["STOPPED"] and done >= 1
    st = drv.train(2, **HYPER)
    assert st["STEPS_DONE"] == 2 and not st["STOPPED"]
    assert drv.stats()["steps_total"] == done + 2
    w = [x.copy() for x in drv.device.core.weights]
    drv.device.reset()                                # ap_rst_n: tree and counters cleared
    s = drv.stats()
    assert s["consumed"] == 0 and s["steps_total"] == 0 and drv.device.core.tree.total == 0
    for a, b in zip(drv.device.core.weights, w):      # weights kept
        np.testing.assert_array_equal(a, b)
    again = TrainerDriver(drv.device)                 # the host starts over after a reset
    with pytest.raises(TrainerError, match="empty"):
        again.train(1, **HYPER)


def test_reset_mid_launch_abandons_it(drv):
    drv.insert(*batch(40))
    drv.start(0, **HYPER, snapshot_period=10)
    drv.device.sleep(1e-4)
    drv.device.reset()
    assert drv.device.core.consumed == 0
    assert drv._idle()


@pytest.mark.parametrize("args,match", [
    (dict(obs=np.zeros((3, 5))), "obs"),
    (dict(obs=np.full((3, 4), np.nan)), "obs"),
    (dict(obs=np.full((3, 4), 100.0)), "obs"),
    (dict(actions=np.array([0, 2, 1])), "actions"),
    (dict(actions=np.array([0.5, 1, 1])), "actions"),
    (dict(rewards=np.zeros(2)), "rewards"),
    (dict(dones=np.array([0, 2, 1])), "dones"),
    (dict(next_obs=np.zeros((2, 4))), "next_obs"),
])
def test_bad_records_are_refused_and_nothing_is_written(drv, args, match):
    good = dict(zip(("obs", "actions", "rewards", "next_obs", "dones"), batch(3)))
    drv.insert(**good)
    before = drv.device.storage().copy()
    with pytest.raises(ValueError, match=match):
        drv.insert(**{**good, **args})
    np.testing.assert_array_equal(drv.device.storage(), before)
    assert drv.produced == 3


@pytest.mark.parametrize("kw,match", [
    (dict(batch=0), "batch"), (dict(batch=33), "batch"), (dict(lr=-1), "lr"),
    (dict(alpha=1.5), "alpha"), (dict(beta=float("nan")), "beta"), (dict(gamma=2), "gamma"),
    (dict(sync_period=-1), "sync_period"),
])
def test_bad_launch_arguments(drv, kw, match):
    drv.insert(*batch(20))
    with pytest.raises(ValueError, match=match):
        drv.train(1, **{**HYPER, **kw})
    with pytest.raises(ValueError, match="steps"):
        drv.train(0, **HYPER)


def test_weights_round_trip_and_shape_errors(drv):
    rng = np.random.default_rng(0)
    ws = [rng.uniform(-0.5, 0.5, (4, 16)), rng.uniform(-0.5, 0.5, (16, 2))]
    bs = [np.zeros(16), np.zeros(2)]
    drv.load_weights(ws, bs)
    got_w, got_b = drv.weights()                     # before a launch: the loaded ones
    np.testing.assert_allclose(got_w[0], ws[0], atol=CFG.learner.numerics.weight_format.ulp)
    with pytest.raises(ValueError, match=r"weights\[0\]"):
        drv.load_weights([ws[0].T, ws[1]], bs)
    with pytest.raises(ValueError, match=r"weights\[1\]"):
        drv.load_weights([ws[0], ws[1] * 100], bs)


def test_hw_mismatch_is_refused():
    dev = TrainerGoldenDevice(CFG)
    other = TrainerConfig(learner=CFG.learner, tree=CFG.tree, append_window=8)
    with pytest.raises(ValueError, match="HW_WINDOW"):
        TrainerDriver(dev, other)


def test_saturation_flag_becomes_a_warning():
    cfg = TrainerConfig(learner=CFG.learner, tree=SumTreeConfig(
        fanout=4, capacity=256, max_batch=32, priority_width=4, priority_frac=3,
        input_guard_bits=4), append_window=16, trace_depth=8)
    drv = TrainerDriver(TrainerGoldenDevice(cfg))
    drv.init_weights(0)
    obs, act, _, nxt, done = batch(40)
    drv.insert(obs, act, np.full(40, 10.0), nxt, done)     # |Q - y| ~ 10 > the leaf max 1.875
    with pytest.warns(TrainerWarning, match="PRIORITY_SATURATED"):
        for _ in range(3):
            drv.train(2, batch=16, lr=0.001, alpha=1.0)


def test_storage_address_goes_into_base_and_must_be_aligned(drv):
    dev = TrainerGoldenDevice(CFG)
    dev.storage_address = 0x1_2345_6000               # a board's buffer address
    d = TrainerDriver(dev)
    d.init_weights(0)
    d.insert(*batch(20))
    assert d.train(1, **HYPER)["STEPS_DONE"] == 1
    assert (d.register_map.read_word("BASE_HI"), d.register_map.read_word("BASE_LO")) == \
        (0x1, 0x2345_6000)
    dev.storage_address = 0x100
    with pytest.raises(ValueError, match="storage_address"):
        TrainerDriver(dev)


def test_misaligned_base_is_an_error(drv):
    drv.insert(*batch(20))
    drv._base = 0x100                                 # what the driver itself never writes
    with pytest.raises(TrainerError, match="4 KiB"):
        drv.train(1, **HYPER)
    drv._base = 0
    assert drv.train(1, **HYPER)["STEPS_DONE"] == 1


def test_the_rtl_tests_sessions_hold_on_the_golden_device():
    """What tb/trainer/test_accelerator_rtl.py checks on the RTL holds on the golden device:
    appends during a launch (none lost, START_REFUSED), and a reset in the middle of one."""
    from .trainer_session import (SIM_CONFIG, after_reset, check_after_reset,
                                  check_concurrent, concurrent, start_long)
    check_concurrent(concurrent(TrainerGoldenDevice(SIM_CONFIG)))
    dev = TrainerGoldenDevice(SIM_CONFIG)
    start_long(dev)
    dev.sleep(1e-5)
    dev.reset()
    check_after_reset(after_reset(dev))
