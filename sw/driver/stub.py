"""A device stub that answers at once: the drivers' host code timed and tested without a model.

:class:`InstantDevice` puts a register file behind any ``ap_ctrl_hs``
:class:`~sw.regmap.RegisterMap`: the constant registers (``HW_*``) read the configuration's
words, CTRL always reads ``AP_IDLE | AP_DONE | AP_READY`` (a run ends the moment it starts),
STATUS and CYCLES read 0 unless set (:attr:`InstantDevice.answers`), every other register reads
what was last written. The memory port keeps nothing by default (reads return zeros) or, with
``store=True``, a byte image of the window. Every access is counted
(:class:`TrafficCounter`): bytes and transfers per direction, register reads and writes and
runs started, which is what a bus model turns into time (``scripts/bench/common.py``).

It computes nothing: use it to time a driver's own host code (``scripts/bench_e2e.py``:
``host_us``) and to unit-test what a driver writes and reads, never for results. For results,
use a golden device or the simulator.
"""

from dataclasses import dataclass, field

import numpy as np

from .mmio import (BusError, Device, MemoryPort, Mmio, check_offset, check_span, check_word,
                   merged)

__all__ = ["InstantDevice", "TrafficCounter"]


@dataclass
class TrafficCounter:
    """What crossed the bus since the last :meth:`reset`.

    Members
    -------
    writes, reads : int
        Memory transfers (one per :meth:`~sw.driver.mmio.MemoryPort.write` or ``read`` call).
    bytes_written, bytes_read : int
        Their bytes.
    reg_writes, reg_reads : int
        32-bit register accesses.
    starts : int
        Runs started (AP_START written as 1).
    transfers : list of (str, int, int)
        ``("write" | "read", offset, nbytes)`` of every memory transfer, in order (what a
        bus model with per-transfer costs, e.g. a DMA copy per transfer, needs).
    """
    writes: int = 0
    reads: int = 0
    bytes_written: int = 0
    bytes_read: int = 0
    reg_writes: int = 0
    reg_reads: int = 0
    starts: int = 0
    transfers: list = field(default_factory=list)

    def reset(self):
        """Zero every counter and forget the transfers."""
        for name in self.__dataclass_fields__:
            setattr(self, name, 0)
        self.transfers = []

    def as_dict(self) -> dict:
        """The counters (not the transfer list), name -> int."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__
                if name != "transfers"}


class _Control(Mmio):
    def __init__(self, dev):
        self._dev = dev

    def read32(self, offset):
        dev = self._dev
        offset = check_offset(offset)
        dev.traffic.reg_reads += 1
        if offset == 0:
            return dev._ctrl_word
        try:
            return dev.answers[offset]
        except KeyError:
            if offset not in dev._offsets:
                raise BusError(f"no register at {offset:#x}") from None
            return dev._regs.get(offset, 0)

    def write32(self, offset, value):
        dev = self._dev
        offset, value = check_offset(offset), check_word(value)
        if offset not in dev._offsets:
            raise BusError(f"no register at {offset:#x}")
        dev.traffic.reg_writes += 1
        if offset == 0 and value & 1:
            dev.traffic.starts += 1
        dev._regs[offset] = value


class _Memory(MemoryPort):
    def __init__(self, dev, nbytes, store):
        self._dev = dev
        self._nbytes = nbytes
        self._image = np.zeros(nbytes if store else 0, np.uint8)
        self._zeros = np.zeros(0, np.uint8)
        self._store = store

    def _count(self, kind, offset, n):
        t = self._dev.traffic
        if kind == "write":
            t.writes += 1
            t.bytes_written += n
        else:
            t.reads += 1
            t.bytes_read += n
        t.transfers.append((kind, offset, n))

    def _put(self, offset, view):
        if self._store:
            self._image[offset:offset + view.nbytes] = np.frombuffer(view, np.uint8)

    def _get(self, offset, nbytes):
        if self._store:
            return self._image[offset:offset + nbytes].tobytes()
        if self._zeros.size < nbytes:
            self._zeros = np.zeros(nbytes, np.uint8)
        return memoryview(self._zeros)[:nbytes]

    def write(self, offset, data):
        view = memoryview(data).cast("B")
        offset, n = check_span(offset, view.nbytes, self._nbytes)
        self._count("write", offset, n)
        self._put(offset, view)

    def read(self, offset, nbytes):
        offset, nbytes = check_span(offset, nbytes, self._nbytes)
        self._count("read", offset, nbytes)
        return self._get(offset, nbytes)

    def write_blocks(self, blocks, *, gaps_are_inputs=False):
        """Blocks :attr:`merge_gap` apart or closer count as one transfer of their span (the
        gap bytes included), as :class:`~sw.driver.xrt_device.XrtDevice` moves them."""
        if not gaps_are_inputs or not self.merge_gap:
            return super().write_blocks(blocks)
        views = [memoryview(d).cast("B") for _, d in blocks]
        spans = [check_span(o, v.nbytes, self._nbytes) for (o, _), v in zip(blocks, views)]
        for lo, hi, idx in merged(spans, self.merge_gap):
            self._count("write", lo, hi - lo)
            for i in idx:
                self._put(spans[i][0], views[i])

    def read_blocks(self, blocks):
        """Blocks :attr:`merge_gap` apart or closer count as one transfer of their span."""
        if not self.merge_gap:
            return super().read_blocks(blocks)
        spans = [check_span(o, n, self._nbytes) for o, n in blocks]
        out = [None] * len(spans)
        for lo, hi, idx in merged(spans, self.merge_gap):
            self._count("read", lo, hi - lo)
            for i in idx:
                out[i] = self._get(*spans[i])
        return out


class InstantDevice(Device):
    """A :class:`~sw.driver.mmio.Device` whose runs end the moment they start.

    Parameters
    ----------
    register_map : RegisterMap
        An ``ap_ctrl_hs`` map (a block's, e.g. :func:`sw.gae.spec.gae_register_map`).
    info_values : dict
        Register name -> word of its constant registers (``register_map.info_values(config)``).
    window_bytes : int
        Bytes of the memory window.
    store : bool
        Keep what is written to memory (reads return it); otherwise reads return zeros and
        writes cost no copy.

    Members
    -------
    traffic : TrafficCounter
    answers : dict
        Byte offset -> word a register read returns regardless of writes (STATUS, CYCLES ...);
        set entries with :meth:`answer`.
    image : numpy.ndarray or None
        The memory image (``store=True``).
    """

    has_interrupt = False

    def __init__(self, register_map, info_values, window_bytes, *, store=False):
        self.register_map = register_map
        self.traffic = TrafficCounter()
        self._offsets = {r.offset for r in register_map}
        self._regs = {}
        self.answers = {register_map.offset(name): word for name, word in info_values.items()}
        ctrl = register_map["CTRL"]
        self._ctrl_word = ctrl.pack({"AP_IDLE": 1, "AP_DONE": 1, "AP_READY": 1})
        for name in ("STATUS", "CYCLES"):
            if any(r.name == name for r in register_map):
                self.answers.setdefault(register_map.offset(name), 0)
        super().__init__(_Control(self), _Memory(self, window_bytes, store))

    @classmethod
    def for_kernel(cls, module: str, *, store=False) -> "InstantDevice":
        """The stub of a shipped window kernel (``"gae_kernel_n8"``, ``"replay_kernel_k16"``,
        ``"learner_kernel_s4"``): its accelerator's register map and ``HW_*`` words, and
        its memory window, which is what a driver sees through
        :class:`~sw.driver.xrt_device.XrtDevice` (the shell's DMA registers are the
        backend's, not the driver's), merging blocks as it does
        (:func:`~sw.driver.xrt_device.merge_gap`)."""
        from sw.registry import shipped_config, shipped_modules
        kernels = shipped_modules(role="kernel")
        if module not in kernels:
            raise ValueError(f"module must be a shipped kernel ({', '.join(kernels)}), "
                             f"not {module!r}")
        block, config = shipped_config(module)
        accel = config.accel
        regmap = block.accelerator.regmap(accel)
        from .xrt_device import merge_gap
        dev = cls(regmap, regmap.info_values(accel), config.window_bytes, store=store)
        dev.memory.merge_gap = merge_gap(config.window_word_bits // 8)
        return dev

    def answer(self, name: str, word: int):
        """Make register ``name`` read ``word`` from now on."""
        self.answers[self.register_map.offset(name)] = int(word)

    @property
    def image(self):
        return self.memory._image if self.memory._store else None

    def registers(self) -> dict:
        """Register name -> last word written (registers never written are left out)."""
        return {r.name: self._regs[r.offset] for r in self.register_map if r.offset in self._regs}

    def time(self) -> float:
        return 0.0

    def sleep(self, seconds: float) -> None:
        pass
