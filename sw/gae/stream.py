"""Streaming GAE: HEPPO's FILO stack filled during rollout collection::

    stream = drv.stream(n_envs=N, horizon=T, gamma=0.99, lam=0.95)
    for t in range(T):
        ...                                          # the environments step
        stream.push(rewards_t, values_t, dones_t)    # [N] each, as the rollout produces them
    adv, ret = stream.finish(last_values)            # [T, N] each

Each :meth:`GaeStream.push` quantizes one time step into row ``t`` of the host's images of the
rewards, values and dones regions, HEPPO's push in time order (§IV, Algorithm 2), while the
rollout goes on; every ``flush_rows`` steps (:data:`FLUSH_ROWS` by default) the rows staged
since the last write go to the accelerator's memory, one write per region
(:func:`sw.gae.layout.row_offset`: rows are contiguous). A write costs a fixed time on every
bus (17 µs per transfer through XRT on PCIe, docs/benchmarks.md), so writing every step would
cost three of them per environment step. :meth:`GaeStream.finish` writes the rows not yet
written with the bootstrap row (the last push never writes: its rows go with the bootstrap
row, in the same three writes) and the in-place result registers, starts the run, waits and
reads the results back: after the last environment step only that remains. The same
:class:`~sw.driver.mmio.Device` interface as every other call, so it works on the golden
model, the simulator, PYNQ and XRT.

Scales (the consequence for accuracy: docs/gae.md, "Streaming")
    A dequantizer register holds one affine map for the whole run, so each stream's scales are
    fixed before its first push, when the batch is not yet known. They come from the batch of
    the previous stream on the same driver (:class:`StreamReference`,
    ``GaeDriver.stream_reference``):

    * standardized units: rewards are dynamically standardized with the running statistics
      updated *per push* (HEPPO §II-A's per-reward recurrence, a step of N rewards at a time);
      their register is the quantizer's step and depends on nothing else. Values are block
      standardized with the *previous* batch's mean and :data:`VALUE_STD_MARGIN` times its std
      (HEPPO §II-B's premise: batches collected at the same point of training are alike; the
      margin absorbs the critic's drift between iterations);
    * the caller's units: the previous batch's reward range (extended to include 0: a zero
      reward is always plausible) and value range, each widened :data:`STREAM_MARGIN` times
      about its centre, and the power of two ``unit_scale`` of those ranges.

    An element outside its range is clipped (counted in :attr:`GaeStream.clipped`; more than
    the driver's ``clip_warning`` fraction warns :class:`~sw.gae.driver.ClippingWarning` at
    :meth:`~GaeStream.finish`). The statistics of the in-place result scale (TD errors, the
    longest episode stretch, the values' spread) are accumulated push by push, so ``finish``
    does O(N) host work before the run. The first stream of a driver (or after ``reset()``)
    has no reference: it keeps the floats and at ``finish`` quantizes and loads the whole
    batch exactly as :meth:`~sw.gae.driver.GaeDriver.compute` does (it costs what ``compute``
    costs); every stream's batch is the next one's reference.

Rounding: rewards with error feedback *forward* in time (step t's rounding error is carried
into step t + 1; the batch path carries it backwards). Every window sum of reconstructed
rewards is then within one code of the true one, the same bound as the batch path's
(``reward_rounding="nearest"`` rounds each element).
"""

import math
import warnings
from dataclasses import dataclass

import numpy as np

from sw.driver.common import bool_flags, integer_in, warn_level

from .batch import GaeBatch, check_out, coefficient, numeric
from .errors import ClippingWarning
from .golden import quantize_coefs
from . import streamfast
from .layout import pack_rows, row_offset, word_bytes
from .quant import range_registers, unit_scale_for
from .spec import MAX_RUN_TRAJECTORIES, GaeCoreArgs

__all__ = ["GaeStream", "StreamReference", "STREAM_MARGIN", "VALUE_STD_MARGIN", "FIXED_ARGS",
           "FLUSH_ROWS"]

