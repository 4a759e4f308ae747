"""Compiled host kernels of the GAE driver and stream (numba): module-level functions, so that
numba's on-disk cache keeps them from process to process (:mod:`sw.jit`). Imported only through
:func:`sw.jit.built`, when numba is installed: :mod:`sw.gae.hostfast` (the batch path) and
:mod:`sw.gae.streamfast` (a stream's push) call them and hold their bit-exactness contract.

The stream's kernels call the batch kernels' rounding clip and pairwise sums, so both live in
this file: numba notices a change of a kernel's own file only (:mod:`sw.jit`).
"""

import numpy as np

from sw.jit import kernel

__all__ = ["BATCH", "STREAM"]

#: The kernels of :mod:`sw.gae.hostfast` (the batch path) and of :mod:`sw.gae.streamfast`.
BATCH = ("pack", "decode", "input_stats", "quantize", "deq_stats", "matched_targets",
         "matched_codes", "mean_std", "lookup", "decode_rows", "pack8", "clip", "pairwise",
         "pairwise_sq")
STREAM = ("push_row", "push_step", "row_stats")


# The batch path (sw.gae.hostfast)


@kernel
def clip(x, q):
    """``np.clip(x, -q, q)`` of a finite float (compares: they vectorize, min/max less)."""
    y = x if x > -q else -q  # noqa: FURB136
    return y if y < q else q  # noqa: FURB136


@kernel
def input_stats(r, v, last, d, gamma):
    """Finiteness, max |input|, max |TD error|, (min, max) of rewards and of values.
    Per-trajectory accumulators (min and max do not depend on the order)."""
    T, M = r.shape
    nan = np.zeros(M)
    big, dmax = np.abs(last), np.zeros(M)
    rlo, rhi = np.full(M, np.inf), np.full(M, -np.inf)
    vlo, vhi = last.copy(), last.copy()
    for t in range(T):
        for j in range(M):
            x, y = np.float64(r[t, j]), np.float64(v[t, j])     # float32 too: exact
            vn = np.float64(v[t + 1, j]) if t + 1 < T else last[j]
            nan[j] += x * 0.0 + y * 0.0            # NaN once any element is not finite
            nd = 0.0 if d[t, j] else 1.0
            ax, ay, ad = abs(x), abs(y), abs(x + gamma * vn * nd - y)
            big[j] = max(big[j], max(ax, ay))
            dmax[j] = max(dmax[j], ad)
            rlo[j], rhi[j] = min(rlo[j], x), max(rhi[j], x)
            vlo[j], vhi[j] = min(vlo[j], y), max(vhi[j], y)
    ok = np.isfinite(last).all() and (nan == 0.0).all()
    return ok, big.max(), dmax.max(), rlo.min(), rhi.max(), vlo.min(), vhi.max()


@kernel
def quantize(r, v, last, u, ro, rs, vo, vs, q, rc, vc, vall):
    """Value and bootstrap codes into ``vc`` [T+1, M], the scaled values into ``vall``,
    and (if ``rc`` has rows) nearest reward codes. One loop nest per stream, time in a
    forward range: either is several times faster in numba."""
    T, M = r.shape
    for t in range(T + 1):
        for j in range(M):
            x = (np.float64(v[t, j]) if t < T else last[j]) * u
            vall[t, j] = x
            vc[t, j] = clip(np.rint(clip((x - vo) / vs, q) / 1.0), q)
    for t in range(rc.shape[0]):
        for j in range(M):
            rc[t, j] = clip(np.rint(clip((r[t, j] * u - ro) / rs, q) / 1.0), q)


@kernel
def matched_targets(r, u, vall, vc, vs, vo, d, gamma, gh, target):
    """The reward targets of matched rounding (:func:`sw.gae.batch._matched_rewards`) into
    ``target``; their (min, max)."""
    T, M = r.shape
    lo, hi = np.full(M, np.inf), np.full(M, -np.inf)    # per column: the loop vectorizes
    for t in range(T):
        for j in range(M):
            nd = 0.0 if d[t, j] else 1.0
            e = (vc[t, j] * vs + vo) - vall[t, j]
            n = gh * (vc[t + 1, j] * vs + vo) - gamma * vall[t + 1, j]
            x = (r[t, j] * u + e) - n * nd
            target[t, j] = x
            lo[j] = x if x < lo[j] else lo[j]
            hi[j] = x if x > hi[j] else hi[j]
    return lo.min(), hi.max()


