"""The power unit's golden model (:mod:`sw.powers`) against float64, exhaustive where
it is cheap (numpy, a few seconds): ``log2_raw`` over every mantissa at many exponents (exact,
zero-filled and truncated) and the largest inputs, ``exp2_raw`` over every fraction at many
integer parts (rounding, saturation, underflow), ``power_raw``, ``priorities_raw`` (every
16-bit TD error code) and ``is_weights_raw`` (random and extreme batches), each within its
derived worst-case bound (docs/fixed_point.md, "Power unit"); the parameter checks of
:class:`PowerConfig`.

``python tb/test_powers.py`` prints the bounds and the measured maxima.
"""

import math

import numpy as np
import pytest

from sw.replay.spec import PER_EPS
from sw.powers import (PowerConfig, exp2_raw, is_weights_raw, log2_raw, power_raw,
                               priorities_raw)

LN2 = math.log(2.0)
#: float64's own error in the references (log2, exp2 and powers of values < 2**64).
SLACK = 1e-12

CONFIGS = {
    "default": PowerConfig(),
    "small": PowerConfig(table_bits=4, mant_bits=9, table_frac=12, log_frac=8, log_int=6),
    "fine": PowerConfig(table_bits=10, mant_bits=20, table_frac=28, log_frac=20, log_int=8),
    "flat": PowerConfig(table_bits=6, mant_bits=12, table_frac=10, log_frac=10, log_int=6),
}

#: The trainer's formats: TD errors (16-bit codes, 10 fraction bits), eps and |delta| + eps
#: (16 fraction bits), alpha and beta (17 bits, 16 fraction), priorities (40 bits, 16
#: fraction), IS weights (17 bits, 16 fraction).
ACT_FRAC, EPS_FRAC, COEF_FRAC, PRIO_FRAC, PRIO_WIDTH, W_FRAC, W_WIDTH = 10, 16, 16, 16, 40, 16, 17
EPS_RAW = round(PER_EPS * 2 ** EPS_FRAC)


# -- the bounds -------------------------------------------------------------------------------
def log2_bounds(cfg: PowerConfig, truncated=False):
    """``(below, above)``: ``-below <= log2_raw/2**log_frac - log2 x <= above`` for x > 0.

    In units of the result: the final rounding to ``log_frac`` bits (half an ulp, none when
    ``table_frac == log_frac``); the table entries (half an ulp of ``table_frac``, either
    sign); the interpolation's floor (less than an ulp of ``table_frac``, down); the chord of
    the concave ``log2(1 + u)`` on a ``2**-T`` grid (at most ``2**-2T / (8 ln 2)``, down);
    a truncated mantissa (less than ``2**-M / ln 2``, down; only inputs with more than M + 1
    significant bits).
    """
    rnd = 2.0 ** -(cfg.log_frac + 1) if cfg.table_frac > cfg.log_frac else 0.0
    ulp_t = 2.0 ** -cfg.table_frac
    chord = 2.0 ** (-2 * cfg.table_bits) / (8 * LN2)
    trunc = 2.0 ** -cfg.mant_bits / LN2 if truncated else 0.0
    return rnd + 1.5 * ulp_t + chord + trunc, rnd + 0.5 * ulp_t


def exp2_bound(cfg: PowerConfig):
    """Relative error of the mantissa ``m`` of ``2**y`` (before the output's rounding): the
    table entries and the floor (1.5 ulp of ``table_frac`` against ``m >= 2**table_frac``) and
    the chord of the convex ``2**u`` on a ``2**-T`` grid (``2**-2T (ln 2)**2 2**(2**-T) / 8``,
    relative)."""
    h = 2.0 ** -cfg.table_bits
    return 1.5 * 2.0 ** -cfg.table_frac + h * h * LN2 ** 2 * 2.0 ** h / 8


