"""The results of one GAE batch on the host: the returns in the caller's units, the scale, error
bound and refinement of in-place results, the de-quantization. :mod:`sw.gae.batch` prepares
the batch, :class:`~sw.gae.driver.GaeDriver` runs it and calls these; nothing here needs a
device.

Returns (caller's units)
    ``advantages + values`` on the host, with the caller's float64 values: the accelerator's
    returns are ``advantages + Vq`` and carry each value's rounding, which matched rounding no
    longer cancels in the advantages. Standardized units and a stream's pushed batch
    (:mod:`sw.gae.stream`: its own rounding, forward in time, and no float values kept) take
    the accelerator's returns; a stream's first, deferred batch is a batch call.

Result scale (in-place results, :func:`choose_result_scale`)
    The accelerator writes ``code = round(x * scale + offset)``, saturated to ``±qmax``
    (``qmax = 2**(code_bits-1) - 1``), over the rewards (advantages) and values (returns).
    The driver picks, from the dequantized inputs it is about to send, the TD errors
    ``d_t = r_t + gamma V_{t+1} (1 - done_t) - V_t``, the most TD errors ``L`` any advantage
    sums (:func:`longest_segment`: the longest stretch of a trajectory up to an episode's end
    in the batch), ``H = sum_{l<L} (gamma lambda)^l``, ``H2 = sum_{l<L} (gamma lambda)^(2l)``:

    * the advantage range ``R_A = min(max|d| H, |mean d| H + sigmas * std(d) sqrt(H2))``
      (``sigmas`` = ``result_sigmas``, default 4): the first term bounds ``|A|`` rigorously,
      the second is what ``A`` spans if TD errors are uncorrelated (a well-trained critic),
      ``sigmas`` standard deviations wide; centred on 0. (``L = T`` in both would make the
      range span the whole batch instead of its longest episode at ``gamma = lambda = 1``:
      4-5 % error at 8 bits instead of 2-3 %.)
    * the return range ``R_G = R_A + max|V - mean V|``, centred on the values' block mean
      (rigorous given ``|A| <= R_A``).

    ``scale = qmax / R`` (and ``offset = -centre * scale``), rounded to the register format;
    the de-quantization uses the registers actually written. Inside the range the result error
    is at most half a code, ``R / (2 qmax)`` (with 8-bit codes and ``R_A = 4 std(A)``: 1.6 % of
    ``std(A)``, RMS 0.9 %), on top of the input quantization error. TD errors are rarely
    uncorrelated and often heavy-tailed (sparse rewards are spikes), so the range may saturate.
    By default (``on_requant_overflow="retry"``) a run whose STATUS.REQUANT_OVERFLOW is set is
    repeated with both ranges doubled (up to their rigorous bounds, so it ends without
    saturation; each costs one more load and run), and every element keeps the result of the
    narrowest run in which its code did not saturate (so a retry refines, rather than
    coarsens, the elements that fitted: two or more result exponents, chosen per element, from
    an accelerator that has one per stream). ``"warn"`` keeps the saturated results and warns
    (:class:`~sw.gae.driver.RequantOverflowWarning`). ``result_range`` (caller's units)
    overrides the choice. A smaller ``result_sigmas`` trades runs for accuracy (docs/gae.md).
    Full-precision results (``results="full"``) are the PE's data format and need none of
    this.

    Why one run is not enough: the range above treats the TD errors as uncorrelated, but a
    critic's noise enters ``d_t`` twice, ``+gamma V_{t+1}`` and ``-V_t``, and telescopes out
    of ``A``: with values 3 times the rewards as independent noise, 4 % episode ends (the
    longest stretch about 100 steps) and ``gamma = lambda = 1``, the range is 5 to 11 times
    the largest ``|A|``, and so is the code step (7-10 % relative RMS error). And no single
    range can do where the returns are much smaller than the advantages: at ``gamma = 0`` with
    values 10 times the rewards, ``A = r - V`` is 10 times the returns ``r``, and half a code
    of ``A`` is 8 % of them.

Refinement (in-place results, caller's units: :func:`error_bounds`, :func:`residual_rewards`)
    After a batch's runs the driver bounds each advantage's error from what it knows: half the
    result code step of the run the element came from, the matched rounding's carry (half a
    reward code, :mod:`sw.gae.batch`), the rounding of ``gamma lambda`` and of its powers to the
    coefficient format (``max|d| sum_l |w_l - (gamma lambda)^l|``, ``w`` the PE's weights,
    :func:`pe_weights`) and the PE's own rounding (``6 ulp H``), over the longest episode
    stretch (``H = sum_l (gamma lambda)^l``); the RMS ``E`` of those bounds bounds the RMS
    error, and since ``rms(A) >= rms(A_hat) - E``, ``E / (rms(A_hat) - E)`` bounds the relative
    RMS error of the advantages ``A_hat``; the same with ``A_hat + V`` for the returns. Where
    either exceeds ``result_tolerance`` (driver parameter, default 3 %), the driver runs the
    batch's *error*: GAE is linear in the rewards, so the rewards ``rho_t = d_t - A_hat_t +
    gamma lambda (1 - done_t) A_hat_{t+1}`` (``rho_{T-1} = d_{T-1} - A_hat_{T-1}``; ``d`` the
    textbook TD errors of the caller's float64 inputs, exact ``gamma``) with zero values have
    the textbook advantages ``A - A_hat``. That batch is quantized as any other (its own
    ``unit_scale``, matched rounding) with both result ranges set to the largest bound, so its
    codes step about ``1/qmax`` of the first run's; its results are added to ``A_hat``. It also
    removes the coefficient rounding of the first run (``rho`` is formed with the exact ``gamma
    lambda``), which full-precision results keep (up to 2-3 % at ``gamma lambda`` just below 1
    over thousands of steps). The bound is checked again, up to :data:`MAX_REFINEMENTS`
    refinements; a run that still saturated (``on_requant_overflow="warn"``) is not refined.
    Each refinement costs one more quantization, load, run and read-back, and no device memory:
    the accelerator's in-place regions are reused.
"""

