"""Alveo cards (U200/U250) with XRT's ``pyxrt`` (PYNQ 3.1 dropped Alveo support).

What this backend assumes -- the *window shell contract*. Vitis links kernels whose data ports
are AXI4 *masters* (``m_axi``) to device memory; it cannot connect an AXI4 *slave* data port
like an accelerator's ``s_axi_mem``. Every kernel is therefore the accelerator in the window
DMA shell (:class:`~rtl_gen.shell.window.WindowKernel`: ``gae_kernel_n8``,
``replay_kernel_k16``, ``learner_kernel_s4``), whose register layout is versioned in its
SHELL_VERSION register (:data:`sw.shell.spec.SHELL_VERSION`).

1. **Control.** ``s_axi_control`` shows the accelerator's registers unchanged, then the shell's
   (:func:`~sw.shell.spec.window_kernel_register_map`): the 64-bit buffer address
   ``MEM_PTR_LO``/``MEM_PTR_HI`` (argument 0 of the kernel's ``kernel.xml``; it must be a
   multiple of ``gmem_data_width / 8``, and XRT aligns buffers to 4 KiB), the copy engine's
   DMA_OFFSET, DMA_BYTES, DMA_CTRL (START, DIR), DMA_STATUS (BUSY, DONE, READ_ERROR,
   WRITE_ERROR, LOCKED, RANGE), DMA_CYCLES, and the constants DMA_WINDOW, DMA_ALIGN and
   SHELL_VERSION.
2. **Memory.** One buffer mirrors the accelerator's memory window (DMA_WINDOW bytes, window
   byte ``x`` = buffer byte ``x``). Runs copy nothing; the host commands the copies.
   :class:`XrtDevice` implements the driver's memory port as: ``write`` = ``bo.write`` +
   sync to the device + a copy buffer -> accelerator; ``read`` = a copy accelerator -> buffer
   + sync from the device + ``bo.read``; a copy = DMA_OFFSET, DMA_BYTES, DMA_CTRL writes, then
   DMA_STATUS polled until DONE. Blocks are widened to the copy granularities (DMA_ALIGN:
   offsets of ``gmem_data_width / 8`` bytes, lengths of one memory word); a widened write
   first copies the enclosing block out, so the bytes around it keep the accelerator's values.
3. **Host side**, with pyxrt's documented API: ``pyxrt.device(index)``,
   ``pyxrt.xclbin(path)``, ``device.load_xclbin(xclbin)`` (the xclbin UUID), the buffer
   ``pyxrt.bo(device, size, pyxrt.bo.flags.normal, group)`` written with
   ``bo.write(buffer, offset)`` + ``bo.sync(XCL_BO_SYNC_BO_TO_DEVICE, size, offset)`` and read
   with ``bo.sync(XCL_BO_SYNC_BO_FROM_DEVICE, size, offset)`` + ``bo.read(size, offset)``,
   its device address ``bo.address()`` written into the pointer registers once (and read
   back).
4. **Registers** through ``pyxrt.ip(device, uuid, "<kernel>:{<cu>}")`` (``read_register``,
   ``write_register``) where the installed pyxrt binds ``xrt::ip``; otherwise through
   ``pyxrt.kernel(device, uuid, name, pyxrt.kernel.cu_access_mode.exclusive)``'s
   ``read_register``/``write_register`` (bound by the pyxrt of XRT 2.8 to 2.12). The memory
   bank group is ``kernel.group_id(mem_arg_index)`` (the pointer is argument 0) when a kernel
   object is open, else ``memory_group`` (default 0).
5. **No interrupt** (pyxrt binds no ``xrt::ip::interrupt``): the drivers poll CTRL.AP_DONE.
6. **Errors.** A copy answered with READ_ERROR, WRITE_ERROR, LOCKED (the accelerator was
   running: what ``s_axi_mem`` answers with SLVERR) or RANGE raises
   :class:`~sw.driver.mmio.BusError`.

The drivers (:class:`~sw.gae.driver.GaeDriver`, :class:`~sw.replay.driver.ReplayDriver`,
:class:`~sw.learner.driver.LearnerDriver`) run unchanged on such a device. ``pyxrt`` is
imported only when an :class:`XrtDevice` is created.
"""

import numpy as np

from sw.registry import BLOCKS, block_of_module, shipped_modules
from sw.shell.spec import SHELL_VERSION, window_kernel_register_map
from sw.timing import TARGET_MHZ

from .mmio import (BusError, Device, MemoryPort, Mmio, byte_view, check_offset, check_span,
                   check_word, merged)

