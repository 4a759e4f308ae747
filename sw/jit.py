"""Compiled host passes when numba is installed: what the drivers' ``hostfast`` modules
(:mod:`sw.gae.hostfast`, :mod:`sw.gae.streamfast`, :mod:`sw.learner.hostfast`,
:mod:`sw.replay.hostfast`) share. A board image without numba gets None, and the drivers
their numpy code."""

__all__ = ["njit", "built", "MODES", "rounder"]


def njit():
    """``numba.njit(cache=True, nogil=True)`` (compiled on first use, cached on disk), or None
    without numba."""
    try:
        import numba
    except ImportError:
        return None
    return numba.njit(cache=True, nogil=True)


def built(cache: list, build):
    """``cache[0]``, set on first use to ``build(jit)`` (a module's kernels) or None without
    numba. A module keeps ``cache`` as its ``_K``; its tests put ``[None]`` there to run the
    numpy code."""
    if not cache:
        jit = njit()
        cache.append(None if jit is None else build(jit))
    return cache[0]


#: The rounding modes of :class:`sw.fixed.FixedFormat` in the order the compiled passes number
#: them (``MODES.index(fmt.rounding)``).
MODES = ("floor", "half_up", "half_even")


def rounder(jit):
    """A compiled ``rnd(s, mode)``: ``s`` (a float already scaled by a power of two, so
    exact) rounded by mode ``MODES[mode]`` as :meth:`sw.fixed.FixedFormat.quantize` rounds
    (ties to even with numpy's ``rint``), not yet saturated."""
    import numpy as np

    @jit
    def rnd(s, mode):
        if mode == 0:
            return np.floor(s)
        if mode == 1:
            return np.floor(s + 0.5)
        return np.rint(s)
    return rnd
