"""Host half of the HEPPO GAE accelerator: standardization and b-bit quantization of its inputs.

The accelerator keeps rewards and values in BRAM as b-bit codes (default 8) and dequantizes each
stream on the fly with one affine map, ``real = code * scale + offset``, whose ``scale`` and
``offset`` the host writes as fixed-point registers. This module computes the codes and those
registers, and models the dequantization bit-exactly (:func:`dequantize`), following HEPPO
(Taha et al., section II; eq. numbers below refer to it):

Rewards -- dynamic standardization (section II-A)
    A running mean and standard deviation over *every reward seen since training started*
    (:class:`RunningMeanStd`, eqs. 6-9) are updated with the new batch, then each reward of the
    batch is standardized: ``r~ = (r - mean) / std``. The mean **is** subtracted: section II-C1
    says the standardized rewards are "centered around zero with a unit standard deviation", unlike
    Stable-Baselines3's ``VecNormalize``, which only divides by the std of discounted returns.
    Rewards stay standardized in the accelerator (HEPPO keeps them so; it reports ~1.5x higher
    returns for that, sections II-C1 and V-A), so the reward registers are ``scale = step``,
    ``offset = 0``.

Values -- block standardization (section II-B)
    Mean and standard deviation of *this batch's* values, bootstrap values ``V(s_T)`` included,
    standardize the values before quantization and are kept to undo it. The de-standardization
    ``x * std + mean`` folds into the same multiply-add: ``scale = step * std``, ``offset = mean``,
    so the processing element receives values in the critic's own units.

What the caller gets back from the accelerator (standardized units)
    :class:`~sw.gae.driver.GaeDriver` uses this pipeline only with ``units="standardized"``,
    HEPPO's training mode; its default returns GAE in the caller's units
    (:func:`sw.gae.batch.prepare_caller_units`). In standardized units, advantages
    ``A = sum_l (gamma*lambda)^l (r~ + gamma V' - V)`` are in *standardized-reward units*, and
    so are the rewards-to-go ``A + V`` that become the critic's targets. That is only
    consistent if the critic is trained on those targets, i.e. predicts returns of the
    standardized rewards (what HEPPO does); a critic trained on raw returns mixes units. Only
    the scale can be undone afterwards (multiply by the reward std); the subtracted mean cannot,
    because its contribution to a return depends on where episodes end. In environments with a
    constant per-step reward (CartPole-v1's +1, MountainCar's -1) centering makes every
    standardized reward exactly 0, i.e. it removes the survival signal. For those, choose
    ``reward_norm="scale"`` (:data:`REWARD_NORMS`): rewards are divided by their running root
    mean square ``sqrt(mean^2 + std^2)`` and not centred, so CartPole's +1 stays +1, the sign and
    the survival signal are kept, and the results convert back to raw-reward units exactly by
    one multiplication (``prepared["reward_std"]`` is then that RMS).

Quantization (section II-C)
    :class:`UniformQuantizer`: symmetric, mid-tread, *signed* codes in ``-qmax..qmax`` with
    ``qmax = 2**(bits-1) - 1`` (code ``-2**(bits-1)`` is never produced), step ``clip / qmax``,
    standardized data clipped to ``[-clip, clip]``. Signed codes make 0 (the mean) exact, make the
    rounding error symmetric, and give the reward stream a zero offset. HEPPO states neither its
    clipping ranges nor its rounding; :data:`DEFAULT_REWARD_CLIP` and :data:`DEFAULT_VALUE_CLIP`
    explain ours.

Reward rounding: error feedback (a deviation from a plain reading of HEPPO, host side only)
    Rounding each reward to the nearest code is what HEPPO describes, but rewards often take a
    few discrete values (CartPole: two), so the rounding error is the *same* at every step and
    the GAE sum turns it into a bias of up to ``step / 2 / (1 - gamma*lambda)`` (8.4 steps for
    gamma*lambda = 0.94). :class:`~sw.gae.pipeline.GaeQuantizationPipeline` therefore quantizes rewards by default
    with error feedback along time, processed in reverse (the order GAE sums in): each reward is
    rounded together with the rounding error left over by its successor. Every suffix sum of
    the reconstructed rewards is then within ``step / 2`` of the true one, so the reward part of
    any advantage is within one ``step`` for every gamma, lambda and episode boundary (the
    discount weights are positive and decreasing). The codes and the dequantization are
    unchanged, so the accelerator does not know the difference; ``reward_rounding="nearest"``
    restores per-element rounding.

    Measured on CartPole-v1 with the Sutton-Barto reward (tb/gae/test_quant.py, 8 bits, 8 x 256
    steps, gamma 0.99, lambda 0.95, through the bit-exact PE model), relative RMS error of advantages /
    rewards-to-go against float GAE on unquantized data: 1.2 % / 0.9 % with error feedback,
    12 % / 9.5 % with nearest rounding. The nearest-rounding bias is mostly a common shift, which
    PPO's per-batch advantage normalization removes (1.9 % against 1.2 % after it), but the
    rewards-to-go, the critic's targets, keep it.
"""

