"""The fused DQN trainer's specification: configuration, runtime-argument formats, register map,
command and error codes, and the insert protocol. Plain Python, no Amaranth: the golden trainer
(:mod:`sw.trainer.golden`), its device (:mod:`sw.trainer.device`) and the driver
(:mod:`sw.trainer.driver`) derive from it, with the storage layout (:mod:`sw.trainer.layout`),
the cycle model (:mod:`sw.trainer.schedule`) and the power unit (:mod:`sw.powers`).

The system (CF'22 section 3 and Fig. 4; Zhang 2022 chapter 4): actors on the host append
transitions to a ring of ``capacity`` records in device memory (DDR behind the card, or the
Zynq's PS DDR through an S_AXI_HP port), and the trainer runs the whole DQN training loop by
itself, ``STEPS`` gradient steps per launch:

1. *boundary*: the priority write-back of step ``t - 1 - delay`` (if any; slots that are the
   host's to write are skipped), then the inserts the host announced (``PRODUCER``, below);
2. sample ``B`` leaves of the K-ary sum tree, stratified: the tree's SAMPLE fraction of sample
   ``b`` is ``b·F + ((x_b·F) >> target_bits)`` with ``F = 2**target_bits // B`` and ``x_b``
   the next word of the trainer's xorshift32 PRNG (:mod:`sw.replay.prng`), so sample b lands in
   the b-th of B equal strata of the total;
3. gather the B records by burst reads of the ring;
4. importance-sampling weights ``(p_min / p_i)**β`` over the batch (power unit);
5. one learner step (:func:`sw.learner.mlp.train_step`: the DQN loss with per-sample loss
   weights, the target network on chip, target sync every ``SYNC_PERIOD`` steps);
6. new priorities ``(|Q - y| + ε)**α`` (power unit) queued for the write-back ``delay``
   steps later; the running maximum priority (what inserts get) follows them;
7. every ``SNAPSHOT_PERIOD`` steps a weight snapshot for the actors, every ``TRACE_PERIOD``
   steps a trace entry (:mod:`sw.trainer.layout`).

With ``delay`` >= 1 the sample and gather of step t+1 run during the learner step of step t
(CF'22: "replay latency completely hidden"); ``delay`` = 0 runs them one after the other.

Insert protocol
---------------
The host owns the ``append_window`` slots from the core's ``CONSUMED`` count on (slot = count
mod capacity): it writes records there, then writes the new total to ``PRODUCER`` (a
doorbell; it may do so while a launch runs). At every boundary the core takes
``k = min(PRODUCER - CONSUMED, append_window)`` records (32-bit counts, modulo 2**32): their
leaves get the running maximum priority, and the ``k`` slots after the host's window are
evicted (leaf 0), so the window moves on. A slot is thus never sampled while the host may
write it, and the tree holds at most ``capacity - append_window`` records: the ring evicts
FIFO. A ``PRODUCER`` more than ``append_window`` ahead sets the sticky ``OVERRUN`` flag and
takes only the window.
"""

import enum
from dataclasses import dataclass
from functools import cached_property

from sw.config import Config, check_int
from sw.fixed import FixedFormat
from sw.learner.spec import LearnerConfig
from sw.regmap import Field, Info, Register, RegisterMap
from sw.replay.spec import SumTreeConfig

from sw.powers import PowerConfig

__all__ = ["TrainerConfig", "TrainerCmd", "TRAINER_ERRORS", "ERRORS", "STATUS_FLAGS",
           "TRAINER_ARGS", "COUNT_BITS", "trainer_register_map", "hw_info_values"]

#: Bits of the 32-bit counters (PRODUCER, CONSUMED, steps, sampled), which wrap.
COUNT_BITS = 32
#: AXI4 data widths of the storage port.
STORAGE_WIDTHS = (64, 128, 256, 512)


