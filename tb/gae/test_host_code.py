"""The GAE driver's host code at native speed, bit for bit against what it
replaced: the error-feedback rounding (numba kernel and numpy fallback) against the original
per-time-step loop kept here, and whole driver calls whose memory images and results must equal
those built with the reference layout of tb/gae/test_layout.py."""

import warnings

import numpy as np
import pytest

from sw.gae import quant
from sw.gae.device import GoldenDevice
from sw.gae.driver import GaeDriver
from sw.gae.layout import region_base, word_bytes
from sw.registry import shipped_config

from gae.test_layout import ref_pack_rows, ref_unpack_rows


def ref_error_feedback(q, x):
    """UniformQuantizer.quantize(x, error_feedback=True) as a Python loop."""
    a = np.clip(np.asarray(x, np.float64), -q.clip, q.clip)
    codes = np.empty(a.shape, dtype=q.dtype)
    carry = np.zeros(a.shape[1:])
    for t in range(a.shape[0] - 1, -1, -1):
        u = a[t] + carry
        c = np.clip(np.rint(u / q.step), -q.qmax, q.qmax)
        codes[t] = c
        carry = u - c * q.step
    return codes


CASES = [((1024, 64), 1.0), ((1, 1), 1.0), ((1, 7), 5.0), ((9,), 1.0), ((3, 4, 5), 2.0),
         ((200, 3), 1e-9), ((50, 8), 1e6), ((0, 4), 1.0), ((4, 0), 1.0)]


@pytest.mark.parametrize("bits,clip", [(8, 8.0), (8, 4.0), (16, 8.0), (2, 1.0), (5, 3.0)])
@pytest.mark.parametrize("path", ["default", "numpy"])
def test_error_feedback_bit_identical(bits, clip, path, monkeypatch):
    if path == "numpy":
        monkeypatch.setattr(quant, "_EF_KERNEL", [None])
    q = quant.UniformQuantizer(bits=bits, clip=clip)
    rng = np.random.default_rng(bits)
    for shape, scale in CASES:
        x = rng.normal(size=shape) * scale
        # ties: multiples of half a step, where rounding to even decides
        x.flat[::3] = np.round(x.flat[::3] / q.step * 2) * q.step / 2
        got = q.quantize(x, error_feedback=True)
        assert got.dtype == q.dtype and got.shape == x.shape
        np.testing.assert_array_equal(got, ref_error_feedback(q, x), err_msg=str(shape))
    with pytest.raises(ValueError, match="x must have a time axis"):
        q.quantize(1.0, error_feedback=True)


def test_the_numba_kernel_is_used():
    """numba is a declared dependency: the fast path must be the one that runs here."""
    quant._error_feedback(np.zeros((1, 1)), 1.0, 1.0, np.empty((1, 1), np.int8))
    assert quant._EF_KERNEL[0] is not None


class RefImages:
    """Memory port wrapper that checks every write against the reference packing and decodes
    every read with the reference unpacking."""

    def __init__(self, dev, cfg):
        self.inner, self.cfg, self.writes = dev.memory, cfg, []
        dev.memory = self

    def write(self, offset, data):
        self.writes.append((offset, bytes(data)))
        self.inner.write(offset, data)

    def read(self, offset, nbytes):
        return self.inner.read(offset, nbytes)


@pytest.mark.parametrize("module", ["gae_accel_n8", "gae_accel_n64", "gae_kernel_n8"])
@pytest.mark.parametrize("T,M,p_done", [(1, 1, 0.0), (7, 13, 1.0), (33, 64, 0.05)])
def test_driver_images_and_results_equal_the_reference(module, T, M, p_done):
    _, cfg = shipped_config(module)
    cfg = getattr(cfg, "accel", cfg)
    dev = GoldenDevice(cfg)
    mem = RefImages(dev, cfg)
    drv = GaeDriver(dev, cfg, units="standardized")    # checks the pipeline's codes
    rng = np.random.default_rng(T * M)
    r = rng.normal(size=(T, M)) * 3 + 1
    r[0, 0] = 1e6                                             # an extreme reward (clipped)
    v = rng.normal(size=(T, M))
    d = rng.random((T, M)) < p_done
    last = rng.normal(size=M)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                       # overflow flags: not the point
        adv, ret = drv.compute(r, v, d, last, 0.99, 0.95)
    b = drv.last_batch
    c = b.codes
    want = {region_base(cfg, "rewards"): ref_pack_rows(cfg, "rewards", c["rewards"]),
            region_base(cfg, "values"): ref_pack_rows(
                cfg, "values", np.vstack([c["values"], c["bootstrap"][None]])),
            region_base(cfg, "dones"): ref_pack_rows(cfg, "dones", c["dones"])}
    assert dict(mem.writes[:3]) == want
    np.testing.assert_array_equal(c["rewards"], ref_error_feedback(drv.pipeline.reward_quantizer,
                                                    b.prepared["standardized_rewards"]))
    G = -(-M // cfg.n_pe)
    raw = [ref_unpack_rows(cfg, n, bytes(dev.memory.read(region_base(cfg, n),
                                                         T * G * word_bytes(cfg, n))), T, M)
           for n in ("rewards", "values")]
    a, g = drv.dequantize(b, *raw)
    last = b.runs - 1                       # elements taken from earlier, narrower runs differ
    np.testing.assert_array_equal(adv[b.result_run[0] == last], a[b.result_run[0] == last])
    np.testing.assert_array_equal(ret[b.result_run[1] == last], g[b.result_run[1] == last])

