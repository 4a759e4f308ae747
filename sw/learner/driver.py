"""Host driver of the MLP learner accelerator: float weights and batches in, losses out.

:class:`LearnerDriver` runs the same code on every :class:`~sw.driver.mmio.Device` (the golden
model :class:`~sw.learner.device.LearnerGoldenDevice`, the Verilated RTL, a PYNQ board)::

    drv = LearnerDriver(device, config)       # or config=None: read back from HW_* registers
    drv.load_weights(weights, biases)         # float, weights[l] is n_in x n_out (x @ W + b)
    loss = drv.train_step(obs, actions, rewards, next_obs, dones, gamma=0.99, lr=1e-3)
    drv.sync_target()                         # DQN: target network <- online network

A learner built with ``optimizer="adam"`` takes ``LearnerDriver(device, adam=AdamHyper(lr=1e-3,
betas=(0.9, 0.999), eps=1e-8))`` and behaves as ``torch.optim.Adam``: :mod:`sw.learner.optim`
(the ADAM_* registers of every step, the step count, ``lr=`` per step, the moments reset by
every write of the online network, ``reset_optimizer``, ``optimizer_state``).

The weights live on chip and are updated in place by every step; :meth:`LearnerDriver.
read_weights` reads them back. A new accelerator's memory holds an all-zero network, which
trains to nothing (every gradient is 0): :meth:`LearnerDriver.train_step` and
:meth:`LearnerDriver.run` refuse with a ``RuntimeError`` until the driver has written the
network (:meth:`~LearnerDriver.load_weights`, :meth:`~LearnerDriver.load_raw_weights`, or
:meth:`~LearnerDriver.init_weights`: PyTorch's default initialisation). Weights that another
driver left in the accelerator are taken over with ``drv.load_raw_weights(
drv.read_raw_weights(), target=False)``. Every method does, in order:

1. **validation, before any bus access**: shapes (``weights[l]`` is ``sizes[l] x
   sizes[l+1]``, ``biases[l]`` ``sizes[l+1]``; ``obs`` and ``next_obs`` ``[B, sizes[0]]``,
   ``actions``, ``rewards`` and ``dones`` ``[B]``, MSE ``targets`` ``[B, sizes[-1]]``), dtypes
   (numeric; actions integers in ``0..n_actions-1``; dones bool or 0/1), finiteness,
   ``1 <= B <= max_batch``, ``gamma`` in [0, 1], ``lr >= 0`` with ``lr * 2 / B`` inside the LR
   register's format (and not rounded to 0 when ``lr > 0``; Adam: ``lr > 0`` or None), and the
   arguments of the configured loss only: ``ValueError`` naming the argument;
2. **quantization** (a step's batch: :func:`~sw.learner.batch.prepare_batch`, with the checks
   above) to the fixed-point formats of the hardware
   (:class:`~sw.learner.spec.LearnerNumerics`): weights and biases to the weight format,
   observations, rewards and targets to the activation format, ``gamma`` to the coefficient
   format, ``eta = lr * 2 / B`` to the LR format (the 2/B of the mean squared error is folded
   into the coefficient, see :mod:`sw.learner.mlp`). A value outside its format is an error
   (``on_range="error"``, the default: the message names the argument, the first element outside
   and the range) or, with ``on_range="clip"``, saturated with a :class:`LearnerRangeWarning` --
   never wrapped;
3. **the step** (:meth:`LearnerDriver.start`, :meth:`LearnerDriver.wait`, also usable on raw
   values): CTRL.AP_IDLE checked (:class:`LearnerBusyError` before anything is written), the
   batch into the memory regions of :mod:`sw.learner.layout`, BATCH_SIZE, LR, GAMMA (and
   ADAM_*), AP_START, then the interrupt (or polling of CTRL.AP_DONE) with a timeout
   (:class:`LearnerTimeoutError`), STATUS: ``ERROR`` raises :class:`LearnerError`, the
   saturation flags warn with :class:`LearnerOverflowWarning` (naming them), START_REFUSED
   warns :class:`~sw.driver.common.StartRefusedWarning`; LOSS and CYCLES read back.

Loss: ``(1/B) sum_b sum_o (Q[b, o] - y[b, o])**2`` with, for DQN, only the action taken
(``y_b = r_b + gamma (1 - d_b) max_a Q_target(s'_b, a)``), i.e. torch's
``F.mse_loss(q.gather(1, a), y)`` and, for MSE, ``((q - Y)**2).sum(1).mean()``; one step is
plain SGD with learning rate ``lr`` on it (or Adam). The value returned is exact for the
fixed-point Q values and targets (the LOSS registers hold the sum of squares in raw units).

Per-sample loss weights (DQN, ``loss_weights=``: prioritized replay's importance-sampling
weights, in [0, 1], normalized by their maximum as :meth:`sw.replay.driver.ReplayDriver.sample`
returns them): the step is SGD on ``(1/B) sum_b w_b (Q[b, a_b] - y_b)**2`` (torch:
``(w * (q.gather(1, a).squeeze(1) - y)**2).mean()``); the hardware multiplies each sample's
error by ``w_b`` in the coefficient format (``coef_width - 1`` fraction bits) before
back-propagating it. The value returned stays the unweighted loss (the LOSS registers);
``details=True`` gives the weighted one too.

Target network (DQN): :meth:`LearnerDriver.sync_target` copies the online weights into the
target weights now. ``train_step(..., sync_target=True)`` makes that step's updated weights the
target weights, and ``sync_period=N`` (constructor or attribute) does so every N-th step
(DQN's target update period). If the hardware has the SYNC_TARGET/SYNC_PERIOD registers the
accelerator does the copy at no cost during the step; otherwise the driver emulates the same
rule with a host copy through the memory port after the step (``w<l>`` to ``tw<l>``, word for
word).

Not checked by the HW_* registers: the rounding mode (a given config's is trusted; read back it
is ``half_up``).
"""

