"""Adam in the learner driver: the hyperparameters, the step count, the ADAM_* registers of
every step and the optimizer state in the ``m<l>`` and ``v<l>`` regions.

:class:`AdamSupport` is a base class of :class:`~sw.learner.driver.LearnerDriver`; with a
learner built with ``optimizer="adam"`` (:mod:`sw.learner.adam`) the driver behaves as
``torch.optim.Adam`` (no weight decay, no amsgrad) on the network's parameters::

    drv = LearnerDriver(device, adam=AdamHyper(lr=1e-3, betas=(0.9, 0.999), eps=1e-8))
    drv.init_weights(seed=0)            # also a fresh optimizer: m = v = 0, step 0
    drv.train_step(obs, actions, rewards, next_obs, dones, gamma=0.99)     # lr: adam.lr
    drv.train_step(obs, actions, rewards, next_obs, dones, gamma=0.99, lr=3e-4)  # this step
    drv.optimizer_step                  # 2: torch's state["step"]
    drv.optimizer_state()               # exp_avg, exp_avg_sq in torch's units
    drv.reset_optimizer()

* ``adam``: an :class:`~sw.learner.adam.AdamHyper` or a dict of its arguments (``lr``,
  ``betas``, ``eps``); default ``AdamHyper()`` (torch's defaults) for an Adam learner; a
  ``ValueError`` naming ``adam`` for an SGD learner. ``drv.adam`` reads or replaces it
  (the state is kept, as when a param group's hyperparameters change).
* Every step writes the ADAM_* registers of :func:`~sw.learner.adam.adam_registers` for step
  ``t = optimizer_step + 1`` (torch counts from 1) and the batch size, beside BATCH_SIZE, LR
  (0: Adam does not use it) and GAMMA. ``train_step(..., lr=x)`` uses x instead of
  ``adam.lr`` for that step (``lr=None``: ``adam.lr``). The count advances after a step that
  ran (STATUS.ERROR = 0), not after a refused one.
* Writing the online network (``load_weights``, ``load_raw_weights`` without
  ``target="only"``, ``init_weights``) resets the optimizer as a new torch optimizer would
  start: the first moments to 0, the second moments' logarithms to ``ADAM_POWER.log_min``
  (which stands for 0), the master weights' residuals (``wl<l>``) to 0, the count to 0. :meth:`AdamSupport.reset_optimizer` does it alone.
* The state: :meth:`AdamSupport.read_raw_optimizer_state` and
  :meth:`AdamSupport.load_raw_optimizer_state` (raw words, for checkpoints),
  :meth:`AdamSupport.optimizer_state` (floats in torch's units).

Units: the learner's gradient is ``G = (B/2)·g`` (``g`` the gradient of the mean squared error
torch computes, :mod:`sw.learner.mlp`), and its moments are those of G, ``m`` the moving
average of G and ``v`` of G², which make the same update (:mod:`sw.learner.adam` scales ε
with B/2). Torch's are ``exp_avg = (2/B)·m`` and ``exp_avg_sq = (2/B)²·v``, exactly when every
step since the reset had the batch size B; with varying batch sizes no single torch state
equals the learner's, and :meth:`AdamSupport.optimizer_state` converts with the B it is
given (default: that of the last step).
"""

import math
import operator
from dataclasses import dataclass

import numpy as np

from .adam import ADAM_ARGS, ADAM_POWER, AdamHyper, adam_registers, log_format, moment_format
from .batch import array_arg
from .layout import pack_matrix, region_base

__all__ = ["AdamHyper", "AdamState", "AdamSupport", "adam_arg"]

_F = ADAM_POWER.log_frac
#: The range of a logarithm register's value: [2**-128 (just above log_min), 2**128).
_LOG_LO = 2.0 ** ((ADAM_POWER.log_min + 1) / (1 << _F))
_LOG_HI = 2.0 ** (ADAM_POWER.log_max / (1 << _F))


def adam_arg(adam):
    """``adam`` (an :class:`AdamHyper`, a dict of its keyword arguments, or None) as an
    :class:`AdamHyper` or None; ``ValueError`` naming ``adam`` otherwise."""
    if adam is None or isinstance(adam, AdamHyper):
        return adam
    if isinstance(adam, dict):
        unknown = sorted(set(map(str, adam)) - {"lr", "betas", "eps"})
        if unknown:
            raise ValueError(f"adam: unknown argument(s) {', '.join(unknown)} (AdamHyper takes "
                             f"lr, betas, eps)")
        try:
            return AdamHyper(**adam)
        except ValueError as e:
            raise ValueError(f"adam: {e}") from None
    raise ValueError(f"adam must be an AdamHyper, a dict of its arguments (lr, betas, eps) or "
                     f"None, not {adam!r}")