#: Time steps a stream stages on the host before it writes them (``flush_rows`` default): the
#: three writes' fixed cost (51 µs through XRT, 3 µs through PYNQ's MMIO window) is then under
#: 1 µs per pushed step, and ``finish`` writes at most this many rows after the last step.
FLUSH_ROWS = 64

#: How many times the previous batch's half-range a stream's range is (caller's units).
STREAM_MARGIN = 1.5

#: How many times the previous batch's value std a stream's value step is scaled by
#: (standardized units). PPO on CartPole (60k steps, 8 x 128, seed 0): values clipped per
#: batch 3.1 % on average (22 % at worst) with 1.0, 0.59 % (4.9 %) with 1.5, 0.04 % (0.97 %)
#: with 2.0; the price is a value step twice the batch path's.
VALUE_STD_MARGIN = 2.0

#: Argument registers a stream writes when it opens (the in-place result registers, which need
#: the whole batch, are written by ``finish``).
FIXED_ARGS = ("num_timesteps", "num_trajectories", "gamma", "gamma_lambda", "reward_scale",
              "reward_offset", "value_scale", "value_offset")


@dataclass(frozen=True)
class StreamReference:
    """What a finished batch leaves for the next stream's scales (:mod:`sw.gae.stream`).

    ``value_mean``, ``value_std``: block statistics of the raw values, bootstrap included
    (standardized units); ``reward_range``, ``value_range``: ``(min, max)`` of the rewards
    (truncation folded in) and of the values; ``max_abs_delta``: largest raw TD error; ``T``.
    """
    units: str
    value_mean: float
    value_std: float
    reward_range: tuple
    value_range: tuple
    max_abs_delta: float
    T: int


class _Moments:
    """Count, mean and sum of squared deviations, merged a block at a time (Chan et al.)."""
    __slots__ = ("n", "mean", "m2")

    def __init__(self):
        self.n, self.mean, self.m2 = 0, 0.0, 0.0

    def add(self, x, x_sum=None):
        """Merge the elements of ``x`` (``x_sum``: their numpy sum, if known)."""
        m = float(x.mean()) if x_sum is None else float(x_sum) / x.size
        n, total = x.size, self.n + x.size
        d = m - self.mean
        y = x - m                         # numpy's pairwise sum, which the kernels repeat
        self.m2 += float(np.add.reduce(y * y)) + d * d * (self.n * n / total)
        self.mean += d * (n / total)
        self.n = total

    @property
    def std(self):
        return math.sqrt(self.m2 / self.n) if self.n else 0.0


def _widened(lo, hi, margin):
    c, half = (lo + hi) / 2, (hi - lo) / 2 * margin
    return c - half, c + half


