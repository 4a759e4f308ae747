"""Compiled host kernels of the GAE driver: the batch path in a few passes (issue #12).

:class:`~sw.gae.driver.GaeDriver` and :class:`~sw.gae.stream.GaeStream` call these instead of
the numpy code of :mod:`sw.gae.batch`, :mod:`sw.gae.layout` and the driver's de-quantization
when numba is installed; the results are the same bit for bit (``tb/gae/test_host_fast.py``
compares them with that code): every element goes through the same IEEE operations in the same
order (no fast-math), and every sum that numpy computes pairwise is either still computed by
numpy, on a buffer that holds exactly the array numpy would have summed, or by the kernels'
copy of numpy's pairwise summation (``pairwise``; ``test_sums_same_as_numpy``).

The kernels are compiled on first use and cached on disk (``cache=True``); each has one or two
signatures (float64 inputs, int8 or int16 codes).

Work arrays that do not leave a call (float64 copies of float32 inputs, the matched rounding's
targets, the TD errors of the result statistics, the memory images before they are written)
are this thread's and reused from call to call (:func:`_scratch`): a fresh array of a batch's
size is a fresh mapping whose first touch costs a page fault per 4 KB, about as much as the
kernel that fills it. What a call returns is always a new array.
"""

import threading

import numpy as np

from sw.jit import built

__all__ = ["available", "caller_units", "decode_results", "pack_codes", "result_stats", "take"]

_K = []
_SCRATCH = threading.local()


def _scratch(name, shape, dtype=np.float64, *, zeros=False):
    """This thread's work array of call site ``name``: the one of the last call if it has
    this shape and dtype (as that call left it), else a new one (zeroed if ``zeros``, else
    uninitialized) that replaces it."""
    pool = _SCRATCH.__dict__
    a = pool.get(name)
    if a is None or a.shape != shape or a.dtype != dtype:
        a = pool[name] = (np.zeros if zeros else np.empty)(shape, dtype)
    return a


def _f64_work(x, name):
    """``x`` as a C-contiguous float64 array: itself if it is one, else converted into the
    work array ``name`` (:func:`_scratch`)."""
    if isinstance(x, np.ndarray) and x.dtype.kind in "biuf":
        if x.dtype == np.float64 and x.flags.c_contiguous:
            return x
        out = _scratch(name, x.shape)
        np.copyto(out, x, casting="unsafe")           # what astype(float64) does
        return out
    return _f64(x)


def _build(jit):
    """The jitted kernels as a dict (``jit``: :func:`sw.jit.njit`)."""

    @jit
    def clip(x, q):
        """``np.clip(x, -q, q)`` of a finite float (compares: they vectorize, min/max less)."""
        y = x if x > -q else -q  # noqa: FURB136
        return y if y < q else q  # noqa: FURB136

    @jit
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

    @jit
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

    @jit
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

    @jit
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

    @jit
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

    @jit
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

    @jit
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

    @jit
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

    @jit
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

    @jit
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

    @jit
    def pairwise(a, lo, n):
        """numpy's pairwise sum of ``a[lo:lo + n]`` (``pairwise_sum`` of its float add
        reduction: blocks of up to 128 in 8 accumulators, halves above): the same float."""
        if n < 8:
            res = 0.0
            for i in range(lo, lo + n):
                res += a[i]
            return res
        if n <= 128:
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
        n2 = n // 2
        n2 -= n2 % 8
        return pairwise(a, lo, n2) + pairwise(a, lo + n2, n - n2)

    @jit
    def pairwise_sq(a, lo, n, m):
        """:func:`pairwise` of ``(a[i] - m) ** 2`` (numpy's ``std`` squares the deviations
        into a buffer and sums it so): the same float, with no buffer."""
        if n < 8:
            res = 0.0
            for i in range(lo, lo + n):
                y = a[i] - m
                res += y * y
            return res
        if n <= 128:
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
        n2 = n // 2
        n2 -= n2 % 8
        return pairwise_sq(a, lo, n2, m) + pairwise_sq(a, lo + n2, n - n2, m)

    @jit
    def mean_std(a):
        """numpy's ``a.mean()`` and ``a.std()`` of a flat float64 array, bit for bit."""
        n = a.size
        mean = (0.0 + pairwise(a, 0, n)) / n
        return mean, np.sqrt((0.0 + pairwise_sq(a, 0, n, mean)) / n)

    return {"pack": pack, "decode": decode,
            "input_stats": input_stats, "quantize": quantize, "deq_stats": deq_stats,
            "matched_targets": matched_targets, "matched_codes": matched_codes,
            "mean_std": mean_std, "lookup": lookup, "decode_rows": decode_rows,
            "pack8": pack8, "clip": clip, "pairwise": pairwise,
            "pairwise_sq": pairwise_sq}


def _kernels():
    return built(_K, _build)


def available() -> bool:
    """True if the compiled kernels can be used (numba is installed)."""
    return _kernels() is not None


def _f64(x):
    return np.ascontiguousarray(x, np.float64)


