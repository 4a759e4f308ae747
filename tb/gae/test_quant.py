"""Host-side standardization and quantization of the GAE accelerator's inputs (sw.gae.quant).

Fast tier only (no RTL): running statistics against numpy, the quantizer's error bounds, the
dequantizer bit-exactly against exact rational arithmetic, argument checking. The pipeline
that puts them together, with the CartPole headline check: test_pipeline.py.
"""

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, seed, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from sw.fixed import FixedFormat, ScaleFormat
from sw.gae.spec import dequant_scale_format
from sw.gae.pipeline import GaeQuantizationPipeline
from sw.gae.quant import (DEFAULT_VALUE_CLIP, DynamicRewardStandardizer, RunningMeanStd,
                          UniformQuantizer, block_standardize, dequantize)

SEED = 20261122
REG = FixedFormat(32, 16)
SF = dequant_scale_format(16)
HYPO = settings(max_examples=60, deadline=None)

finite = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)


# -- RunningMeanStd ---------------------------------------------------------------------------
def welford_eqs(xs):
    """HEPPO eqs. 6-9, one element at a time (the definition the batch merge must match)."""
    m = s = 0.0
    for n, x in enumerate(xs, 1):
        m_new = m + (x - m) / n
        s += (x - m) * (x - m_new)
        m = m_new
    return m, s / len(xs)


@seed(SEED)
@HYPO
@given(st.lists(st.lists(finite, min_size=0, max_size=20), min_size=1, max_size=40))
def test_running_stats_match_numpy(batches):
    rms = RunningMeanStd()
    for b in batches:
        rms.update(np.array(b))
    allx = np.concatenate([np.array(b, float) for b in batches])
    assert rms.count == allx.size
    if allx.size == 0:
        assert (rms.mean, rms.var, rms.std) == (0.0, 0.0, 0.0)
        return
    scale = max(1.0, float(np.abs(allx).max()))
    assert rms.mean == pytest.approx(np.mean(allx), rel=1e-12, abs=1e-12 * scale)
    assert rms.var == pytest.approx(np.var(allx), rel=1e-9, abs=1e-12 * scale ** 2)
    m, v = welford_eqs(allx.tolist())
    assert rms.mean == pytest.approx(m, rel=1e-12, abs=1e-12 * scale)
    assert rms.var == pytest.approx(v, rel=1e-9, abs=1e-12 * scale ** 2)


@seed(SEED)
@HYPO
@given(st.lists(st.lists(finite, min_size=1, max_size=10), min_size=2, max_size=10))
def test_running_stats_merge(batches):
    """Statistics of workers merged together equal those of one stream of all their data."""
    workers = [RunningMeanStd().update(b) for b in batches]
    total = RunningMeanStd()
    for w in workers:
        total.merge(w)
    one = RunningMeanStd().update(np.concatenate([np.array(b, float) for b in batches]))
    assert total.count == one.count
    scale = max(1.0, max(abs(x) for b in batches for x in b))
    assert total.mean == pytest.approx(one.mean, rel=1e-12, abs=1e-12 * scale)
    assert total.var == pytest.approx(one.var, rel=1e-9, abs=1e-12 * scale ** 2)


def test_running_stats_stable_with_large_offset():
    """1e9 + N(0, 1) in 1000 batches of 10: E[x^2] - E[x]^2 would lose every digit."""
    rng = np.random.default_rng(SEED)
    x = 1e9 + rng.normal(size=10_000)
    rms = RunningMeanStd()
    for b in x.reshape(1000, 10):
        rms.update(b)
    assert rms.mean == pytest.approx(np.mean(x), rel=1e-15)
    assert rms.var == pytest.approx(np.var(x - 1e9), rel=1e-6)