def power_bound(cfg: PowerConfig, p, p_frac, log_err):
    """Relative error of ``exp2(round(p·l))`` when ``l`` is off ``log2 x`` by at most
    ``log_err``: ``y`` is off ``p log2 x`` by ``d = p·log_err + 2**-(log_frac+1)`` (the
    product's rounding, none if ``p_frac == 0``), so the result is ``x**p · 2**e · (1 + r)``
    with ``|e| <= d``, ``|r| <= E_exp``: at most ``2**d (1 + E_exp) - 1`` (about
    ``ln 2 · d + E_exp``). The output's rounding adds half an ulp (absolute)."""
    d = p * log_err + (2.0 ** -(cfg.log_frac + 1) if p_frac else 0.0)
    return np.exp2(d) * (1 + exp2_bound(cfg)) - 1


# -- helpers ----------------------------------------------------------------------------------
def mantissas(cfg):
    """Every mantissa: ``2**M + f``, f = 0..2**M - 1 (int64)."""
    return (np.int64(1) << cfg.mant_bits) + np.arange(1 << cfg.mant_bits, dtype=np.int64)


def log2_errors(cfg, x, in_frac):
    """``log2_raw(x)/2**log_frac - log2(x/2**in_frac)`` in float64."""
    got = log2_raw(cfg, x, in_frac).astype(np.float64) * 2.0 ** -cfg.log_frac
    return got - (np.log2(x.astype(np.float64)) - in_frac)


def check_log2(cfg, x, in_frac, truncated):
    err = log2_errors(cfg, x, in_frac)
    below, above = log2_bounds(cfg, truncated)
    assert err.min() >= -below - SLACK, (err.min(), below)
    assert err.max() <= above + SLACK, (err.max(), above)
    return err


def power_errors(cfg, x, in_frac, p_raw, p_frac, out_frac, out_width):
    """Values, overflow flags, float64 references and errors (real units) of ``power_raw``."""
    v, over = power_raw(cfg, x, in_frac, p_raw, p_frac, out_frac, out_width)
    ref = (x.astype(np.float64) * 2.0 ** -in_frac) ** (p_raw * 2.0 ** -p_frac)
    return v, over, ref, v * 2.0 ** -out_frac - ref


def log_err_of(cfg, x):
    """Per element, the larger side of :func:`log2_bounds` (truncated mantissa or not)."""
    trunc = x >= (np.int64(1) << (cfg.mant_bits + 1))
    return np.where(trunc, log2_bounds(cfg, True)[0], log2_bounds(cfg, False)[0])


def check_power(cfg, x, in_frac, p_raw, p_frac, out_frac, out_width, log_err=None):
    """Every result within :func:`power_bound` plus half an output ulp; a saturated one only
    where the true value, less its error, is past the top. Returns the errors in output ulps
    and as fractions of the bound."""
    v, over, ref, err = power_errors(cfg, x, in_frac, p_raw, p_frac, out_frac, out_width)
    log_err = log_err_of(cfg, x) if log_err is None else log_err
    rel = power_bound(cfg, p_raw * 2.0 ** -p_frac, p_frac, log_err)
    half = 2.0 ** -(out_frac + 1)
    bound = ref * rel + half
    top = ((1 << out_width) - 1) * 2.0 ** -out_frac
    ok = ~over
    assert np.all(np.abs(err[ok]) <= bound[ok] * (1 + SLACK)), \
        np.max(np.abs(err[ok]) / bound[ok])
    assert np.all(v[over] == (1 << out_width) - 1)
    assert np.all(ref[over] * (1 + rel[over]) + half >= top)
    return np.abs(err[ok]) / (2 * half), np.abs(err[ok]) / bound[ok]


