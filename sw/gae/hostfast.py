"""Compiled host kernels of the GAE driver: the batch path in a few passes.

:class:`~sw.gae.plan.NumbaPlan` (a :class:`~sw.gae.driver.GaeDriver`'s plan with
``backend="numba"``) calls these instead of the numpy code of :mod:`sw.gae.batch` and
:mod:`sw.gae.layout` (:class:`~sw.gae.plan.NumpyPlan`); the results are the same bit for bit
(``tb/gae/test_host_fast.py`` compares the two plans): every element goes through the same
IEEE operations in the same order (no fast-math), and every sum that numpy computes pairwise
is either still computed by numpy, on a buffer that holds exactly the array numpy would have
summed, or by the kernels' copy of numpy's pairwise summation (``pairwise``;
``test_sums_same_as_numpy``).

The kernels are module-level functions of :mod:`sw.gae.hostkernels`, compiled on first use and
cached on disk (``cache=True``: a new process loads them, :mod:`sw.jit`); each has one or two
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

from .layout import word_bytes
from .quant import matched_registers, range_registers, result_table, unit_scale_for
from .spec import dequant_scale_format

__all__ = ["BACKENDS", "available", "caller_units", "choose_backend", "decode_results",
           "pack_codes", "result_stats", "take"]

#: The GAE host paths: ``"numba"`` (these kernels) or ``"numpy"`` (the code of
#: :mod:`sw.gae.batch`, :mod:`sw.gae.results`, :mod:`sw.gae.layout` and :mod:`sw.gae.stream`),
#: bit-identical.
BACKENDS = ("numba", "numpy")

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


def _load():
    """The kernels (:mod:`sw.gae.hostkernels`) as a dict, by name."""
    from . import hostkernels
    return {name: getattr(hostkernels, name) for name in hostkernels.BATCH}


def _kernels():
    """The kernels (a dict), loaded on first use, or None without numba."""
    return built(_K, _load)


def available() -> bool:
    """True if the compiled kernels can be used (numba is installed)."""
    return _kernels() is not None


def choose_backend(backend=None) -> str:
    """The backend a driver uses for its life: ``backend`` (one of :data:`BACKENDS`) checked,
    or by default ``"numba"`` where the kernels can be used and ``"numpy"`` otherwise.
    ``ValueError`` for ``"numba"`` without numba. The one place the choice is made: the
    driver builds its plan of it (:func:`sw.gae.plan.make_plan`), which its streams use."""
    if backend is None:
        return "numba" if available() else "numpy"
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS} or None, not {backend!r}")
    if backend == "numba" and not available():
        raise ValueError("backend='numba' needs numba, which is not installed")
    return backend


def _f64(x):
    return np.ascontiguousarray(x, np.float64)


def caller_units(r, v, last, d, gamma, lam, *, bits, reg_format, data_format, matched=True,
                 coefs=None):
    """:func:`sw.gae.batch.prepare_caller_units` in a few compiled passes, or None if an input
    is not finite (the caller then takes the numpy path, which raises its error)."""
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
    """The keyword arguments of :func:`sw.gae.results.set_result_ranges` that
    :func:`~sw.gae.results.choose_result_scale` computes from ``batch``'s codes, or None for
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
    (:func:`sw.gae.results.dequantize_results` of their codes), or None for full results or a
    short image. Only with the kernels (the caller chose the ``"numba"`` backend).

    ``outs``: a pair of C-contiguous float ``[T, M]`` arrays to write the results into
    (:func:`sw.gae.batch.check_out`), else new float64 arrays. ``values``: the caller's values
    ``[T, M]``; then ``images`` is the advantages' image alone and the returns are
    ``advantages + values``, computed in the same pass (the caller's units: no returns
    image is read or decoded)."""
    if cfg.results != "inplace":
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
    for invalid ones). Only with the kernels (the caller chose the ``"numba"`` backend)."""
    if not all(isinstance(a, np.ndarray) and a.flags.c_contiguous
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
