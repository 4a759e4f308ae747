"""The Verilated RTL behind the synchronous driver interfaces (cocotb 2.x + cocotbext-axi).

cocotb tests are coroutines; the driver is ordinary blocking code. cocotb 2 joins the two with
a pair of converters, ``bridge`` and ``resume`` (``cocotb.external`` and ``cocotb.function``
before 2.0; in cocotb 2.1 they live in ``cocotb.task``):

* ``await bridge(f)(*args)`` runs the blocking function ``f`` in a new thread and suspends the
  calling coroutine until it returns (its return value or exception comes back);
* inside that thread, ``resume(coro_fn)(*args)`` schedules the coroutine function on the
  simulator's scheduler and blocks the thread until it finishes.

Only one of the two runs at any time (the scheduler waits while the thread runs, the thread
waits while its coroutine runs), so no simulator call ever happens concurrently. Every
:class:`SimDevice` method called from the thread -- a register access, a memory burst, an
interrupt wait, reading the simulation time -- is one ``resume`` of a small coroutine driving
cocotbext-axi's ``AxiLiteMaster``/``AxiMaster``. So::

    @cocotb.test()
    async def test(dut):
        dev = SimDevice(dut)
        await dev.start()                        # clock and reset, in the coroutine
        adv, ret = await dev.call(lambda: GaeDriver(dev).compute(...))

runs exactly the driver code a board runs. :meth:`SimDevice.call` is ``bridge``; calling a
device method outside such a thread raises ``RuntimeError``.

Time (:meth:`SimDevice.time`, :meth:`SimDevice.sleep`, timeouts) is simulation time.
"""

import logging

from .mmio import BusError, Device, MemoryPort, Mmio, check_offset, check_word

__all__ = ["SimDevice"]


def _bridge_api():
    """``(bridge, resume)``: ``cocotb.task`` in cocotb 2.1, top-level ``cocotb`` in 2.0,
    ``external``/``function`` before."""
    import cocotb

    try:
        from cocotb.task import bridge, resume
        return bridge, resume
    except ImportError:                                # pragma: no cover - older cocotb
        if hasattr(cocotb, "bridge"):
            return cocotb.bridge, cocotb.resume
        return cocotb.external, cocotb.function


def _resume(coro_fn, *args):
    try:
        return _bridge_api()[1](coro_fn)(*args)
    except RuntimeError as e:
        if "unrecognized thread" in str(e):
            raise RuntimeError("SimDevice methods are blocking: call them from a function run "
                               "with `await device.call(fn)` (cocotb.task.bridge), not from a "
                               "coroutine") from None
        raise


class _Control(Mmio):
    def __init__(self, dev):
        self._dev = dev

    def read32(self, offset):
        return _resume(self._dev._read32, check_offset(offset))

    def write32(self, offset, value):
        _resume(self._dev._write32, check_offset(offset), check_word(value))


class _Memory(MemoryPort):
    def __init__(self, dev):
        self._dev = dev

    def write(self, offset, data):
        _resume(self._dev._mem_write, check_offset(offset, align=1), bytes(data))

    def read(self, offset, nbytes):
        return _resume(self._dev._mem_read, check_offset(offset, align=1),
                       check_offset(nbytes, align=1, what="nbytes"))


#: Where :class:`SimDevice` puts the storage of a core with an AXI4 master (above 4 GiB, so
#: the high address word is exercised).
STORAGE_ADDRESS = 0x1_0000_0000


def _pauses(rng, p):
    while True:
        yield rng.random() < p