import math

import numpy as np

from sw.fixed import MAX_INTERMEDIATE_BITS, FixedFormat, ScaleFormat
from sw.gae.spec import GaeCoreConfig

from .stats import (
    DEFAULT_MIN_STD,
    DEFAULT_UPDATE_CLIP,
    REWARD_NORMS,
    DynamicRewardStandardizer,
    RunningMeanStd,
    _finite_array,
    block_standardize,
)

__all__ = [
    "DEFAULT_REWARD_CLIP", "DEFAULT_VALUE_CLIP", "DEFAULT_MIN_STD", "DEFAULT_UPDATE_CLIP",
    "BITS_RANGE",
    "REWARD_ROUNDINGS", "REWARD_NORMS", "REWARD_STANDARDIZATIONS",
    "RunningMeanStd", "DynamicRewardStandardizer", "block_standardize",
    "UniformQuantizer", "dequantize", "DEFAULT_SCALE_FORMAT", "MAX_UNIT_SCALE",
    "range_registers", "matched_registers", "unit_scale_for", "result_table",
]

#: Default clipping range of standardized rewards, in standard deviations. HEPPO gives none.
#: Rewards are often sparse: a reward of probability p standardizes to about
#: ``sqrt((1 - p) / p)`` (CartPole's terminal reward, p ~ 1/22: -4.66), and clipping it biases
#: every advantage of its episode (measured on CartPole, clip 4: 22 % relative RMS error). +-8
#: keeps such rewards down to p ~ 1/65 for a step of 8/127 = 0.063 at 8 bits.
DEFAULT_REWARD_CLIP = 8.0

#: Default clipping range of block-standardized values. Values are smooth critic outputs: the
#: uniform quantizer of least mean squared error for a unit Gaussian spans about +-3.9 at 8 bits
#: (Max, 1960); at least 15/16 of any block lies within +-4 (Chebyshev). On CartPole the
#: standardized values span -2.8..3.2 and the value part of the advantage error is 0.18 % with
#: +-4 against 0.36 % with +-8. Also the default of :class:`UniformQuantizer`.
DEFAULT_VALUE_CLIP = 4.0

#: Format of the dequantizers' scale registers of the default accelerator (Q16.16 data:
#: ``m * 2**(-8 - e)``; :attr:`sw.gae.spec.GaeCoreConfig.scale_format`).
DEFAULT_SCALE_FORMAT = GaeCoreConfig().scale_format

#: Accepted code widths.
BITS_RANGE = (2, 16)

#: Ways of rounding rewards to codes in :class:`GaeQuantizationPipeline`.
REWARD_ROUNDINGS = ("error_feedback", "nearest")

