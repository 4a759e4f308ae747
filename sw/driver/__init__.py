"""Host drivers: PYNQ-style register access and the GAE accelerator on any backend.

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
* backends: :class:`GoldenDevice`, :class:`LearnerGoldenDevice` (pure Python),
  :class:`SimDevice` (Verilator + cocotb), :class:`PynqDevice` (ZCU106), :class:`XrtDevice`
  (Alveo). Optional packages (cocotb, cocotbext-axi, pynq, pyxrt) are imported only when
  their backend is instantiated.
"""

from sw.gae.device import GoldenDevice
from sw.gae.driver import (
                           GAE_KERNEL_NAME,
                           GAE_VLNV,
                           GAE_VLNVS,
                           DequantOverflowWarning,
                           GaeBatch,
                           GaeBusyError,
                           GaeConfigMismatchError,
                           GaeDriver,
                           GaeError,
                           GaeOverflowWarning,
                           GaeTimeoutError,
                           PeOverflowWarning,
                           RequantOverflowWarning,
                           StartRefusedWarning,
                           read_hw_config,
)
from sw.learner.device import LearnerGoldenDevice
from sw.learner.driver import (
                           LEARNER_VLNV,
                           LEARNER_VLNVS,
                           LearnerBatch,
                           LearnerBusyError,
                           LearnerConfigMismatchError,
                           LearnerDriver,
                           LearnerError,
                           LearnerOverflowWarning,
                           LearnerRangeWarning,
                           LearnerTimeoutError,
                           StepDetails,
                           read_learner_config,
)
from sw.replay.device import ReplayGoldenDevice
from sw.replay.driver import (
                           REPLAY_VLNV,
                           REPLAY_VLNVS,
                           PrioritySaturatedWarning,
                           ReplayBusyError,
                           ReplayConfigMismatchError,
                           ReplayDriver,
                           ReplayEmptyError,
                           ReplayError,
                           ReplayTimeoutError,
                           read_replay_config,
)

from .mmio import BusError, Device, MemoryPort, Mmio
from .pynq_device import PynqDevice, gae_ip_class
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
