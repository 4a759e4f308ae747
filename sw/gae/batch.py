"""One GAE batch on the host: argument checks, episode flags, quantization in the caller's units.

:class:`~sw.gae.driver.GaeDriver` calls these before it touches the bus; nothing here needs a
device.

Episode flags (:func:`episode_dones`)
    The accelerator takes one flag per step, ``dones[t]`` = *the episode ended at step t* (no
    bootstrap from ``V_{t+1}``, the advantage recursion restarts): the convention of
    :func:`sw.gae.golden.gae_reference` and of the processing element. Users hold one of:

    * ``dones`` -- that convention;
    * ``episode_starts`` [T, M] and ``next_done`` [M] -- Stable-Baselines3 / CleanRL:
      ``episode_starts[t]`` = observation t is the first of an episode, ``next_done`` the flag
      of the observation after the batch (SB3's ``dones`` argument of
      ``compute_returns_and_advantage``, CleanRL's ``next_done``). Then ``dones[t] =
      episode_starts[t + 1]`` and ``dones[T - 1] = next_done``; SB3 and CleanRL do not tell
      termination from truncation in these flags (every end is a termination);
    * ``terminated``, ``truncated`` [T, M] -- gymnasium's ``step`` flags, with
      ``final_values`` [T, M], the critic's value of the final observation of each truncated
      step (``info["final_obs"]``; read only where ``truncated`` is set). A terminated step does
      not bootstrap; a truncated one bootstraps from the final observation:
      ``delta_t = r_t + gamma V(final_t) - V_t`` and the recursion restarts. The host folds the
      bootstrap into the reward (``r_t + gamma V(final_t)``, done set), which is exactly that
      (as SB3 does for ``TimeLimit.truncated``).

Caller's units (:func:`prepare_caller_units`)
    Each stream's dequantizer computes ``code * scale + offset``. Here ``offset`` is the
    stream's mid-range and ``scale`` the smallest register value whose ``qmax`` codes reach
    both ends of the range (``scale = ceil(half_range / qmax)`` in register ulps), so nothing
    is clipped, and the codes are computed against the *rounded* registers, so their rounding
    adds no error: each value is within half a code of its own (the rewards: "Matched
    rounding" below). Before that the whole batch is
    multiplied by a power of two ``unit_scale`` (exact; GAE is linear in rewards and values
    jointly) so that the returns' rigorous bound ``max(|r|, |V|) + H max|delta|``, ``H =
    sum_{l<T} (gamma lambda)^l``, fills half the processing element's data range: large
    rewards do not saturate it, small ones keep its resolution. The driver divides the results
    by ``unit_scale``. Only this batch is used: no state carries between calls.

Matched rounding (``reward_rounding="error_feedback"``, the default)
    The advantages are what a policy gradient uses, so the reward codes are chosen to make
    *them* right, not each reward. The value codes are rounded to nearest (error ``e_t``); the
    reward stream then absorbs the values' rounding and the rounding of ``gamma`` to the
    coefficient format (``g``, ``gl`` as the accelerator holds them): each reward's target is
    ``r_t + e_t - (g Vq_{t+1} - gamma V_{t+1}) (1 - done_t)`` (``Vq`` the dequantized values),
    so the accelerator's TD error of the targets is the textbook one. The targets are rounded
    backwards in time with error feedback matched to the recursion: ``w_t = target_t +
    gl (1 - done_t) carry_{t+1}``, ``code_t = round(w_t)``, ``carry_t = w_t - code_t``; then the
    advantage recursion telescopes the roundings away and each advantage is off by its own
    ``carry_t`` only (half a reward code), however long the episode and wide the values'
    range. The reward range is the targets' plus one code on each side (room for the carry).
    ``"nearest"`` rounds each reward to nearest instead (the advantages then carry every
    value's and reward's rounding, discounted). Measured: docs/gae.md, "Accuracy".

The batch's results -- the returns in the caller's units, the scale, error bound and
refinement of in-place results, the de-quantization -- are :mod:`sw.gae.results`'.
"""

