"""Errors and warnings of the learner driver, and reading a learner's configuration back
from its HW_* registers (:mod:`sw.learner.driver` re-exports them)."""

import warnings

from sw.driver.common import CodedError, StartRefusedWarning, hw_field_mismatches, warn_level

from .spec import (
    ERRORS,
    STATUS_FLAGS,
    LearnerConfig,
    config_from_hw,
    hw_info_values,
    learner_register_map,
)

__all__ = [
    "LearnerBusyError",
    "LearnerConfigMismatchError",
    "LearnerError",
    "LearnerOverflowWarning",
    "LearnerRangeWarning",
    "LearnerTimeoutError",
    "OVERFLOW_FLAGS",
    "check_against",
    "read_learner_config",
    "warn_status",
]


class LearnerError(CodedError):
    """The accelerator refused a step (STATUS.ERROR != 0; memory untouched). ``code`` and
    ``reason`` hold the error code and its text."""

    _what = "learner"
    _errors = ERRORS


class LearnerBusyError(RuntimeError):
    """A step is in progress (CTRL.AP_IDLE = 0); nothing was written."""


class LearnerTimeoutError(TimeoutError):
    """The step did not finish within the timeout (on the device's clock)."""


class LearnerConfigMismatchError(ValueError):
    """The given configuration does not describe the hardware (HW_* registers)."""


class LearnerOverflowWarning(RuntimeWarning):
    """STATUS saturation flags were set: some values of the step saturated. ``flags`` (on the
    message) names them: FW_OVERFLOW, TARGET_FW_OVERFLOW, TARGET_OVERFLOW, DELTA_OVERFLOW,
    BW_OVERFLOW, WA_OVERFLOW, WU_OVERFLOW."""


class LearnerRangeWarning(RuntimeWarning):
    """Host values outside their fixed-point format were saturated (``on_range="clip"``)."""


#: Saturation flags of STATUS (everything in STATUS_FLAGS but START_REFUSED).
OVERFLOW_FLAGS = {name: doc for name, (_, flag, doc) in STATUS_FLAGS.items() if flag}


def warn_status(status: dict):
    """The warnings of a step's STATUS fields: :class:`LearnerOverflowWarning` naming the
    saturation flags set, :class:`~sw.driver.common.StartRefusedWarning`."""
    level = warn_level()
    flags = [name for name in OVERFLOW_FLAGS if status.get(name)]
    if flags:
        warnings.warn("learner STATUS " + ", ".join(flags) + ": "
                      + "; ".join(OVERFLOW_FLAGS[f] for f in flags),
                      LearnerOverflowWarning, stacklevel=level)
    if status.get("START_REFUSED"):
        warnings.warn("learner STATUS.START_REFUSED: AP_START was written while the step "
                      "was in progress and was dropped", StartRefusedWarning, stacklevel=level)


# -- reading the configuration back -----------------------------------------------------------
_HW_REGS = ("HW_ARRAY", "HW_LAYERS", "HW_FORMAT", "HW_FORMAT2")
#: Most weight layers a learner has (HW_LAYERS.LAYERS is 4 bits; the sizes are read only for a
#: plausible count, so a foreign register map is never read past its end).
_MAX_LAYERS = 7
#: (optimizer, loss) of the register maps :func:`read_learner_config` probes, lowest HW_*
#: addresses first.
_PROBES = (("sgd", "mse"), ("sgd", "dqn"), ("adam", "mse"), ("adam", "dqn"))


def read_learner_config(mmio) -> LearnerConfig:
    """The configuration the HW_* registers describe, read without touching unmapped addresses.

    The register map of a DQN learner may hold more argument registers than that of an MSE
    learner (the target-sync registers), and one with Adam more again (the ADAM_* registers),
    so its HW_* registers may sit higher. The four register maps are probed from the lowest
    HW_* addresses up (SGD MSE, SGD DQN, Adam MSE, Adam DQN: each probe's addresses lie
    inside the maps of the later ones, and none of them is clear-on-read). A probe reads
    HW_LAYERS first, the other HW_* words only if it holds that loss and optimizer and a
    plausible number of layers, and the sizes (``HW_SIZE<i>``) only once the four words
    decode as that learner. The rounding mode is not in the registers: ``half_up`` is
    returned.

    Raises
    ------
    LearnerConfigMismatchError
        If neither decodes (not a learner, or a different register map version).
    """
    seen = []
    for optimizer, loss in _PROBES:
        probe = learner_register_map(LearnerConfig(loss=loss, optimizer=optimizer))
        words = {"HW_LAYERS": mmio.read32(probe.offset("HW_LAYERS"))}
        seen.append(f"{loss} {optimizer}: HW_LAYERS={words['HW_LAYERS']:#x}")
        try:
            params = probe.decode_info(words)
        except ValueError:
            continue
        n_layers = params["n_layers"]
        if (params["loss"] != loss or params.get("optimizer", "sgd") != optimizer
                or not 1 <= n_layers <= _MAX_LAYERS):
            continue
        words = {name: mmio.read32(probe.offset(name)) for name in _HW_REGS}
        seen[-1] = f"{loss} {optimizer}: " + ", ".join(f"{n}={w:#x}" for n, w in words.items())
        try:
            params = probe.decode_info(words)
        except ValueError:
            continue
        base = probe.offset("HW_SIZE0")
        sizes = [mmio.read32(base + 4 * i) for i in range(n_layers + 1)]
        seen[-1] += ", sizes " + ",".join(map(str, sizes))
        params.update({f"sizes.{i}": n for i, n in enumerate(sizes)})
        try:
            cfg = config_from_hw(params)
        except (ValueError, TypeError):
            continue
        rm = learner_register_map(cfg)
        info = hw_info_values(cfg)
        if (all(rm.offset(n) == probe.offset(n) for n in _HW_REGS)
                and rm.offset("HW_SIZE0") == base
                and all(info[n] == w for n, w in words.items())):
            return cfg
    raise LearnerConfigMismatchError("the HW_* registers do not describe a learner "
                                     "(read " + "; ".join(seen) + ")")


def check_against(config: LearnerConfig, hw: LearnerConfig):
    bad = []
    if config.sizes != hw.sizes:
        bad.append(f"sizes {hw.sizes} (config: {config.sizes})")
    bad += hw_field_mismatches(learner_register_map(config), _HW_REGS, hw_info_values(config),
                               hw_info_values(hw))
    if bad:
        raise LearnerConfigMismatchError("config does not match the hardware: "
                                         + "; ".join(bad))
