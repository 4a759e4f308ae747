"""Fixed-point arithmetic in gateware: the Amaranth half of :mod:`sw.fixed`.

:func:`rshift_round` and :func:`saturate` build, as Amaranth expressions, exactly the rounding
and saturation that :meth:`sw.fixed.FixedFormat.rshift_round` and
:meth:`sw.fixed.FixedFormat.saturate` compute with numpy (each pair is tested against the other
in ``tb/test_fixed.py``); :func:`fixed_shape` is the Amaranth shape of a format's raw value;
:func:`pack` and friends move integers in and out of ``StructLayout`` bit vectors (tests and
stream drivers).
"""

import numpy as np
from amaranth.hdl import Const, Mux, Shape, Signal, Value, signed, unsigned
from amaranth.lib import data

from sw.fixed import MAX_INTERMEDIATE_BITS, ROUNDING_MODES, FixedFormat

__all__ = [
    "ROUNDING_MODES", "MAX_INTERMEDIATE_BITS", "FixedFormat", "fixed_shape",
    "rshift_round", "saturate", "saturate_fast", "pack", "unpack", "pack_array", "unpack_array",
]


def fixed_shape(fmt: FixedFormat) -> Shape:
    """Amaranth shape of a raw value of ``fmt``."""
    return signed(fmt.width) if fmt.signed else unsigned(fmt.width)


def rshift_round(value, shift: int, rounding: str) -> Value:
    """Combinational: drop ``shift`` low bits of ``value`` with the given rounding mode.

    The result keeps ``value``'s signedness and is one bit wider than ``len(value) - shift`` so
    that rounding up can never wrap.
    """
    value = Value.cast(value)
    if rounding not in ROUNDING_MODES:
        raise ValueError(f"rounding must be one of {ROUNDING_MODES}, not {rounding!r}")
    if shift == 0:
        return value
    shape = value.shape()
    wide = (signed if shape.signed else unsigned)(shape.width + 1)
    v = value.as_signed() if shape.signed else value
    if rounding == "floor":
        return (v >> shift)
    half = 1 << (shift - 1)
    if rounding == "half_up":
        summed = v + half
    else:
        summed = v + (half - 1) + v[shift]
    return summed.as_signed()[shift:].as_signed() if shape.signed else summed[shift:]


def saturate(m, value, fmt: FixedFormat, *, name: str):
    """Clamp ``value`` to ``fmt`` with combinational logic added to module ``m``.

    Returns ``(result, overflow)``: signals named ``name`` (shape ``fixed_shape(fmt)``) and
    ``name + "_ovf"`` (1 when clamping changed the value). Only the comparisons that can be true
    for ``value``'s shape are built.
    """
    value = Value.cast(value)
    vshape = value.shape()
    wide = Signal(vshape, name=f"{name}_full")
    result = Signal(fixed_shape(fmt), name=name)
    overflow = Signal(name=f"{name}_ovf")
    vmin = -(1 << (vshape.width - 1)) if vshape.signed else 0
    vmax = (1 << (vshape.width - 1)) - 1 if vshape.signed else (1 << vshape.width) - 1
    hi = (wide > fmt.max_raw) if vmax > fmt.max_raw else Const(0)
    lo = (wide < fmt.min_raw) if vmin < fmt.min_raw else Const(0)
    inner = wide[:fmt.width]
    m.d.comb += [
        wide.eq(value),
        overflow.eq(hi | lo),
        result.eq(Mux(hi, Const(fmt.max_raw, fixed_shape(fmt)),
                      Mux(lo, Const(fmt.min_raw, fixed_shape(fmt)), inner))),
    ]
    return result, overflow


def saturate_fast(m, value, fmt: FixedFormat, *, name: str):
    """:func:`saturate` with the range checks as bit tests: ``value`` is out of range iff its
    bits above the format's width (and, signed, the format's sign bit) are not all equal to
    its sign. Same results and signals; a reduction of the high bits instead of two
    comparators (carry chains), for pipeline stages that must be short. Falls back to
    :func:`saturate` unless ``value`` and ``fmt`` have the same signedness and ``value`` is
    wider than ``fmt``.
    """
    value = Value.cast(value)
    vshape = value.shape()
    w = fmt.width
    if vshape.signed != fmt.signed or vshape.width <= w:
        return saturate(m, value, fmt, name=name)
    wide = Signal(vshape, name=f"{name}_full")
    result = Signal(fixed_shape(fmt), name=name)
    overflow = Signal(name=f"{name}_ovf")
    hi, lo = Signal(name=f"{name}_hi"), Signal(name=f"{name}_lo")
    m.d.comb += [h.eq(v) for h, v in zip((hi, lo), _range_checks(wide, fmt))]
    m.d.comb += [
        wide.eq(value),
        overflow.eq(hi | lo),
        result.eq(_clamp(hi, lo, wide[:w], fmt)),
    ]
    return result, overflow


