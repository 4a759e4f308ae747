"""Compiled host kernels of a GAE stream's push: :class:`~sw.gae.stream.GaeStream`
calls them instead of its numpy code when its driver's ``backend`` is ``"numba"`` (chosen once,
:func:`sw.gae.hostfast.choose_backend`), with the same results bit for bit
(``tb/gae/test_host_fast.py``, ``test_stream_same``).

``push_step`` does one time step in one pass: the raw statistics the next stream's scales come
from, the codes and the staged images of the three regions (``push_row``), the statistics of the
dequantized step the in-place result scale needs, and the episode stretches. ``row_stats`` is the
statistics part alone (``finish``'s bootstrap row). They use the batch kernels' rounding clip and
numpy's pairwise summation (:mod:`sw.gae.hostfast`); all are module-level functions of
:mod:`sw.gae.hostkernels`, compiled on first use and cached on disk (``cache=True``: a new
process loads them, :mod:`sw.jit`).
"""

from sw.jit import built

from . import hostfast

__all__ = ["STREAM_STATE", "available", "kernels"]

_K = []

#: The scalars of a stream the ``push_step`` kernel keeps (``GaeStream``'s attributes):
#: whether a step was pushed, the raw values' moments, the raw reward and value ranges, the
#: largest raw TD error, the dequantized values' sum and range, the moments and largest
#: magnitude of their TD errors, the longest episode stretch.
STREAM_STATE = ("pushed", "raw_n", "raw_mean", "raw_m2", "r_lo", "r_hi", "v_lo", "v_hi",
                "raw_dmax", "vsum", "vmin", "vmax", "delta_n", "delta_mean", "delta_m2",
                "dmax", "longest")


def _load():
    """The kernels (:mod:`sw.gae.hostkernels`) as a dict, by name."""
    from . import hostkernels
    return {name: getattr(hostkernels, name) for name in hostkernels.STREAM}


def available() -> bool:
    """True if the stream's compiled kernels can be used (numba is installed and the batch
    kernels are)."""
    return hostfast.available()


def kernels():
    """The kernels (a dict), loaded on first use; call only when :func:`available`."""
    return built(_K, _load)
