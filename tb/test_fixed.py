"""The fixed-point module: the Amaranth and numpy halves agree bit for bit."""

import numpy as np
import pytest
from amaranth.hdl import Module, Signal, signed, unsigned
from amaranth.lib import data
from amaranth.sim import Simulator
from hypothesis import given, settings
from hypothesis import strategies as st

from sw.fixed import ROUNDING_MODES, FixedFormat
from rtl_gen.fixed import pack, rshift_round, saturate, saturate_fast, unpack


def comb_eval(m, inp, outs, values):
    """Drive ``inp`` with each of ``values``, return the settled ``outs``."""
    results = []

    async def bench(ctx):
        for v in values:
            ctx.set(inp, int(v))
            await ctx.delay(1e-9)
            results.append([ctx.get(o) for o in outs])

    sim = Simulator(m)
    sim.add_testbench(bench)
    sim.run()
    return np.array(results, dtype=np.int64)


@pytest.mark.parametrize("is_signed", [True, False])
def test_saturate_fast_equals_saturate(is_signed):
    """Every value of a 9-bit input into a 5-bit format: same result and overflow bit."""
    fmt = FixedFormat(5, 2, is_signed, "half_up")
    m = Module()
    x = Signal(signed(9) if is_signed else unsigned(9))
    a, oa = saturate(m, x, fmt, name="a")
    b, ob = saturate_fast(m, x, fmt, name="b")
    values = range(-256, 256) if is_signed else range(512)
    got = comb_eval(m, x, [a, oa, b, ob], values)
    assert (got[:, 0] == got[:, 2]).all() and (got[:, 1] == got[:, 3]).all()


@pytest.mark.parametrize("rounding", ROUNDING_MODES)
@pytest.mark.parametrize("is_signed", [True, False])
def test_rshift_round_and_saturate_match_numpy(rounding, is_signed):
    width, shift = 14, 5
    out_fmt = FixedFormat(6, 0, is_signed, rounding)
    m = Module()
    x = Signal(signed(width) if is_signed else unsigned(width))
    rounded = rshift_round(x, shift, rounding)
    r = Signal(rounded.shape())
    m.d.comb += r.eq(rounded)
    sat, ovf = saturate(m, r, out_fmt, name="sat")
    lo, hi = (-(1 << (width - 1)), 1 << (width - 1)) if is_signed else (0, 1 << width)
    values = np.arange(lo, hi, 7)
    got = comb_eval(m, x, [r, sat, ovf], values)
    ref_r = out_fmt.rshift_round(values, shift)
    ref_sat, ref_ovf = out_fmt.saturate(ref_r)
    np.testing.assert_array_equal(got[:, 0], ref_r)
    np.testing.assert_array_equal(got[:, 1], ref_sat)
    np.testing.assert_array_equal(got[:, 2], ref_ovf)


@settings(max_examples=200, deadline=None)
@given(x=st.integers(-(1 << 40), 1 << 40), shift=st.integers(1, 20))
def test_rounding_modes_definitions(x, shift):
    exact = x / (1 << shift)
    f = {m: int(FixedFormat(8, 0, True, m).rshift_round(x, shift)) for m in ROUNDING_MODES}
    assert f["floor"] == np.floor(exact)
    assert f["half_up"] == np.floor(exact + 0.5)
    frac = exact - np.floor(exact)
    if frac != 0.5:
        assert f["half_even"] == f["half_up"]
    else:
        assert f["half_even"] % 2 == 0 and abs(f["half_even"] - exact) == 0.5


@settings(max_examples=200, deadline=None)
@given(x=st.floats(-1e4, 1e4, allow_nan=False), rounding=st.sampled_from(ROUNDING_MODES))
def test_quantize_is_rshift_round_of_exact_value(x, rounding):
    """quantize(x) equals rounding the exact binary value of x with the same mode."""
    fmt = FixedFormat(24, 8, True, rounding)
    mant, exp = np.frexp(x)
    big = int(np.ldexp(mant, 53))             # x = big * 2**(exp - 53), exactly
    shift = 53 - exp - fmt.frac
    if shift > 0:
        expect = int(fmt.rshift_round(big, shift)) if shift < 62 else (
            -1 if (x < 0 and rounding == "floor") else 0)
    else:
        expect = big << -shift
    expect = int(np.clip(expect, fmt.min_raw, fmt.max_raw))
    assert int(fmt.quantize(x)) == expect


def test_quantize_saturates_and_flags():
    fmt = FixedFormat(8, 4)
    raw, over = fmt.quantize([100.0, -100.0, 1.5], return_overflow=True)
    assert raw.tolist() == [127, -128, 24] and over.tolist() == [True, True, False]
    assert fmt.max_value == 127 / 16 and fmt.min_value == -8.0
    with pytest.raises(ValueError, match="NaN"):
        fmt.quantize([np.nan])
    with pytest.raises(ValueError, match=r"x must be raw sQ4\.4/half_up integers in -128\.\.127"):
        fmt.check_raw([200], "x")