@dataclass(frozen=True)
class TrainerConfig(Config):
    """Parameters of the fused trainer.

    Parameters
    ----------
    learner : LearnerConfig
        The learner pipeline (``loss="dqn"``); its ``max_batch`` is the largest B.
    tree : SumTreeConfig
        The sum tree; its ``capacity`` is the ring's (records), a power of two, its
        ``max_batch`` at least the learner's.
    power : PowerConfig
        The power unit (log2/exp2) of the IS weights and the new priorities.
    append_window : int
        Slots the host may write ahead of ``CONSUMED``, 1..capacity/2 (the insert protocol in
        the module docstring).
    delay : int
        Steps a priority write-back waits (the thesis's delay D), 0..4: 0 samples after the
        previous step's write-back (no overlap), >= 1 overlaps sample and gather with the
        previous learner step.
    coef_frac : int
        Fraction bits of α and β (unsigned, ``coef_frac + 1`` bits, 1.0 exact), 8..24.
    eps_frac : int
        Fraction bits of ε and of ``|δ| + ε``, act_frac..24.
    storage_width : int
        Data bits of the AXI4 master to the storage (:data:`STORAGE_WIDTHS`).
    trace_depth : int
        Entries of the trace ring in storage, a power of two, 1..4096.
    gather_outstanding : int
        Read bursts the gather engine keeps in flight, 1..256: enough to cover the memory's
        round trip (``1 + ceil((read latency + 1) / beats per record)``) gathers a record
        every ``beats`` cycles (:func:`sw.trainer.schedule.gather_cycles`).

    Raises
    ------
    ValueError
        A parameter out of range or an inconsistent combination; the message names it.
    """
    what = "trainer"

    learner: LearnerConfig = LearnerConfig(sizes=(4, 64, 64, 2), array=4, max_batch=64,
                                           sub_batch=16)
    tree: SumTreeConfig = SumTreeConfig(fanout=16, capacity=1 << 16, max_batch=64)
    power: PowerConfig = PowerConfig()
    append_window: int = 256
    delay: int = 1
    coef_frac: int = 16
    eps_frac: int = 16
    storage_width: int = 128
    trace_depth: int = 256
    gather_outstanding: int = 128

    def __post_init__(self):
        for name, cls in (("learner", LearnerConfig), ("tree", SumTreeConfig),
                          ("power", PowerConfig)):
            v = getattr(self, name)
            if isinstance(v, dict):
                v = cls.from_dict(v)
                object.__setattr__(self, name, v)
            if not isinstance(v, cls):
                raise ValueError(f"{name} must be a {cls.__name__}, not {type(v).__name__}")
        if self.learner.loss != "dqn":
            raise ValueError(f"learner.loss must be 'dqn' (the trainer runs DQN), not "
                             f"{self.learner.loss!r}")
        if self.learner.optimizer != "sgd":
            raise ValueError(f"learner.optimizer must be 'sgd' (the trainer's loop has no "
                             f"per-step Adam bias corrections yet), not "
                             f"{self.learner.optimizer!r}")
        if self.tree.max_batch < self.learner.max_batch:
            raise ValueError(f"tree.max_batch must be at least learner.max_batch "
                             f"({self.learner.max_batch}), not {self.tree.max_batch}")
        cap = self.tree.capacity
        if cap < 2 or cap & (cap - 1):
            raise ValueError(f"tree.capacity must be a power of two (a slot is CONSUMED mod "
                             f"capacity, and CONSUMED wraps at 2**32), not {cap}")
        check_int("append_window", self.append_window, 1, self.tree.capacity // 2)
        check_int("delay", self.delay, 0, 4)
        check_int("coef_frac", self.coef_frac, 8, 24)
        num = self.learner.numerics
        check_int("eps_frac", self.eps_frac, num.act_frac, 24)
        if self.storage_width not in STORAGE_WIDTHS:
            raise ValueError(f"storage_width must be one of "
                             f"{', '.join(map(str, STORAGE_WIDTHS))}, not {self.storage_width!r}")
        check_int("trace_depth", self.trace_depth, 1, 4096)
        check_int("gather_outstanding", self.gather_outstanding, 1, 256)
        if self.trace_depth & (self.trace_depth - 1):
            raise ValueError(f"trace_depth must be a power of two, not {self.trace_depth}")
        if not self.power.input_width_ok(self.tree.input_width + 2, self.eps_frac):
            raise ValueError("power.log_int is too small for the priority and |delta| inputs")

    # -- formats of the runtime arguments ----------------------------------------------------
    @property
    def capacity(self) -> int:
        return self.tree.capacity

    @property
    def max_batch(self) -> int:
        return self.learner.max_batch

    @cached_property
    def coef_format(self) -> FixedFormat:
        """α and β: unsigned, ``coef_frac`` fraction bits, 0..1."""
        return FixedFormat(self.coef_frac + 1, self.coef_frac, False, "half_up")

    @cached_property
    def eps_format(self) -> FixedFormat:
        """ε (and ``|δ| + ε``): unsigned, ``eps_frac`` fraction bits, 24 bits."""
        return FixedFormat(24, self.eps_frac, False, "half_up")

    @property
    def sync_bits(self) -> int:
        return 16


# -- commands, errors, status ---------------------------------------------------------------
class TrainerCmd(enum.IntFlag):
    """Bits of the CMD register, carried out at the start of a launch in this order."""
    #: Clear the tree, the pending write-backs, the counters and the running maximum (1.0).
    CLEAR = 1
    #: Copy the weights of the storage's load region into the network and its target.
    LOAD = 2
    #: Take the host's records (window after window until PRODUCER is reached), no step.
    INSERT = 4


#: STATUS.ERROR codes of a start.
TRAINER_ERRORS = {"ok": 0, "batch_size": 1, "empty": 2, "base": 3}
ERRORS = {0: "ok", 1: "BATCH_SIZE 0 or above max_batch",
          2: "the tree was empty when a step was due",
          3: "BASE_HI:BASE_LO not 4 KiB aligned"}

#: STATUS flags: name -> (bit, doc). Sticky during a launch, cleared at its start.
STATUS_FLAGS = {
    "LEARNER_OVERFLOW": (8, "a learner value saturated (any stage)"),
    "PRIORITY_SATURATED": (9, "a new priority exceeded the leaf format"),
    "WEIGHT_UNDERFLOW": (10, "an IS weight rounded to 0"),
    "OVERRUN": (11, "PRODUCER was more than append_window records ahead of CONSUMED"),
    "STOPPED": (12, "the launch ended early on STOP"),
    "START_REFUSED": (15, "AP_START was written during a launch; it was dropped"),
}

#: Launch arguments: register name -> (bits, doc). Latched at the start of a launch.
TRAINER_ARGS = {
    "CMD": (3, "TrainerCmd bits: 1 CLEAR, 2 LOAD (carried out first), 4 INSERT (no step)"),
    "STEPS": (32, "gradient steps M of the launch; 0: until STOP"),
    "BATCH_SIZE": (13, "B, 1..max_batch"),
    "LR": (24, "update coefficient eta = lr * 2 / B (learner lr format)"),
    "GAMMA": (24, "discount (learner coef format)"),
    "ALPHA": (25, "priority exponent alpha (coef_frac fraction bits)"),
    "BETA": (25, "IS exponent beta (coef_frac fraction bits)"),
    "EPS": (24, "priority epsilon (eps_frac fraction bits)"),
    "SYNC_PERIOD": (16, "target sync every this many steps; 0: never"),
    "SNAPSHOT_PERIOD": (16, "weight snapshot every this many steps; 0: never"),
    "TRACE_PERIOD": (16, "trace entry every this many steps; 0: never"),
    "SEED": (32, "PRNG seed, loaded with CLEAR (0 loads the default seed)"),
    "BASE_LO": (32, "storage base address, bits 31..0 (4 KiB aligned)"),
    "BASE_HI": (32, "storage base address, bits 63..32"),
}

#: Counters the core keeps (read-only): name -> doc.
COUNTERS = {
    "CONSUMED": "records inserted into the tree since CLEAR (mod 2**32)",
    "STEPS_DONE": "gradient steps of the current or last launch",
    "STEPS_TOTAL": "gradient steps since CLEAR (mod 2**32)",
    "SAMPLED": "samples drawn since CLEAR (mod 2**32)",
    "SNAPSHOT_SEQ": "sequence number of the newest complete weight snapshot",
    "TRACE_COUNT": "trace entries written since CLEAR",
    "CYCLES": "cycles of the current or last launch",
}


def _info(name, lsb, width, param, **kw):
    return Field(name, lsb, width, "ro", info=Info(param, **kw))


def trainer_register_map(config: TrainerConfig) -> RegisterMap:
    """ap_ctrl_hs control registers, launch arguments, PRODUCER and STOP (writable during a
    launch), status, counters and hardware info."""
    args = [Register.scalar(name, bits, "rw", doc=doc) for name, (bits, doc) in
            TRAINER_ARGS.items()]
    live = [
        Register.scalar("PRODUCER", 32, "rw", doc="records the host has appended in total "
                        "(doorbell, read at every step boundary)"),
        Register("STOP", None, (Field("STOP", 0, 1, "rw_sc", doc="write 1: end the launch at "
                                      "the next step boundary; cleared by the core when a "
                                      "boundary takes it and at every start"),),
                 doc="end the launch early (write 1 to set, cleared by the core)"),
    ]
    errors = ", ".join(f"{v} {k}" for k, v in TRAINER_ERRORS.items())
    status = Register("STATUS", None, (
        Field("ERROR", 0, 2, "ro", doc=f"error of the launch ({errors})"),
        *(Field(name, bit, 1, "ro", doc=doc) for name, (bit, doc) in STATUS_FLAGS.items()),
    ), doc="result of the launch; flags are sticky during a launch, cleared at its start")
    counters = [Register.scalar(name, 32, "ro", doc=doc) for name, doc in COUNTERS.items()]
    info = [
        Register("HW_TRAINER", None, (
            _info("MAX_BATCH", 0, 16, "learner.max_batch"),
            _info("DELAY", 16, 4, "delay"),
            _info("STORAGE_BYTES", 20, 8, "storage_width", scale=8)),
            doc="largest batch, priority write-back delay, storage bus bytes"),
        Register.scalar("HW_CAPACITY", 32, "ro", doc="ring capacity (records)",
                        info=Info("tree.capacity")),
        Register.scalar("HW_WINDOW", 32, "ro", doc="append window (records)",
                        info=Info("append_window")),
    ]
    return RegisterMap.with_ap_ctrl_hs("trainer", args + live + [status] + counters + info,
                                       doc="fused DQN trainer (CF'22 Fig. 4)")


def hw_info_values(config: TrainerConfig) -> dict:
    """The constant HW_* register words of ``config``."""
    return trainer_register_map(config).info_values(config)


def kernel_args(config: TrainerConfig) -> dict:
    """What a Vitis ``kernel.xml`` (and the IP packager) needs beyond the ports and registers
    (the layout of :func:`sw.shell.spec.kernel_args`): the storage master ``m_axi_gmem``
    (``storage_width`` bits, bursts of at most 256 beats and never across 4 KiB, up to
    ``gather_outstanding`` reads in flight), the 64-bit pointer argument BASE (BASE_LO,
    BASE_HI) that addresses it, and the other argument registers as scalars."""
    regmap = trainer_register_map(config)
    return {
        "m_axi": {"m_axi_gmem": {"data_width": config.storage_width,
                                 "max_burst": min(256, 4096 // (config.storage_width // 8)),
                                 "outstanding": config.gather_outstanding}},
        "pointers": [{"name": "BASE", "port": "m_axi_gmem", "lo": "BASE_LO", "hi": "BASE_HI",
                      "offset": regmap.offset("BASE_LO")}],
        "scalars": [r.name for r in regmap.user_registers
                    if all(f.access == "rw" for f in r.fields)
                    and r.name not in ("BASE_LO", "BASE_HI")],
    }
