"""GaeDriver's in-place 8-bit results against textbook GAE on any data: the error bound, the
refinement runs, and properties over the ranges the driver promises (docs/gae.md, "Accuracy").

Promise: in the caller's units, advantages and returns within 3 % relative RMS error of
:func:`gae_reference` for any ``(gamma, lambda)`` in [0, 1]^2, values whose RMS is 0.1 to 10
times the rewards', and any ``T`` the configuration holds. Checked with hypothesis on the
shipped ``gae_accel_n8`` (the golden device, bit-exact with the RTL), with batches of noisy
values as fixed examples, and element by element against the bound the driver computes
(:func:`sw.gae.results.error_bounds`).
"""

import math
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from sw.driver import GaeDriver, GaeOverflowWarning, GoldenDevice
from sw.gae.golden import gae_reference
from sw.gae.results import MAX_REFINEMENTS, error_bounds, residual_rewards
from sw.gae.spec import GaeCoreConfig
from sw.registry import shipped_config

from gae_cases import noisy_values_batch, synthetic

_, CFG = shipped_config("gae_accel_n8")
FULL = GaeCoreConfig.from_dict({**CFG.to_dict(), "results": "full"})
TOLERANCE = 0.03


def rel_rms(x, ref):
    return math.sqrt(float(np.mean((x - ref) ** 2)) / float(np.mean(ref ** 2)))


def compute(batch, gamma, lam, cfg=CFG, **kw):
    drv = GaeDriver(GoldenDevice(cfg), cfg, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("error", GaeOverflowWarning)      # nothing saturates
        adv, ret = drv.compute(*batch, gamma, lam)
    return adv, ret, drv.last_batch


def check_bound(adv, ref_a, batch):
    """Every advantage within the bound of the stage it came from (the last refinement's, or
    the batch's own), and the relative bounds the driver reports above the errors."""
    stage = (batch.refinements or [batch])[-1]
    per_run = error_bounds(stage, CFG)
    bound = per_run[stage.result_run[0]] if len(per_run) > 1 else per_run[0]
    worst = float(np.max(np.abs(adv - ref_a) / bound))
    assert worst <= 1.0, worst


# -- the properties ------------------------------------------------------------------------------
coef = st.one_of(st.sampled_from([0.0, 1.0]), st.floats(0.0, 1.0),
                 st.floats(-5.0, -1.0).map(lambda e: 1.0 - 10.0 ** e))   # just below 1


@st.composite
def cases(draw):
    M = draw(st.sampled_from([1, 2, 5, 8, 13, 64]))
    t_max = CFG.depth // -(-M // CFG.n_pe) - 1
    # log-uniform, the top 3 % of the draws the whole depth
    T = max(1, round(math.exp(draw(st.floats(0.0, 1.03 * math.log(t_max))))))
    return dict(seed=draw(st.integers(0, 2 ** 32 - 1)), T=min(T, t_max), M=M,
                reward=draw(st.sampled_from(["gauss", "shifted", "sparse", "constant"])),
                value=draw(st.sampled_from(["iid", "walk", "critic"])),
                ratio=10.0 ** draw(st.floats(-1.0, 1.0)),
                scale=10.0 ** draw(st.floats(-3.0, 3.0)),
                p_done=draw(st.sampled_from([0.0, 0.001, 0.04, 0.2])))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases(), gamma=coef, lam=coef)
@example(case=dict(seed=0, T=8199, M=1, reward="constant", value="walk", ratio=1.0, scale=1.0,
                   p_done=0.0), gamma=0.99999, lam=1.0)                 # powers of gamma*lambda
@example(case=dict(seed=1, T=300, M=5, reward="gauss", value="iid", ratio=10.0, scale=1.0,
                   p_done=0.04), gamma=0.0, lam=0.0)                    # returns 1/10 of A
def test_within_three_percent_on_any_data(case, gamma, lam):
    batch = synthetic(**case)
    ref_a, ref_r = gae_reference(*batch, gamma, lam)
    assume(np.mean(ref_a ** 2) > 0 and np.mean(ref_r ** 2) > 0)  # a sparse batch of zeros
    adv, ret, b = compute(batch, gamma, lam)
    ea, er = rel_rms(adv, ref_a), rel_rms(ret, ref_r)
    assert ea <= TOLERANCE and er <= TOLERANCE, (ea, er, b.total_runs)
    assert b.error_bound[0] >= ea and b.error_bound[1] >= er
    check_bound(adv, ref_a, b)


# -- noisy values ----------------------------------------------------------------------------------
@pytest.mark.parametrize("gamma, lam, before", [(1.0, 1.0, 0.06), (0.99, 0.95, 0.028)])
def test_noisy_values_batch(gamma, lam, before):
    """Values spread 3 times the rewards: one run's result range follows the TD errors, whose
    value noise telescopes out of the advantages, so its code step is far too coarse (7 % at
    gamma = lambda = 1 without refinement); refined, both results are within 3 %."""
    batch = noisy_values_batch()
    ref_a, ref_r = gae_reference(*batch, gamma, lam)
    one, _, b1 = compute(batch, gamma, lam, result_tolerance=None)
    assert b1.total_runs == 1 and rel_rms(one, ref_a) > before
    adv, ret, b = compute(batch, gamma, lam)
    assert len(b.refinements) == 1 and b.total_runs == 2
    assert rel_rms(adv, ref_a) <= 0.005 and rel_rms(ret, ref_r) <= 0.005
    check_bound(adv, ref_a, b)