@kernel
def matched_codes(target, d, ro, rs, glh, q, rc, carry):
    """Reward codes of matched rounding: from t = T-1 down to 0, ``w = (target - ro) / rs
    + glh (1 - d) carry``, ``c = clip(rint(w))``, ``carry = w - c``."""
    T, M = target.shape
    carry[:] = 0.0
    for k in range(T):
        t = T - 1 - k
        for j in range(M):
            rho = glh * (0.0 if d[t, j] else 1.0)
            w = (target[t, j] - ro) / rs + rho * carry[j]
            c = clip(np.rint(w), q)
            carry[j] = w - c
            rc[t, j] = c


@kernel
def deq_stats(rc, vc, boot, d, rs, ro, vs, vo, g, delta, seg):
    """TD errors of the dequantized codes into ``delta``; their max magnitude, the
    dequantized values' (min, max) and the longest episode stretch."""
    T, M = rc.shape
    dmax = np.zeros(M)
    vlo, vhi = np.full(M, np.inf), np.full(M, -np.inf)
    longest = np.zeros(M, np.int64)
    seg[:] = 0
    for t in range(T):
        vn = vc[t + 1] if t + 1 < T else boot
        for j in range(M):
            vh = vc[t, j] * vs + vo
            nd = 0.0 if d[t, j] else 1.0
            x = rc[t, j] * rs + ro + g * (vn[j] * vs + vo) * nd - vh
            delta[t, j] = x
            dmax[j] = max(dmax[j], abs(x))
            vlo[j], vhi[j] = min(vlo[j], vh), max(vhi[j], vh)
            seg[j] += 1
            if d[t, j] or t == T - 1:
                longest[j] = max(longest[j], seg[j])
                seg[j] = 0
    for j in range(M):
        vh = boot[j] * vs + vo
        vlo[j], vhi[j] = min(vlo[j], vh), max(vhi[j], vh)
    return dmax.max(), vlo.min(), vhi.max(), longest.max()


@kernel
def lookup(raw, table, lo, out):
    """``out = table[raw + lo]``; False (``out`` incomplete) at an index outside it."""
    T, M = raw.shape
    n = table.size
    for t in range(T):
        for j in range(M):
            i = raw[t, j] + lo
            if i < 0 or i >= n:
                return False
            out[t, j] = table[i]
    return True


@kernel
def decode(words, n, lane_bytes, T, M, table, lo, out, vals, ret):
    """``out[t, j] = table[code + lo]`` of the signed little-endian lanes of ``words``;
    if ``ret`` has rows also ``ret[t, j] = table[code + lo] + vals[t, j]`` (the same
    float64 sum as numpy's ``out + vals``, rounded once to ``ret``'s dtype)."""
    G = (M + n - 1) // n
    both = ret.shape[0] > 0
    for t in range(T):
        for g in range(G):
            w, j0 = t * G + g, g * n
            m = min(n, M - j0)
            for p in range(m):
                if lane_bytes == 1:
                    c = np.int64(np.int8(words[w, p]))
                else:
                    c = np.int64(np.int16(words[w, 2 * p]
                                          | (np.uint16(words[w, 2 * p + 1]) << 8)))
                x = table[c + lo]
                out[t, j0 + p] = x
                if both:
                    ret[t, j0 + p] = x + vals[t, j0 + p]


@kernel
def decode_rows(codes, table, lo, out, vals, ret):
    """:func:`decode` when every word holds ``n`` whole results (M a multiple of ``n``):
    ``codes`` ``[W, n]`` (the words' signed lanes, a strided view), ``out`` (and
    ``vals``, ``ret`` if ``ret`` has rows) ``[T, M]`` C-contiguous, so ``[W, n]``
    row-major; one gather, 1.5x faster than the per-word loop."""
    W, n = codes.shape
    o = out.reshape(W, n)
    if ret.shape[0] > 0:
        v, r = vals.reshape(W, n), ret.reshape(W, n)
        for w in range(W):
            for p in range(n):
                x = table[codes[w, p] + lo]
                o[w, p] = x
                r[w, p] = x + v[w, p]
    else:
        for w in range(W):
            for p in range(n):
                o[w, p] = table[codes[w, p] + lo]


