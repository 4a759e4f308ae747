"""Host drivers and their backends: PYNQ-style register access, the three accelerators'
drivers and golden devices (re-exported from their blocks), and the devices they run on.

* :mod:`sw.driver.mmio` -- the bus interfaces (:class:`Mmio`, :class:`MemoryPort`,
  :class:`Device`);
* :mod:`sw.driver.regmap` -- :class:`RegisterMapAccess` (``rm.CTRL.AP_START = 1``) from a
  :class:`~sw.regmap.RegisterMap`;
* :mod:`sw.gae.driver` -- :class:`GaeDriver` (``compute(rewards, values, dones, last_values,
  gamma, lam)``);
* :mod:`sw.replay.driver` -- :class:`ReplayDriver` (``insert``, ``sample``, ``update``,
  ``update_and_sample``, ``read``), :class:`ReplayGoldenDevice` its pure-Python device;
* :mod:`sw.learner.driver` -- :class:`LearnerDriver` (``load_weights``, ``train_step``,
  ``read_weights``, ``sync_target``);
* :func:`open_driver` -- the driver of any generated configuration from its manifest, on a
  device spec (``open_driver("build/replay_k8_4k", device="golden")``);
* backends: :class:`GoldenDevice`, :class:`LearnerGoldenDevice` (pure Python),
  :class:`SimDevice` (Verilator + cocotb, inside a cocotb test), :class:`SimProcessDevice`
  (the same from any Python process: ``with open_sim("gae_accel_n8") as dev``),
  :class:`PynqDevice` (ZCU106), :class:`XrtDevice`
  (Alveo); :class:`InstantDevice` (a register-file stub whose runs end at once, for timing
  and unit-testing host code). Optional packages (cocotb, cocotbext-axi, pynq, pyxrt) are
  imported only when their backend is instantiated.
"""

import importlib

from .mmio import BusError, Device, MemoryPort, Mmio
from .regmap import RegisterAccessError, RegisterMapAccess, load_register_map

#: Names re-exported from the blocks' own modules, imported when first used (PEP 562): the
#: blocks' drivers and golden devices import this package's backends, so importing them here
#: eagerly would make ``import sw.replay.device`` circular.
_LAZY = {
    "sw.gae.device": ("GoldenDevice",),
    "sw.gae.driver": (
        "GAE_KERNEL_NAME", "GAE_VLNV", "GAE_VLNVS", "DequantOverflowWarning", "GaeBatch",
        "GaeBusyError", "GaeConfigMismatchError", "GaeDriver", "GaeError", "GaeOverflowWarning",
        "GaeTimeoutError", "PeOverflowWarning", "RequantOverflowWarning", "ClippingWarning",
        "read_hw_config"),
    "sw.driver.common": ("StartRefusedWarning",),
    "sw.learner.device": ("LearnerGoldenDevice",),
    "sw.learner.driver": (
        "LEARNER_VLNV", "LEARNER_VLNVS", "LearnerBatch", "LearnerBusyError",
        "LearnerConfigMismatchError", "LearnerDriver", "LearnerError", "LearnerOverflowWarning",
        "LearnerRangeWarning", "LearnerTimeoutError", "StepDetails", "read_learner_config"),
    "sw.learner.optim": ("AdamHyper", "AdamState"),
    "sw.replay.device": ("ReplayGoldenDevice",),
    "sw.replay.driver": (
        "REPLAY_VLNV", "REPLAY_VLNVS", "PriorityClampedWarning", "PrioritySaturatedWarning",
        "ReplayBusyError",
        "ReplayConfigMismatchError", "ReplayDriver", "ReplayEmptyError", "ReplayError",
        "ReplayTimeoutError", "read_replay_config"),
    "sw.driver.from_manifest": ("open_driver",),
    "sw.driver.pynq_device": ("PynqDevice", "gae_ip_class"),
    "sw.driver.sim": ("SimDevice",),
    "sw.driver.sim_process": ("SimProcessDevice", "open_sim", "start_sim"),
    "sw.driver.stub": ("InstantDevice", "TrafficCounter"),
    "sw.driver.xrt_device": ("XrtDevice",),
}
_WHERE = {name: module for module, names in _LAZY.items() for name in names}

__all__ = ["Mmio", "MemoryPort", "Device", "BusError", "RegisterMapAccess",
           "RegisterAccessError", "load_register_map", *_WHERE]


def __getattr__(name):
    if name in _WHERE:
        value = getattr(importlib.import_module(_WHERE[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'sw.driver' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_WHERE))
