"""A pure-Python learner accelerator behind the driver's bus interfaces (no hardware, no
simulator).

:class:`LearnerGoldenDevice` models what :class:`~rtl_gen.learner.accelerator.LearnerAccelerator`
shows on its ports, at register level with a virtual clock, on the shared ``ap_ctrl_hs`` shell
model :class:`~sw.driver.golden_base.ApCtrlGoldenDevice`:

* ``s_axi_control``: the registers of :func:`~sw.learner.spec.learner_register_map`
  (BATCH_SIZE, LR, GAMMA latched at the start; STATUS with ERROR, the saturation flags and
  START_REFUSED; LOSS_LO/LOSS_HI; CYCLES; the HW_* constants; and, when the register map has
  them, the target-sync registers SYNC_TARGET, SYNC_PERIOD, SYNC_COUNT and STATUS.TARGET_SYNCED);
* ``s_axi_mem``: the regions of :mod:`sw.learner.layout`. The host writes the bytes of the
  input and weight regions (``host_write``) inside each memory word's ``word_bits``; writes
  anywhere else are ignored, and bytes that no memory backs (past a region's words, past a
  word's bits) read 0 -- as the RTL's host port does. Locked (BusError) during a step;
* a step: started by AP_START while idle; a BATCH_SIZE of 0 or above ``max_batch`` ends it at
  once with STATUS.ERROR = 1 (CYCLES 0, LOSS 0, memory untouched). Otherwise the step is
  :func:`sw.learner.mlp.train_step` with the pipeline's ``sub_batch`` and ``dp`` on the inputs
  and weights in memory; AP_DONE comes ``step_cycles + 1`` cycles after the start
  (:func:`sw.learner.schedule.step_cycles`, which CYCLES then reads), and the results are
  written back: activations ``h<l>``, Q values ``q``, errors ``delta<l>``, gradients
  ``grad<l>``, the updated weights ``w<l>`` (DQN also ``th<l>``, ``tq`` and, when the step
  syncs, ``tw<l>``). Results are written as :func:`~sw.learner.layout.pack_matrix`
  images of the batch's rows: lanes of padding samples and padding columns read 0 here,
  while the RTL leaves whatever its pipeline computed there (a driver reads only the batch's
  rows and the matrix's columns).

Not modelled: LOSS and the flags while a step is in progress (they read 0 here; the RTL
accumulates them as the step goes), action codes above the last action in the ``samples``
region (the driver never writes them; the model raises ``ValueError``).
"""

import numpy as np

from sw.driver.golden_base import ApCtrlGoldenDevice, Run
from sw.learner.adam import ADAM_ARGS
from sw.learner.layout import (
    mem_addr_bits,
    pack_matrix,
    region_base,
    regions,
    unpack_matrix,
    unpack_samples,
    word_bytes,
)
from sw.learner.mlp import train_step
from sw.learner.schedule import step_cycles
from sw.learner.spec import STATUS_FLAGS, LearnerConfig, hw_info_values, learner_register_map

__all__ = ["LearnerGoldenDevice"]

#: STATUS flag -> key of :attr:`sw.learner.mlp.StepResult.overflow`.
_CORE_FLAGS = {name: flag for name, (_, flag, _) in STATUS_FLAGS.items() if flag}


