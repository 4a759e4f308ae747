"""Running reward statistics and block statistics of the GAE host pipeline (HEPPO section II).

:class:`RunningMeanStd` (Welford / Chan et al.), :class:`DynamicRewardStandardizer` (HEPPO's
dynamic standardization of rewards, with an optional robust update) and
:func:`block_standardize` (HEPPO's block standardization of values). :mod:`sw.gae.quant`
describes how they feed the quantizers; it re-exports every name here.
"""

import math

import numpy as np

__all__ = ["DEFAULT_MIN_STD", "DEFAULT_UPDATE_CLIP", "REWARD_NORMS", "RunningMeanStd",
           "DynamicRewardStandardizer", "block_standardize"]

#: Floor of the standard deviations used to standardize (a constant stream has std 0).
DEFAULT_MIN_STD = 1e-8

#: Default ``update_clip`` of the running reward statistics
#: (:class:`DynamicRewardStandardizer`): rewards enter them winsorized at 50 running RMS from
#: the running mean.
DEFAULT_UPDATE_CLIP = 50.0

#: Reward normalizations: ``"center"`` (HEPPO: ``(r - mean) / std``) and ``"scale"``
#: (``r / rms``, no centring; for constant per-step rewards).
REWARD_NORMS = ("center", "scale")


# -- validation helpers ----------------------------------------------------------------------
def _finite_array(x, name, *, ndim=None):
    """``x`` as a float64 array; ``ValueError`` naming ``name`` if not numeric, finite, ndim."""
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an array of real numbers") from None
    if ndim is not None and a.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-D array, not shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be finite (no NaN or infinity)")
    return a


def _check_min_std(min_std):
    if (isinstance(min_std, bool) or not isinstance(min_std, (int, float))
            or not math.isfinite(min_std) or min_std <= 0):
        raise ValueError(f"min_std must be a positive finite number, not {min_std!r}")
    return float(min_std)


def _check_update_clip(k):
    if k is None:
        return None
    if (isinstance(k, bool) or not isinstance(k, (int, float, np.floating))
            or not math.isfinite(k) or k <= 0):
        raise ValueError(f"update_clip must be a positive finite number or None, not {k!r}")
    return float(k)


# -- running statistics ------------------------------------------------------------------------
class RunningMeanStd:
    """Running mean and (population) variance of a stream of numbers, in float64.

    Equivalent to HEPPO's per-element Welford recurrence (eqs. 6-9)::

        M_n = M_{n-1} + (x_n - M_{n-1}) / n
        S_n = S_{n-1} + (x_n - M_{n-1}) * (x_n - M_n)
        std_n = sqrt(S_n / n)

    but updated a batch at a time with the parallel merge of Chan, Golub and LeVeque (1979): the
    batch's own mean and sum of squared deviations (two passes, so a large common offset does not
    cancel catastrophically), merged into the running ``(n, M, S)``. The variance is the
    population variance ``S / n`` (``ddof=0``, eq. 9), 0 before any data.

    Members
    -------
    count : int
        Number of elements seen.
    mean, var, std : float
        Running statistics (0 when ``count == 0``).
    m2 : float
        ``S_n``, the sum of squared deviations from the mean.
    """

    def __init__(self):
        self._count = 0
        self._mean = 0.0
        self._m2 = 0.0

    @property
    def count(self) -> int:
        return self._count

    @property
    def mean(self) -> float:
        return self._mean

    @property
    def m2(self) -> float:
        return self._m2

    @property
    def var(self) -> float:
        return self._m2 / self._count if self._count else 0.0

    @property
    def std(self) -> float:
        return math.sqrt(self.var)

    def _merge(self, n, mean, m2):
        if n == 0:
            return
        total = self._count + n
        delta = mean - self._mean
        self._mean += delta * (n / total)
        self._m2 += m2 + delta * delta * (self._count * n / total)
        self._count = total

    def update(self, batch):
        """Add every element of ``batch`` (any shape, finite). Returns ``self``.

        Raises
        ------
        ValueError
            If ``batch`` is not numeric or holds NaN or infinity.
        """
        x = _finite_array(batch, "batch").ravel()
        if x.size:
            mean = float(x.mean())
            self._merge(int(x.size), mean, float(np.sum(np.square(x - mean))))
        return self

    def merge(self, other: "RunningMeanStd"):
        """Add the statistics of another :class:`RunningMeanStd` (e.g. another worker's)."""
        if not isinstance(other, RunningMeanStd):
            raise ValueError(f"other must be a RunningMeanStd, not {other!r}")
        self._merge(other.count, other.mean, other.m2)
        return self

    def state_dict(self) -> dict:
        """The state as plain Python numbers: ``{"count", "mean", "m2"}``."""
        return {"count": self._count, "mean": self._mean, "m2": self._m2}

    def load_state_dict(self, state: dict):
        """Restore a state saved by :meth:`state_dict`. Returns ``self``."""
        if not isinstance(state, dict) or set(state) != {"count", "mean", "m2"}:
            raise ValueError("state must be a dict with keys 'count', 'mean', 'm2', "
                             f"not {state!r}")
        count, mean, m2 = state["count"], state["mean"], state["m2"]
        if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 0:
            raise ValueError(f"state['count'] must be a non-negative integer, not {count!r}")
        if not (math.isfinite(mean) and math.isfinite(m2)) or m2 < 0:
            raise ValueError(f"state['mean'] and state['m2'] must be finite, m2 >= 0; "
                             f"got {mean!r}, {m2!r}")
        if count == 0 and (mean != 0 or m2 != 0):
            raise ValueError("state with count 0 must have mean 0 and m2 0")
        self._count, self._mean, self._m2 = int(count), float(mean), float(m2)
        return self

    @classmethod
    def from_state_dict(cls, state: dict) -> "RunningMeanStd":
        return cls().load_state_dict(state)

    def __repr__(self):
        return f"RunningMeanStd(count={self._count}, mean={self._mean!r}, std={self.std!r})"