def test_running_stats_state_round_trip():
    rng = np.random.default_rng(SEED)
    a, b = rng.normal(3, 2, 100), rng.normal(-1, 5, 57)
    saved = RunningMeanStd().update(a).state_dict()
    assert all(type(v) in (int, float) for v in saved.values())
    resumed = RunningMeanStd.from_state_dict(saved).update(b)
    straight = RunningMeanStd().update(a).update(b)
    assert resumed.state_dict() == straight.state_dict()
    for bad, match in (({"count": 1}, "keys"), ({"count": -1, "mean": 0.0, "m2": 0.0}, "count"),
                       ({"count": 2, "mean": 0.0, "m2": -1.0}, "m2"),
                       ({"count": 2, "mean": math.nan, "m2": 0.0}, "mean"),
                       ({"count": 0, "mean": 1.0, "m2": 0.0}, "count 0")):
        with pytest.raises(ValueError, match=match):
            RunningMeanStd().load_state_dict(bad)


# -- standardization --------------------------------------------------------------------------
def test_dynamic_standardization_uses_all_rewards_seen():
    """Update with the batch, then standardize with the statistics of every reward so far."""
    rng = np.random.default_rng(SEED)
    b1, b2 = rng.normal(5, 3, (16, 4)), rng.normal(2, 1, (16, 4))
    std = DynamicRewardStandardizer()
    z1, m1, s1 = std(b1)
    np.testing.assert_allclose(z1, (b1 - b1.mean()) / b1.std(), rtol=1e-12)
    z2, m2, s2 = std(b2)
    both = np.concatenate([b1, b2])
    assert (m2, s2) == (pytest.approx(both.mean(), rel=1e-12), pytest.approx(both.std()))
    np.testing.assert_allclose(z2, (b2 - both.mean()) / both.std(), rtol=1e-10)
    assert std.stats.count == both.size


def test_constant_rewards_standardize_to_zero():
    """HEPPO subtracts the mean: a constant reward (CartPole-v1's +1) becomes exactly 0."""
    std = DynamicRewardStandardizer()
    for _ in range(3):
        z, mean, s = std(np.ones((8, 4)))
        assert mean == 1.0 and s == std.min_std and not z.any()


def test_scale_norm_keeps_constant_rewards_and_their_sign():
    """``norm="scale"`` divides by the running RMS without centring: CartPole's +1 stays +1,
    MountainCar's -1 stays -1, and mixed rewards keep their signs and ratios."""
    for value in (1.0, -1.0, 3.0):
        std = DynamicRewardStandardizer(norm="scale")
        for _ in range(3):
            z, mean, rms = std(np.full((8, 4), value))
            assert mean == 0.0 and rms == pytest.approx(abs(value))
            np.testing.assert_allclose(z, np.sign(value), rtol=1e-12)
    rng = np.random.default_rng(SEED)
    b1, b2 = rng.normal(2, 3, (16, 4)), rng.normal(-1, 1, (16, 4))
    std = DynamicRewardStandardizer(norm="scale")
    std(b1)
    z2, _, rms = std(b2)
    both = np.concatenate([b1, b2])
    assert rms == pytest.approx(np.sqrt(np.mean(both ** 2)), rel=1e-12)
    np.testing.assert_allclose(z2, b2 / rms, rtol=1e-12)
    with pytest.raises(ValueError, match="norm must be one of center, scale"):
        DynamicRewardStandardizer(norm="none")