#: Statistics the rewards are standardized with in :class:`GaeQuantizationPipeline`:
#: ``"dynamic"`` (HEPPO section II-A: running statistics over every reward seen) or ``"block"``
#: (this batch's own mean and std, like the values; HEPPO Table III, experiment 4). Either way
#: the rewards stay standardized in the accelerator.
REWARD_STANDARDIZATIONS = ("dynamic", "block")
# -- validation helpers -----------------------------------------------------------------------
def _check_format(fmt, name):
    if not isinstance(fmt, FixedFormat):
        raise ValueError(f"{name} must be a FixedFormat, not {fmt!r}")
    return fmt


# -- quantization -------------------------------------------------------------------------------
def dequantize(codes, scale_raw, offset_raw, scale_fmt: ScaleFormat, fmt: FixedFormat,
               out_fmt: FixedFormat):
    """Bit-exact model of the accelerator's dequantizer: ``code * scale + offset``.

    With the scale word's mantissa ``m`` and shift ``e`` (:class:`~sw.fixed.ScaleFormat`,
    ``scale = m * 2**(exp0 - e)``), ``L = exp0 + 1 + out_fmt.frac`` and the offset at
    ``out_fmt.frac + 1`` fraction bits ``o`` (``offset_raw`` shifted left, or right with the
    low bits dropped)::

        q = floor(code * m * 2**L / 2**e)          # the product, shifted (floor)
        x = floor((q + o + 1) / 2)                 # the sum, rounded half up
        raw = saturate(x)                          # to out_fmt, with an overflow flag

    so ``raw = round_half_up(code * scale * 2**out_fmt.frac) + offset`` up to the floor of the
    shift. The rounding is half up whatever ``out_fmt``'s rounding mode.

    Parameters
    ----------
    codes : integer array
        Codes of at most 16 bits (signed ``-32768..32767``).
    scale_raw : int
        The scale register word (``scale_fmt``).
    offset_raw : int
        The offset register, a raw integer of ``fmt``.
    scale_fmt : ScaleFormat
        Format of the scale register (``exp0 + 1 + out_fmt.frac >= 0``).
    fmt : FixedFormat
        Format of the offset register.
    out_fmt : FixedFormat
        Format of the result.

    Returns
    -------
    (raw, overflow)
        int64 raw integers of ``out_fmt`` and a bool array, true where saturation changed the
        value; both shaped like ``codes``.

    Raises
    ------
    ValueError
        If codes are not integers of at most 16 bits, a register does not fit its format, or
        the intermediate would not fit int64.
    """
    fmt = _check_format(fmt, "fmt")
    out_fmt = _check_format(out_fmt, "out_fmt")
    if not isinstance(scale_fmt, ScaleFormat):
        raise ValueError(f"scale_fmt must be a ScaleFormat, not {scale_fmt!r}")
    c = np.asarray(codes)
    if not np.issubdtype(c.dtype, np.integer):
        raise ValueError(f"codes must be an integer array, not dtype {c.dtype}")
    if c.size and (c.min() < -(1 << 15) or c.max() > (1 << 15) - 1):
        raise ValueError("codes must be integers of at most 16 bits (-32768..32767)")
    m, e = scale_fmt.unpack(scale_fmt.check_raw(scale_raw, "scale_raw"))
    if isinstance(offset_raw, bool) or not isinstance(offset_raw, (int, np.integer)):
        raise ValueError(f"offset_raw must be an integer, not {offset_raw!r}")
    fmt.check_raw(np.array([int(offset_raw)]), "offset_raw")
    lshift = scale_fmt.exp0 + 1 + out_fmt.frac
    if lshift < 0:
        raise ValueError(f"scale_fmt ({scale_fmt}) does not fit out_fmt ({out_fmt})")
    # code (16 bits) * m: 16 + mantissa_bits bits, then the left shift.
    if 16 + scale_fmt.mantissa_bits + lshift > MAX_INTERMEDIATE_BITS:
        raise ValueError(f"scale_fmt ({scale_fmt}) and out_fmt ({out_fmt}) give an "
                         f"intermediate wider than {MAX_INTERMEDIATE_BITS} bits")
    osh = out_fmt.frac + 1 - fmt.frac
    off = int(offset_raw) << osh if osh >= 0 else int(offset_raw) >> -osh
    q = ((c.astype(np.int64) * np.int64(m)) << np.int64(lshift)) >> np.int64(e)
    return out_fmt.saturate((q + np.int64(off + 1)) >> np.int64(1))


