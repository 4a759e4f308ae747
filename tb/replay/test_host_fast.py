"""The compiled host passes of the replay driver (:mod:`sw.replay.hostfast`) change nothing:
on the golden device, a session of inserts, updates (from TD errors and from priorities),
fused updates and samples gives the same tree, the same bytes written and the same samples
with the compiled passes as with the numpy code; input the numpy code refuses still gets its
error, before any bus access where it had one before."""

import warnings

import numpy as np
import pytest

from replay_session import RTL
from sw.replay import hostfast

pytestmark = pytest.mark.skipif(not hostfast.available(), reason="numba is not installed")


def _driver(**kw):
    from sw.replay.device import ReplayGoldenDevice
    from sw.replay.driver import ReplayDriver
    from sw.replay.spec import SumTreeConfig

    cfg = SumTreeConfig(**{**RTL, **kw})
    dev = ReplayGoldenDevice(cfg)
    return ReplayDriver(dev), dev


def _session(seed, rounding):
    """Every call's results and every block written, in order."""
    rb, dev = _driver(rounding=rounding)
    written = []
    write_blocks = dev.memory.write_blocks

    def spy(blocks, **kw):
        written.extend((off, bytes(memoryview(b).cast("B"))) for off, b in blocks)
        return write_blocks(blocks, **kw)
    dev.memory.write_blocks = spy
    rng = np.random.default_rng(seed)
    out = []
    rb.seed(1234)
    out.append(rb.insert(rng.random(200) * 4))
    with warnings.catch_warnings():
        warnings.simplefilter("error")              # nothing clamped or saturated here
        for step in range(40):
            B = int(rng.integers(1, rb.config.max_batch + 1))
            idx = rng.integers(0, rb.size, B)
            td = rng.normal(0, 2, B)
            if step % 3 == 0:
                rb.update(idx, td)
            elif step % 3 == 1:
                rb.update(idx, priorities=np.abs(td) * 3)
            else:
                out.append(rb.update_and_sample(idx, td, B, 0.4, relaxed=bool(step & 4)))
            out.append(rb.sample(B, 0.6))
            out.append(rb.sample(B, 0.0, targets=rng.random(B)))
    out.append(rb.read(np.arange(rb.size)))
    return out, written


def _numpy(fn, *args):
    kernels = hostfast._kernels()
    hostfast._K[:] = [None]
    try:
        return fn(*args)
    finally:
        hostfast._K[:] = [kernels]


@pytest.mark.parametrize("rounding", ["half_even", "floor"])
def test_same_session_as_numpy(rounding):
    fast, fast_written = _session(7, rounding)
    slow, slow_written = _numpy(_session, 7, rounding)
    assert [o for o, _ in fast_written] == [o for o, _ in slow_written]
    assert fast_written == slow_written                   # every staged byte
    assert len(fast) == len(slow)
    for a, b in zip(fast, slow):
        if isinstance(a, tuple):
            np.testing.assert_array_equal(a[0], b[0])                     # leaves
            np.testing.assert_allclose(a[1], b[1], rtol=1e-15, atol=0)    # weights (pow)
            np.testing.assert_array_equal(a[2], b[2])                     # priorities
            assert a[0].dtype == b[0].dtype and a[1].dtype == b[1].dtype
        else:
            np.testing.assert_array_equal(a, b)


def test_sampled_weights_match_the_formula():
    rb, _ = _driver()
    rb.insert(np.array([1.0, 3.0, 0.0, 4.0]))
    idx, w, p = rb.sample(8, 0.5, targets=np.array([0, .1, .15, .2, .5, .6, .9, .99]))
    np.testing.assert_array_equal(idx, [0, 0, 1, 1, 3, 3, 3, 3])
    raw = (4 * p / 8.0) ** -0.5
    np.testing.assert_allclose(w, raw / raw.max(), rtol=1e-15)
    assert w.max() == 1.0


@pytest.mark.parametrize("call,match", [
    (lambda rb: rb.update(np.array([1000]), np.array([1.0])), r"indices must be in 0..999"),
    (lambda rb: rb.update(np.array([-1]), np.array([1.0])), r"indices must be in 0..999"),
    (lambda rb: rb.update(np.array([1]), np.array([np.nan])), "td_errors must be finite"),
    (lambda rb: rb.update(np.array([1]), np.array([-np.inf])), "td_errors must be finite"),
    (lambda rb: rb.update(np.array([1]), priorities=np.array([-0.5])),
     "finite and non-negative"),
    (lambda rb: rb.update(np.array([1]), priorities=np.array([np.nan])),
     "finite and non-negative"),
    (lambda rb: rb.update(np.array([1, 2]), np.array([1.0])), "td_errors must have 2"),
    (lambda rb: rb.update_and_sample(np.array([1]), np.array([np.inf]), 2, 0.4),
     "td_errors must be finite"),
])
def test_refused_input_raises_before_any_bus_access(call, match):
    rb, dev = _driver()
    n = [0]
    ctl, mem = dev.control, dev.memory

    class Count:
        def __init__(self, inner):
            self._inner = inner

        def __getattr__(self, name):
            n[0] += 1
            return getattr(self._inner, name)
    dev.control, dev.memory = Count(ctl), Count(mem)
    with pytest.raises(ValueError, match=match):
        call(rb)
    assert n[0] == 0


def test_unfilled_slots_and_clamped_priorities_as_numpy():
    from sw.replay.driver import PriorityClampedWarning

    rb, _ = _driver()
    rb.insert(np.ones(10))
    with pytest.raises(ValueError, match=r"filled slots, in 0..9 \(10 of 1000"):
        rb.update(np.array([3, 10]), np.array([1.0, 2.0]))
    tiny = 2.0 ** -(rb.config.input_format.frac + 3)
    with pytest.warns(PriorityClampedWarning, match="stored as one LSB"):
        rb.update(np.array([3, 4]), priorities=np.array([tiny, 1.0]))
    assert rb.clamped == 1
    assert rb.read([3])[0] > 0
    # more than max_batch indices: chunks, through the numpy code
    idx = np.tile(np.arange(10), 7)[:rb.config.max_batch + 5]
    rb.update(idx, priorities=np.full(idx.size, 2.0))
    np.testing.assert_array_equal(rb.read(np.arange(10)), 2.0)