# -- log2 -------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", CONFIGS)
def test_log2_every_mantissa(name):
    """Every mantissa at exponents 0..M exactly (all x < 2**(M+1): zero-filled below 2**M),
    shifted up to the 62-bit limit (low bits zero: exact), and with random low bits
    (truncated); in_frac 0, 16 and 40."""
    cfg = CONFIGS[name]
    rng = np.random.default_rng(1)
    small = np.arange(1, 1 << (cfg.mant_bits + 1), dtype=np.int64)
    check_log2(cfg, small, 0, False)
    check_log2(cfg, small, 16, False)
    f = mantissas(cfg)
    for k in (1, 7, 61 - cfg.mant_bits):
        frac = 40 if k > 20 else 0
        check_log2(cfg, f << k, frac, False)
        noise = rng.integers(0, 1 << k, f.size, dtype=np.int64)
        check_log2(cfg, (f << k) | noise, frac, True)


@pytest.mark.parametrize("name", CONFIGS)
def test_log2_largest_inputs_and_zero(name):
    cfg = CONFIGS[name]
    rng = np.random.default_rng(2)
    top = (1 << 62) - 1
    x = np.array([top, top - 1, 1 << 61, (1 << 61) + 1, (1 << 61) - 1]
                 + [top - (1 << j) + 1 for j in range(62)], dtype=np.int64)
    x = np.concatenate([x, rng.integers(1 << 53, 1 << 62, 100_000, dtype=np.int64)])
    check_log2(cfg, x, 0, True)
    check_log2(cfg, x, 40, True)
    # log2 of 2**62 - 1 is just below 62: the result is at most 62, and within 2 ulps of it.
    assert 0 <= (62 << cfg.log_frac) - log2_raw(cfg, np.array([top]), 0)[0] <= 2
    got = log2_raw(cfg, np.array([0, 1, 0, 1 << 40], dtype=np.int64), 20)
    assert got.tolist() == [cfg.log_min, -20 << cfg.log_frac, cfg.log_min, 20 << cfg.log_frac]


@pytest.mark.parametrize("name", CONFIGS)
def test_log2_is_monotone(name):
    """log2_raw never decreases with x (the IS weights' batch minimum relies on it)."""
    cfg = CONFIGS[name]
    x = np.arange(0, 1 << (cfg.mant_bits + 1), dtype=np.int64)
    assert np.all(np.diff(log2_raw(cfg, x, 0)) >= 0)
    f = mantissas(cfg) << 30 | np.int64((1 << 30) - 1)
    assert np.all(np.diff(log2_raw(cfg, f, 0)) >= 0)


def test_log2_rejects_negative_inputs():
    with pytest.raises(ValueError, match="non-negative"):
        log2_raw(PowerConfig(), np.array([3, -1]), 0)


# -- exp2 -------------------------------------------------------------------------------------
def every_fraction(cfg, n):
    return (np.int64(n) << cfg.log_frac) + np.arange(1 << cfg.log_frac, dtype=np.int64)


@pytest.mark.parametrize("name", CONFIGS)
def test_exp2_mantissa_every_fraction(name):
    """The mantissa (read exactly: ``out_frac = table_frac``, y in [0, 1)) of every fraction
    within :func:`exp2_bound` of ``2**y``; at the other integer parts the same mantissa."""
    cfg = CONFIGS[name]
    Ft = cfg.table_frac
    y = every_fraction(cfg, 0)
    m, over = exp2_raw(cfg, y, Ft, Ft + 2)
    assert not over.any()
    phi = y * 2.0 ** -cfg.log_frac
    rel = m * 2.0 ** -Ft / np.exp2(phi) - 1
    assert np.abs(rel).max() <= exp2_bound(cfg) + SLACK
    assert m.min() >= 1 << Ft and m.max() < 2 << Ft
    for n in (-9, 3):
        mn, _ = exp2_raw(cfg, every_fraction(cfg, n), Ft - n, Ft + 2)
        assert np.array_equal(mn, m)


