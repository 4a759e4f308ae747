"""Fake ``pyxrt`` modules, for running :class:`~sw.driver.xrt_device.XrtDevice` and the
unmodified drivers without XRT.

On a kernel's RTL inside a cocotb test (:func:`fake_pyxrt`): the buffer object lives in the
cocotb ``AxiRam`` the kernel's ``m_axi_gmem`` reads and writes (``bo.sync`` copies between the
host array and that device memory, ``bo.address()`` is a 4 KiB-aligned address above 4 GiB);
``xrt::ip`` register access goes through cocotbext-axi's ``AxiLiteMaster``. :func:`xrt_session`
runs blocking driver code in a ``bridge`` thread on simulation time, as
:class:`~sw.driver.sim.SimDevice` does.

On a golden device, fast tier (:func:`window_pyxrt`): :class:`WindowShell` is a Python model of
the window DMA shell (:class:`~rtl_gen.shell.window.WindowKernel`: MEM_PTR, DMA_OFFSET, DMA_BYTES,
DMA_CTRL, DMA_STATUS, DMA_CYCLES and the constants DMA_WINDOW, DMA_ALIGN, SHELL_VERSION; the
alignment, range and LOCKED rules) around a golden device's registers and memory, with separate
host and device copies of the buffer so that a missing ``sync`` shows.
"""

import sys
import types

import numpy as np

from sw.shell.spec import DMA_FLAGS, SHELL_VERSION, copy_cycles, window_kernel_register_map

__all__ = ["BO_ADDRESS", "FAKE_LATENCY", "HostBo", "fake_pyxrt", "xclBOSyncDirection",
           "xrt_session", "WindowShell", "window_pyxrt"]

