"""Configuration of the GAE processing element, shared by generator, golden model and driver."""

from dataclasses import asdict, dataclass

from ..fixed import MAX_INTERMEDIATE_BITS, ROUNDING_MODES, FixedFormat

__all__ = ["GAE_MODES", "GAE_RESULT_MODES", "GaePeConfig", "GaeCoreConfig"]

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
        Rounding mode of every dropped fraction bit (see :mod:`rtl_gen.fixed`).
    timestep_bits, trajectory_bits : int
        Widths of the tags carried from input to output unchanged.
    """
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


GAE_RESULT_MODES = ("inplace", "full")
AXI_DATA_WIDTHS = (32, 64, 128, 256, 512)


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


@dataclass(frozen=True)
class GaeCoreConfig:
    """Parameters of the HEPPO GAE accelerator (:class:`~rtl_gen.gae.core.GaeCore`).

    Parameters
    ----------
    n_pe : int
        Processing elements, 1..128. One memory word holds one time step of ``n_pe``
        trajectories; PE p handles trajectories p, p + n_pe, ... (round-robin by group).
    max_trajectories : int
        Trajectories the memory is sized for, 1..4096.
    capacity : int
        Time steps the memory is sized for (with ``max_trajectories``), 1..65536. A run of T steps
        and M trajectories fits if ``(T + 1) * ceil(M / n_pe) <= depth`` (the extra row holds the
        bootstrap values), so fewer trajectories allow more steps.
    code_bits : int
        Bits of the stored reward and value codes (signed), 8 or 16.
    results : str
        ``"inplace"``: advantages and rewards-to-go are requantized to codes (host-given affine
        map, saturating) and overwrite the rewards and values. ``"full"``: they are written in the
        PE's data format to two separate result memories.
    reg_width, reg_frac : int
        Format of the scale/offset registers of the (de)quantizers (signed).
    axi_data_width : int
        Data width of the AXI4 memory port, one of 32, 64, 128, 256, 512.
    pe : GaePeConfig
        Processing element parameters (data format, k, mode).
    """
    n_pe: int = 8
    max_trajectories: int = 64
    capacity: int = 1024
    code_bits: int = 8
    results: str = "inplace"
    reg_width: int = 32
    reg_frac: int = 16
    axi_data_width: int = 128
    pe: GaePeConfig = GaePeConfig()

    def __post_init__(self):
        if isinstance(self.pe, dict):
            object.__setattr__(self, "pe", GaePeConfig.from_dict(self.pe))
        if not isinstance(self.pe, GaePeConfig):
            raise ValueError(f"pe must be a GaePeConfig or a dict of its parameters, "
                             f"not {self.pe!r}")
        _check_int("n_pe", self.n_pe, 1, 128)
        _check_int("max_trajectories", self.max_trajectories, 1, 4096)
        _check_int("capacity", self.capacity, 1, 65536)
        if self.code_bits not in (8, 16):
            raise ValueError(f"code_bits must be 8 or 16, not {self.code_bits!r}")
        if self.results not in GAE_RESULT_MODES:
            raise ValueError(f"results must be one of {', '.join(GAE_RESULT_MODES)}, "
                             f"not {self.results!r}")
        _check_int("reg_width", self.reg_width, 8, 32)
        _check_int("reg_frac", self.reg_frac, 0, self.reg_width - 2)
        if self.axi_data_width not in AXI_DATA_WIDTHS:
            raise ValueError(f"axi_data_width must be one of "
                             f"{', '.join(map(str, AXI_DATA_WIDTHS))}, not {self.axi_data_width!r}")
        if self.pe.timestep_bits < self.addr_bits:
            object.__setattr__(self, "pe", GaePeConfig.from_dict(
                dict(self.pe.to_dict(), timestep_bits=self.addr_bits)))

    # -- derived ------------------------------------------------------------------------------
    @property
    def groups(self) -> int:
        """Memory words per time step at full size: ceil(max_trajectories / n_pe)."""
        return -(-self.max_trajectories // self.n_pe)

    @property
    def depth(self) -> int:
        """Words in each memory: (capacity + 1) * groups."""
        return (self.capacity + 1) * self.groups

    @property
    def addr_bits(self) -> int:
        return max(1, (self.depth - 1).bit_length())

    @property
    def reg_format(self) -> FixedFormat:
        return FixedFormat(self.reg_width, self.reg_frac, True, self.pe.rounding)

    @property
    def code_format(self) -> FixedFormat:
        """Codes: signed integers, symmetric range -(2^(b-1) - 1)..2^(b-1) - 1 when produced."""
        return FixedFormat(self.code_bits, 0, True, self.pe.rounding)

    @property
    def code_max(self) -> int:
        return (1 << (self.code_bits - 1)) - 1

    def region_word_bits(self, name: str) -> int:
        """Bits of one memory word of a region (``rewards``, ``values``, ``dones``, ``adv``,
        ``rtg``)."""
        if name in ("rewards", "values"):
            return self.n_pe * self.code_bits
        if name == "dones":
            return -(-self.n_pe // 8) * 8
        if name in ("adv", "rtg"):
            return self.n_pe * self.pe.data_width
        raise ValueError(f"unknown region {name!r}")

    @property
    def regions(self) -> tuple:
        base = ("rewards", "values", "dones")
        return base + (("adv", "rtg") if self.results == "full" else ())

    def region_sub_words(self, name: str) -> int:
        """AXI words per memory word of a region (a power of two; the rest is padding)."""
        return _pow2_at_least(-(-self.region_word_bits(name) // self.axi_data_width))

    @property
    def region_bytes(self) -> int:
        """Bytes of host address space per region (a power of two; every region the same)."""
        most = max(self.region_sub_words(r) for r in self.regions)
        return _pow2_at_least(self.depth) * most * self.axi_data_width // 8

    @property
    def mem_addr_bits(self) -> int:
        """Byte-address bits of the AXI4 memory port."""
        return (_pow2_at_least(len(self.regions)) * self.region_bytes - 1).bit_length()

    def to_dict(self) -> dict:
        d = asdict(self)
        d["pe"] = self.pe.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "GaeCoreConfig":
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown GAE core parameter(s): {', '.join(sorted(unknown))}")
        return cls(**d)
