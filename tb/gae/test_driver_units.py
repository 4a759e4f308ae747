"""GaeDriver's default: textbook GAE of the caller's rewards and values, in their units, per
call, and the episode-flag conventions users hold (SB3/CleanRL, gymnasium).

References written out here, independent of the driver: :func:`gae_reference` (ours, "ended at
t"), :func:`sb3_gae` (Stable-Baselines3's ``RolloutBuffer.compute_returns_and_advantage``) and
:func:`gymnasium_gae` (terminated / truncated with the final observation's value).
"""

import math
import warnings

import numpy as np
import pytest
from driver_util import rollout

from sw.driver import GaeDriver, GaeOverflowWarning, GoldenDevice
from sw.gae.golden import dones_from_episode_starts, gae_reference
from sw.gae.pipeline import GaeQuantizationPipeline
from sw.gae.spec import GaeCoreConfig

HEPPO = {"n_pe": 8, "max_trajectories": 64, "capacity": 256}
PAIRS = [(0.99, 0.95), (0.9, 0.0), (1.0, 1.0)]


def make(bits=8, results="inplace", **kw):
    cfg = GaeCoreConfig.from_dict({**HEPPO, "code_bits": bits, "results": results})
    return GaeDriver(GoldenDevice(cfg), cfg, **kw)


def rel_rms(x, ref):
    return math.sqrt(np.mean((x - ref) ** 2) / np.mean(ref ** 2))


