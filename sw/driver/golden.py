"""A pure-Python GAE accelerator behind the driver's bus interfaces (no hardware, no simulator).

:class:`GoldenDevice` models what :class:`~rtl_gen.gae.accelerator.GaeAccelerator` shows on its
ports, at register level, with a virtual clock:

* ``s_axi_control``: the registers of :func:`~rtl_gen.gae.regs.gae_register_map` with their
  access types (clear-on-read AP_DONE/AP_READY, toggle-on-write IP_ISR, set-by-host AP_START
  cleared on ap_ready unless AUTO_RESTART), the ``interrupt`` line ``GIER & |IP_ISR``, the
  hardware-info registers, STATUS and CYCLES; unmapped addresses raise
  :class:`~sw.driver.mmio.BusError` (the RTL answers SLVERR);
* ``s_axi_mem``: the regions of :mod:`sw.gae.layout` (padding bytes read 0 and ignore writes,
  rows past ``config.depth`` too; the RTL leaves those undefined), locked with
  :class:`~sw.driver.mmio.BusError` while a run is in progress, as the RTL answers SLVERR;
* a run: started by AP_START while idle, arguments latched at the start, refused with
  STATUS.ERROR (done at once, memory untouched) exactly when the RTL refuses it
  (:func:`sw.golden.gae_core.check_args`), otherwise computed by
  :func:`sw.golden.gae_core.gae_core` and written back -- in place over the rewards and values,
  or to the ``adv``/``rtg`` regions -- for lanes of real trajectories only, ``run_cycles``
  cycles after the start (:meth:`rtl_gen.gae.core.GaeCore.run_cycles`; CYCLES reads
  ``run_cycles - 1`` afterwards, as on the RTL); AP_START written while busy (without
  AUTO_RESTART) is dropped and sets STATUS.START_REFUSED.

Time: every control access costs ``access_cycles`` cycles, a memory access that plus one cycle
per AXI word; :meth:`GoldenDevice.sleep` and :meth:`GoldenDevice.wait_interrupt` advance the
clock (an interrupt wait jumps straight to the event), so polling loops and timeouts behave as
on hardware but take no wall time. Cycle-level details of the CSR block (AP_IDLE one cycle late,
response latencies) are not modelled; with AUTO_RESTART, AP_DONE is set after every run (the
core shows ap_idle for a cycle between runs) and at most :data:`MAX_EVENTS` runs are modelled
per clock advance.
"""

import math

import numpy as np

from rtl_gen.gae.config import GaeCoreConfig
from rtl_gen.gae.core import GAE_CORE_ARGS, GaeCore
from rtl_gen.gae.regs import gae_register_map, hw_info_values
from sw.gae.layout import pack_rows, region_base, unpack_rows, word_bytes
from sw.golden.gae_core import GaeCoreArgs, check_args, gae_core

from .mmio import BusError, Device, MemoryPort, Mmio, check_offset, check_word

__all__ = ["GoldenDevice", "MAX_EVENTS"]

#: Runs (auto-restarted ones included) modelled per advance of the clock.
MAX_EVENTS = 10_000


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