def caller_units(r, v, last, d, gamma, lam, *, bits, reg_format, data_format, matched=True,
                 coefs=None):
    """:func:`sw.gae.batch.prepare_caller_units` in a few compiled passes, or None if an input
    is not finite (the caller then takes the numpy path, which raises its error)."""
    from .batch import matched_registers, range_registers, unit_scale_for
    from .spec import dequant_scale_format
    k = _kernels()
    # float32 goes in as it is: the kernels widen each element to float64 exactly, as the
    # numpy code's astype(float64) does
    r, v = (x if isinstance(x, np.ndarray) and x.dtype == np.float32 and x.flags.c_contiguous
            else _f64_work(x, f"caller_units.{n}") for x, n in ((r, "r"), (v, "v")))
    last, d = _f64(last), np.ascontiguousarray(d, np.bool_)
    if r.ndim != 2 or r.size == 0 or v.shape != r.shape or d.shape != r.shape \
            or last.shape != r.shape[1:]:
        return None                           # the numpy code's behaviour (or error)
    gh, glh = (gamma, gamma * lam) if coefs is None else coefs
    T, M = r.shape
    ok, big, dmax, rlo, rhi, vlo, vhi = k["input_stats"](r, v, last, d, float(gamma))
    if not ok:
        return None
    u = unit_scale_for(big, dmax, T, gamma * lam, data_format)
    # min and max commute with the (monotonic) rounded product by u: the same as numpy's
    sf = dequant_scale_format(data_format.frac)
    rs, ro = range_registers(float(rlo * u), float(rhi * u), bits, reg_format, sf)
    vs, vo = range_registers(float(vlo * u), float(vhi * u), bits, reg_format, sf)
    f = [float(fmt.to_float(x)) for fmt, x in ((sf, rs), (reg_format, ro), (sf, vs),
                                              (reg_format, vo))]
    dtype = np.int8 if bits <= 8 else np.int16
    rc, vc = np.empty((T, M), dtype), np.empty((T + 1, M), dtype)
    vall = _scratch("caller_units.vall", (T + 1, M))
    q = float((1 << (bits - 1)) - 1)
    k["quantize"](r, v, last, u, f[1], f[0], f[3], f[2], q, rc[:0 if matched else T], vc,
                  vall)
    if matched:
        target = _scratch("caller_units.target", (T, M))
        lo, hi = k["matched_targets"](r, u, vall, vc, f[2], f[3], d, float(gamma), float(gh),
                                      target)
        rs, ro = matched_registers(lo, hi, bits, reg_format, sf)
        k["matched_codes"](target, d, float(reg_format.to_float(ro)),
                           float(sf.to_float(rs)), float(glh), q, rc, np.empty(M))
    return {"reward_codes": rc, "value_codes": vc[:-1], "bootstrap_codes": vc[-1],
            "reward_scale_raw": rs, "reward_offset_raw": ro,
            "value_scale_raw": vs, "value_offset_raw": vo,
            "unit_scale": u, "value_mean": float(vall.mean()),
            "reward_clipped": 0.0, "value_clipped": 0.0}


def result_stats(batch, cfg):
    """The keyword arguments of :func:`sw.gae.batch.set_result_ranges` that
    :func:`~sw.gae.batch.choose_result_scale` computes from ``batch``'s codes, or None for
    codes the kernels do not take (shapes that disagree, non-integer codes, non-bool dones)."""
    k = _kernels()
    a, c = batch.args, batch.codes
    rf = cfg.reg_format
    g = a.gamma * 2.0 ** -cfg.pe.coef_frac
    rc, vc = np.asarray(c["rewards"]), np.asarray(c["values"])
    boot, d = np.asarray(c["bootstrap"]), np.asarray(c["dones"])
    if (rc.ndim != 2 or rc.size == 0 or vc.shape != rc.shape or d.shape != rc.shape
            or boot.shape != rc.shape[1:] or d.dtype != np.bool_
            or any(x.dtype.kind not in "iu" for x in (rc, vc, boot))):
        return None                           # the numpy code's behaviour (or error)
    T, M = rc.shape
    sf = cfg.scale_format
    scales = [float(f.to_float(x)) for f, x in ((sf, a.reward_scale), (rf, a.reward_offset),
                                                (sf, a.value_scale), (rf, a.value_offset))]
    delta = _scratch("result_stats.delta", (T, M))
    dmax, vlo, vhi, longest = k["deq_stats"](rc, vc, boot, d,
                                             *scales, g, delta, np.empty(M, np.int64))
    mean, std = k["mean_std"](delta.reshape(-1))
    center = float(batch.prepared["value_mean"])
    v_dev = float(max(abs(vlo - center), abs(vhi - center)))
    return {"max_abs_delta": float(dmax), "mean_delta": float(mean), "std_delta": float(std),
            "longest": int(longest), "center": center, "v_dev": v_dev}


