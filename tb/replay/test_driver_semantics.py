"""ReplayDriver semantics a PER user relies on, on the golden device: indices of
slots never filled are refused, a positive priority is never stored as 0, ``update`` takes TD
errors like cpprb and TorchRL (``(|delta| + eps) ** alpha``) or raw priorities by keyword, and
the documented snippet of docs/replay.md runs."""

import re
import warnings
from pathlib import Path

import numpy as np
import pytest

from replay_session import RTL

ROOT = Path(__file__).resolve().parents[2]


def _driver(config=None, **kw):
    from sw.replay.device import ReplayGoldenDevice
    from sw.replay.driver import ReplayDriver
    from sw.replay.spec import SumTreeConfig

    cfg = config or SumTreeConfig(**RTL)
    return ReplayDriver(ReplayGoldenDevice(cfg), **kw)


def _shipped():
    from sw.registry import shipped_config

    return shipped_config("replay_accel_k16")[1]


# -- indices must be filled slots -------------------------------------------------------------
@pytest.mark.parametrize("call", [
    lambda rb: rb.update([150], [5.0]),
    lambda rb: rb.update([150], priorities=[5.0]),
    lambda rb: rb.update_and_sample([3, 150], [1.0, 5.0], 4, 0.4),
    lambda rb: rb.read([100]),
])
def test_slots_never_filled_are_refused(call):
    rb = _driver(_shipped())
    rb.insert(count=100)
    before = rb.total()
    with pytest.raises(ValueError, match=r"indices must be filled slots, in 0\.\.99 \(100 of "
                                         r"65536 inserted\), not \d+"):
        call(rb)
    assert rb.total() == before and rb.size == 100


def test_nothing_inserted_refuses_every_index_and_full_buffer_takes_all():
    rb = _driver()
    with pytest.raises(ValueError, match=r"indices must be filled slots: nothing was inserted"):
        rb.update([0], [1.0])
    rb.insert(count=RTL["capacity"] + 5)                # wraps: every slot filled
    rb.update([RTL["capacity"] - 1], [1.0])
    rb.insert(count=1)
    rb.update([0], [1.0])


def test_samples_only_return_filled_slots():
    rb = _driver(_shipped())
    rb.insert(count=100)
    rb.update(np.arange(100), np.linspace(-1, 1, 100))
    rb.seed(7)
    idx = np.concatenate([rb.sample(64, 0.4)[0] for _ in range(64)])
    assert idx.max() < 100


# -- a positive priority is never stored as 0 -------------------------------------------------
def test_positive_priority_below_one_lsb_is_stored_as_one_lsb_and_reported():
    from sw.replay.driver import PriorityClampedWarning

    cfg = _shipped()
    lsb = 2.0 ** -cfg.priority_frac
    rb = _driver(cfg)
    rb.insert(count=4)
    with pytest.warns(PriorityClampedWarning, match=r"2 positive priorities below one LSB"):
        rb.update([0, 1, 2, 3], priorities=[1e-6, 7e-6, 0.0, 3 * lsb])
    np.testing.assert_array_equal(rb.read([0, 1, 2, 3]), [lsb, lsb, 0.0, 3 * lsb])
    assert rb.clamped == 2
    with pytest.warns(PriorityClampedWarning):
        rb.insert([1e-9])
    assert rb.clamped == 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rb.update([2], priorities=[0.0])                # zero stays zero, silently
    rb.update([3], priorities=[0.0])
    idx, _, p = rb.sample(16, 0.4)                      # the clamped leaves are sampled
    assert set(idx.tolist()) <= {0, 1, 4} and np.all(p == lsb)


