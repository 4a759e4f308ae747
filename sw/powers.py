"""The power unit: fixed-point ``log2`` and ``exp2`` with interpolated tables, and the two powers
prioritized replay needs on chip. Plain Python and numpy, no Amaranth: the gateware
(:mod:`rtl_gen.powers`) reads its tables and widths from :class:`PowerConfig`; the golden
trainer (:mod:`sw.trainer.golden`) and the learner's Adam (:mod:`sw.learner.adam`) call the
functions below.

Powers are ``x**p = exp2(p·log2 x)``:

* new priorities ``(|δ| + ε)**α`` (:func:`priorities_raw`);
* importance-sampling weights normalised by the batch maximum, ``(p_min / p_i)**β`` =
  ``exp2(β·(log2 p_min - log2 p_i))`` (:func:`is_weights_raw`), which need neither the tree's
  total nor its size.

``log2`` (:func:`log2_raw`) of an unsigned raw ``x`` with ``in_frac`` fraction bits
    ``e`` = position of the leading one; the ``mant_bits`` bits below it (truncated, or
    zero-filled) are the mantissa fraction ``f``; its top ``table_bits`` bits ``i`` select two
    entries of :attr:`PowerConfig.log_table` (``round(log2(1 + i/2**T)·2**table_frac)``) and
    the rest ``r`` interpolates: ``a + floor((b - a)·r / 2**(M-T))``; the sum is rounded
    (half up) to ``log_frac`` bits and ``e - in_frac`` added. ``log2(0)`` is the format's
    minimum (:attr:`PowerConfig.log_min`), which every power below maps to 0.
``exp2`` (:func:`exp2_raw`) of a signed raw ``y`` with ``log_frac`` fraction bits
    ``n = floor(y)``, the fraction's top ``table_bits`` bits select two entries of
    :attr:`PowerConfig.exp_table` (``round(2**(i/2**T)·2**table_frac)``), the rest
    interpolates as above; the mantissa is shifted by ``n`` into the output format (rounded
    half up, saturated to ``out_width`` bits: the flag says so).

Every shift rounds half up: ``(v + 2**(s-1)) >> s`` (arithmetic). The RTL is a pipeline of
these integer steps (a leading-one detector and a barrel shifter per function, one multiplier
per interpolation); the worst-case errors against float64 are stated and tested in
``tb/test_powers.py`` and derived in docs/fixed_point.md.
"""

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from sw.config import Config, check_int

__all__ = ["LOG2_LATENCY", "EXP2_LATENCY", "SCALE_LATENCY", "POWER_LATENCY", "TABLES",
           "table_stages", "PowerConfig",
           "log2_raw", "exp2_raw", "power_raw", "priorities_raw", "is_weights_raw",
           "round_shift"]


#: Pipeline latencies of the gateware (:mod:`rtl_gen.powers`), cycles from an input
#: transfer to its result: log2, exp2, the scaling ``round(p·log2 x)``, and ``x**p``.
LOG2_LATENCY = 6
EXP2_LATENCY = 5
SCALE_LATENCY = 4
POWER_LATENCY = LOG2_LATENCY + SCALE_LATENCY + EXP2_LATENCY

#: Where the gateware keeps the log2 and exp2 tables: ``"auto"`` (synthesis chooses: LUTs at
#: ``table_bits`` = 8) or ``"block"`` (block RAM, then one more register before the
#: interpolation multiply: the latencies above plus :func:`table_stages`).
TABLES = ("auto", "block")


def table_stages(tables: str) -> int:
    """Cycles a unit's table placement adds to its latency: 0 for ``"auto"``, 1 for
    ``"block"`` (the block RAM's read, then a register in front of the DSP48E2)."""
    if tables not in TABLES:
        raise ValueError(f"tables must be one of {', '.join(map(repr, TABLES))}, "
                         f"not {tables!r}")
    return int(tables == "block")


def round_shift(v, s: int):
    """``v / 2**s`` rounded half up (arithmetic shift of int64 ``v``; ``s <= 0`` shifts left
    exactly)."""
    v = np.asarray(v, dtype=np.int64)
    if s <= 0:
        return v << -s
    return (v + (np.int64(1) << (s - 1))) >> s