@dataclass
class AdamState:
    """What :meth:`AdamSupport.optimizer_state` returns: torch's Adam state of the network.

    Members
    -------
    step : int
        Steps since the last reset (torch's ``state["step"]``).
    exp_avg, exp_avg_sq : tuple
        ``(weights, biases)``: float64 lists shaped as ``read_weights`` returns them
        (``weights[l]`` is ``n_in x n_out``: torch's ``nn.Linear.weight`` transposed), the
        first moments ``(2/B)·m`` and the second moments ``(2/B)²·v`` (module docstring).
    batch_size : int or None
        The B of that conversion (None: no step since the reset, every moment is 0).
    """
    step: int
    exp_avg: tuple
    exp_avg_sq: tuple
    batch_size: int = None


def _split(mats):
    return [m[:-1] for m in mats], [m[-1] for m in mats]


class AdamSupport:
    """Adam's part of :class:`~sw.learner.driver.LearnerDriver` (module docstring). Uses the
    driver's ``_config``, ``_device``, ``register_map`` and ``_require_idle``."""

    _adam = None                # AdamHyper of an Adam learner, None for SGD
    _adam_count = 0             # steps since the reset
    _adam_pending = None        # batch size of a step started and not yet waited for
    _adam_batch = None          # batch size of the last Adam step that ran
    _adam_images = None         # the reset images of m<l> and v<l>, made once

    def _init_adam(self, hyper):
        """After the configuration is known: the hyperparameters (``adam_arg``'s result)."""
        if self._config.optimizer == "adam":
            self._adam = AdamHyper() if hyper is None else hyper
        elif hyper is not None:
            raise ValueError(f"adam is for a learner built with optimizer='adam'; this one's "
                             f"optimizer is {self._config.optimizer!r} (give lr= per step)")

    # -- properties ----------------------------------------------------------------------------
    @property
    def adam(self):
        """The Adam hyperparameters (:class:`AdamHyper`), None for an SGD learner. Setting it
        (an AdamHyper or a dict) keeps the moments and the step count."""
        return self._adam

    @adam.setter
    def adam(self, value):
        hyper = adam_arg(value)
        if self._adam is None:
            self._init_adam(hyper)           # an SGD learner: only None passes
            return
        if hyper is None:
            raise ValueError("adam must be an AdamHyper or a dict for an Adam learner, not None")
        self._adam = hyper

    @property
    def optimizer_step(self) -> int:
        """Adam steps run since the optimizer's last reset (torch's ``state["step"]``); 0 for
        an SGD learner."""
        return self._adam_count

    # -- per step ------------------------------------------------------------------------------
    def _adam_regs(self, lr, batch):
        """The raw ADAM_* values of the next step with learning rate ``lr`` (None or 0:
        ``adam.lr``) and ``batch`` samples; ``ValueError`` naming ``lr`` or ``eps`` if a
        logarithm falls outside its register."""
        h = self._adam
        t = self._adam_count + 1
        if lr is None or lr == 0:
            lr = h.lr
        elif lr != h.lr:
            try:
                h = AdamHyper(lr, (h.beta1, h.beta2), h.eps)
            except ValueError as e:
                raise ValueError(f"{e} (the step's Adam learning rate)") from None
        bc2 = math.sqrt(1.0 - h.beta2 ** t)
        x = lr * bc2 / (1.0 - h.beta1 ** t)
        if not _LOG_LO <= x < _LOG_HI:
            raise ValueError(f"lr = {lr:g} gives lr * sqrt(1 - beta2^t) / (1 - beta1^t) = "
                             f"{x:g} at step t = {t}, outside the ADAM_LOG_LR register's range "
                             f"[{_LOG_LO:g}, {_LOG_HI:g})")
        e = h.eps * bc2 * batch / 2
        if e >= _LOG_HI:
            raise ValueError(f"eps = {h.eps:g} gives eps * sqrt(1 - beta2^t) * B / 2 = {e:g}, "
                             f"above the ADAM_LOG_EPS register's range (< {_LOG_HI:g})")
        return adam_registers(h, t, batch)

    def _adam_lr(self, lr, batch) -> float:
        """The Adam learning rate of a step (``lr``; None: ``adam.lr``), checked: a real
        number > 0 whose register value fits at the next step."""
        if lr is not None and (isinstance(lr, (bool, np.bool_)) or not isinstance(
                lr, (int, float, np.integer, np.floating)) or not math.isfinite(lr) or lr <= 0):
            raise ValueError(f"lr must be a real number > 0 (or None: adam.lr = "
                             f"{self._adam.lr:g}) for an Adam learner, not {lr!r}")
        lr = self._adam.lr if lr is None else float(lr)
        self._adam_regs(lr, batch)
        return lr

    def _adam_words(self, regs):
        """Register words of raw ADAM_* values (two's complement in the register's width)."""
        widths = self.__dict__.get("_adam_widths")
        if widths is None:
            rm = self.register_map
            widths = self._adam_widths = {name: rm[name]._register.fields[0].width
                                          for name in ADAM_ARGS}
        out = {}
        for name, (_, signed, _) in ADAM_ARGS.items():
            if name not in regs:
                raise ValueError(f"adam must hold every ADAM_* register ({', '.join(ADAM_ARGS)})"
                                 f", not {sorted(regs)}")
            width = widths[name]
            try:
                v = operator.index(regs[name])
            except TypeError:
                raise ValueError(f"adam[{name!r}] must be an integer, not {regs[name]!r}") \
                    from None
            lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed \
                else (0, (1 << width) - 1)
            if isinstance(regs[name], bool) or not lo <= v <= hi:
                raise ValueError(f"adam[{name!r}] must be in {lo}..{hi}, not {regs[name]!r}")
            out[name] = v & ((1 << width) - 1)
        return out

    def _adam_start_words(self, adam, batch_size) -> dict:
        """:meth:`~sw.learner.driver.LearnerDriver.start`'s ADAM_* words: ``adam`` (raw
        values) or, if None, the driver's for the next step (none for an SGD learner)."""
        if self._adam is None:
            if adam is not None:
                raise ValueError("adam: only for a learner built with optimizer='adam'")
            return {}
        return self._adam_words(self._adam_regs(None, max(batch_size, 1)) if adam is None
                                else adam)

    def _adam_started(self, batch_size):
        """A step was started (with ADAM_* values, for an Adam learner)."""
        self._adam_pending = batch_size if self._adam is not None else None

    def _adam_finished(self, ran: bool):
        """The step waited for ended: count it if it ran."""
        if self._adam_pending is not None:
            if ran:
                self._adam_count += 1
                self._adam_batch = self._adam_pending
            self._adam_pending = None

    # -- the state -----------------------------------------------------------------------------
    def _require_adam(self, what):
        if self._adam is None:
            raise ValueError(f"{what}: this learner's optimizer is "
                             f"{self._config.optimizer!r}, which keeps no state")

    def _moment_names(self):
        L = self._config.n_layers
        return [f"m{l}" for l in range(L)], [f"v{l}" for l in range(L)]

    def _adam_reset_images(self) -> list:
        """``[(region, image)]`` of a fresh optimizer (empty for SGD)."""
        if self._adam is None:
            return []
        if self._adam_images is None:
            cfg = self._config
            m_names, v_names = self._moment_names()
            shapes = cfg.numerics.weight_shapes()
            self._adam_images = (
                [(n, pack_matrix(cfg, n, np.zeros(s, np.int64)))
                 for n, s in zip(m_names, shapes)]
                + [(n, pack_matrix(cfg, n, np.full(s, ADAM_POWER.log_min, np.int64)))
                   for n, s in zip(v_names, shapes)]
                + [(f"wl{l}", pack_matrix(cfg, f"wl{l}", np.zeros(s, np.int64)))
                   for l, s in enumerate(shapes)])
        return self._adam_images

    def _write_images(self, images):
        cfg = self._config
        for n, img in images:
            self._device.memory.write(region_base(cfg, n), img)

    def _adam_reset(self):
        """After the images of :meth:`_adam_reset_images` were written."""
        self._adam_count = 0
        self._adam_pending = None
        self._adam_batch = None

    def reset_optimizer(self):
        """Start the optimizer afresh, as a new ``torch.optim.Adam`` would: first moments 0,
        second moments 0 (their logarithms ``log_min``), the master weights' residuals 0 (the
        master weights become the weights as read), step count 0.
        Nothing to do for an SGD learner. :class:`~sw.learner.errors.LearnerBusyError` during
        a step."""
        images = self._adam_reset_images()
        if not images:
            return
        self._require_idle()
        self._write_images(images)
        self._adam_reset()

    def read_raw_optimizer_state(self):
        """``(moments, log_v, residuals)``: per layer the raw ``(n_in + 1) x n_out`` first
        moments (``numerics.moment_format``), logarithms of the second moments
        (``numerics.logv_format``; ``ADAM_POWER.log_min`` stands for 0) and master-weight
        residuals (``numerics.residual_format``, region ``wl<l>``), bias in the last row, as
        the ``m<l>``, ``v<l>`` and ``wl<l>`` regions hold them. With the raw weights and
        :attr:`optimizer_step` a checkpoint that resumes bit for bit
        (:meth:`load_raw_optimizer_state`)."""
        self._require_adam("read_raw_optimizer_state")
        self._require_idle()
        m_names, v_names = self._moment_names()
        rows = [n + 1 for n in self._config.sizes[:-1]]
        return ([self.read_raw(n, r) for n, r in zip(m_names, rows)],
                [self.read_raw(n, r) for n, r in zip(v_names, rows)],
                [self.read_raw(f"wl{l}", r) for l, r in enumerate(rows)])

    def load_raw_optimizer_state(self, moments, log_v, residuals=None, *, step):
        """Write a state :meth:`read_raw_optimizer_state` read (raw matrices, formats and
        shapes checked, ``ValueError`` naming the argument before any bus access;
        ``residuals`` None: 0) and set the step count to ``step`` (an integer >= 0). Load the
        weights first: writing them resets the optimizer."""
        self._require_adam("load_raw_optimizer_state")
        cfg = self._config
        num = cfg.numerics
        if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step < 0:
            raise ValueError(f"step must be an integer >= 0, not {step!r}")
        shapes = num.weight_shapes()
        if residuals is None:
            residuals = [np.zeros(s, np.int64) for s in shapes]
        images = []
        names = self._moment_names() + ([f"wl{l}" for l in range(len(shapes))],)
        for arg, seq, fmt, nms in zip(("moments", "log_v", "residuals"),
                                      (moments, log_v, residuals),
                                      (moment_format(num), log_format(), num.residual_format),
                                      names):
            if isinstance(seq, np.ndarray) or not hasattr(seq, "__len__") \
                    or len(seq) != len(shapes):
                raise ValueError(f"{arg} must be a sequence of {len(shapes)} matrices")
            for l, (m, shape, n) in enumerate(zip(seq, shapes, nms)):
                a = array_arg(m, f"{arg}[{l}]", shape=shape, kinds="iu")
                a = fmt.check_raw(a, f"{arg}[{l}]").astype(np.int64)
                images.append((n, pack_matrix(cfg, n, a)))
        self._require_idle()
        self._write_images(images)
        self._adam_reset()
        self._adam_count = int(step)

    def optimizer_state(self, *, batch_size=None) -> AdamState:
        """torch's Adam state (:class:`AdamState`): the moments read back and converted with
        the batch size ``batch_size`` (default: the last step's), module docstring."""
        self._require_adam("optimizer_state")
        B = self._adam_batch if batch_size is None else batch_size
        if batch_size is not None and (isinstance(B, bool) or not isinstance(
                B, (int, np.integer)) or not 1 <= B <= self._config.max_batch):
            raise ValueError(f"batch_size must be an integer in 1..{self._config.max_batch}, "
                             f"not {batch_size!r}")
        moments, log_v, _ = self.read_raw_optimizer_state()
        if B is None:
            if any(m.any() for m in moments) or any((v != ADAM_POWER.log_min).any()
                                                    for v in log_v):
                raise ValueError("batch_size must be given: the moments were not made by a "
                                 "step of this driver (or loaded), so their batch size is "
                                 "not known")
            scale = 1.0
        else:
            scale = 2.0 / int(B)
        mfmt = moment_format(self._config.numerics)
        m = [scale * mfmt.to_float(a) for a in moments]
        v = [np.where(a == ADAM_POWER.log_min, 0.0,
                      scale * scale * np.exp2(a.astype(np.float64) / (1 << _F)))
             for a in log_v]
        return AdamState(self._adam_count, tuple(_split(m)), tuple(_split(v)),
                         None if B is None else int(B))
