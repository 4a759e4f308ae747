"""Register-level model of an ``ap_ctrl_hs`` accelerator, the base of every golden device.

Every accelerator of this project has the same shell (:mod:`rtl_gen.shell.accelerator`): an
:class:`~rtl_gen.shell.lite_csr.AxiLiteCsr` on ``s_axi_control`` with the Vitis HLS ``ap_ctrl_hs``
registers, an AXI4 memory window on ``s_axi_mem`` that answers SLVERR while the core is busy, and
an ``interrupt`` line. :class:`ApCtrlGoldenDevice` models that shell with a virtual clock:

* ``s_axi_control``: the registers of a :class:`~sw.regmap.RegisterMap` with their access
  types (clear-on-read AP_DONE/AP_READY, toggle-on-write IP_ISR, set-by-host AP_START cleared on
  ap_ready unless AUTO_RESTART), ``interrupt`` = ``GIER & |IP_ISR``, constant ``HW_*``
  registers, STATUS.START_REFUSED and CYCLES; unmapped addresses raise
  :class:`~sw.driver.mmio.BusError` (the RTL answers SLVERR);
* ``s_axi_mem``: a byte array (bytes outside ``writable`` read what they hold and ignore writes),
  locked with :class:`~sw.driver.mmio.BusError` while a run is in progress;
* a run: started by AP_START while idle, it calls :meth:`ApCtrlGoldenDevice._begin` (arguments
  are the register values at that moment) and completes ``run_length`` cycles later with
  :meth:`ApCtrlGoldenDevice._complete`; AP_START written while busy (without AUTO_RESTART) is
  dropped and sets STATUS.START_REFUSED.

A subclass supplies the block: its register map, the ``HW_*`` values, the memory size and the two
hooks, and reads any other read-only register through :meth:`ApCtrlGoldenDevice._read_ro`.

Time: every control access costs ``access_cycles`` cycles, a memory access that plus one cycle
per AXI word; :meth:`~ApCtrlGoldenDevice.sleep` and :meth:`~ApCtrlGoldenDevice.wait_interrupt`
advance the clock (an interrupt wait jumps straight to the event), so polling loops and timeouts
behave as on hardware but take no wall time. Cycle-level details of the CSR block (AP_IDLE one
cycle late, response latencies) are not modelled; with AUTO_RESTART, AP_DONE is set after every
run and at most :data:`MAX_EVENTS` runs are modelled per clock advance.
"""

import math
from dataclasses import dataclass

import numpy as np

from .mmio import BusError, Device, MemoryPort, Mmio, check_offset, check_word

__all__ = ["ApCtrlGoldenDevice", "Run", "MAX_EVENTS"]

#: Runs (auto-restarted ones included) modelled per advance of the clock.
MAX_EVENTS = 10_000


@dataclass
class Run:
    """What :meth:`ApCtrlGoldenDevice._begin` decides about a start.

    ``error``: STATUS.ERROR (0: accepted); ``length``: cycles from the start to AP_DONE (at
    least 1); ``cycles``: what CYCLES reads after the run (default ``length - 1``, 0 on error);
    ``pending``: anything :meth:`ApCtrlGoldenDevice._complete` needs (None: nothing to do).
    """
    error: int = 0
    length: int = 1
    cycles: int | None = None
    pending: object = None


class _Control(Mmio):
    def __init__(self, dev):
        self._dev = dev

    def read32(self, offset):
        return self._dev._reg_read(check_offset(offset))

    def write32(self, offset, value):
        self._dev._reg_write(check_offset(offset), check_word(value))


class _Memory(MemoryPort):
    def __init__(self, dev):
        self._dev = dev

    def write(self, offset, data):
        self._dev._mem_write(check_offset(offset, align=1), bytes(data))

    def read(self, offset, nbytes):
        return self._dev._mem_read(check_offset(offset, align=1),
                                   check_offset(nbytes, align=1, what="nbytes"))


