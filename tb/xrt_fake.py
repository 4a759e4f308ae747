"""A fake ``pyxrt`` over a simulated kernel, for running :class:`~sw.driver.xrt_device.XrtDevice`
and the unmodified drivers on a kernel's RTL inside a cocotb test.

The buffer object lives in the cocotb ``AxiRam`` the kernel's ``m_axi_gmem`` reads and writes
(``bo.sync`` copies between the host array and that device memory, ``bo.address()`` is a
4 KiB-aligned address above 4 GiB); ``xrt::ip`` register access goes through cocotbext-axi's
``AxiLiteMaster``. :func:`xrt_session` runs blocking driver code in a ``bridge`` thread on
simulation time, as :class:`~sw.driver.sim.SimDevice` does.
"""

import sys
import types

import numpy as np

__all__ = ["BO_ADDRESS", "HostBo", "fake_pyxrt", "xclBOSyncDirection", "xrt_session"]

#: Device address of the buffer XRT "allocates": 4 KiB aligned, above 4 GiB.
BO_ADDRESS = 0x2_0004_3000


class xclBOSyncDirection:                               # noqa: N801 - pyxrt's name
    """``pyxrt.xclBOSyncDirection`` of the fakes (the values are strings)."""
    XCL_BO_SYNC_BO_TO_DEVICE = "to_device"
    XCL_BO_SYNC_BO_FROM_DEVICE = "from_device"


class HostBo:
    """The host side of a fake ``pyxrt.bo``: the host array ``host`` (uint8) with pyxrt's
    ``write(buf, seek)`` and ``read(size, skip)``; a fake adds ``sync`` and ``address``."""

    flags = types.SimpleNamespace(normal="normal")

    def __init__(self, size):
        self.host = np.zeros(size, np.uint8)

    def write(self, buf, seek):
        b = np.frombuffer(memoryview(buf).cast("B"), np.uint8)
        self.host[seek:seek + len(b)] = b

    def read(self, size, skip):
        return self.host[skip:skip + size].view(np.int8).copy()


def fake_pyxrt(host, resume):
    """``pyxrt`` on the simulated kernel: buffers in ``host.ram``, registers over AXI4-Lite
    (``host.ctl``). ``mod.log`` records the IP opened and every ``bo.sync``."""
    mod = types.ModuleType("pyxrt")
    mod.log = []

    class bo(HostBo):                                   # noqa: N801
        def __init__(self, device, size, flags, group):
            super().__init__(size)
            self.size_, self.group = size, group
            host.ram.write(BO_ADDRESS, bytes(size))

        def sync(self, direction, size, offset):
            mod.log.append((direction, offset, size))
            if direction == xclBOSyncDirection.XCL_BO_SYNC_BO_TO_DEVICE:
                host.ram.write(BO_ADDRESS + offset, self.host[offset:offset + size].tobytes())
            else:
                data = host.ram.read(BO_ADDRESS + offset, size)
                self.host[offset:offset + size] = np.frombuffer(data, np.uint8)

        def address(self):
            return BO_ADDRESS

    class ip:                                           # noqa: N801
        def __init__(self, device, uuid, name):
            mod.log.append(("ip", name))

        def read_register(self, offset):
            return resume(host.ctl.read_dword)(offset)

        def write_register(self, offset, value):
            resume(host.ctl.write_dword)(offset, value)

    mod.device = lambda index=0: types.SimpleNamespace(load_xclbin=lambda x: "uuid")
    mod.xclbin = lambda path: path
    mod.xclBOSyncDirection, mod.bo, mod.ip = xclBOSyncDirection, bo, ip
    return mod


async def xrt_session(host, session, *args, xclbin="kernel.xclbin", max_sleep=None,
                      **device_kw):
    """``session(make_device, *args)`` in a bridge thread, ``make_device()`` building an
    :class:`~sw.driver.xrt_device.XrtDevice` (``device_kw``) on the fake pyxrt with simulation
    time as its clock. ``max_sleep`` (seconds) caps one ``device.sleep``: a driver polling
    with its default interval (100 us, 25 000 cycles) then polls more often instead of
    simulating idle cycles (timeouts still count simulation time). Returns
    ``(result, pyxrt)``."""
    from cocotb.simtime import get_sim_time
    from cocotb.triggers import Timer

    from sw.driver.sim import _bridge_api
    from sw.driver.xrt_device import XrtDevice

    bridge, resume = _bridge_api()
    pyxrt = fake_pyxrt(host, resume)

    async def now():
        return get_sim_time("ns") * 1e-9

    async def sleep(ns):
        await Timer(ns, "ns")

    def make_card():
        card = XrtDevice(xclbin, **device_kw)
        card.time = lambda: resume(now)()                # simulation time, as SimDevice
        cap = float("inf") if max_sleep is None else max_sleep
        card.sleep = lambda s: resume(sleep)(max(1, round(min(s, cap) * 1e9)))
        return card

    saved = sys.modules.get("pyxrt")
    sys.modules["pyxrt"] = pyxrt
    try:
        result = await bridge(session)(make_card, *args)
    finally:
        if saved is None:
            del sys.modules["pyxrt"]
        else:
            sys.modules["pyxrt"] = saved
    return result, pyxrt