__all__ = ["XrtDevice", "XRT_KERNEL_NAME", "XRT_BLOCKS"]

#: Blocks :class:`XrtDevice` runs: the window kernels of the GAE, replay and learner
#: accelerators.
XRT_BLOCKS = tuple(b.name for b in BLOCKS.values() if b.role == "kernel")

#: The fixed cost (s) of one transfer through the window, beyond its bytes: the XRT buffer sync
#: (an ioctl, pinning, one XDMA descriptor round trip and its completion, ~10 us) plus the
#: shell's copy command (3 register writes of ~1 us, DMA_STATUS and DMA_CYCLES reads of ~2 us).
#: Assumed from PCIe and XRT's design, not measured (no card here); the benchmarks' PCIe model
#: (``scripts/bench/common.py``) uses it.
TRANSFER_S = 17e-6
#: PCIe Gen3 x16, effective each way (of 15.75 GB/s raw).
PCIE_BYTES_PER_S = 12e9


def merge_gap(word_bytes: int, clock_hz: float = TARGET_MHZ * 1e6) -> int:
    """The :attr:`~sw.driver.mmio.MemoryPort.merge_gap` of a window whose shell copies
    ``word_bytes`` a cycle at ``clock_hz``: the bytes that take as long to move (through PCIe,
    then the shell's copy) as one transfer's fixed cost (:data:`TRANSFER_S`)."""
    return int(TRANSFER_S / (1 / PCIE_BYTES_PER_S + 1 / (word_bytes * clock_hz)))


#: Default kernel name in the xclbin: the shipped GAE kernel's module name (``package_xo
#: -kernel_name``).
XRT_KERNEL_NAME = shipped_modules(family="gae", role="kernel")[0]


def _import_pyxrt():
    try:
        import pyxrt
    except ImportError as e:
        raise ImportError("XrtDevice needs XRT's 'pyxrt' module (source "
                          "/opt/xilinx/xrt/setup.sh first)") from e
    return pyxrt


class _XrtMmio(Mmio):
    def __init__(self, handle):
        self._h = handle

    def read32(self, offset):
        return int(self._h.read_register(check_offset(offset))) & 0xFFFF_FFFF

    def write32(self, offset, value):
        self._h.write_register(check_offset(offset), check_word(value))