def compute(drv, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("error", GaeOverflowWarning)     # no saturation anywhere
        return drv.compute(*args, **kw)


def sb3_gae(rewards, values, episode_starts, last_values, next_done, gamma, lam):
    """Stable-Baselines3's ``compute_returns_and_advantage`` (``dones`` = ``next_done``)."""
    T = rewards.shape[0]
    adv = np.zeros_like(rewards, dtype=np.float64)
    last = 0.0
    for step in reversed(range(T)):
        if step == T - 1:
            non_terminal = 1.0 - next_done.astype(np.float64)
            next_values = last_values
        else:
            non_terminal = 1.0 - episode_starts[step + 1].astype(np.float64)
            next_values = values[step + 1]
        delta = rewards[step] + gamma * next_values * non_terminal - values[step]
        last = delta + gamma * lam * non_terminal * last
        adv[step] = last
    return adv, adv + values


def gymnasium_gae(rewards, values, terminated, truncated, final_values, last_values, gamma,
                  lam):
    """Textbook GAE on gymnasium flags: a truncated step bootstraps from its final value."""
    T = rewards.shape[0]
    adv = np.zeros_like(rewards, dtype=np.float64)
    last = np.zeros(rewards.shape[1])
    next_values = last_values
    for t in reversed(range(T)):
        ended = terminated[t] | truncated[t]
        boot = np.where(terminated[t], 0.0, np.where(truncated[t], final_values[t],
                                                     next_values))
        delta = rewards[t] + gamma * boot - values[t]
        last = delta + gamma * lam * np.where(ended, 0.0, last)
        adv[t] = last
        next_values = values[t]
    return adv, adv + values


@pytest.fixture(scope="module")
def cartpole():
    from sw.rollouts import collect

    ro = collect("CartPole-v1", num_envs=16, num_steps=128, seed=3)
    return ro.rewards, ro.values, ro.dones, ro.last_values


def data(kind, cartpole):
    if kind == "cartpole":
        return cartpole
    return rollout(np.random.default_rng(5), 128, 16, reward=kind)


# Relative RMS error of advantages against textbook GAE (measured: docs/gae.md, "Accuracy"):
# the targets, 3 % with 8-bit codes, 0.1 % with 16-bit ones (8-bit full-precision
# results: 0.42 % worst measured here, 5.6 % before matched rounding). The returns are the
# advantages plus the caller's values, off by the same amounts, which are a larger fraction of
# returns smaller than the advantages (sparse rewards at gamma = lambda = 1: 5.1 %).
LIMIT = {(8, "inplace"): 0.03, (8, "full"): 0.01, (16, "inplace"): 1e-3, (16, "full"): 1e-3}
RETURNS_LIMIT = {(8, "inplace"): 0.06, (8, "full"): 0.01, (16, "inplace"): 1e-3}


@pytest.mark.parametrize("kind", ["gauss", "sparse", "cartpole"])
@pytest.mark.parametrize("gamma, lam", PAIRS)
@pytest.mark.parametrize("bits, results", [(8, "inplace"), (8, "full"), (16, "inplace")])
def test_default_is_textbook_gae_in_the_callers_units(kind, gamma, lam, bits, results, cartpole):
    batch = data(kind, cartpole)
    drv = make(bits, results)
    adv, ret = compute(drv, *batch, gamma, lam)
    ref_a, ref_r = gae_reference(*batch, gamma, lam)
    assert rel_rms(adv, ref_a) <= LIMIT[bits, results], rel_rms(adv, ref_a)
    assert rel_rms(ret, ref_r) <= RETURNS_LIMIT[bits, results], rel_rms(ret, ref_r)
    assert drv.last_batch.units == "caller"


def random_walk_batch(T=256, M=64, seed=1):
    """scripts/gae_accuracy.py's random data: values a random walk over a wide range."""
    rng = np.random.default_rng(seed)
    dones = rng.random((T, M)) < 0.05
    rewards = rng.normal(size=(T, M))
    values = 2.0 * np.cumsum(rng.normal(scale=0.3, size=(T, M)), axis=0) + 1.0
    return rewards, values, dones, values[-1] + rng.normal(scale=0.3, size=M)


@pytest.mark.parametrize("gamma, lam", PAIRS)
def test_values_over_a_wide_range_cost_no_advantage_accuracy(gamma, lam):
    """Matched rounding (sw.gae.batch): the reward codes absorb the value codes' rounding, so
    values spanning a wide range (8-bit steps of 0.2 against TD errors of ~1.4) leave the
    advantages within 3 %; rounding each stream to nearest gave 3.66 % at lambda = 0 (the
    value codes alone 3.55 %)."""
    batch = random_walk_batch()
    adv, ret = compute(make(), *batch, gamma, lam)
    ref_a, ref_r = gae_reference(*batch, gamma, lam)
    assert rel_rms(adv, ref_a) <= 0.03, rel_rms(adv, ref_a)
    full, _ = compute(make(results="full"), *batch, gamma, lam)
    assert rel_rms(full, ref_a) <= 0.006, rel_rms(full, ref_a)
    cfg = make().config
    nearest = GaeDriver(GoldenDevice(cfg), cfg, result_tolerance=None,   # one run, unrefined
                        pipeline=GaeQuantizationPipeline(reward_rounding="nearest"))
    if lam == 0.0:                   # what nearest rounding costs: the value codes' rounding
        assert rel_rms(compute(nearest, *batch, gamma, lam)[0], ref_a) > 0.03


def test_constant_reward_keeps_its_value():
    """CartPole's +1 everywhere: standardized units centre it to 0, the caller's keep it."""
    T, M = 64, 8
    r, v = np.ones((T, M)), np.zeros((T, M))
    d, last = np.zeros((T, M), bool), np.zeros(M)
    d[31] = True
    ref_a, ref_r = gae_reference(r, v, d, last, 0.99, 0.95)
    adv, ret = compute(make(), r, v, d, last, 0.99, 0.95)
    assert rel_rms(adv, ref_a) < 0.01 and adv.min() > 0.9
    centred, _ = make(units="standardized").compute(r, v, d, last, 0.99, 0.95)
    assert np.abs(centred).max() < 1e-3                  # HEPPO's mode: the +1 is gone


def test_same_batch_same_answer_whatever_came_before():
    rng = np.random.default_rng(6)
    x = rollout(rng, 64, 8, reward="gauss")
    first = compute(make(), *x, 0.99, 0.95)
    drv = make()
    for scale in (1e3, 1e-2):
        r, v, d, last = rollout(rng, 40, 12, reward="gauss")
        compute(drv, r * scale, v * scale, d, last * scale, 0.9, 0.5)
    again = compute(drv, *x, 0.99, 0.95)
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("scale", [1e-3, 1e6])
def test_any_reward_scale_fits_without_saturation(scale):
    """The batch is scaled by a power of two into the PE's range: tiny and huge rewards."""
    r, v, d, last = rollout(np.random.default_rng(7), 64, 8, reward="gauss")
    batch = (r * scale, v * scale, d, last * scale)
    adv, ret = compute(make(16), *batch, 0.99, 0.95)
    ref_a, ref_r = gae_reference(*batch, 0.99, 0.95)
    assert rel_rms(adv, ref_a) <= 1e-3 and rel_rms(ret, ref_r) <= 1e-3


def test_standardized_units_are_the_old_behaviour():
    """HEPPO's mode stays available: GAE of the standardized rewards, history-dependent."""
    rng = np.random.default_rng(8)
    x = rollout(rng, 32, 8, reward="gauss")
    drv = make(units="standardized")
    a1, _ = drv.compute(*x, 0.99, 0.95)
    drv.compute(*rollout(rng, 32, 8, reward="gauss"), 0.99, 0.95)
    a2, _ = drv.compute(*x, 0.99, 0.95)
    assert not np.array_equal(a1, a2)
    ref, _ = gae_reference(drv.last_batch.prepared["standardized_rewards"], *x[1:], 0.99, 0.95)
    assert rel_rms(a2, ref) < 0.05
    with pytest.raises(ValueError, match="units must be one of 'caller', 'standardized', "
                                         "not 'raw'"):
        make(units="raw")


@pytest.mark.parametrize("results", ["inplace", "full"])
@pytest.mark.parametrize("gamma, lam", PAIRS)
def test_standardized_16_bit_codes_beat_8_bit_ones(gamma, lam, results):
    """With Q16.16 scale registers a 16-bit code step of a standardized stream
    (2.4e-4) was under four register units, and 16-bit codes were no more accurate than 8-bit
    ones (0.67-0.68 % on this batch); the mantissa-and-shift scales hold it to 2^-17 relative:
    0.004-0.017 %. Quantization error against float GAE of the standardized rewards."""
    batch = random_walk_batch()
    errors = {}
    for bits in (8, 16):
        drv = make(bits, results, units="standardized")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            adv, _ = drv.compute(*batch, gamma, lam)
        ref, _ = gae_reference(drv.last_batch.prepared["standardized_rewards"], *batch[1:],
                               gamma, lam)
        errors[bits] = rel_rms(adv, ref)
    assert errors[16] < 5e-4 and errors[16] < errors[8] / 20, errors


# -- episode flags ---------------------------------------------------------------------------
def test_episode_starts_match_sb3():
    r, v, _, last = rollout(np.random.default_rng(9), 96, 16, reward="gauss")
    rng = np.random.default_rng(10)
    starts = rng.random(r.shape) < 0.05
    next_done = rng.random(16) < 0.3
    drv = make(16)
    adv, ret = compute(drv, r, v, last_values=last, gamma=0.99, lam=0.95,
                       episode_starts=starts, next_done=next_done)
    np.testing.assert_array_equal(drv.last_batch.codes["dones"],
                                  dones_from_episode_starts(starts, next_done))
    ref_a, ref_r = sb3_gae(r, v, starts, last, next_done, 0.99, 0.95)
    assert rel_rms(adv, ref_a) <= 1e-3 and rel_rms(ret, ref_r) <= 1e-3


@pytest.mark.parametrize("bits, limit", [(16, 1e-3), (8, 0.05)])
def test_terminated_and_truncated_bootstrap_from_the_final_value(bits, limit):
    r, v, _, last = rollout(np.random.default_rng(11), 96, 16, reward="gauss")
    rng = np.random.default_rng(12)
    term = rng.random(r.shape) < 0.03
    trunc = rng.random(r.shape) < 0.03
    trunc[-1, :4] = True                       # truncated at the last step: final value, not last
    final = np.where(trunc, rng.normal(size=r.shape) * 2 + 1, np.nan)
    drv = make(bits)
    adv, ret = compute(drv, r, v, last_values=last, gamma=0.99, lam=0.95, terminated=term,
                       truncated=trunc, final_values=final)
    ref_a, ref_r = gymnasium_gae(r, v, term, trunc, final, last, 0.99, 0.95)
    assert rel_rms(adv, ref_a) <= limit and rel_rms(ret, ref_r) <= limit
    # Treating truncation as termination (what "dones" alone does) is measurably different.
    wrong, _ = gae_reference(r, v, term | trunc, last, 0.99, 0.95)
    assert rel_rms(wrong, ref_a) > 0.1


@pytest.mark.parametrize("kw, message", [
    ({}, "give exactly one of dones .* not none"),
    ({"dones": "D", "episode_starts": "D"}, "not dones, episode_starts"),
    ({"episode_starts": "D"}, "episode_starts needs next_done"),
    ({"terminated": "D"}, "terminated needs truncated"),
    ({"terminated": "Z", "truncated": "D"}, "truncated steps need final_values"),
    ({"dones": "D", "next_done": np.zeros(3, bool)}, "next_done goes with episode_starts"),
    ({"terminated": "Z", "truncated": "D", "final_values": np.full((6, 3), np.nan)},
     "final_values must be finite where truncated is set"),
    ({"episode_starts": "D", "next_done": np.zeros(4, bool)}, r"next_done must have shape"),
    ({"terminated": np.full((6, 3), 2), "truncated": "D"}, "terminated must be bool-like"),
])
def test_flag_conventions_are_checked(kw, message):
    drv = make()
    flags = np.zeros((6, 3), bool)
    flags[2, 1] = True
    kw = {k: ({"D": flags, "Z": ~flags & flags}[x] if isinstance(x, str) else x)
          for k, x in kw.items()}
    with pytest.raises(ValueError, match=message):
        drv.compute(np.ones((6, 3)), np.ones((6, 3)), last_values=np.ones(3), gamma=0.9,
                    lam=0.9, **kw)


def test_truncation_needs_the_callers_units():
    drv = make(units="standardized")
    flags = np.zeros((6, 3), bool)
    flags[2, 1] = True
    with pytest.raises(ValueError, match="truncated steps need units='caller'"):
        drv.compute(np.ones((6, 3)), np.ones((6, 3)), last_values=np.ones(3), gamma=0.9,
                    lam=0.9, terminated=~flags & flags, truncated=flags,
                    final_values=np.ones((6, 3)))


# -- in-place result ranges (host side) ------------------------------------------------------
@pytest.mark.parametrize("dones, longest", [
    ([[0, 1], [1, 0], [0, 0], [0, 1], [0, 0]], 3),   # trajectory 1: steps 1..3
    ([[0, 0], [0, 0], [0, 1]], 3), ([[1], [1], [1]], 1), ([[0], [0], [1], [0]], 3),
    ([[1, 0], [0, 0], [0, 0], [1, 0]], 4),           # trajectory 1: the whole batch
])
def test_longest_segment_counts_steps_to_an_episode_end(dones, longest):
    from sw.gae.results import longest_segment

    assert longest_segment(np.array(dones, bool)) == longest


def test_retry_keeps_the_unsaturated_results_of_the_narrower_run():
    """An element whose code did not saturate in a run keeps that run's (finer) result."""
    batch = rollout(np.random.default_rng(13), 64, 8, reward="gauss")
    narrow = make(result_range=(2.0, 8.0), on_requant_overflow="warn")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GaeOverflowWarning)
        a1, r1 = narrow.compute(*batch, 0.99, 0.95)
    qmax = narrow.config.code_max
    b = narrow.last_batch
    keep_a = np.abs(a1 * b.unit_scale) < b.adv_range * (qmax - 0.5) / qmax
    assert 0.3 < keep_a.mean() < 1
    drv = make(result_range=(2.0, 8.0))                 # "retry": widen, run again, merge
    a2, _ = compute(drv, *batch, 0.99, 0.95)
    assert drv.last_batch.runs > 1
    np.testing.assert_array_equal(a2[keep_a], a1[keep_a])
    ref_a, _ = gae_reference(*batch, 0.99, 0.95)
    assert rel_rms(a2, ref_a) < rel_rms(a1, ref_a)


