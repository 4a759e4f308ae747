"""A pure-Python replay accelerator behind the driver's bus interfaces (no hardware, no simulator).

:class:`ReplayGoldenDevice` models what :class:`~rtl_gen.replay.accelerator.ReplayAccelerator`
shows on its ports, at register level, on the shared ``ap_ctrl_hs`` shell model
(:class:`~sw.driver.golden_base.ApCtrlGoldenDevice`: registers and their access types, the
interrupt, refused starts, memory locked while busy, a virtual clock):

* ``s_axi_mem``: the five batch buffers of :mod:`sw.replay.spec`; a written word keeps its
  low :func:`~sw.replay.spec.field_bits` bits, as in the RTL's memories;
* a run: the register values at the start (OP, BATCH_SIZE, UPDATE_SIZE, SEED) executed by
  :class:`sw.replay.model.ReplayAccelModel` (bit-exact tree, PRNG and flags), the output
  entries written to IDX_OUT/PRIO_OUT and AP_DONE raised
  :meth:`~sw.replay.spec.run_cycles` cycles after the start;
  CYCLES and RESPONSE_CYCLES read what the RTL's read.

TOTAL, MAX_PRIORITY, SIZE and WRITE_POINTER read the model's state, which changes at the start
of a run (the RTL's change during it); STATUS.TREE_BUSY reads 0 (the model has no clearing
sweep and no posted updates in flight).
"""

import numpy as np

from sw.driver.golden_base import ApCtrlGoldenDevice, Run
from sw.replay.model import ReplayAccelModel
from sw.replay.spec import (
    REGIONS,
    STATUS_FLAGS,
    WORD_BYTES,
    SumTreeConfig,
    field_bits,
    hw_info_values,
    region_base,
    region_bits,
    region_words,
    replay_register_map,
)

__all__ = ["ReplayGoldenDevice"]

_CORE_FLAGS = tuple(name for name in STATUS_FLAGS if name != "START_REFUSED")


class ReplayGoldenDevice(ApCtrlGoldenDevice):
    """The replay accelerator as a Python model behind :class:`~sw.driver.mmio.Device`.

    Parameters
    ----------
    config : SumTreeConfig
        The accelerator configuration being modelled.
    clock_hz, access_cycles
        The virtual clock (see :class:`~sw.driver.golden_base.ApCtrlGoldenDevice`).

    Members
    -------
    config : SumTreeConfig
    model : ReplayAccelModel
        The accelerator's state (tree, PRNG, flags).
    """

    def __init__(self, config: SumTreeConfig, *, clock_hz=250e6, access_cycles=25):
        if not isinstance(config, SumTreeConfig):
            raise TypeError(f"config must be a SumTreeConfig, not {config!r}")
        self._config = config
        self.model = ReplayAccelModel(config)
        rw = region_words(config)
        super().__init__(replay_register_map(config), hw_info_values(config),
                         mem_bytes=len(REGIONS) * rw * WORD_BYTES, axi_bytes=WORD_BYTES,
                         status_flags=_CORE_FLAGS, clock_hz=clock_hz,
                         access_cycles=access_cycles)
        words = self.writable.reshape(len(REGIONS), rw, WORD_BYTES)
        words[:] = False
        self._masks = np.zeros((len(REGIONS), 1), np.uint64)
        for r, name in enumerate(REGIONS):
            words[r, :, :region_bits(config, name) // 8] = True
            self._masks[r] = (1 << field_bits(config, name)) - 1

    @property
    def config(self) -> SumTreeConfig:
        return self._config

    def reset(self):
        super().reset()
        if hasattr(self, "model"):
            self.model.reset()

    # -- memory: words keep their field bits -------------------------------------------------
    def _words(self):
        return self.image.view("<u8").reshape(len(REGIONS), -1)

    def _store(self, offset, data):
        super()._store(offset, data)
        words = self._words()
        words &= self._masks

    def _region(self, name):
        return self._words()[REGIONS.index(name)].astype(np.int64)

    # -- core ----------------------------------------------------------------------------------
    def _begin(self) -> Run:
        q = self._q
        cfg = self._config
        bufs = {name: self._region(name)[:cfg.max_batch]
                for name in ("IDX_IN", "PRIO_IN", "TARGET_IN")}
        out = self.model.run(q["OP", "CODE"], self._arg("BATCH_SIZE"), self._arg("UPDATE_SIZE"),
                             prng=bool(q["OP", "PRNG"]), relaxed=bool(q["OP", "RELAXED"]),
                             seed=self._arg("SEED"), buffers=bufs)
        self._response_cycles = out.response_cycles
        flags = {"EMPTY": self.model.empty, "SATURATED": self.model.saturated,
                 "INVALID_INDEX": self.model.invalid}
        if out.error:
            return Run(error=out.error, length=1)
        return Run(length=out.run_cycles, cycles=out.cycles, pending=(out, flags))

    def _complete(self, pending):
        out, flags = pending
        n = out.indices.size
        if n:
            for name, values in (("IDX_OUT", out.indices), ("PRIO_OUT", out.priorities)):
                self._store(region_base(self._config, name),
                            np.asarray(values, "<u8")[:n].tobytes())
        return {name: int(v) for name, v in flags.items()}

    def _read_ro(self, reg, f):
        t = self.model.tree
        name = reg.name
        if name == "STATUS" and f.name == "TREE_BUSY":
            return 0
        if name == "RESPONSE_CYCLES":
            return getattr(self, "_response_cycles", 0) if not self.busy else 0
        values = {"TOTAL_LO": t.total & 0xFFFF_FFFF, "TOTAL_HI": t.total >> 32,
                  "MAX_PRIORITY_LO": int(t.max_priority) & 0xFFFF_FFFF,
                  "MAX_PRIORITY_HI": int(t.max_priority) >> 32,
                  "SIZE": t.size, "WRITE_POINTER": t.write_pointer}
        return values.get(name)
