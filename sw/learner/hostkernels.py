"""Compiled packing of the learner's step inputs (numba): module-level functions, so that
numba's on-disk cache keeps them from process to process (:mod:`sw.jit`). Imported only through
:func:`sw.jit.built`, when numba is installed; :mod:`sw.learner.hostfast` calls them and holds
their contract (the bytes of the numpy code).
"""

import numpy as np

from sw.fixedkernels import rnd
from sw.jit import kernel

__all__ = ["KERNELS"]

#: The kernels :mod:`sw.learner.hostfast` calls.
KERNELS = ("matrix", "samples", "put", "dqn")


@kernel
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


@kernel
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


@kernel
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


@kernel
def quantized(x, sl, G, lb, scale, mode, lo, hi, raw, words):
    """:func:`dqn`'s observations ``x`` ``[B, n_in]``: rounded by ``mode`` at ``scale``
    into ``raw``, packed as :func:`matrix` does (``S = 1 << sl``); False at a value
    outside ``lo..hi`` or not finite."""
    B, n_in = x.shape
    S = 1 << sl
    nb = lb >> 3 if lb & 7 == 0 else 0      # whole-byte lanes: plain stores
    for i in range(B):
        rg, ln = (i >> sl) * G, (i & (S - 1)) << sl
        for j in range(n_in):
            v = np.float64(x[i, j])
            if not abs(v) < 2.0 ** 960:
                return False
            r = rnd(v * scale, mode)
            if r < lo or r > hi:
                return False
            q = np.int64(r)
            raw[i, j] = q
            w, lane = rg + (j >> sl), ln + (j & (S - 1))
            if nb:
                for b in range(nb):
                    words[w, lane * nb + b] = np.uint8((q >> (8 * b)) & 0xFF)
            else:
                put(words, w, lane * lb, q, lb)
    return True


@kernel
def dqn(obs, nxt, act, rew, done, wt, weighted, sl, G, lbm, w, ab, lbs, n_out,
        ascale, amode, alo, ahi, wscale, wmode, wlo, whi, wone,
        obs_raw, nxt_raw, rew_raw, act_out, done_out, wt_raw, obs_w, nxt_w, s_w):
    """One DQN batch of the caller's arrays, checked, quantized and packed in one pass:
    the raw arrays of :meth:`LearnerDriver.prepare` and the images of :func:`batch_images`
    (zeroed). False at anything the numpy code refuses or warns about (a value outside
    the act format, an action outside 0..n_out-1, a done not 0/1, a weight outside
    [0, 1], NaN or infinity)."""
    # S = 2 ** sl (config.log_array): shifts and masks, as 64-bit divisions cost more
    # than the rest of the loop
    B, S = obs.shape[0], 1 << sl
    if not (quantized(obs, sl, G, lbm, ascale, amode, alo, ahi, obs_raw, obs_w)
            and quantized(nxt, sl, G, lbm, ascale, amode, alo, ahi, nxt_raw, nxt_w)):
        return False
    for i in range(B):
        a = np.int64(act[i])
        d = np.float64(done[i])
        v = np.float64(rew[i])
        if a < 0 or a >= n_out or not (d == 0.0 or d == 1.0) or not abs(v) < 2.0 ** 960:
            return False
        r = rnd(v * ascale, amode)
        if r < alo or r > ahi:
            return False
        q = np.int64(r)
        wq = wone
        if weighted:
            x = np.float64(wt[i])
            if not (x >= 0.0 and x <= 1.0):
                return False
            wq = np.int64(min(max(rnd(x * wscale, wmode), wlo), whi))   # saturated
            wt_raw[i] = wq
        rew_raw[i] = q
        act_out[i] = a
        done_out[i] = d == 1.0
        lane = ((q & ((np.int64(1) << w) - 1)) | a << w
                | np.int64(1 if d == 1.0 else 0) << (w + ab) | wq << (w + ab + 1))
        put(s_w, i >> sl, (i & (S - 1)) * lbs, lane, lbs)
    return True
