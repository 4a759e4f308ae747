"""Configuration of the GAE processing element, shared by generator, golden model and driver."""

from dataclasses import asdict, dataclass

from ..fixed import MAX_INTERMEDIATE_BITS, ROUNDING_MODES, FixedFormat

__all__ = ["GAE_MODES", "GaePeConfig"]

GAE_MODES = ("lookahead", "interleaved")

#: Accepted ranges, used for validation, the CLI help and the docs.
LIMITS = {
    "data_width": (8, 32),
    "coef_width": (4, 24),
    "k": (1, 16),
    "timestep_bits": (1, 32),
    "trajectory_bits": (1, 16),
}


def _check_int(name, value, lo, hi):
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise ValueError(f"{name} must be an integer in {lo}..{hi}, not {value!r}")


@dataclass(frozen=True)
class GaePeConfig:
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
        ``coef_width - 1`` fraction bits, so the range is [0, 2) and 1.0 is exact.
    k : int
        Registers in the advantage feedback loop, 1..16. In ``"lookahead"`` mode the loop is
        unrolled k steps (HEPPO's k-step lookahead); in ``"interleaved"`` mode k trajectories
        share the PE round-robin.
    mode : str
        ``"lookahead"`` or ``"interleaved"``.
    rounding : str
        Rounding mode of every dropped fraction bit (see :mod:`rtl_gen.fixed`).
    timestep_bits, trajectory_bits : int
        Widths of the tags carried from input to output unchanged.
    """
    data_width: int = 32
    data_frac: int = 16
    coef_width: int = 18
    k: int = 2
    mode: str = "lookahead"
    rounding: str = "half_up"
    timestep_bits: int = 16
    trajectory_bits: int = 8

    def __post_init__(self):
        for name, (lo, hi) in LIMITS.items():
            _check_int(name, getattr(self, name), lo, hi)
        _check_int("data_frac", self.data_frac, 0, self.data_width - 2)
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
    @property
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
    def latency(self) -> int:
        """Cycles from an input transfer to the output of that element (no stalls)."""
        # input, gamma*V product, delta; [history products, sum]; k-1 loop registers; A; RTG.
        extra = 2 if self.lookahead_steps > 1 else 0
        return 3 + extra + (self.k - 1) + 2

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "GaePeConfig":
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown GAE PE parameter(s): {', '.join(sorted(unknown))}")
        return cls(**d)
