"""Host driver of the prioritized replay accelerator (:mod:`rtl_gen.replay.accelerator`).

:class:`ReplayDriver` runs the same code on every :class:`~sw.driver.mmio.Device` (the golden
device :class:`~sw.replay.device.ReplayGoldenDevice`, the Verilated RTL through
:class:`~sw.driver.sim.SimDevice`, a PYNQ board)::

    rb = ReplayDriver(device)                        # config read back from the HW_* registers
    slots = rb.insert(count=32)                      # new transitions at the maximum priority
    idx, w, p = rb.sample(32, beta=0.4)              # on-chip PRNG targets
    idx, w, p = rb.update_and_sample(idx, td_errors, 32, beta=0.4)   # one fused run

Every call validates its inputs (shapes, dtypes, finiteness, ranges, ``batch <= max_batch``,
indices of filled slots only) and raises ``ValueError`` naming the argument **before any bus
write** (the one read is SIZE, for the indices), then loads the batch
buffers, writes OP/BATCH_SIZE/UPDATE_SIZE, starts, waits for the interrupt (or polls
CTRL.AP_DONE) and checks STATUS: ERROR raises :class:`ReplayError`, EMPTY raises
:class:`ReplayEmptyError` (every priority is zero: nothing to sample), INVALID_INDEX raises
:class:`ReplayError` (cannot happen after validation: it means another master changed the
buffers), SATURATED warns :class:`PrioritySaturatedWarning` (a priority above the leaf format's
maximum was stored as that maximum), START_REFUSED warns
:class:`~sw.driver.common.StartRefusedWarning`.

``update`` and ``update_and_sample`` take TD errors of any sign, as cpprb and TorchRL users
pass them, and store the priorities ``(|delta| + eps) ** alpha``
(:func:`sw.replay.spec.td_priorities`; ``alpha`` and ``eps`` are the driver's, default
:data:`~sw.replay.spec.PER_ALPHA` = 0.6 and :data:`~sw.replay.spec.PER_EPS` = 1e-4), or raw
priorities by keyword (``priorities=``), stored as given; ``insert`` takes raw priorities.
Priorities are real numbers, converted to the tree's fixed-point input format with the
configuration's rounding (above the input format they are clipped to its maximum, which the
hardware then saturates and flags). A positive priority that would round to 0 (below half an
LSB, ``2 ** -priority_frac``) is stored as one LSB instead, so it can still be sampled: the
driver counts these in :attr:`ReplayDriver.clamped` and warns :class:`PriorityClampedWarning`.
Importance weights (Schaul et al. 2016) are computed on the
host from the sampled raw priorities, the root the samples saw and SIZE:
``w_i = (size * p_i / total) ** -beta / max_j w_j``.
"""

import math
import warnings

import numpy as np

from sw.config import check_real
from sw.driver.common import (ControlOf, DriverBase, StartRefusedWarning, integer_in,
                              use_interrupt_arg, warn_level, written_registers)
from sw.driver.mmio import Device
from sw.driver.regmap import RegisterMapAccess
from sw.registry import BLOCKS, family_vlnvs, vlnv

from . import hostfast
from . import spec as replay_spec
from .spec import (
    ERRORS,
    REGIONS,
    ReplayOp,
    SumTreeConfig,
    config_from_hw,
    hw_info_values,
    region_base,
    replay_register_map,
)

__all__ = ["ReplayDriver", "ReplayError", "ReplayEmptyError", "ReplayBusyError",
           "ReplayTimeoutError", "ReplayConfigMismatchError", "PrioritySaturatedWarning",
           "PriorityClampedWarning",
           "REPLAY_VLNV", "REPLAY_VLNVS", "read_replay_config"]

#: VLNV prefix of packaged replay accelerators (``rlk:accel:replay_accel...:1.0``).
REPLAY_VLNV = vlnv(BLOCKS["replay-accel"].module)
#: The VLNVs of the shipped replay accelerators.
REPLAY_VLNVS = family_vlnvs("replay")

