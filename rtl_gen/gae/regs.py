"""The GAE accelerator's register map: the one description of its AXI4-Lite registers.

The CSR hardware (:class:`~rtl_gen.axi.lite_csr.AxiLiteCsr`), the JSON map and C header written
next to the Verilog, the README table and the host driver all come from :func:`gae_register_map`.
"""

from ..regmap import Field, Register, RegisterMap
from .config import GaeCoreConfig
from .core import GAE_CORE_ARGS, GAE_CORE_ERRORS

__all__ = ["gae_register_map", "STATUS_FLAGS", "hw_info_values"]

_ARG_DOCS = {
    "num_timesteps": "time steps T of the run (rows 0..T-1; row T holds the bootstrap values)",
    "num_trajectories": "trajectories M of the run",
    "gamma": "discount gamma, unsigned, coef_width - 1 fraction bits (<= 1.0)",
    "gamma_lambda": "gamma * lambda, same format (<= 1.0)",
    "reward_scale": "reward dequantizer: reward = code * scale + offset (reg format)",
    "reward_offset": "reward dequantizer offset (reg format)",
    "value_scale": "value dequantizer scale (block std folded in, reg format)",
    "value_offset": "value dequantizer offset (block mean, reg format)",
    "adv_scale": "advantage requantizer: code = round(A * scale + offset), saturated",
    "adv_offset": "advantage requantizer offset (reg format)",
    "rtg_scale": "reward-to-go requantizer scale (reg format)",
    "rtg_offset": "reward-to-go requantizer offset (reg format)",
}

#: STATUS flag fields: name -> (bit, doc). Cleared when a run starts.
STATUS_FLAGS = {
    "DEQUANT_OVERFLOW": (8, "a dequantized reward or value saturated"),
    "PE_OVERFLOW": (9, "a delta, advantage or reward-to-go saturated in a PE"),
    "REQUANT_OVERFLOW": (10, "a result code saturated (in-place results)"),
    "START_REFUSED": (11, "AP_START was written while a run was in progress; it was dropped"),
}


def hw_info_values(config: GaeCoreConfig) -> dict:
    """Constant read-only registers describing the hardware, for the driver to check."""
    pe = config.pe
    return {
        "HW_N_PE": config.n_pe,
        "HW_DEPTH": config.depth,
        "HW_FORMAT": (pe.data_width | pe.data_frac << 8 | pe.coef_width << 16
                      | config.code_bits << 24),
        "HW_MODE": (pe.k | (pe.mode == "interleaved") << 5 | (config.results == "full") << 6
                    | config.reg_width << 8 | config.reg_frac << 16
                    | (config.axi_data_width // 8) << 24),
    }


def gae_register_map(config: GaeCoreConfig) -> RegisterMap:
    """ap_ctrl_hs control registers, run arguments, status, cycle counter, hardware info."""
    args = [Register.scalar(name.upper(), width, "rw", doc=_ARG_DOCS[name])
            for name, (width, _) in GAE_CORE_ARGS(config).items()]
    errors = ", ".join(f"{v} {k}" for k, v in GAE_CORE_ERRORS.items())
    status = Register("STATUS", None, (
        Field("ERROR", 0, 3, "ro", doc=f"error of the last start ({errors})"),
        *(Field(name, bit, 1, "ro", doc=doc) for name, (bit, doc) in STATUS_FLAGS.items()),
    ), doc="result of the last run; flags are sticky during a run, cleared at start")
    info = hw_info_values(config)
    hw = [
        Register.scalar("CYCLES", 32, "ro", doc="cycles of the last run (start to done)"),
        Register.scalar("HW_N_PE", 32, "ro", doc=f"processing elements ({info['HW_N_PE']})"),
        Register.scalar("HW_DEPTH", 32, "ro", doc=f"words per memory ({info['HW_DEPTH']})"),
        Register("HW_FORMAT", None, (
            Field("DATA_WIDTH", 0, 8, "ro"), Field("DATA_FRAC", 8, 8, "ro"),
            Field("COEF_WIDTH", 16, 8, "ro"), Field("CODE_BITS", 24, 8, "ro")),
            doc="number formats"),
        Register("HW_MODE", None, (
            Field("K", 0, 5, "ro"), Field("INTERLEAVED", 5, 1, "ro"),
            Field("FULL_RESULTS", 6, 1, "ro"), Field("REG_WIDTH", 8, 8, "ro"),
            Field("REG_FRAC", 16, 8, "ro"), Field("AXI_BYTES", 24, 8, "ro")),
            doc="PE mode, result mode, register format, memory bus width"),
    ]
    return RegisterMap.with_ap_ctrl_hs("gae", args + [status] + hw,
                                       doc="HEPPO GAE accelerator")
