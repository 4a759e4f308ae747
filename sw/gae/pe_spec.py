"""The GAE processing element's specification (HEPPO): :class:`GaePeConfig` (widths, formats,
k, mode) and its exact :attr:`~GaePeConfig.latency`. Plain Python, no Amaranth;
:mod:`sw.gae.spec` re-exports everything here (the accelerator's configuration holds one).
"""

from dataclasses import dataclass
from functools import cached_property

from sw.config import Config, check_int
from sw.fixed import MAX_INTERMEDIATE_BITS, ROUNDING_MODES, FixedFormat

__all__ = ["GAE_MODES", "LIMITS", "GaePeConfig"]

GAE_MODES = ("lookahead", "interleaved")

#: Accepted ranges, used for validation, the CLI help and the docs.
LIMITS = {
    "data_width": (8, 32),
    "coef_width": (4, 24),
    "k": (1, 16),
    "timestep_bits": (1, 32),
    "trajectory_bits": (1, 16),
}


@dataclass(frozen=True)
class GaePeConfig(Config):
    """Parameters of :class:`~rtl_gen.gae.pe.GaeProcessingElement`.

    Parameters
    ----------
    data_width : int
        Bits of rewards, values, advantages and rewards-to-go (signed), 8..32.
    data_frac : int
        Fraction bits of the data format, 0..data_width-2 (at least one integer bit besides the
        sign).
    coef_width : int
        Bits of the runtime coefficients gamma and gamma*lambda, 4..24. Unsigned with
        ``coef_width - 1`` fraction bits, so the range is [0, 2) and 1.0 is exact. The default
        17 makes them 18-bit signed multiplier operands, which fit a DSP48E2's B port (18 bits
        cost twice the DSPs).
    k : int
        Registers in the advantage feedback loop, 1..16. In ``"lookahead"`` mode the loop is
        unrolled k steps (HEPPO's k-step lookahead); in ``"interleaved"`` mode k trajectories
        share the PE round-robin.
    mode : str
        ``"lookahead"`` or ``"interleaved"``.
    rounding : str
        Rounding mode of every dropped fraction bit (see :mod:`sw.fixed`).
    timestep_bits, trajectory_bits : int
        Widths of the tags carried from input to output unchanged.
    """
    what = "GAE PE"

    data_width: int = 32
    data_frac: int = 16
    coef_width: int = 17
    k: int = 2
    mode: str = "lookahead"
    rounding: str = "half_up"
    timestep_bits: int = 16
    trajectory_bits: int = 8

    def __post_init__(self):
        for name, (lo, hi) in LIMITS.items():
            check_int(name, getattr(self, name), lo, hi)
        check_int("data_frac", self.data_frac, 0, self.data_width - 2)
        if self.mode not in GAE_MODES:
            raise ValueError(f"mode must be one of {', '.join(GAE_MODES)}, not {self.mode!r}")
        if self.rounding not in ROUNDING_MODES:
            raise ValueError(f"rounding must be one of {', '.join(ROUNDING_MODES)}, "
                             f"not {self.rounding!r}")
        # Widest intermediate: lookahead sum of k products data x coef (see pe.py), plus sign.
        need = self.data_width + self.coef_width + 2 + self.k.bit_length()
        if need > MAX_INTERMEDIATE_BITS:  # pragma: no cover - excluded by the limits above
            raise ValueError(f"data_width + coef_width too large for k={self.k}")

    # -- derived ------------------------------------------------------------------------------
    @cached_property
    def data_format(self) -> FixedFormat:
        return FixedFormat(self.data_width, self.data_frac, True, self.rounding)

    @property
    def coef_format(self) -> FixedFormat:
        return FixedFormat(self.coef_width, self.coef_width - 1, False, self.rounding)

    @property
    def coef_frac(self) -> int:
        return self.coef_width - 1

    @property
    def lookahead_steps(self) -> int:
        """Steps the recurrence is unrolled by (1 in interleaved mode)."""
        return self.k if self.mode == "lookahead" else 1

    @property
    def lanes(self) -> int:
        """Independent recurrences in flight: element n of the stream belongs to lane n mod k."""
        return self.k

    @property
    def multiplier_parts(self) -> int:
        """DSP48E2 products a data value times a coefficient is split into (17-bit parts)."""
        return 1 if self.data_width <= 18 else 2

    @property
    def lookahead_levels(self) -> int:
        """Pipeline stages of the look-ahead adder tree (three operands an adder): 0 unless
        lookahead with k > 1."""
        if self.lookahead_steps == 1:
            return 0
        n, levels = 1 + self.multiplier_parts * (self.k - 1), 0
        while n > 1:
            n, levels = -(-n // 3), levels + 1
        return levels

    #: Pipeline registers before the feedback loop (input; gamma*V' products and r - V; the
    #: product; delta before saturation; delta) and after it (A; A + V; RTG).
    PRE_STAGES = 5
    POST_STAGES = 3

    @property
    def post_stages(self) -> int:
        """Pipeline registers after the feedback loop: :attr:`POST_STAGES`, one more with k = 2,
        whose loop keeps A before saturation (the output saturates it a register later)."""
        return self.POST_STAGES + (self.k == 2)

    @property
    def latency(self) -> int:
        """Cycles from an input transfer to the output of that element (no stalls)."""
        # [masked powers and history; their products; the adder tree]; k loop registers
        # (the last is the lane's A register, read by the first output stage).
        extra = 2 + self.lookahead_levels if self.lookahead_steps > 1 else 0
        return self.PRE_STAGES + extra + (self.k - 1) + self.post_stages

    @property
    def coef_settle(self) -> int:
        """Cycles after ``gamma``/``gamma_lambda`` change until everything computed from them
        is settled: the coefficient registers, then the powers of gamma*lambda (lookahead with
        k > 1: five registers a power: the product in LUTs in three, rounded, saturated)."""
        return 1 + (5 * (self.k - 1) if self.lookahead_steps > 1 else 0)

    @property
    def coef_use(self) -> int:
        """Cycles from an element's input transfer to the edge where it first needs the
        powers of gamma*lambda settled (the masked powers register after the pre-loop
        stages)."""
        return self.PRE_STAGES