def _error_feedback_numpy(a, step, qmax, codes):
    """Error-feedback rounding of ``a`` [T, N] into ``codes`` [T, N], from t = T-1 down to 0:
    ``u = a[t] + carry``, ``c = clip(rint(u / step), -qmax, qmax)``, ``carry = u - c * step``.
    The reference (and the fallback without numba): one row of ufuncs per time step."""
    u, c, cs = (np.empty(a.shape[1]) for _ in range(3))
    carry = np.zeros(a.shape[1])
    for t in range(a.shape[0] - 1, -1, -1):
        np.add(a[t], carry, out=u)
        np.divide(u, step, out=c)
        np.rint(c, out=c)
        np.maximum(c, -qmax, out=c)
        np.minimum(c, qmax, out=c)
        codes[t] = c
        np.multiply(c, step, out=cs)
        np.subtract(u, cs, out=carry)


def _error_feedback_kernel():
    """The numba-compiled loop of :func:`_error_feedback_numpy` (the same IEEE operations in
    the same order, no fast-math, so the same codes bit for bit), or None without numba.

    numba is a declared dependency for this one loop: the recurrence runs along time, so numpy
    can vectorize it only across trajectories and pays ~6 us of ufunc overhead per time step
    (6 ms for T = 1024), ~50x what the compiled loop takes (docs/gae.md, "Host code")."""
    try:
        import numba
    except ImportError:                      # a board image without numba: the numpy loop
        return None

    @numba.njit(cache=True, nogil=True)
    def kernel(a, step, qmax, codes):
        T, N = a.shape
        carry = np.zeros(N)
        for t in range(T - 1, -1, -1):
            for j in range(N):
                u = a[t, j] + carry[j]
                c = np.rint(u / step)
                c = min(max(c, -qmax), qmax)
                codes[t, j] = c
                carry[j] = u - c * step
    return kernel


_EF_KERNEL = []


def _error_feedback(a, step, qmax, codes):
    """:func:`_error_feedback_numpy` at native speed (numba, compiled on first use)."""
    if not _EF_KERNEL:
        _EF_KERNEL.append(_error_feedback_kernel())
    kernel = _EF_KERNEL[0]
    if kernel is None:
        _error_feedback_numpy(a, step, qmax, codes)
    else:
        kernel(a, step, qmax, codes)