@kernel
def pack(rc, vc, boot, d, n, lane_bytes, lo, hi, rimg, vimg, dimg):
    """The images of :func:`sw.gae.layout.pack_rows` (zeroed by the caller) of reward
    codes, value codes with the bootstrap row, dones; False at a code outside lo..hi."""
    T, M = rc.shape
    G = (M + n - 1) // n
    for t in range(T + 1):
        for g in range(G):
            w, j0 = t * G + g, g * n
            for p in range(min(n, M - j0)):
                x = np.int64(vc[t, j0 + p] if t < T else boot[j0 + p])
                y = np.int64(rc[t, j0 + p] if t < T else 0)
                if x < lo or x > hi or y < lo or y > hi:
                    return False
                if lane_bytes == 1:
                    vimg[w, p] = x & 0xFF
                    if t < T:
                        rimg[w, p] = y & 0xFF
                else:
                    vimg[w, 2 * p], vimg[w, 2 * p + 1] = x & 0xFF, (x >> 8) & 0xFF
                    if t < T:
                        rimg[w, 2 * p], rimg[w, 2 * p + 1] = y & 0xFF, (y >> 8) & 0xFF
                if t < T and d[t, j0 + p]:
                    dimg[w, p >> 3] |= np.uint8(1 << (p & 7))
    return True


