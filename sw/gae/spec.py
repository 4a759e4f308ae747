"""The GAE blocks' specification: configurations, formats, register maps, layout facts, error
codes and exact cycle models (HEPPO). Plain Python, no Amaranth: the generators in
:mod:`rtl_gen.gae`, the golden models in :mod:`sw.gae.model` and :mod:`sw.gae.golden`, the golden
device and the driver all derive from this module.

* :class:`GaePeConfig` -- one processing element (:class:`~rtl_gen.gae.pe.GaeProcessingElement`);
  its :attr:`~GaePeConfig.latency` (:mod:`sw.gae.pe_spec`, re-exported here).
* :class:`GaeCoreConfig` -- the accelerator (stack memory, N PEs, (de)quantizers); memory
  regions and their word sizes (the byte images are :mod:`sw.gae.layout`).
* :data:`GAE_CORE_ARGS`, :class:`GaeCoreArgs`, :data:`ERRORS`, :func:`check_args` -- the run
  arguments and the refusal rules; :data:`STATUS_FLAGS`; :func:`gae_register_map`.
* :func:`run_cycles` -- cycles of a run, exactly as the RTL takes them.
* :class:`GaeKernelConfig`, :func:`gae_kernel_register_map`, :func:`copy_plan`,
  :func:`kernel_run_cycles` -- the Vitis kernel: the accelerator in the window DMA shell.
"""

from dataclasses import dataclass
from functools import cached_property

from sw.config import Config, check_int
from sw.fixed import FixedFormat, ScaleFormat
from sw.regmap import Field, Info, Register, RegisterMap
from sw.shell.spec import DmaParams, copy_cycles, kernel_register_map

from .pe_spec import GAE_MODES, LIMITS, GaePeConfig

__all__ = ["GAE_MODES", "GAE_RESULT_MODES", "AXI_DATA_WIDTHS", "LIMITS", "MAX_RUN_TRAJECTORIES",
           "GaePeConfig", "GaeCoreConfig", "GAE_CORE_ARGS", "GaeCoreArgs", "ERRORS", "ERROR_CODES",
           "GAE_CORE_ERRORS", "check_args", "STATUS_FLAGS", "gae_register_map", "hw_info_values",
           "config_from_hw", "run_cycles", "GaeKernelConfig", "gae_kernel_register_map",
           "copy_plan", "kernel_run_cycles", "dequant_scale_format", "check_registers"]

GAE_RESULT_MODES = ("inplace", "full")
AXI_DATA_WIDTHS = (32, 64, 128, 256, 512)


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