@pytest.mark.parametrize("kind", ["gauss", "cartpole"])
def test_gamma_lambda_one_within_three_percent_in_8_bits(kind, cartpole):
    """The advantage range follows the episodes in the batch (a sum of L_t TD errors, not T):
    at gamma = lambda = 1 in-place 8-bit results were 4-6 % off before."""
    batch = data(kind, cartpole)
    adv, _ = compute(make(), *batch, 1.0, 1.0)
    ref_a, _ = gae_reference(*batch, 1.0, 1.0)
    assert rel_rms(adv, ref_a) <= 0.03, rel_rms(adv, ref_a)


def test_gymnasium_rollout_with_time_limit_truncation():
    """A real CartPole-v1 rollout under a 12-step TimeLimit: gymnasium's flags and final
    observations straight into compute, against textbook GAE written out."""
    import gymnasium as gym

    T, M = 96, 8
    envs = gym.vector.SyncVectorEnv(
        [lambda: gym.make("CartPole-v1", max_episode_steps=12) for _ in range(M)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    w = np.array([1.0, 0.5, -3.0, -1.0])

    def critic(o):
        return 15.0 + o @ w

    obs, _ = envs.reset(seed=21)
    envs.action_space.seed(21)
    r, v = np.zeros((T, M)), np.zeros((T, M))
    term, trunc = np.zeros((T, M), bool), np.zeros((T, M), bool)
    final = np.full((T, M), np.nan)
    for t in range(T):
        v[t] = critic(obs)
        obs, r[t], term[t], trunc[t], info = envs.step(envs.action_space.sample())
        if "final_obs" in info:                        # the final observation of step t
            for j in np.flatnonzero(info["_final_obs"]):
                final[t, j] = critic(info["final_obs"][j])
    envs.close()
    last = critic(obs)
    adv, ret = compute(make(16), r, v, last_values=last, gamma=0.99, lam=0.95, terminated=term,
                       truncated=trunc, final_values=final)
    ref_a, ref_r = gymnasium_gae(r, v, term, trunc, final, last, 0.99, 0.95)
    assert trunc.sum() >= 20 and term.sum() >= 10 and np.isfinite(final[trunc]).all()
    assert rel_rms(adv, ref_a) <= 1e-3 and rel_rms(ret, ref_r) <= 1e-3


# -- a worst-case bound, not only RMS --------------------------------------------------------
def caller_bound(drv, b, values, last, rewards):
    """Elementwise bound on |compute - gae_reference| in the caller's units. Matched rounding
    (sw.gae.batch) leaves each advantage off by its own carry, half a reward code, whatever
    the values' codes; then the rounding of gamma * lambda through ``|delta| H^2``, the PE's
    and the dequantizers' rounding a few ulps per step, half a result code. The returns are
    the advantages plus the caller's values: the same bound."""
    cfg, u = drv.config, b.unit_scale
    rf, df = cfg.reg_format, cfg.pe.data_format
    g, gl = b.gamma, b.gamma * b.lam
    H = sum(gl ** k for k in range(b.T))
    e_r = rf.to_float(b.args.reward_scale) / 2 / u
    e_v = rf.to_float(b.args.value_scale) / 2 / u
    v_max = max(np.abs(values).max(), np.abs(last).max()) + e_v
    d_max = np.abs(rewards).max() + 2 * e_r + (1 + g) * v_max
    coef = 2.0 ** -cfg.pe.coef_frac
    adv = e_r + coef * d_max * H * H + 6 * df.ulp * H / u
    code = b.adv_range / cfg.code_max / 2 / u if cfg.results == "inplace" else df.ulp / u
    return adv + code, adv + code


@pytest.mark.parametrize("kind", ["gauss", "sparse", "cartpole"])
@pytest.mark.parametrize("bits, results", [(8, "inplace"), (8, "full"), (16, "inplace")])
def test_default_is_within_the_quantization_bound(kind, bits, results, cartpole):
    r, v, d, last = data(kind, cartpole)
    drv = make(bits, results)
    adv, ret = compute(drv, r, v, d, last, 0.99, 0.95)
    ref_a, ref_r = gae_reference(r, v, d, last, 0.99, 0.95)
    bound_a, bound_r = caller_bound(drv, drv.last_batch, v, last, r)
    assert np.abs(adv - ref_a).max() <= bound_a, (np.abs(adv - ref_a).max(), bound_a)
    assert np.abs(ret - ref_r).max() <= bound_r, (np.abs(ret - ref_r).max(), bound_r)
