"""The fused trainer as a Python model behind the driver's bus interfaces (no hardware).

:class:`TrainerGoldenDevice` models what the trainer shows on its ports, at register level with
a virtual clock, on the shared ``ap_ctrl_hs`` shell model
(:class:`~sw.driver.golden_base.ApCtrlGoldenDevice`):

* ``s_axi_control``: :func:`~sw.trainer.spec.trainer_register_map`; the launch arguments are
  latched at AP_START, PRODUCER and STOP are read at every step boundary, the counters are
  live;
* the memory port is the *storage* (device DDR, or the PS DDR buffer of a ZCU106), which the
  core reaches through its AXI4 master: unlike an accelerator's memory window it is never
  locked, the host appends records while a launch runs;
* a launch: the golden core (:class:`~sw.trainer.golden.TrainerCore`) steps lazily as the
  clock advances, each boundary at the cycle the sequential core's cycle model
  (:func:`sw.trainer.schedule.sequential_launch_cycles` and its parts, which the gateware
  :class:`~rtl_gen.trainer.core.TrainerCore` is tested against) puts it, so a doorbell
  written between two boundaries is seen at the second, as in the RTL, and CYCLES reads what
  the RTL's reads with a memory of ``read_latency`` that never stalls.
  The launch ends after STEPS steps, at the first boundary that sees STOP (STATUS.STOPPED),
  or with STATUS.ERROR = 2 at a boundary whose tree is empty; the core then writes a weight
  snapshot if it ran a step (the actors' copy is always the newest).
"""

import numpy as np

from sw.driver.golden_base import ApCtrlGoldenDevice, Run

from .golden import LaunchArgs, TrainerCore
from .layout import storage_bytes
from .schedule import (READ_LATENCY, boundary_cycles, clear_cycles, sequential_load_cycles,
                       sequential_snapshot_cycles, sequential_step_cycles)
from .spec import (STATUS_FLAGS, TRAINER_ERRORS, TrainerCmd, TrainerConfig, hw_info_values,
                   trainer_register_map)

__all__ = ["TrainerGoldenDevice"]

_FLAG_OF = {"LEARNER_OVERFLOW": "learner", "PRIORITY_SATURATED": "saturated",
            "WEIGHT_UNDERFLOW": "underflow", "OVERRUN": "overrun"}
_FOREVER = 1 << 62


