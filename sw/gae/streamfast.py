"""Compiled host kernels of a GAE stream's push (issue #12): :class:`~sw.gae.stream.GaeStream`
calls them instead of its numpy code when numba is installed (:func:`available`), with the same
results bit for bit (``tb/gae/test_host_fast.py``, ``test_stream_same``).

``push_step`` does one time step in one pass: the raw statistics the next stream's scales come
from, the codes and the staged images of the three regions (``push_row``), the statistics of the
dequantized step the in-place result scale needs, and the episode stretches. ``row_stats`` is the
statistics part alone (``finish``'s bootstrap row). They use the batch kernels' rounding clip and
numpy's pairwise summation (:mod:`sw.gae.hostfast`), and are compiled on first use and cached on
disk (``cache=True``).
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


def _build(jit):
    """The jitted kernels as a dict (``jit``: :func:`sw.jit.njit`), on the batch kernels'
    ``clip``, ``pairwise`` and ``pairwise_sq``."""
    import numpy as np

    base = hostfast._kernels()
    clip, pairwise, pairwise_sq = base["clip"], base["pairwise"], base["pairwise_sq"]

    @jit
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

    @jit
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

    @jit
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

    @jit
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

    return {"push_row": push_row, "push_step": push_step, "row_stats": row_stats}


def available() -> bool:
    """True if the stream's compiled kernels can be used (numba is installed and the batch
    kernels are)."""
    return hostfast.available()


def kernels():
    """The kernels (a dict), built on first use; call only when :func:`available`."""
    return built(_K, _build)
