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
def _put(out, i, lane, lsb, width, v):
    """ORs the low ``width`` bits of integer ``v`` into bits ``lsb ..`` of ``out[i, lane]``."""
    out[i, lane] |= (np.int64(v) & ((np.int64(1) << width) - 1)) << lsb


@kernel
def pack_records(obs, actions, rewards, next_obs, dones, scale, mode, lo, hi, fields, out):
    """:func:`sw.trainer.layout.pack_records` of the float transitions quantized to the
    activation format (``scale`` = 2**frac, rounding ``mode``, raw range ``[lo, hi]`` as
    floats) into ``out`` (the records' unsigned lanes, n × lanes, zero); ``fields`` the rows
    ``(first lane, lsb, width)`` of :func:`sw.trainer.layout.record_fields`' obs, next_obs,
    reward, action and done (:data:`sw.trainer.hostfast.FIELDS`).
    Returns -1, or the first record with a value the format cannot hold (``out`` incomplete).
    Actions must be in range and ``dones`` bools (the caller checks them)."""
    n, n_in = obs.shape
    for i in range(n):
        for j in range(n_in):
            a = _code(obs[i, j], scale, mode, lo, hi)
            b = _code(next_obs[i, j], scale, mode, lo, hi)
            if a > hi or b > hi:
                return i
            _put(out, i, fields[0, 0] + j, fields[0, 1], fields[0, 2], a)
            _put(out, i, fields[1, 0] + j, fields[1, 1], fields[1, 2], b)
        r = _code(rewards[i], scale, mode, lo, hi)
        if r > hi:
            return i
        _put(out, i, fields[2, 0], fields[2, 1], fields[2, 2], r)
        _put(out, i, fields[3, 0], fields[3, 1], fields[3, 2], actions[i])
        _put(out, i, fields[4, 0], fields[4, 1], fields[4, 2], dones[i])
    return -1
