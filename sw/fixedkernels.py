"""Compiled rounding of :class:`sw.fixed.FixedFormat` (numba; imported only through
:func:`sw.jit.built`, when numba is installed): :func:`rnd`, which the replay and learner
kernels call too, and :func:`quantize`, the loop of ``FixedFormat.quantize`` on float arrays.
Module-level kernels, cached on disk (:mod:`sw.jit`).
"""

import numpy as np

from sw.jit import kernel

__all__ = ["rnd", "quantize"]


@kernel
def rnd(s, mode):
    """``s`` (a float already scaled by a power of two, so exact) rounded by mode
    ``sw.jit.MODES[mode]`` as :meth:`sw.fixed.FixedFormat.quantize` rounds (ties to even with
    numpy's ``rint``), not yet saturated."""
    if mode == 0:
        return np.floor(s)
    if mode == 1:
        return np.floor(s + 0.5)
    return np.rint(s)


@kernel
def quantize(x, scale, mode, lo, hi, raw, over):
    """:meth:`sw.fixed.FixedFormat.quantize` of the flat float array ``x`` into ``raw`` (int64)
    and ``over`` (bool): the same IEEE operations per element as its numpy code (no
    fast-math); False at NaN, infinity or a value past ``ldexp``'s range (``raw`` and ``over``
    incomplete)."""
    for i in range(x.size):
        v = np.float64(x[i])
        if not abs(v) < 2.0 ** 960:         # NaN, infinite, or past ldexp's range
            return False
        r = rnd(v * scale, mode)            # ldexp: exact, scale is a power of two
        over[i] = r > hi or r < lo
        raw[i] = np.int64(min(max(r, lo), hi))
    return True