@pytest.mark.parametrize("kwargs,match", [
    ({"width": 0, "frac": 0}, r"width must be an integer in 1\.\.62, not 0"),
    ({"width": 8, "frac": 9}, r"frac must be an integer in 0\.\.width \(8\), not 9"),
    ({"width": 8, "frac": 2, "rounding": "ceil"}, "rounding must be one of"),
])
def test_format_validation(kwargs, match):
    with pytest.raises(ValueError, match=match):
        FixedFormat(**kwargs)


@settings(max_examples=100, deadline=None)
@given(a=st.integers(-8, 7), b=st.integers(0, 1), c=st.integers(0, 1000))
def test_pack_unpack_roundtrip(a, b, c):
    layout = data.StructLayout({"a": signed(4), "b": 1, "c": unsigned(10)})
    word = pack(layout, {"a": a, "b": b, "c": c})
    assert 0 <= word < 1 << 15
    assert unpack(layout, word) == {"a": a, "b": b, "c": c}


def test_pack_rejects_out_of_range():
    layout = data.StructLayout({"a": signed(4)})
    with pytest.raises(ValueError, match="field 'a' = 8 does not fit"):
        pack(layout, {"a": 8})


@pytest.mark.parametrize("rounding", ROUNDING_MODES)
@pytest.mark.parametrize("width,frac,is_signed", [(8, 0, True), (16, 8, True), (32, 16, True),
                                                  (24, 24, False), (53, 20, True),
                                                  (54, 20, True), (62, 61, False)])
def test_quantize_scalar_same_as_array(width, frac, is_signed, rounding):
    """A Python float takes a path without numpy; same raw integer, flag and types as a 0-d
    array, at ties, at and past both ends, for huge and tiny values."""
    f = FixedFormat(width, frac, is_signed, rounding)
    rng = np.random.default_rng(width * 100 + frac)
    xs = list(rng.normal(size=300) * 2.0 ** rng.integers(-frac - 3, width - frac + 3, 300))
    xs += [(k + 0.5) * f.ulp for k in range(-6, 6)]
    xs += [0.0, -0.0, f.max_value, f.min_value, f.max_value + f.ulp / 2,
           f.min_value - f.ulp / 2, 1e300, -1e300, 5e-324, 2.0 ** 959, -(2.0 ** 961)]
    for x in map(float, xs):
        with np.errstate(over="ignore", invalid="ignore"):
            a = f.quantize(x, return_overflow=True)
            b = f.quantize(np.array(x), return_overflow=True)
        assert (type(a[0]), type(a[1]), a) == (type(b[0]), type(b[1]), b), x


@pytest.mark.parametrize("rounding", ROUNDING_MODES)
@pytest.mark.parametrize("width,frac,is_signed", [(8, 0, True), (16, 13, True), (32, 16, True),
                                                  (24, 24, False), (53, 20, True)])
def test_quantize_compiled_same_as_numpy(width, frac, is_signed, rounding, monkeypatch):
    """Float arrays of 8 elements and more take a compiled loop: the same raw integers and
    flags as the numpy code (arrays of ties, ends, huge values; float32; 2-D), which still
    raises for NaN and infinity."""
    import sw.fixed as fixed
    f = FixedFormat(width, frac, is_signed, rounding)
    rng = np.random.default_rng(width + frac)
    x = rng.normal(size=(40, 9)) * 2.0 ** rng.integers(-frac - 3, width - frac + 3, (40, 9))
    x[0, :6] = [(k + 0.5) * f.ulp for k in range(-3, 3)]
    x[1, :4] = [f.max_value, f.min_value, f.max_value + f.ulp / 2, f.min_value - f.ulp / 2]
    cases = [x, x.astype(np.float32), x[2], np.full(8, 1e300), x[:, 0].copy()]
    fast = [f.quantize(c, return_overflow=True) for c in cases]
    monkeypatch.setattr(fixed, "_QUANTIZE_KERNEL", [None])
    with np.errstate(over="ignore"):
        slow = [f.quantize(c, return_overflow=True) for c in cases]
    for (a, b), (c, d) in zip(fast, slow):
        assert a.dtype == c.dtype and b.dtype == d.dtype
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(b, d)
    monkeypatch.undo()
    for bad in (np.nan, np.inf):
        with pytest.raises(ValueError, match="NaN or infinite"):
            f.quantize(np.full(9, bad))


@pytest.mark.parametrize("frac", [0, 1, 16, 40, 62])
def test_to_float_int_same_as_array(frac):
    """A Python int takes a path without numpy: the same np.float64 as a 0-d array."""
    f = FixedFormat(62, frac)
    for raw in (0, 1, -1, 3, -(1 << 53), 1 << 53, (1 << 53) - 1, 12345678901, -987654321):
        a, b = f.to_float(raw), f.to_float(np.array(raw))
        assert type(a) is type(b) and a.tobytes() == b.tobytes(), raw