class TrainerGoldenDevice(ApCtrlGoldenDevice):
    """The trainer as a Python model behind :class:`~sw.driver.mmio.Device`.

    Parameters
    ----------
    config : TrainerConfig
    clock_hz : float
        Clock of the virtual time base (default 300 MHz).
    access_cycles : int
        Cycles of one control-register access.
    read_latency, write_latency : int
        Storage read latency (AR to the first R beat) and write latency (the last W beat to
        B) the cycle model assumes (:mod:`sw.trainer.schedule`).

    Members
    -------
    core : TrainerCore
        The golden core (tests compare its state with the RTL's).
    log : list
        :class:`~sw.trainer.golden.StepRecord` of every step since the last :meth:`reset`
        when ``keep_log`` is set (default False).
    """

    def __init__(self, config: TrainerConfig, *, clock_hz=300e6, access_cycles=25,
                 read_latency=READ_LATENCY, write_latency=1, keep_log=False):
        if not isinstance(config, TrainerConfig):
            raise TypeError(f"config must be a TrainerConfig, not {type(config).__name__}")
        self._config = config
        self._read_latency = read_latency
        self._write_latency = write_latency
        self.keep_log = keep_log
        self.log = []
        flags = [n for n in STATUS_FLAGS if n != "START_REFUSED"]
        self.core = None
        super().__init__(trainer_register_map(config), hw_info_values(config),
                         mem_bytes=storage_bytes(config), axi_bytes=config.storage_width // 8,
                         status_flags=flags, clock_hz=clock_hz, access_cycles=access_cycles)
        self.core = TrainerCore(config, self.image)

    @property
    def config(self) -> TrainerConfig:
        return self._config

    def reset(self):
        """``ap_rst_n``: registers to reset values, the launch abandoned, the tree and counters
        cleared (CLEAR); storage and weights keep their contents."""
        super().reset()
        getattr(self, "_written_registers", {}).clear()   # the drivers' register cache too
        self._launch = None
        self._last_batch = None                  # the divider's B (kept across launches)
        self.log = []
        if self.core is not None:
            self.core.clear(0)

    # -- launches ----------------------------------------------------------------------------
    def _args(self) -> LaunchArgs:
        a = {name: self._arg(name) for name in (
            "STEPS", "BATCH_SIZE", "LR", "GAMMA", "ALPHA", "BETA", "EPS", "SYNC_PERIOD",
            "SNAPSHOT_PERIOD", "TRACE_PERIOD", "SEED", "CMD")}
        return LaunchArgs(steps=a["STEPS"], batch=a["BATCH_SIZE"], lr=a["LR"],
                          gamma=a["GAMMA"], alpha=a["ALPHA"], beta=a["BETA"], eps=a["EPS"],
                          sync_period=a["SYNC_PERIOD"], snapshot_period=a["SNAPSHOT_PERIOD"],
                          trace_period=a["TRACE_PERIOD"], seed=a["SEED"], cmd=a["CMD"])

    def _begin(self) -> Run:
        args = self._args()
        cfg = self._config
        self._q["STOP", "STOP"] = 0                   # a stale STOP does not end the launch
        if not 1 <= args.batch <= cfg.max_batch:
            return Run(error=TRAINER_ERRORS["batch_size"], length=2, cycles=1)
        base = (self._arg("BASE_HI") << 32) | self._arg("BASE_LO")
        if base % 4096:
            return Run(error=TRAINER_ERRORS["base"], length=2, cycles=1)
        # The model's memory is the storage alone: every base address reaches it (a board
        # decodes BASE into its DDR; here the address bits above the storage are not used).
        self.core.begin(args)
        at = 1
        if args.cmd & TrainerCmd.CLEAR:
            at += 1 + clear_cycles(cfg)
        if args.cmd & TrainerCmd.LOAD:
            at += sequential_load_cycles(cfg, self._read_latency)
        self._launch = {"args": args, "next": self.cycle + at, "error": 0,
                        "stopped": False}
        self._launch_at = self.cycle
        return Run(length=_FOREVER, pending=True)

    def wait_interrupt(self, timeout: float) -> bool:
        limit = self.cycle + max(0, int(float(timeout) * self.clock_hz))
        while (self._launch is not None and self._launch["next"] <= limit
               and not self.interrupt):
            self._advance(self._launch["next"])
        return super().wait_interrupt(max(0.0, (limit - self.cycle) / self.clock_hz))

    def _advance(self, target):
        while self._launch is not None and self._launch["next"] <= target:
            self._boundary()
        super()._advance(target)

    def _boundary(self):
        """One step boundary of the running launch, at cycle ``self._launch['next']``."""
        launch, core, args, cfg = self._launch, self.core, self._launch["args"], self._config
        at = launch["next"]
        writeback = len(core.pending[0][0]) if len(core.pending) > cfg.delay else 0
        inserts = core.boundary(self._q["PRODUCER", "PRODUCER"])
        boundary = boundary_cycles(cfg, writeback, inserts) + 2
        end = None
        if args.cmd & TrainerCmd.INSERT:
            if (self._q["PRODUCER", "PRODUCER"] - core.consumed) & 0xFFFFFFFF:
                launch["next"] = at + boundary
            else:
                end = at + boundary
        elif self._q["STOP", "STOP"]:
            self._q["STOP", "STOP"] = 0
            launch["stopped"] = True
            end = at + boundary
        elif args.steps and core.steps_in_launch >= args.steps:
            end = at + boundary
        elif not core.can_step():
            launch["error"] = TRAINER_ERRORS["empty"]
            end = at + boundary
        else:
            seq, traces = core.snapshot_seq, core.trace_count
            rec = core.step(args)
            if self.keep_log:
                self.log.append(rec)
            launch["next"] = at + sequential_step_cycles(
                cfg, args.batch, writeback, inserts, divide=self._last_batch != args.batch,
                trace=core.trace_count != traces, snapshot=core.snapshot_seq != seq,
                read_latency=self._read_latency, write_latency=self._write_latency)
            self._last_batch = args.batch
        if end is not None:
            if not args.cmd & TrainerCmd.INSERT:
                end += (sequential_snapshot_cycles(cfg, self._write_latency)
                        if core.steps_in_launch
                        and core.final_snapshot() else 1)
            self._launch = None
            self._error = launch["error"]
            self._run.cycles = end - self._launch_at
            self._done_at = end
            self._flags_out = {**{n: int(core.flags[f]) for n, f in _FLAG_OF.items()},
                               "STOPPED": int(launch["stopped"])}

    def _complete(self, pending) -> dict:
        return self._flags_out

    # -- registers and storage -------------------------------------------------------------
    def _read_ro(self, reg, f):
        core = self.core
        values = {"STEPS_DONE": core.steps_in_launch, "CONSUMED": core.consumed,
                  "STEPS_TOTAL": core.steps_total,
                  "SAMPLED": core.sampled, "SNAPSHOT_SEQ": core.snapshot_seq,
                  "TRACE_COUNT": core.trace_count}
        return values.get(reg.name)

    def _mem_check(self, offset, nbytes, what):
        """The storage is never locked: the host appends while the core trains."""
        if offset + nbytes > self._span:
            raise ValueError(f"storage {what} of {nbytes} bytes at {offset:#x} goes past the "
                             f"storage ({self._span:#x} bytes)")
        self._tick(self._access + -(-nbytes // self._axi_bytes))

    def storage(self) -> np.ndarray:
        """The storage bytes (a view: the core's and the host's memory)."""
        return self.image