class SimDevice(Device):
    """A :class:`~sw.driver.mmio.Device` on a cocotb DUT with an accelerator's ports.

    Two kinds of accelerator: with an AXI4 slave ``s_axi_mem_*`` (its memory; the GAE, replay
    and learner accelerators), the memory port is an AXI4 master on it; with an AXI4 master
    ``m_axi_gmem_*`` (the trainer, whose memory is host memory), the memory port is a
    cocotbext-axi ``AxiRam`` on it, read and written by the host at once (the zero-copy
    buffer of a board) at :attr:`storage_address`.

    Parameters
    ----------
    dut : cocotb handle
        Top level with ``ap_clk``, ``ap_rst_n``, ``interrupt``, ``s_axi_control_*`` (AXI4-Lite)
        and ``s_axi_mem_*`` or ``m_axi_gmem_*`` (AXI4), e.g.
        :class:`~rtl_gen.gae.accelerator.GaeAccelerator`.
    clock_period_ns : int
        ``ap_clk`` period started by :meth:`start`.
    bus_log_level : int
        Level of cocotbext-axi's per-transaction log (default WARNING: polling is chatty).
    pause : float
        ``m_axi_gmem`` only: probability that each channel of the ``AxiRam`` pauses in a cycle
        (random backpressure; default 0).
    seed : int
        Seed of the pauses.

    Members
    -------
    storage_address : int or None
        Bus address of the storage (``m_axi_gmem``: :data:`STORAGE_ADDRESS`), what a driver
        gives the core as its base; None for an ``s_axi_mem`` accelerator.

    Construct it and ``await start()`` in the test coroutine; call everything else from a
    bridged thread (:meth:`call`).
    """

    has_interrupt = True

    def __init__(self, dut, *, clock_period_ns=4, bus_log_level=logging.WARNING, pause=0.0,
                 seed=0):
        try:
            from cocotbext.axi import AxiBus, AxiLiteBus, AxiLiteMaster, AxiMaster, AxiRam
        except ImportError as e:
            raise ImportError("SimDevice needs cocotb and cocotbext-axi (the 'dev' extra)") \
                from e

        if isinstance(clock_period_ns, bool) or not isinstance(clock_period_ns, int) \
                or clock_period_ns < 1:
            raise ValueError(f"clock_period_ns must be a positive integer, "
                             f"not {clock_period_ns!r}")
        if isinstance(pause, bool) or not isinstance(pause, (int, float)) \
                or not 0 <= pause < 1:
            raise ValueError(f"pause must be a probability in [0, 1), not {pause!r}")
        super().__init__(_Control(self), _Memory(self))
        self._dut = dut
        self._period = clock_period_ns
        master = hasattr(dut, "m_axi_gmem_awvalid")
        mem_prefix = "m_axi_gmem" if master else "s_axi_mem"
        # In reset before the bus models exist and before the clock starts (low): no
        # simulator sees an edge, or the core's outputs, before its registers have their reset
        # values (X before in a 4-state simulator; tb/axi_host.py does the same).
        dut.ap_rst_n.value = 0
        for prefix in ("s_axi_control", mem_prefix):      # cocotbext-axi's channel loggers
            logging.getLogger(f"cocotb.{dut._name}.{prefix}").setLevel(bus_log_level)
        self._ctl = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axi_control"), dut.ap_clk,
                                  dut.ap_rst_n, reset_active_level=False)
        bus = AxiBus.from_prefix(dut, mem_prefix)
        if master:
            self._mem = None
            self._ram = AxiRam(bus, dut.ap_clk, dut.ap_rst_n, reset_active_level=False,
                               size=1 << 48)
            self.storage_address = STORAGE_ADDRESS
            ends = (self._ctl, self._ram)
            if pause:
                import random
                rng = random.Random(seed)
                for ch in (self._ram.write_if.aw_channel, self._ram.write_if.w_channel,
                           self._ram.write_if.b_channel, self._ram.read_if.ar_channel,
                           self._ram.read_if.r_channel):
                    ch.set_pause_generator(_pauses(random.Random(rng.random()), pause))
        else:
            self._ram = None
            self._mem = AxiMaster(bus, dut.ap_clk, dut.ap_rst_n, reset_active_level=False)
            self.storage_address = None
            ends = (self._ctl, self._mem)
        for end in ends:
            for side in ("write_if", "read_if"):
                getattr(end, side).log.setLevel(bus_log_level)

    @property
    def dut(self):
        return self._dut

    # -- coroutine side --------------------------------------------------------------------------
    async def start(self):
        """Start ``ap_clk`` and reset (coroutine; call once per cocotb test)."""
        import cocotb
        from cocotb.clock import Clock

        cocotb.start_soon(Clock(self._dut.ap_clk, self._period, unit="ns", impl="gpi").start(
            start_high=False))
        await self.reset()

    async def reset(self, cycles=3):
        """Hold ``ap_rst_n`` low for ``cycles`` cycles (coroutine). The registers return to
        their reset values, so the drivers' cache of written registers is dropped."""
        from cocotb.triggers import ClockCycles

        getattr(self, "_written_registers", {}).clear()

        self._dut.ap_rst_n.value = 0
        await ClockCycles(self._dut.ap_clk, cycles)
        self._dut.ap_rst_n.value = 1
        await ClockCycles(self._dut.ap_clk, 2)

    async def call(self, fn, *args, **kwargs):
        """Run the blocking ``fn(*args, **kwargs)`` in a bridge thread; its result."""
        return await _bridge_api()[0](fn)(*args, **kwargs)

    async def _read32(self, offset):
        from cocotbext.axi import AxiResp

        r = await self._ctl.read(offset, 4)
        if r.resp != AxiResp.OKAY:
            raise BusError(f"read of control address {offset:#x}: {r.resp.name}")
        return int.from_bytes(bytes(r.data), "little")

    async def _write32(self, offset, value):
        from cocotbext.axi import AxiResp

        w = await self._ctl.write(offset, value.to_bytes(4, "little"))
        if w.resp != AxiResp.OKAY:
            raise BusError(f"write of control address {offset:#x}: {w.resp.name}")

    async def _mem_write(self, offset, data):
        from cocotbext.axi import AxiResp

        if self._ram is not None:
            self._ram.write(self.storage_address + offset, data)
            return

        w = await self._mem.write(offset, data)
        if w.resp != AxiResp.OKAY:
            raise BusError(f"memory write at {offset:#x}: {w.resp.name}")

    async def _mem_read(self, offset, nbytes):
        from cocotbext.axi import AxiResp

        if self._ram is not None:
            return bytes(self._ram.read(self.storage_address + offset, nbytes))

        r = await self._mem.read(offset, nbytes)
        if r.resp != AxiResp.OKAY:
            raise BusError(f"memory read at {offset:#x}: {r.resp.name}")
        return bytes(r.data)

    async def _wait_irq(self, timeout_ns):
        from cocotb.triggers import First, RisingEdge, Timer

        if not int(self._dut.interrupt.value):
            await First(RisingEdge(self._dut.interrupt), Timer(timeout_ns, "ns"))
        return bool(int(self._dut.interrupt.value))

    async def _now(self):
        from cocotb.simtime import get_sim_time

        return get_sim_time("ns") * 1e-9

    async def _sleep(self, ns):
        from cocotb.triggers import Timer

        await Timer(ns, "ns")

    # -- blocking side (bridge thread) ----------------------------------------------------------
    def wait_interrupt(self, timeout: float) -> bool:
        return _resume(self._wait_irq, max(1, round(float(timeout) * 1e9)))

    def time(self) -> float:
        return _resume(self._now)

    def sleep(self, seconds: float) -> None:
        _resume(self._sleep, max(1, round(float(seconds) * 1e9)))
