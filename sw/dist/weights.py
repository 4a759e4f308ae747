"""The weight server of Scalable Policy Optimization (thesis section 5.2.2, Fig. 5.8).

Every ``H`` local SGD steps the learners send their weights here and receive the average
(Algorithm 7, lines 10-11); actors pull the current weights every few environment steps
(Algorithm 6, line 15). A network is a list of ``(n_in + 1) x n_out`` matrices per layer, the
bias in the last row (the layout of :meth:`sw.learner.driver.LearnerDriver.read_raw_weights`):

* **fixed point** (learner accelerators): raw integers of the learner's weight format. The
  average is computed exactly in integers and rounded once, with the weight format's rounding
  mode (:func:`mean_raw`), so it is the mean of the learners' weights to within half an ulp and
  needs no saturation (a mean lies between its operands);
* **float** (the torch learner): float32 matrices, averaged in float64 and rounded to float32.

:class:`WeightServer` is a plain class; :mod:`sw.dist.system` runs it as a Ray actor.
"""

import numpy as np

from sw.fixed import ROUNDING_MODES, FixedFormat

__all__ = ["mean_raw", "average_weights", "to_float_layers", "WeightServer"]


def mean_raw(mats, rounding: str = "half_up") -> np.ndarray:
    """Exact mean of integer arrays, rounded once.

    Parameters
    ----------
    mats : sequence of int arrays
        ``L >= 1`` arrays of one shape (raw fixed-point values).
    rounding : str
        ``"half_up"``: ``floor(s / L + 1/2)`` (ties towards +infinity, as :mod:`sw.fixed`);
        ``"half_even"``: nearest, ties to even; ``"floor"``: ``floor(s / L)``, where ``s`` is
        the exact integer sum.

    Returns
    -------
    int64 array of the common shape.
    """
    if rounding not in ROUNDING_MODES:
        raise ValueError(f"rounding must be one of {', '.join(ROUNDING_MODES)}, "
                         f"not {rounding!r}")
    arrs = [np.asarray(m) for m in mats]
    if not arrs:
        raise ValueError("mats must hold at least one array")
    shape = arrs[0].shape
    for i, a in enumerate(arrs):
        if a.dtype.kind not in "iu":
            raise ValueError(f"mats[{i}] must be an integer array, not dtype {a.dtype}")
        if a.shape != shape:
            raise ValueError(f"mats[{i}] has shape {a.shape}, not {shape}")
    n = len(arrs)
    s = np.sum([a.astype(np.int64) for a in arrs], axis=0, dtype=np.int64)
    if rounding == "floor":
        return s // n
    if rounding == "half_up":
        return (2 * s + n) // (2 * n)
    q = s // n
    twice_rem = 2 * (s - q * n)
    up = (twice_rem > n) | ((twice_rem == n) & (q % 2 == 1))
    return q + up


def average_weights(networks, weight_format: FixedFormat | None = None) -> list:
    """The layer-wise average of ``networks`` (each a list of per-layer matrices).

    With ``weight_format`` the matrices are raw integers of that format, averaged with
    :func:`mean_raw` and its rounding mode; without, float matrices averaged in float64 and
    returned as float32.
    """
    nets = [list(n) for n in networks]
    if not nets:
        raise ValueError("networks must hold at least one network")
    layers = len(nets[0])
    if any(len(n) != layers for n in nets):
        raise ValueError(f"every network must have {layers} layers, not "
                         f"{[len(n) for n in nets]}")
    out = []
    for l in range(layers):
        mats = [n[l] for n in nets]
        if weight_format is not None:
            out.append(mean_raw(mats, weight_format.rounding))
        else:
            out.append(np.mean([np.asarray(m, np.float64) for m in mats], axis=0)
                       .astype(np.float32))
    return out


def to_float_layers(network, weight_format: FixedFormat | None = None):
    """``(weights, biases)`` float64 lists (``weights[l]`` is ``n_in x n_out``) of a network in
    the server's layout: what an actor's forward pass uses."""
    ws, bs = [], []
    for m in network:
        f = weight_format.to_float(m) if weight_format is not None else np.asarray(m, np.float64)
        ws.append(f[:-1])
        bs.append(f[-1])
    return ws, bs


class WeightServer:
    """Current weights, their averaging, and the register of restarted components.

    Parameters
    ----------
    initial : list of arrays or None
        The network every learner starts from (raw or float, see the module docstring); None:
        set later with :meth:`reset`.
    weight_format : FixedFormat or None
        The learners' weight format (fixed point), or None (float learners).

    Members
    -------
    version : int
        Averaging rounds done (0: the initial weights).
    """

    def __init__(self, initial=None, weight_format: FixedFormat | None = None):
        self._incarnations = {}
        self.version = 0
        self._current = self._float = None
        if initial is not None:
            self.reset(initial, weight_format)

    def reset(self, initial, weight_format: FixedFormat | None = None) -> None:
        """Start over from ``initial`` (version 0) in ``weight_format``."""
        self._format = weight_format
        self._current = [np.array(m) for m in initial]
        self._float = to_float_layers(self._current, weight_format)
        self.version = 0

    def get_raw(self):
        """``(version, network)`` in the learners' layout (raw or float); network None before
        :meth:`reset`."""
        return self.version, self._current

    def get_float(self, known_version: int = -1):
        """``(version, (weights, biases))`` for an actor, or ``(version, None)`` if it already
        holds ``known_version``."""
        if known_version == self.version:
            return self.version, None
        return self.version, self._float

    def average(self, *networks):
        """Replace the current weights by the average of ``networks`` (one per learner) and
        return it (:func:`average_weights`)."""
        if self._current is None:
            raise RuntimeError("the weight server has no weights yet (reset first)")
        self._current = average_weights(networks, self._format)
        self._float = to_float_layers(self._current, self._format)
        self.version += 1
        return self._current

    def register(self, role: str, index: int) -> int:
        """A component announces its start; returns how often ``(role, index)`` started
        before (0 on the first start, then the restart count)."""
        key = (role, int(index))
        n = self._incarnations.get(key, 0)
        self._incarnations[key] = n + 1
        return n

    def restarts(self) -> dict:
        """``{"actor 0": restarts, ...}`` of the components that restarted at least once."""
        return {f"{r} {i}": n - 1 for (r, i), n in sorted(self._incarnations.items()) if n > 1}