def _range_checks(value, fmt: FixedFormat):
    """``(hi, lo)``: ``value`` (wider than ``fmt``, of its signedness) is above or below the
    format's range, as bit tests: its bits above the format's width (and, signed, the
    format's sign bit) are not all equal to its sign."""
    w = fmt.width
    if fmt.signed:
        sign = value[-1]
        high = value[w - 1:-1]           # must all equal the sign
        return ~sign & high.any(), sign & ~high.all()
    return value[w:].any(), Const(0, 1)


def _clamp(hi, lo, low, fmt: FixedFormat):
    """The format's maximum if ``hi``, its minimum if ``lo``, else ``low``."""
    return Mux(hi, Const(fmt.max_raw, fixed_shape(fmt)),
               Mux(lo, Const(fmt.min_raw, fixed_shape(fmt)), low))


def saturate_staged(m, value, fmt: FixedFormat, *, name: str):
    """:func:`saturate_fast` over one register stage: the range checks (bit tests of the high
    bits) and the low bits of ``value`` are registered, and the result is one multiplexer
    after them. Returns ``(result, overflow)``, both one cycle behind ``value``. ``value`` and
    ``fmt`` must have the same signedness and ``value`` must be wider than ``fmt``."""
    value = Value.cast(value)
    vshape = value.shape()
    w = fmt.width
    if vshape.signed != fmt.signed or vshape.width <= w:
        raise ValueError(f"value must be wider than fmt and of its signedness, not "
                         f"{vshape!r} for {fmt!r}")
    hi, lo = Signal(name=f"{name}_hi"), Signal(name=f"{name}_lo")
    low = Signal(fixed_shape(fmt), name=f"{name}_low")
    m.d.sync += [h.eq(v) for h, v in zip((hi, lo), _range_checks(value, fmt))]
    m.d.sync += low.eq(value[:w])
    return _clamp(hi, lo, low, fmt), hi | lo


# -- packing ------------------------------------------------------------------------------------
def _fields(layout: data.StructLayout):
    for name, field in layout:
        yield name, field.offset, Shape.cast(field.shape)


def pack(layout: data.StructLayout, values: dict) -> int:
    """Pack a dict of integers into the bit vector of an Amaranth ``StructLayout``.

    Every field must be given; signed fields take negative integers. Raises ``ValueError`` if a
    value does not fit its field.
    """
    word = 0
    for name, offset, shape in _fields(layout):
        v = int(values[name])
        lo = -(1 << (shape.width - 1)) if shape.signed else 0
        hi = (1 << (shape.width - 1)) - 1 if shape.signed else (1 << shape.width) - 1
        if not lo <= v <= hi:
            raise ValueError(f"field {name!r} = {v} does not fit {shape}")
        word |= (v & ((1 << shape.width) - 1)) << offset
    return word


def unpack(layout: data.StructLayout, word: int) -> dict:
    """Inverse of :func:`pack`: split a bit vector into a dict of (signed) integers."""
    out = {}
    for name, offset, shape in _fields(layout):
        v = (int(word) >> offset) & ((1 << shape.width) - 1)
        if shape.signed and v >> (shape.width - 1):
            v -= 1 << shape.width
        out[name] = v
    return out


def pack_array(layout: data.StructLayout, columns: dict) -> list:
    """Pack columns (dict of equal-length integer arrays) into a list of Python ints."""
    names = [name for name, _, _ in _fields(layout)]
    n = len(np.asarray(columns[names[0]]))
    cols = {name: np.asarray(columns[name]).tolist() for name in names}
    return [pack(layout, {name: cols[name][i] for name in names}) for i in range(n)]


def unpack_array(layout: data.StructLayout, words) -> dict:
    """Unpack a sequence of bit vectors into a dict of int64 arrays, one per field."""
    rows = [unpack(layout, w) for w in words]
    return {name: np.array([r[name] for r in rows], dtype=np.int64)
            for name, _, _ in _fields(layout)}
