"""Fixed-point formats: the one definition of rounding and saturation (numpy half).

:class:`FixedFormat` describes a two's complement (or unsigned) fixed-point number and converts,
rounds and saturates raw integers with numpy. The gateware builds the same operations from
:func:`rtl_gen.fixed.rshift_round` and :func:`rtl_gen.fixed.saturate` (Amaranth expressions),
and every pair is tested against the other in ``tb/test_fixed.py``, so the golden models and
the RTL cannot drift apart. This module imports no Amaranth: the host side (drivers, golden
models) uses it on a board.

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

import math
from dataclasses import dataclass

import numpy as np

from sw.jit import MODES, built

__all__ = ["ROUNDING_MODES", "MAX_INTERMEDIATE_BITS", "FixedFormat", "ScaleFormat",
           "rshift_round_int"]

ROUNDING_MODES = ("half_up", "half_even", "floor")

#: Golden models use int64; every intermediate value must stay below this many bits.
MAX_INTERMEDIATE_BITS = 62


def rshift_round_int(x, shift, rounding):
    """Drop ``shift`` low bits of integers ``x`` (arithmetic shift) with ``rounding``; the
    numpy twin of :func:`rtl_gen.fixed.rshift_round`."""
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
        return rshift_round_int(x, shift, self.rounding)

    def quantize(self, x, *, return_overflow=False):
        """Convert real numbers to raw integers: this format's rounding, then saturation."""
        if isinstance(x, float) and self.width <= 53 and math.isfinite(x) and abs(x) < 2.0 ** 960:
            return self._quantize_scalar(x, return_overflow)
        if (isinstance(x, np.ndarray) and x.dtype in _FAST_DTYPES and x.size >= 8
                and self.width <= 53 and x.flags.c_contiguous):
            out = _quantize_compiled(self, x)
            if out is not None:
                return out if return_overflow else out[0]
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

    def _quantize_scalar(self, x, return_overflow):
        """:meth:`quantize` of one finite Python float, without numpy's per-call cost: the
        same IEEE operations (exact scaling, the rounding, saturation), the same types."""
        scaled = math.ldexp(x, self.frac)               # exact: |x| * 2**frac stays finite
        if self.rounding == "floor":
            r = math.floor(scaled)
        elif self.rounding == "half_up":
            r = math.floor(scaled + 0.5)
        else:
            r = round(scaled)                           # ties to even, as numpy
        lo, hi = self.min_raw, self.max_raw
        raw = np.int64(min(max(r, lo), hi))
        return (raw, np.bool_(r > hi or r < lo)) if return_overflow else raw

    def to_float(self, raw):
        """Real value of raw integers."""
        if type(raw) is int and -(1 << 53) <= raw <= 1 << 53:   # one register: no numpy call
            return np.float64(math.ldexp(float(raw), -self.frac))
        return np.ldexp(np.asarray(raw, dtype=np.float64), -self.frac)

    def check_raw(self, raw, name="value"):
        """Raise ``ValueError`` if any raw integer is outside this format."""
        raw = np.asarray(raw)
        if raw.size and (raw.min() < self.min_raw or raw.max() > self.max_raw):
            raise ValueError(f"{name} must be raw {self} integers in "
                             f"{self.min_raw}..{self.max_raw}")
        return raw


#: Array dtypes :meth:`FixedFormat.quantize` hands to its compiled loop (one signature each).
_FAST_DTYPES = (np.dtype(np.float64), np.dtype(np.float32))
#: :func:`sw.fixedkernels.quantize` once loaded, or None without numba (:func:`sw.jit.built`);
#: tests put ``[None]`` here to run the numpy code.
_QUANTIZE_KERNEL = []


def _quantize_kernel():
    """The compiled loop of :meth:`FixedFormat.quantize` (:func:`sw.fixedkernels.quantize`)."""
    from sw.fixedkernels import quantize
    return quantize


def _quantize_compiled(fmt, x):
    """``(raw, over)`` of :meth:`FixedFormat.quantize` for a C-contiguous float array (width
    at most 53 bits: the limits are exact floats), or None (numpy then does it, and raises)."""
    kernel = built(_QUANTIZE_KERNEL, _quantize_kernel)
    if kernel is None:
        return None
    raw, over = np.empty(x.shape, np.int64), np.empty(x.shape, np.bool_)
    mode = MODES.index(fmt.rounding)
    if not kernel(x.reshape(-1), 2.0 ** fmt.frac, mode, float(fmt.min_raw), float(fmt.max_raw),
                  raw.reshape(-1), over.reshape(-1)):
        return None
    return raw, over