class DynamicRewardStandardizer:
    """HEPPO dynamic standardization of rewards (section II-A).

    Each call updates the running statistics with the batch, then returns
    ``(rewards - mean) / max(std, min_std)`` with the statistics of every reward seen so far,
    this batch included. See the module docstring for what the mean subtraction implies.
    With ``norm="scale"`` it returns ``rewards / max(rms, min_std)`` instead, ``rms =
    sqrt(mean**2 + std**2)`` (no centring; the returned "mean" is 0 and "std" the RMS).

    Parameters
    ----------
    min_std : float
        Floor of the standard deviation (a stream of identical rewards has std 0; they then
        standardize to exactly 0).
    norm : str
        ``"center"`` (default, HEPPO) or ``"scale"`` (:data:`REWARD_NORMS`).
    update_clip : float or None
        Robust update (a deviation from HEPPO's plain Welford recurrence): the rewards of a batch
        enter the running statistics winsorized to ``mean +- update_clip * rms`` of the
        statistics *before* the batch, ``rms = sqrt(mean**2 + std**2)`` (they are standardized
        unclipped). One extreme reward (1e30) then adds at most ``update_clip**2 / count`` to
        the variance in units of ``rms**2`` (``update_clip`` = 50, 10,000 rewards seen: the std
        grows by 12 %), and later batches dilute it. The price: rewards rarer than about
        ``1 / update_clip**2`` of the stream, farther than ``update_clip`` RMS out, are
        under-counted (sparse rewards are usually far more frequent). Not applied while ``rms``
        is 0 (no nonzero reward seen yet): the first nonzero batch sets the scale, unclipped
        (:meth:`reset` starts again). None: the plain update. Default
        :data:`DEFAULT_UPDATE_CLIP`.

    Members
    -------
    stats : RunningMeanStd
        The running statistics (save them with ``stats.state_dict()``).
    clamped : int
        Rewards winsorized by the robust update so far.
    """

    def __init__(self, *, min_std=DEFAULT_MIN_STD, norm="center",
                 update_clip=DEFAULT_UPDATE_CLIP):
        self._min_std = _check_min_std(min_std)
        if norm not in REWARD_NORMS:
            raise ValueError(f"norm must be one of {', '.join(REWARD_NORMS)}, not {norm!r}")
        self._norm = norm
        self._update_clip = _check_update_clip(update_clip)
        self.stats = RunningMeanStd()
        self.clamped = 0

    @property
    def update_clip(self):
        return self._update_clip

    def reset(self):
        """Forget every reward seen (fresh running statistics)."""
        self.stats = RunningMeanStd()
        self.clamped = 0

    @property
    def min_std(self) -> float:
        return self._min_std

    @property
    def norm(self) -> str:
        return self._norm

    def standardize(self, rewards):
        """Standardize with the current statistics, without updating them.

        Returns ``(standardized, mean, std)``: ``std`` is the floored divisor actually used
        (the RMS for ``norm="scale"``, whose ``mean`` is 0: nothing is subtracted).
        """
        r = _finite_array(rewards, "rewards")
        if self._norm == "scale":
            rms = max(math.hypot(self.stats.mean, self.stats.std), self._min_std)
            return r / rms, 0.0, rms
        mean, std = self.stats.mean, max(self.stats.std, self._min_std)
        return (r - mean) / std, mean, std

    def __call__(self, rewards):
        """Update with ``rewards``, then standardize them. Returns ``(standardized, mean, std)``."""
        r = _finite_array(rewards, "rewards")
        k, stats = self._update_clip, self.stats
        rms = math.hypot(stats.mean, stats.std)
        if k is not None and rms > 0:
            lo, hi = stats.mean - k * rms, stats.mean + k * rms
            outside = int(np.count_nonzero((r < lo) | (r > hi)))
            if outside:
                self.clamped += outside
                stats.update(np.clip(r, lo, hi))
                return self.standardize(r)
        stats.update(r)
        return self.standardize(r)


def block_standardize(values, last_values, *, min_std=DEFAULT_MIN_STD):
    """HEPPO block standardization of one batch of values (section II-B).

    Parameters
    ----------
    values : array [T, N]
        Critic values of the batch.
    last_values : array [N]
        Bootstrap values ``V(s_T)``; part of the block, so they share its statistics.
    min_std : float
        Floor of the standard deviation.

    Returns
    -------
    (z_values, z_last, mean, std)
        Standardized arrays and the statistics (population std, floored) that undo it:
        ``values = z_values * std + mean``.
    """
    v = _finite_array(values, "values", ndim=2)
    last = _finite_array(last_values, "last_values", ndim=1)
    if last.shape != v.shape[1:]:
        raise ValueError(f"last_values must have shape ({v.shape[1]},), not {last.shape}")
    min_std = _check_min_std(min_std)
    stats = RunningMeanStd().update(v).update(last)
    mean, std = stats.mean, max(stats.std, min_std)
    return (v - mean) / std, (last - mean) / std, mean, std
