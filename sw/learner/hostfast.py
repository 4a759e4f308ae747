"""Compiled packing of the learner's step inputs (issue #12): the images of
:func:`~sw.learner.layout.pack_matrix` and :func:`~sw.learner.layout.pack_samples` in one
pass each, without the padding, transposes and lane arrays of the numpy code.

:meth:`LearnerDriver.load_batch <sw.learner.driver.LearnerDriver.load_batch>` calls
:func:`batch_images` when numba is installed; the bytes are the same
(``tb/learner/test_host_fast.py`` compares them with the numpy code). A value the numpy code
would refuse makes :func:`batch_images` return None, and the numpy code then raises its error.
The kernels are compiled on first use and cached on disk (``cache=True``).
"""

import numpy as np

from .layout import region, word_bytes

__all__ = ["available", "batch_images"]

_K = []


def _build():
    try:
        import numba
    except ImportError:                       # a board image without numba: numpy code
        return None
    jit = numba.njit(cache=True, nogil=True)

    @jit
    def put(words, w, bit, v, lb):
        """The low ``lb`` bits of ``v`` (two's complement) at bit ``bit`` of word ``w``
        (zeroed there): a byte at a time, bit by bit past 56 bits."""
        sh = bit & 7
        if sh + lb <= 63:
            x = (v & ((np.int64(1) << lb) - 1)) << sh
            k = bit >> 3
            for i in range((sh + lb + 7) >> 3):
                words[w, k + i] |= np.uint8((x >> (8 * i)) & 0xFF)
            return
        for b in range(lb):
            if (v >> b) & 1:
                k = bit + b
                words[w, k >> 3] |= np.uint8(1 << (k & 7))

    @jit
    def matrix(x, S, G, lb, lo, hi, words):
        """Element (i, j) of ``x`` as lane ``(i % S) S + j % S`` of word
        ``(i // S) G + j // S`` of ``words`` (zeroed); False at a value outside lo..hi."""
        n, cols = x.shape
        for i in range(n):
            for j in range(cols):
                v = np.int64(x[i, j])
                if v < lo or v > hi:
                    return False
                put(words, (i // S) * G + j // S, ((i % S) * S + j % S) * lb, v, lb)
        return True

    @jit
    def samples(a, r, d, wt, S, w, ab, lb, n_out, rlo, rhi, wlo, whi, words):
        """Lane ``b`` = reward | action << w | done << (w + ab) | weight << (w + ab + 1) of
        word ``b // S``; False at a value the numpy code refuses."""
        for b in range(a.shape[0]):
            act, rew, wgt = np.int64(a[b]), np.int64(r[b]), np.int64(wt[b])
            if act < 0 or act >= n_out or rew < rlo or rew > rhi or wgt < wlo or wgt > whi:
                return False
            lane = ((rew & ((np.int64(1) << w) - 1)) | act << w
                    | np.int64(1 if d[b] else 0) << (w + ab) | wgt << (w + ab + 1))
            put(words, b // S, (b % S) * lb, lane, lb)
        return True

    return {"matrix": matrix, "samples": samples, "put": put}


def _kernels():
    if not _K:
        _K.append(_build())
    return _K[0]


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
    lo, hi = (-(1 << (lb - 1)), (1 << (lb - 1)) - 1) if r.signed else (0, (1 << lb) - 1)
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