# -- TD errors as cpprb / TorchRL users pass them ---------------------------------------------
def test_update_takes_td_errors_of_any_sign():
    from sw.replay.spec import PER_ALPHA, PER_EPS

    assert (PER_ALPHA, PER_EPS) == (0.6, 1e-4)
    rb = _driver()
    assert (rb.alpha, rb.eps) == (PER_ALPHA, PER_EPS)
    rb.insert(count=4)
    td = np.array([-2.0, 0.0, 0.5, -0.25])
    rb.update(np.arange(4), td)
    want = rb.config.priority_format
    expect = want.to_float(want.quantize((np.abs(td) + PER_EPS) ** PER_ALPHA))
    np.testing.assert_array_equal(rb.read(np.arange(4)), expect)
    rb.update(np.arange(4), td_errors=-td)
    np.testing.assert_array_equal(rb.read(np.arange(4)), expect)
    rb.update([1], priorities=[3.0])                    # raw priorities: stored as given
    assert rb.read([1])[0] == 3.0


def test_configured_alpha_and_eps_and_the_fused_run():
    rb = _driver(alpha=1.0, eps=0.5)
    rb.insert(count=3)
    idx, _, p = rb.update_and_sample([0, 1, 2], [-1.5, 0.5, -0.0], 3, 0.4,
                                     targets=np.array([0.0, 0.5, 0.99]))
    np.testing.assert_array_equal(rb.read([0, 1, 2]), [2.0, 1.0, 0.5])
    np.testing.assert_array_equal(idx, [0, 0, 2])
    rb.update_and_sample([0], None, 2, 0.4, priorities=[0.0])
    assert rb.read([0])[0] == 0.0
    rb = _driver(alpha=0.0)                              # alpha 0: uniform replay
    rb.insert(count=2)
    rb.update([0, 1], [-7.0, 1e-3])
    np.testing.assert_array_equal(rb.read([0, 1]), [1.0, 1.0])


@pytest.mark.parametrize("kw,match", [
    (dict(alpha=-0.1), r"alpha must be a finite number >= 0, not -0\.1"),
    (dict(alpha=float("nan")), r"alpha must be a finite number >= 0, not nan"),
    (dict(alpha="0.6"), r"alpha must be a finite number >= 0, not '0\.6'"),
    (dict(eps=-1e-4), r"eps must be a finite number >= 0, not -0\.0001"),
    (dict(eps=float("inf")), r"eps must be a finite number >= 0, not inf"),
])
def test_bad_alpha_or_eps_is_named(kw, match):
    with pytest.raises(ValueError, match=match):
        _driver(**kw)


@pytest.mark.parametrize("call,match", [
    (lambda rb: rb.update([0], [np.nan]), r"td_errors must be finite"),
    (lambda rb: rb.update([0], ["a"]), r"td_errors must be real numbers"),
    (lambda rb: rb.update([0, 1], [1.0]), r"td_errors must have 2 elements"),
    (lambda rb: rb.update([0]), r"give td_errors or priorities"),
    (lambda rb: rb.update([0], [1.0], priorities=[1.0]), r"td_errors or priorities, not both"),
    (lambda rb: rb.update([0], priorities=[-1.0]), r"priorities must be finite and non-neg"),
    (lambda rb: rb.update_and_sample([0], None, 2, 0.4), r"give td_errors or priorities"),
    (lambda rb: rb.update_and_sample([0], [1.0], None, 0.4), r"batch must be an integer"),
    (lambda rb: rb.update_and_sample([0], [1.0], 2), r"beta must be a finite number"),
])
def test_bad_td_errors_are_named_and_change_nothing(call, match):
    rb = _driver()
    rb.insert([1.0, 2.0])
    with pytest.raises(ValueError, match=match):
        call(rb)
    np.testing.assert_array_equal(rb.read([0, 1]), [1.0, 2.0])


def test_documented_snippet_runs_with_negative_td_errors():
    text = (ROOT / "docs" / "replay.md").read_text()
    block = re.search(r"## Driver\n.*?```python\n(.*?)```", text, re.S).group(1)
    ns = {}
    exec(compile(block, "docs/replay.md", "exec"), ns)    # noqa: S102 - our own docs
    assert (ns["td_err"] < 0).any()
    rb = ns["rb"]
    assert rb.size == 0                                  # the snippet ends with reset()
