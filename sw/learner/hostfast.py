"""Compiled packing of the learner's step inputs: the images of
:func:`~sw.learner.layout.pack_matrix` and :func:`~sw.learner.layout.pack_samples` in one
pass each, without the padding, transposes and lane arrays of the numpy code.

:meth:`LearnerDriver.load_batch <sw.learner.driver.LearnerDriver.load_batch>` calls
:func:`batch_images` when numba is installed; the bytes are the same
(``tb/learner/test_host_fast.py`` compares them with the numpy code). A value the numpy code
would refuse makes :func:`batch_images` return None, and the numpy code then raises its error.
The kernels are module-level functions of :mod:`sw.learner.hostkernels`, compiled on first use
and cached on disk (``cache=True``: a new process loads them, :mod:`sw.jit`).
"""

import numpy as np

from sw.jit import MODES, built

from .layout import region, word_bytes

__all__ = ["available", "batch_images", "dqn_params", "dqn_batch"]

_K = []


def _load():
    """The kernels (:mod:`sw.learner.hostkernels`) as a dict, by name."""
    from . import hostkernels
    return {name: getattr(hostkernels, name) for name in hostkernels.KERNELS}


def _kernels():
    """The kernels (a dict), loaded on first use, or None without numba."""
    return built(_K, _load)


def available() -> bool:
    """Whether the compiled kernels can be used (numba installed)."""
    return _kernels() is not None


def _matrix(config, name, x):
    r = region(config, name)
    n = x.shape[0]
    if x.ndim != 2 or x.dtype.kind not in "iu" or x.shape[1] != r.cols \
            or not 1 <= n <= r.rows:
        return None
    lb = r.lane_bits
    lo, hi = r.lane_range
    G = r.col_groups(config)
    words = np.zeros((config.groups(n) * G, word_bytes(config, name)), np.uint8)
    return words if _kernels()["matrix"](x, config.array, G, lb, lo, hi, words) else None


def _samples(config, batch):
    r = region(config, "samples")
    num = config.numerics
    a, rw, d = batch.actions, batch.rewards, batch.dones
    B = a.shape[0]
    wfmt = num.loss_weight_format
    wt = (np.full(B, 1 << wfmt.frac, np.int64) if batch.loss_weights is None
          else batch.loss_weights)
    if not (1 <= B <= r.rows and all(isinstance(v, np.ndarray) and v.shape == (B,)
                                     for v in (rw, d, wt))
            and all(v.dtype.kind in "iu" for v in (a, rw, wt)) and d.dtype == np.bool_):
        return None
    act = num.act_format
    words = np.zeros((config.groups(B), word_bytes(config, "samples")), np.uint8)
    ok = _kernels()["samples"](a, rw, d, wt, config.array, config.width, config.action_bits,
                               r.lane_bits, config.n_out, act.min_raw, act.max_raw,
                               wfmt.min_raw, wfmt.max_raw, words)
    return words if ok else None


def batch_images(config, batch):
    """``{region: uint8 array}``: the input images of a prepared
    :class:`~sw.learner.batch.LearnerBatch` (``obs``, then ``next_obs`` and ``samples`` for
    DQN or ``targets`` for MSE), the bytes of :meth:`LearnerDriver._images
    <sw.learner.driver.LearnerDriver._images>`; None without numba or for a batch the numpy
    code refuses (it then raises)."""
    if not available() or not isinstance(batch.obs, np.ndarray):
        return None
    out = {"obs": _matrix(config, "obs", batch.obs)}
    if config.loss == "mse":
        out["targets"] = (_matrix(config, "targets", batch.targets)
                          if isinstance(batch.targets, np.ndarray) else None)
    else:
        out["next_obs"] = (_matrix(config, "next_obs", batch.next_obs)
                           if isinstance(batch.next_obs, np.ndarray) else None)
        out["samples"] = (_samples(config, batch)
                          if isinstance(batch.actions, np.ndarray) else None)
    return None if any(v is None for v in out.values()) else out


#: dtypes :func:`dqn_batch` takes the caller's arrays in (one compiled signature each).
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_INTS = (np.dtype(np.int64), np.dtype(np.int32))