import operator

import numpy as np

from sw.driver.common import (
    ControlOf,
    DriverBase,
    integer_in,
    use_interrupt_arg,
    written_registers,
)
from sw.driver.mmio import Device
from sw.driver.regmap import RegisterMapAccess
from sw.registry import BLOCKS, family_vlnvs, vlnv

from . import hostfast
from .batch import (LearnerBatch, StepDetails, array_arg, prepare_batch, quantize_weights,
                    require_dqn, sgd_eta)
from .errors import (
    LearnerBusyError,
    LearnerConfigMismatchError,
    LearnerError,
    LearnerOverflowWarning,
    LearnerRangeWarning,
    LearnerTimeoutError,
    OVERFLOW_FLAGS,  # noqa: F401 - re-exported
    check_against,
    read_learner_config,
    warn_status,
)
from .layout import (
    pack_matrix,
    pack_samples,
    region,
    region_base,
    regions,
    unpack_matrix,
    word_bytes,
)
from .mlp import dqn_targets
from .optim import AdamSupport, adam_arg
from .schedule import step_cycles
from .spec import LearnerConfig, learner_register_map

__all__ = [
    "LEARNER_VLNV",
    "LEARNER_VLNVS",
    "LearnerBatch",
    "LearnerBusyError",
    "LearnerConfigMismatchError",
    "LearnerDriver",
    "LearnerError",
    "LearnerOverflowWarning",
    "LearnerRangeWarning",
    "LearnerTimeoutError",
    "StepDetails",
    "read_learner_config",
]

#: IP-XACT VLNV prefix of packaged learners: every learner module's name starts with
#: ``learner`` (``rlk:accel:learner_cartpole_s4:1.0``, ...); see :func:`sw.registry.vlnv`.
LEARNER_VLNV = vlnv(BLOCKS["learner"].module)
#: The VLNVs of the shipped learners (what PYNQ binds :class:`LearnerIP` to).
LEARNER_VLNVS = family_vlnvs("learner")


