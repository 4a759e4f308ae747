"""What the GAE, learner and replay drivers share: the checks of their constructor arguments,
the start of a run and the wait for CTRL.AP_DONE (interrupt or polling), the base of their
error-code exceptions, the run-control warnings they all raise (:class:`StartRefusedWarning`,
public, re-exported by :mod:`sw.driver`) and the ``stacklevel`` of their warnings. The rest is
private to :mod:`sw.driver` and the blocks' drivers."""

import math
import operator
import os
import sys

import numpy as np

from .mmio import Mmio

_SW_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: Where the drivers and their backends live: a warning is attributed to the first caller
#: outside these folders (user code, or the RL programs of ``sw/rl``).
_DRIVER_DIRS = tuple(os.path.join(_SW_DIR, d) + os.sep
                     for d in ("driver", "gae", "replay", "learner", "shell"))


class StartRefusedWarning(RuntimeWarning):
    """STATUS.START_REFUSED: some master wrote AP_START while the run was in progress (the
    GAE, learner and replay drivers warn it after the run they waited for)."""


class CodedError(RuntimeError):
    """Base of the drivers' STATUS.ERROR exceptions: ``code`` and ``reason`` (its text in the
    subclass's ``_errors``), message ``"<_what> error <code>: <reason><detail>"``."""

    _what = "accelerator"
    _errors: dict = {}

    def __init__(self, code: int, detail: str = ""):
        self.code = code
        self.reason = self._errors.get(code, "unknown error code")
        super().__init__(f"{self._what} error {code}: {self.reason}{detail}")


def warn_level():
    """stacklevel, for a ``warnings.warn`` in the caller, of the first frame outside the
    drivers' folders (:data:`_DRIVER_DIRS`)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_code.co_filename.startswith(_DRIVER_DIRS):
        frame, level = frame.f_back, level + 1
    return level


def positive(value, name, *, allow_none=False):
    """``value`` as a positive, finite float (None passes with ``allow_none``)."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive number, not {value!r}")
    return float(value)


def integer_in(value, name, lo, hi, *, hi_text=None):
    """``value`` as an ``int`` in ``lo..hi`` (bools refused); the ValueError names the range
    ``lo..hi`` (``hi`` written as ``hi_text`` if given)."""
    text = f"{name} must be an integer in {lo}..{hi if hi_text is None else hi_text}, " \
           f"not {value!r}"
    try:
        n = operator.index(value)
    except TypeError:
        raise ValueError(text) from None
    if isinstance(value, bool) or not lo <= n <= hi:
        raise ValueError(text)
    return n


def check_finite(a, name):
    """``a`` (a numpy array) unless it is a float array with NaN or infinite elements."""
    if a.dtype.kind == "f":
        bad = ~np.isfinite(a)
        if bad.any():
            first = tuple(int(i) for i in np.argwhere(bad)[0])
            raise ValueError(f"{name} must be finite: {int(bad.sum())} NaN or infinite "
                             f"element(s), the first at {first}")
    return a


def bool_flags(a, name):
    """``a`` (a numeric numpy array) as a new bool array: bool, or numbers that are all 0 or 1
    (NaN is neither); ``ValueError`` naming ``name`` otherwise. Two passes (``np.isin`` takes
    three times as long on a float batch)."""
    if a.dtype.kind == "b":
        return a.astype(bool)
    b = a != 0
    if not np.equal(a, b).all():
        raise ValueError(f"{name} must be bool-like: bool, or numbers that are all 0 or 1")
    return b


def check_device(device):
    """TypeError unless ``device`` has what a :class:`~sw.driver.mmio.Device` has."""
    for attr in ("control", "memory", "time", "sleep"):
        if not hasattr(device, attr):
            raise TypeError(f"device must be a Device (control, memory, time, sleep), "
                            f"not {device!r}")


def config_arg(config, config_class):
    """``config`` (an instance of ``config_class``, its ``to_dict()`` form or None) as an
    instance or None."""
    if isinstance(config, dict):
        config = config_class.from_dict(config)
    if config is not None and not isinstance(config, config_class):
        raise TypeError(f"config must be a {config_class.__name__}, a dict or None, "
                        f"not {config!r}")
    return config


def use_interrupt_arg(device, use_interrupt):
    """``use_interrupt`` (bool or None: whether the device has one) checked against the
    device."""
    if use_interrupt is None:
        use_interrupt = bool(getattr(device, "has_interrupt", False))
    if not isinstance(use_interrupt, bool):
        raise ValueError(f"use_interrupt must be a bool or None, not {use_interrupt!r}")
    if use_interrupt and not getattr(device, "has_interrupt", False):
        raise ValueError(f"use_interrupt=True but {type(device).__name__} has no interrupt")
    return use_interrupt


def hw_field_mismatches(register_map, regs, want, got):
    """``"<reg>: <field> <got> (config: <want>), ..."`` for each of ``regs`` whose words
    ``want`` (the configuration's) and ``got`` (the hardware's) differ."""
    bad = []
    for reg in regs:
        if want[reg] == got[reg]:
            continue
        diffs = [f"{f.name} {f.get(got[reg])} (config: {f.get(want[reg])})"
                 for f in register_map[reg].fields if f.get(got[reg]) != f.get(want[reg])]
        bad.append(f"{reg}: " + ", ".join(diffs))
    return bad


