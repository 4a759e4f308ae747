"""Running reward statistics of the standardized mode: the robust update (one extreme
reward does not poison later batches), explicit state (``reset``, ``state_dict``,
``load_state_dict``) on the driver and the pipeline, and the clipping warning."""

import warnings

import numpy as np
import pytest

from sw.driver import ClippingWarning, GaeDriver, GaeOverflowWarning, GoldenDevice
from sw.gae.pipeline import GaeQuantizationPipeline
from sw.gae.quant import DynamicRewardStandardizer
from sw.gae.spec import GaeCoreConfig

from driver_util import rollout

HEPPO = {"n_pe": 8, "max_trajectories": 64, "capacity": 256}


def make(**kw):
    cfg = GaeCoreConfig.from_dict(HEPPO)
    return GaeDriver(GoldenDevice(cfg), cfg, **{"units": "standardized", **kw})


def quiet(drv, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return drv.compute(*args)


def test_one_extreme_reward_does_not_poison_later_statistics():
    """20 batches of N(0, 1), one 1e30 reward, 10 more batches: the std stays near 1 (the
    plain Welford update, ``update_clip=None``, reaches 1.6e28)."""
    rng = np.random.default_rng(1)
    robust, plain = DynamicRewardStandardizer(), DynamicRewardStandardizer(update_clip=None)
    for i in range(31):
        r = rng.normal(size=(64, 8))
        if i == 20:
            r[3, 2] = 1e30
        for s in (robust, plain):
            s(r)
    assert 0.9 < robust.stats.std < 1.2, robust.stats.std
    assert abs(robust.stats.mean) < 0.2 and robust.clamped == 1
    assert plain.stats.std > 1e27


def test_robust_update_leaves_ordinary_and_sparse_streams_alone():
    """Gaussian rewards and sparse ones (p = 1/1000, 31 std out) are never winsorized."""
    rng = np.random.default_rng(2)
    for make_batch in (lambda: rng.normal(size=(64, 8)) * 3 + 1,
                       lambda: (rng.random((128, 8)) < 1e-3).astype(float)):
        robust, plain = DynamicRewardStandardizer(), DynamicRewardStandardizer(update_clip=None)
        for _ in range(100):
            r = make_batch()
            robust(r)
            plain(r)
        assert robust.clamped == 0
        assert robust.stats.state_dict() == plain.stats.state_dict()


def test_update_clip_is_checked():
    for bad in (0, -1.0, float("inf"), True, "3"):
        with pytest.raises(ValueError, match="update_clip must be a positive finite number"):
            DynamicRewardStandardizer(update_clip=bad)


def test_driver_state_reset_and_restore():
    rng = np.random.default_rng(3)
    batches = [rollout(rng, 32, 8, reward="gauss") for _ in range(3)]
    drv = make()
    quiet(drv, *batches[0], 0.99, 0.95)
    state = drv.state_dict()
    a1, _ = quiet(drv, *batches[1], 0.99, 0.95)
    other = make()
    other.load_state_dict(state)                          # same history: the same answer
    a2, _ = quiet(other, *batches[1], 0.99, 0.95)
    np.testing.assert_array_equal(a1, a2)
    drv.reset()                                           # no history: as a fresh driver
    assert drv.pipeline.rewards.stats.count == 0
    b1, _ = quiet(drv, *batches[2], 0.99, 0.95)
    b2, _ = quiet(make(), *batches[2], 0.99, 0.95)
    np.testing.assert_array_equal(b1, b2)


def test_load_state_dict_refuses_other_settings():
    drv = make()
    with pytest.raises(ValueError, match="state has units='caller', this driver 'standardized'"):
        drv.load_state_dict(make(units="caller").state_dict())
    other = make(pipeline=GaeQuantizationPipeline(reward_norm="scale"))
    with pytest.raises(ValueError, match="state has reward_norm='scale', this pipeline 'center'"):
        drv.load_state_dict(other.state_dict())
    with pytest.raises(ValueError, match="state must be a dict with keys 'units' and 'pipeline'"):
        drv.load_state_dict({"units": "standardized"})


def test_clipping_above_the_threshold_warns():
    rng = np.random.default_rng(4)
    r, v, d, last = rollout(rng, 64, 8, reward="gauss")
    drv = make()
    quiet(drv, r, v, d, last, 0.99, 0.95)                 # statistics first
    r = r.copy()
    r[::8, 0] = 50.0                                      # 8 of 512 rewards, 50 std out
    with pytest.warns(ClippingWarning, match=r"1.56 % of the rewards clipped at \+-8 std"):
        quiet_overflow(drv, r, v, d, last)
    with warnings.catch_warnings():                       # below the threshold: silent
        warnings.simplefilter("error", ClippingWarning)
        quiet_overflow(make(clip_warning=0.05), r, v, d, last)
    with pytest.raises(ValueError, match="clip_warning must be a fraction in"):
        make(clip_warning=2)


def quiet_overflow(drv, *batch):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GaeOverflowWarning)
        return drv.compute(*batch, 0.99, 0.95)
