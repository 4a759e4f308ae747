"""Errors and warnings of the GAE driver (:mod:`sw.gae.driver` re-exports them). The
run-control warning every driver shares, ``StartRefusedWarning``, is in
:mod:`sw.driver.common`."""

from sw.driver.common import CodedError

from .spec import ERRORS

__all__ = [
    "FLAG_WARNINGS",
    "ClippingWarning",
    "DequantOverflowWarning",
    "GaeBusyError",
    "GaeConfigMismatchError",
    "GaeError",
    "GaeOverflowWarning",
    "GaeTimeoutError",
    "PeOverflowWarning",
    "RequantOverflowWarning",
]

class GaeError(CodedError):
    """The accelerator refused a run (STATUS.ERROR != 0). ``code`` and ``reason`` hold the
    error code and its text (:data:`sw.gae.spec.ERRORS`)."""

    _what = "GAE accelerator"
    _errors = ERRORS


class GaeBusyError(RuntimeError):
    """A run is already in progress (CTRL.AP_IDLE = 0); nothing was written."""


class GaeTimeoutError(TimeoutError):
    """The run did not finish within the timeout (on the device's clock)."""


class GaeConfigMismatchError(ValueError):
    """The given configuration does not describe the hardware (HW_* registers)."""


class GaeOverflowWarning(RuntimeWarning):
    """A STATUS overflow flag was set: some results saturated."""


class DequantOverflowWarning(GaeOverflowWarning):
    """STATUS.DEQUANT_OVERFLOW: a dequantized reward or value saturated the PE data format."""


class PeOverflowWarning(GaeOverflowWarning):
    """STATUS.PE_OVERFLOW: a TD error, advantage or return saturated the PE data format."""


class RequantOverflowWarning(GaeOverflowWarning):
    """STATUS.REQUANT_OVERFLOW: an in-place result code saturated (outside the result range)."""


class ClippingWarning(RuntimeWarning):
    """More than ``clip_warning`` of a batch's standardized rewards or values were clipped to
    the quantizers' ranges (standardized units only; the caller's units never clip)."""


FLAG_WARNINGS = {
    "DEQUANT_OVERFLOW": DequantOverflowWarning,
    "PE_OVERFLOW": PeOverflowWarning,
    "REQUANT_OVERFLOW": RequantOverflowWarning,
}