def take(table, raw, lo):
    """``np.take(table, raw + lo)`` (in-place result codes ``raw`` to floats)."""
    raw = np.asarray(raw)
    if available() and raw.dtype == np.int64 and raw.ndim == 2:
        out = np.empty(raw.shape)
        if _kernels()["lookup"](raw, np.ascontiguousarray(table, np.float64), lo, out):
            return out
    return np.take(table, raw + lo)               # or its IndexError


def decode_results(cfg, batch, images, outs=None, values=None):
    """``(adv, returns)`` of the in-place result images ``[(region, data, T, M)] * 2``
    (:func:`sw.gae.batch.dequantize_results` of their codes), or None without the kernels or
    for full results.

    ``outs``: a pair of C-contiguous float ``[T, M]`` arrays to write the results into
    (:func:`sw.gae.batch.check_out`), else new float64 arrays. ``values``: the caller's values
    ``[T, M]``; then ``images`` is the advantages' image alone and the returns are
    ``advantages + values``, computed in the same pass (the caller's units: no returns
    image is read or decoded)."""
    from .batch import result_table
    from .layout import word_bytes
    if not available() or cfg.results != "inplace":
        return None
    a, n, lo = batch.args, cfg.n_pe, 1 << (cfg.code_bits - 1)
    regs = ((a.adv_scale, a.adv_offset), (a.rtg_scale, a.rtg_offset))
    if values is not None:
        images = images[:1]
        values = np.ascontiguousarray(values)
    out = []
    for i, ((region, data, T, M), (scale, offset)) in enumerate(zip(images, regs)):
        nbytes = word_bytes(cfg, region)
        W = T * -(-M // n)
        if len(data) < W * nbytes:
            return None                       # unpack_rows raises
        res = np.empty((T, M)) if outs is None else outs[i]
        if values is None:
            vals = ret = _NONE
        else:
            vals = values
            ret = np.empty((T, M)) if outs is None else outs[1]
        table = result_table(cfg, batch, scale, offset)
        lane_bytes = cfg.code_bits // 8
        if M % n == 0 and nbytes % lane_bytes == 0:       # every word: n whole results
            codes = np.frombuffer(data, "<i1" if lane_bytes == 1 else "<i2",
                                  count=W * nbytes // lane_bytes)
            _kernels()["decode_rows"](codes.reshape(W, -1)[:, :n], table, lo, res, vals, ret)
        else:
            words = np.frombuffer(data, np.uint8, count=W * nbytes).reshape(W, nbytes)
            _kernels()["decode"](words, n, lane_bytes, T, M, table, lo, res, vals, ret)
        out.append(res)
        if values is not None:
            out.append(ret)
    return out[0], out[1]


#: The ``vals``/``ret`` arguments of the decode kernels when there are no returns to add.
_NONE = np.empty((0, 0))


def pack_codes(cfg, rc, vc, boot, d):
    """``[(region, image)]``: the rewards, values (bootstrap row last) and dones images
    (uint8 arrays, this thread's work arrays: write them before the next call) that
    :meth:`GaeDriver.load <sw.gae.driver.GaeDriver.load>` writes, for int8/int16 codes and
    bool dones of consistent shapes whose codes fit; else None (the numpy path, which raises
    for invalid ones)."""
    from .layout import word_bytes
    if not available() or not all(isinstance(a, np.ndarray) and a.flags.c_contiguous
                                  for a in (rc, vc, boot, d)):
        return None
    if (rc.dtype not in (np.int8, np.int16) or vc.dtype != rc.dtype or boot.dtype != rc.dtype
            or d.dtype != np.bool_ or rc.ndim != 2 or vc.shape != rc.shape
            or d.shape != rc.shape or boot.shape != rc.shape[1:]):
        return None
    T, M = rc.shape
    G = -(-M // cfg.n_pe)
    if T < 1 or M < 1 or M > 4096 or (T + 1) * G > cfg.depth:
        return None
    n, nbytes = cfg.n_pe, {r: word_bytes(cfg, r) for r in ("rewards", "values", "dones")}
    whole = (rc.dtype == np.int8 and cfg.code_bits == 8 and M % n == 0 and n % 8 == 0
             and all(b % 8 == 0 for b in nbytes.values()))
    images = {}
    for r, rows in (("rewards", T), ("values", T + 1), ("dones", T)):
        images[r] = img = _scratch(f"pack_codes.{r}", (rows * G, nbytes[r]), np.uint8,
                                   zeros=True)
        if not whole:                         # pack ORs the dones and skips absent lanes
            img.fill(0)
    hi = (1 << (cfg.code_bits - 1)) - 1
    if whole:                 # every payload byte written; the padding stays zero
        _kernels()["pack8"](rc, vc, boot, d, n, images["rewards"], images["values"],
                            images["dones"])
    elif not _kernels()["pack"](rc, vc, boot, d, n, cfg.code_bits // 8, -hi - 1, hi,
                                images["rewards"], images["values"], images["dones"]):
        return None
    return list(images.items())           # written at once by GaeDriver.load (no copy)