@dataclass(frozen=True)
class ScaleFormat:
    """A scale register: a signed mantissa and a right-shift field in one word.

    The raw word holds the mantissa ``m`` (two's complement) in bits ``0 .. mantissa_bits-1``
    and the shift ``e`` (unsigned) in bits ``shift_lsb .. shift_lsb+shift_bits-1``; every other
    bit is zero. It represents ``m * 2**(exp0 - e)``. The (de)quantizers multiply by ``m``
    alone (one DSP48E2 product) and apply ``e`` as a shift of an operand, so one register
    spans ``2**shift_bits`` octaves at ``mantissa_bits - 1`` bits of precision.

    Parameters
    ----------
    exp0 : int
        The binary exponent of a mantissa unit at ``e = 0``.
    mantissa_bits, shift_bits, shift_lsb : int
        The fields' widths and the shift's position (``shift_lsb >= mantissa_bits``).
    """
    exp0: int
    mantissa_bits: int = 18
    shift_bits: int = 5
    shift_lsb: int = 24

    def __post_init__(self):
        if not (2 <= self.mantissa_bits <= self.shift_lsb
                and self.shift_lsb + self.shift_bits <= 31 and self.shift_bits >= 1):
            raise ValueError(f"invalid scale format fields {self!r}")

    @property
    def max_mantissa(self) -> int:
        return (1 << (self.mantissa_bits - 1)) - 1

    @property
    def max_shift(self) -> int:
        return (1 << self.shift_bits) - 1

    @property
    def max_value(self) -> float:
        """Largest representable scale."""
        return math.ldexp(self.max_mantissa, self.exp0)

    @property
    def min_normal(self) -> float:
        """Smallest scale held at full precision (mantissa of ``mantissa_bits - 1``
        significant bits, at the largest shift); smaller ones lose precision."""
        return math.ldexp(1 << (self.mantissa_bits - 2), self.exp0 - self.max_shift)

    def __str__(self):
        return (f"S{self.mantissa_bits}E{self.shift_bits}"
                f"(m*2^({self.exp0}-e), e at bit {self.shift_lsb})")

    def to_dict(self) -> dict:
        return {"exp0": self.exp0, "mantissa_bits": self.mantissa_bits,
                "shift_bits": self.shift_bits, "shift_lsb": self.shift_lsb}

    def pack(self, mantissa: int, shift: int) -> int:
        """The raw word of ``(mantissa, shift)`` (``ValueError`` if either does not fit)."""
        mantissa, shift = int(mantissa), int(shift)
        if not -self.max_mantissa - 1 <= mantissa <= self.max_mantissa:
            raise ValueError(f"mantissa must be a {self.mantissa_bits}-bit signed integer, "
                             f"not {mantissa}")
        if not 0 <= shift <= self.max_shift:
            raise ValueError(f"shift must be in 0..{self.max_shift}, not {shift}")
        return (mantissa & ((1 << self.mantissa_bits) - 1)) | (shift << self.shift_lsb)

    def unpack(self, raw):
        """``(mantissa, shift)`` of a raw word (checked: :meth:`check_raw`)."""
        raw = self.check_raw(raw)
        m = raw & ((1 << self.mantissa_bits) - 1)
        if m >> (self.mantissa_bits - 1):
            m -= 1 << self.mantissa_bits
        return m, (raw >> self.shift_lsb) & self.max_shift

    def check_raw(self, raw, name="scale"):
        """``raw`` as an int if it is a valid word of this format, else ``ValueError``
        naming ``name``."""
        if isinstance(raw, bool) or not isinstance(raw, (int, np.integer)):
            raise ValueError(f"{name} must be an integer register word, not {raw!r}")
        raw = int(raw)
        allowed = ((1 << self.mantissa_bits) - 1) | (self.max_shift << self.shift_lsb)
        if raw < 0 or raw & ~allowed:
            raise ValueError(f"{name} must be a {self} register word (mantissa in bits "
                             f"0..{self.mantissa_bits - 1}, shift in bits {self.shift_lsb}.."
                             f"{self.shift_lsb + self.shift_bits - 1}, other bits 0), "
                             f"not {raw:#x}")
        return raw

    def to_float(self, raw) -> float:
        """Real value of a raw word."""
        m, e = self.unpack(raw)
        return math.ldexp(float(m), self.exp0 - e)

    def quantize(self, x, *, direction="nearest", return_overflow=False):
        """The raw word nearest to the real ``x`` (``direction="nearest"``, ties away from
        zero) or the smallest one not below it (``"up"``): the largest shift whose mantissa
        still fits, so the mantissa keeps ``mantissa_bits - 1`` significant bits whenever
        ``min_normal <= |x| <= max_value`` and the relative error is at most
        ``2**-(mantissa_bits - 1)`` (nearest) or ``2**-(mantissa_bits - 2)`` (up). Above the
        range the mantissa saturates (overflow)."""
        x = float(x)
        if not math.isfinite(x):
            raise ValueError("cannot quantize NaN or infinite values")
        if direction not in ("nearest", "up"):
            raise ValueError(f"direction must be 'nearest' or 'up', not {direction!r}")
        rnd = (lambda y: math.floor(y + 0.5) if y >= 0 else -math.floor(-y + 0.5)) \
            if direction == "nearest" else math.ceil
        hi, lo = self.max_mantissa, -self.max_mantissa - 1
        # Above e = mantissa_bits - k + exp0 (x = f 2**k, 1/2 <= |f| < 1) the mantissa is at
        # least 2**mantissa_bits and cannot fit: start there rather than at max_shift.
        start = self.max_shift if x == 0.0 else min(
            self.max_shift, self.mantissa_bits - math.frexp(x)[1] + self.exp0)
        for e in range(start, -1, -1):
            m = rnd(math.ldexp(x, e - self.exp0))
            if lo <= m <= hi:
                raw = self.pack(m, e)
                return (raw, False) if return_overflow else raw
        raw = self.pack(hi if x > 0 else lo, 0)
        return (raw, True) if return_overflow else raw