def test_pipeline_scale_norm_round_trips_and_quantizes_cartpole_rewards_exactly():
    """The pipeline's ``reward_norm`` reaches the standardizer, survives ``state_dict``, and a
    CartPole batch (+1 everywhere) standardizes to exactly 1.0 and quantizes with error
    feedback to codes whose running sum stays within half a step of the true sum (1.0 is not a
    multiple of the step 8/127); states saved before the option existed load as ``"center"``."""
    pipe = GaeQuantizationPipeline(reward_norm="scale", reg_format=REG)
    assert pipe.reward_norm == "scale"
    rng = np.random.default_rng(SEED)
    out = pipe.prepare(np.ones((16, 4)), rng.normal(20, 5, (16, 4)), rng.normal(20, 5, 4))
    np.testing.assert_array_equal(out["standardized_rewards"], 1.0)
    q = pipe.reward_quantizer
    drift = np.cumsum(out["reward_codes"] * q.step, axis=0) - np.arange(1, 17)[:, None]
    assert np.abs(drift).max() <= q.step / 2 + 1e-12
    assert out["reward_mean"] == 0.0 and out["reward_std"] == 1.0
    state = pipe.state_dict()
    assert state["reward_norm"] == "scale"
    assert GaeQuantizationPipeline.from_state_dict(state).reward_norm == "scale"
    legacy = {k: v for k, v in state.items() if k != "reward_norm"}
    assert GaeQuantizationPipeline.from_state_dict(legacy).reward_norm == "center"
    with pytest.raises(ValueError, match="norm must be one of"):
        GaeQuantizationPipeline(reward_norm="scaled")


def test_block_standardization_includes_bootstrap_values():
    rng = np.random.default_rng(SEED)
    v, last = rng.normal(10, 4, (32, 8)), rng.normal(10, 4, 8)
    zv, zl, mean, sd = block_standardize(v, last)
    allv = np.concatenate([v.ravel(), last])
    assert mean == pytest.approx(allv.mean()) and sd == pytest.approx(allv.std())
    z = np.concatenate([zv.ravel(), zl])
    assert z.mean() == pytest.approx(0, abs=1e-12) and z.std() == pytest.approx(1)
    np.testing.assert_allclose(zv * sd + mean, v, rtol=1e-12)


# -- quantizer ----------------------------------------------------------------------------------
bits_st = st.integers(2, 16)
clip_st = st.floats(0.25, 16.0)


@seed(SEED)
@HYPO
@given(bits_st, clip_st, st.data())
def test_round_trip_within_half_step(bits, clip, data):
    q = UniformQuantizer(bits=bits, clip=clip)
    x = data.draw(hnp.arrays(np.float64, st.integers(1, 50), elements=st.floats(-clip, clip)))
    codes = q.quantize(x)
    assert codes.dtype == (np.int8 if bits <= 8 else np.int16)
    assert codes.shape == x.shape
    assert np.abs(codes.astype(int)).max() <= q.qmax == 2 ** (bits - 1) - 1
    assert np.all(np.abs(q.to_float(codes) - x) <= q.step / 2 * (1 + 1e-9))


@seed(SEED)
@HYPO
@given(bits_st, clip_st, st.data())
def test_clipping(bits, clip, data):
    q = UniformQuantizer(bits=bits, clip=clip)
    big = data.draw(hnp.arrays(np.float64, st.integers(1, 20), elements=st.floats(1.0, 1e9)))
    np.testing.assert_array_equal(q.quantize(clip * big), q.qmax)
    np.testing.assert_array_equal(q.quantize(-clip * big), -q.qmax)
    x = np.array([-2 * clip, -clip, 0.0, clip, 3 * clip])
    assert q.clipped_fraction(x) == pytest.approx(2 / 5)


@seed(SEED)
@HYPO
@given(bits_st, clip_st, st.data())
def test_error_feedback_bounds_suffix_sums(bits, clip, data):
    """Error feedback in reverse time: every suffix sum within step/2, elements within a step."""
    q = UniformQuantizer(bits=bits, clip=clip)
    x = data.draw(hnp.arrays(np.float64, st.tuples(st.integers(1, 60), st.integers(1, 4)),
                             elements=st.floats(-2 * clip, 2 * clip)))
    codes = q.quantize(x, error_feedback=True)
    assert codes.dtype == q.dtype and np.abs(codes.astype(int)).max() <= q.qmax
    xc = np.clip(x, -clip, clip)
    err = xc - q.to_float(codes)
    suffix = np.cumsum(err[::-1], axis=0)[::-1]
    tol = q.step / 2 * (1 + 1e-9) + 1e-12 * clip * len(x)
    assert np.all(np.abs(suffix) <= tol)
    assert np.all(np.abs(err) <= q.step * (1 + 1e-9))


