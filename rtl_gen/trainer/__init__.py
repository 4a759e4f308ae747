"""The fused trainer's gateware, bit for bit as :mod:`sw.trainer.golden`: the power unit
(``log2``/``exp2`` by interpolated tables, ``x**p``), the gather engine that reads sampled
records from the ring in device memory, the replay side (the sum tree with the trainer's
stratified sampling, IS weights, priorities, delayed write-back and inserts), the learner
adapter, the storage writer, and the sequential core that runs the loop."""
from .core import TrainerCore
from .gather import RecordGather
from .learner_adapter import LearnerAdapter
from ..powers import Exp2Unit, Log2Unit, LogScaleUnit, PowerUnit
from .replay import TrainerReplay
from .storage_io import StorageIO

__all__ = ["Log2Unit", "Exp2Unit", "LogScaleUnit", "PowerUnit", "RecordGather",
           "TrainerReplay", "LearnerAdapter", "StorageIO", "TrainerCore"]