@dataclass(frozen=True)
class PowerConfig(Config):
    """Parameters of the power unit (:mod:`sw.powers`).

    Parameters
    ----------
    table_bits : int
        T, 2..12: each table has ``2**T + 1`` entries.
    mant_bits : int
        M, T+1..30: fraction bits of the normalised mantissa that ``log2`` interpolates on.
    table_frac : int
        Fraction bits of the table entries and interpolated values, ``log_frac``..30.
    log_frac : int
        Fraction bits of a logarithm (signed), T..24; also the fraction bits ``exp2`` reads.
    log_int : int
        Integer bits of a logarithm, 6..10: a logarithm is ``1 + log_int + log_frac`` bits,
        two's complement, so inputs up to ``2**(2**log_int - 1)`` are representable.

    Raises
    ------
    ValueError
        A parameter out of range; the message names it.
    """
    what = "power unit"

    table_bits: int = 8
    mant_bits: int = 20
    table_frac: int = 22
    log_frac: int = 16
    log_int: int = 7

    def __post_init__(self):
        check_int("table_bits", self.table_bits, 2, 12)
        check_int("mant_bits", self.mant_bits, self.table_bits + 1, 30)
        check_int("log_frac", self.log_frac, self.table_bits, 24)
        check_int("table_frac", self.table_frac, self.log_frac, 30)
        check_int("log_int", self.log_int, 6, 10)

    @property
    def log_width(self) -> int:
        """Bits of a logarithm (signed)."""
        return 1 + self.log_int + self.log_frac

    @property
    def log_min(self) -> int:
        """The most negative logarithm: what ``log2(0)`` gives."""
        return -(1 << (self.log_width - 1))

    @property
    def log_max(self) -> int:
        return (1 << (self.log_width - 1)) - 1

    @cached_property
    def log_table(self) -> np.ndarray:
        """``round(log2(1 + i/2**T)·2**table_frac)``, i = 0..2**T (int64)."""
        i = np.arange((1 << self.table_bits) + 1, dtype=np.float64)
        return np.floor(np.log2(1.0 + i / (1 << self.table_bits)) * (1 << self.table_frac)
                        + 0.5).astype(np.int64)

    @cached_property
    def exp_table(self) -> np.ndarray:
        """``round(2**(i/2**T)·2**table_frac)``, i = 0..2**T (int64)."""
        i = np.arange((1 << self.table_bits) + 1, dtype=np.float64)
        return np.floor(np.exp2(i / (1 << self.table_bits)) * (1 << self.table_frac)
                        + 0.5).astype(np.int64)

    def input_width_ok(self, width: int, frac: int) -> bool:
        """Whether every ``width``-bit input with ``frac`` fraction bits has a representable
        logarithm."""
        return max(width - frac, frac + 1) < (1 << self.log_int)


def _bit_length(x):
    """Leading-one position + 1 of non-negative int64 ``x`` (0 for 0), exactly."""
    x = np.asarray(x, dtype=np.int64)
    e = np.zeros(x.shape, dtype=np.int64)
    pos = x > 0
    e[pos] = np.floor(np.log2(x[pos].astype(np.float64))).astype(np.int64)
    # float64 may round a 54..62-bit x up to the next power of two: correct by one.
    e -= (pos & ((np.int64(1) << np.minimum(e, 62)) > x)).astype(np.int64)
    e += (pos & (e < 62) & ((np.int64(1) << np.minimum(e + 1, 62)) <= x)).astype(np.int64)
    return np.where(pos, e + 1, 0)


def _interp(table, idx, r, rbits):
    """``table[idx] + floor((table[idx+1] - table[idx])·r / 2**rbits)``."""
    a = table[idx]
    return a + (((table[idx + 1] - a) * r) >> rbits)


def log2_raw(cfg: PowerConfig, x, in_frac: int):
    """``log2`` of unsigned raw ``x`` (``in_frac`` fraction bits, < 2**62) as a raw logarithm
    (``cfg.log_frac`` fraction bits, int64); 0 gives :attr:`PowerConfig.log_min`."""
    x = np.asarray(x, dtype=np.int64)
    if x.size and x.min() < 0:
        raise ValueError("log2_raw needs non-negative raw inputs")
    T, M = cfg.table_bits, cfg.mant_bits
    e = _bit_length(x) - 1                               # -1 for x = 0
    es = np.maximum(e, 0)
    down = np.maximum(es - M, 0)
    up = np.maximum(M - es, 0)
    f = ((x >> down) << up) & ((np.int64(1) << M) - 1)
    frac = round_shift(_interp(cfg.log_table, f >> (M - T), f & ((1 << (M - T)) - 1), M - T),
                       cfg.table_frac - cfg.log_frac)
    out = ((e - in_frac) << cfg.log_frac) + frac
    return np.where(x > 0, np.clip(out, cfg.log_min, cfg.log_max), cfg.log_min)