import math
from dataclasses import dataclass, field

import numpy as np

from sw.driver.common import bool_flags, check_finite

from .layout import pack_rows
from .quant import UniformQuantizer, matched_registers, range_registers, unit_scale_for
from .spec import GaeCoreArgs, dequant_scale_format

__all__ = ["GaeBatch", "HostSettings", "check_batch", "episode_dones", "prepare_caller_units",
           "UNITS", "code_images"]

#: Units of :meth:`GaeDriver.compute <sw.gae.driver.GaeDriver.compute>`'s results:
#: ``"caller"`` (textbook GAE of the caller's rewards and values) or ``"standardized"``
#: (HEPPO: GAE of the dynamically standardized rewards, running statistics across calls).
UNITS = ("caller", "standardized")


def numeric(x, name, *, ndim, finite=True):
    """``x`` as a numeric array of ``ndim`` dimensions; ``ValueError`` naming ``name``."""
    try:
        a = np.asarray(x)
    except Exception:  # noqa: BLE001 - ragged lists and the like
        raise ValueError(f"{name} must be a numeric array") from None
    if a.dtype.kind not in "biuf":
        raise ValueError(f"{name} must be a numeric array (bool, integer or float), "
                         f"not dtype {a.dtype}")
    if a.ndim != ndim:
        shape = "[T, M]" if ndim == 2 else "[M]"
        raise ValueError(f"{name} must be a {shape} array, not shape {a.shape}")
    return check_finite(a, name) if finite else a


def flags(x, name, shape):
    """Bool flags of ``shape``: bool, or numbers that are all 0 or 1."""
    a = numeric(x, name, ndim=len(shape))
    if a.shape != shape:
        raise ValueError(f"{name} must have the shape of rewards {shape}, not {a.shape}"
                         if len(shape) == 2 else f"{name} must have shape {shape}, not {a.shape}")
    return bool_flags(a, name)