class _XrtWindowMemory(MemoryPort):
    """The memory window of a :class:`~rtl_gen.shell.window.WindowKernel` through its
    buffer and host-commanded copies (module docstring)."""

    def __init__(self, device, pyxrt, bo, control, regs, *, window, align, word, timeout,
                 poll_interval):
        self.merge_gap = merge_gap(word)
        self._device, self._pyxrt, self._bo, self._control = device, pyxrt, bo, control
        self._regs = regs
        self._off = {name: regs.offset(name) for name in
                     ("DMA_OFFSET", "DMA_BYTES", "DMA_CTRL", "DMA_STATUS", "DMA_CYCLES")}
        self._window, self._align, self._word = window, align, word
        self._timeout, self._poll = timeout, poll_interval
        #: DMA_CYCLES of the last copy (None before the first).
        self.last_copy_cycles = None

    def _span(self, offset, nbytes):
        offset, nbytes = check_span(offset, nbytes, self._window)
        lo = offset - offset % self._align
        hi = -(-(offset + nbytes) // self._word) * self._word
        return offset, nbytes, lo, hi

    def _copy(self, lo, hi, to_buffer):
        c, o = self._control, self._off
        c.write32(o["DMA_OFFSET"], lo)
        c.write32(o["DMA_BYTES"], hi - lo)
        c.write32(o["DMA_CTRL"], self._regs["DMA_CTRL"].pack({"START": 1,
                                                              "DIR": int(to_buffer)}))
        # The engine accepts START in the cycle the write completes: a later read of
        # DMA_STATUS no longer shows the previous copy's DONE.
        dev = self._device
        deadline = dev.time() + self._timeout
        while True:
            word = c.read32(o["DMA_STATUS"])
            status = self._regs["DMA_STATUS"].unpack(word)
            if status["DONE"] and not status["BUSY"]:
                break
            if dev.time() > deadline:
                raise TimeoutError(f"copy of {hi - lo} bytes at {lo:#x} not done after "
                                   f"{self._timeout} s (DMA_STATUS={word:#x})")
            dev.sleep(self._poll)
        self.last_copy_cycles = c.read32(o["DMA_CYCLES"])
        errors = [name for name in ("READ_ERROR", "WRITE_ERROR", "LOCKED", "RANGE")
                  if status[name]]
        if errors:
            what = "accelerator -> buffer" if to_buffer else "buffer -> accelerator"
            raise BusError(f"copy of {hi - lo} bytes at {lo:#x} ({what}) failed: "
                           f"{', '.join(errors)} (DMA_STATUS={word:#x})")

    def _sync(self, direction, lo, hi):
        d = self._pyxrt.xclBOSyncDirection
        self._bo.sync(getattr(d, f"XCL_BO_SYNC_BO_{direction}"), hi - lo, lo)

    def write(self, offset, data):
        data = byte_view(data)                      # no copy of the driver's image
        offset, n, lo, hi = self._span(offset, data.nbytes)
        if not n:
            return
        if (lo, hi) != (offset, offset + n):        # keep the bytes around the block
            self._copy(lo, hi, True)
            self._sync("FROM_DEVICE", lo, hi)
        self._bo.write(np.frombuffer(data, np.uint8), offset)
        self._sync("TO_DEVICE", lo, hi)
        self._copy(lo, hi, False)

    def read(self, offset, nbytes):
        offset, n, lo, hi = self._span(offset, nbytes)
        if not n:
            return b""
        self._copy(lo, hi, True)
        self._sync("FROM_DEVICE", lo, hi)
        return np.asarray(self._bo.read(n, offset)).view(np.uint8).tobytes()

    def _groups(self, spans):
        """:func:`~sw.driver.mmio.merged` of ``spans`` widened to the copy granularities."""
        return [(lo - lo % self._align, -(-hi // self._word) * self._word, idx)
                for lo, hi, idx in merged(spans, self.merge_gap)]

    def write_blocks(self, blocks, *, gaps_are_inputs=False):
        """With ``gaps_are_inputs``: the blocks of each merged group go into the buffer, then
        one sync and one copy move the group (the gaps: whatever the buffer holds there);
        a group whose ends need widening goes block by block (:meth:`write`)."""
        blocks = [(check_span(o, byte_view(d).nbytes, self._window)[0], byte_view(d))
                  for o, d in blocks]
        if not gaps_are_inputs or not self.merge_gap:
            return super().write_blocks(blocks)
        for lo, hi, idx in self._groups([(o, d.nbytes) for o, d in blocks]):
            first, last = blocks[idx[0]], blocks[idx[-1]]
            if len(idx) == 1 or (lo, hi) != (first[0], last[0] + last[1].nbytes):
                for i in idx:
                    self.write(*blocks[i])
                continue
            for i in idx:
                o, d = blocks[i]
                if d.nbytes:
                    self._bo.write(np.frombuffer(d, np.uint8), o)
            self._sync("TO_DEVICE", lo, hi)
            self._copy(lo, hi, False)

    def read_blocks(self, blocks):
        """Each merged group: one copy out and one sync, then the blocks from the buffer."""
        blocks = [check_span(o, n, self._window) for o, n in blocks]
        out = [b""] * len(blocks)
        for lo, hi, idx in self._groups(blocks):
            self._copy(lo, hi, True)
            self._sync("FROM_DEVICE", lo, hi)
            for i in idx:
                o, n = blocks[i]
                if n:
                    out[i] = np.asarray(self._bo.read(n, o)).view(np.uint8).tobytes()
        return out


def _block_of(kernel):
    """The block of a kernel name: a shipped module (``replay_kernel_k16``) or a block's
    default module name (``replay_kernel``); else the GAE kernel."""
    block = block_of_module(kernel, role="kernel")
    return "gae-kernel" if block is None else block.name


class XrtDevice(Device):
    """An accelerator kernel in an Alveo xclbin: the GAE, replay or learner accelerator in the
    window DMA shell (the contract of the module docstring).

    Parameters
    ----------
    xclbin : str
        Path of the ``.xclbin``.
    device_index : int
        XRT device index (``xbutil examine``).
    kernel : str
        Kernel name in the xclbin (default :data:`XRT_KERNEL_NAME`).
    block : str or None
        One of :data:`XRT_BLOCKS`; default: the block of the kernel named ``kernel`` (a
        shipped module such as ``replay_kernel_k16`` or a block's module name such as
        ``replay_kernel``), else ``"gae-kernel"``.
    cu : str or None
        Compute unit instance (``<kernel>_1`` by Vitis' default naming); the IP is opened as
        ``"<kernel>:{<cu>}"``.
    memory_group : int or None
        Memory bank group of the buffer when no kernel object gives it (default 0).
    mem_arg_index : int
        Kernel argument index of the ``m_axi`` pointer, for ``kernel.group_id``.
    copy_timeout, poll_interval : float
        Seconds (of :meth:`time`) a copy may take, and between two polls of DMA_STATUS.

    Members
    -------
    block : str
    config : GaeCoreConfig, SumTreeConfig or LearnerConfig
        The accelerator's configuration, read back from its HW_* registers (the driver's
        ``read_config`` of the block's family in :data:`sw.registry.BLOCKS`).
    bo : pyxrt.bo
        The buffer.

    Raises
    ------
    RuntimeError
        No register access in this pyxrt; SHELL_VERSION is not :data:`SHELL_VERSION` (not a
        window kernel of this layout, e.g. a GAE kernel built before version 1: rebuild the
        xclbin); or MEM_PTR does not read back as written (an address the kernel cannot take).
    """

    has_interrupt = False

    def __init__(self, xclbin, *, device_index=0, kernel=XRT_KERNEL_NAME, cu=None, block=None,
                 memory_group=None, mem_arg_index=0, copy_timeout=1.0, poll_interval=1e-6):
        if block is None:
            block = _block_of(kernel)
        if block not in XRT_BLOCKS:
            raise ValueError(f"block must be one of {', '.join(XRT_BLOCKS)}, not {block!r}")
        self.block = block
        pyxrt = _import_pyxrt()
        self._pyxrt = pyxrt
        self.xrt_device = pyxrt.device(device_index)
        self.xclbin = pyxrt.xclbin(str(xclbin))
        self.uuid = self.xrt_device.load_xclbin(self.xclbin)
        cu = cu or f"{kernel}_1"
        self.kernel = None
        if hasattr(pyxrt, "ip"):
            handle = pyxrt.ip(self.xrt_device, self.uuid, f"{kernel}:{{{cu}}}")
        else:
            self.kernel = pyxrt.kernel(self.xrt_device, self.uuid, kernel,
                                       pyxrt.kernel.cu_access_mode.exclusive)
            handle = self.kernel
            if not hasattr(handle, "read_register"):
                raise RuntimeError("this pyxrt binds neither xrt::ip nor "
                                   "xrt::kernel::read_register: no register access for "
                                   "the kernel's control port")
        control = _XrtMmio(handle)
        regs = self._kernel_map(control)
        version = control.read32(regs.offset("SHELL_VERSION"))
        if version != SHELL_VERSION:
            raise RuntimeError(f"SHELL_VERSION reads {version:#x}, not {SHELL_VERSION}: not a "
                               f"window kernel of this register layout (a GAE kernel built "
                               f"before the window shell? rebuild the xclbin)")
        size = control.read32(regs.offset("DMA_WINDOW"))
        if self.kernel is not None:
            group = self.kernel.group_id(mem_arg_index)
        else:
            group = 0 if memory_group is None else memory_group
        self.bo = pyxrt.bo(self.xrt_device, size, pyxrt.bo.flags.normal, group)
        ptr = regs.offset("MEM_PTR_LO")
        address = int(self.bo.address())
        control.write32(ptr, address & 0xFFFF_FFFF)
        control.write32(ptr + 4, address >> 32)
        back = control.read32(ptr) | control.read32(ptr + 4) << 32
        if back != address:
            raise RuntimeError(f"MEM_PTR at {ptr:#x} reads back {back:#x} after writing the "
                               f"buffer address {address:#x}: an address the kernel cannot take "
                               f"(alignment)")
        align = regs["DMA_ALIGN"].unpack(control.read32(regs.offset("DMA_ALIGN")))
        memory = _XrtWindowMemory(self, pyxrt, self.bo, control, regs, window=size,
                                  align=align["OFFSET"], word=align["BYTES"],
                                  timeout=copy_timeout, poll_interval=poll_interval)
        super().__init__(control, memory)

    def _kernel_map(self, control):
        """The kernel's register map: the accelerator's (of the configuration its HW_*
        registers describe), then the window shell's (``gmem_data_width`` is not known here;
        it only moves reserved bits of MEM_PTR_LO)."""
        kernel = BLOCKS[self.block]
        accel = kernel.accelerator
        self.config = accel.load("reader")(control)
        return window_kernel_register_map(kernel.module, accel.regmap(self.config),
                                          gmem_data_width=32)

    @property
    def last_copy_cycles(self):
        """DMA_CYCLES of the last copy (None before the first)."""
        return self.memory.last_copy_cycles
