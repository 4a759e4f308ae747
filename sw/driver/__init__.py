"""Host drivers: PYNQ-style register access and the GAE accelerator on any backend.

* :mod:`sw.driver.mmio` -- the bus interfaces (:class:`Mmio`, :class:`MemoryPort`,
  :class:`Device`);
* :mod:`sw.driver.regmap` -- :class:`RegisterMapAccess` (``rm.CTRL.AP_START = 1``) from a
  :class:`~rtl_gen.regmap.RegisterMap`;
* :mod:`sw.driver.gae` -- :class:`GaeDriver` (``compute(rewards, values, dones, last_values,
  gamma, lam)``);
* :mod:`sw.driver.replay` -- :class:`ReplayDriver` (``insert``, ``sample``, ``update``,
  ``update_and_sample``, ``read``), :class:`ReplayGoldenDevice` its pure-Python device;
* :mod:`sw.driver.learner` -- :class:`LearnerDriver` (``load_weights``, ``train_step``,
  ``read_weights``, ``sync_target``);
* backends: :class:`GoldenDevice`, :class:`LearnerGoldenDevice` (pure Python),
  :class:`SimDevice` (Verilator + cocotb), :class:`PynqDevice` (ZCU106), :class:`XrtDevice`
  (Alveo). Optional packages (cocotb, cocotbext-axi, pynq, pyxrt) are imported only when
  their backend is instantiated.
"""

from .gae import (GAE_KERNEL_NAME, GAE_VLNV, GAE_VLNVS, DequantOverflowWarning, GaeBatch,
                  GaeBusyError, GaeConfigMismatchError, GaeDriver, GaeError, GaeOverflowWarning,
                  GaeTimeoutError, PeOverflowWarning, RequantOverflowWarning,
                  StartRefusedWarning, read_hw_config)
from .golden import GoldenDevice
from .golden_learner import LearnerGoldenDevice
from .learner import (LEARNER_VLNV, LEARNER_VLNVS, LearnerBatch, LearnerBusyError,
                      LearnerConfigMismatchError, LearnerDriver, LearnerError,
                      LearnerOverflowWarning, LearnerRangeWarning, LearnerTimeoutError,
                      StepDetails, read_learner_config)
from .mmio import BusError, Device, MemoryPort, Mmio
from .pynq_device import PynqDevice, gae_ip_class
from .golden_replay import ReplayGoldenDevice
from .replay import (REPLAY_VLNV, REPLAY_VLNVS, PrioritySaturatedWarning, ReplayBusyError,
                     ReplayConfigMismatchError, ReplayDriver, ReplayEmptyError, ReplayError,
                     ReplayTimeoutError, read_replay_config)
from .regmap import RegisterAccessError, RegisterMapAccess, load_register_map
from .sim import SimDevice
from .xrt_device import XrtDevice

__all__ = [
    "Mmio", "MemoryPort", "Device", "BusError",
    "RegisterMapAccess", "RegisterAccessError", "load_register_map",
    "GaeDriver", "GaeBatch", "read_hw_config", "GAE_VLNV", "GAE_VLNVS", "GAE_KERNEL_NAME",
    "GaeError", "GaeBusyError", "GaeTimeoutError", "GaeConfigMismatchError",
    "GaeOverflowWarning", "DequantOverflowWarning", "PeOverflowWarning",
    "RequantOverflowWarning", "StartRefusedWarning",
    "LearnerDriver", "LearnerBatch", "StepDetails", "read_learner_config", "LEARNER_VLNV",
    "LEARNER_VLNVS", "LearnerError", "LearnerBusyError", "LearnerTimeoutError",
    "LearnerConfigMismatchError", "LearnerOverflowWarning", "LearnerRangeWarning",
    "ReplayDriver", "read_replay_config", "REPLAY_VLNV", "REPLAY_VLNVS", "ReplayError",
    "ReplayEmptyError", "ReplayBusyError", "ReplayTimeoutError", "ReplayConfigMismatchError",
    "PrioritySaturatedWarning", "ReplayGoldenDevice",
    "GoldenDevice", "LearnerGoldenDevice", "SimDevice", "PynqDevice", "XrtDevice",
    "gae_ip_class",
]