@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize("out_frac,out_width", [(16, 40), (16, 17), (0, 62), (30, 31)])
def test_exp2_rounding_and_saturation(name, out_frac, out_width):
    """Every fraction at integer parts from rounding-to-0 to past the top: each result is the
    mantissa times ``2**s`` rounded half up, within ``2**y E_exp`` + half an ulp of float64
    ``2**y``, saturated exactly where that is past ``2**out_width - 1`` (int64 at its limit
    with 62 bits)."""
    cfg = CONFIGS[name]
    Ft = cfg.table_frac
    m, _ = exp2_raw(cfg, every_fraction(cfg, 0), Ft, Ft + 2)
    top = (1 << out_width) - 1
    e = exp2_bound(cfg)
    for n in sorted({-out_frac - 3, -out_frac - 2, -out_frac - 1, -out_frac, -1, 0, 5,
                     out_width - out_frac - 2, out_width - out_frac - 1,
                     out_width - out_frac, out_width - out_frac + 1}):
        if not cfg.log_min >> cfg.log_frac <= n <= cfg.log_max >> cfg.log_frac:
            continue
        y = every_fraction(cfg, n)
        v, over = exp2_raw(cfg, y, out_frac, out_width)
        s = n + out_frac - Ft
        if s >= 0:                                  # m << s, or past the top (m > top >> s)
            past = m > (top >> s)
            exact = np.where(past, top, m << np.where(past, 0, s))
        else:                                       # m / 2**-s, rounded half up
            exact = (m + (1 << (-s - 1))) >> -s
            past = exact > top
        assert np.array_equal(v, np.minimum(exact, top))
        assert np.array_equal(over, past)
        ref = np.exp2(y * 2.0 ** -cfg.log_frac + out_frac)
        ok = ~over
        assert np.all(np.abs(v[ok] - ref[ok]) <= ref[ok] * (e + SLACK) + 0.5)
        assert np.all(ref[over] * (1 + e) + 0.5 > top)
        if n >= out_width - out_frac:
            assert over.all()


@pytest.mark.parametrize("name", CONFIGS)
def test_exp2_log_min_and_underflow(name):
    cfg = CONFIGS[name]
    y = np.array([cfg.log_min, cfg.log_min + 1, -(40 << cfg.log_frac), cfg.log_max, 0])
    v, over = exp2_raw(cfg, y, 16, 40)
    assert v.tolist() == [0, 0, 0, (1 << 40) - 1, 1 << 16]
    assert over.tolist() == [False, False, False, True, False]
    # log_min gives 0 even where the format's minimum would not round to 0
    v, over = exp2_raw(cfg, np.array([cfg.log_min]), 62, 62)
    assert v.tolist() == [0] and not over.any()


def test_exp2_wide_output_does_not_wrap():
    """2**61 and 2**62 into 62 bits: the left shift stays below int64's sign bit."""
    cfg = PowerConfig()
    y = np.array([61, 62, 67, 100], dtype=np.int64) << cfg.log_frac
    v, over = exp2_raw(cfg, y, 0, 62)
    assert v.tolist() == [1 << 61] + [(1 << 62) - 1] * 3
    assert over.tolist() == [False, True, True, True]


# -- x**p -------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize("p", [0.0, 0.25, 0.4, 0.6, 1.0, 1.5, 2.0, 3.75])
def test_power_every_input(name, p):
    """Every 16-bit x (8 fraction bits) for exponents from 0 to 3.75 (16 fraction bits), into
    40 bits with 16 fraction bits; 0**p is 0 (p > 0) or 1 (p = 0)."""
    cfg = CONFIGS[name]
    x = np.arange(1 << 16, dtype=np.int64)
    p_raw = round(p * 2 ** 16)
    check_power(cfg, x[1:], 8, p_raw, 16, 16, 40)
    v, over = power_raw(cfg, x[:1], 8, p_raw, 16, 16, 40)
    assert v[0] == (0 if p_raw else 1 << 16) and not over[0]
    if p_raw == 0:
        assert np.all(power_raw(cfg, x, 8, 0, 16, 16, 40)[0] == 1 << 16)
    if p_raw == 1 << 16:                           # x**1 = x within the log and exp errors
        v, _ = power_raw(cfg, x, 8, p_raw, 16, 8, 40)
        assert np.all(np.abs(v - x) <= x * (power_bound(cfg, 1.0, 16, log2_bounds(cfg)[0]))
                      + 0.5)