#: Device-memory latency (cycles) the fake's DMA_CYCLES are computed with
#: (:func:`sw.shell.spec.copy_cycles`).
FAKE_LATENCY = 1

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
                      device_cls=None, **device_kw):
    """``session(make_device, *args)`` in a bridge thread, ``make_device()`` building an
    :class:`~sw.driver.xrt_device.XrtDevice` (or ``device_cls``; ``device_kw``) on the fake
    pyxrt with simulation
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
        card = (device_cls or XrtDevice)(xclbin, **device_kw)
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


# -- fast tier: the window shell around a golden device -------------------------------------------
class WindowShell:
    """The window shell's registers over ``dev`` (a golden device: its registers below
    ``base.span``, its memory the window).

    ``window``, ``align``, ``word``: DMA_WINDOW and the two fields of DMA_ALIGN; ``version``:
    what SHELL_VERSION reads. A copy is refused with RANGE (misaligned or past the window) or
    LOCKED (``dev.busy``), else moves the bytes between the window and the device copy of the
    buffer at MEM_PTR (the pointer keeps only bits at and above ``log2(align)``). ``copies``
    records ``(offset, bytes, to_buffer, DMA_STATUS)``; ``inject`` adds DMA_STATUS flags to the
    next accepted copy; DMA_CYCLES of a copy is :func:`~sw.shell.spec.copy_cycles` at
    :data:`FAKE_LATENCY`.
    """

    def __init__(self, dev, base, *, window, align, word, version=SHELL_VERSION):
        self.dev, self.span = dev, base.span
        self.regs = window_kernel_register_map("k", base, gmem_data_width=8 * align)
        self.window, self.align, self.word, self.version = window, align, word, version
        self.r = {name: 0 for name in ("MEM_PTR_LO", "MEM_PTR_HI", "DMA_OFFSET", "DMA_BYTES",
                                       "DMA_STATUS", "DMA_CYCLES")}
        self.bo = None
        self.copies = []
        self.inject = 0

    def _name(self, offset):
        for r in self.regs.registers:
            if r.offset == offset and offset >= self.span:
                return r.name
        return None

    def read_register(self, offset):
        name = self._name(offset)
        if name is None:
            return self.dev.control.read32(offset)
        if name == "DMA_WINDOW":
            return self.window
        if name == "DMA_ALIGN":
            return self.align | self.word << 16
        if name == "SHELL_VERSION":
            return self.version
        if name == "DMA_CTRL":
            return 0
        return self.r[name]

    def write_register(self, offset, value):
        name = self._name(offset)
        if name is None:
            self.dev.control.write32(offset, value)
        elif name == "MEM_PTR_LO":
            self.r[name] = value & ~(self.align - 1) & 0xFFFF_FFFF
        elif name == "DMA_CTRL":
            if value & 1:
                self._copy(bool(value & 2))
        elif name in self.r:
            self.r[name] = value

    def _copy(self, to_buffer):
        off, n = self.r["DMA_OFFSET"], self.r["DMA_BYTES"]
        status = 1 << DMA_FLAGS["DONE"]
        if off % self.align or n % self.word or off + n > self.window:
            status |= 1 << DMA_FLAGS["RANGE"]
        elif self.dev.busy:
            status |= 1 << DMA_FLAGS["LOCKED"]
        else:
            ptr = self.r["MEM_PTR_LO"] | self.r["MEM_PTR_HI"] << 32
            base = ptr - self.bo.address() + off
            if to_buffer:
                self.bo.device[base:base + n] = np.frombuffer(self.dev.memory.read(off, n),
                                                              np.uint8)
            else:
                self.dev.memory.write(off, self.bo.device[base:base + n].tobytes())
            status |= self.inject
        self.inject = 0
        self.r["DMA_STATUS"] = status
        self.r["DMA_CYCLES"] = copy_cycles(n, self.word, latency=FAKE_LATENCY,
                                           to_device=to_buffer)
        self.copies.append((off, n, to_buffer, status))


def window_pyxrt(shell, *, mode="ip", address=0x1_0000_1000):
    """``pyxrt`` with ``shell`` (a :class:`WindowShell`) as the kernel.

    ``mode``: ``"ip"`` (``pyxrt.ip`` gives register access), ``"kernel"`` (no ``pyxrt.ip``;
    ``pyxrt.kernel`` has ``read_register``/``write_register`` and ``group_id`` 3, as the
    pyxrt of XRT 2.8 to 2.12), ``"none"`` (neither). ``address``: what ``bo.address()``
    returns. ``mod.log`` records ``("load", path)``, ``("ip", uuid, name)``, ``("kernel",
    uuid, name, mode)`` and ``("sync", direction, size, offset)``.
    """
    mod = types.ModuleType("pyxrt")
    mod.log = []

    class bo(HostBo):                                   # noqa: N801
        def __init__(self, device, size, flags, group):
            super().__init__(size)
            self.size_, self.flags_, self.group = size, flags, group
            self.device = np.zeros(size, np.uint8)
            shell.bo = self

        def sync(self, direction, size, offset):
            mod.log.append(("sync", direction, size, offset))
            src, dst = ((self.host, self.device)
                        if direction == xclBOSyncDirection.XCL_BO_SYNC_BO_TO_DEVICE
                        else (self.device, self.host))
            dst[offset:offset + size] = src[offset:offset + size]

        def address(self):
            return address

        def size(self):
            return self.size_

    class device:                                       # noqa: N801
        def __init__(self, index=0):
            self.index = index

        def load_xclbin(self, xclbin):
            mod.log.append(("load", xclbin))
            return "uuid-1234"

    class ip:                                           # noqa: N801
        def __init__(self, device, uuid, name):
            mod.log.append(("ip", uuid, name))
            self.read_register = shell.read_register
            self.write_register = shell.write_register

    class kernel:                                       # noqa: N801
        cu_access_mode = types.SimpleNamespace(exclusive="exclusive", shared="shared")

        def __init__(self, device, uuid, name, access):
            mod.log.append(("kernel", uuid, name, access))
            if access != "exclusive":
                raise RuntimeError("register access needs exclusive CU access")
            if mode == "kernel":
                self.read_register = shell.read_register
                self.write_register = shell.write_register

        def group_id(self, index):
            return 3

    mod.xclBOSyncDirection, mod.bo, mod.device = xclBOSyncDirection, bo, device
    mod.xclbin = lambda path: path
    mod.kernel = kernel
    if mode == "ip":
        mod.ip = ip
    mod.shell = shell
    return mod