@dataclass(frozen=True)
class GaeCoreConfig(Config):
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
        Format of the offset registers of the (de)quantizers (signed fixed point; ``reg_frac``
        at most :attr:`REQUANT_FRAC`). The scale registers are 32-bit words of
        :class:`~sw.fixed.ScaleFormat` (an 18-bit mantissa and a 5-bit shift):
        :attr:`scale_format` (dequantizers), :attr:`result_scale_format` (requantizers).
    axi_data_width : int
        Data width of the AXI4 memory port, one of 32, 64, 128, 256, 512.
    pe : GaePeConfig
        Processing element parameters (data format, k, mode).
    """
    what = "GAE core"

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
        check_int("n_pe", self.n_pe, 1, 128)
        check_int("max_trajectories", self.max_trajectories, 1, 4096)
        check_int("capacity", self.capacity, 1, 65536)
        if self.code_bits not in (8, 16):
            raise ValueError(f"code_bits must be 8 or 16, not {self.code_bits!r}")
        if self.results not in GAE_RESULT_MODES:
            raise ValueError(f"results must be one of {', '.join(GAE_RESULT_MODES)}, "
                             f"not {self.results!r}")
        check_int("reg_width", self.reg_width, 8, 32)
        check_int("reg_frac", self.reg_frac, 0, min(self.reg_width - 2, self.REQUANT_FRAC))
        if self.axi_data_width not in AXI_DATA_WIDTHS:
            raise ValueError(f"axi_data_width must be one of "
                             f"{', '.join(map(str, AXI_DATA_WIDTHS))}, not {self.axi_data_width!r}")
        if self.pe.timestep_bits < self.addr_bits:
            object.__setattr__(self, "pe", GaePeConfig.from_dict(
                dict(self.pe.to_dict(), timestep_bits=self.addr_bits)))

    # -- derived ------------------------------------------------------------------------------
    #: Registers from the memories' read ports to the PEs' inputs: the block RAM, its output
    #: register, the dequantizer's product (one DSP48E2), the product shifted by the scale's
    #: shift, its sum with the offset rounded and saturated.
    READ_LATENCY = 5

    @property
    def write_latency(self) -> int:
        """Registers from the PEs' outputs to the memories' write ports: in place, the
        requantizer's operand shifted by the scale's shift, its range checks, the operand
        saturated to 27 bits, its product with the mantissa (one DSP48E2), the sum with the
        offset, the clamped code; with full results, one."""
        return 6 if self.results == "inplace" else 1

    @property
    def drain_cycles(self) -> int:
        """Cycles of the run's drain after its last read (the DRAIN state's counter)."""
        return self.READ_LATENCY + self.pe.latency + self.write_latency - 1

    @property
    def coef_wait(self) -> int:
        """Cycles the run waits at most (counted from start) before its first read, so that
        the PEs' powers of gamma*lambda are settled when the first element needs them:
        ``pe.coef_settle - pe.coef_use - READ_LATENCY`` (with one group, the first read is
        issued 2 cycles after start; conservative by a cycle or two)."""
        return max(0, self.pe.coef_settle - self.pe.coef_use - self.READ_LATENCY)

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

    @cached_property
    def reg_format(self) -> FixedFormat:
        """Format of the offset registers."""
        return FixedFormat(self.reg_width, self.reg_frac, True, self.pe.rounding)

    # -- the scale registers and the (de)quantizers' arithmetic --------------------------------
    #: Bits of a scale register's mantissa (signed) and shift (unsigned), and the shift's lsb.
    SCALE_MANTISSA_BITS = 18
    SCALE_SHIFT_BITS = 5
    SCALE_SHIFT_LSB = 24
    #: Requantizer: the advantage or return is shifted (left by REQUANT_LSHIFT, right by the
    #: register's shift) and saturated to REQUANT_OPERAND_BITS (the DSP48E2's 27-bit A port)
    #: before it meets the 18-bit mantissa; the product has REQUANT_FRAC fraction bits of a code.
    REQUANT_OPERAND_BITS = 27
    REQUANT_LSHIFT = 14
    REQUANT_FRAC = 25

    @property
    def dequant_lshift(self) -> int:
        """Dequantizer: the product ``code * mantissa`` is shifted left by this, then right by
        the register's shift, giving ``data_frac + 1`` fraction bits (one for the rounding):
        ``scale_format.exp0 + 1 + data_frac`` (:func:`dequant_scale_format`)."""
        return self.scale_format.exp0 + 1 + self.pe.data_frac

    @cached_property
    def scale_format(self) -> ScaleFormat:
        """Format of the dequantizers' scale registers (reward_scale, value_scale):
        ``m * 2**(dequant_lshift - 1 - data_frac - e)``; with data_frac 16, ``m * 2**(-8 - e)``,
        2^-23..2^9 at full precision."""
        return dequant_scale_format(self.pe.data_frac)

    @cached_property
    def result_scale_format(self) -> ScaleFormat:
        """Format of the requantizers' scale registers (adv_scale, rtg_scale):
        ``m * 2**(data_frac + REQUANT_LSHIFT - REQUANT_FRAC - e)``; with data_frac 16,
        ``m * 2**(5 - e)``, 2^-10..2^22 at full precision."""
        return ScaleFormat(self.pe.data_frac + self.REQUANT_LSHIFT - self.REQUANT_FRAC,
                           self.SCALE_MANTISSA_BITS, self.SCALE_SHIFT_BITS, self.SCALE_SHIFT_LSB)

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


# -- runs ----------------------------------------------------------------------------------------
#: Most trajectories of one run (the group counter's range).
MAX_RUN_TRAJECTORIES = 4096


def GAE_CORE_ARGS(config: GaeCoreConfig) -> dict:
    """Run arguments (the core's argument ports and the registers of the same names, upper
    case): name -> (width, signed)."""
    cw, rw = config.pe.coef_width, config.reg_width
    args = {
        "num_timesteps": (32, False), "num_trajectories": (32, False),
        "gamma": (cw, False), "gamma_lambda": (cw, False),
        "reward_scale": (32, False), "reward_offset": (rw, True),
        "value_scale": (32, False), "value_offset": (rw, True),
    }
    if config.results == "inplace":
        args.update({"adv_scale": (32, False), "adv_offset": (rw, True),
                     "rtg_scale": (32, False), "rtg_offset": (rw, True)})
    return args


def dequant_scale_format(data_frac: int) -> ScaleFormat:
    """:attr:`GaeCoreConfig.scale_format` of a PE data format with ``data_frac`` fraction
    bits (what the host needs to know of the dequantizers' scales)."""
    lshift = max(0, data_frac - 7)
    return ScaleFormat(lshift - 1 - data_frac, GaeCoreConfig.SCALE_MANTISSA_BITS,
                       GaeCoreConfig.SCALE_SHIFT_BITS, GaeCoreConfig.SCALE_SHIFT_LSB)


def check_registers(args, config: GaeCoreConfig, names=None, prefix=""):
    """``ValueError`` naming the first argument register a driver must not write: a scale word
    that is no :class:`~sw.fixed.ScaleFormat` word (nonzero reserved bits), an offset outside
    its format, or a requantizer scale too small for its offset (the 27-bit operand window
    would saturate before the code does: ``0 < (2^26 - 1) * |m| < (qmax + 1) * 2^REQUANT_FRAC
    + |offset| * 2^(REQUANT_FRAC - reg_frac)``). The accelerator itself ignores the reserved
    bits. ``names``: check only the registers of these arguments (default all); ``prefix``
    goes before the argument's name in the message."""
    kinds = ["reward", "value"] + (["adv", "rtg"] if config.results == "inplace" else [])
    for kind in kinds:
        if names is not None and f"{kind}_scale" not in names \
                and f"{kind}_offset" not in names:
            continue
        fmt = config.scale_format if kind in ("reward", "value") else config.result_scale_format
        scale, offset = getattr(args, f"{kind}_scale"), getattr(args, f"{kind}_offset")
        fmt.check_raw(scale, f"{prefix}{kind}_scale")
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise ValueError(f"{prefix}{kind}_offset must be an integer, not {offset!r}")
        rf = config.reg_format
        if not rf.min_raw <= offset <= rf.max_raw:
            raise ValueError(f"{prefix}{kind}_offset must be a raw {rf} integer in "
                             f"{rf.min_raw}..{rf.max_raw}, not {offset}")
        if kind in ("adv", "rtg"):
            m, _ = fmt.unpack(scale)
            reach = ((1 << (config.REQUANT_OPERAND_BITS - 1)) - 1) * abs(m)
            need = (config.code_max + 1) * (1 << config.REQUANT_FRAC) \
                + (abs(offset) << (config.REQUANT_FRAC - config.reg_frac))
            if m and reach < need:
                raise ValueError(f"{prefix}{kind}_scale mantissa {m} is too small for "
                                 f"{prefix}{kind}_offset "
                                 f"{offset}: results outside the 27-bit operand window would "
                                 f"not saturate (normalize the mantissa: a larger mantissa, "
                                 f"a larger shift)")


@dataclass
class GaeCoreArgs:
    """Argument registers of one run (raw integers as written over AXI4-Lite)."""
    num_timesteps: int
    num_trajectories: int
    gamma: int
    gamma_lambda: int
    reward_scale: int
    reward_offset: int
    value_scale: int
    value_offset: int
    adv_scale: int = 0
    adv_offset: int = 0
    rtg_scale: int = 0
    rtg_offset: int = 0


#: STATUS.ERROR: code -> (name, text). A refused run ends at once with memory untouched.
ERROR_CODES = {
    0: ("ok", "ok"),
    1: ("no_timesteps", "num_timesteps is 0"),
    2: ("no_trajectories", "num_trajectories is 0"),
    3: ("capacity", "(num_timesteps + 1) * ceil(num_trajectories / n_pe) exceeds the memory "
                    "depth, or num_trajectories exceeds 4096"),
    4: ("coefficient", "gamma or gamma_lambda above 1.0"),
}
#: STATUS.ERROR code -> its text (the drivers' exception messages).
ERRORS = {code: text for code, (_, text) in ERROR_CODES.items()}
#: Error name -> STATUS.ERROR code (the gateware's constants).
GAE_CORE_ERRORS = {name: code for code, (name, _) in ERROR_CODES.items()}


def check_args(args: GaeCoreArgs, config: GaeCoreConfig) -> int:
    """The STATUS.ERROR code the accelerator reports for these arguments (0: the run starts)."""
    if args.num_timesteps == 0:
        return GAE_CORE_ERRORS["no_timesteps"]
    if args.num_trajectories == 0:
        return GAE_CORE_ERRORS["no_trajectories"]
    groups = -(-args.num_trajectories // config.n_pe)
    if (args.num_timesteps + 1) * groups > config.depth \
            or args.num_trajectories > MAX_RUN_TRAJECTORIES:
        return GAE_CORE_ERRORS["capacity"]
    one = 1 << config.pe.coef_frac
    if args.gamma > one or args.gamma_lambda > one:
        return GAE_CORE_ERRORS["coefficient"]
    return 0


def run_cycles(config: GaeCoreConfig, num_timesteps: int, num_trajectories: int) -> int:
    """Cycles of a run with valid arguments, from the edge that samples ``start`` to the edge
    that raises ``done`` (CYCLES reads one less).

    Exactly what the RTL takes (asserted by the tests): accept, ``G = ceil(M / n_pe)`` setup
    cycles, the wait for the coefficient powers (``config.coef_wait - G`` when positive), one
    group-start cycle, ``ceil(G/L)*L*(T+1)`` reads (``L = k`` in interleaved mode, else 1),
    ``drain_cycles + 1`` cycles of drain (``READ_LATENCY + pe.latency + write_latency``).
    """
    pe = config.pe
    G = -(-num_trajectories // config.n_pe)
    L = pe.k if pe.mode == "interleaved" else 1
    wait = max(0, config.coef_wait - G)
    return 1 + G + 1 + wait + -(-G // L) * L * (num_timesteps + 1) + config.drain_cycles + 1


# -- register map --------------------------------------------------------------------------------
_ARG_DOCS = {
    "num_timesteps": "time steps T of the run (rows 0..T-1; row T holds the bootstrap values)",
    "num_trajectories": "trajectories M of the run",
    "gamma": "discount gamma, unsigned, coef_width - 1 fraction bits (<= 1.0)",
    "gamma_lambda": "gamma * lambda, same format (<= 1.0)",
    "reward_scale": "reward dequantizer: reward = code * scale + offset; scale word: mantissa "
                    "m bits 17:0 (signed), shift e bits 28:24, other bits 0; scale = "
                    "m * 2^({deq_exp0} - e)",
    "reward_offset": "reward dequantizer offset (reg format)",
    "value_scale": "value dequantizer scale (block std folded in; scale word, "
                   "m * 2^({deq_exp0} - e))",
    "value_offset": "value dequantizer offset (block mean, reg format)",
    "adv_scale": "advantage requantizer: code = round(A * scale + offset), saturated; "
                 "scale word, scale = m * 2^({req_exp0} - e)",
    "adv_offset": "advantage requantizer offset (reg format)",
    "rtg_scale": "reward-to-go requantizer scale (scale word, m * 2^({req_exp0} - e))",
    "rtg_offset": "reward-to-go requantizer offset (reg format)",
}

#: STATUS flag fields: name -> (bit, doc). Cleared when a run starts.
STATUS_FLAGS = {
    "DEQUANT_OVERFLOW": (8, "a dequantized reward or value saturated"),
    "PE_OVERFLOW": (9, "a delta, advantage or reward-to-go saturated in a PE"),
    "REQUANT_OVERFLOW": (10, "a result code saturated (in-place results)"),
    "START_REFUSED": (11, "AP_START was written while a run was in progress; it was dropped"),
}


def _info(name, lsb, width, param, **kw):
    return Field(name, lsb, width, "ro", info=Info(param, **kw))


def gae_register_map(config: GaeCoreConfig) -> RegisterMap:
    """ap_ctrl_hs control registers, run arguments, status, cycle counter, hardware info."""
    exps = {"deq_exp0": config.scale_format.exp0, "req_exp0": config.result_scale_format.exp0}
    args = [Register.scalar(name.upper(), width, "rw", doc=_ARG_DOCS[name].format(**exps))
            for name, (width, _) in GAE_CORE_ARGS(config).items()]
    errors = ", ".join(f"{code} {name}" for code, (name, _) in ERROR_CODES.items())
    status = Register("STATUS", None, (
        Field("ERROR", 0, 3, "ro", doc=f"error of the last start ({errors})"),
        *(Field(name, bit, 1, "ro", doc=doc) for name, (bit, doc) in STATUS_FLAGS.items()),
    ), doc="result of the last run; flags are sticky during a run, cleared at start")
    hw = [
        Register.scalar("CYCLES", 32, "ro", doc="cycles of the last run (start to done)"),
        Register.scalar("HW_N_PE", 32, "ro", doc=f"processing elements ({config.n_pe})",
                        info=Info("n_pe")),
        Register.scalar("HW_DEPTH", 32, "ro", doc=f"words per memory ({config.depth})",
                        info=Info("depth")),
        Register("HW_FORMAT", None, (
            _info("DATA_WIDTH", 0, 8, "pe.data_width"), _info("DATA_FRAC", 8, 8, "pe.data_frac"),
            _info("COEF_WIDTH", 16, 8, "pe.coef_width"), _info("CODE_BITS", 24, 8, "code_bits")),
            doc="number formats"),
        Register("HW_MODE", None, (
            _info("K", 0, 5, "pe.k"), _info("INTERLEAVED", 5, 1, "pe.mode", choices=GAE_MODES),
            _info("FULL_RESULTS", 6, 1, "results", choices=GAE_RESULT_MODES),
            _info("REG_WIDTH", 8, 8, "reg_width"), _info("REG_FRAC", 16, 8, "reg_frac"),
            _info("AXI_BYTES", 24, 8, "axi_data_width", scale=8)),
            doc="PE mode, result mode, register format, memory bus width"),
    ]
    return RegisterMap.with_ap_ctrl_hs("gae", args + [status] + hw,
                                       doc="HEPPO GAE accelerator")


def hw_info_values(config: GaeCoreConfig) -> dict:
    """The constant HW_* register words of ``config`` (what the hardware reports)."""
    return gae_register_map(config).info_values(config)


def config_from_hw(params: dict) -> GaeCoreConfig:
    """A configuration with the parameters the HW_* registers hold
    (:meth:`~sw.regmap.RegisterMap.decode_info`). ``depth`` is one split into
    ``max_trajectories`` and ``capacity`` (any split with the same depth behaves the same);
    the rounding mode and tag widths are not in the registers (defaults). ``ValueError`` if
    they describe no valid configuration."""
    pe = GaePeConfig(**{k[3:]: v for k, v in params.items() if k.startswith("pe.")})
    n_pe, depth = params["n_pe"], params["depth"]
    common = {k: v for k, v in params.items() if "." not in k and k not in ("n_pe", "depth")}
    if not 1 <= n_pe <= 128:
        raise ValueError(f"n_pe must be in 1..128, not {n_pe}")
    for groups in range(1, MAX_RUN_TRAJECTORIES // n_pe + 1):
        if depth % groups == 0 and 2 <= depth // groups <= 65537:
            return GaeCoreConfig(n_pe=n_pe, max_trajectories=groups * n_pe,
                                 capacity=depth // groups - 1, pe=pe, **common)
    raise ValueError(f"depth {depth} is no (capacity + 1) * groups of a configuration")


# -- Vitis kernel (DMA shell) --------------------------------------------------------------------


@dataclass(frozen=True)
class GaeKernelConfig(DmaParams, GaeCoreConfig):
    """:class:`GaeCoreConfig` and the window shell's parameters
    (:class:`~sw.shell.spec.DmaParams`: ``gmem_data_width``, ``max_burst``,
    ``max_outstanding``), for the Vitis kernel. The window is the accelerator's memory regions
    (:mod:`sw.gae.layout`), ``axi_data_width``-bit words; ``gmem_data_width`` must be at least
    ``axi_data_width`` and ``gmem_data_width / 8`` must divide the window's bytes.
    :attr:`accel` is the :class:`GaeCoreConfig` part (what the core, its register map and
    driver use).
    """
    what = "GAE kernel"
    kernel_name = "gae_kernel"
    kernel_doc = "HEPPO GAE accelerator as a Vitis kernel (window DMA shell)"
    accel_register_map = staticmethod(gae_register_map)

    @property
    def window_word_bits(self) -> int:
        return self.axi_data_width

    @property
    def window_bytes(self) -> int:
        return len(self.regions) * self.region_bytes


#: The kernel's control map (:func:`sw.shell.spec.kernel_register_map`).
gae_kernel_register_map = kernel_register_map


def copy_plan(config: GaeCoreConfig, num_timesteps: int, num_trajectories: int, *,
              returns: bool = True) -> dict:
    """The blocks one batch moves: ``{"in": [...], "out": [...]}`` of ``(region, byte
    offset in the image, bytes)``, in the order the driver writes and reads them (on a Vitis
    kernel, the copies it commands). ``returns=False``: the returns' block is not read (the
    driver's runs in the caller's units, whose returns are the advantages plus the caller's
    values).

    With ``G = ceil(M / n_pe)``: in, rows ``0..T-1`` of ``rewards`` and ``dones`` and rows
    ``0..T`` of ``values`` (the bootstrap row); out, rows ``0..T-1`` of the result regions
    (``rewards`` and ``values`` in place, ``adv`` and ``rtg`` at full precision). Row ``t`` of
    a region is words ``t*G .. t*G+G-1``, so every block starts at its region's base.
    """
    G = -(-num_trajectories // config.n_pe)
    T = num_timesteps

    def block(name, rows):
        base = config.regions.index(name) * config.region_bytes
        return (name, base, rows * config.region_sub_words(name) * config.axi_data_width // 8)

    outs = ("rewards", "values") if config.results == "inplace" else ("adv", "rtg")
    return {"in": [block("rewards", T * G), block("values", (T + 1) * G),
                   block("dones", T * G)],
            "out": [block(name, T * G) for name in outs[:2 if returns else 1]]}


def kernel_run_cycles(config: GaeKernelConfig, num_timesteps: int, num_trajectories: int, *,
                      latency: int, returns: bool = True) -> int:
    """Kernel cycles of one GAE batch on the Vitis kernel: the host-commanded copies of
    :func:`copy_plan` (each :func:`~sw.shell.spec.copy_cycles` when device memory answers
    ``latency`` cycles after a request and never stalls) plus the run (:func:`run_cycles`).
    The host's register accesses between them are not counted. ``returns``: as
    :func:`copy_plan`."""
    plan = copy_plan(config, num_timesteps, num_trajectories, returns=returns)
    wb = config.axi_data_width // 8
    return (sum(copy_cycles(n, wb, latency=latency) for _, _, n in plan["in"])
            + sum(copy_cycles(n, wb, latency=latency, to_device=True) for _, _, n in plan["out"])
            + run_cycles(config.accel, num_timesteps, num_trajectories))