@pytest.mark.parametrize("name", ["default", "fine"])
def test_power_wide_inputs_and_saturation(name):
    """62-bit inputs (truncated mantissas), exponents up to 31.99, integer exponents
    (``p_frac`` 0), saturating 62-bit and 12-bit outputs."""
    cfg = CONFIGS[name]
    rng = np.random.default_rng(3)
    bits = rng.integers(1, 63, 50_000)
    x = np.maximum(rng.integers(0, 1 << 62, bits.size, dtype=np.int64) >> (62 - bits), 1)
    for p_raw, p_frac in ((1, 0), (3, 0), (13, 4), (1023, 5), (77, 8)):
        for out_frac, out_width in ((30, 62), (4, 12)):
            check_power(cfg, x, 30, p_raw, p_frac, out_frac, out_width)


# -- priorities and IS weights ---------------------------------------------------------------
TD_CODES = np.arange(-(1 << 15), 1 << 15, dtype=np.int64)


@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize("alpha", [0.0, 0.4, 0.6, 1.0])
def test_priorities_every_td_code(name, alpha):
    """``(|delta| + eps)**alpha`` of every 16-bit TD error code (10 fraction bits), eps =
    PER_EPS at 16 fraction bits, into the tree's 40-bit input with 16 fraction bits."""
    cfg = CONFIGS[name]
    a_raw = round(alpha * 2 ** COEF_FRAC)
    v, over = priorities_raw(cfg, TD_CODES, ACT_FRAC, EPS_RAW, EPS_FRAC, a_raw, COEF_FRAC,
                             PRIO_FRAC, PRIO_WIDTH)
    u = (np.abs(TD_CODES) << (EPS_FRAC - ACT_FRAC)) + EPS_RAW
    assert np.array_equal(v, power_raw(cfg, u, EPS_FRAC, a_raw, COEF_FRAC, PRIO_FRAC,
                                       PRIO_WIDTH)[0])
    assert not over.any()
    check_power(cfg, u, EPS_FRAC, a_raw, COEF_FRAC, PRIO_FRAC, PRIO_WIDTH)
    if a_raw == 0:
        assert np.all(v == 1 << PRIO_FRAC)
    # symmetric in delta
    assert np.array_equal(v[1:(1 << 15)], v[-1:(1 << 15):-1][:(1 << 15) - 1])


def check_weights(cfg, prio, b_raw, in_frac=PRIO_FRAC):
    """IS weights of one batch: the minimum's exactly 1.0, beta 0 all 1.0, every weight within
    the bound of ``(p_min/p_i)**beta`` (both logarithms' errors, the product's rounding, exp2,
    half an output ulp). Returns the errors in output ulps and as fractions of the bound."""
    w = is_weights_raw(cfg, prio, in_frac, b_raw, COEF_FRAC, W_FRAC, W_WIDTH)
    one = 1 << W_FRAC
    assert np.all(w[prio == prio.min()] == one)
    assert np.all((w >= 0) & (w <= one))
    if b_raw == 0:
        assert np.all(w == one)
    beta = b_raw * 2.0 ** -COEF_FRAC
    ref = (prio.min() / prio.astype(np.float64)) ** beta
    lo_min, hi = log_err_of(cfg, prio[prio == prio.min()][:1])[0], log2_bounds(cfg)[1]
    log_err = hi + np.maximum(log_err_of(cfg, prio), lo_min)
    bound = ref * power_bound(cfg, beta, COEF_FRAC, log_err) + 2.0 ** -(W_FRAC + 1)
    err = np.abs(w * 2.0 ** -W_FRAC - ref)
    assert np.all(err <= bound * (1 + SLACK)), np.max(err / bound)
    return err * 2.0 ** W_FRAC, err / bound


