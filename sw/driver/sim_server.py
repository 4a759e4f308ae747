"""The simulator side of :func:`sw.driver.sim_process.open_sim`: a cocotb test that serves a
host process's register and memory requests on the Verilated RTL.

The test starts the clock and reset through :class:`~sw.driver.sim.SimDevice`, connects to the
host's loopback listener (address and key in the environment, :data:`ADDRESS_ENV`,
:data:`AUTHKEY_ENV`) and, in a bridge thread, answers one request at a time with the same
``SimDevice`` calls a driver makes inside cocotb, until the host sends ``close`` or goes away.
No simulation time passes between requests. Only the simulator imports this module.
"""

import os
from multiprocessing.connection import Client

import cocotb

from .mmio import BusError
from .sim import SimDevice

ADDRESS_ENV = "RLK_SIM_ADDRESS"
AUTHKEY_ENV = "RLK_SIM_AUTHKEY"
PERIOD_ENV = "RLK_SIM_PERIOD_NS"


def _answer(dev, op, args):
    if op == "read32":
        return dev.control.read32(*args)
    if op == "write32":
        return dev.control.write32(*args)
    if op == "mem_write":
        return dev.memory.write(*args)
    if op == "mem_read":
        return dev.memory.read(*args)
    if op == "wait_interrupt":
        return dev.wait_interrupt(*args)
    if op == "time":
        return dev.time()
    if op == "storage_address":
        return dev.storage_address
    if op == "sleep":
        return dev.sleep(*args)
    raise ValueError(f"unknown request {op!r}")


def serve(dev, conn):
    """Answer requests ``(op, args)`` with ``("ok", result)`` or ``("error", kind, message)``
    until ``("close", ())`` or the end of the connection (blocking; a bridge thread)."""
    while True:
        try:
            op, args = conn.recv()
        except EOFError:
            return
        if op == "close":
            conn.send(("ok", None))
            return
        try:
            conn.send(("ok", _answer(dev, op, args)))
        except (BusError, ValueError, TypeError, RuntimeError) as e:
            conn.send(("error", type(e).__name__, str(e)))


@cocotb.test()
async def serve_host(dut):
    """Serve the host named in the environment until it closes the device."""
    dev = SimDevice(dut, clock_period_ns=int(os.environ.get(PERIOD_ENV, "4")))
    await dev.start()
    host, port = os.environ[ADDRESS_ENV].rsplit(":", 1)
    conn = Client((host, int(port)), authkey=bytes.fromhex(os.environ[AUTHKEY_ENV]))
    try:
        await dev.call(serve, dev, conn)
    finally:
        conn.close()