class LearnerGoldenDevice(ApCtrlGoldenDevice):
    """The learner accelerator as a Python model behind :class:`~sw.driver.mmio.Device`.

    Parameters
    ----------
    config : LearnerConfig
        The accelerator configuration being modelled.
    clock_hz, access_cycles
        The virtual clock (see :class:`~sw.driver.golden_base.ApCtrlGoldenDevice`).

    Members
    -------
    config : LearnerConfig
    regmap, cycle, interrupt, runs, image
        Those of :class:`~sw.driver.golden_base.ApCtrlGoldenDevice` (``runs`` counts the
        steps started, including ones refused for their batch size).
    last_step : StepResult or None
        The golden step of the last accepted start.

    Raises
    ------
    TypeError
        If ``config`` is not a :class:`LearnerConfig`.
    """

    def __init__(self, config: LearnerConfig, *, clock_hz=250e6, access_cycles=25):
        if not isinstance(config, LearnerConfig):
            raise TypeError(f"config must be a LearnerConfig, not {config!r}")
        self._config = config
        regmap = learner_register_map(config)
        self._has_sync = any(r.name == "SYNC_TARGET" for r in regmap)
        self._sync_count = 0
        self._synced = 0
        self._loss = 0
        self.last_step = None
        super().__init__(regmap, hw_info_values(config), mem_bytes=1 << mem_addr_bits(config),
                         axi_bytes=config.axi_data_width // 8, status_flags=tuple(_CORE_FLAGS),
                         clock_hz=clock_hz, access_cycles=access_cycles)
        # Bytes a memory backs (results may be stored there) and bytes the host may write.
        self._backed = np.zeros(self.image.shape, bool)
        self.writable[:] = False
        for r in regions(config):
            base, wb = region_base(config, r.name), word_bytes(config, r.name)
            depth = r.depth(config)
            rows = self._backed[base:base + depth * wb].reshape(depth, wb)
            rows[:, :r.word_bits(config) // 8] = True
            if r.host_write:
                self.writable[base:base + depth * wb] = \
                    self._backed[base:base + depth * wb]

    @property
    def config(self) -> LearnerConfig:
        return self._config

    def reset(self):
        super().reset()
        self._sync_count = 0
        self._synced = 0
        self._loss = 0

    # -- core ----------------------------------------------------------------------------------
    def _matrix(self, name, rows):
        cfg = self._config
        r = next(x for x in regions(cfg) if x.name == name)
        n = cfg.groups(rows) * r.col_groups(cfg) * word_bytes(cfg, name)
        base = region_base(cfg, name)
        return unpack_matrix(cfg, name, self.image[base:base + n].tobytes(), rows)

    def _begin(self) -> Run:
        cfg = self._config
        B = self._arg("BATCH_SIZE")
        self._loss = 0
        self._synced = 0
        if not 1 <= B <= cfg.max_batch:
            return Run(error=1, length=1)
        sync = False
        if self._has_sync:
            period = self._arg("SYNC_PERIOD")
            sync = bool(self._arg("SYNC_TARGET")) or (period > 0
                                                      and self._sync_count + 1 >= period)
            top = (1 << self._regmap["SYNC_COUNT"].fields[0].width) - 1
            self._sync_count = 0 if sync else min(self._sync_count + 1, top)
            self._synced = int(sync)
        step = self._compute(B)
        self.last_step = step
        return Run(length=step_cycles(cfg, B) + 1, pending=(step, B, sync))

    def _compute(self, B):
        cfg = self._config
        L = cfg.n_layers
        weights = [self._matrix(f"w{l}", cfg.sizes[l] + 1) for l in range(L)]
        obs = self._matrix("obs", B)
        kw = dict(lr=self._arg("LR"), sub_batch=cfg.sub_batch, dp=cfg.dp)
        if cfg.optimizer == "adam":
            regs = {name: self._arg(name, signed=signed)
                    for name, (_, signed, _) in ADAM_ARGS.items()}
            rows = [cfg.sizes[l] + 1 for l in range(L)]
            kw.update(lr=None, adam=([self._matrix(f"m{l}", rows[l]) for l in range(L)],
                                     [self._matrix(f"v{l}", rows[l]) for l in range(L)], regs,
                                     [self._matrix(f"wl{l}", rows[l]) for l in range(L)]))
        if cfg.loss == "mse":
            return train_step(weights, obs, cfg.numerics, targets=self._matrix("targets", B),
                              **kw)
        base, nb = region_base(cfg, "samples"), word_bytes(cfg, "samples")
        image = self.image[base:base + cfg.groups(B) * nb].tobytes()
        actions, rewards, dones, loss_weights = unpack_samples(cfg, image, B)
        return train_step(weights, obs, cfg.numerics, actions=actions, rewards=rewards,
                          dones=dones, loss_weights=loss_weights,
                          next_obs=self._matrix("next_obs", B),
                          target_weights=[self._matrix(f"tw{l}", cfg.sizes[l] + 1)
                                          for l in range(L)],
                          gamma=self._arg("GAMMA"), **kw)

    def _put(self, name, matrix):
        """Store a result matrix (bytes no memory backs keep reading 0)."""
        cfg = self._config
        data = np.frombuffer(pack_matrix(cfg, name, matrix), np.uint8)
        sl = slice(region_base(cfg, name), region_base(cfg, name) + len(data))
        self.image[sl] = np.where(self._backed[sl], data, self.image[sl])

    def _complete(self, pending) -> dict:
        step, B, sync = pending
        cfg = self._config
        L = cfg.n_layers
        for l in range(L - 1):
            self._put(f"h{l}", np.maximum(step.pre[l], 0))
        self._put("q", step.q)
        if cfg.loss == "dqn":
            for l in range(L - 1):
                self._put(f"th{l}", np.maximum(step.extra["next_pre"][l], 0))
            self._put("tq", step.extra["q_next"])
        for l in range(L):
            self._put(f"delta{l}", step.deltas[l])
            self._put(f"grad{l}", step.grads[l])
            self._put(f"w{l}", step.weights[l])
            if step.moments is not None:
                self._put(f"m{l}", step.moments[l])
                self._put(f"v{l}", step.log_v[l])
                self._put(f"wl{l}", step.residuals[l])
            if sync:
                self._put(f"tw{l}", step.weights[l])
        self._loss = step.loss_sum
        return {name: int(step.overflow.get(flag, False)) for name, flag in _CORE_FLAGS.items()}

    def _read_ro(self, reg, f):
        if reg.name == "LOSS_LO":
            return 0 if self.busy else self._loss & 0xFFFF_FFFF
        if reg.name == "LOSS_HI":
            return 0 if self.busy else self._loss >> 32 & 0xFFFF_FFFF
        if reg.name == "SYNC_COUNT":
            return self._sync_count
        if (reg.name, f.name) == ("STATUS", "TARGET_SYNCED"):
            return self._synced
        return None