def test_cartpole_at_gamma_lambda_one():
    from sw.rollouts import collect

    ro = collect("CartPole-v1", num_envs=5, num_steps=300, seed=0)
    batch = (ro.rewards, ro.values, ro.dones, ro.last_values)
    ref_a, ref_r = gae_reference(*batch, 1.0, 1.0)
    adv, ret, b = compute(batch, 1.0, 1.0)
    assert rel_rms(adv, ref_a) <= TOLERANCE and rel_rms(ret, ref_r) <= TOLERANCE
    check_bound(adv, ref_a, b)


def test_returns_ten_times_smaller_than_the_advantages():
    """gamma = 0 and values 10 times the rewards: A = r - V, the returns are r. Half a code
    of A's range is 8 % of the returns, whatever the range; the refinement's codes step
    within the first run's error."""
    batch = synthetic(1, 300, 5, reward="gauss", value="iid", ratio=10.0)
    ref_a, ref_r = gae_reference(*batch, 0.0, 0.0)
    _, one, _ = compute(batch, 0.0, 0.0, result_tolerance=None)
    assert rel_rms(one, ref_r) > 0.05
    adv, ret, b = compute(batch, 0.0, 0.0)
    assert rel_rms(ret, ref_r) <= TOLERANCE and b.refinements


def test_refinement_removes_the_coefficient_rounding():
    """gamma lambda just below 1 over the whole depth: the PE's powers of gamma lambda (17-bit
    coefficients) weigh late TD errors 1-2 % off, in full-precision results too. The
    residual's rewards use the exact gamma lambda, so a refinement cancels it."""
    batch = synthetic(0, CFG.depth - 1, 1, reward="constant", value="walk", ratio=1.0,
                      p_done=0.0)
    ref_a, _ = gae_reference(*batch, 0.9999, 1.0)
    full, _, _ = compute(batch, 0.9999, 1.0, cfg=FULL)
    assert rel_rms(full, ref_a) > 0.01
    adv, _, b = compute(batch, 0.9999, 1.0)
    assert b.refinements and rel_rms(adv, ref_a) < 1e-3
    check_bound(adv, ref_a, b)


# -- the pieces --------------------------------------------------------------------------------------
@pytest.mark.parametrize("gamma, lam", [(0.99, 0.95), (1.0, 1.0), (0.5, 0.0), (0.0, 1.0)])
def test_residual_rewards_have_the_error_as_their_advantages(gamma, lam):
    """GAE is linear in the rewards: with zero values the residual rewards' textbook
    advantages are the reference minus the advantages they refine."""
    batch = synthetic(3, 40, 6, reward="gauss", value="walk", ratio=3.0, p_done=0.1)
    _, _, b = compute(batch, gamma, lam, result_tolerance=None)
    ref_a, _ = gae_reference(*batch, gamma, lam)
    approx = ref_a + np.random.default_rng(4).normal(scale=0.1, size=ref_a.shape)
    rho = residual_rewards(b, approx)
    zeros = np.zeros_like(ref_a)
    got, _ = gae_reference(rho, zeros, batch[2], zeros[0], gamma, lam)
    np.testing.assert_allclose(got, ref_a - approx, atol=1e-12)


def test_tolerance_and_the_refinement_cap():
    batch = noisy_values_batch()
    _, _, loose = compute(batch, 0.99, 0.95, result_tolerance=0.5)
    assert not loose.refinements and max(loose.error_bound) <= 0.5
    adv, _, tight = compute(batch, 0.99, 0.95, result_tolerance=1e-9)
    assert len(tight.refinements) == MAX_REFINEMENTS
    assert tight.total_runs == 1 + MAX_REFINEMENTS + sum(r.runs - 1 for r in tight.refinements)
    assert max(tight.error_bound) < 1e-4
    ref_a, _ = gae_reference(*batch, 0.99, 0.95)
    assert rel_rms(adv, ref_a) < 1e-5
    for bad in (0, 1, -0.1, True, "0.03"):
        with pytest.raises(ValueError, match="result_tolerance must be a number in "
                                             r"\(0, 1\) or None, not "):
            GaeDriver(GoldenDevice(CFG), CFG, result_tolerance=bad)


def test_no_refinement_where_there_is_no_textbook_reference():
    """Standardized units (HEPPO's GAE of standardized rewards) and full-precision results
    run once."""
    batch = noisy_values_batch()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, _, std = compute(batch, 1.0, 1.0, units="standardized")
    _, _, full = compute(batch, 1.0, 1.0, cfg=FULL)
    for b in (std, full):
        assert not b.refinements and b.error_bound is None and b.total_runs == 1


def test_float32_out_arrays_get_the_refined_results():
    batch = noisy_values_batch()
    adv, ret, _ = compute(batch, 1.0, 1.0)
    out = (np.empty(adv.shape, np.float32), np.empty(adv.shape, np.float32))
    drv = GaeDriver(GoldenDevice(CFG), CFG)
    got = drv.compute(*batch, 1.0, 1.0, out=out)
    assert got[0] is out[0] and got[1] is out[1]
    np.testing.assert_array_equal(out[0], adv.astype(np.float32))
    np.testing.assert_array_equal(out[1], ret.astype(np.float32))
