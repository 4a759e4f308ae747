"""Errors and warnings of the learner driver, and reading a learner's configuration back
from its HW_* registers (:mod:`sw.learner.driver` re-exports them)."""

from sw.driver.common import CodedError, hw_field_mismatches

from .spec import (
    ERRORS,
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
    "check_against",
    "read_learner_config",
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


# -- reading the configuration back -----------------------------------------------------------
_HW_REGS = ("HW_ARRAY", "HW_LAYERS", "HW_FORMAT", "HW_FORMAT2")
#: Most weight layers a learner has (HW_LAYERS.LAYERS is 4 bits; the sizes are read only for a
#: plausible count, so a foreign register map is never read past its end).
_MAX_LAYERS = 7


def read_learner_config(mmio) -> LearnerConfig:
    """The configuration the HW_* registers describe, read without touching unmapped addresses.

    The register map of a DQN learner may hold more argument registers than that of an MSE
    learner (the target-sync registers), so its HW_* registers may sit higher. The MSE
    addresses (inside either map, and none of them clear-on-read) are read first; the sizes
    (``HW_SIZE<i>``) only once the four words decode as a learner of that loss with a
    plausible number of layers; then the DQN addresses. The rounding mode is not in the
    registers: ``half_up`` is returned.

    Raises
    ------
    LearnerConfigMismatchError
        If neither decodes (not a learner, or a different register map version).
    """
    seen = []
    for loss in ("mse", "dqn"):
        probe = learner_register_map(LearnerConfig(loss=loss))
        words = {name: mmio.read32(probe.offset(name)) for name in _HW_REGS}
        seen.append(f"{loss}: " + ", ".join(f"{n}={w:#x}" for n, w in words.items()))
        try:
            params = probe.decode_info(words)
        except ValueError:
            continue
        n_layers = params["n_layers"]
        if params["loss"] != loss or not 1 <= n_layers <= _MAX_LAYERS:
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