def written_registers(device) -> dict:
    """Offset -> the word last written to ``device``'s registers through a driver's register
    map in this process, one dict per device object, shared by its drivers
    (:meth:`~sw.driver.regmap.RegisterMapAccess.write_word_changed`)."""
    words = getattr(device, "_written_registers", None)
    if words is None:
        words = {}
        try:
            device._written_registers = words
        except AttributeError:           # a device without a __dict__: this driver's own
            pass
    return words


class ControlOf(Mmio):
    """``device.control``, looked up at each access (so a wrapper installed later applies)."""

    def __init__(self, device):
        self._device = device

    def read32(self, offset):
        return self._device.control.read32(offset)

    def write32(self, offset, value):
        self._device.control.write32(offset, value)


class DriverBase:
    """What the drivers (:class:`~sw.gae.driver.GaeDriver`,
    :class:`~sw.learner.driver.LearnerDriver`, :class:`~sw.replay.driver.ReplayDriver`) have
    in common: the ``config`` and ``device`` properties, the first checks of their
    constructor arguments (:meth:`_init_args`), the HW_* check (:meth:`_attach`), the start
    of a run (:meth:`_start`) and the wait for its end (:meth:`_wait_done`)."""

    _config = None
    _device = None
    #: cycles the run in progress is expected to take (the default timeout adds them)
    _expected_cycles = 0

    def _init_args(self, device, config, config_class, timeout, clock_hz, poll_interval):
        """Check ``device`` and ``config`` (returned as an instance of ``config_class`` or
        None); set ``_timeout``, ``_clock_hz`` and ``_poll`` (positive numbers). No bus
        access."""
        check_device(device)
        config = config_arg(config, config_class)
        self._timeout = positive(timeout, "timeout")
        self._clock_hz = positive(clock_hz, "clock_hz")
        self._poll = positive(poll_interval, "poll_interval")
        return config

    def _attach(self, device, config, read_config, check_against):
        """Keep ``device`` and read its HW_* registers (the first bus access): the
        configuration they describe (``read_config(mmio)``) if ``config`` is None, else
        ``config`` after ``check_against(config, hw)``."""
        self._device = device
        hw = read_config(device.control)
        if config is None:
            return hw
        check_against(config, hw)
        return config

    def _ctrl_words(self):
        """Words and masks :meth:`_start` and :meth:`_wait_done` use, computed once from the
        register map: CTRL's start word and AP_DONE and AP_IDLE masks, IP_IER's and IP_ISR's
        AP_DONE."""
        words = self.__dict__.get("_ctrl_cache")
        if words is None:
            rm = self.register_map
            words = self._ctrl_cache = {
                "start": rm.word("CTRL", AP_START=1, AUTO_RESTART=0),
                "done": rm.CTRL._register.field("AP_DONE").mask,
                "idle": rm.CTRL._register.field("AP_IDLE").mask,
                "ier": rm.IP_IER._register.field("AP_DONE").mask,
                "isr": rm.word("IP_ISR", AP_DONE=1)}
        return words

    def _idle(self) -> bool:
        """One read of CTRL (which also clears a stale AP_DONE): whether AP_IDLE is set."""
        return bool(self.register_map.read_word("CTRL") & self._ctrl_words()["idle"])

    def _start(self):
        """Arm the interrupt (clear what IP_ISR holds, enable AP_DONE, GIER) or disable it
        for polling, then write AP_START (AUTO_RESTART off). Raw words by name
        (:meth:`~sw.driver.regmap.RegisterMapAccess.write_word`), IP_IER and GIER only when
        they change (:meth:`~sw.driver.regmap.RegisterMapAccess.write_word_changed`): a run's
        hot path."""
        rm, words = self.register_map, self._ctrl_words()
        if self._use_irq:
            isr = rm.read_word("IP_ISR")
            if isr:
                rm.write_word("IP_ISR", isr)       # toggle-on-write: clears what was seen
            rm.write_word_changed("IP_IER", words["ier"])
            rm.write_word_changed("GIER", 1)
        else:
            rm.write_word_changed("GIER", 0)
        rm.write_word("CTRL", words["start"])

    def _wait_done(self, timeout, timeout_error):
        """Wait up to ``timeout`` seconds (device clock; None: the driver's timeout plus the
        expected cycles at ``clock_hz``) for CTRL.AP_DONE: for the interrupt (then clear
        IP_ISR.AP_DONE) or by polling CTRL. Raises ``timeout_error`` if it does not come;
        returns the STATUS fields."""
        dev, rm, words = self._device, self.register_map, self._ctrl_words()
        if timeout is None:
            timeout = self._timeout + self._expected_cycles / self._clock_hz
        timeout = positive(timeout, "timeout")
        done_mask = words["done"]
        if self._use_irq:
            if not dev.wait_interrupt(timeout):
                raise timeout_error(f"no interrupt within {timeout:g} s")
            done = bool(rm.read_word("CTRL") & done_mask)
            rm.write_word("IP_ISR", words["isr"])  # toggle-on-write: clear the done event
        else:
            done = bool(rm.read_word("CTRL") & done_mask)      # the first poll: no clock read
        if not done:
            deadline = dev.time() + timeout
            while True:
                if dev.time() >= deadline:
                    raise timeout_error(f"CTRL.AP_DONE not set within {timeout:g} s")
                dev.sleep(self._poll)
                if rm.read_word("CTRL") & done_mask:
                    break
        return rm.fields_of("STATUS", rm.read_word("STATUS"))

    @property
    def config(self):
        """The accelerator's configuration (given, or read from the HW_* registers)."""
        return self._config

    @property
    def device(self):
        """The :class:`~sw.driver.mmio.Device` the driver runs on."""
        return self._device