_HW_REGS = tuple(r.name for r in
                 replay_register_map(SumTreeConfig(capacity=2)).info_registers)


class ReplayError(RuntimeError):
    """The accelerator refused a run (STATUS.ERROR, ``code``) or reported an invalid index."""

    def __init__(self, code: int, detail: str = ""):
        self.code = code
        text = ERRORS.get(code, "invalid index") if code else "invalid index"
        super().__init__(f"replay accelerator error {code}: {text}{detail}")


class ReplayEmptyError(RuntimeError):
    """STATUS.EMPTY: a sample was requested while every priority is zero."""


class ReplayBusyError(RuntimeError):
    """A run is already in progress (CTRL.AP_IDLE = 0); nothing was written."""


class ReplayTimeoutError(TimeoutError):
    """The run did not finish within the timeout (on the device's clock)."""


class ReplayConfigMismatchError(ValueError):
    """The given configuration does not describe the hardware (HW_* registers)."""


class PrioritySaturatedWarning(RuntimeWarning):
    """STATUS.SATURATED: a priority above the leaf format's maximum was stored as that maximum."""


class PriorityClampedWarning(RuntimeWarning):
    """A positive priority below half an LSB of the priority format was stored as one LSB
    (not 0, which would never be sampled again); :attr:`ReplayDriver.clamped` counts them."""


def read_replay_config(mmio) -> SumTreeConfig:
    """The configuration the HW_* registers describe (rounding: the default).

    Raises :class:`ReplayConfigMismatchError` if they do not describe a replay accelerator.
    """
    rm = replay_register_map(SumTreeConfig(capacity=2))     # offsets do not depend on it
    words = {name: mmio.read32(rm.offset(name)) for name in _HW_REGS}
    try:
        cfg = config_from_hw(rm.decode_info(words))
    except (ValueError, TypeError):
        cfg = None
    if cfg is None or hw_info_values(cfg) != words:
        raise ReplayConfigMismatchError(
            "the HW_* registers do not describe a replay accelerator (read "
            + ", ".join(f"{n}={w:#x}" for n, w in words.items()) + ")")
    return cfg


def _check_against(config: SumTreeConfig, hw: SumTreeConfig):
    want, got = hw_info_values(config), hw_info_values(hw)
    bad = [f"{n} {got[n]:#x} (config: {want[n]:#x})" for n in _HW_REGS if want[n] != got[n]]
    if bad:
        raise ReplayConfigMismatchError("config does not match the hardware: " + "; ".join(bad))


def _count(value, name, hi):
    return integer_in(value, name, 1, hi)