class UniformQuantizer:
    """Uniform b-bit quantizer of standardized data, with clipping (HEPPO section II-C).

    Symmetric mid-tread with signed codes: ``code = round(clip(x, -clip, clip) / step)``, ties
    to even, ``step = clip / qmax``, ``qmax = 2**(bits-1) - 1``; codes lie in ``-qmax..qmax``.
    Inside the clipping range the reconstruction ``code * step`` is within ``step / 2`` of ``x``.

    Parameters
    ----------
    bits : int
        Code width, 2..16. HEPPO found 8 bits and more stable (section V-B).
    clip : float
        Clipping range in units of standardized data (see :data:`DEFAULT_VALUE_CLIP` and
        :data:`DEFAULT_REWARD_CLIP`).

    Members
    -------
    qmax : int
        Largest code magnitude.
    step : float
        Quantization step, in standardized units.
    dtype : numpy dtype
        ``int8`` for up to 8 bits, ``int16`` above.
    """

    def __init__(self, *, bits=8, clip=DEFAULT_VALUE_CLIP):
        lo, hi = BITS_RANGE
        if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)) or not (
                lo <= bits <= hi):
            raise ValueError(f"bits must be an integer in {lo}..{hi}, not {bits!r}")
        if (isinstance(clip, bool) or not isinstance(clip, (int, float, np.floating))
                or not math.isfinite(clip) or clip <= 0):
            raise ValueError(f"clip must be a positive finite number, not {clip!r}")
        self._bits = int(bits)
        self._clip = float(clip)

    bits = property(lambda self: self._bits)
    clip = property(lambda self: self._clip)

    @property
    def qmax(self) -> int:
        return (1 << (self._bits - 1)) - 1

    @property
    def step(self) -> float:
        return self._clip / self.qmax

    @property
    def dtype(self):
        return np.dtype(np.int8) if self._bits <= 8 else np.dtype(np.int16)

    def quantize(self, x, *, name="x", error_feedback=False):
        """Codes of the (standardized) real numbers ``x``, as :attr:`dtype`, shaped like ``x``.

        Parameters
        ----------
        x : array
            Data to quantize; clipped to ``[-clip, clip]`` first.
        name : str
            Name of ``x`` in error messages.
        error_feedback : bool
            If false, each element is rounded to the nearest code (error <= ``step / 2``). If
            true, ``x`` is a time-major array (axis 0 is time) and the elements are rounded from
            the last time step to the first, each together with the rounding error carried from
            the step after it (first-order error feedback, independently along every other
            index). The carry stays within ``step / 2``, so for every t every suffix sum
            ``sum(x[t:]) - sum(codes[t:] * step)`` of the clipped data is within ``step / 2``;
            a single element may be off by up to ``step``.

        Raises
        ------
        ValueError
            If ``x`` holds NaN or infinity, or is 0-D with ``error_feedback`` (messages name
            ``name``).
        """
        a = np.clip(_finite_array(x, name), -self._clip, self._clip)
        if not error_feedback:
            return np.clip(np.rint(a / self.step), -self.qmax, self.qmax).astype(self.dtype)
        if a.ndim == 0:
            raise ValueError(f"{name} must have a time axis (axis 0) for error feedback")
        codes = np.empty(a.shape, dtype=self.dtype)
        if a.size:
            flat = np.ascontiguousarray(a).reshape(a.shape[0], -1)
            _error_feedback(flat, float(self.step), float(self.qmax),
                            codes.reshape(a.shape[0], -1))
        return codes

    def clipped_fraction(self, x) -> float:
        """Fraction of the elements of ``x`` outside ``[-clip, clip]``."""
        a = _finite_array(x, "x")
        return float(np.mean(np.abs(a) > self._clip)) if a.size else 0.0

    def to_float(self, codes):
        """Ideal (float64) reconstruction ``codes * step``, in standardized units."""
        return np.asarray(codes, dtype=np.float64) * self.step

    def dequantize_params(self, fmt: FixedFormat, *, std=1.0, mean=0.0,
                          scale_format: ScaleFormat = None):
        """Registers of the affine map ``real = code * scale + offset``, folding ``* std + mean``.

        ``scale = step * std`` rounded once to ``scale_format`` (nearest, relative error at
        most ``2**-17`` in its normal range) and ``offset = mean`` rounded once to ``fmt`` with
        its rounding mode. Rewards (kept standardized) use the defaults; values pass their
        block statistics.

        Parameters
        ----------
        fmt : FixedFormat
            Format of the offset register, e.g. ``FixedFormat(32, 16)``.
        scale_format : ScaleFormat
            Format of the scale register (default :data:`DEFAULT_SCALE_FORMAT`).
        std : float
            Positive standard deviation to fold in.
        mean : float
            Mean to fold in.

        Returns
        -------
        (scale_raw, offset_raw) : (int, int)

        Raises
        ------
        ValueError
            If ``std`` is not positive and finite, ``mean`` not finite, or either register would
            saturate ``fmt``.
        """
        fmt = _check_format(fmt, "fmt")
        if not (isinstance(std, (int, float, np.floating)) and math.isfinite(std) and std > 0):
            raise ValueError(f"std must be a positive finite number, not {std!r}")
        if not (isinstance(mean, (int, float, np.floating)) and math.isfinite(mean)):
            raise ValueError(f"mean must be a finite number, not {mean!r}")
        sfmt = DEFAULT_SCALE_FORMAT if scale_format is None else scale_format
        out = []
        for name, real, f in (("scale", self.step * std, sfmt), ("offset", mean, fmt)):
            raw, over = f.quantize(real, return_overflow=True)
            if over:
                lo = -f.max_value if isinstance(f, ScaleFormat) else f.min_value
                raise ValueError(f"{name} = {real!r} does not fit the register format {f} "
                                 f"({lo}..{f.max_value})")
            out.append(int(raw))
        return out[0], out[1]

    dequantize = staticmethod(dequantize)

    def __repr__(self):
        return f"UniformQuantizer(bits={self._bits}, clip={self._clip!r})"