class LearnerDriver(AdamSupport, DriverBase):
    """The learner accelerator on any :class:`~sw.driver.mmio.Device`.

    Parameters
    ----------
    device : Device
        Control port, memory port, interrupt, clock.
    config : LearnerConfig, dict or None
        The accelerator's configuration. It is always checked against the HW_* registers
        (:func:`read_learner_config`; mismatch: :class:`LearnerConfigMismatchError`); None
        takes the configuration read back.
    timeout : float
        Seconds (on the device's clock) a step may take beyond its expected cycle count
        (:func:`~sw.learner.schedule.step_cycles`) at ``clock_hz``.
    clock_hz : float
        Clock assumed to turn cycles into seconds for the timeout (default 100 MHz).
    poll_interval : float
        Seconds between CTRL reads when polling.
    use_interrupt : bool or None
        Wait for the interrupt line (GIER/IP_IER enabled, IP_ISR cleared after each step);
        default ``device.has_interrupt``. Otherwise poll CTRL.AP_DONE (interrupts disabled).
    on_range : str
        ``"error"`` (default): a float outside its fixed-point format raises ``ValueError``;
        ``"clip"``: it saturates and :class:`LearnerRangeWarning` is issued.
    sync_period : int
        DQN: make the updated weights the target weights every ``sync_period``-th step
        (counted since the last sync); 0 (default): only when asked.
    adam : AdamHyper, dict or None
        An Adam learner's hyperparameters (default ``AdamHyper()``); :mod:`sw.learner.optim`.

    Members
    -------
    config : LearnerConfig
    register_map : RegisterMapAccess
        PYNQ-style access to every register (``drv.register_map.STATUS.ERROR``).
    hardware_sync : bool
        The accelerator has the target-sync registers (else the driver copies on the host).
    sync_period : int
    adam : AdamHyper or None
    optimizer_step : int
    last_batch : LearnerBatch or None
    last_status : dict
        STATUS fields, LOSS and CYCLES of the last step.
    """

    def __init__(self, device: Device, config=None, *, timeout=1.0, clock_hz=100e6,
                 poll_interval=1e-4, use_interrupt=None, on_range="error", sync_period=0,
                 adam=None):
        config = self._init_args(device, config, LearnerConfig, timeout, clock_hz, poll_interval)
        if on_range not in ("error", "clip"):
            raise ValueError(f"on_range must be 'error' or 'clip', not {on_range!r}")
        self._on_range = on_range
        self._use_irq = use_interrupt_arg(device, use_interrupt)
        self._sync_period = self._check_period(sync_period)
        hyper = adam_arg(adam)
        # Nothing above touched the device; now read the hardware's own description.
        config = self._attach(device, config, read_learner_config, check_against)
        require_dqn(config, sync_period, "sync_period")
        self._config = config
        self._init_adam(hyper)
        self.register_map = RegisterMapAccess(learner_register_map(config), ControlOf(device),
                                              written=written_registers(device))
        self.hardware_sync = "SYNC_TARGET" in self.register_map
        # Once per driver, for the step's hot path: the input regions' byte offsets, the
        # compiled DQN pass's constants (None: the numpy code).
        self._bases = {r.name: region_base(config, r.name) for r in regions(config)}
        self._dqn_params = hostfast.dqn_params(config)
        self._since_sync = 0                      # host emulation of the sync counter
        self._weights_loaded = False              # the online network written by this driver
        self._expected_cycles = 0
        self.last_batch = None
        self.last_status = {}

    # -- properties ----------------------------------------------------------------------------
    @property
    def sync_period(self) -> int:
        return self._sync_period

    @sync_period.setter
    def sync_period(self, value):
        value = self._check_period(value)
        require_dqn(self._config, value, "sync_period")
        self._sync_period = value

    @staticmethod
    def _check_period(value):
        return integer_in(value, "sync_period", 0, 0xFFFF)

    # -- host values -> raw ----------------------------------------------------------------------
    def quantize_weights(self, weights, biases) -> list:
        """Float ``weights[l]`` (``sizes[l] x sizes[l+1]``) and ``biases[l]`` (``sizes[l+1]``)
        as the raw ``(sizes[l] + 1) x sizes[l+1]`` matrices the hardware stores (bias in the
        last row). No bus access."""
        cfg = self._config
        return quantize_weights(cfg.sizes, cfg.numerics.weight_format, weights, biases,
                                self._on_range)

    def prepare(self, obs, actions=None, rewards=None, next_obs=None, dones=None, *,
                targets=None, gamma=0.99, lr=None, loss_weights=None) -> LearnerBatch:
        """Validate and quantize one step's batch (see the module docstring). No bus access.

        DQN: ``obs``, ``actions``, ``rewards``, ``next_obs``, ``dones``, ``gamma``, ``lr``,
        optionally ``loss_weights`` (``[B]`` in [0, 1]); MSE: ``obs``, ``targets``, ``lr``
        (Adam: optional). Raises ``ValueError`` naming the first bad argument.
        """
        return self._prepare(obs, actions, rewards, next_obs, dones, targets, gamma, lr,
                             loss_weights)[0]

    def _lr(self, lr, B):
        """``(raw eta, lr)`` of the step's learning rate for a batch of ``B`` (Adam: ``(0,
        the step's Adam lr)``)."""
        if self._adam is not None:
            return 0, self._adam_lr(lr, B)
        if lr is None:
            raise ValueError("lr must be given for an SGD learner (a real number >= 0)")
        return sgd_eta(lr, B, self._config.numerics.lr_format)

    def _prepare(self, obs, actions, rewards, next_obs, dones, targets, gamma, lr,
                 loss_weights):
        """:meth:`prepare`, and the batch's images where the compiled DQN pass made them
        (:func:`sw.learner.hostfast.dqn_batch`), else None:
        :func:`~sw.learner.batch.prepare_batch`."""
        return prepare_batch(self._config, obs, actions, rewards, next_obs, dones, targets,
                             gamma, loss_weights, lr_of=lambda B: self._lr(lr, B),
                             on_range=self._on_range, dqn_params=self._dqn_params)

    # -- memory ----------------------------------------------------------------------------------
    def _images(self, batch: LearnerBatch) -> dict:
        cfg = self._config
        fast = hostfast.batch_images(cfg, batch)
        if fast is not None:
            return fast
        out = {"obs": pack_matrix(cfg, "obs", batch.obs)}
        if cfg.loss == "mse":
            out["targets"] = pack_matrix(cfg, "targets", batch.targets)
        else:
            out["next_obs"] = pack_matrix(cfg, "next_obs", batch.next_obs)
            out["samples"] = pack_samples(cfg, batch.actions, batch.rewards, batch.dones,
                                          batch.loss_weights)
        return out

    def _require_idle(self):
        """Read CTRL (which also clears a stale AP_DONE); raise if a step is in progress."""
        if not self._idle():
            raise LearnerBusyError("the learner is busy (CTRL.AP_IDLE = 0): a step is in "
                                   "progress")

    def _read_region(self, name: str, rows: int) -> bytes:
        cfg = self._config
        r = region(cfg, name)
        n = cfg.groups(rows) * r.col_groups(cfg) * word_bytes(cfg, name)
        return bytes(self._device.memory.read(region_base(cfg, name), n))

    def read_raw(self, name: str, rows: int):
        """Raw int64 matrix of region ``name`` (:func:`sw.learner.layout.regions`), its
        first ``rows`` rows. The learner must be idle (not checked: CTRL is not read)."""
        return unpack_matrix(self._config, name, self._read_region(name, rows), rows)

    def _layer_names(self, target):
        cfg = self._config
        require_dqn(cfg, target, "target=True")
        return [f"{'tw' if target else 'w'}{l}" for l in range(cfg.n_layers)]

    def load_raw_weights(self, raw, *, target=None):
        """Write raw ``(n_in + 1) x n_out`` weight-format matrices (bias in the last row).

        ``target``: also (True) or only ("only") the target network; default: also, for DQN.
        Writing the online network resets an Adam optimizer (:meth:`reset_optimizer`).
        """
        cfg = self._config
        shapes = cfg.numerics.weight_shapes()
        if isinstance(raw, np.ndarray) or not hasattr(raw, "__len__") or len(raw) != len(shapes):
            raise ValueError(f"raw must be a sequence of {len(shapes)} matrices")
        fmt = cfg.numerics.weight_format
        mats = []
        for l, (m, shape) in enumerate(zip(raw, shapes)):
            a = array_arg(m, f"raw[{l}]", shape=shape, kinds="iu")
            mats.append(fmt.check_raw(a, f"raw[{l}]").astype(np.int64))
        if target is None:
            target = cfg.loss == "dqn"
        if target not in (True, False, "only"):
            raise ValueError(f"target must be True, False, 'only' or None, not {target!r}")
        names = []
        if target != "only":
            names.append(self._layer_names(False))
        if target:
            names.append(self._layer_names(True))
        images = [(n, pack_matrix(cfg, n, m)) for group in names for n, m in zip(group, mats)]
        if target != "only":
            images += self._adam_reset_images()
        self._require_idle()
        self._write_images(images)
        if target != "only":
            self._weights_loaded = True
            self._adam_reset()

    def load_weights(self, weights, biases, *, target=None):
        """Quantize and write the network: ``weights[l]`` is ``sizes[l] x sizes[l+1]``
        (``y = x @ W + b``; torch's ``nn.Linear.weight.T``), ``biases[l]`` ``sizes[l+1]``.

        ``target``: also (True, the default for DQN) or only (``"only"``) the target network.
        Values outside the weight format: see ``on_range``.
        """
        self.load_raw_weights(self.quantize_weights(weights, biases), target=target)

    def init_weights(self, seed: int = 0, *, scale: float = 1.0, target=None):
        """Write PyTorch's default initialisation of the network (``nn.Linear``'s
        U(±scale/sqrt(fan_in)) for weights and biases, :func:`sw.learner.mlp.init_weights`,
        drawn from ``numpy.random.default_rng(seed)``, quantized and saturated to the weight
        format); ``target`` as :meth:`load_raw_weights`. The explicit start of a training run
        that brings no weights of its own."""
        from .mlp import init_weights
        seed = integer_in(seed, "seed", 0, (1 << 63) - 1, hi_text="2**63 - 1")
        if isinstance(scale, bool) or not isinstance(scale, (int, float, np.integer,
                                                            np.floating)) \
                or not 0 < scale < float("inf"):
            raise ValueError(f"scale must be a positive number, not {scale!r}")
        raw = init_weights(self._config.numerics, np.random.default_rng(seed),
                           scale=float(scale))     # saturated to the weight format
        self.load_raw_weights(raw, target=target)

    def _require_weights(self, method):
        if not self._weights_loaded:
            raise RuntimeError(
                f"{method} before any weights: the accelerator's network is all zeros until "
                f"load_weights, load_raw_weights or init_weights writes one (to train weights "
                f"another driver left there: load_raw_weights(read_raw_weights(), "
                f"target=False))")

    def read_raw_weights(self, *, target=False) -> list:
        """The raw ``(n_in + 1) x n_out`` matrices on chip (online, or the target network)."""
        names = self._layer_names(target)
        self._require_idle()
        return [self.read_raw(n, self._config.sizes[l] + 1) for l, n in enumerate(names)]

    def read_weights(self, *, target=False):
        """``(weights, biases)`` as float64 lists (shapes as :meth:`load_weights` takes)."""
        fmt = self._config.numerics.weight_format
        raw = self.read_raw_weights(target=target)
        return [fmt.to_float(m[:-1]) for m in raw], [fmt.to_float(m[-1]) for m in raw]

    def sync_target(self):
        """DQN: copy the online weights into the target network now (host copy, word for
        word through the memory port). The ``sync_period`` count is not restarted (as the
        hardware's SYNC_COUNT is not by a host copy)."""
        src, dst = self._layer_names(False), self._layer_names(True)
        self._require_idle()
        self._copy_to_target(src, dst)

    def _copy_to_target(self, src, dst):
        cfg = self._config
        for l, (s, d) in enumerate(zip(src, dst)):
            data = self._read_region(s, cfg.sizes[l] + 1)
            self._device.memory.write(region_base(cfg, d), data)

    # -- the step --------------------------------------------------------------------------------
    def start(self, batch_size: int, lr: int, gamma: int = 0, *, sync_target=False,
              adam=None):
        """Write the argument registers (raw values) and set AP_START (interrupt armed if
        used). The batch must be in memory (:meth:`load_batch`). Adam: ``adam`` is a dict of
        the raw ADAM_* values, default :func:`~sw.learner.adam.adam_registers` of the
        driver's ``adam`` for step ``optimizer_step + 1`` and ``batch_size``.

        Only the register widths are checked (a BATCH_SIZE of 0 or above max_batch is the
        hardware's to refuse: :meth:`wait` raises :class:`LearnerError`). Reads CTRL first
        (which also clears a stale AP_DONE): if AP_IDLE is 0 :class:`LearnerBusyError` is
        raised before anything is written. ``sync_target`` and the driver's ``sync_period``
        go to SYNC_TARGET/SYNC_PERIOD if the hardware has them.
        """
        rm = self.register_map
        words = {}
        for reg, value in (("BATCH_SIZE", batch_size), ("LR", lr), ("GAMMA", gamma)):
            width = rm[reg]._register.fields[0].width
            try:
                v = operator.index(value)
            except TypeError:
                raise ValueError(f"{reg.lower()} must be an integer, not {value!r}") from None
            if isinstance(value, bool) or not 0 <= v < 1 << width:
                raise ValueError(f"{reg.lower()} must be in 0..{(1 << width) - 1} ({width}-bit "
                                 f"unsigned), not {value!r}")
            words[reg] = v
        if self.hardware_sync:
            words["SYNC_TARGET"] = int(bool(sync_target))
            words["SYNC_PERIOD"] = self._sync_period
        words.update(self._adam_start_words(adam, words["BATCH_SIZE"]))
        self._require_idle()
        self._write_and_start(words)

    def _write_and_start(self, words):
        rm = self.register_map
        for name, word in words.items():     # arguments only when they change
            rm.write_word_changed(name, word)
        self._start()
        B = words["BATCH_SIZE"]
        self._adam_started(B)
        self._expected_cycles = step_cycles(self._config, B) \
            if 1 <= B <= self._config.max_batch else 1

    def wait(self, timeout=None) -> dict:
        """Wait for AP_DONE, then check STATUS. Returns the STATUS fields, ``LOSS`` (the
        64-bit sum) and ``CYCLES``.

        Raises
        ------
        LearnerTimeoutError
            No AP_DONE within ``timeout`` seconds (default: the driver's ``timeout`` plus the
            expected step time at ``clock_hz``).
        LearnerError
            STATUS.ERROR is not 0 (the step was refused; memory untouched).

        Warns
        -----
        LearnerOverflowWarning, StartRefusedWarning
        """
        status = self._wait(timeout)
        warn_status(status)
        return status

    def _wait(self, timeout):
        rm = self.register_map
        status = self._wait_done(timeout, LearnerTimeoutError)
        status["LOSS"] = rm.read_word("LOSS_LO") | rm.read_word("LOSS_HI") << 32
        status["CYCLES"] = rm.read_word("CYCLES")
        self.last_status = status
        self._adam_finished(not status["ERROR"])
        if status["ERROR"]:
            raise LearnerError(status["ERROR"])
        return status

    def load_batch(self, batch: LearnerBatch):
        """Write a prepared batch into the input regions (the learner must be idle)."""
        if not isinstance(batch, LearnerBatch):
            raise TypeError(f"batch must be a LearnerBatch, not {batch!r}")
        self._load_images(self._images(batch))

    def _load_images(self, images):
        self._require_idle()
        # obs, next_obs and samples (or targets) are the first regions, host-written inputs:
        # a backend may move them as one transfer (MemoryPort.write_blocks)
        bases = self._bases
        self._device.memory.write_blocks(sorted((bases[name], img)
                                                for name, img in images.items()),
                                         gaps_are_inputs=True)

    def run(self, batch: LearnerBatch, *, sync_target=False, timeout=None) -> dict:
        """Load a prepared batch, run the step, return the status (:meth:`wait`, warnings
        included). Target sync as in :meth:`train_step`."""
        if not isinstance(batch, LearnerBatch):
            raise TypeError(f"batch must be a LearnerBatch, not {batch!r}")
        self._require_weights("run")
        return self._run(batch, None, sync_target, timeout)

    def _run(self, batch, images, sync_target, timeout):
        """:meth:`run`, with the batch's ``images`` if they were made with it (else None)."""
        cfg = self._config
        require_dqn(cfg, sync_target, "sync_target")
        words = {"BATCH_SIZE": batch.batch_size, "LR": batch.lr, "GAMMA": batch.gamma}
        if self._adam is not None:
            words.update(self._adam_words(self._adam_regs(batch.lr_value, batch.batch_size)))
        due = False
        if cfg.loss == "dqn":
            period = self._sync_period
            due = bool(sync_target) or (period > 0 and self._since_sync + 1 >= period)
            if self.hardware_sync:
                words["SYNC_TARGET"] = int(bool(sync_target))
                words["SYNC_PERIOD"] = period
        self._load_images(self._images(batch) if images is None else images)
        self._write_and_start(words)
        self.last_batch = batch
        status = self._wait(timeout)
        if cfg.loss == "dqn":
            if self.hardware_sync:
                due = bool(status.get("TARGET_SYNCED"))
            elif due:
                self._copy_to_target(self._layer_names(False), self._layer_names(True))
            self._since_sync = 0 if due else min(self._since_sync + 1, 0xFFFF)
        status["SYNCED"] = due
        warn_status(status)
        return status

    def train_step(self, obs, actions=None, rewards=None, next_obs=None, dones=None, *,
                   targets=None, gamma=0.99, lr=None, loss_weights=None, sync_target=False,
                   details=False, timeout=None):
        """One SGD (or Adam) step on the accelerator; the (unweighted) loss of the batch before
        the update. Adam: ``lr`` None takes ``adam.lr``, a number overrides it for this step.

        DQN: ``train_step(obs, actions, rewards, next_obs, dones, gamma=, lr=)``, with
        ``loss_weights=w`` (``[B]`` in [0, 1], e.g. PER's importance-sampling weights) the step
        descends ``(1/B) sum w_b (Q - y)**2``; MSE: ``train_step(obs, targets=Y, lr=)``.
        ``sync_target=True`` (DQN) makes the updated weights the target network after this
        step. ``details=True`` returns a
        :class:`StepDetails` (also reads the Q values and TD errors back). Raises
        ``ValueError`` before any bus access for invalid input, ``RuntimeError`` (after the
        arguments' checks, before any bus access) if this driver has not written the network
        yet (module docstring), :class:`LearnerError`,
        :class:`LearnerTimeoutError`, :class:`LearnerBusyError` for a failed step; warns
        :class:`LearnerOverflowWarning` (saturation), :class:`LearnerRangeWarning` (clipped
        inputs, ``on_range="clip"``).
        """
        if not isinstance(details, bool):
            raise ValueError(f"details must be a bool, not {details!r}")
        cfg = self._config
        require_dqn(cfg, sync_target, "sync_target")
        batch, images = self._prepare(obs, actions, rewards, next_obs, dones, targets, gamma,
                                      lr, loss_weights)
        self._require_weights("train_step")
        status = self._run(batch, images, sync_target, timeout)
        B = batch.batch_size
        loss = status["LOSS"] * 2.0 ** (-2 * cfg.act_frac) / B
        if not details:
            return loss
        num = cfg.numerics
        q_raw = self.read_raw("q", B)
        q = num.act_format.to_float(q_raw)
        weighted = loss
        if batch.loss_weights is None:
            delta = num.grad_format.to_float(self.read_raw(f"delta{cfg.n_layers - 1}", B))
            if cfg.loss == "dqn":
                delta = delta[np.arange(B), batch.actions]
        else:                          # δ holds w·(Q - y): Q - y from Q and the target's Q
            y, _ = dqn_targets(self.read_raw("tq", B), batch.rewards, batch.dones,
                               batch.gamma, num)
            delta = num.act_format.to_float(q_raw[np.arange(B), batch.actions] - y)
            w = num.loss_weight_format.to_float(batch.loss_weights)
            weighted = float(np.sum(w * delta ** 2) / B)
        return StepDetails(loss, status["LOSS"], q, delta, status["CYCLES"], status["SYNCED"],
                           dict(status), weighted)
