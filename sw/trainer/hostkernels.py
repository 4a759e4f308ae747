"""Compiled kernels of the trainer's host side (numba; imported only through
:func:`sw.jit.built`, by :mod:`sw.trainer.hostfast`). Module-level, cached on disk."""

import numpy as np

from sw.fixedkernels import rnd
from sw.jit import kernel

__all__ = ["KERNELS", "pack_records"]

KERNELS = ("pack_records",)


@kernel
def _code(v, scale, mode, lo, hi):
    """``v`` quantized (``rnd`` of ``v·scale``, an integer as a float; ``lo`` and ``hi``
    floats), or ``hi + 1`` when it is not finite, past ``ldexp``'s range or outside
    ``[lo, hi]``."""
    v = np.float64(v)
    if not abs(v) < 2.0 ** 960:
        return hi + 1.0
    r = rnd(v * scale, mode)
    if r > hi or r < lo:
        return hi + 1.0
    return r


@kernel
def pack_records(obs, actions, rewards, next_obs, dones, scale, mode, lo, hi, top, out):
    """:func:`sw.trainer.layout.pack_records` of the float transitions quantized to the
    activation format (``scale`` = 2**frac, rounding ``mode``, raw range ``[lo, hi]`` as
    floats) into
    ``out`` (the records' lanes, n × lanes); ``top`` the lane's sign bit, where ``done`` goes.
    Returns -1, or the first record with a value the format cannot hold (``out`` incomplete).
    Actions must be in range and ``dones`` bools (the caller checks them)."""
    n, n_in = obs.shape
    for i in range(n):
        for j in range(n_in):
            a = _code(obs[i, j], scale, mode, lo, hi)
            b = _code(next_obs[i, j], scale, mode, lo, hi)
            if a > hi or b > hi:
                return i
            out[i, j] = np.int64(a)
            out[i, n_in + j] = np.int64(b)
        r = _code(rewards[i], scale, mode, lo, hi)
        if r > hi:
            return i
        out[i, 2 * n_in] = np.int64(r)
        code = np.int64(actions[i]) | (np.int64(dones[i]) << top)
        out[i, 2 * n_in + 1] = code - ((code >> top) << (top + 1))
    return -1
