"""The replay tree's on-chip PRNG and integer sample targets, bit for bit as the RTL.

* :func:`xorshift32`, :class:`Xorshift32` -- the xorshift32 generator
  (:data:`~sw.replay.spec.XORSHIFT32_SHIFTS`), one word or a whole batch at a time.
* :func:`fixed_targets` -- ``(x_raw * root) >> target_bits``, exactly, as the tree's target
  multiply computes it.

:mod:`sw.replay.sumtree` re-exports all three (its golden trees use them).
"""

import numpy as np

from sw.replay.spec import PRNG_BITS, XORSHIFT32_SHIFTS, XORSHIFT32_ZERO_SEED

__all__ = ["xorshift32", "Xorshift32", "fixed_targets"]

_MASK32 = 0xFFFFFFFF


# -- PRNG -----------------------------------------------------------------------------------------
def xorshift32(state: int) -> int:
    """One step of the on-chip PRNG (the definition the RTL matches bit for bit).

    ``s ^= s << 13; s ^= s >> 17; s ^= s << 5`` on 32 bits (Marsaglia 2003, shifts
    :data:`~sw.replay.spec.XORSHIFT32_SHIFTS`). Combinational in hardware: 3 XOR layers.
    """
    a, b, c = XORSHIFT32_SHIFTS
    s = int(state) & _MASK32
    s ^= (s << a) & _MASK32
    s ^= s >> b
    s ^= (s << c) & _MASK32
    return s


def _byte_tables(cols):
    """Lookup tables of the GF(2)-linear map with column images ``cols`` (32 x uint32):
    ``tables[b, x]`` is the image of byte value ``x`` in byte position ``b``."""
    x = np.arange(256, dtype=np.uint32)
    tables = np.zeros((4, 256), dtype=np.uint32)
    for b in range(4):
        for i in range(8):
            tables[b] ^= cols[8 * b + i] * ((x >> np.uint32(i)) & np.uint32(1))
    return tables


def _apply(tables, v):
    """Apply a linear map, given by :func:`_byte_tables`, to uint32 words ``v``."""
    return (tables[0][v & 0xFF] ^ tables[1][(v >> np.uint32(8)) & 0xFF]
            ^ tables[2][(v >> np.uint32(16)) & 0xFF] ^ tables[3][v >> np.uint32(24)])


# Tables of M^(2^k), M = one xorshift step (linear over GF(2)): jump ahead 2^k steps at once.
_POW = [_byte_tables(np.array([xorshift32(1 << j) for j in range(PRNG_BITS)], dtype=np.uint32))]
#: Up to this many words are generated with scalar steps (cheaper than the vectorised jumps).
_SCALAR_WORDS = 192


def _power(k):
    while len(_POW) <= k:
        unit = np.uint32(1) << np.arange(PRNG_BITS, dtype=np.uint32)
        _POW.append(_byte_tables(_apply(_POW[-1], _apply(_POW[-1], unit))))
    return _POW[k]


class Xorshift32:
    """The sum tree's on-chip PRNG: a 32-bit xorshift stream seeded by the host.

    Parameters
    ----------
    seed : int
        32-bit seed, 0..2**32-1. Seed 0 loads :data:`~sw.replay.spec.XORSHIFT32_ZERO_SEED`.

    Each word is the state *after* one :func:`xorshift32` step; sample ``b`` of a batch uses the
    ``b``-th word. :meth:`words` computes ``n`` words with ``log2(n)`` vectorised jumps (the step
    is linear over GF(2), so ``2**k`` steps are one table lookup per byte), bit-identical to ``n``
    scalar steps.
    """

    def __init__(self, seed: int = 0):
        self.seed(seed)

    def seed(self, seed: int):
        """Load a seed (the host's seed register write)."""
        if not isinstance(seed, (int, np.integer)) or not 0 <= int(seed) <= _MASK32:
            raise ValueError(f"seed must be an integer in 0..{_MASK32}, not {seed!r}")
        self._state = int(seed) or XORSHIFT32_ZERO_SEED

    @property
    def state(self) -> int:
        return self._state

    def words(self, n: int) -> np.ndarray:
        """The next ``n`` 32-bit words (uint32), advancing the state by ``n`` steps."""
        if n <= 0:
            return np.zeros(0, dtype=np.uint32)
        if n <= _SCALAR_WORDS:
            out, s = [], self._state
            for _ in range(n):
                s = xorshift32(s)
                out.append(s)
            self._state = s
            return np.array(out, dtype=np.uint32)
        w = np.array([xorshift32(self._state)], dtype=np.uint32)
        k = 0
        while len(w) < n:
            w = np.concatenate([w, _apply(_power(k), w)])
            k += 1
        w = w[:n]
        self._state = int(w[-1])
        return w

    def fractions(self, n: int, *, bits: int = PRNG_BITS) -> np.ndarray:
        """The next ``n`` target fractions ``x_raw = word >> (32 - bits)`` (int64)."""
        return (self.words(n) >> np.uint32(PRNG_BITS - bits)).astype(np.int64)


def fixed_targets(x_raw, root: int, *, target_bits: int) -> np.ndarray:
    """Integer targets ``t = (x_raw * root) >> target_bits`` (floor), exactly, as int64.

    Parameters
    ----------
    x_raw : array of int
        Target fractions, ``target_bits``-bit unsigned (``x = x_raw / 2**target_bits``).
    root : int
        Root sum, raw, below ``2**62``.
    target_bits : int
        1..32.

    The hardware multiplies the ``root_width``-bit root by the ``target_bits``-bit fraction and
    keeps the upper ``root_width`` bits of the product. Here the root is split into 32-bit halves
    so every partial product fits a uint64: ``x*root >> X = (x*hi << (32 - X)) + (x*lo >> X)``.
    ``0 <= t < root`` for ``root > 0``.
    """
    x = np.asarray(x_raw, dtype=np.int64)
    if x.size and (x.min() < 0 or x.max() >> target_bits):
        raise ValueError(f"x_raw must be integers in 0..{(1 << target_bits) - 1}")
    root = int(root)
    if not 0 <= root < (1 << 62):
        raise ValueError(f"root must be an integer in 0..2**62-1, not {root!r}")
    xu = x.astype(np.uint64)
    hi = xu * np.uint64(root >> 32)
    lo = xu * np.uint64(root & _MASK32)
    t = (hi << np.uint64(32 - target_bits)) + (lo >> np.uint64(target_bits))
    return t.astype(np.int64)