# -- registers of the caller's-units path (sw.gae.batch, sw.gae.hostfast, sw.gae.stream) --------
#: Largest ``unit_scale`` (batches of zeros would otherwise ask for an unbounded one).
MAX_UNIT_SCALE = 2.0 ** 20


def range_registers(lo, hi, bits, reg_format, scale_format):
    """``(scale_raw, offset_raw)`` of a dequantizer whose ``qmax`` codes reach both ends of
    ``[lo, hi]``: the mid-range, rounded to ``reg_format``, and the smallest ``scale_format``
    scale that covers the range from it (at least ``scale_format.min_normal``: within
    ``2**-16`` of the exact step)."""
    qmax = (1 << (bits - 1)) - 1
    off_raw = int(reg_format.quantize((lo + hi) / 2))
    off = float(reg_format.to_float(off_raw))
    half = max(hi - off, off - lo, 0.0)
    return scale_format.quantize(max(half / qmax, scale_format.min_normal), direction="up"), \
        off_raw


def matched_registers(lo, hi, bits, reg_format, scale_format):
    """The reward registers of matched rounding: :func:`range_registers` of the targets'
    range ``[lo, hi]`` widened by one code step on each side (room for the carry)."""
    step = float(scale_format.to_float(range_registers(lo, hi, bits, reg_format,
                                                       scale_format)[0]))
    return range_registers(lo - step, hi + step, bits, reg_format, scale_format)


def unit_scale_for(max_abs_input, max_abs_delta, T, gl, data_format):
    """The power of two that puts the returns' bound ``max_abs_input + H max_abs_delta``
    (``H = sum_{l<T} gl^l``) at half the PE data range (:mod:`sw.gae.batch`, "Caller's
    units")."""
    H = T if gl == 1.0 else (1.0 - gl ** T) / (1.0 - gl)
    bound = max_abs_input + H * max_abs_delta
    if bound > 0:
        k = math.floor(math.log2(data_format.max_value / 2 / bound))
        return min(2.0 ** k, MAX_UNIT_SCALE)
    return MAX_UNIT_SCALE


def result_table(cfg, batch, scale, offset):
    """The float64 value of every in-place result code ``-2**(b-1) .. 2**(b-1)-1`` under the
    requantizer registers ``scale``, ``offset``, in the caller's units (``batch.unit_scale``:
    a :class:`~sw.gae.batch.GaeBatch`)."""
    rf, lo = cfg.reg_format, 1 << (cfg.code_bits - 1)
    codes = np.arange(-lo, lo, dtype=np.float64)
    return (codes - rf.to_float(offset)) / cfg.result_scale_format.to_float(scale) \
        / batch.unit_scale
