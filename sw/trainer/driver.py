"""Host driver of the fused DQN trainer (:mod:`sw.trainer.spec`), on any backend.

The host's work is small next to a launch of M steps: it appends quantized records to the ring
in device memory and rings the doorbell (:meth:`TrainerDriver.insert`), starts launches
(:meth:`TrainerDriver.train`: only the argument registers that changed are written), and reads
the newest weight snapshot for its actors (:meth:`TrainerDriver.weights`) and the counters and
trace (:meth:`TrainerDriver.stats`). Nothing is half-written on bad input: every argument is
checked and quantized before the first bus access.

Backends: :class:`~sw.trainer.device.TrainerGoldenDevice` (the bit-exact golden model) and
the Verilated RTL (:class:`~sw.driver.sim.SimDevice`, ``open_sim("dqn-trainer", config)``).
"""

import warnings

import numpy as np

from sw.driver.common import (ControlOf, DriverBase, bool_flags, hw_field_mismatches,
                              integer_in, use_interrupt_arg, written_registers)
from sw.driver.regmap import RegisterMapAccess
from sw.learner.batch import array_arg, quantize_arg, quantize_weights, real_arg
from sw.learner.mlp import quantize_coef

from . import hostfast
from .layout import (HEADER_BYTES, SNAPSHOT_BUSY, TRACE_BYTES, header_fields, pack_records,
                     pack_weights, record_bytes, region_base, unpack_trace, unpack_weights,
                     weight_bytes)
from .schedule import launch_cycles
from .spec import (COUNT_BITS, ERRORS, TrainerCmd, TrainerConfig, hw_info_values,
                   trainer_register_map)

__all__ = ["TrainerDriver", "TrainerError", "TrainerTimeoutError", "TrainerWarning"]

_MASK = 0xFFFFFFFF


class TrainerError(RuntimeError):
    """A launch ended with STATUS.ERROR set."""


class TrainerTimeoutError(TimeoutError):
    """A launch did not end in time."""


class TrainerWarning(RuntimeWarning):
    """A sticky STATUS flag of a launch (saturation, IS-weight underflow, overrun)."""


