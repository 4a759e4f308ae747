"""Compiled host passes of the replay driver: an update's validation,
quantization and staging in one pass, and a sample's importance weights in one pass.

:class:`~sw.replay.driver.ReplayDriver` calls them when numba is installed; the results are
those of its numpy code (``tb/replay/test_host_fast.py`` runs both). Input the numpy code
would refuse makes :func:`stage_update` return None, and the numpy code then raises its
error. The kernels are module-level functions of :mod:`sw.replay.hostkernels`, compiled on first
use and cached on disk (``cache=True``: a new process loads them, :mod:`sw.jit`).
"""

import numpy as np

from sw.jit import MODES, built

__all__ = ["available", "update_params", "stage_update", "sampled"]

_K = []


def _load():
    """The kernels (:mod:`sw.replay.hostkernels`) as a dict, by name."""
    from . import hostkernels
    return {name: getattr(hostkernels, name) for name in hostkernels.KERNELS}


def _kernels():
    """The kernels (a dict), loaded on first use, or None without numba."""
    return built(_K, _load)


def available() -> bool:
    """True when numba is installed (the kernels compile on first use)."""
    return _kernels() is not None


def update_params(config) -> tuple:
    """The constants :func:`stage_update` needs of a configuration (computed once per driver),
    or None where the compiled pass does not apply (no numba, a format wider than 53 bits)."""
    fmt = config.input_format
    if _kernels() is None or fmt.width > 53:
        return None
    return (config.capacity, float(fmt.max_value), 2.0 ** fmt.frac,
            MODES.index(fmt.rounding), float(fmt.min_raw),
            float(fmt.max_raw))


def stage_update(params, indices, priorities, idx_out, raw_out):
    """Write the checked int64 ``indices`` and the input-format raw words of the real
    ``priorities`` (float64, one per index) into ``idx_out``/``raw_out`` (uint64 staging
    buffers, long enough), as the numpy code of
    :meth:`~sw.replay.driver.ReplayDriver.update` does; ``params`` from
    :func:`update_params`. Returns the largest index, or None (input the numpy code refuses,
    or a positive priority below one LSB, which the numpy code clamps with a warning)."""
    k = _kernels()
    if k is None:
        return None
    ok, top, clamped = k["stage"](indices, priorities, *params, idx_out.view(np.int64),
                                      raw_out.view(np.int64))
    return int(top) if ok and not clamped else None


def sampled(config, idx_words, prio_words, total, size, beta):
    """``(indices, weights, priorities)`` of a sample's IDX_OUT and PRIO_OUT words (uint64
    arrays), the root ``total`` (raw) and the tree's ``size``, as the numpy code of
    :meth:`~sw.replay.driver.ReplayDriver.sample`; None without numba."""
    k = _kernels()
    if k is None:
        return None
    n = idx_words.size
    idx, w, prio = np.empty(n, np.int64), np.empty(n), np.empty(n)
    k["weights"](idx_words, prio_words, float(total), size, beta,
                 2.0 ** -config.priority_format.frac, idx, w, prio)
    return idx, w, prio
