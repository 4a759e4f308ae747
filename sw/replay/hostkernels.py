"""Compiled host passes of the replay driver (numba): module-level functions, so that numba's
on-disk cache keeps them from process to process (:mod:`sw.jit`). Imported only through
:func:`sw.jit.built`, when numba is installed; :mod:`sw.replay.hostfast` calls them and holds
their contract (the results of the driver's numpy code).
"""

import numpy as np

from sw.fixedkernels import rnd
from sw.jit import kernel

__all__ = ["KERNELS"]

#: The kernels :mod:`sw.replay.hostfast` calls.
KERNELS = ("stage", "weights")


@kernel
def stage(idx, prio, cap, maxv, scale, mode, lo, hi, idx_out, raw_out):
    """Check and quantize one update: ``idx`` in 0..cap-1, ``prio`` finite and >= 0,
    raw = the format's rounding of ``min(prio, maxv) * scale`` saturated to lo..hi.
    Returns ``(ok, top index, positive priorities that rounded to 0)``."""
    top, clamped = np.int64(-1), np.int64(0)
    for i in range(idx.size):
        j = idx[i]
        p = prio[i]
        if j < 0 or j >= cap or not (p >= 0.0 and p < np.inf):
            return False, top, clamped
        if j > top:
            top = j
        r = rnd(min(p, maxv) * scale, mode)     # scale a power of two: exact
        raw = np.int64(min(max(r, lo), hi))
        if raw == 0 and p > 0.0:         # the numpy code clamps it to 1 and warns
            clamped += 1
        idx_out[i] = j
        raw_out[i] = raw
    return True, top, clamped


@kernel
def weights(idx_words, prio_words, total, size, beta, frac_scale, idx, w, prio):
    """Leaves, importance weights ``(size * p) ** -beta`` normalised by their maximum
    (``p = raw / total``) and real priorities of a sample's result words."""
    m = np.float64(max(size, 1))
    top = -np.inf
    for i in range(idx.size):
        raw = prio_words[i]
        idx[i] = np.int64(idx_words[i])
        v = (m * (np.float64(raw) / total)) ** -beta
        w[i] = v
        if v > top or v != v:
            top = v
        prio[i] = np.float64(raw) * frac_scale
    for i in range(idx.size):
        w[i] = w[i] / top