def test_error_feedback_removes_bias_of_a_repeated_value():
    q = UniformQuantizer(bits=8, clip=8.0)
    x = np.full((1000, 1), 0.2144)         # CartPole's standardized per-step reward
    near = q.to_float(q.quantize(x)).sum() - x.sum()
    fb = q.to_float(q.quantize(x, error_feedback=True)).sum() - x.sum()
    assert abs(near) > 20 and abs(fb) <= q.step / 2


# -- dequantizer ----------------------------------------------------------------------------------
def exact_dequantize(code, scale_raw, offset_raw, sfmt, fmt, out_fmt):
    """Independent reference: the exact rational value (the offset taken to out_fmt.frac + 1
    fraction bits, floor), rounded half up and saturated to out_fmt."""
    m, e = sfmt.unpack(scale_raw)
    f1 = out_fmt.frac + 1
    off = math.floor(Fraction(offset_raw, 2 ** fmt.frac) * 2 ** f1)
    real = code * m * Fraction(2) ** (sfmt.exp0 - e) + Fraction(off, 2 ** f1)
    r = math.floor(real * 2 ** out_fmt.frac + Fraction(1, 2))
    return min(max(r, out_fmt.min_raw), out_fmt.max_raw), not out_fmt.min_raw <= r <= (
        out_fmt.max_raw)


FORMAT_PAIRS = [
    (FixedFormat(32, 16), FixedFormat(32, 16)),
    (FixedFormat(32, 24), FixedFormat(32, 16)),     # offset with more fraction bits: floor
    (FixedFormat(24, 20), FixedFormat(16, 8)),
    (FixedFormat(18, 8), FixedFormat(24, 12)),
    (FixedFormat(32, 30), FixedFormat(12, 4)),      # narrow output: saturation
    (FixedFormat(20, 18, signed=False), FixedFormat(20, 10)),
    (FixedFormat(32, 16), FixedFormat(16, 2)),      # dequant_lshift 0
]


@pytest.mark.parametrize("fmts", FORMAT_PAIRS, ids=lambda f: f"{f[0]}->{f[1]}")
def test_dequantize_bit_exact(fmts):
    """Every shift 0..31, extreme and random mantissas and offsets, 16-bit codes: the model
    equals the exact value rounded half up (the accelerator's dequantizer)."""
    fmt, out = fmts
    sfmt = dequant_scale_format(out.frac)
    rng = np.random.default_rng(SEED)
    codes = np.concatenate([np.arange(-32768, 32768, 97), [-32768, 32767, -1, 0, 1]])
    codes = codes.astype(np.int16)
    mants = [sfmt.max_mantissa, -sfmt.max_mantissa - 1, 1, -1, 0, 1 << 16]
    regs = [(sfmt.pack(mants[i % len(mants)], e), (fmt.min_raw, fmt.max_raw, 0)[e % 3])
            for i, e in enumerate(range(sfmt.max_shift + 1))]
    regs += [(sfmt.pack(int(rng.integers(-(1 << 17), 1 << 17)), int(rng.integers(0, 32))),
              int(rng.integers(fmt.min_raw, fmt.max_raw, endpoint=True))) for _ in range(8)]
    for scale, offset in regs:
        raw, ovf = dequantize(codes, scale, offset, sfmt, fmt, out)
        ref = [exact_dequantize(int(c), scale, offset, sfmt, fmt, out) for c in codes]
        np.testing.assert_array_equal(raw, [r for r, _ in ref])
        np.testing.assert_array_equal(ovf, [o for _, o in ref])
        assert raw.dtype == np.int64 and raw.shape == codes.shape