@kernel
def pack8(rc, vc, boot, d, n, rimg, vimg, dimg):
    """:func:`pack` of int8 codes into 8-bit lanes when every word holds ``n`` whole
    results (M and ``n`` multiples of 8, words of whole 8-byte pieces): eight lanes or
    eight dones at a time as one 64-bit word (no range check: an int8 is a code). Writes
    every payload byte (and the dones' word's first 8 bytes), so the images' padding is
    left as it was."""
    T, M = rc.shape
    G, k8 = M // n, n // 8
    r64, v64, b64 = rc.view(np.uint64), vc.view(np.uint64), boot.view(np.uint64)
    d64 = d.view(np.uint64)                  # 8 bools (bytes 0 or 1) per word
    ri, vi, di = rimg.view(np.uint64), vimg.view(np.uint64), dimg.view(np.uint64)
    spread = np.uint64(0x0102040810204080)   # byte q (0 or 1) -> bit 56 + q
    for t in range(T):
        for g in range(G):
            w, k0 = t * G + g, g * k8
            for k in range(k8):
                ri[w, k] = r64[t, k0 + k]
                vi[w, k] = v64[t, k0 + k]
            for k0d in range(0, k8, 8):       # 64 dones per 64-bit word of the image
                x = np.uint64(0)
                for k in range(k0d, min(k8, k0d + 8)):
                    b = (d64[t, k0 + k] * spread) >> np.uint64(56)
                    x |= b << np.uint64(8 * (k - k0d))
                di[w, k0d // 8] = x
    for g in range(G):
        for k in range(k8):
            vi[T * G + g, k] = b64[g * k8 + k]


@kernel
def pairwise(a, lo, n):
    """numpy's pairwise sum of ``a[lo:lo + n]`` (``pairwise_sum`` of its float add
    reduction: blocks of up to 128 in 8 accumulators, halves above): the same float."""
    if n <= 128:
        return _block_sum(a, lo, n)
    return _halves_sum(a, lo, n, 0.0, False)


@kernel
def pairwise_sq(a, lo, n, m):
    """:func:`pairwise` of ``(a[i] - m) ** 2`` (numpy's ``std`` squares the deviations
    into a buffer and sums it so): the same float, with no buffer."""
    if n <= 128:
        return _block_sum_sq(a, lo, n, m)
    return _halves_sum(a, lo, n, m, True)


@kernel
def _halves_sum(a, lo, n, m, sq):
    """:func:`pairwise` (:func:`pairwise_sq` if ``sq``) of more than 128 elements: numpy's
    recursion (the sum of the halves' sums, the first half's length ``n // 2`` rounded down
    to a multiple of 8, down to blocks of up to 128) as a loop over a stack of ranges, since a
    recursive kernel crashes when numba loads it from its cache. A range of length -1 stands
    for "add the last two sums"; each split pushes it under the second half and the first
    half, so the first half is summed first and every sum is numpy's."""
    los, ns = np.empty(128, np.int64), np.empty(128, np.int64)    # depth < 64 at n < 2**62
    sums = np.empty(128)
    los[0], ns[0] = lo, n
    sp, vp = 1, 0
    while sp > 0:
        sp -= 1
        lo, n = los[sp], ns[sp]
        if n < 0:
            vp -= 1
            sums[vp - 1] = sums[vp - 1] + sums[vp]
        elif n <= 128:
            sums[vp] = _block_sum_sq(a, lo, n, m) if sq else _block_sum(a, lo, n)
            vp += 1
        else:
            n2 = n // 2
            n2 -= n2 % 8
            los[sp], ns[sp] = lo, -1
            los[sp + 1], ns[sp + 1] = lo + n2, n - n2
            los[sp + 2], ns[sp + 2] = lo, n2
            sp += 3
    return sums[0]


@kernel
def _block_sum(a, lo, n):
    """numpy's sum of a block of ``n <= 128`` elements ``a[lo:lo + n]``: 8 accumulators
    (one sum in order below 8 elements)."""
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    i = 8
    while i < n - n % 8:
        k = lo + i
        r0, r1, r2, r3 = r0 + a[k], r1 + a[k + 1], r2 + a[k + 2], r3 + a[k + 3]
        r4, r5, r6, r7 = r4 + a[k + 4], r5 + a[k + 5], r6 + a[k + 6], r7 + a[k + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[lo + i]
        i += 1
    return res


@kernel
def _block_sum_sq(a, lo, n, m):
    """:func:`_block_sum` of ``(a[i] - m) ** 2``."""
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            y = a[i] - m
            res += y * y
        return res
    y0, y1, y2, y3 = a[lo] - m, a[lo + 1] - m, a[lo + 2] - m, a[lo + 3] - m
    y4, y5, y6, y7 = a[lo + 4] - m, a[lo + 5] - m, a[lo + 6] - m, a[lo + 7] - m
    r0, r1, r2, r3 = y0 * y0, y1 * y1, y2 * y2, y3 * y3
    r4, r5, r6, r7 = y4 * y4, y5 * y5, y6 * y6, y7 * y7
    i = 8
    while i < n - n % 8:
        k = lo + i
        y0, y1, y2, y3 = a[k] - m, a[k + 1] - m, a[k + 2] - m, a[k + 3] - m
        y4, y5, y6, y7 = a[k + 4] - m, a[k + 5] - m, a[k + 6] - m, a[k + 7] - m
        r0, r1, r2, r3 = r0 + y0 * y0, r1 + y1 * y1, r2 + y2 * y2, r3 + y3 * y3
        r4, r5, r6, r7 = r4 + y4 * y4, r5 + y5 * y5, r6 + y6 * y6, r7 + y7 * y7
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        y = a[lo + i] - m
        res += y * y
        i += 1
    return res


@kernel
def mean_std(a):
    """numpy's ``a.mean()`` and ``a.std()`` of a flat float64 array, bit for bit."""
    n = a.size
    mean = (0.0 + pairwise(a, 0, n)) / n
    return mean, np.sqrt((0.0 + pairwise_sq(a, 0, n, mean)) / n)


# A stream's push (sw.gae.streamfast)


@kernel
def push_row(x, v, d, u, ro, rs, vo, vs, q, feedback, carry, rc, vc, dc, rh, vh, n,
             lane_bytes, rimg, vimg, dimg):
    """One stream step: reward codes ``clip(rint((x u - ro) / rs))`` (error feedback
    forward in time through ``carry``, or nearest), value codes, the dequantized rows
    ``rh``, ``vh``, the three row images; the clipped counts."""
    M = x.size
    cr = cv = 0
    for j in range(M):
        y = (x[j] * u - ro) / rs
        if abs(y) > q + 0.5:
            cr += 1
        if feedback:
            a = clip(y, q) + carry[j]
            c = clip(np.rint(a), q)
            carry[j] = a - c
        else:
            c = clip(np.rint(y), q)
        y = (v[j] * u - vo) / vs
        if abs(y) > q + 0.5:
            cv += 1
        cw = clip(np.rint(y), q)
        rc[j], vc[j], dc[j] = c, cw, d[j]
        rh[j], vh[j] = c * rs + ro, cw * vs + vo
        w, p = j // n, j % n
        ci, wi = np.int64(c), np.int64(cw)
        for b in range(lane_bytes):
            rimg[w, p * lane_bytes + b] = (ci >> (8 * b)) & 0xFF
            vimg[w, p * lane_bytes + b] = (wi >> (8 * b)) & 0xFF
        if d[j]:
            dimg[w, p >> 3] |= np.uint8(1 << (p & 7))
    return cr, cv


@kernel
def row_stats(r, v, pr, pv, pd, g, prev, delta):
    """(min, max) of ``r`` (if given) and ``v``, the pairwise sum of ``v``, and with a
    previous step the TD errors ``pr + g v (1 - pd) - pv`` into ``delta``, their pairwise
    sum and max magnitude."""
    M = v.size
    rlo, rhi = np.inf, -np.inf
    for j in range(r.size):
        rlo, rhi = min(rlo, r[j]), max(rhi, r[j])
    vlo, vhi = np.inf, -np.inf
    for j in range(M):
        vlo, vhi = min(vlo, v[j]), max(vhi, v[j])
    dmax = 0.0
    if prev:
        for j in range(M):
            nd = 0.0 if pd[j] else 1.0
            delta[j] = pr[j] + g * v[j] * nd - pv[j]
            dmax = max(dmax, abs(delta[j]))
    return (rlo, rhi, vlo, vhi, 0.0 + pairwise(v, 0, M),
            0.0 + pairwise(delta, 0, M) if prev else 0.0, dmax)


@kernel
def merge(st, i, x, xsum):
    """:class:`sw.gae.stream._Moments` ``add`` of ``x`` (``xsum``: its pairwise sum) into
    ``st[i:i + 3]`` = (count, mean, sum of squared deviations): the same floats."""
    n = x.size
    m = xsum / n
    n0 = st[i]
    total = n0 + n
    dd = m - st[i + 1]
    st[i + 2] += (0.0 + pairwise_sq(x, 0, n, m)) + dd * dd * (n0 * n / total)
    st[i + 1] += dd * (n / total)
    st[i] = total


@kernel
def push_step(x, r, v, d, u, ro, rs, vo, vs, q, feedback, gamma, g, carry, rc, vc, dc,
              n, lane_bytes, rimg, vimg, dimg, prev, prev_d, seg, st, rh, vh, delta):
    """One stream step in one pass (``GaeStream._push_fast``): the raw statistics of
    ``r``, ``v`` (the next stream's reference), :func:`push_row` (codes, images, the
    dequantized rows ``rh``, ``vh``), their statistics (the result scale), the episode
    stretches; the previous step's rows in ``prev`` ``[4, M]`` (raw r, raw v, r hat,
    v hat) and ``prev_d``. ``st``: the stream's scalars (:data:`STREAM_STATE`). Returns the
    clipped counts."""
    M = v.size
    has_prev = st[0] != 0.0
    # the raw batch (GaeStream._raw_stats; its TD errors go to ``delta``, overwritten below)
    rlo, rhi, vlo, vhi, vsum, _, dmax = row_stats(r, v, prev[0], prev[1], prev_d, gamma,
                                                  has_prev, delta)
    merge(st, 1, v, vsum)
    st[4], st[5] = min(st[4], rlo), max(st[5], rhi)
    st[6], st[7] = min(st[6], vlo), max(st[7], vhi)
    if has_prev:
        st[8] = max(st[8], dmax)
    cr, cv = push_row(x, v, d, u, ro, rs, vo, vs, q, feedback, carry, rc, vc, dc, rh, vh,
                      n, lane_bytes, rimg, vimg, dimg)
    # the dequantized batch (GaeStream._result_stats)
    _, _, hlo, hhi, hsum, dsum, dmax = row_stats(vh[:0], vh, prev[2], prev[3], prev_d, g,
                                                 has_prev, delta)
    st[9] += hsum
    st[10], st[11] = min(st[10], hlo), max(st[11], hhi)
    if has_prev:
        merge(st, 12, delta, dsum)
        st[15] = max(st[15], dmax)
    longest = 0
    for j in range(M):
        seg[j] += 1
        if d[j]:
            longest = max(longest, seg[j])
            seg[j] = 0
    st[16] = max(st[16], longest)
    for j in range(M):
        prev[0, j], prev[1, j], prev[2, j], prev[3, j] = r[j], v[j], rh[j], vh[j]
        prev_d[j] = d[j]
    st[0] = 1.0
    return cr, cv