import math

import numpy as np

from .golden import coef_powers
from .quant import result_table

__all__ = ["MAX_REFINEMENTS", "choose_result_scale", "dequantize_results", "error_bounds",
           "longest_segment", "pe_weights", "relative_error_bounds", "residual_rewards",
           "result_stats", "set_result_ranges", "set_result_registers"]

#: Most refinement runs of one batch (module docstring, "Refinement"): each divides the error
#: bound by about ``qmax / 2``; more are needed only where the results' RMS is about their
#: error (returns that cancel to 0), which no run fixes.
MAX_REFINEMENTS = 2


# -- result scale (in-place results) ------------------------------------------------------------
def longest_segment(dones) -> int:
    """The most TD errors any advantage of the batch sums: the longest run of steps of one
    trajectory up to an episode's end (a done, or the batch's last step), both included."""
    ends = np.array(np.asarray(dones, bool).T)            # [M, T], one trajectory per row
    ends[:, -1] = True
    return int(np.diff(np.flatnonzero(ends), prepend=-1).max())


def choose_result_scale(batch, cfg, sigmas, result_range=None):
    """Set ``batch``'s in-place result ranges, bounds and requantizer registers from its
    dequantized inputs (module docstring, "Result scale"); ``result_range`` (caller's
    units) overrides the automatic ranges: :func:`result_stats`, then
    :func:`set_result_ranges` (:meth:`sw.gae.plan.QuantizationPlan.result_scale`)."""
    set_result_ranges(batch, cfg, sigmas, result_range, **result_stats(batch, cfg))


def result_stats(batch, cfg) -> dict:
    """The keyword arguments of :func:`set_result_ranges` from ``batch``'s codes: the TD
    errors of the dequantized inputs, the longest episode stretch, the return range's
    centre and the values' spread about it (module docstring, "Result scale"). The numpy
    reference of :meth:`sw.gae.plan.QuantizationPlan.result_stats`."""
    a, c = batch.args, batch.codes
    rf, sf = cfg.reg_format, cfg.scale_format
    gamma = a.gamma * 2.0 ** -cfg.pe.coef_frac

    def deq(codes, scale, offset):
        return np.asarray(codes, np.float64) * sf.to_float(scale) + rf.to_float(offset)

    r = deq(c["rewards"], a.reward_scale, a.reward_offset)
    v = deq(c["values"], a.value_scale, a.value_offset)
    boot = deq(c["bootstrap"], a.value_scale, a.value_offset)
    v_next = np.concatenate([v[1:], boot[None]], axis=0)
    delta = r + gamma * v_next * ~c["dones"] - v
    L = longest_segment(c["dones"])            # both ranges grow with L: the longest decides
    center = float(batch.prepared["value_mean"])
    v_dev = float(max(np.abs(v - center).max(), np.abs(boot - center).max()))
    return {"max_abs_delta": float(np.abs(delta).max()), "mean_delta": float(delta.mean()),
            "std_delta": float(delta.std()), "longest": L, "center": center, "v_dev": v_dev}