def test_dequantize_params_round_once():
    q = UniformQuantizer(bits=8, clip=4.0)
    scale, offset = q.dequantize_params(REG, std=2.5, mean=-3.2)
    assert scale == SF.quantize(q.step * 2.5) and offset == round(-3.2 * 2 ** 16)
    assert abs(SF.to_float(scale) / (q.step * 2.5) - 1) <= 2.0 ** -17
    assert q.dequantize_params(REG) == (SF.quantize(q.step), 0)
    with pytest.raises(ValueError, match="offset .* does not fit"):
        q.dequantize_params(REG, mean=40_000.0)
    with pytest.raises(ValueError, match="scale .* does not fit"):
        q.dequantize_params(REG, std=100000.0)
    with pytest.raises(ValueError, match="offset"):
        q.dequantize_params(FixedFormat(16, 8, signed=False), mean=-1.0)


@pytest.mark.parametrize("out", [FixedFormat(32, 16), FixedFormat(24, 10, rounding="floor")],
                         ids=str)
def test_destandardization_folds_into_scale_and_offset(out):
    """code * (step*std) + mean in one multiply-add = values within the derived error."""
    rng = np.random.default_rng(SEED)
    v, last = rng.normal(-37.0, 6.0, (64, 16)), rng.normal(-37.0, 6.0, 16)
    zv, zl, mean, sd = block_standardize(v, last)
    q = UniformQuantizer(bits=8, clip=DEFAULT_VALUE_CLIP)
    codes = q.quantize(zv)
    sf = dequant_scale_format(out.frac)
    scale, offset = q.dequantize_params(REG, std=sd, mean=mean, scale_format=sf)
    raw, ovf = dequantize(codes, scale, offset, sf, REG, out)
    assert not ovf.any()
    got = out.to_float(raw)
    # Float path: dequantize in standardized units, then de-standardize.
    ideal = q.to_float(codes) * sd + mean
    ulp_out_round = out.ulp / 2       # the dequantizer rounds half up
    # The scale within 2^-17 of its value (relative); the offset within half its ulp, and
    # taken to out.frac + 1 fraction bits (floor) when it has more.
    off_err = REG.ulp / 2 + (2.0 ** -(out.frac + 1) if REG.frac > out.frac + 1 else 0)
    reg_err = q.qmax * q.step * sd * 2.0 ** -17 + off_err
    assert np.abs(got - ideal).max() <= reg_err + ulp_out_round
    inside = np.abs(zv) <= q.clip
    assert inside.mean() > 0.99
    assert np.abs(got - v)[inside].max() <= sd * q.step / 2 + reg_err + ulp_out_round


# -- argument checking ----------------------------------------------------------------------
@pytest.mark.parametrize("bits", [1, 17, 0, 8.0, True, "8"])
def test_bad_bits(bits):
    with pytest.raises(ValueError, match="bits must be an integer in 2..16"):
        UniformQuantizer(bits=bits)
    with pytest.raises(ValueError, match="bits"):
        GaeQuantizationPipeline(bits=bits)


@pytest.mark.parametrize("clip", [0.0, -1.0, math.nan, math.inf, None])
def test_bad_clip(clip):
    with pytest.raises(ValueError, match="clip must be a positive finite number"):
        UniformQuantizer(clip=clip)
    with pytest.raises(ValueError, match="clip"):
        GaeQuantizationPipeline(value_clip=clip)


def _batch(T=6, N=3):
    rng = np.random.default_rng(SEED)
    return rng.normal(size=(T, N)), rng.normal(size=(T, N)), rng.normal(size=N)


