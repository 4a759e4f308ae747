"""The learner accelerator's register map: the one description of its AXI4-Lite registers.

The CSR hardware (:class:`~rtl_gen.axi.lite_csr.AxiLiteCsr`), the JSON map and C header written
next to the Verilog and a host driver all come from :func:`learner_register_map`.
"""

from ..regmap import Field, Register, RegisterMap
from .config import LOSS_KINDS, LearnerConfig
from .core import LEARNER_ERRORS, LEARNER_FLAGS, SYNC_BITS

__all__ = ["learner_register_map", "STATUS_FLAGS", "hw_info_values", "LEARNER_ARGS",
           "SYNC_ARGS", "TARGET_SYNCED_BIT"]

#: Step arguments: register name -> (core port, doc).
LEARNER_ARGS = {
    "BATCH_SIZE": ("batch_size", "samples B of the step, 1..max_batch"),
    "LR": ("lr", "update coefficient eta = lr * 2 / B, unsigned, lr_frac fraction bits"),
    "GAMMA": ("gamma", "discount gamma (DQN), unsigned, coef_width - 1 fraction bits"),
}

#: Target-network sync arguments (DQN only): register name -> (core port, bits, doc).
SYNC_ARGS = {
    "SYNC_TARGET": ("sync_target", 1, "1: copy the updated weights w<l> into the target "
                    "network tw<l> at the end of the step (no extra cycles)"),
    "SYNC_PERIOD": ("sync_period", SYNC_BITS, "N > 0: also sync at every N-th step counted "
                    "since the last sync (DQN target update period); 0: off"),
}
#: STATUS bit of the last step's target sync (DQN only).
TARGET_SYNCED_BIT = 16

#: STATUS flag fields: name -> (bit, core flag, doc). Sticky during a step, cleared at start.
STATUS_FLAGS = {
    "FW_OVERFLOW": (8, "fw", "an activation or Q value saturated (FW)"),
    "TARGET_FW_OVERFLOW": (9, "target_fw", "a target network value saturated"),
    "TARGET_OVERFLOW": (10, "target", "a TD target saturated"),
    "DELTA_OVERFLOW": (11, "delta", "an output error delta saturated (LOSS)"),
    "BW_OVERFLOW": (12, "bw", "a back-propagated error saturated (BW)"),
    "WA_OVERFLOW": (13, "wa", "a weight gradient saturated (WA)"),
    "WU_OVERFLOW": (14, "wu", "an updated weight saturated (WU)"),
    "START_REFUSED": (15, None, "AP_START was written during a step; it was dropped"),
}
assert {f for _, f, _ in STATUS_FLAGS.values() if f} == set(LEARNER_FLAGS)


def hw_info_values(config: LearnerConfig) -> dict:
    """Constant read-only registers describing the hardware, for a driver to check."""
    out = {
        "HW_ARRAY": config.array | config.sub_batch << 8 | config.max_batch << 16,
        "HW_LAYERS": (config.n_layers | LOSS_KINDS.index(config.loss) << 4
                      | (config.axi_data_width // 8) << 8 | config.dp << 16),
        "HW_FORMAT": (config.width | config.act_frac << 8 | config.weight_frac << 16
                      | config.grad_frac << 24),
        "HW_FORMAT2": (config.acc_width | config.coef_width << 8 | config.lr_width << 16
                       | config.lr_frac << 24),
    }
    for i, n in enumerate(config.sizes):
        out[f"HW_SIZE{i}"] = n
    return out


def learner_register_map(config: LearnerConfig) -> RegisterMap:
    """ap_ctrl_hs control registers, step arguments, status, loss, cycles, hardware info."""
    num = config.numerics
    widths = {"BATCH_SIZE": 13, "LR": num.lr_width, "GAMMA": num.coef_width}
    dqn = config.loss == "dqn"
    args = [Register.scalar(name, widths[name], "rw", doc=doc)
            for name, (_, doc) in LEARNER_ARGS.items()]
    if dqn:
        args += [Register.scalar(name, bits, "rw", doc=doc)
                 for name, (_, bits, doc) in SYNC_ARGS.items()]
    errors = ", ".join(f"{v} {k}" for k, v in LEARNER_ERRORS.items())
    synced = ((Field("TARGET_SYNCED", TARGET_SYNCED_BIT, 1, "ro",
                     doc="the last step copied w<l> into tw<l> (DQN)"),) if dqn else ())
    status = Register("STATUS", None, (
        Field("ERROR", 0, 2, "ro", doc=f"error of the last start ({errors})"),
        *(Field(name, bit, 1, "ro", doc=doc) for name, (bit, _, doc) in STATUS_FLAGS.items()),
        *synced,
    ), doc="result of the last step; flags are sticky during a step, cleared at start")
    regs = [
        Register.scalar("LOSS_LO", 32, "ro", doc="sum over the batch of (Q - y)^2, raw "
                        "(2 act_frac fraction bits), bits 31..0"),
        Register.scalar("LOSS_HI", 32, "ro", doc="bits 63..32 of the loss sum"),
        Register.scalar("CYCLES", 32, "ro", doc="cycles of the last step (start to done)"),
    ]
    if dqn:
        regs.append(Register.scalar("SYNC_COUNT", SYNC_BITS, "ro",
                                    doc="steps since the last target sync (saturating)"))
    regs += [
        Register("HW_ARRAY", None, (
            Field("ARRAY", 0, 8, "ro"), Field("SUB_BATCH", 8, 8, "ro"),
            Field("MAX_BATCH", 16, 16, "ro")),
            doc="tensor unit size S, samples per sub-batch, largest batch"),
        Register("HW_LAYERS", None, (
            Field("LAYERS", 0, 4, "ro"), Field("LOSS", 4, 4, "ro"),
            Field("AXI_BYTES", 8, 8, "ro"), Field("DP", 16, 8, "ro")),
            doc=f"weight layers, loss ({', '.join(f'{i} {k}' for i, k in enumerate(LOSS_KINDS))})"
                f", memory bus bytes, parallel pipelines"),
        Register("HW_FORMAT", None, (
            Field("WIDTH", 0, 8, "ro"), Field("ACT_FRAC", 8, 8, "ro"),
            Field("WEIGHT_FRAC", 16, 8, "ro"), Field("GRAD_FRAC", 24, 8, "ro")),
            doc="operand formats"),
        Register("HW_FORMAT2", None, (
            Field("ACC_WIDTH", 0, 8, "ro"), Field("COEF_WIDTH", 8, 8, "ro"),
            Field("LR_WIDTH", 16, 8, "ro"), Field("LR_FRAC", 24, 8, "ro")),
            doc="gradient, discount and learning-rate formats"),
    ]
    regs += [Register.scalar(f"HW_SIZE{i}", 16, "ro", doc=f"neurons of layer {i} ({n})")
             for i, n in enumerate(config.sizes)]
    return RegisterMap.with_ap_ctrl_hs("learner", args + [status] + regs,
                                       doc="MLP learner pipeline (CF'22 section 3.2)")