class ReplayDriver(DriverBase):
    """The replay accelerator on any :class:`~sw.driver.mmio.Device`.

    Parameters
    ----------
    device : Device
    config : SumTreeConfig, dict or None
        Checked against the HW_* registers (:class:`ReplayConfigMismatchError`); None takes
        the configuration read back. Its ``rounding`` converts real priorities.
    timeout : float
        Seconds (device clock) a run may take beyond its expected cycles at ``clock_hz``.
    clock_hz : float
        Clock assumed for that expectation (default 100 MHz).
    poll_interval : float
        Seconds between CTRL reads when polling.
    use_interrupt : bool or None
        Wait for the interrupt line; default ``device.has_interrupt``.
    alpha : float
        Priority exponent (>= 0) applied to TD errors: ``(|delta| + eps) ** alpha``; 0 is
        uniform replay. Default :data:`sw.replay.spec.PER_ALPHA` (0.6, Schaul et al.).
    eps : float
        Added to ``|delta|`` (>= 0). Default :data:`sw.replay.spec.PER_EPS` (1e-4, cpprb's).

    Members
    -------
    config : SumTreeConfig
    register_map : RegisterMapAccess
    last_status : dict
        STATUS fields, CYCLES and RESPONSE_CYCLES of the last run.
    alpha, eps : float
    clamped : int
        Positive priorities stored as one LSB because they would have rounded to 0.
    """

    def __init__(self, device: Device, config=None, *, timeout=1.0, clock_hz=100e6,
                 poll_interval=1e-4, use_interrupt=None, alpha=replay_spec.PER_ALPHA,
                 eps=replay_spec.PER_EPS):
        self.alpha = check_real("alpha", alpha, positive=False)
        self.eps = check_real("eps", eps, positive=False)
        self.clamped = 0
        config = self._init_args(device, config, SumTreeConfig, timeout, clock_hz, poll_interval)
        self._use_irq = use_interrupt_arg(device, use_interrupt)
        self._config = config = self._attach(device, config, read_replay_config,
                                             _check_against)
        self.register_map = RegisterMapAccess(replay_register_map(config), ControlOf(device),
                                              written=written_registers(device))
        self.last_status = {}
        self._op_words = {}            # (op, prng, relaxed) -> OP's word
        self._update_params = hostfast.update_params(config)
        # Per configuration, once: the regions' byte offsets and a uint64 staging buffer per
        # input region (its words written in place and handed to the memory port without a
        # copy: every backend takes any buffer).
        self._bases = {name: region_base(config, name) for name in REGIONS}
        self._stage = {name: np.zeros(config.max_batch, "<u8")
                       for name in ("IDX_IN", "PRIO_IN", "TARGET_IN")}
        self._wait_tree_idle()

    def _wait_tree_idle(self):
        """After a reset the RTL clears its tree (STATUS.TREE_BUSY, one cycle per leaf group:
        :func:`sw.replay.spec.run_cycles` of RESET); a run started meanwhile waits for it and
        its CYCLES would count the sweep. Wait here, once, so every run's CYCLES is the cycle
        model's. ``ReplayTimeoutError`` if the tree stays busy beyond the timeout."""
        dev, rm = self._device, self.register_map
        timeout = self._timeout + replay_spec.run_cycles(
            self._config, replay_spec.ReplayOp.RESET) / self._clock_hz
        deadline = dev.time() + timeout
        while rm.STATUS.read().TREE_BUSY:
            if dev.time() >= deadline:
                raise ReplayTimeoutError(f"STATUS.TREE_BUSY still set after {timeout:g} s "
                                         f"(the clearing sweep after reset)")
            dev.sleep(self._poll)

    # -- validation (no bus access) ----------------------------------------------------------
    def _indices(self, indices, name="indices"):
        a = np.asarray(indices)
        if a.ndim != 1:
            raise ValueError(f"{name} must be a 1-D array, not shape {a.shape}")
        if a.size and a.dtype.kind not in "iu":
            raise ValueError(f"{name} must be integers, not dtype {a.dtype}")
        a = a.astype(np.int64, copy=False)        # never written: no copy of int64 input
        cap = self._config.capacity
        if a.size and (a.min() < 0 or a.max() >= cap):
            raise ValueError(f"{name} must be in 0..{cap - 1} (the capacity is {cap})")
        return a

    def _filled(self, indices, name="indices", *, checked=False):
        """Indices of slots that hold a transition (one SIZE read; the FIFO fills 0, 1, ...):
        a slot never filled has priority 0 and no data, and must not be given a priority.
        ``checked``: ``indices`` already passed :meth:`_indices`."""
        a = indices if checked else self._indices(indices, name)
        if a.size:
            size = self.size
            top = int(a.max())
            if size == 0:
                raise ValueError(f"{name} must be filled slots: nothing was inserted yet "
                                 f"(size 0), not {top}")
            if top >= size:
                raise ValueError(f"{name} must be filled slots, in 0..{size - 1} ({size} of "
                                 f"{self._config.capacity} inserted), not {top}")
        return a

    def _priorities(self, priorities, n=None, name="priorities"):
        a = np.asarray(priorities)
        if a.ndim != 1:
            raise ValueError(f"{name} must be a 1-D array, not shape {a.shape}")
        if a.size and a.dtype.kind not in "biuf":
            raise ValueError(f"{name} must be real numbers, not dtype {a.dtype}")
        a = a.astype(np.float64, copy=False)      # never written: no copy of float64 input
        # min >= 0 and max < inf <=> every element finite and non-negative (a NaN makes both
        # comparisons false): two reductions, no temporary array
        if a.size and not (a.min() >= 0 and a.max() < np.inf):
            raise ValueError(f"{name} must be finite and non-negative")
        if n is not None and a.size != n:
            raise ValueError(f"{name} must have {n} elements (one per index), not {a.size}")
        return a

    def _raw(self, a):
        """Raw input-format priorities of validated real ``a``; call after every check."""
        fmt = self._config.input_format
        raw = np.asarray(fmt.quantize(np.minimum(a, fmt.max_value)), np.int64)
        lost = (raw == 0) & (a > 0)
        if lost.any():
            n = int(lost.sum())
            raw[lost] = 1
            self.clamped += n
            warnings.warn(f"{n} positive priorities below one LSB (2**-{fmt.frac} = "
                          f"{2.0 ** -fmt.frac:.3g}) were stored as one LSB, not 0 (smallest "
                          f"{a[lost].min():.3g})", PriorityClampedWarning,
                          stacklevel=warn_level())
        return raw

    def _new_priorities(self, td_errors, priorities, n):
        """Real priorities of an update: from TD errors (``(|delta| + eps) ** alpha``) or
        given; not yet quantized (:meth:`_raw`)."""
        if (td_errors is None) == (priorities is None):
            raise ValueError("give td_errors or priorities, not both" if
                             priorities is not None else "give td_errors or priorities "
                             "(keyword): the new priorities of the indices")
        if priorities is not None:
            return self._priorities(priorities, n)
        a = np.asarray(td_errors)
        if a.ndim != 1:
            raise ValueError(f"td_errors must be a 1-D array, not shape {a.shape}")
        if a.size and a.dtype.kind not in "biuf":
            raise ValueError(f"td_errors must be real numbers, not dtype {a.dtype}")
        a = a.astype(np.float64, copy=False)
        if a.size and not (-np.inf < a.min() and a.max() < np.inf):     # false for a NaN
            raise ValueError(f"td_errors must be finite: {int((~np.isfinite(a)).sum())} NaN "
                             f"or infinite")
        if a.size != n:
            raise ValueError(f"td_errors must have {n} elements (one per index), not {a.size}")
        return self._priorities(replay_spec.td_priorities(a, self.alpha, self.eps), n)

    def _targets(self, targets, batch):
        if targets is None:
            return None
        a = np.asarray(targets)
        if a.shape != (batch,):
            raise ValueError(f"targets must have shape ({batch},), not {a.shape}")
        if a.dtype.kind not in "f":
            raise ValueError(f"targets must be floats in [0, 1), not dtype {a.dtype}")
        if not np.all(np.isfinite(a)) or (a.size and (a.min() < 0 or a.max() >= 1)):
            raise ValueError("targets must be fractions in [0, 1)")
        tb = self._config.target_bits
        return np.minimum(np.floor(a * 2.0 ** tb), 2 ** tb - 1).astype(np.int64)

    def _beta(self, beta):
        if isinstance(beta, bool) or not isinstance(beta, (int, float, np.floating)) \
                or not math.isfinite(beta) or beta < 0:
            raise ValueError(f"beta must be a finite number >= 0, not {beta!r}")
        return float(beta)

    # -- runs ----------------------------------------------------------------------------------
    def _load(self, name, values):
        """Write validated non-negative int64 ``values`` (at most ``max_batch``) to region
        ``name`` as little-endian 64-bit words, through the region's staging buffer."""
        self._load_blocks([(name, values)])

    def _load_blocks(self, blocks, staged=()):
        """:meth:`_load` of ``[(name, values), ...]`` (input regions in the order of
        :data:`~sw.replay.spec.REGIONS`), after ``staged`` ``[(name, n), ...]`` (the first
        ``n`` words already in a region's staging buffer, regions before those of
        ``blocks``), as one :meth:`~sw.driver.mmio.MemoryPort.write_blocks`: the rows between
        them belong to input regions, so a backend may move them as one transfer."""
        out = [(self._bases[name], self._stage[name][:n]) for name, n in staged]
        for name, values in blocks:
            buf = self._stage[name][:len(values)]
            buf[:] = values
            out.append((self._bases[name], buf))
        self._device.memory.write_blocks(out, gaps_are_inputs=True)

    def _staged_update(self, indices, td_errors, priorities):
        """An update's indices and raw priorities checked, quantized and written into the
        IDX_IN and PRIO_IN staging buffers by the compiled pass
        (:func:`sw.replay.hostfast.stage_update`): their number, or None where the numpy code
        must run (no numba, other dtypes, more than ``max_batch`` indices, invalid input: it
        then raises as usual). One SIZE read, after the checks that need none."""
        idx, params = indices, self._update_params
        if params is None or type(idx) is not np.ndarray or idx.dtype != np.int64 \
                or idx.ndim != 1 or not 0 < idx.size <= self._config.max_batch \
                or (td_errors is None) == (priorities is None):
            return None
        prio = td_errors if priorities is None else priorities
        if type(prio) is not np.ndarray or prio.dtype != np.float64 or prio.shape != idx.shape:
            return None
        if priorities is None:
            # a NaN or infinite error gives a NaN or infinite priority, which the compiled
            # pass refuses: the numpy code then names it
            prio = replay_spec.td_priorities(prio, self.alpha, self.eps)
        top = hostfast.stage_update(params, idx, prio, self._stage["IDX_IN"],
                                    self._stage["PRIO_IN"])
        if top is None or top >= self.size:
            return None
        return idx.size

    def _fetch(self, name, n):
        return self._fetch_blocks((name,), n)[0]

    def _fetch_words(self, names, n):
        """``n`` little-endian uint64 words of each region ``names`` (read-only views), through
        one :meth:`~sw.driver.mmio.MemoryPort.read_blocks`."""
        got = self._device.memory.read_blocks([(self._bases[name], 8 * n) for name in names])
        return [np.frombuffer(data, "<u8") for data in got]

    def _fetch_blocks(self, names, n):
        """:meth:`_fetch_words` as int64 arrays of their own."""
        return [w.astype(np.int64) for w in self._fetch_words(names, n)]

    def _run(self, op, batch=1, update_size=1, *, prng=False, relaxed=False, seed=None):
        rm = self.register_map
        if not self._idle():
            raise ReplayBusyError("the replay accelerator is busy (CTRL.AP_IDLE = 0)")
        key = (op, prng, relaxed)
        word = self._op_words.get(key)
        if word is None:
            word = self._op_words[key] = rm.word("OP", CODE=op.value, PRNG=int(prng),
                                                 RELAXED=int(relaxed))
        # arguments only when they change (the register map remembers what it wrote)
        rm.write_word_changed("OP", word)
        rm.write_word_changed("BATCH_SIZE", batch)
        rm.write_word_changed("UPDATE_SIZE", update_size)
        if seed is not None:
            rm.write_word("SEED", seed)
        self._start()
        expected = replay_spec.run_cycles(self._config, op, batch, update_size, relaxed)
        return self._wait(self._timeout + expected / self._clock_hz)

    def _wait(self, timeout):
        rm = self.register_map
        status = self._wait_done(timeout, ReplayTimeoutError)
        # TREE_BUSY is live (posted updates still in the tree's pipeline), not a run result.
        status.pop("TREE_BUSY", None)
        status["CYCLES"] = rm.read_word("CYCLES")
        status["RESPONSE_CYCLES"] = rm.read_word("RESPONSE_CYCLES")
        self.last_status = status
        if status["ERROR"] or status["SATURATED"] or status["START_REFUSED"] \
                or status["INVALID_INDEX"] or status["EMPTY"]:
            self._check(status)
        return status

    def _check(self, status):
        """Raise or warn for the flags of a run's ``status`` (:meth:`_wait`)."""
        if status["ERROR"]:
            raise ReplayError(status["ERROR"])
        if status["SATURATED"] or status["START_REFUSED"]:
            self._warn(status)
        if status["INVALID_INDEX"]:
            raise ReplayError(0, ": a leaf index >= capacity reached the tree")
        if status["EMPTY"]:
            raise ReplayEmptyError("every priority is zero: nothing to sample")

    @staticmethod
    def _warn(status):
        level = warn_level()
        if status["SATURATED"]:
            warnings.warn("replay accelerator STATUS.SATURATED: a priority above the leaf "
                          "format's maximum was stored as that maximum",
                          PrioritySaturatedWarning, stacklevel=level)
        if status["START_REFUSED"]:
            warnings.warn("replay accelerator STATUS.START_REFUSED: AP_START was written "
                          "while the run was in progress and was dropped",
                          StartRefusedWarning, stacklevel=level)

    def _read64(self, name):
        rm = self.register_map
        return rm.read_word(f"{name}_LO") | rm.read_word(f"{name}_HI") << 32

    def _chunks(self, n):
        mb = self._config.max_batch
        return [(lo, min(n, lo + mb)) for lo in range(0, n, mb)]

    # -- the API -------------------------------------------------------------------------------
    def insert(self, priorities=None, *, count=None) -> np.ndarray:
        """Insert transitions in FIFO order (the slot after the last, wrapping at capacity).

        ``priorities`` (1-D, real, >= 0) or, if None, ``count`` transitions (default 1) at the
        maximum priority seen so far (INSERT_MAX). Batches above ``max_batch`` run in chunks.
        Returns the slots written (int64).
        """
        if priorities is None:
            n = 1 if count is None else _count(count, "count", 1 << 31)
            raw = None
        else:
            if count is not None:
                raise ValueError("give priorities or count, not both")
            raw = self._raw(self._priorities(priorities))
            n = raw.size
            if n == 0:
                return np.zeros(0, np.int64)
        slots = []
        for lo, hi in self._chunks(n):
            if raw is None:
                self._run(ReplayOp.INSERT_MAX, hi - lo)
            else:
                self._load("PRIO_IN", raw[lo:hi])
                self._run(ReplayOp.INSERT, hi - lo)
            slots.append(self._fetch("IDX_OUT", hi - lo))
        return np.concatenate(slots)

    def update(self, indices, td_errors=None, *, priorities=None) -> None:
        """Set the priorities of filled slots ``indices`` (in order: for a repeated index the
        last value wins) from ``td_errors`` of any sign (``(|delta| + eps) ** alpha``) or to
        raw ``priorities`` (keyword, >= 0). Batches above ``max_batch`` run in chunks."""
        n = self._staged_update(indices, td_errors, priorities)
        if n is not None:                                   # compiled: staged in one pass
            self._load_blocks((), staged=(("IDX_IN", n), ("PRIO_IN", n)))
            self._run(ReplayOp.UPDATE, n)
            return
        idx = self._indices(indices)
        prio = self._new_priorities(td_errors, priorities, idx.size)
        idx = self._filled(idx, checked=True)
        raw = self._raw(prio)
        for lo, hi in self._chunks(idx.size):
            self._load_blocks([("IDX_IN", idx[lo:hi]), ("PRIO_IN", raw[lo:hi])])
            self._run(ReplayOp.UPDATE, hi - lo)

    def _sampled(self, n, total, beta):
        cfg = self._config
        words = self._fetch_words(("IDX_OUT", "PRIO_OUT"), n)
        size = self.size
        if hostfast.available():                # one compiled pass, the same arithmetic
            return hostfast.sampled(cfg, *words, total, size, beta)
        idx, raw = (w.astype(np.int64) for w in words)
        p = raw.astype(np.float64) / float(total)
        w = (max(size, 1) * p) ** -beta
        w = w / w.max()
        return idx, w, cfg.priority_format.to_float(raw)

    def sample(self, batch: int, beta: float, targets=None):
        """Sample ``batch`` leaves proportionally to their priorities.

        ``targets``: None (the on-chip PRNG) or ``batch`` fractions in [0, 1) (leaf ``i`` is
        taken for a target in its share of the total). Returns ``(indices, weights,
        priorities)``: int64 leaves, importance weights normalised by their maximum, and the
        leaves' priorities (float64).
        """
        n = _count(batch, "batch", self._config.max_batch)
        beta = self._beta(beta)
        x = self._targets(targets, n)
        if x is not None:
            self._load("TARGET_IN", x)
        self._run(ReplayOp.SAMPLE, n, prng=x is None)
        return self._sampled(n, self._read64("TOTAL"), beta)

    def update_and_sample(self, indices, td_errors=None, batch: int = None, beta: float = None,
                          targets=None, *, priorities=None, relaxed=False):
        """One fused run: update filled slots ``indices`` (from ``td_errors`` or to raw
        ``priorities``, as :meth:`update`), then sample ``batch`` leaves (see :meth:`sample`).
        With ``relaxed`` the samples are drawn first and do not see these
        updates (one batch of priority-update delay), and the run is shorter by the tree
        latency when the update batch is large enough (:func:`sw.replay.spec.run_cycles`).
        """
        n = _count(batch, "batch", self._config.max_batch)
        beta = self._beta(beta)
        x = self._targets(targets, n)
        u = self._staged_update(indices, td_errors, priorities)
        if u is not None:                                   # compiled: staged in one pass
            self._load_blocks([] if x is None else [("TARGET_IN", x)],
                              staged=(("IDX_IN", u), ("PRIO_IN", u)))
        else:
            idx = self._indices(indices)
            u = _count(idx.size, "len(indices)", self._config.max_batch)
            prio = self._new_priorities(td_errors, priorities, u)
            idx = self._filled(idx, checked=True)
            raw = self._raw(prio)
            self._load_blocks([("IDX_IN", idx), ("PRIO_IN", raw)]
                              + ([] if x is None else [("TARGET_IN", x)]))
        before = self._read64("TOTAL") if relaxed else None
        self._run(ReplayOp.UPDATE_SAMPLE, n, u, prng=x is None, relaxed=relaxed)
        return self._sampled(n, before if relaxed else self._read64("TOTAL"), beta)

    def read(self, indices) -> np.ndarray:
        """Priorities of filled slots ``indices`` (float64). Batches above ``max_batch`` run
        in chunks."""
        idx = self._filled(indices)
        out = []
        for lo, hi in self._chunks(idx.size):
            self._load("IDX_IN", idx[lo:hi])
            self._run(ReplayOp.READ, hi - lo)
            out.append(self._fetch("PRIO_OUT", hi - lo))
        raw = np.concatenate(out) if out else np.zeros(0, np.int64)
        return self._config.priority_format.to_float(raw)

    def total(self) -> float:
        """Sum of all priorities (the root)."""
        return float(self._config.level_formats[0].to_float(self._read64("TOTAL")))

    @property
    def size(self) -> int:
        """Transitions inserted, at most the capacity."""
        return self.register_map.read_word("SIZE")

    @property
    def write_pointer(self) -> int:
        return int(self.register_map.WRITE_POINTER)

    @property
    def max_priority(self) -> float:
        return float(self._config.priority_format.to_float(self._read64("MAX_PRIORITY")))

    def seed(self, seed: int) -> None:
        """Load the on-chip PRNG (32-bit; 0 loads the reset state)."""
        s = integer_in(seed, "seed", 0, 0xFFFF_FFFF, hi_text="0xffffffff")
        self._run(ReplayOp.SEED, seed=s)

    def reset(self) -> None:
        """Empty the tree: every priority 0, size and write pointer 0, maximum 1.0."""
        self._run(ReplayOp.RESET)