class GoldenDevice(Device):
    """The GAE accelerator as a Python model behind :class:`~sw.driver.mmio.Device`.

    Parameters
    ----------
    config : GaeCoreConfig
        The accelerator configuration being modelled.
    clock_hz : float
        Clock of the virtual time base (``ap_clk``), used to convert cycles to seconds.
    access_cycles : int
        Cycles one control-register access takes (default 25, 100 ns at 250 MHz: a PS to PL
        AXI4-Lite round trip).

    Members
    -------
    config : GaeCoreConfig
    regmap : RegisterMap
    cycle : int
        The virtual clock, in cycles.
    interrupt : bool
        The ``interrupt`` output.
    runs : int
        Runs started (including refused-by-argument ones).
    """

    has_interrupt = True

    def __init__(self, config: GaeCoreConfig, *, clock_hz=250e6, access_cycles=25):
        if not isinstance(config, GaeCoreConfig):
            raise TypeError(f"config must be a GaeCoreConfig, not {config!r}")
        if (isinstance(clock_hz, bool) or not isinstance(clock_hz, (int, float))
                or not math.isfinite(clock_hz) or clock_hz <= 0):
            raise ValueError(f"clock_hz must be a positive number, not {clock_hz!r}")
        if isinstance(access_cycles, bool) or not isinstance(access_cycles, int) \
                or access_cycles < 1:
            raise ValueError(f"access_cycles must be a positive integer, not {access_cycles!r}")
        super().__init__(_Control(self), _Memory(self))
        self._config = config
        self._regmap = gae_register_map(config)
        self._clock_hz = float(clock_hz)
        self._access = access_cycles
        self._by_offset = {r.offset: r for r in self._regmap}
        self._info = hw_info_values(config)
        self._axi_bytes = config.axi_data_width // 8
        self._span = 1 << config.mem_addr_bits
        self._mem = np.zeros(self._span, np.uint8)
        self._writable = np.zeros(self._span, bool)
        for name in config.regions:
            base, wb = region_base(config, name), word_bytes(config, name)
            lanes = config.region_word_bits(name) // 8
            rows = self._writable[base:base + config.depth * wb].reshape(config.depth, wb)
            rows[:, :lanes] = True
        self.cycle = 0
        self.runs = 0
        self.reset()

    # -- public --------------------------------------------------------------------------------
    @property
    def config(self) -> GaeCoreConfig:
        return self._config

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
        self._pending = None
        self._accept_at = 0
        self._run_length = 0
        self._error = 0
        self._flags = {"DEQUANT_OVERFLOW": 0, "PE_OVERFLOW": 0, "REQUANT_OVERFLOW": 0}
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
    def _args(self) -> GaeCoreArgs:
        values = dict.fromkeys(GaeCoreArgs.__dataclass_fields__, 0)
        for name, (width, is_signed) in GAE_CORE_ARGS(self._config).items():
            raw = self._q[name.upper(), name.upper()]
            if is_signed and raw >> (width - 1):
                raw -= 1 << width
            values[name] = raw
        return GaeCoreArgs(**values)

    def _accept(self, at):
        """The core samples AP_START while idle at cycle ``at``."""
        q = self._q
        self.runs += 1
        auto = q["CTRL", "AUTO_RESTART"]
        # ap_ready one cycle later: AP_START falls (unless auto-restart), AP_READY, IP_ISR.
        if not auto:
            q["CTRL", "AP_START"] = 0
            q["CTRL", "AP_READY"] = 1
        if q["IP_IER", "AP_READY"]:
            q["IP_ISR", "AP_READY"] = 1
        self._start_refused = 0
        self._flags = dict.fromkeys(self._flags, 0)
        self._cycles = 0
        args = self._args()
        cfg = self._config
        self._error = check_args(args, cfg)
        self._accept_at = at
        self._busy = True
        if self._error:
            self._run_length = 1
            self._pending = None
        else:
            self._run_length = GaeCore.run_cycles(cfg, args.num_timesteps, args.num_trajectories)
            self._pending = self._compute(args)
        self._done_at = at + self._run_length

    def _compute(self, args):
        cfg = self._config
        T, M = args.num_timesteps, args.num_trajectories
        G = -(-M // cfg.n_pe)
        full = G * cfg.n_pe

        def rows(region, n, **kw):
            base = region_base(cfg, region)
            data = self._mem[base:base + n * G * word_bytes(cfg, region)].tobytes()
            return unpack_rows(cfg, region, data, n, full, **kw)

        rewards = rows("rewards", T)[:, :M]
        values = rows("values", T + 1)[:, :M]
        dones = rows("dones", T, signed=False)[:, :M].astype(bool)
        out = gae_core(rewards, values[:T], values[T], dones, args, cfg)
        targets = ("rewards", "values") if cfg.results == "inplace" else ("adv", "rtg")
        writes = []
        for region, result in zip(targets, (out["adv"], out["rtg"])):
            image = rows(region, T)                       # padding lanes keep their contents
            image[:, :M] = result
            writes.append((region_base(cfg, region), pack_rows(cfg, region, image)))
        return out, writes

    def _finish(self):
        q = self._q
        done_at = self._done_at
        if self._pending is not None:
            out, writes = self._pending
            for base, data in writes:
                self._store(base, data)
            for name in self._flags:
                self._flags[name] = int(out[name.lower()])
        self._cycles = self._run_length - 1 if not self._error else 0
        self._busy = False
        self._pending = None
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
            return self._flags[f.name]
        if reg.name == "CYCLES":
            if self._busy:
                return min(self.cycle - self._accept_at, self._run_length - 1)
            return self._cycles
        if reg.name in self._info:
            return f.get(self._info[reg.name])
        raise AssertionError(f"no model for read-only field {key}")  # pragma: no cover

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
                else:                                     # pragma: no cover - not in this map
                    q[key] |= v
            elif f.access == "rw_tow":
                q[key] ^= v
        if start:
            if self._busy and not q["CTRL", "AUTO_RESTART"]:
                self._start_refused = 1                   # dropped, not queued
            else:
                q["CTRL", "AP_START"] = 1
                if not self._busy:
                    self._accept(self.cycle + 1)

    # -- memory --------------------------------------------------------------------------------
    def _mem_check(self, offset, nbytes, what):
        if offset + nbytes > self._span:
            raise ValueError(f"memory {what} of {nbytes} bytes at {offset:#x} goes past the "
                             f"memory window ({self._span:#x} bytes)")
        self._tick(self._access + -(-nbytes // self._axi_bytes))
        if self._busy:
            raise BusError(f"memory {what} at {offset:#x} while a run is in progress (SLVERR)")

    def _store(self, offset, data):
        buf = np.frombuffer(data, np.uint8)
        sl = slice(offset, offset + len(buf))
        self._mem[sl] = np.where(self._writable[sl], buf, self._mem[sl])

    def _mem_write(self, offset, data):
        self._mem_check(offset, len(data), "write")
        self._store(offset, data)

    def _mem_read(self, offset, nbytes):
        self._mem_check(offset, nbytes, "read")
        return self._mem[offset:offset + nbytes].tobytes()