def _array(x, shape, dtypes):
    return (type(x) is np.ndarray and x.shape == shape and x.dtype in dtypes
            and x.flags.c_contiguous)


def dqn_params(config) -> tuple:
    """What :func:`dqn_batch` needs of a DQN configuration, computed once per driver; None
    where it does not apply (no numba, an MSE learner, formats wider than 53 bits)."""
    if _kernels() is None or config.loss != "dqn":
        return None
    num = config.numerics
    act, wfmt = num.act_format, num.loss_weight_format
    m, smp = region(config, "obs"), region(config, "samples")
    lane_lo, lane_hi = m.lane_range
    if (act.width > 53 or wfmt.width > 53 or 1 << wfmt.frac > wfmt.max_raw
            or region(config, "next_obs").lane_bits != m.lane_bits):
        return None
    return (config.log_array, m.col_groups(config), m.lane_bits, config.width, config.action_bits,
            smp.lane_bits, config.n_out, 2.0 ** act.frac, MODES.index(act.rounding),
            float(max(act.min_raw, lane_lo)), float(min(act.max_raw, lane_hi)),
            2.0 ** wfmt.frac, MODES.index(wfmt.rounding), float(wfmt.min_raw),
            float(wfmt.max_raw), 1 << wfmt.frac, word_bytes(config, "obs"),
            word_bytes(config, "samples"))


def dqn_batch(config, params, obs, actions, rewards, next_obs, dones, loss_weights):
    """``(raw, images)`` of a DQN batch in one compiled pass, or None (numba missing, other
    dtypes or shapes, or anything the numpy code refuses or warns about: it then runs).

    ``raw``: ``obs``, ``next_obs`` ``[B, n_in]``, ``rewards``, ``actions`` (int64),
    ``dones`` (bool) and ``loss_weights`` (int64 or None), as
    :meth:`~sw.learner.driver.LearnerDriver.prepare` makes them; ``images``: the bytes of
    :func:`batch_images`. ``params`` from :func:`dqn_params`. Takes float32/float64
    observations, rewards and weights, int32/int64 actions and bool dones."""
    if params is None or _kernels() is None or type(obs) is not np.ndarray or obs.ndim != 2:
        return None
    B, n_in = obs.shape
    if not (1 <= B <= config.max_batch and n_in == config.sizes[0]
            and _array(obs, (B, n_in), _FLOATS) and _array(next_obs, (B, n_in), _FLOATS)
            and _array(actions, (B,), _INTS) and _array(rewards, (B,), _FLOATS)
            and _array(dones, (B,), (np.dtype(np.bool_),))
            and (loss_weights is None or _array(loss_weights, (B,), _FLOATS))):
        return None
    (sl, G, lbm, w, ab, lbs, n_out, ascale, amode, alo, ahi, wscale, wmode, wlo, whi, wone,
     mbytes, sbytes) = params
    raw = {"obs": np.empty((B, n_in), np.int64), "next_obs": np.empty((B, n_in), np.int64),
           "rewards": np.empty(B, np.int64), "actions": np.empty(B, np.int64),
           "dones": np.empty(B, np.bool_),
           "loss_weights": None if loss_weights is None else np.empty(B, np.int64)}
    rows = config.groups(B)
    images = {"obs": np.zeros((rows * G, mbytes), np.uint8),
              "next_obs": np.zeros((rows * G, mbytes), np.uint8),
              "samples": np.zeros((rows, sbytes), np.uint8)}
    weighted = loss_weights is not None
    ok = _K[0]["dqn"](obs, next_obs, actions, rewards, dones,
                      loss_weights if weighted else rewards, weighted, sl, G, lbm, w, ab, lbs,
                      n_out, ascale, amode, alo, ahi, wscale, wmode, wlo, whi, wone,
                      raw["obs"], raw["next_obs"], raw["rewards"], raw["actions"],
                      raw["dones"], raw["loss_weights"] if weighted else raw["actions"],
                      images["obs"], images["next_obs"], images["samples"])
    return (raw, images) if ok else None
