"""The learner's host interface: the run codes (STATUS.ERROR, the sticky saturation flags) and
the register map of :class:`~sw.learner.spec.LearnerConfig` (ap_ctrl_hs control, step and
target-sync arguments, STATUS, LOSS, CYCLES, the HW_* registers), with its inverse
:func:`config_from_hw`. Plain Python, no Amaranth; :mod:`sw.learner.spec` re-exports every name.

The configuration is imported where it is used, not at the top: :mod:`sw.learner.spec` imports
this module (its kernel configuration's register map, the re-exports).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sw.regmap import Field, Info, Register, RegisterMap

from .adam import ADAM_ARGS, C1_WIDTH, OPTIMIZERS, log_format

if TYPE_CHECKING:
    from .spec import LearnerConfig

__all__ = ["LEARNER_ERRORS", "ERRORS", "LEARNER_FLAGS", "SYNC_BITS", "LEARNER_ARGS",
           "SYNC_ARGS", "TARGET_SYNCED_BIT", "STATUS_FLAGS", "learner_register_map",
           "config_from_hw", "hw_info_values"]


# -- run codes -----------------------------------------------------------------------------------
#: STATUS.ERROR codes: the batch size register is 0 or above ``max_batch``.
LEARNER_ERRORS = {"ok": 0, "batch_size": 1}
#: STATUS.ERROR code -> text (the driver's exception messages).
ERRORS = {0: "ok", 1: "BATCH_SIZE is 0 or above max_batch"}
assert set(ERRORS) == set(LEARNER_ERRORS.values())

#: Sticky saturation flags, named as the keys of :attr:`sw.learner.mlp.StepResult.overflow`.
LEARNER_FLAGS = ("fw", "target_fw", "target", "delta", "bw", "wa", "wu")

#: Bits of the target-sync period and step counter (DQN): periods up to 65535 steps.
SYNC_BITS = 16


# -- register map ---------------------------------------------------------------------------------
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


def _info(name, lsb, width, param, **kw):
    return Field(name, lsb, width, "ro", info=Info(param, **kw))


def learner_register_map(config: LearnerConfig) -> RegisterMap:
    """ap_ctrl_hs control registers, step arguments, status, loss, cycles, hardware info."""
    from .spec import LOSS_KINDS

    num = config.numerics
    widths = {"BATCH_SIZE": 13, "LR": num.lr_width, "GAMMA": num.coef_width}
    dqn = config.loss == "dqn"
    args = [Register.scalar(name, widths[name], "rw", doc=doc)
            for name, (_, doc) in LEARNER_ARGS.items()]
    if dqn:
        args += [Register.scalar(name, bits, "rw", doc=doc)
                 for name, (_, bits, doc) in SYNC_ARGS.items()]
    if config.optimizer == "adam":
        lw = log_format().width
        args += [Register.scalar(name, lw if signed else C1_WIDTH, "rw", doc=doc)
                 for name, (_, signed, doc) in ADAM_ARGS.items()]
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
    # HW_LAYERS.OPTIMIZER: only in Adam learners' maps (bits 27..24 read 0, SGD, in the others,
    # whose register files stay as they were).
    optimizer, optimizer_doc = (), ""
    if config.optimizer != "sgd":
        optimizer = (_info("OPTIMIZER", 24, 4, "optimizer", choices=OPTIMIZERS),)
        optimizer_doc = (f", optimizer ({', '.join(f'{i} {k}' for i, k in enumerate(OPTIMIZERS))}"
                         f"; bits 27..24 read 0, sgd, where the field is absent)")
    regs += [
        Register("HW_ARRAY", None, (
            _info("ARRAY", 0, 8, "array"), _info("SUB_BATCH", 8, 8, "sub_batch"),
            _info("MAX_BATCH", 16, 16, "max_batch")),
            doc="tensor unit size S, samples per sub-batch, largest batch"),
        Register("HW_LAYERS", None, (
            _info("LAYERS", 0, 4, "n_layers"), _info("LOSS", 4, 4, "loss", choices=LOSS_KINDS),
            _info("AXI_BYTES", 8, 8, "axi_data_width", scale=8), _info("DP", 16, 8, "dp"),
            *optimizer),
            doc=f"weight layers, loss ({', '.join(f'{i} {k}' for i, k in enumerate(LOSS_KINDS))})"
                f", memory bus bytes, parallel pipelines" + optimizer_doc),
        Register("HW_FORMAT", None, (
            _info("WIDTH", 0, 8, "width"), _info("ACT_FRAC", 8, 8, "act_frac"),
            _info("WEIGHT_FRAC", 16, 8, "weight_frac"), _info("GRAD_FRAC", 24, 8, "grad_frac")),
            doc="operand formats"),
        Register("HW_FORMAT2", None, (
            _info("ACC_WIDTH", 0, 8, "acc_width"), _info("COEF_WIDTH", 8, 8, "coef_width"),
            _info("LR_WIDTH", 16, 8, "lr_width"), _info("LR_FRAC", 24, 8, "lr_frac")),
            doc="gradient, discount and learning-rate formats"),
    ]
    regs += [Register.scalar(f"HW_SIZE{i}", 16, "ro", doc=f"neurons of layer {i} ({n})",
                             info=Info(f"sizes.{i}"))
             for i, n in enumerate(config.sizes)]
    return RegisterMap.with_ap_ctrl_hs("learner", args + [status] + regs,
                                       doc="MLP learner pipeline (CF'22 section 3.2)")


def config_from_hw(params: dict) -> LearnerConfig:
    """The configuration the HW_* registers describe (:meth:`~sw.regmap.RegisterMap.decode_info`
    output, with ``sizes.<i>`` for each layer); ``ValueError`` if they describe none. The
    rounding mode and the per-stage arrays are not in the registers (defaults)."""
    from .spec import LearnerConfig

    n_layers = params["n_layers"]
    sizes = tuple(params[f"sizes.{i}"] for i in range(n_layers + 1))
    rest = {k: v for k, v in params.items() if k != "n_layers" and not k.startswith("sizes.")}
    return LearnerConfig(sizes=sizes, **rest)


def hw_info_values(config: LearnerConfig) -> dict:
    """The constant HW_* register words of ``config`` (what the hardware reports)."""
    return learner_register_map(config).info_values(config)


assert {f for _, f, _ in STATUS_FLAGS.values() if f} == set(LEARNER_FLAGS)