def exp2_raw(cfg: PowerConfig, y, out_frac: int, out_width: int):
    """``2**y`` of raw logarithms ``y`` (``cfg.log_frac`` fraction bits) as unsigned raw values
    with ``out_frac`` fraction bits, saturated to ``out_width`` bits (<= 62).

    Returns ``(values, overflow)`` (int64, bool arrays); :attr:`PowerConfig.log_min` gives 0.
    """
    y = np.asarray(y, dtype=np.int64)
    T, F, Ft = cfg.table_bits, cfg.log_frac, cfg.table_frac
    n = y >> F
    f = y & ((np.int64(1) << F) - 1)
    m = _interp(cfg.exp_table, f >> (F - T), f & ((1 << (F - T)) - 1), F - T)
    s = n + out_frac - Ft                                 # value = m · 2**s
    top = (np.int64(1) << out_width) - 1
    big = s >= out_width - Ft                             # m >= 2**Ft: 2**out_width or more
    tiny = s < -(Ft + 2)                                  # m < 2**(Ft+2): rounds to 0
    sl = np.clip(s, -(Ft + 2), out_width - Ft - 1)        # m << sl < 2**out_width: no wrap
    left = m << np.maximum(sl, 0)
    sh = np.maximum(-sl, 0)
    right = (m + np.where(sh > 0, np.int64(1) << np.maximum(sh - 1, 0), 0)) >> sh
    v = np.where(sl >= 0, left, right)
    v = np.where(tiny, 0, v)
    over = big | (v > top)
    v = np.where(over, top, v)
    v = np.where(y <= cfg.log_min, 0, v)
    over &= y > cfg.log_min
    return v, over


def power_raw(cfg: PowerConfig, x, in_frac: int, p_raw: int, p_frac: int, out_frac: int,
              out_width: int):
    """``x**p`` as ``exp2(round(p·log2 x))``: raw unsigned ``x`` (``in_frac``), raw unsigned
    exponent ``p_raw`` (``p_frac`` fraction bits); returns ``(values, overflow)`` raw with
    ``out_frac`` fraction bits, saturated to ``out_width`` bits. ``0**p`` is 0 for p > 0 and
    1 for p = 0 (as numpy's float powers)."""
    lg = log2_raw(cfg, x, in_frac)
    y = round_shift(int(p_raw) * lg, p_frac)
    y = np.where(lg <= cfg.log_min, cfg.log_min if p_raw else 0, y)
    return exp2_raw(cfg, y, out_frac, out_width)


def priorities_raw(cfg: PowerConfig, diff, act_frac: int, eps_raw: int, eps_frac: int,
                   alpha_raw: int, alpha_frac: int, out_frac: int, out_width: int):
    """New priorities ``(|δ| + ε)**α`` of raw TD errors ``diff`` (``act_frac`` fraction bits):
    ``|δ|`` widened to ``eps_frac`` fraction bits, ``ε`` added (raw, ``eps_frac``), then
    :func:`power_raw`. Returns ``(values, overflow)`` with ``out_frac`` fraction bits."""
    u = (np.abs(np.asarray(diff, dtype=np.int64)) << (eps_frac - act_frac)) + int(eps_raw)
    return power_raw(cfg, u, eps_frac, alpha_raw, alpha_frac, out_frac, out_width)


def is_weights_raw(cfg: PowerConfig, prio, in_frac: int, beta_raw: int, beta_frac: int,
                   out_frac: int, out_width: int):
    """Importance-sampling weights ``(min_j p_j / p_i)**β`` of raw sampled priorities ``prio``
    (all > 0, ``in_frac`` fraction bits), as ``exp2(round(β·(log2 p_min - log2 p_i)))`` with
    ``out_frac`` fraction bits: the batch minimum gets exactly 1.0. Returns raw int64."""
    lg = log2_raw(cfg, prio, in_frac)
    if lg.size == 0:
        return lg
    y = round_shift(int(beta_raw) * (lg.min() - lg), beta_frac)
    return exp2_raw(cfg, y, out_frac, out_width)[0]
