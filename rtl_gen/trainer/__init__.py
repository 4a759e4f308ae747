"""The fused trainer's gateware: its power unit (``log2``/``exp2`` by interpolated tables, and
``x**p``), bit for bit as :mod:`sw.trainer.powers`, and the gather engine that reads sampled
records from the ring in device memory, and the replay side (the sum tree with the trainer's
stratified sampling, IS weights, priorities, delayed write-back and inserts)."""
from .gather import RecordGather
from .powers import Exp2Unit, Log2Unit, LogScaleUnit, PowerUnit
from .replay import TrainerReplay

__all__ = ["Log2Unit", "Exp2Unit", "LogScaleUnit", "PowerUnit", "RecordGather",
           "TrainerReplay"]
