"""The trainer driver's compiled record packing (sw.trainer.hostfast) gives the bytes of the
numpy path (quantize_arg + pack_records) on random data with rounding ties, every dtype the
driver takes, both lane widths; a value outside the format makes it hand over to the numpy
path, whose error names the argument."""

import numpy as np
import pytest

from sw.learner.batch import quantize_arg
from sw.learner.spec import LearnerConfig
from sw.replay.spec import SumTreeConfig
from sw.trainer import hostfast
from sw.trainer.device import TrainerGoldenDevice
from sw.trainer.driver import TrainerDriver
from sw.trainer.layout import lane_bytes, pack_records
from sw.trainer.spec import TrainerConfig

pytestmark = pytest.mark.skipif(not hostfast.available(), reason="numba not installed")


def _config(width=16, rounding="half_up"):
    wide = {"acc_width": 40, "lr_width": 22, "lr_frac": 22} if width > 16 else {}
    lc = LearnerConfig(sizes=(4, 8, 2), array=2, max_batch=16, sub_batch=4, width=width,
                       act_frac=width - 6, rounding=rounding, **wide)
    return TrainerConfig(learner=lc, tree=SumTreeConfig(fanout=4, capacity=256, max_batch=16),
                         append_window=16, trace_depth=8)


def _numpy(cfg, obs, act, rew, nxt, done):
    fmt = cfg.learner.numerics.act_format
    return pack_records(cfg, quantize_arg(obs, fmt, "obs"), act, quantize_arg(rew, fmt, "r"),
                        quantize_arg(nxt, fmt, "n"), done)


@pytest.mark.parametrize("width,rounding", [(16, "half_up"), (16, "half_even"),
                                            (16, "floor"), (20, "half_up")])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_compiled_records_are_the_numpy_path_s(width, rounding, dtype):
    cfg = _config(width, rounding)
    ulp = cfg.learner.numerics.act_format.ulp
    rng = np.random.default_rng(width)
    n = 97
    obs = rng.uniform(-30, 30, (n, 4))
    obs[::3] = np.round(obs[::3] / ulp) * ulp + ulp / 2      # ties
    nxt = rng.uniform(-30, 30, (n, 4))
    rew = rng.uniform(-30, 30, n)
    obs, nxt, rew = (x.astype(dtype) for x in (obs, nxt, rew))
    act = rng.integers(0, 2, n)
    done = rng.random(n) < 0.3
    fast = hostfast.records(cfg, obs, act, rew, nxt, done)
    assert fast is not None and fast.dtype == np.uint8
    assert lane_bytes(cfg) == (4 if width > 16 else 2)
    np.testing.assert_array_equal(fast, _numpy(cfg, obs, act, rew, nxt, done))


@pytest.mark.parametrize("field,value", [("obs", 1e6), ("obs", np.nan), ("next_obs", -1e6),
                                         ("rewards", 1e6)])
def test_a_value_outside_hands_over_and_the_driver_names_it(field, value):
    cfg = _config()
    rng = np.random.default_rng(0)
    args = dict(obs=rng.normal(0, 1, (5, 4)), actions=np.array([0, 1, 0, 1, 1]),
                rewards=np.zeros(5), next_obs=rng.normal(0, 1, (5, 4)),
                dones=np.zeros(5, bool))
    args[field] = args[field].copy()
    args[field].flat[3] = value
    assert hostfast.records(cfg, *(args[k] for k in ("obs", "actions", "rewards", "next_obs",
                                                     "dones"))) is None
    drv = TrainerDriver(TrainerGoldenDevice(cfg))
    with pytest.raises(ValueError, match=field):
        drv.insert(**args)
