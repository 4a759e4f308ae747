"""The scale registers' format (:class:`sw.fixed.ScaleFormat`): the host's choice of
(mantissa, shift) and its error bound, the packing and its checks, the requantizer model
against exact arithmetic, and the driver's register choices passing the spec's checks."""

import math
from fractions import Fraction

import numpy as np
import pytest

from sw.fixed import ScaleFormat
from sw.gae.quant import range_registers
from sw.gae.model import requantize
from sw.gae.spec import GaeCoreConfig, check_registers, GaeCoreArgs

CFG = GaeCoreConfig()
FORMATS = [CFG.scale_format, CFG.result_scale_format, ScaleFormat(0, 12, 3, 16)]


@pytest.mark.parametrize("fmt", FORMATS, ids=str)
def test_nearest_and_up_within_the_bound(fmt):
    """In the normal range [min_normal, max_value]: nearest within 2^-(mantissa_bits - 1)
    relative (half a mantissa unit of a mantissa >= 2^(mantissa_bits - 2)), up not below x and
    within 2^-(mantissa_bits - 2); the mantissa normalized (the largest shift that fits)."""
    rng = np.random.default_rng(5)
    lo, hi = math.log2(fmt.min_normal), math.log2(fmt.max_value)
    xs = 2.0 ** rng.uniform(lo, hi, 2000)
    xs = np.concatenate([xs, [fmt.min_normal, fmt.max_value]])
    worst = 0.0
    for x in xs:
        for sign in (1, -1):
            raw = fmt.quantize(sign * x)
            m, e = fmt.unpack(raw)
            rel = abs(fmt.to_float(raw) - sign * x) / x
            worst = max(worst, rel)
            assert rel <= 2.0 ** -(fmt.mantissa_bits - 1), (x, m, e)
            assert abs(m) >= 1 << (fmt.mantissa_bits - 2) or e == fmt.max_shift
        up = fmt.to_float(fmt.quantize(x, direction="up"))
        assert x <= up <= x * (1 + 2.0 ** -(fmt.mantissa_bits - 2))
    assert worst > 2.0 ** -(fmt.mantissa_bits + 1)        # the bound is not vacuous


def test_out_of_range_and_tiny():
    fmt = CFG.scale_format
    raw, over = fmt.quantize(1e6, return_overflow=True)
    assert over and fmt.unpack(raw) == (fmt.max_mantissa, 0)
    raw, over = fmt.quantize(-1e6, return_overflow=True)
    assert over and fmt.unpack(raw) == (-fmt.max_mantissa - 1, 0)
    assert fmt.unpack(fmt.quantize(1e-30)) == (0, fmt.max_shift)
    # Below the normal range the absolute error stays half a unit at the largest shift.
    x = fmt.min_normal / 100
    assert abs(fmt.to_float(fmt.quantize(x)) - x) <= 2.0 ** (fmt.exp0 - fmt.max_shift - 1)
    with pytest.raises(ValueError, match="cannot quantize NaN"):
        fmt.quantize(math.nan)
    with pytest.raises(ValueError, match="direction must be"):
        fmt.quantize(1.0, direction="down")


def test_pack_unpack_and_checks():
    fmt = CFG.scale_format
    for m, e in ((0, 0), (-1, 31), (131071, 0), (-131072, 17), (5, 24)):
        assert fmt.unpack(fmt.pack(m, e)) == (m, e)
    assert fmt.pack(-1, 1) == 0x3FFFF | 1 << 24
    with pytest.raises(ValueError, match="mantissa must be a 18-bit signed integer"):
        fmt.pack(1 << 17, 0)
    with pytest.raises(ValueError, match="shift must be in 0..31"):
        fmt.pack(1, 32)
    for bad in (-1, 1 << 18, 1 << 23, 1 << 29, 1 << 31):
        with pytest.raises(ValueError, match=r"reward_scale must be a S18E5.*other bits 0"):
            fmt.check_raw(bad, "reward_scale")
    with pytest.raises(ValueError, match="must be an integer register word"):
        fmt.check_raw(1.0)
    with pytest.raises(ValueError, match="invalid scale format"):
        ScaleFormat(0, 20, 5, 18)


def exact_requantize(x, m, e, offset, cfg):
    """Independent reference: the 27-bit operand floor(x * 2^(LSHIFT - e)) saturated, times
    the mantissa, plus the offset, rounded half up (exact rationals), clamped."""
    op = math.floor(Fraction(x) * Fraction(2) ** (cfg.REQUANT_LSHIFT - e))
    lim = 1 << (cfg.REQUANT_OPERAND_BITS - 1)
    op = min(max(op, -lim), lim - 1)
    real = Fraction(op * m, 1 << cfg.REQUANT_FRAC) + Fraction(offset, 1 << cfg.reg_frac)
    code = math.floor(real + Fraction(1, 2))
    q = cfg.code_max
    return min(max(code, -q), q), not -q <= code <= q


@pytest.mark.parametrize("bits", [8, 16])
def test_requantize_model_is_exact(bits):
    cfg = GaeCoreConfig(code_bits=bits)
    fmt, df = cfg.result_scale_format, cfg.pe.data_format
    rng = np.random.default_rng(bits)
    x = np.concatenate([rng.integers(df.min_raw, df.max_raw, 300, endpoint=True),
                        [df.min_raw, df.max_raw, 0, -1, 1]])
    for e in list(range(0, 32, 3)) + [31]:
        m = int(rng.integers(-(1 << 17), 1 << 17))
        off = int(rng.integers(-(1 << 26), 1 << 26))
        codes, over = requantize(x, fmt.pack(m, e), off, cfg)
        ref = [exact_requantize(int(v), m, e, off, cfg) for v in x]
        np.testing.assert_array_equal(codes, [c for c, _ in ref])
        np.testing.assert_array_equal(over, [o for _, o in ref])