@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize("beta", [0.0, 0.4, 0.7, 1.0])
def test_is_weights_batches(name, beta):
    """Random batches (log-uniform priorities over the 32-bit leaf format, 16 fraction bits)
    and extreme ones: all equal, one tiny among huge ones (weights that round to 0), two
    values, neighbours."""
    cfg = CONFIGS[name]
    rng = np.random.default_rng(4)
    b_raw = round(beta * 2 ** COEF_FRAC)
    for _ in range(200):
        B = int(rng.integers(1, 257))
        prio = np.exp2(rng.uniform(0, 32, B)).astype(np.int64).clip(1, (1 << 32) - 1)
        check_weights(cfg, prio, b_raw)
    top = (1 << 32) - 1
    for prio in ([7] * 64, [1] + [top] * 63, [1, top], [top, top - 1], [1 << 16, 1 << 16 + 1],
                 list(range(1, 65)), [top]):
        w, _ = check_weights(cfg, np.array(prio, dtype=np.int64), b_raw)
    w = is_weights_raw(cfg, np.array([1, top]), PRIO_FRAC, 1 << COEF_FRAC, COEF_FRAC, W_FRAC,
                       W_WIDTH)
    assert w.tolist() == [1 << W_FRAC, 0]           # 2**-32 rounds to 0
    assert is_weights_raw(cfg, np.zeros(0, np.int64), PRIO_FRAC, b_raw, COEF_FRAC, W_FRAC,
                          W_WIDTH).size == 0


# -- the configuration -------------------------------------------------------------------------
@pytest.mark.parametrize("params,match", [
    (dict(table_bits=1), r"table_bits must be an integer in 2\.\.12, not 1"),
    (dict(table_bits=13), r"table_bits must be an integer in 2\.\.12, not 13"),
    (dict(table_bits=8.0), r"table_bits must be an integer in 2\.\.12, not 8\.0"),
    (dict(table_bits=True), r"table_bits must be an integer in 2\.\.12, not True"),
    (dict(mant_bits=8), r"mant_bits must be an integer in 9\.\.30, not 8"),
    (dict(mant_bits=31), r"mant_bits must be an integer in 9\.\.30, not 31"),
    (dict(log_frac=7), r"log_frac must be an integer in 8\.\.24, not 7"),
    (dict(log_frac=25), r"log_frac must be an integer in 8\.\.24, not 25"),
    (dict(table_frac=15), r"table_frac must be an integer in 16\.\.30, not 15"),
    (dict(table_frac=31), r"table_frac must be an integer in 16\.\.30, not 31"),
    (dict(log_int=5), r"log_int must be an integer in 6\.\.10, not 5"),
    (dict(log_int=11), r"log_int must be an integer in 6\.\.10, not 11"),
    (dict(log_int="7"), r"log_int must be an integer in 6\.\.10, not '7'"),
])
def test_config_rejects_out_of_range(params, match):
    with pytest.raises(ValueError, match=match):
        PowerConfig(**params)


def test_config_tables_and_formats():
    cfg = PowerConfig()
    assert cfg.log_width == 24 and cfg.log_min == -(1 << 23) and cfg.log_max == (1 << 23) - 1
    assert cfg.log_table.size == cfg.exp_table.size == 257
    assert cfg.log_table[0] == 0 and cfg.log_table[-1] == 1 << 22
    assert cfg.exp_table[0] == 1 << 22 and cfg.exp_table[-1] == 1 << 23
    assert np.all(np.diff(cfg.log_table) > 0) and np.all(np.diff(cfg.exp_table) > 0)
    assert cfg.input_width_ok(62, 40) and not PowerConfig(log_int=6).input_width_ok(62, 63)
    assert PowerConfig.from_dict(cfg.to_dict()) == cfg