class GaeStream:
    """One GAE batch pushed a time step at a time (module docstring); made by
    :meth:`GaeDriver.stream <sw.gae.driver.GaeDriver.stream>`.

    Members
    -------
    T, M : int
        ``horizon`` and ``n_envs``.
    pushed : int
        Time steps pushed so far.
    flush_rows : int
        Steps staged on the host per write (:data:`FLUSH_ROWS` unless given).
    written : int
        Steps written to the accelerator's memory so far (0 for a deferred stream).
    deferred : bool
        No reference statistics yet: the batch is quantized and loaded at ``finish``.
    clipped : dict
        ``{"reward": n, "value": n}`` elements clipped so far.
    is_open : bool
        Until ``finish`` or :meth:`abort`.
    batch : GaeBatch or None
        What ``finish`` ran (codes and registers: ``driver.execute(stream.batch)`` on another
        accelerator gives the same results bit for bit).
    """

    def __init__(self, driver, n_envs, horizon, gamma, lam, flush_rows=None):
        M = integer_in(n_envs, "n_envs", 1, MAX_RUN_TRAJECTORIES)
        T = integer_in(horizon, "horizon", 1, 65536)
        self.flush_rows = (FLUSH_ROWS if flush_rows is None
                           else integer_in(flush_rows, "flush_rows", 1, 65536))
        driver.check_shape(T, M)
        self._gamma, self._lam = coefficient(gamma, "gamma"), coefficient(lam, "lam")
        cfg = driver.config
        self._drv, self._cfg, self.T, self.M = driver, cfg, T, M
        self.pushed, self.is_open, self.batch = 0, True, None
        self.clipped = {"reward": 0, "value": 0}
        self._units = units = driver.units
        ref = driver.stream_reference
        # No previous batch to take scales from, or block-standardized rewards (they need the
        # whole batch): collect the steps and run the batch at finish.
        self.deferred = (ref is None or ref.units != units
                         or (units == "standardized"
                             and driver.pipeline.reward_standardization == "block"))
        # statistics of the raw batch (the next stream's reference)
        self._raw_v = _Moments()
        self._r_lo = self._v_lo = math.inf
        self._r_hi = self._v_hi = -math.inf
        self._raw_dmax = 0.0
        self._prev = self._prev_hat = None
        self._vals = None
        self.written = 0
        if self.deferred:
            self._r = np.empty((T, M))
            self._v = np.empty((T, M))
            self._d = np.empty((T, M), bool)
            return
        g_raw, gl_raw = quantize_coefs(self._gamma, self._lam, cfg.pe)
        rf, bits = cfg.reg_format, cfg.code_bits
        if units == "standardized":
            pipe = driver.pipeline
            u = 1.0
            rs, ro = pipe.reward_quantizer.dequantize_params(rf, scale_format=cfg.scale_format)
            vs, vo = pipe.value_quantizer.dequantize_params(
                rf, std=max(ref.value_std * VALUE_STD_MARGIN, pipe.min_std),
                mean=ref.value_mean, scale_format=cfg.scale_format)
        else:
            r_lo, r_hi = _widened(min(ref.reward_range[0], 0.0), max(ref.reward_range[1], 0.0),
                                  STREAM_MARGIN)
            v_lo, v_hi = _widened(*ref.value_range, STREAM_MARGIN)
            u = unit_scale_for(max(-r_lo, r_hi, -v_lo, v_hi),
                               ref.max_abs_delta * STREAM_MARGIN, T, self._gamma * self._lam,
                               cfg.pe.data_format)
            rs, ro = range_registers(r_lo * u, r_hi * u, bits, rf, cfg.scale_format)
            vs, vo = range_registers(v_lo * u, v_hi * u, bits, rf, cfg.scale_format)
        self._u = u
        self._args = GaeCoreArgs(T, M, g_raw, gl_raw, rs, ro, vs, vo)
        sf = cfg.scale_format
        self._rs, self._ro, self._vs, self._vo = (float(f.to_float(x)) for f, x in (
            (sf, rs), (rf, ro), (sf, vs), (rf, vo)))
        self._g = g_raw * 2.0 ** -cfg.pe.coef_frac
        self._qmax = float(cfg.code_max)
        dtype = np.int8 if bits <= 8 else np.int16
        self._rc = np.zeros((T, M), dtype)
        self._vc = np.zeros((T + 1, M), dtype)
        self._dc = np.zeros((T, M), bool)
        # the host's images of the three regions, rows staged until written (_write_rows)
        self._G = G = -(-M // cfg.n_pe)
        self._images = {region: np.zeros((rows * G, word_bytes(cfg, region)), np.uint8)
                        for region, rows in (("rewards", T), ("values", T + 1), ("dones", T))}
        self._carry = np.zeros(M)
        # caller's units: the values as pushed, for the returns (advantages + values, as the
        # batch path's), so finish reads back and decodes the advantages only
        self._vals = np.empty((T, M)) if units == "caller" else None
        self._feedback = driver.pipeline.reward_rounding == "error_feedback"
        # (a zero scale divides by zero: numpy's warnings and NaN, on the numpy path)
        self._fast = (driver.plan.backend == "numba" and bits in (8, 16)
                      and self._rs != 0 != self._vs)
        # statistics of the dequantized batch (the in-place result scale)
        self._delta = _Moments()
        self._dmax = 0.0
        self._vsum, self._vmin, self._vmax = 0.0, math.inf, -math.inf
        self._seg = np.zeros(M, np.int64)
        self._longest = 0
        if self._fast:           # the same statistics, kept by the push_step kernel
            init = {"r_lo": np.inf, "r_hi": -np.inf, "v_lo": np.inf, "v_hi": -np.inf,
                    "vmin": np.inf, "vmax": -np.inf}
            self._st = np.array([init.get(k, 0.0) for k in streamfast.STREAM_STATE])
            self._prevs = np.zeros((4, M))           # raw r, raw v, r hat, v hat of t - 1
            self._prev_d = np.zeros(M, bool)
            self._rows = np.empty((3, M))            # r hat, v hat, TD errors of step t
        driver.write_args(self._args, FIXED_ARGS)       # checks the accelerator is idle

    # -- pushing ------------------------------------------------------------------------------
    def _flags(self, r, dones, terminated, truncated, final_values):
        """The step's "ended at t" flags [M] and its rewards, truncation folded in."""
        M = (self.M,)

        def flag(x, name):
            a = numeric(x, name, ndim=1)
            if a.shape != M:
                raise ValueError(f"{name} must have shape {M}, not {a.shape}")
            return bool_flags(a, name)

        if (dones is None) == (terminated is None):
            raise ValueError("push needs exactly one of dones (ended at t) and terminated "
                             "(with truncated; gymnasium)")
        if dones is not None:
            if truncated is not None or final_values is not None:
                raise ValueError("truncated and final_values go with terminated, not dones")
            return flag(dones, "dones"), r
        if truncated is None:
            raise ValueError("terminated needs truncated (gymnasium's pair of step flags)")
        term, trunc = flag(terminated, "terminated"), flag(truncated, "truncated")
        trunc &= ~term
        if trunc.any():
            if self._units == "standardized":
                raise ValueError("truncated steps need units='caller': in standardized units "
                                 "the final observations' values cannot be folded into the "
                                 "rewards before their standardization")
            if final_values is None:
                raise ValueError("truncated steps need final_values: the [M] values of their "
                                 "final observations (read where truncated is set)")
            fv = numeric(final_values, "final_values", ndim=1, finite=False)
            if fv.shape != M:
                raise ValueError(f"final_values must have shape {M}, not {fv.shape}")
            if not np.isfinite(fv[trunc]).all():
                raise ValueError("final_values must be finite where truncated is set")
            r = r + self._gamma * np.where(trunc, fv, 0.0)
        return term | trunc, r

    def _check_open(self, what):
        if not self.is_open:
            raise RuntimeError(f"{what}: this stream is closed (finished or aborted); open "
                               f"another with driver.stream()")

    def _vector(self, x, name):
        a = numeric(x, name, ndim=1)
        if a.shape != (self.M,):
            raise ValueError(f"{name} must have shape ({self.M},) (n_envs), not {a.shape}")
        return a.astype(np.float64, copy=False)

    def _codes(self, y, stream):
        """Nearest codes of ``y`` (code units), clipped and counted."""
        q = self._qmax
        self.clipped[stream] += int(np.count_nonzero(np.abs(y) > q + 0.5))
        return np.clip(np.rint(y), -q, q)

    def push(self, rewards, values, dones=None, *, terminated=None, truncated=None,
             final_values=None):
        """Push time step ``pushed`` of the N trajectories: ``rewards``, ``values`` (V(s_t))
        ``[N]`` and one flag convention, ``dones`` (the episode ended at this step) or
        gymnasium's ``terminated`` + ``truncated`` (+ ``final_values`` [N], the value of the
        final observation where truncated; caller's units only). ``ValueError`` naming the
        argument (nothing is written), or when all ``horizon`` steps were pushed."""
        self._check_open("push")
        t, T = self.pushed, self.T
        if t >= T:
            raise ValueError(f"push: all horizon={T} steps were pushed; call "
                             f"finish(last_values)")
        r = self._vector(rewards, "rewards")
        v = self._vector(values, "values")
        d, r = self._flags(r, dones, terminated, truncated, final_values)
        if self._vals is not None:
            self._vals[t] = v
        if not self.deferred and self._fast:
            self._push_fast(t, np.ascontiguousarray(r), np.ascontiguousarray(v), d)
            return
        self._raw_stats(r, v, d)
        if self.deferred:
            self._r[t], self._v[t], self._d[t] = r, v, d
            self.pushed += 1
            return
        if self._units == "standardized":
            z, _, _ = self._drv.pipeline.rewards(r)     # running statistics updated per push
            y = z / self._rs
        else:
            y = (r * self._u - self._ro) / self._rs
        q = self._qmax
        if self._feedback:
            self.clipped["reward"] += int(np.count_nonzero(np.abs(y) > q + 0.5))
            a = np.clip(y, -q, q) + self._carry
            rc = np.clip(np.rint(a), -q, q)
            self._carry = a - rc
        else:
            rc = self._codes(y, "reward")
        vc = self._codes((v * self._u - self._vo) / self._vs, "value")
        self._rc[t], self._vc[t], self._dc[t] = rc, vc, d
        G = self._G
        for region, row in (("rewards", self._rc[t]), ("values", self._vc[t]),
                            ("dones", self._dc[t])):
            pack_rows(self._cfg, region, row[None], out=self._images[region][t * G:(t + 1) * G])
        self._result_stats(rc * self._rs + self._ro, vc * self._vs + self._vo, d)
        self._pushed()

    def _pushed(self):
        """Count the step; write the staged rows once ``flush_rows`` are (not after the last
        step: ``finish`` writes those with the bootstrap row)."""
        self.pushed += 1
        if self.pushed - self.written >= self.flush_rows and self.pushed < self.T:
            self._write_rows(self.pushed)

    def _write_rows(self, end, values_end=None):
        """Write the staged rows ``written..end-1`` of the three regions (the values' up to
        ``values_end``), one write each."""
        G, mem, t0 = self._G, self._drv.device.memory, self.written
        for region, image in self._images.items():
            stop = values_end if region == "values" and values_end is not None else end
            mem.write(row_offset(self._cfg, region, t0, self.M), image[t0 * G:stop * G])
        self.written = end

    def _push_fast(self, t, r, v, d):
        """:meth:`push` after the checks, in one compiled pass (``push_step`` of
        :mod:`sw.gae.streamfast`): the same codes, images, statistics and counts bit for bit."""
        k = streamfast.kernels()
        if self._units == "standardized":
            x, u, ro = self._drv.pipeline.rewards(r)[0], 1.0, 0.0   # statistics per push
        else:
            x, u, ro = r, self._u, self._ro
        cfg, G, img, rows = self._cfg, self._G, self._images, self._rows
        w = slice(t * G, (t + 1) * G)
        cr, cv = k["push_step"](x, r, v, d, u, ro, self._rs, self._vo, self._vs, self._qmax,
                                self._feedback, self._gamma, self._g, self._carry,
                                self._rc[t], self._vc[t], self._dc[t], cfg.n_pe,
                                cfg.code_bits // 8, img["rewards"][w], img["values"][w],
                                img["dones"][w], self._prevs, self._prev_d, self._seg,
                                self._st, rows[0], rows[1], rows[2])
        self.clipped["reward"] += int(cr)
        self.clipped["value"] += int(cv)
        self._pushed()

    def _load_state(self):
        """The statistics ``push_step`` kept, into the attributes the numpy path keeps
        (``finish`` goes on from them)."""
        st = dict(zip(streamfast.STREAM_STATE, self._st.tolist()))
        self._raw_v.n, self._raw_v.mean, self._raw_v.m2 = (int(st["raw_n"]), st["raw_mean"],
                                                           st["raw_m2"])
        self._r_lo, self._r_hi, self._v_lo, self._v_hi = (np.float64(st[k]) for k in (
            "r_lo", "r_hi", "v_lo", "v_hi"))
        self._raw_dmax = st["raw_dmax"]
        self._vsum, self._dmax, self._longest = st["vsum"], st["dmax"], int(st["longest"])
        self._vmin, self._vmax = np.float64(st["vmin"]), np.float64(st["vmax"])
        self._delta.n, self._delta.mean, self._delta.m2 = (
            int(st["delta_n"]), st["delta_mean"], st["delta_m2"])
        p = self._prevs
        self._prev, self._prev_hat = (p[0], p[1], self._prev_d), (p[2], p[3], self._prev_d)

    def _raw_stats_fast(self, k, r, v, d):
        """:meth:`_raw_stats` in one compiled pass."""
        prev = self._prev is not None
        pr, pv, pd = self._prev if prev else (v, v, d if d is not None else v > 0)
        delta = np.empty(v.size)
        rlo, rhi, vlo, vhi, vsum, _, dmax = k["row_stats"](
            r if r is not None else v[:0], v, pr, pv, pd, self._gamma, prev, delta)
        rlo, rhi, vlo, vhi = map(np.float64, (rlo, rhi, vlo, vhi))   # numpy's min/max types
        self._raw_v.add(v, vsum)
        if r is not None:
            self._r_lo, self._r_hi = min(self._r_lo, rlo), max(self._r_hi, rhi)
        self._v_lo, self._v_hi = min(self._v_lo, vlo), max(self._v_hi, vhi)
        if prev:
            self._raw_dmax = max(self._raw_dmax, float(dmax))
        self._prev = (r, v, d)

    def _result_stats_fast(self, k, r_hat, v_hat, d):
        """:meth:`_result_stats` in one compiled pass."""
        prev = self._prev_hat is not None
        pr, pv, pd = self._prev_hat if prev else (v_hat, v_hat, v_hat > 0)
        delta = np.empty(v_hat.size)
        _, _, vlo, vhi, vsum, dsum, dmax = k["row_stats"](v_hat[:0], v_hat, pr, pv, pd,
                                                          self._g, prev, delta)
        vlo, vhi = np.float64(vlo), np.float64(vhi)
        self._vsum += float(vsum)
        self._vmin, self._vmax = min(self._vmin, vlo), max(self._vmax, vhi)
        if prev:
            self._delta.add(delta, dsum)
            self._dmax = max(self._dmax, float(dmax))
        if d is not None:
            self._seg += 1
            if d.any():
                self._longest = max(self._longest, int(self._seg[d].max()))
                self._seg[d] = 0
        self._prev_hat = (r_hat, v_hat, d)

    def _raw_stats(self, r, v, d):
        """The next stream's reference: value moments, ranges, largest raw TD error
        (``r`` None: ``v`` are the bootstrap values)."""
        self._raw_v.add(v)
        if r is not None:
            self._r_lo, self._r_hi = min(self._r_lo, r.min()), max(self._r_hi, r.max())
        self._v_lo, self._v_hi = min(self._v_lo, v.min()), max(self._v_hi, v.max())
        if self._prev is not None:
            pr, pv, pd = self._prev
            delta = pr + self._gamma * v * ~pd - pv
            self._raw_dmax = max(self._raw_dmax, float(np.abs(delta).max()))
        self._prev = (r, v, d)

    def _result_stats(self, r_hat, v_hat, d):
        """TD errors of the dequantized inputs (step t-1 once V_t is known), the values'
        spread, the episode stretches: :func:`sw.gae.results.set_result_ranges`'s inputs."""
        self._vsum += float(v_hat.sum())
        self._vmin, self._vmax = min(self._vmin, v_hat.min()), max(self._vmax, v_hat.max())
        if self._prev_hat is not None:
            pr, pv, pd = self._prev_hat
            delta = pr + self._g * v_hat * ~pd - pv
            self._delta.add(delta)
            self._dmax = max(self._dmax, float(np.abs(delta).max()))
        if d is not None:
            self._seg += 1
            if d.any():
                self._longest = max(self._longest, int(self._seg[d].max()))
                self._seg[d] = 0
        self._prev_hat = (r_hat, v_hat, d)

    # -- finishing ----------------------------------------------------------------------------
    def abort(self):
        """Close the stream without a run (the driver accepts other calls again)."""
        self.is_open = False

    def finish(self, last_values, *, out=None):
        """Bootstrap values ``V(s_T)`` [N] in, ``(advantages, returns)`` float64 ``[T, N]``
        out (the driver's units), or written into ``out`` (a pair of C-contiguous float32 or
        float64 ``[T, N]`` arrays, :meth:`GaeDriver.compute
        <sw.gae.driver.GaeDriver.compute>`). ``ValueError`` naming the argument, or if fewer than
        ``horizon`` steps were pushed; the run's errors and warnings are those of
        :meth:`GaeDriver.compute <sw.gae.driver.GaeDriver.compute>`."""
        self._check_open("finish")
        if self.pushed < self.T:
            raise ValueError(f"finish: only {self.pushed} of horizon={self.T} steps were "
                             f"pushed; push {self.T - self.pushed} more first")
        last = self._vector(last_values, "last_values")
        check_out(out, self.T, self.M)
        self.is_open = False
        drv, T, M = self._drv, self.T, self.M
        fast = not self.deferred and self._fast          # (deferred streams have no _fast)
        if fast:
            self._load_state()
            self._raw_stats_fast(streamfast.kernels(), None, np.ascontiguousarray(last), None)
        else:
            self._raw_stats(None, last, None)
        if self.deferred:
            batch = drv.prepare(self._r, self._v, self._d, last, self._gamma, self._lam)
            self._set_reference()
            self.batch = batch
            return drv.execute(batch, out=out)
        cfg = self._cfg
        vc = self._codes((last * self._u - self._vo) / self._vs, "value")
        self._vc[T] = vc
        G = self._G
        pack_rows(cfg, "values", self._vc[T][None], out=self._images["values"][T * G:])
        self._write_rows(T, values_end=T + 1)      # the staged rows and the bootstrap row
        if fast:
            self._result_stats_fast(streamfast.kernels(), None, vc * self._vs + self._vo, None)
        else:
            self._result_stats(None, vc * self._vs + self._vo, None)
        self._longest = max(self._longest, int(self._seg.max()))
        n_r, n_v = T * M, (T + 1) * M
        center = self._vsum / n_v
        prepared = {"unit_scale": self._u, "value_mean": center, "streamed": True,
                    "reward_clipped": self.clipped["reward"] / n_r,
                    "value_clipped": self.clipped["value"] / n_v,
                    "reward_scale_raw": self._args.reward_scale,
                    "reward_offset_raw": self._args.reward_offset,
                    "value_scale_raw": self._args.value_scale,
                    "value_offset_raw": self._args.value_offset}
        codes = {"rewards": self._rc, "values": self._vc[:T], "bootstrap": self._vc[T],
                 "dones": self._dc}
        batch = GaeBatch(T, M, self._gamma, self._lam, codes, self._args, prepared,
                         units=self._units, unit_scale=self._u, values=self._vals)
        if cfg.results == "inplace":
            drv.plan.set_result_ranges(batch, max_abs_delta=self._dmax,
                                       mean_delta=self._delta.mean, std_delta=self._delta.std,
                                       longest=self._longest, center=center,
                                       v_dev=max(self._vmax - center, center - self._vmin))
        self._warn_clipping(prepared)
        self._set_reference()
        self.batch = batch
        return drv.execute(batch, loaded=FIXED_ARGS, out=out)

    def _set_reference(self):
        self._drv.stream_reference = StreamReference(
            self._units, self._raw_v.mean, self._raw_v.std, (self._r_lo, self._r_hi),
            (self._v_lo, self._v_hi), self._raw_dmax, self.T)

    def _warn_clipping(self, prep):
        limits = self._drv.host_settings.clip_warning
        bad = [f"{100 * prep[f'{s}_clipped']:.3g} % of the {s}s" for s, lim in
               zip(("reward", "value"), limits) if prep[f"{s}_clipped"] > lim]
        if bad:
            warnings.warn(f"GAE stream clipping: {' and '.join(bad)} fell outside the ranges "
                          f"fixed from the previous batch: their advantages are biased",
                          ClippingWarning, stacklevel=warn_level())