def test_requantize_is_round_of_the_real_product_without_floor_loss():
    """At shifts <= REQUANT_LSHIFT the operand is exact: the code is the real product plus the
    offset, rounded half up (what the host's scale means)."""
    cfg = GaeCoreConfig(code_bits=16)
    fmt, df = cfg.result_scale_format, cfg.pe.data_format
    rng = np.random.default_rng(1)
    for _ in range(50):
        scale = fmt.quantize(2.0 ** rng.uniform(5, 22))
        m, e = fmt.unpack(scale)
        if e > cfg.REQUANT_LSHIFT:
            continue
        x = rng.integers(-(1 << 20), 1 << 20, 50)
        codes, _ = requantize(x, scale, 0, cfg)
        real = [Fraction(int(v), 1 << df.frac) * Fraction(m) * Fraction(2) ** (fmt.exp0 - e)
                for v in x]
        want = [min(max(math.floor(r + Fraction(1, 2)), -32767), 32767) for r in real]
        np.testing.assert_array_equal(codes, want)


def test_range_registers_cover_within_bound():
    """The dequantizer's scale covers the range (qmax codes reach both ends) and exceeds the
    exact step by at most 2^-16 relative."""
    rf, sf = CFG.reg_format, CFG.scale_format
    rng = np.random.default_rng(2)
    for _ in range(200):
        lo = float(rng.normal() * 10 ** rng.uniform(-3, 3))
        hi = lo + float(10 ** rng.uniform(-4, 3))
        for bits in (8, 16):
            qmax = (1 << (bits - 1)) - 1
            scale_raw, off_raw = range_registers(lo, hi, bits, rf, sf)
            scale, off = sf.to_float(scale_raw), float(rf.to_float(off_raw))
            half = max(hi - off, off - lo)
            assert scale * qmax >= half
            if half / qmax >= sf.min_normal:
                assert scale <= half / qmax * (1 + 2.0 ** -16)


def test_check_registers():
    args = GaeCoreArgs(4, 3, 0, 0, CFG.scale_format.quantize(0.1), 0,
                       CFG.scale_format.quantize(0.2), 0, CFG.result_scale_format.quantize(9.0),
                       5 << 16, CFG.result_scale_format.quantize(1e-3), -(7 << 16))
    check_registers(args, CFG)
    with pytest.raises(ValueError, match="rtg_scale mantissa 1 is too small"):
        check_registers(GaeCoreArgs(**{**args.__dict__, "rtg_scale": 1}), CFG)
    check_registers(GaeCoreArgs(**{**args.__dict__, "rtg_scale": 0}), CFG)   # m = 0: offset
    check_registers(GaeCoreArgs(**{**args.__dict__, "rtg_scale": 1 << 30}),
                    GaeCoreConfig(results="full"))                       # not checked: no rtg
    with pytest.raises(ValueError, match="x.reward_scale must be a S18E5"):
        check_registers(GaeCoreArgs(**{**args.__dict__, "reward_scale": 1 << 20}), CFG,
                        prefix="x.")
    check_registers(GaeCoreArgs(**{**args.__dict__, "reward_scale": 1 << 20}), CFG,
                    names=["value_scale"])


def _quantize_from_max_shift(fmt, x, direction):
    """:meth:`ScaleFormat.quantize`'s search as first written: every shift from the largest."""
    rnd = (lambda y: math.floor(y + 0.5) if y >= 0 else -math.floor(-y + 0.5)) \
        if direction == "nearest" else math.ceil
    hi, lo = fmt.max_mantissa, -fmt.max_mantissa - 1
    for e in range(fmt.max_shift, -1, -1):
        m = rnd(math.ldexp(x, e - fmt.exp0))
        if lo <= m <= hi:
            return fmt.pack(m, e), False
    return fmt.pack(hi if x > 0 else lo, 0), True


@pytest.mark.parametrize("fmt", FORMATS, ids=str)
def test_quantize_starts_at_the_first_shift_that_can_fit(fmt):
    """The search starts at the largest shift whose mantissa can fit (from the exponent of x):
    the same word and overflow as trying every shift, at and around every power of two (where
    rounding carries into the next one), across and beyond the range, both directions."""
    rng = np.random.default_rng(11)
    lo, hi = math.log2(fmt.min_normal) - 8, math.log2(fmt.max_value) + 4
    xs = list(2.0 ** rng.uniform(lo, hi, 3000))
    for k in range(int(lo), int(hi) + 1):
        p = 2.0 ** k
        xs += [p, math.nextafter(p, 0), math.nextafter(p, math.inf), p * (1 - 2.0 ** -20),
               p * (1 - 2.0 ** -(fmt.mantissa_bits + 1)), p * 0.75]
    xs += [0.0, -0.0, 5e-324, fmt.min_normal, fmt.max_value]
    for x in xs:
        for v in (x, -x):
            for direction in ("nearest", "up"):
                assert fmt.quantize(v, direction=direction, return_overflow=True) == \
                    _quantize_from_max_shift(fmt, v, direction), (v, direction)
    # Where scaling by the largest shift overflowed a float (an OverflowError before), the
    # search now starts below it and saturates.
    for v, m in ((1e300, fmt.max_mantissa), (-1e300, -fmt.max_mantissa - 1)):
        raw, over = fmt.quantize(v, return_overflow=True)
        assert over and fmt.unpack(raw) == (m, 0)