#: Byte offset and size of the snapshot header's ``seq`` field (one lane of
#: :func:`~sw.trainer.layout.header_fields`): the driver reads only those bytes, twice per
#: snapshot read.
_SEQ_FIELD = next(f for f in header_fields() if f.name == "seq")
_SEQ_AT = _SEQ_FIELD.lane * COUNT_BITS // 8 + _SEQ_FIELD.lsb // 8
_SEQ_BYTES = -(-_SEQ_FIELD.width // 8)


def _read_seq(mem, off):
    """The ``seq`` of the snapshot header at byte ``off`` of the storage."""
    return int.from_bytes(mem.read(off + _SEQ_AT, _SEQ_BYTES), "little")


class TrainerDriver(DriverBase):
    """The fused trainer on a :class:`~sw.driver.mmio.Device`.

    Parameters
    ----------
    device : Device
        Control port, storage memory port, interrupt, clock; its ``storage_address`` (if
        any: the bus address of the storage, 4 KiB aligned) goes into BASE_HI:BASE_LO.
    config : TrainerConfig or None
        The trainer's configuration; None takes ``device.config``. Checked against the HW_*
        registers (capacity, append window, largest batch, delay, storage bus).
    seed : int
        PRNG seed loaded by the first launch (which also clears the tree).
    timeout, clock_hz, poll_interval, use_interrupt
        As for the other drivers (:class:`~sw.learner.driver.LearnerDriver`).

    Members
    -------
    config : TrainerConfig
    register_map : RegisterMapAccess
    produced : int
        Records appended since the tree was cleared.
    last_status : dict
        STATUS fields, STEPS_DONE and CYCLES of the last launch.
    """

    def __init__(self, device, config=None, *, seed=0, timeout=1.0, clock_hz=300e6,
                 poll_interval=1e-5, use_interrupt=None):
        if config is None:
            config = getattr(device, "config", None)
        config = self._init_args(device, config, TrainerConfig, timeout, clock_hz,
                                 poll_interval)
        if config is None:
            raise ValueError("config must be given for a device that does not carry one")
        self._seed = integer_in(seed, "seed", 0, _MASK)
        self._use_irq = use_interrupt_arg(device, use_interrupt)
        self._device = device
        self._config = config
        self.register_map = RegisterMapAccess(trainer_register_map(config), ControlOf(device),
                                              written=written_registers(device))
        self._check_hw()
        self._num = config.learner.numerics
        base = getattr(device, "storage_address", None) or 0
        if not isinstance(base, int) or base < 0 or base >= 1 << 64 or base % 4096:
            raise ValueError(f"device.storage_address must be a 4 KiB aligned 64-bit address, "
                             f"not {base!r}")
        self._base = base
        self._ring = region_base(config, "ring")
        self._rb = record_bytes(config)
        self._cleared = False
        self._raw_args = {}                      # hyper-parameters -> their register values
        self._load = False
        self._host_weights = None
        self.produced = 0
        self.last_status = {}

    def _check_hw(self):
        """The HW_* words against the configuration's (one read each)."""
        want = hw_info_values(self._config)
        got = {name: self.register_map.read_word(name) for name in want}
        bad = hw_field_mismatches(trainer_register_map(self._config), list(want), want, got)
        if bad:
            raise ValueError("the trainer's HW registers do not match config: "
                             + "; ".join(bad))

    # -- weights -----------------------------------------------------------------------------
    def init_weights(self, seed: int = 0, *, scale: float = 1.0):
        """PyTorch's default initialisation (U(±1/sqrt(fan_in))), loaded by the next launch
        into the network and its target."""
        from sw.learner.mlp import init_weights
        raw = init_weights(self._num, np.random.default_rng(seed), scale=scale)
        self.load_raw_weights(raw)

    def load_weights(self, weights, biases):
        """Float ``weights[l]`` (``sizes[l] × sizes[l+1]``, ``y = x @ W + b``) and
        ``biases[l]``, quantized (values outside the weight format: ``ValueError``) and loaded
        by the next launch into the network and its target."""
        lc = self._config.learner
        self.load_raw_weights(quantize_weights(lc.sizes, self._num.weight_format, weights,
                                               biases))

    def load_raw_weights(self, raw):
        """Raw ``(n_in + 1) × n_out`` matrices, loaded by the next launch."""
        shapes = self._num.weight_shapes()
        if len(raw) != len(shapes):
            raise ValueError(f"raw weights must be {len(shapes)} matrices, not {len(raw)}")
        raw = [self._num.weight_format.check_raw(np.asarray(w), f"raw[{l}]")
               for l, w in enumerate(raw)]
        for l, (w, s) in enumerate(zip(raw, shapes)):
            if w.shape != s:
                raise ValueError(f"raw[{l}] must have shape {s}, not {w.shape}")
        self._device.memory.write(region_base(self._config, "load"),
                                  pack_weights(self._config, raw).tobytes())
        self._host_weights = [np.asarray(w, np.int64) for w in raw]
        self._load = True

    def raw_weights(self) -> list:
        """The newest snapshot's raw matrices (the weights loaded last before any launch)."""
        seq = self.register_map.read_word("SNAPSHOT_SEQ")
        if seq == 0:
            if self._host_weights is None:
                raise RuntimeError("no weights yet: load_weights or init_weights first")
            return [w.copy() for w in self._host_weights]
        mem, c = self._device.memory, self._config
        for _ in range(8):
            off = region_base(c, f"snap{seq % 2}")
            head = _read_seq(mem, off)
            image = np.frombuffer(mem.read(off + HEADER_BYTES, weight_bytes(c)), np.uint8)
            again = _read_seq(mem, off)
            if head == seq == again and head != SNAPSHOT_BUSY:
                return unpack_weights(c, image)
            seq = self.register_map.read_word("SNAPSHOT_SEQ")
        raise RuntimeError("the weight snapshot kept changing while it was read")

    def weights(self):
        """``(weights, biases)`` of the newest snapshot as float64 lists."""
        fmt = self._num.weight_format
        raw = self.raw_weights()
        return [fmt.to_float(m[:-1]) for m in raw], [fmt.to_float(m[-1]) for m in raw]

    # -- records -----------------------------------------------------------------------------
    def _records(self, obs, actions, rewards, next_obs, dones):
        n_in, n_out = self._config.learner.sizes[0], self._config.learner.sizes[-1]
        obs = array_arg(obs, "obs", shape=(None, n_in), kinds="iuf")
        n = obs.shape[0]
        nxt = array_arg(next_obs, "next_obs", shape=(n, n_in), kinds="iuf")
        rew = array_arg(rewards, "rewards", shape=(n,), kinds="iuf")
        act = array_arg(actions, "actions", shape=(n,), kinds="iu")
        if n and (act.min() < 0 or act.max() >= n_out):
            raise ValueError(f"actions must be integers in 0..{n_out - 1}")
        done = bool_flags(array_arg(dones, "dones", shape=(n,), kinds="biuf"), "dones")
        fast = hostfast.records(self._config, obs, act, rew, nxt, done)
        if fast is not None:
            return fast
        fmt = self._num.act_format
        return pack_records(self._config, quantize_arg(obs, fmt, "obs"), act,
                            quantize_arg(rew, fmt, "rewards"),
                            quantize_arg(nxt, fmt, "next_obs"), done)

    def insert(self, obs, actions, rewards, next_obs, dones) -> int:
        """Append transitions (``obs``/``next_obs`` B × n_in, the rest B): quantized, written
        to the ring's next slots, announced by the doorbell. Waits while the append window is
        full and a launch runs; with none running, a launch without steps (CMD INSERT) takes
        them. Returns the records appended."""
        recs = self._records(obs, actions, rewards, next_obs, dones)
        self._ensure_cleared()
        c, mem, rm = self._config, self._device.memory, self.register_map
        done = 0
        while done < len(recs):
            consumed = rm.read_word("CONSUMED")
            free = c.append_window - ((self.produced - consumed) & _MASK)
            if free <= 0:
                if self._idle():
                    self._launch(TrainerCmd.INSERT, steps=0, BATCH_SIZE=1)
                    self.wait()
                else:
                    self._device.sleep(self._poll)
                continue
            n = min(free, len(recs) - done)
            slot = self.produced % c.capacity
            first = min(n, c.capacity - slot)
            mem.write(self._ring + slot * self._rb, recs[done:done + first].tobytes())
            if n > first:
                mem.write(self._ring, recs[done + first:done + n].tobytes())
            self.produced = (self.produced + n) & _MASK
            rm.write_word("PRODUCER", self.produced)
            done += n
        return done

    # -- launches ----------------------------------------------------------------------------
    def _ensure_cleared(self):
        if not self._cleared:
            self._cleared = True
            self.produced = 0
            self.register_map.write_word("PRODUCER", 0)
            self._launch(TrainerCmd.CLEAR | TrainerCmd.INSERT, steps=0, BATCH_SIZE=1)
            self.wait()

    def _launch(self, cmd, *, steps, **raw):
        rm = self.register_map
        if self._load and not cmd & TrainerCmd.INSERT:
            cmd |= TrainerCmd.LOAD
            self._load = False
        values = {"CMD": int(cmd), "STEPS": steps, "SEED": self._seed,
                  "BASE_LO": self._base & _MASK, "BASE_HI": self._base >> 32, **raw}
        for name, v in values.items():
            rm.write_word_changed(name, int(v))
        self._expected_cycles = (launch_cycles(self._config, steps, raw["BATCH_SIZE"])
                                 if steps else 0)
        self._start()

    def start(self, steps: int, *, batch: int, lr: float, gamma: float = 0.99,
              alpha: float = 0.6, beta: float = 0.4, eps: float = 1e-3, sync_period: int = 250,
              snapshot_period: int = 0, trace_period: int = 0):
        """Start a launch of ``steps`` gradient steps (0: until :meth:`stop`) and return at
        once; :meth:`wait` ends it. Hyper-parameters as the CPU DQN takes them (``lr`` of the
        mean squared TD error; the IS weights normalised by the batch maximum)."""
        steps = integer_in(steps, "steps", 0, _MASK)
        key = (batch, lr, gamma, alpha, beta, eps, sync_period, snapshot_period, trace_period)
        raw = self._raw_args.get(key)
        if raw is None:
            raw = self._raw_args[key] = self._launch_args(*key)
        if steps == 0 and not raw["SNAPSHOT_PERIOD"]:
            warnings.warn("a launch until stop() with snapshot_period 0 gives the actors no "
                          "weights until it ends", TrainerWarning, stacklevel=2)
        self._ensure_cleared()
        if not self._idle():
            raise RuntimeError("a launch is running: wait() or stop() first")
        self._launch(0, steps=steps, **raw)

    def _launch_args(self, batch, lr, gamma, alpha, beta, eps, sync_period, snapshot_period,
                     trace_period) -> dict:
        """The launch's register values, every argument checked (names in the errors)."""
        c, num = self._config, self._num
        batch = integer_in(batch, "batch", 1, c.max_batch)
        lr = real_arg(lr, "lr", 0.0)
        return {"BATCH_SIZE": batch,
            "LR": quantize_coef(lr * 2 / batch, num.lr_format, "lr * 2 / batch"),
            "GAMMA": quantize_coef(real_arg(gamma, "gamma", 0.0, 1.0), num.coef_format,
                                   "gamma"),
            "ALPHA": quantize_coef(real_arg(alpha, "alpha", 0.0, 1.0), c.coef_format, "alpha"),
            "BETA": quantize_coef(real_arg(beta, "beta", 0.0, 1.0), c.coef_format, "beta"),
            "EPS": quantize_coef(real_arg(eps, "eps", 0.0, 1.0), c.eps_format, "eps"),
            "SYNC_PERIOD": integer_in(sync_period, "sync_period", 0, 0xFFFF),
            "SNAPSHOT_PERIOD": integer_in(snapshot_period, "snapshot_period", 0, 0xFFFF),
            "TRACE_PERIOD": integer_in(trace_period, "trace_period", 0, 0xFFFF)}

    def wait(self, timeout=None) -> dict:
        """Wait for the launch to end; returns :attr:`last_status`. ``TrainerError`` for
        STATUS.ERROR, :class:`TrainerWarning` for each sticky flag."""
        status = self._wait_done(timeout, TrainerTimeoutError)
        rm = self.register_map
        status = dict(status, STEPS_DONE=rm.read_word("STEPS_DONE"),
                      CYCLES=rm.read_word("CYCLES"))
        self.last_status = status
        if status["ERROR"]:
            raise TrainerError(f"launch refused: {ERRORS.get(status['ERROR'], 'unknown')}")
        for flag in ("LEARNER_OVERFLOW", "PRIORITY_SATURATED", "WEIGHT_UNDERFLOW", "OVERRUN"):
            if status.get(flag):
                warnings.warn(f"trainer STATUS.{flag} was set in the last launch",
                              TrainerWarning, stacklevel=2)
        return status

    def train(self, steps: int, **kw) -> dict:
        """:meth:`start` then :meth:`wait`: ``steps`` gradient steps (at least 1)."""
        integer_in(steps, "steps", 1, _MASK)
        self.start(steps, **kw)
        return self.wait()

    def stop(self) -> dict:
        """End a running launch after its current step; returns :attr:`last_status` (and
        nothing when idle)."""
        if self._idle():
            return self.last_status
        self.register_map.write_word("STOP", 1)
        return self.wait(self._timeout + 1e-2)

    # -- monitoring --------------------------------------------------------------------------
    def stats(self) -> dict:
        """The counters and the trace: ``consumed``, ``steps_total``, ``sampled``,
        ``snapshot_seq``, and ``trace``, an array of (steps_total, consumed, mean |Q - y|)
        rows, oldest first."""
        rm, c = self.register_map, self._config
        out = {k.lower(): rm.read_word(k) for k in ("CONSUMED", "STEPS_TOTAL", "SAMPLED",
                                                    "SNAPSHOT_SEQ", "TRACE_COUNT")}
        n = min(out["trace_count"], c.trace_depth)
        trace = unpack_trace(c, self._device.memory.read(region_base(c, "trace"),
                                                         c.trace_depth * TRACE_BYTES))
        order = (out["trace_count"] - n + np.arange(n)) % c.trace_depth
        rows = {k: v[order].astype(np.float64) for k, v in trace.items()}
        mean = rows["abs_td_sum"] / np.maximum(rows["samples"], 1) * self._num.act_format.ulp
        out["trace"] = np.column_stack([rows["steps_total"], rows["consumed"], mean])
        return out