class ApCtrlGoldenDevice(Device):
    """An ``ap_ctrl_hs`` accelerator shell as a Python model behind :class:`~sw.driver.mmio.Device`.

    Parameters
    ----------
    regmap : RegisterMap
        The accelerator's register map (CTRL, GIER, IP_IER, IP_ISR, and its own registers).
    info : dict
        Values of the constant read-only registers (``HW_*``), register name -> 32-bit value.
    mem_bytes : int
        Bytes of the ``s_axi_mem`` window.
    axi_bytes : int
        Bytes per word of the memory bus (one cycle per word of a memory access).
    status_flags : iterable of str
        STATUS fields the core sets during a run (cleared at every start); STATUS.ERROR and
        STATUS.START_REFUSED are handled here.
    clock_hz : float
        Clock of the virtual time base (``ap_clk``), used to convert cycles to seconds.
    access_cycles : int
        Cycles one control-register access takes (default 25, 100 ns at 250 MHz: a PS to PL
        AXI4-Lite round trip).

    Members
    -------
    regmap : RegisterMap
    cycle : int
        The virtual clock, in cycles.
    interrupt : bool
        The ``interrupt`` output.
    runs : int
        Runs started (including ones refused for their arguments).
    image : numpy.ndarray
        The memory window (uint8); subclasses read inputs from it and :meth:`_store` results.
    writable : numpy.ndarray
        Bytes the bus can write (bool, same shape; default all).
    """

    has_interrupt = True

    def __init__(self, regmap, info, *, mem_bytes, axi_bytes, status_flags=(), clock_hz=250e6,
                 access_cycles=25):
        if (isinstance(clock_hz, bool) or not isinstance(clock_hz, (int, float))
                or not math.isfinite(clock_hz) or clock_hz <= 0):
            raise ValueError(f"clock_hz must be a positive number, not {clock_hz!r}")
        if isinstance(access_cycles, bool) or not isinstance(access_cycles, int) \
                or access_cycles < 1:
            raise ValueError(f"access_cycles must be a positive integer, not {access_cycles!r}")
        super().__init__(_Control(self), _Memory(self))
        self._regmap = regmap
        self._info = dict(info)
        self._clock_hz = float(clock_hz)
        self._access = access_cycles
        self._by_offset = {r.offset: r for r in regmap}
        self._axi_bytes = axi_bytes
        self._span = mem_bytes
        self._flag_names = tuple(status_flags)
        self.image = np.zeros(mem_bytes, np.uint8)
        self.writable = np.ones(mem_bytes, bool)
        self.cycle = 0
        self.runs = 0
        self.reset()

    # -- public --------------------------------------------------------------------------------
    @property
    def regmap(self):
        return self._regmap

    @property
    def clock_hz(self) -> float:
        return self._clock_hz

    @property
    def busy(self) -> bool:
        """A run is in progress (memory locked)."""
        return self._busy

    @property
    def interrupt(self) -> bool:
        q = self._q
        return bool(q["GIER", "ENABLE"] and (q["IP_ISR", "AP_DONE"] or q["IP_ISR", "AP_READY"]))

    def reset(self):
        """``ap_rst_n``: registers and core state to reset values; memory keeps its contents."""
        self._q = {(r.name, f.name): f.reset for r in self._regmap for f in r.fields
                   if f.access != "ro"}
        self._busy = False
        self._done_at = None
        self._run = None
        self._accept_at = 0
        self._error = 0
        self._flags = dict.fromkeys(self._flag_names, 0)
        self._start_refused = 0
        self._cycles = 0

    def time(self) -> float:
        return self.cycle / self._clock_hz

    def sleep(self, seconds: float) -> None:
        self._tick(max(0, math.ceil(float(seconds) * self._clock_hz)))

    def wait_interrupt(self, timeout: float) -> bool:
        limit = self.cycle + max(0, math.ceil(float(timeout) * self._clock_hz))
        for _ in range(MAX_EVENTS):
            if self.interrupt:
                return True
            if not self._busy or self._done_at > limit:
                break
            self._advance(self._done_at)
        if self.interrupt:
            return True
        self._advance(limit)
        return self.interrupt

    # -- hooks for subclasses ------------------------------------------------------------------
    def _begin(self) -> Run:                              # pragma: no cover - abstract
        """A start was accepted: check the arguments (:meth:`_arg`), compute, return a Run."""
        raise NotImplementedError

    def _complete(self, pending) -> dict:                 # pragma: no cover - abstract
        """The run ends: write results (:meth:`_store`); return the STATUS flags it raised."""
        raise NotImplementedError

    def _read_ro(self, reg, f):
        """Value of a read-only field not handled here (results, counters); None if unknown."""
        return None

    def _arg(self, name, *, signed=False, width=None):
        """The value of the one-field register ``name`` as the core sees it at a start."""
        raw = self._q[name, name]
        width = width or self._regmap[name].fields[0].width
        if signed and raw >> (width - 1):
            raw -= 1 << width
        return raw

    def _store(self, offset, data):
        """Write result bytes at ``offset`` (non-writable bytes keep their contents)."""
        buf = np.frombuffer(bytes(data), np.uint8)
        sl = slice(offset, offset + len(buf))
        self.image[sl] = np.where(self.writable[sl], buf, self.image[sl])

    # -- time ----------------------------------------------------------------------------------
    def _tick(self, cycles):
        self._advance(self.cycle + cycles)

    def _advance(self, target):
        for _ in range(MAX_EVENTS):
            if not (self._busy and self._done_at <= target):
                break
            self._finish()
        self.cycle = max(self.cycle, target)

    # -- core ----------------------------------------------------------------------------------
    def _accept(self, at):
        """The core samples AP_START while idle at cycle ``at``."""
        q = self._q
        self.runs += 1
        # ap_ready one cycle later: AP_START falls (unless auto-restart), AP_READY, IP_ISR.
        if not q["CTRL", "AUTO_RESTART"]:
            q["CTRL", "AP_START"] = 0
            q["CTRL", "AP_READY"] = 1
        if q["IP_IER", "AP_READY"]:
            q["IP_ISR", "AP_READY"] = 1
        self._start_refused = 0
        self._flags = dict.fromkeys(self._flag_names, 0)
        self._cycles = 0
        run = self._begin()
        if not isinstance(run, Run) or run.length < 1:
            raise AssertionError(f"_begin must return a Run with length >= 1, not {run!r}")
        self._error = run.error
        self._run = run
        self._accept_at = at
        self._busy = True
        self._done_at = at + run.length

    def _finish(self):
        q = self._q
        done_at, run = self._done_at, self._run
        if run.pending is not None:
            raised = self._complete(run.pending) or {}
            for name, value in raised.items():
                if name not in self._flags:
                    raise AssertionError(f"unknown STATUS flag {name!r}")
                self._flags[name] = int(value)
        if run.cycles is not None:
            self._cycles = run.cycles
        else:
            self._cycles = run.length - 1 if not run.error else 0
        self._busy = False
        self._run = None
        self._done_at = None
        q["CTRL", "AP_DONE"] = 1
        if q["IP_IER", "AP_DONE"]:
            q["IP_ISR", "AP_DONE"] = 1
        if q["CTRL", "AP_START"]:                         # auto-restart kept it set
            self._accept(done_at + 1)

    # -- registers -----------------------------------------------------------------------------
    def _field_value(self, reg, f):
        key = (reg.name, f.name)
        if f.access != "ro":
            return self._q[key]
        if key == ("CTRL", "AP_IDLE"):
            return int(not self._busy)
        if reg.name == "STATUS":
            if f.name == "ERROR":
                return self._error
            if f.name == "START_REFUSED":
                return self._start_refused
            if f.name in self._flags:
                return self._flags[f.name]
        if reg.name == "CYCLES":
            if self._busy:
                return min(self.cycle - self._accept_at, self._run.length - 1)
            return self._cycles
        if reg.name in self._info:
            return f.get(self._info[reg.name])
        value = self._read_ro(reg, f)
        if value is None:
            raise AssertionError(f"no model for read-only field {key}")  # pragma: no cover
        return value

    def _reg(self, offset, what):
        reg = self._by_offset.get(offset)
        if reg is None:
            raise BusError(f"{what} of unmapped control address {offset:#x} (SLVERR)")
        return reg

    def _reg_read(self, offset):
        self._tick(self._access)
        reg = self._reg(offset, "read")
        word = 0
        for f in reg.fields:
            if f.readable:
                word |= self._field_value(reg, f) << f.lsb
        for f in reg.fields:
            if f.access == "ro_cor":
                self._q[reg.name, f.name] = 0
        return word

    def _reg_write(self, offset, word):
        self._tick(self._access)
        reg = self._reg(offset, "write")
        q = self._q
        start = False
        for f in reg.fields:
            key, v = (reg.name, f.name), f.get(word)
            if f.access in ("rw", "wo"):
                q[key] = v
            elif f.access == "rw_sc":
                if key == ("CTRL", "AP_START"):
                    start = bool(v)
                else:
                    q[key] |= v
            elif f.access == "rw_tow":
                q[key] ^= v
        self._written(reg)
        if start:
            if self._busy and not q["CTRL", "AUTO_RESTART"]:
                self._start_refused = 1                   # dropped, not queued
            else:
                q["CTRL", "AP_START"] = 1
                if not self._busy:
                    self._accept(self.cycle + 1)

    def _written(self, reg):
        """A register was written (the CSR's ``<reg>_wr_pulse``); override for side effects."""

    # -- memory --------------------------------------------------------------------------------
    def _mem_check(self, offset, nbytes, what):
        if offset + nbytes > self._span:
            raise ValueError(f"memory {what} of {nbytes} bytes at {offset:#x} goes past the "
                             f"memory window ({self._span:#x} bytes)")
        self._tick(self._access + -(-nbytes // self._axi_bytes))
        if self._busy:
            raise BusError(f"memory {what} at {offset:#x} while a run is in progress (SLVERR)")

    def _mem_write(self, offset, data):
        self._mem_check(offset, len(data), "write")
        self._store(offset, data)

    def _mem_read(self, offset, nbytes):
        self._mem_check(offset, nbytes, "read")
        return self.image[offset:offset + nbytes].tobytes()
