"""Fixed-point formats and bit packing, shared by the RTL generators and the numpy golden models.

This is the one place where rounding and saturation are defined. Every generator builds its
arithmetic from :func:`rshift_round` and :func:`saturate` (Amaranth expressions), and every golden
model from :meth:`FixedFormat.rshift_round` and :meth:`FixedFormat.saturate` (numpy), so the two
cannot drift apart: each pair is tested against the other in ``tb/test_fixed.py``.

Rounding modes (applied whenever fraction bits are dropped):

``"half_up"`` (default)
    Round to nearest, ties towards +infinity: ``floor(x + 1/2)``. One adder in hardware.
``"half_even"``
    Round to nearest, ties to even (convergent rounding). One adder plus one bit of logic.
``"floor"``
    Drop the bits (round towards -infinity). Free in hardware, biased by -1/2 ulp.

Overflow always saturates to the format's range; the operations return an overflow flag so the
hardware can raise a sticky status bit and the driver can report it.
"""

from dataclasses import dataclass

import numpy as np
from amaranth.hdl import Const, Mux, Shape, Signal, Value, signed, unsigned
from amaranth.lib import data

__all__ = [
    "ROUNDING_MODES", "FixedFormat",
    "rshift_round", "saturate",
    "pack", "unpack", "pack_array", "unpack_array",
]

ROUNDING_MODES = ("half_up", "half_even", "floor")

#: Golden models use int64; every intermediate value must stay below this many bits.
MAX_INTERMEDIATE_BITS = 62


def _rshift_round_int(x, shift, rounding):
    """numpy/int implementation of :func:`rshift_round` (arithmetic shift)."""
    x = np.asarray(x, dtype=np.int64)
    if shift == 0:
        return x.copy()
    if rounding == "floor":
        return x >> shift
    half = np.int64(1) << (shift - 1)
    if rounding == "half_up":
        return (x + half) >> shift
    if rounding == "half_even":
        lsb = (x >> shift) & 1
        return (x + (half - 1) + lsb) >> shift
    raise ValueError(f"rounding must be one of {ROUNDING_MODES}, not {rounding!r}")


@dataclass(frozen=True)
class FixedFormat:
    """A two's complement (or unsigned) fixed-point format.

    A raw integer ``x`` of this format represents the real number ``x * 2**-frac``.

    Parameters
    ----------
    width : int
        Total number of bits, 1..62.
    frac : int
        Number of fraction bits, 0..width.
    signed : bool
        Two's complement if true, unsigned otherwise.
    rounding : str
        One of :data:`ROUNDING_MODES`, used when a value is converted into this format.
    """
    width: int
    frac: int
    signed: bool = True
    rounding: str = "half_up"

    def __post_init__(self):
        if not isinstance(self.width, int) or not 1 <= self.width <= MAX_INTERMEDIATE_BITS:
            raise ValueError(f"width must be an integer in 1..{MAX_INTERMEDIATE_BITS}, "
                             f"not {self.width!r}")
        if not isinstance(self.frac, int) or not 0 <= self.frac <= self.width:
            raise ValueError(f"frac must be an integer in 0..width ({self.width}), "
                             f"not {self.frac!r}")
        if self.rounding not in ROUNDING_MODES:
            raise ValueError(f"rounding must be one of {', '.join(ROUNDING_MODES)}, "
                             f"not {self.rounding!r}")

    # -- description ------------------------------------------------------------------------------
    @property
    def shape(self) -> Shape:
        """Amaranth shape of a raw value."""
        return signed(self.width) if self.signed else unsigned(self.width)

    @property
    def min_raw(self) -> int:
        return -(1 << (self.width - 1)) if self.signed else 0

    @property
    def max_raw(self) -> int:
        return (1 << (self.width - 1)) - 1 if self.signed else (1 << self.width) - 1

    @property
    def ulp(self) -> float:
        """Value of one least significant bit."""
        return 2.0 ** -self.frac

    @property
    def min_value(self) -> float:
        return self.min_raw * self.ulp

    @property
    def max_value(self) -> float:
        return self.max_raw * self.ulp

    def __str__(self):
        kind = "s" if self.signed else "u"
        return f"{kind}Q{self.width - self.frac}.{self.frac}/{self.rounding}"

    def to_dict(self) -> dict:
        return {"width": self.width, "frac": self.frac, "signed": self.signed,
                "rounding": self.rounding}

    # -- numpy side -------------------------------------------------------------------------------
    def saturate(self, x):
        """Clamp raw integers to this format. Returns ``(values, overflow)`` as int64 / bool."""
        x = np.asarray(x, dtype=np.int64)
        over = (x > self.max_raw) | (x < self.min_raw)
        return np.clip(x, self.min_raw, self.max_raw), over

    def rshift_round(self, x, shift: int):
        """Drop ``shift`` fraction bits of raw integers with this format's rounding mode."""
        return _rshift_round_int(x, shift, self.rounding)

    def quantize(self, x, *, return_overflow=False):
        """Convert real numbers to raw integers: this format's rounding, then saturation."""
        x = np.asarray(x, dtype=np.float64)
        if not np.all(np.isfinite(x)):
            raise ValueError("cannot quantize NaN or infinite values")
        scaled = np.ldexp(x, self.frac)
        if self.rounding == "floor":
            r = np.floor(scaled)
        elif self.rounding == "half_up":
            r = np.floor(scaled + 0.5)
        else:
            r = np.round(scaled)  # numpy rounds ties to even
        over = (r > self.max_raw) | (r < self.min_raw)
        raw = np.clip(r, self.min_raw, self.max_raw).astype(np.int64)
        return (raw, over) if return_overflow else raw

    def to_float(self, raw):
        """Real value of raw integers."""
        return np.ldexp(np.asarray(raw, dtype=np.float64), -self.frac)

    def check_raw(self, raw, name="value"):
        """Raise ``ValueError`` if any raw integer is outside this format."""
        raw = np.asarray(raw)
        if raw.size and (raw.min() < self.min_raw or raw.max() > self.max_raw):
            raise ValueError(f"{name} must be raw {self} integers in "
                             f"{self.min_raw}..{self.max_raw}")
        return raw


# -- Amaranth side ------------------------------------------------------------------------------
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

    Returns ``(result, overflow)``: signals named ``name`` (shape ``fmt.shape``) and
    ``name + "_ovf"`` (1 when clamping changed the value). Only the comparisons that can be true
    for ``value``'s shape are built.
    """
    value = Value.cast(value)
    vshape = value.shape()
    wide = Signal(vshape, name=f"{name}_full")
    result = Signal(fmt.shape, name=name)
    overflow = Signal(name=f"{name}_ovf")
    vmin = -(1 << (vshape.width - 1)) if vshape.signed else 0
    vmax = (1 << (vshape.width - 1)) - 1 if vshape.signed else (1 << vshape.width) - 1
    hi = (wide > fmt.max_raw) if vmax > fmt.max_raw else Const(0)
    lo = (wide < fmt.min_raw) if vmin < fmt.min_raw else Const(0)
    inner = wide[:fmt.width]
    m.d.comb += [
        wide.eq(value),
        overflow.eq(hi | lo),
        result.eq(Mux(hi, Const(fmt.max_raw, fmt.shape),
                      Mux(lo, Const(fmt.min_raw, fmt.shape), inner))),
    ]
    return result, overflow


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
