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


class SimDevice(Device):
    """A :class:`~sw.driver.mmio.Device` on a cocotb DUT with the GAE accelerator's ports.

    Parameters
    ----------
    dut : cocotb handle
        Top level with ``ap_clk``, ``ap_rst_n``, ``interrupt``, ``s_axi_control_*`` (AXI4-Lite)
        and ``s_axi_mem_*`` (AXI4), e.g. :class:`~rtl_gen.gae.accelerator.GaeAccelerator`.
    clock_period_ns : int
        ``ap_clk`` period started by :meth:`start`.
    bus_log_level : int
        Level of cocotbext-axi's per-transaction log (default WARNING: polling is chatty).

    Construct it and ``await start()`` in the test coroutine; call everything else from a
    bridged thread (:meth:`call`).
    """

    has_interrupt = True

    def __init__(self, dut, *, clock_period_ns=4, bus_log_level=logging.WARNING):
        try:
            from cocotbext.axi import AxiBus, AxiLiteBus, AxiLiteMaster, AxiMaster
        except ImportError as e:
            raise ImportError("SimDevice needs cocotb and cocotbext-axi (the 'dev' extra)") \
                from e

        if isinstance(clock_period_ns, bool) or not isinstance(clock_period_ns, int) \
                or clock_period_ns < 1:
            raise ValueError(f"clock_period_ns must be a positive integer, "
                             f"not {clock_period_ns!r}")
        super().__init__(_Control(self), _Memory(self))
        self._dut = dut
        self._period = clock_period_ns
        for prefix in ("s_axi_control", "s_axi_mem"):     # cocotbext-axi's channel loggers
            logging.getLogger(f"cocotb.{dut._name}.{prefix}").setLevel(bus_log_level)
        self._ctl = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axi_control"), dut.ap_clk,
                                  dut.ap_rst_n, reset_active_level=False)
        self._mem = AxiMaster(AxiBus.from_prefix(dut, "s_axi_mem"), dut.ap_clk, dut.ap_rst_n,
                              reset_active_level=False)
        for master in (self._ctl, self._mem):
            for side in ("write_if", "read_if"):
                getattr(master, side).log.setLevel(bus_log_level)

    @property
    def dut(self):
        return self._dut

    # -- coroutine side --------------------------------------------------------------------------
    async def start(self):
        """Start ``ap_clk`` and reset (coroutine; call once per cocotb test)."""
        import cocotb
        from cocotb.clock import Clock

        cocotb.start_soon(Clock(self._dut.ap_clk, self._period, unit="ns", impl="gpi").start())
        await self.reset()

    async def reset(self, cycles=3):
        """Hold ``ap_rst_n`` low for ``cycles`` cycles (coroutine)."""
        from cocotb.triggers import ClockCycles

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

        w = await self._mem.write(offset, data)
        if w.resp != AxiResp.OKAY:
            raise BusError(f"memory write at {offset:#x}: {w.resp.name}")

    async def _mem_read(self, offset, nbytes):
        from cocotbext.axi import AxiResp

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
