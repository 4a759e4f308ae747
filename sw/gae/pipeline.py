"""The host's work before a GAE accelerator run on one batch: :class:`GaeQuantizationPipeline`
(standardization and quantization of rewards and values, the scale registers). The method and
its choices, after HEPPO section II, are in :mod:`sw.gae.quant`, whose pieces it puts together."""

import numpy as np

from sw.fixed import FixedFormat, ScaleFormat

from .quant import (
    DEFAULT_REWARD_CLIP,
    DEFAULT_SCALE_FORMAT,
    DEFAULT_VALUE_CLIP,
    REWARD_ROUNDINGS,
    REWARD_STANDARDIZATIONS,
    UniformQuantizer,
    _check_format,
    dequantize,
)
from .stats import (
    DEFAULT_MIN_STD,
    DEFAULT_UPDATE_CLIP,
    DynamicRewardStandardizer,
    _check_min_std,
    _finite_array,
    block_standardize,
)

__all__ = ["GaeQuantizationPipeline"]


class GaeQuantizationPipeline:
    """Everything the host computes before starting the GAE accelerator on one batch.

    Rewards: dynamic standardization (running statistics kept across calls), then quantization
    (error feedback along time by default, see the module docstring); registers
    ``scale = step_r``, ``offset = 0``. Values and bootstrap values: block standardization, then
    quantization to the nearest code; registers ``scale = step_v * std_v``, ``offset = mean_v``.

    Parameters
    ----------
    bits : int
        Code width of both streams, 2..16.
    reward_clip, value_clip : float
        Clipping ranges of standardized rewards and values.
    reward_rounding : str
        ``"error_feedback"`` or ``"nearest"`` (:data:`REWARD_ROUNDINGS`).
    reward_norm : str
        ``"center"`` (HEPPO, default) or ``"scale"`` (:data:`REWARD_NORMS`, module docstring).
    reward_standardization : str
        ``"dynamic"`` (default: running statistics, kept across calls) or ``"block"`` (each
        batch's own statistics, nothing kept; :data:`REWARD_STANDARDIZATIONS`).
    reg_format : FixedFormat
        Format of the offset registers.
    scale_format : ScaleFormat
        Format of the scale registers (the accelerator's
        :attr:`~sw.gae.spec.GaeCoreConfig.scale_format`).
    min_std : float
        Floor of both standard deviations.
    update_clip : float or None
        Robust update of the running reward statistics (:class:`DynamicRewardStandardizer`:
        rewards enter them winsorized at ``update_clip`` running RMS); None: HEPPO's plain
        update.

    Members
    -------
    reward_quantizer, value_quantizer : UniformQuantizer
    rewards : DynamicRewardStandardizer
        Holds the running reward statistics (:meth:`state_dict` saves them, :meth:`reset`
        clears them).
    """

    def __init__(self, *, bits=8, reward_clip=DEFAULT_REWARD_CLIP, value_clip=DEFAULT_VALUE_CLIP,
                 reward_rounding="error_feedback", reg_format=FixedFormat(32, 16),
                 min_std=DEFAULT_MIN_STD, reward_norm="center",
                 update_clip=DEFAULT_UPDATE_CLIP, reward_standardization="dynamic",
                 scale_format=DEFAULT_SCALE_FORMAT):
        self.reward_quantizer = UniformQuantizer(bits=bits, clip=reward_clip)
        self.value_quantizer = UniformQuantizer(bits=bits, clip=value_clip)
        if reward_rounding not in REWARD_ROUNDINGS:
            raise ValueError(f"reward_rounding must be one of {', '.join(REWARD_ROUNDINGS)}, "
                             f"not {reward_rounding!r}")
        self._reward_rounding = reward_rounding
        if reward_standardization not in REWARD_STANDARDIZATIONS:
            raise ValueError(f"reward_standardization must be one of "
                             f"{', '.join(REWARD_STANDARDIZATIONS)}, not "
                             f"{reward_standardization!r}")
        self._reward_standardization = reward_standardization
        self._reg_format = _check_format(reg_format, "reg_format")
        if not isinstance(scale_format, ScaleFormat):
            raise ValueError(f"scale_format must be a ScaleFormat, not {scale_format!r}")
        self._scale_format = scale_format
        self._min_std = _check_min_std(min_std)
        self.rewards = DynamicRewardStandardizer(min_std=min_std, norm=reward_norm,
                                                 update_clip=update_clip)

    @property
    def bits(self) -> int:
        return self.reward_quantizer.bits

    @property
    def min_std(self) -> float:
        """The smallest standard deviation the standardizers divide by."""
        return self._min_std

    @property
    def reward_rounding(self) -> str:
        return self._reward_rounding

    @property
    def reward_norm(self) -> str:
        return self.rewards.norm

    @property
    def reward_standardization(self) -> str:
        return self._reward_standardization

    @property
    def reg_format(self) -> FixedFormat:
        return self._reg_format

    @property
    def scale_format(self) -> ScaleFormat:
        return self._scale_format

    def prepare(self, rewards, values, last_values) -> dict:
        """Standardize and quantize one batch; updates the running reward statistics.

        Parameters
        ----------
        rewards, values : array [T, N]
            Raw rewards and critic values, time-major (CleanRL / SB3 layout).
        last_values : array [N]
            Bootstrap values ``V(s_T)``.

        Returns
        -------
        dict
            ``reward_codes``, ``value_codes`` ([T, N]) and ``bootstrap_codes`` ([N]) as the
            quantizers' dtype; registers ``reward_scale_raw``, ``reward_offset_raw``,
            ``value_scale_raw``, ``value_offset_raw`` (ints of :attr:`reg_format`); the statistics
            used, ``reward_mean``, ``reward_std``, ``reward_count`` (running, or the batch's with
            ``reward_standardization="block"``) and ``value_mean``,
            ``value_std`` (block); ``standardized_rewards`` (float64 [T, N], the unquantized
            input of a float reference); ``reward_clipped``, ``value_clipped`` (fractions of
            elements outside the clipping ranges).

        Raises
        ------
        ValueError
            On wrong shapes or non-finite inputs (the running statistics are then unchanged), or
            if a register does not fit :attr:`reg_format`.
        """
        r = _finite_array(rewards, "rewards", ndim=2)
        v = _finite_array(values, "values", ndim=2)
        last = _finite_array(last_values, "last_values", ndim=1)
        if v.shape != r.shape:
            raise ValueError(f"values must have the shape of rewards {r.shape}, not {v.shape}")
        zv, zlast, vmean, vstd = block_standardize(v, last, min_std=self._min_std)
        # Registers are computed before the running reward statistics change, so a failure
        # leaves the pipeline as it was.
        qr, qv, fmt = self.reward_quantizer, self.value_quantizer, self._reg_format
        sf = self._scale_format
        v_scale, v_offset = qv.dequantize_params(fmt, std=vstd, mean=vmean, scale_format=sf)
        r_scale, r_offset = qr.dequantize_params(fmt, scale_format=sf)
        if self._reward_standardization == "block":
            # The batch alone: a fresh standardizer (plain update), the running one untouched.
            block = DynamicRewardStandardizer(min_std=self._min_std, norm=self.rewards.norm,
                                              update_clip=None)
            zr, rmean, rstd = block(r)
            count = block.stats.count
        else:
            zr, rmean, rstd = self.rewards(r)
            count = self.rewards.stats.count
        feedback = self._reward_rounding == "error_feedback"
        return {
            "reward_codes": qr.quantize(zr, name="rewards", error_feedback=feedback),
            "value_codes": qv.quantize(zv, name="values"),
            "bootstrap_codes": qv.quantize(zlast, name="last_values"),
            "reward_scale_raw": r_scale, "reward_offset_raw": r_offset,
            "value_scale_raw": v_scale, "value_offset_raw": v_offset,
            "reward_mean": rmean, "reward_std": rstd, "reward_count": count,
            "value_mean": vmean, "value_std": vstd,
            "standardized_rewards": zr,
            "reward_clipped": qr.clipped_fraction(zr),
            "value_clipped": qv.clipped_fraction(np.concatenate([zv.ravel(), zlast])),
        }

    def dequantize(self, prepared: dict, out_fmt: FixedFormat) -> dict:
        """What the accelerator feeds its processing elements, bit-exactly (:func:`dequantize`).

        Returns a dict of raw ``out_fmt`` integers ``rewards``, ``values`` ([T, N]),
        ``last_values`` ([N]) and ``overflow`` (true if any element saturated).
        """
        fmt = self._reg_format
        out, over = {}, False
        for key, codes, stream in (("rewards", "reward_codes", "reward"),
                                   ("values", "value_codes", "value"),
                                   ("last_values", "bootstrap_codes", "value")):
            out[key], o = dequantize(prepared[codes], prepared[f"{stream}_scale_raw"],
                                     prepared[f"{stream}_offset_raw"], self._scale_format, fmt,
                                     out_fmt)
            over = over or bool(np.any(o))
        out["overflow"] = over
        return out

    def bytes_per_timestep(self, N, result_format: FixedFormat) -> dict:
        """BRAM bytes per time step of a batch of ``N`` trajectories.

        Codes of one time step are assumed packed densely (BRAM port widths are configurable),
        two streams (reward and value) per trajectory.

        Returns
        -------
        dict
            ``in_place_codes``: rewards and values as b-bit codes, overwritten in place by
            advantages and rewards-to-go that are themselves b-bit codes (HEPPO section V-D2:
            128 bytes for N = 64, b = 8). ``codes_plus_results``: the codes plus a separate
            buffer of full-precision advantages and rewards-to-go in ``result_format``.
            ``float32_inputs``: the unquantized float32 inputs (HEPPO section IV: 512 bytes
            for N = 64).
        """
        if isinstance(N, bool) or not isinstance(N, (int, np.integer)) or N < 1:
            raise ValueError(f"N must be a positive integer, not {N!r}")
        result_format = _check_format(result_format, "result_format")
        code_bits = 2 * N * self.bits
        return {
            "in_place_codes": -(-code_bits // 8),
            "codes_plus_results": -(-code_bits // 8) + -(-(2 * N * result_format.width) // 8),
            "float32_inputs": 2 * N * 4,
        }

    def state_dict(self) -> dict:
        """Configuration and running reward statistics, as plain Python values."""
        return {"bits": self.bits, "reward_clip": self.reward_quantizer.clip,
                "value_clip": self.value_quantizer.clip, "reward_rounding": self._reward_rounding,
                "reg_format": self._reg_format.to_dict(), "min_std": self._min_std,
                "reward_norm": self.rewards.norm, "update_clip": self.rewards.update_clip,
                "reward_standardization": self._reward_standardization,
                "scale_format": self._scale_format.to_dict(),
                "reward_stats": self.rewards.stats.state_dict()}

    def reset(self):
        """Forget the running reward statistics."""
        self.rewards.reset()

    def load_state_dict(self, state: dict):
        """Restore the running reward statistics of a :meth:`state_dict` of a pipeline
        configured like this one (``ValueError`` naming the first differing setting)."""
        other = type(self).from_state_dict(state)
        mine = self.state_dict()
        for key, value in other.state_dict().items():
            if key != "reward_stats" and value != mine[key]:
                raise ValueError(f"state has {key}={value!r}, this pipeline {mine[key]!r}")
        self.rewards.stats.load_state_dict(state["reward_stats"])
        self.rewards.clamped = 0
        return self

    @classmethod
    def from_state_dict(cls, state: dict) -> "GaeQuantizationPipeline":
        """Rebuild a pipeline saved by :meth:`state_dict`."""
        keys = {"bits", "reward_clip", "value_clip", "reward_rounding", "reg_format", "min_std",
                "reward_stats"}
        # reward_norm, update_clip and reward_standardization are optional: states saved before
        # they existed are "center", the plain update (None) and "dynamic".
        optional = {"reward_norm", "update_clip", "reward_standardization", "scale_format"}
        if not isinstance(state, dict) or not keys <= set(state) <= keys | optional:
            raise ValueError(f"state must be a dict with keys {', '.join(sorted(keys))} "
                             f"(and optionally reward_norm, update_clip, "
                             f"reward_standardization)")
        pipe = cls(bits=state["bits"], reward_clip=state["reward_clip"],
                   value_clip=state["value_clip"], reward_rounding=state["reward_rounding"],
                   reg_format=FixedFormat(**state["reg_format"]), min_std=state["min_std"],
                   reward_norm=state.get("reward_norm", "center"),
                   update_clip=state.get("update_clip"),
                   reward_standardization=state.get("reward_standardization", "dynamic"),
                   scale_format=ScaleFormat(**state.get("scale_format",
                                                        DEFAULT_SCALE_FORMAT.to_dict())))
        pipe.rewards.stats.load_state_dict(state["reward_stats"])
        return pipe
