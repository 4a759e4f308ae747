"""The compiled packing of the learner's step inputs (:mod:`sw.learner.hostfast`) changes
nothing: the images it builds are the bytes of the numpy code (:func:`~sw.learner.layout.
pack_matrix`, :func:`~sw.learner.layout.pack_samples`) for DQN and MSE learners of several
block sizes, widths and batch sizes (full and partial blocks), with and without loss weights,
and a batch the numpy code refuses still gets its error."""

import dataclasses
import pickle
import warnings

import numpy as np
import pytest

from sw.driver import InstantDevice, LearnerDriver
from sw.learner import hostfast
from sw.learner.batch import LearnerBatch
from sw.learner.device import LearnerGoldenDevice
from sw.learner.spec import LearnerConfig
from sw.registry import shipped_config

pytestmark = pytest.mark.skipif(not hostfast.available(), reason="numba is not installed")

CONFIGS = {
    "shipped": shipped_config("learner_kernel_s4")[1].accel,
    "s2_w12": LearnerConfig(sizes=(3, 5, 2), array=2, max_batch=8, sub_batch=4, width=12,
                            act_frac=6, weight_frac=8, grad_frac=8, coef_width=11),
    "s4_mse": LearnerConfig(sizes=(5, 6, 3), array=4, max_batch=12, sub_batch=4, loss="mse"),
    "s8_w8": LearnerConfig(sizes=(9, 8, 4), array=8, max_batch=16, sub_batch=8, width=8,
                           act_frac=4, weight_frac=5, grad_frac=5, coef_width=9),
}


def numpy_images(drv, batch):
    kernels = hostfast._kernels()
    hostfast._K[:] = [None]
    try:
        return drv._images(batch)
    finally:
        hostfast._K[:] = [kernels]


@pytest.mark.parametrize("name", CONFIGS)
def test_images_same_as_numpy(name):
    cfg = CONFIGS[name]
    drv = LearnerDriver(LearnerGoldenDevice(cfg), cfg, on_range="clip")
    rng = np.random.default_rng(len(name))
    n_in, n_out = cfg.sizes[0], cfg.sizes[-1]
    for B in sorted({1, cfg.array - 1 or 1, cfg.array, cfg.array + 1, cfg.max_batch}):
        for weighted in (False, True):
            scale = 2.0 ** (cfg.width - cfg.act_frac - 1)        # some values saturate
            kw = dict(lr=1e-3)
            if cfg.loss == "dqn":
                args = (rng.uniform(-scale, scale, (B, n_in)), rng.integers(0, n_out, B),
                        rng.uniform(-scale, scale, B), rng.uniform(-scale, scale, (B, n_in)),
                        rng.random(B) < 0.3)
                if weighted:
                    kw["loss_weights"] = rng.random(B)
            else:
                args = (rng.uniform(-scale, scale, (B, n_in)),)
                kw["targets"] = rng.uniform(-scale, scale, (B, n_out))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")      # LearnerRangeWarning: saturated on purpose
                batch = drv.prepare(*args, **kw)
            fast = hostfast.batch_images(cfg, batch)
            slow = numpy_images(drv, batch)
            assert fast is not None and list(fast) == list(slow)
            for region in slow:
                assert bytes(fast[region]) == bytes(slow[region]), (name, B, region)


def test_refused_batches_take_the_numpy_path_and_its_error():
    cfg = CONFIGS["shipped"]
    drv = LearnerDriver(InstantDevice.for_kernel("learner_kernel_s4"))
    B = 8
    ok = drv.prepare(np.zeros((B, 4)), np.zeros(B, int), np.zeros(B), np.zeros((B, 4)),
                     np.zeros(B, bool), lr=1e-3)
    bad = [("actions", np.full(B, cfg.sizes[-1]), "actions must be in 0..1"),
           ("obs", np.full((B, 4), 1 << 20), "values of region 'obs' must be raw 16-bit"),
           ("rewards", np.full(B, 1 << 20), "rewards must be raw")]
    for field, value, match in bad:
        batch = dataclasses.replace(ok, **{field: value})
        assert hostfast.batch_images(cfg, batch) is None
        with pytest.raises(ValueError, match=match):
            drv.load_batch(batch)
    assert isinstance(ok, LearnerBatch)


def test_config_hash_is_cached_but_not_pickled():
    cfg = CONFIGS["shipped"]
    h = hash(cfg)
    assert h == hash(tuple(getattr(cfg, f.name) for f in dataclasses.fields(cfg)))
    again = pickle.loads(pickle.dumps(cfg))
    assert "_hash" not in again.__dict__ and again == cfg and hash(again) == h
    other = dataclasses.replace(cfg, max_batch=32)
    assert other != cfg and "_hash" not in other.__dict__


