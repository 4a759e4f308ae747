"""Compiled host passes when numba is installed: what the drivers' ``hostfast`` modules
(:mod:`sw.gae.hostfast`, :mod:`sw.gae.streamfast`, :mod:`sw.learner.hostfast`,
:mod:`sw.replay.hostfast`) and :class:`sw.fixed.FixedFormat` share. A board image without
numba gets None, and the drivers their numpy code.

The kernels are module-level functions of modules of their own (:mod:`sw.fixedkernels`,
:mod:`sw.gae.hostkernels`, :mod:`sw.learner.hostkernels`, :mod:`sw.replay.hostkernels`),
decorated with :func:`kernel`; a driver's module imports its kernel module on first use
(:func:`built`), so nothing imports numba before a kernel is needed and a board without numba
never does. numba's on-disk cache (``cache=True``) then compiles each kernel once per source
version, not once per process: a kernel must not be built inside another function, whose
compiled callees numba cannot key its cache on (it would compile again in every process and
add a file to the cache each time; ``tb/test_jit_cache.py``).

numba notices a change of a kernel's own source file only: a kernel that calls one of another
file (:func:`sw.fixedkernels.rnd`) keeps its cached code when only that file changes. After
changing a kernel that others call, delete the cache (``__pycache__/*.nbi`` and ``*.nbc``
next to the kernel modules, or ``$NUMBA_CACHE_DIR``).
"""

__all__ = ["njit", "kernel", "built", "MODES"]


def njit():
    """``numba.njit(cache=True, nogil=True)`` (compiled on first use, cached on disk), or None
    without numba."""
    try:
        import numba
    except ImportError:
        return None
    return numba.njit(cache=True, nogil=True)


def kernel(fn):
    """``fn`` compiled by :func:`njit`'s decorator: the decorator of the kernel modules'
    module-level functions (``ImportError`` without numba: only :func:`built` imports those
    modules, and only with numba)."""
    jit = njit()
    if jit is None:
        raise ImportError("numba is not installed: the compiled kernels are not available")
    return jit(fn)


def built(cache: list, load):
    """``cache[0]``, set on first use to ``load()`` (a module's kernels, usually a dict of its
    kernel module's functions) or to None without numba, when ``load`` is not called. A module
    keeps ``cache`` as its ``_K``; its tests put ``[None]`` there to run the numpy code."""
    if not cache:
        cache.append(None if njit() is None else load())
    return cache[0]


#: The rounding modes of :class:`sw.fixed.FixedFormat` in the order the compiled passes number
#: them (``MODES.index(fmt.rounding)``; :func:`sw.fixedkernels.rnd`).
MODES = ("floor", "half_up", "half_even")