# -- the figures for docs/fixed_point.md --------------------------------------------------------
def measure(cfg=CONFIGS["default"]):
    """Bounds and measured maxima for the default configuration (``python
    tb/test_powers.py``)."""
    rng = np.random.default_rng(1)
    ulp = 2.0 ** -cfg.log_frac
    out = {}
    small = np.arange(1, 1 << (cfg.mant_bits + 1), dtype=np.int64)
    f = mantissas(cfg)
    exact = np.concatenate([log2_errors(cfg, small, 0)]
                           + [log2_errors(cfg, f << k, 0) for k in (1, 7, 41)])
    trunc = np.concatenate([log2_errors(cfg, (f << k) | rng.integers(0, 1 << k, f.size), 0)
                            for k in (1, 7, 41)])
    for key, err, tr in (("log2", exact, False), ("log2, truncated", trunc, True)):
        below, above = log2_bounds(cfg, tr)
        out[key] = (f"[{-below / ulp:.3f}, {above / ulp:.3f}] ulp",
                    f"[{err.min() / ulp:.3f}, {err.max() / ulp:.3f}] ulp")
    y = every_fraction(cfg, 0)
    m, _ = exp2_raw(cfg, y, cfg.table_frac, cfg.table_frac + 2)
    rel = m * 2.0 ** -cfg.table_frac / np.exp2(y * ulp) - 1
    out["exp2 mantissa (relative)"] = (f"{exp2_bound(cfg):.3g}", f"{np.abs(rel).max():.3g}")
    x = np.arange(1, 1 << 16, dtype=np.int64)
    for p in (0.4, 0.6, 1.0, 2.0):                  # 40 fraction bits: no output rounding
        v, _, ref, err = power_errors(cfg, x, 8, round(p * 2 ** 16), 16, 40, 62)
        check_power(cfg, x, 8, round(p * 2 ** 16), 16, 40, 62)
        rel = power_bound(cfg, p, 16, log2_bounds(cfg)[0])
        out[f"x**{p}, x = 1/256..256 (relative)"] = (
            f"{rel:.3g}", f"{np.max(np.abs(err) / ref):.3g}")
    u = (np.abs(TD_CODES) << (EPS_FRAC - ACT_FRAC)) + EPS_RAW
    for alpha in (0.4, 0.6, 1.0):
        a_raw = round(alpha * 2 ** COEF_FRAC)
        ulps, _ = check_power(cfg, u, EPS_FRAC, a_raw, COEF_FRAC, PRIO_FRAC, PRIO_WIDTH)
        rel = power_bound(cfg, alpha, COEF_FRAC, log2_bounds(cfg)[0])
        top = (u.max() * 2.0 ** -EPS_FRAC) ** alpha
        out[f"priorities, alpha {alpha} (ulps of 2**-16)"] = (
            f"{rel:.3g}·value + 0.5 = {rel * top * 2 ** PRIO_FRAC + 0.5:.2f} at "
            f"{top:.3g}", f"{ulps.max():.2f}")
    for beta in (0.4, 1.0):
        b_raw = round(beta * 2 ** COEF_FRAC)
        worst = 0.0
        for _ in range(200):
            prio = np.exp2(rng.uniform(0, 32, 256)).astype(np.int64).clip(1, (1 << 32) - 1)
            worst = max(worst, check_weights(cfg, prio, b_raw)[0].max())
        rel = power_bound(cfg, beta, COEF_FRAC, log2_bounds(cfg)[1] + log2_bounds(cfg, True)[0])
        out[f"IS weights, beta {beta} (ulps of 2**-16)"] = (
            f"{rel:.3g}·value + 0.5 = {rel * 2 ** W_FRAC + 0.5:.2f} at 1.0", f"{worst:.2f}")
    return out


if __name__ == "__main__":
    for key, (bound, seen) in measure().items():
        print(f"| {key} | {bound} | {seen} |")