def set_result_ranges(batch, cfg, sigmas, result_range, *, max_abs_delta, mean_delta,
                      std_delta, longest, center, v_dev):
    """:func:`choose_result_scale` from statistics of the dequantized inputs: the TD errors'
    largest magnitude, mean and (population) std, the longest episode stretch ``longest``, the
    return range's ``center`` and the values' largest distance ``v_dev`` from it (what a
    :class:`~sw.gae.stream.GaeStream` accumulates push by push)."""
    a = batch.args
    gl = a.gamma_lambda * 2.0 ** -cfg.pe.coef_frac
    L = longest
    H = L if gl == 1.0 else (1.0 - gl ** L) / (1.0 - gl)
    H2 = L if gl == 1.0 else (1.0 - gl ** (2 * L)) / (1.0 - gl * gl)
    slack = 1.0 + 1e-6
    ulps = 4 * cfg.pe.data_format.ulp
    adv_bound = max_abs_delta * H * slack + ulps * H
    estimate = abs(mean_delta) * H + sigmas * std_delta * math.sqrt(H2)
    rtg_bound = adv_bound + v_dev
    if result_range is not None:
        adv_range, rtg_range = (x * batch.unit_scale for x in result_range)
    else:
        adv_range = min(adv_bound, estimate)
        rtg_range = adv_range + v_dev
    batch.adv_bound, batch.rtg_bound, batch.rtg_center = adv_bound, rtg_bound, center
    batch.max_abs_delta, batch.longest = max_abs_delta, longest
    set_result_registers(batch, cfg, adv_range, rtg_range)


def set_result_registers(batch, cfg, adv_range, rtg_range):
    """The requantizer registers of result ranges ``adv_range`` (centred on 0) and
    ``rtg_range`` (centred on ``batch.rtg_center``), into ``batch.args``; the ranges
    actually realized into ``batch``."""
    rf, sf, qmax = cfg.reg_format, cfg.result_scale_format, cfg.code_max

    def registers(rng, center):
        # scale = qmax / R must fit the register, at full precision (>= min_normal: the
        # operand window reaches saturation, sw.gae.spec.check_registers); the offset must
        # fit too.
        rng = max(rng, qmax / sf.max_value, qmax * abs(center) / rf.max_value * 1.001)
        rng = min(rng, qmax / sf.min_normal)
        scale_raw = sf.quantize(qmax / rng)
        offset_raw = int(rf.quantize(-center * sf.to_float(scale_raw)))
        return qmax / float(sf.to_float(scale_raw)), scale_raw, offset_raw

    batch.adv_range, batch.args.adv_scale, batch.args.adv_offset = registers(adv_range, 0.0)
    batch.rtg_range, batch.args.rtg_scale, batch.args.rtg_offset = registers(
        rtg_range, batch.rtg_center)


# -- refinement (in-place results, caller's units) ----------------------------------------------
def error_bounds(batch, cfg):
    """``[runs]`` float64: for each run of ``batch`` (``batch.run_args``), a bound on
    ``|advantage - textbook GAE|`` of an element taken from it, in the caller's units (module
    docstring, "Refinement"), assuming its code did not saturate. The returns (advantages plus
    the caller's values) have the same bound. The coefficient term is exact for the PE:
    ``max|d| sum_l |w_l - (gamma lambda)^l|`` over the longest stretch, ``w``
    :func:`pe_weights`."""
    a, df, sf = batch.args, cfg.pe.data_format, cfg.scale_format
    cf = 2.0 ** -cfg.pe.coef_frac
    gh, glh = a.gamma * cf, a.gamma_lambda * cf
    x = batch.gamma * batch.lam
    y, L = max(glh, x), max(batch.longest, 1)
    H = float(L) if y == 1.0 else (1.0 - y ** L) / (1.0 - y)
    weights = pe_weights(a.gamma_lambda, cfg.pe, L)
    r_step = float(sf.to_float(a.reward_scale))
    if batch.prepared.get("matched", True):
        inputs = r_step / 2                    # each advantage is off by its own carry
    else:                                      # every rounding of the window, discounted
        v_step = float(sf.to_float(a.value_scale))
        v_max = batch.unit_scale * max(float(np.abs(batch.values).max()),
                                       float(np.abs(batch.last_values).max()))
        inputs = H * (r_step / 2 + (1.0 + gh) * v_step / 2 + abs(gh - batch.gamma) * v_max)
    # the PE's weights of delta_{t+l} against the textbook (gamma lambda)^l
    coef = (batch.max_abs_delta + 2 * r_step) * float(
        np.abs(weights - x ** np.arange(L, dtype=np.float64)).sum())
    common = inputs + coef + 6 * df.ulp * H
    rsf = cfg.result_scale_format
    # half a result code, and the requantizer's operand window (under 2**-8 of a code)
    half = np.array([0.5 / float(rsf.to_float(r.adv_scale)) for r in batch.run_args])
    return (half * (1.0 + 2.0 ** -7) + common) / batch.unit_scale