def test_lane_writes_at_every_offset_and_width():
    """The kernels' lane write (bytes at a time, bit by bit past 56 bits) against Python's
    integers: every bit offset in a byte, widths 1..63, negative values in two's complement."""
    put = hostfast._kernels()["put"]
    rng = np.random.default_rng(9)
    for lb in list(range(1, 64)):
        for bit in (0, 3, 7, 8, 13):
            v = int(rng.integers(-(1 << 62), 1 << 62))
            words = np.zeros((2, 16), np.uint8)
            put(words, 1, bit, np.int64(v), lb)
            want = (v & ((1 << lb) - 1)) << bit
            assert int.from_bytes(words[1].tobytes(), "little") == want, (lb, bit)
            assert not words[0].any()


def _numpy_prepare(drv, *args):
    kernels = hostfast._kernels()
    hostfast._K[:] = [None]
    try:
        return drv._prepare(*args)
    finally:
        hostfast._K[:] = [kernels]


@pytest.mark.parametrize("name", [n for n in CONFIGS if CONFIGS[n].loss == "dqn"])
@pytest.mark.parametrize("dtypes", [(np.float32, np.int64), (np.float64, np.int32)])
def test_compiled_dqn_batch_same_as_numpy(name, dtypes):
    """:func:`~sw.learner.hostfast.dqn_batch` (the caller's arrays checked, quantized and
    packed in one pass) gives the batch and the bytes of ``prepare`` + ``_images``."""
    cfg = CONFIGS[name]
    fdt, idt = dtypes
    drv = LearnerDriver(LearnerGoldenDevice(cfg), cfg)
    assert drv._dqn_params is not None
    rng = np.random.default_rng(3)
    n_in, n_out = cfg.sizes[0], cfg.sizes[-1]
    top = cfg.numerics.act_format.max_value
    for B in sorted({1, cfg.array + 1, cfg.max_batch}):
        for weighted in (False, True):
            args = (rng.uniform(-top, top, (B, n_in)).astype(fdt),
                    rng.integers(0, n_out, B).astype(idt),
                    rng.uniform(-top, top, B).astype(fdt),
                    rng.uniform(-top, top, (B, n_in)).astype(fdt), rng.random(B) < 0.3,
                    None, 0.97, 1e-3, rng.random(B).astype(fdt) if weighted else None)
            batch, images = drv._prepare(*args)
            assert images is not None, (name, B, weighted)
            slow, none = _numpy_prepare(drv, *args)
            assert none is None
            for f in dataclasses.fields(batch):
                a, b = getattr(batch, f.name), getattr(slow, f.name)
                assert type(a) is type(b), f.name
                if isinstance(a, np.ndarray):
                    assert a.dtype == b.dtype and np.array_equal(a, b), f.name
                else:
                    assert a == b, f.name
            want = numpy_images(drv, slow)
            assert list(images) == list(want)
            for region in want:
                assert bytes(images[region]) == bytes(want[region]), (name, B, region)


def test_compiled_dqn_batch_leaves_refusals_and_warnings_to_numpy():
    """Anything the numpy code refuses or warns about makes the compiled pass give way, so
    the caller gets the numpy code's error or warning (and the same batch)."""
    from sw.learner.errors import LearnerRangeWarning

    cfg = CONFIGS["shipped"]
    B = 8
    z = np.zeros
    base = dict(obs=z((B, 4), np.float32), actions=z(B, np.int64), rewards=z(B, np.float32),
                next_obs=z((B, 4), np.float32), dones=z(B, bool), loss_weights=None)
    bad = [("obs", np.full((B, 4), 1e6, np.float32), "obs: 32 value"),
           ("next_obs", np.full((B, 4), np.nan, np.float32), "next_obs must be finite"),
           ("rewards", np.full(B, np.inf, np.float32), "rewards must be finite"),
           ("actions", np.full(B, 2, np.int64), "actions must be integers in 0..1"),
           ("actions", np.full(B, -1, np.int32), "actions must be integers in 0..1"),
           ("loss_weights", np.full(B, 1.5, np.float32), "loss_weights must be in"),
           ("obs", z((B, 5), np.float32), r"obs must be a \[B, 4\] array")]
    drv = LearnerDriver(InstantDevice.for_kernel("learner_kernel_s4"))
    for field, value, match in bad:
        kw = {**base, field: value}
        with pytest.raises(ValueError, match=match):
            drv.train_step(**kw, lr=1e-3)
    clip = LearnerDriver(InstantDevice.for_kernel("learner_kernel_s4"), on_range="clip")
    kw = {**base, "rewards": np.full(B, 1e6, np.float32)}
    with pytest.warns(LearnerRangeWarning, match="rewards: 8 value"):
        batch, images = clip._prepare(kw["obs"], kw["actions"], kw["rewards"],
                                      kw["next_obs"], kw["dones"], None, 0.99, 1e-3, None)
    assert images is None and batch.rewards.max() == cfg.numerics.act_format.max_raw