@pytest.mark.parametrize("case, match", [
    (lambda r, v, l: (r[:, 0], v, l), r"rewards must be a 2-D array"),
    (lambda r, v, l: (r, v[:-1], l), r"values must have the shape of rewards"),
    (lambda r, v, l: (r, v[:, :, None], l), r"values must be a 2-D array"),
    (lambda r, v, l: (r, v, l[:-1]), r"last_values must have shape \(3,\)"),
    (lambda r, v, l: (r, v, l[None]), r"last_values must be a 1-D array"),
    (lambda r, v, l: (np.where(r > 0, np.nan, r), v, l), r"rewards must be finite"),
    (lambda r, v, l: (r, np.where(v > 0, np.inf, v), l), r"values must be finite"),
    (lambda r, v, l: (r, v, l * np.nan), r"last_values must be finite"),
    (lambda r, v, l: (r.astype(str).astype(object) + "x", v, l), r"rewards must be an array"),
])
def test_prepare_rejects_bad_inputs_and_keeps_state(case, match):
    pipe = GaeQuantizationPipeline()
    pipe.prepare(*_batch())
    before = pipe.state_dict()
    with pytest.raises(ValueError, match=match):
        pipe.prepare(*case(*_batch()))
    assert pipe.state_dict() == before


def test_other_bad_arguments():
    q = UniformQuantizer()
    with pytest.raises(ValueError, match="x must be finite"):
        q.quantize([0.0, math.nan])
    with pytest.raises(ValueError, match="rewards must have a time axis"):
        q.quantize(1.0, name="rewards", error_feedback=True)
    with pytest.raises(ValueError, match="batch must be finite"):
        RunningMeanStd().update([1.0, math.inf])
    with pytest.raises(ValueError, match="codes must be an integer array"):
        dequantize(np.zeros(3), 1, 0, SF, REG, REG)
    with pytest.raises(ValueError, match="codes must be integers of at most 16 bits"):
        dequantize(np.array([1 << 15]), 1, 0, SF, REG, REG)
    with pytest.raises(ValueError, match="scale_raw must be a S18E5"):
        dequantize(np.zeros(3, np.int8), 1 << 31, 0, SF, REG, REG)
    with pytest.raises(ValueError, match="scale_raw must be a S18E5"):
        dequantize(np.zeros(3, np.int8), 1 << 20, 0, SF, REG, REG)
    with pytest.raises(ValueError, match="offset_raw must be an integer"):
        dequantize(np.zeros(3, np.int8), 1, 0.5, SF, REG, REG)
    with pytest.raises(ValueError, match="offset_raw must be raw"):
        dequantize(np.zeros(3, np.int8), 1, 1 << 40, SF, REG, REG)
    with pytest.raises(ValueError, match="out_fmt must be a FixedFormat"):
        dequantize(np.zeros(3, np.int8), 1, 0, SF, REG, "Q16.16")
    with pytest.raises(ValueError, match="scale_fmt must be a ScaleFormat"):
        dequantize(np.zeros(3, np.int8), 1, 0, REG, REG, REG)
    with pytest.raises(ValueError, match="does not fit out_fmt"):
        dequantize(np.zeros(3, np.int8), 1, 0, SF, REG, FixedFormat(32, 4))
    with pytest.raises(ValueError, match="intermediate wider than 62 bits"):
        dequantize(np.zeros(3, np.int8), 1, 0, ScaleFormat(40), REG, FixedFormat(32, 4))
    with pytest.raises(ValueError, match="std must be a positive finite number"):
        q.dequantize_params(REG, std=0.0)
    with pytest.raises(ValueError, match="mean must be a finite number"):
        q.dequantize_params(REG, mean=math.nan)
    with pytest.raises(ValueError, match="reward_rounding must be one of"):
        GaeQuantizationPipeline(reward_rounding="stochastic")
    with pytest.raises(ValueError, match="reg_format must be a FixedFormat"):
        GaeQuantizationPipeline(reg_format=(32, 16))
    with pytest.raises(ValueError, match="min_std must be a positive finite number"):
        GaeQuantizationPipeline(min_std=0)
    with pytest.raises(ValueError, match="N must be a positive integer"):
        GaeQuantizationPipeline().bytes_per_timestep(0, REG)
    with pytest.raises(ValueError, match="result_format must be a FixedFormat"):
        GaeQuantizationPipeline().bytes_per_timestep(64, 32)
    with pytest.raises(ValueError, match="state must be a dict with keys"):
        GaeQuantizationPipeline.from_state_dict({"bits": 8})