def pe_weights(gamma_lambda, pe, n):
    """``[n]`` float64: the weight of ``delta_{t+l}`` in the PE's advantage ``A_t`` for
    ``l < n`` inside one episode stretch, with the raw coefficient ``gamma_lambda``: k-step
    lookahead computes ``A_t = sum_{i<k} P_i delta_{t+i} + P_k A_{t+k}`` with the powers
    ``P_i`` of its power chain (:func:`sw.gae.golden.coef_powers`, each rounded to the
    coefficient format), so ``delta_{qk+i}`` weighs ``P_k^q P_i``; interleaved PEs and k = 1
    weigh it ``C^l``."""
    cf = 2.0 ** -pe.coef_frac
    k = pe.lookahead_steps
    pows = np.array([1.0] + [p * cf for p in coef_powers(gamma_lambda, pe)[1:]])
    lag = np.arange(n)
    return pows[k] ** (lag // k) * pows[lag % k]


def relative_error_bounds(bounds, origin, adv, ret):
    """``(advantages, returns)``: bounds on the relative RMS error of ``adv`` and ``ret``
    against textbook GAE, from the per-run ``bounds`` (:func:`error_bounds`) and ``origin``
    (``[T, M]`` run of each element, or None: all from run 0). ``E`` the RMS of the elements'
    bounds and ``x`` the results, ``E / (rms(x) - E)`` (``inf`` if ``rms(x) <= E``): the
    error's RMS is at most ``E``, the reference's at least ``rms(x) - E``."""
    bounds = np.asarray(bounds, np.float64)
    if origin is None or len(bounds) == 1:
        e2 = float(bounds[0] ** 2)
    else:
        counts = np.bincount(np.asarray(origin).ravel(), minlength=len(bounds))
        e2 = float(np.sum(counts * bounds ** 2)) / origin.size
    e = math.sqrt(e2)
    out = []
    for x in (adv, ret):
        flat = np.ravel(x)             # einsum's own loop: BLAS's dot can stall on busy cores
        rms = math.sqrt(float(np.einsum("i,i->", flat, flat)) / flat.size)
        out.append(e / (rms - e) if rms > e else math.inf)
    return tuple(out)


def residual_rewards(batch, adv):
    """The rewards whose textbook advantages with zero values and zero bootstrap values are
    ``A - adv``, ``A`` the textbook advantages of ``batch``'s inputs (caller's units,
    ``batch.rewards``, ``batch.values``, ``batch.last_values``): ``rho_t = d_t - adv_t +
    gamma lambda (1 - done_t) adv_{t+1}``, ``rho_{T-1} = d_{T-1} - adv_{T-1}``, with ``d``
    the TD errors in float64 and the exact ``gamma`` and ``gamma lambda`` (module docstring,
    "Refinement"). A new float64 ``[T, M]`` array."""
    v = batch.values
    nd = ~np.asarray(batch.codes["dones"], bool)
    rho = np.empty(adv.shape)
    rho[:-1] = v[1:]                                  # V_{t+1}, the bootstrap values last
    rho[-1] = batch.last_values
    rho *= batch.gamma
    rho *= nd
    rho += batch.rewards
    rho -= v
    rho -= adv
    nxt = adv[1:] * (batch.gamma * batch.lam)
    nxt *= nd[:-1]
    rho[:-1] += nxt
    return rho


def _np_take(table, raw, lo):
    return np.take(table, raw + lo)


def dequantize_results(cfg, batch, adv_raw, rtg_raw, *, take=_np_take):
    """Result codes (in place) or data-format words (full) as float64 ``(adv, returns)``;
    ``rtg_raw`` None (returns not read back): None for the returns. ``take(table, raw,
    lo)``: ``np.take(table, raw + lo)`` or the same (:func:`sw.gae.hostfast.take`)."""
    u = batch.unit_scale
    if cfg.results == "full":
        fmt = cfg.pe.data_format
        return tuple(None if raw is None else fmt.to_float(raw) / u
                     for raw in (adv_raw, rtg_raw))
    a, lo = batch.args, 1 << (cfg.code_bits - 1)
    # a table of every code's value (the same operations per element), then one take
    return tuple(None if raw is None
                 else take(result_table(cfg, batch, scale, offset), raw, lo)
                 for raw, scale, offset in ((adv_raw, a.adv_scale, a.adv_offset),
                                            (rtg_raw, a.rtg_scale, a.rtg_offset)))