def coefficient(value, name):
    """``value`` as a float in [0, 1]; ``ValueError`` naming ``name``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(
            value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a real number in [0, 1], not {value!r}")
    v = float(value)
    if not (math.isfinite(v) and 0.0 <= v <= 1.0):
        raise ValueError(f"{name} must be a real number in [0, 1], not {value!r}")
    return v


def episode_dones(shape, gamma, rewards, *, dones=None, episode_starts=None, next_done=None,
                  terminated=None, truncated=None, final_values=None):
    """The accelerator's ``dones`` and the rewards it needs, from any one flag convention.

    Exactly one of ``dones``, ``episode_starts`` (with ``next_done``) and ``terminated`` (with
    ``truncated`` and, if any is set, ``final_values``) must be given (module docstring).

    Returns
    -------
    (dones, rewards, truncations) : (bool [T, M], array [T, M], int)
        ``rewards`` (the given array unless a step was truncated) has ``gamma *
        final_values`` added, in float64, where a step was truncated (not terminated);
        ``truncations`` counts those steps.

    Raises
    ------
    ValueError
        Naming the argument: none or several conventions, a missing companion, a shape, a
        non-finite ``final_values`` at a truncated step.
    """
    T, M = shape
    given = [n for n, x in (("dones", dones), ("episode_starts", episode_starts),
                            ("terminated", terminated)) if x is not None]
    if len(given) != 1:
        raise ValueError("give exactly one of dones (ended at t), episode_starts (with "
                         "next_done; SB3/CleanRL) and terminated (with truncated; gymnasium), "
                         f"not {', '.join(given) or 'none'}")
    extra = [n for n, x, owner in (("next_done", next_done, "episode_starts"),
                                   ("truncated", truncated, "terminated"),
                                   ("final_values", final_values, "terminated"))
             if x is not None and given[0] != owner]
    if extra:
        raise ValueError(f"{extra[0]} goes with "
                         f"{'episode_starts' if extra[0] == 'next_done' else 'terminated'}, "
                         f"not with {given[0]}")
    r = np.asarray(rewards)                       # converted where it is used
    if dones is not None:
        return flags(dones, "dones", (T, M)), r, 0
    if episode_starts is not None:
        if next_done is None:
            raise ValueError("episode_starts needs next_done: the [M] flags of the observation "
                             "after the batch (SB3's dones, CleanRL's next_done)")
        starts = flags(episode_starts, "episode_starts", (T, M))
        nxt = flags(next_done, "next_done", (M,))
        return np.concatenate([starts[1:], nxt[None]], axis=0), r, 0
    term = flags(terminated, "terminated", (T, M))
    if truncated is None:
        raise ValueError("terminated needs truncated (gymnasium's pair of step flags)")
    trunc = flags(truncated, "truncated", (T, M)) & ~term
    if trunc.any():
        if final_values is None:
            raise ValueError("truncated steps need final_values: the [T, M] values of their "
                             "final observations (read where truncated is set)")
        fv = numeric(final_values, "final_values", ndim=2, finite=False)
        if fv.shape != (T, M):
            raise ValueError(f"final_values must have shape {(T, M)}, not {fv.shape}")
        fv = fv[trunc].astype(np.float64)
        if not np.isfinite(fv).all():
            raise ValueError("final_values must be finite where truncated is set")
        r = r.astype(np.float64)                  # a copy
        r[trunc] += gamma * fv
    return term | trunc, r, int(trunc.sum())


def check_batch(rewards, values, last_values, *, finite=True):
    """Rewards, values ([T, M]) and last values ([M]) as checked arrays. ``finite=False``
    leaves their finiteness to the caller (:func:`check_finite_batch`)."""
    r = numeric(rewards, "rewards", ndim=2, finite=finite)
    v = numeric(values, "values", ndim=2, finite=finite)
    if v.shape != r.shape:
        raise ValueError(f"values must have the shape of rewards {r.shape}, not {v.shape}")
    last = numeric(last_values, "last_values", ndim=1, finite=finite)
    if last.shape != (r.shape[1],):
        raise ValueError(f"last_values must have shape ({r.shape[1]},), not {last.shape}")
    return r, v, last


def check_finite_batch(r, v, last):
    """The finiteness check of :func:`check_batch` (``ValueError`` naming the first
    argument with a NaN or infinite element)."""
    for x, name in ((r, "rewards"), (v, "values"), (last, "last_values")):
        check_finite(np.asarray(x), name)


def _stream(x, bits, reg_format, scale_format):
    """Registers (mid-range offset, covering scale, both rounded first) and codes of ``x``."""
    qmax = (1 << (bits - 1)) - 1
    scale_raw, off_raw = range_registers(float(x.min()), float(x.max()), bits, reg_format,
                                         scale_format)
    scale = float(scale_format.to_float(scale_raw))
    off = float(reg_format.to_float(off_raw))
    # Step 1 in units of the realized scale: the codes are rint((x - off) / scale).
    q = UniformQuantizer(bits=bits, clip=float(qmax))
    codes = q.quantize((x - off) / scale)
    return codes, scale_raw, off_raw


def prepare_caller_units(rewards, values, last_values, dones, gamma, lam, *, bits, reg_format,
                         data_format, reward_rounding="error_feedback", coefs=None):
    """Codes and dequantizer registers whose dequantized values are the caller's own
    rewards and values times ``unit_scale`` (module docstring). No state.

    ``coefs``: ``(gamma, gamma * lam)`` as the accelerator holds them (rounded to its
    coefficient format); default the exact ones. With ``reward_rounding="error_feedback"``
    the reward codes are matched to the recursion (module docstring, "Matched rounding").

    Returns
    -------
    dict
        ``reward_codes``, ``value_codes``, ``bootstrap_codes``; the four registers
        ``reward_scale_raw``, ``reward_offset_raw``, ``value_scale_raw``, ``value_offset_raw``;
        ``unit_scale``; ``value_mean`` (scaled, the centre of the return range);
        ``reward_clipped`` and ``value_clipped`` (always 0: nothing is clipped); ``matched``
        (the reward codes were matched to the recursion).

    The numpy reference of :meth:`sw.gae.plan.QuantizationPlan.quantize`
    (:class:`~sw.gae.plan.NumbaPlan` computes the same in compiled passes).
    """
    gh, glh = (float(gamma), float(gamma) * float(lam)) if coefs is None else map(float, coefs)
    matched = reward_rounding == "error_feedback"
    check_finite_batch(rewards, values, last_values)  # the kernels' None for non-finite input
    r = np.asarray(rewards, np.float64)
    v = np.asarray(values, np.float64)
    last = np.asarray(last_values, np.float64)
    T = r.shape[0]
    v_next = np.concatenate([v[1:], last[None]], axis=0)
    delta = r + gamma * v_next * ~dones - v
    unit_scale = unit_scale_for(max(np.abs(r).max(), np.abs(v).max(), np.abs(last).max()),
                                float(np.abs(delta).max()), T, gamma * lam, data_format)
    vall = np.concatenate([v, last[None]], axis=0) * unit_scale
    sf = dequant_scale_format(data_format.frac)
    vc, vs, vo = _stream(vall, bits, reg_format, sf)
    if matched:
        rc, rs, ro = _matched_rewards(r * unit_scale, vall, vc, vs, vo, dones, gamma, gh, glh,
                                      bits, reg_format, sf)
    else:
        rc, rs, ro = _stream(r * unit_scale, bits, reg_format, sf)
    return {"reward_codes": rc, "value_codes": vc[:-1], "bootstrap_codes": vc[-1],
            "reward_scale_raw": rs, "reward_offset_raw": ro,
            "value_scale_raw": vs, "value_offset_raw": vo,
            "unit_scale": unit_scale, "value_mean": float(vall.mean()),
            "reward_clipped": 0.0, "value_clipped": 0.0, "matched": matched}


def _matched_rewards(r, vall, vc, vs, vo, dones, gamma, gh, glh, bits, reg_format, scale_format):
    """Reward codes of matched rounding (module docstring) and their registers. ``r``, ``vall``
    scaled by ``unit_scale``; ``vc`` the value codes with the bootstrap row, ``vs``, ``vo`` their
    registers; ``gh``, ``glh`` the accelerator's coefficients. The numpy reference of
    :func:`sw.gae.hostfast.caller_units` (the same operations in the same order)."""
    qmax = (1 << (bits - 1)) - 1
    vh = vc * float(scale_format.to_float(vs)) + float(reg_format.to_float(vo))
    nd = np.where(dones, 0.0, 1.0)
    target = r + (vh[:-1] - vall[:-1]) - (gh * vh[1:] - gamma * vall[1:]) * nd
    rs, ro = matched_registers(float(target.min()), float(target.max()), bits, reg_format,
                               scale_format)
    a = (target - float(reg_format.to_float(ro))) / float(scale_format.to_float(rs))
    rho = glh * nd
    codes = np.empty(r.shape, np.int8 if bits <= 8 else np.int16)
    carry, w, c = (np.zeros(r.shape[1]) for _ in range(3))
    for t in range(r.shape[0] - 1, -1, -1):
        np.multiply(rho[t], carry, out=w)
        np.add(a[t], w, out=w)
        np.rint(w, out=c)
        np.clip(c, -qmax, qmax, out=c)
        np.subtract(w, c, out=carry)
        codes[t] = c
    return codes, rs, ro


@dataclass
class GaeBatch:
    """What :meth:`GaeDriver.prepare <sw.gae.driver.GaeDriver.prepare>` computes for one call
    (no hardware involved).

    Members
    -------
    T, M : int
        Time steps and trajectories.
    gamma, lam : float
        As given.
    codes : dict
        ``rewards``, ``values`` ([T, M]) and ``bootstrap`` ([M]) codes, ``dones`` (bool, the
        accelerator's "ended at t" flags whatever convention the caller used).
    args : GaeCoreArgs
        The argument registers of the run (raw integers).
    prepared : dict
        Caller's units: the output of :func:`prepare_caller_units`; standardized: of
        :meth:`GaeQuantizationPipeline.prepare <sw.gae.quant.GaeQuantizationPipeline.prepare>`
        (statistics, standardized rewards, clipping fractions).
    units : str
        ``"caller"`` or ``"standardized"`` (:data:`UNITS`).
    unit_scale : float
        The power of two the inputs were multiplied by (1 for standardized units).
    adv_range, rtg_range : float or None
        Result ranges of in-place results, in the accelerator's units (the caller's times
        ``unit_scale``); None for full results.
    adv_bound, rtg_bound : float or None
        Their rigorous upper limits (what ``"retry"`` widens up to).
    rtg_center : float
        Centre of the return range (the values' block mean).
    status : dict
        STATUS fields and CYCLES of the (last) run of this batch's codes (a refinement's are in
        its own batch, :attr:`refinements`).
    runs : int
        Runs of this batch's codes (more than 1 after ``on_requant_overflow="retry"`` widened
        the ranges); :attr:`total_runs` adds the refinements'.
    run_args : list of GaeCoreArgs
        The arguments of each run (they differ in the result registers).
    result_run : (array, array) or None
        ``[T, M]`` indices into ``run_args`` of the run each advantage and return was taken
        from (the narrowest in which its code did not saturate).
    values : array or None
        Caller's units: the caller's values (float64 ``[T, M]``); the returns are then
        ``advantages + values`` on the host (:mod:`sw.gae.results`, "Returns"). None for a
        pushed stream's or a standardized batch: the accelerator's returns.
    rewards, last_values : array or None
        Caller's units, :meth:`GaeDriver.compute <sw.gae.driver.GaeDriver.compute>`'s batches:
        the rewards (truncation folded in) and bootstrap values as given (not copied: a batch
        from :meth:`~sw.gae.driver.GaeDriver.prepare` must be executed before they change),
        which a refinement's residual rewards are formed from (:mod:`sw.gae.results`,
        "Refinement"); None where there is none to run (a pushed stream, standardized units).
    max_abs_delta : float
        In-place results: the largest TD error of the dequantized inputs (accelerator units).
    longest : int
        In-place results: :func:`~sw.gae.results.longest_segment` of the dones.
    refinements : list of GaeBatch
        The refinement batches run after this one, in order (their results were added).
    error_bound : (float, float) or None
        Bounds on the relative RMS error of the returned advantages and returns against
        textbook GAE (:func:`~sw.gae.results.relative_error_bounds`; ``inf`` where the
        results' RMS is within the error bound); None where none is computed (full results,
        standardized units, a pushed stream).
    """
    T: int
    M: int
    gamma: float
    lam: float
    codes: dict
    args: GaeCoreArgs
    prepared: dict
    units: str = "caller"
    unit_scale: float = 1.0
    adv_range: float | None = None
    rtg_range: float | None = None
    adv_bound: float | None = None
    rtg_bound: float | None = None
    rtg_center: float = 0.0
    status: dict = field(default_factory=dict)
    runs: int = 0
    run_args: list = field(default_factory=list)
    result_run: tuple | None = None
    values: np.ndarray | None = None
    rewards: np.ndarray | None = None
    last_values: np.ndarray | None = None
    max_abs_delta: float = 0.0
    longest: int = 0
    refinements: list = field(default_factory=list)
    error_bound: tuple | None = None

    @property
    def total_runs(self) -> int:
        """Accelerator runs of this batch and its refinements."""
        return self.runs + sum(r.total_runs for r in self.refinements)


@dataclass(frozen=True)
class HostSettings:
    """The driver's host-side choices that every batch path applies, the batch
    (:meth:`GaeDriver.compute <sw.gae.driver.GaeDriver.compute>`) and the stream
    (:class:`~sw.gae.stream.GaeStream`) alike: ``GaeDriver.host_settings``.

    result_sigmas : float
        Width of the automatic in-place advantage range in standard deviations
        (:func:`~sw.gae.results.set_result_ranges`).
    result_range : (float, float) or None
        Fixed ``(R_A, R_G)`` in-place result ranges instead of the automatic choice.
    clip_warning : (float, float)
        Fractions of clipped rewards and values above which a batch warns
        :class:`~sw.gae.errors.ClippingWarning`.
    """
    result_sigmas: float
    result_range: tuple | None
    clip_warning: tuple


def check_out(out, T, M):
    """``out`` (None, or a pair of writable, C-contiguous float32/float64 ``[T, M]`` arrays:
    where a call writes its advantages and returns) as a tuple or None; ``ValueError``
    naming ``out`` otherwise. Writing into arrays the caller keeps (a rollout buffer's) saves
    allocating and first touching two result arrays per call."""
    if out is None:
        return None
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        raise ValueError(f"out must be None or a pair of arrays (advantages, returns), "
                         f"not {type(out).__name__}")
    for name, a in zip(("out[0]", "out[1]"), out):
        if not isinstance(a, np.ndarray) or a.dtype not in (np.float32, np.float64):
            raise ValueError(f"{name} must be a float32 or float64 numpy array, not "
                             f"{getattr(a, 'dtype', type(a).__name__)}")
        if a.shape != (T, M):
            raise ValueError(f"{name} must have shape {(T, M)}, not {a.shape}")
        if not (a.flags.c_contiguous and a.flags.writeable):
            raise ValueError(f"{name} must be C-contiguous and writeable")
    if np.shares_memory(out[0], out[1]):
        raise ValueError("out[0] and out[1] must not overlap")
    return tuple(out)


def check_units(units):
    """``units`` if it is one of :data:`UNITS`, else ``ValueError``."""
    if units not in UNITS:
        raise ValueError(f"units must be one of {', '.join(map(repr, UNITS))}, not {units!r}")
    return units


def code_images(cfg, reward_codes, value_codes, bootstrap_codes, dones, check_shape):
    """``[(region, image)]``: the memory images (bytes, or uint8 arrays to be written at once)
    of one batch of codes (rewards, values with the bootstrap row, dones), checked first
    (``ValueError`` naming the argument; ``check_shape(T, M)`` checks the capacity): what
    ``GaeDriver.load`` writes: the numpy reference of
    :meth:`sw.gae.plan.QuantizationPlan.images`."""
    lo, hi = -(1 << (cfg.code_bits - 1)), (1 << (cfg.code_bits - 1)) - 1
    arrays = {}
    for name, x, ndim in (("reward_codes", reward_codes, 2), ("value_codes", value_codes, 2),
                          ("bootstrap_codes", bootstrap_codes, 1), ("dones", dones, 2)):
        a = numeric(x, name, ndim=ndim)
        if name == "dones":
            a = bool_flags(a, name)
        else:
            if a.dtype.kind not in "iu" or (a.size and (a.min() < lo or a.max() > hi)):
                raise ValueError(f"{name} must be integer codes in {lo}..{hi}")
        arrays[name] = a
    T, M = arrays["reward_codes"].shape
    for name in ("value_codes", "dones"):
        if arrays[name].shape != (T, M):
            raise ValueError(f"{name} must have shape {(T, M)}, not {arrays[name].shape}")
    if arrays["bootstrap_codes"].shape != (M,):
        raise ValueError(f"bootstrap_codes must have shape ({M},), not "
                         f"{arrays['bootstrap_codes'].shape}")
    check_shape(T, M)
    values = np.vstack([arrays["value_codes"], arrays["bootstrap_codes"][None]])
    return [(region, pack_rows(cfg, region, rows)) for region, rows in (
        ("rewards", arrays["reward_codes"]), ("values", values), ("dones", arrays["dones"]))]
