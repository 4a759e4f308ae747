"""Alveo cards (U200/U250) with XRT's ``pyxrt`` (PYNQ 3.1 dropped Alveo support).

What this backend assumes -- the *DMA shell contract*. Vitis links kernels whose data ports
are AXI4 *masters* (``m_axi``) to device memory; it cannot connect an AXI4 *slave* data port
like the accelerator's ``s_axi_mem``. The kernel is therefore
:class:`~rtl_gen.gae.kernel.GaeKernel` (shipped as ``gae_kernel_n8``): the accelerator's core
behind an AXI4 master ``m_axi_gmem`` that copies between device memory and the core's memory.

1. **Control.** ``s_axi_control`` shows the accelerator's registers unchanged
   (:func:`~sw.gae.spec.gae_register_map`, ap_ctrl_hs), then, at ``mem_ptr_offset`` --
   by default the accelerator map's span -- the 64-bit buffer address as two words
   ``MEM_PTR_LO``, ``MEM_PTR_HI`` (argument 0 of the kernel's ``kernel.xml``), then
   ``DMA_STATUS`` (bit 0: a read of the buffer, bit 1: a write of the results was answered
   with an AXI error during the last run) and ``DMA_CYCLES`` (cycles of the last run, copies
   included) (:func:`~sw.gae.spec.gae_kernel_register_map`). The address must be a
   multiple of ``gmem_data_width / 8`` (64 bytes for the shipped kernel; XRT aligns buffers
   to 4 KiB): the lower bits of ``MEM_PTR_LO`` read 0, so :class:`XrtDevice` reads the
   pointer back.
2. **Memory.** The buffer holds the image of the ``s_axi_mem`` window (:mod:`sw.gae.layout`,
   ``1 << config.mem_addr_bits`` bytes). On AP_START the kernel latches the arguments and
   the pointer (AP_READY) and, if the core will accept them (STATUS.ERROR would be 0), copies
   into the core the rows the run reads -- rows ``0..T-1`` of ``rewards`` and ``dones``,
   rows ``0..T`` of ``values``, i.e. the first ``T*G``, ``(T+1)*G`` and ``T*G`` words of the
   regions, ``G = ceil(M / n_pe)`` (:func:`~sw.gae.spec.copy_plan`) --, runs the
   core, and if STATUS.ERROR is 0 copies the result rows ``0..T-1`` back (``rewards`` and
   ``values`` in place, ``adv`` and ``rtg`` at full precision), and only then signals AP_DONE
   (and the interrupt). No other byte of the buffer is read or written; a refused run reads
   and writes none. So the host writes the codes into the buffer, starts, waits, and reads
   the results from the buffer, exactly as through ``s_axi_mem``.
3. **Host side**, with pyxrt's documented API: ``pyxrt.device(index)``,
   ``pyxrt.xclbin(path)``, ``device.load_xclbin(xclbin)`` (the xclbin UUID), the memory image
   as one buffer object ``pyxrt.bo(device, size, pyxrt.bo.flags.normal, group)`` written with
   ``bo.write(buffer, offset)`` + ``bo.sync(XCL_BO_SYNC_BO_TO_DEVICE, size, offset)`` and read
   with ``bo.sync(XCL_BO_SYNC_BO_FROM_DEVICE, size, offset)`` + ``bo.read(size, offset)``,
   its device address ``bo.address()`` written into the pointer registers once.
4. **Registers** through ``pyxrt.ip(device, uuid, "<kernel>:{<cu>}")`` (``read_register``,
   ``write_register``) where the installed pyxrt binds ``xrt::ip``; otherwise through
   ``pyxrt.kernel(device, uuid, name, pyxrt.kernel.cu_access_mode.exclusive)``'s
   ``read_register``/``write_register`` (bound by the pyxrt of XRT 2.8 to 2.12). The memory
   bank group is ``kernel.group_id(mem_arg_index)`` (the pointer is argument 0) when a kernel
   object is open, else ``memory_group`` (default 0).
5. **No interrupt** (pyxrt binds no ``xrt::ip::interrupt``): the driver polls CTRL.AP_DONE.
6. **Errors.** A read of the buffer after a run whose copies got an AXI error response
   (DMA_STATUS != 0) raises :class:`~sw.driver.mmio.BusError`, as an error response on
   ``s_axi_mem`` does on the other backends.

Everything the driver does is then identical to the other backends. ``pyxrt`` is imported
only when an :class:`XrtDevice` is created.

**Window kernels** (the replay and learner accelerators, ``replay_kernel_k16`` and
``learner_kernel_s4``: :class:`~rtl_gen.shell.window.WindowKernel`). Their runs do not
copy anything; the host commands the copies. ``s_axi_control`` shows the accelerator's
registers unchanged, then ``MEM_PTR_LO/HI`` and the copy engine's DMA_OFFSET, DMA_BYTES,
DMA_CTRL (START, DIR), DMA_STATUS (BUSY, DONE, READ_ERROR, WRITE_ERROR, LOCKED, RANGE),
DMA_CYCLES, DMA_WINDOW and DMA_ALIGN. The buffer mirrors the accelerator's memory window
(DMA_WINDOW bytes, window byte ``x`` = buffer byte ``x``). :class:`XrtDevice` then implements
the memory port as: ``write`` = ``bo.write`` + sync to the device + a copy buffer ->
accelerator; ``read`` = a copy accelerator -> buffer + sync from the device + ``bo.read``; a
copy = DMA_OFFSET, DMA_BYTES, DMA_CTRL writes, then DMA_STATUS polled until DONE. Blocks are
widened to the copy granularities (DMA_ALIGN: offsets of ``gmem_data_width / 8`` bytes,
lengths of one memory word); a widened write first copies the enclosing block out, so the
bytes around it keep the accelerator's values. A copy answered with READ_ERROR, WRITE_ERROR,
LOCKED (the accelerator was running: what ``s_axi_mem`` answers with SLVERR) or RANGE raises
:class:`~sw.driver.mmio.BusError`. The drivers (:class:`~sw.replay.driver.ReplayDriver`,
:class:`~sw.learner.driver.LearnerDriver`) run unchanged on such a device.
"""

import numpy as np

from sw.gae.driver import read_hw_config
from sw.gae.spec import gae_register_map
from sw.registry import BLOCKS, block_of_module, shipped_modules
from sw.shell.spec import DMA_FLAGS, window_kernel_register_map

from .mmio import BusError, Device, MemoryPort, Mmio, check_offset, check_word

__all__ = ["XrtDevice", "XRT_KERNEL_NAME", "XRT_BLOCKS"]

#: Blocks :class:`XrtDevice` runs: the GAE kernel (copies inside its runs) and the window
#: kernels (host-commanded copies).
XRT_BLOCKS = tuple(b.name for b in BLOCKS.values() if b.role == "kernel")

#: Kernel name in the xclbin: the module name of the shipped Vitis kernel (``package_xo
#: -kernel_name``), ``gae_kernel_n8``.
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


class _XrtMemory(MemoryPort):
    def __init__(self, pyxrt, bo, size, control, dma_status_offset):
        self._pyxrt = pyxrt
        self._bo = bo
        self._size = size
        self._control = control
        self._dma_status = dma_status_offset

    def _check(self, offset, nbytes):
        offset = check_offset(offset, align=1)
        if offset + nbytes > self._size:
            raise ValueError(f"{nbytes} bytes at {offset:#x} go past the memory image "
                             f"({self._size:#x} bytes)")
        return offset

    def write(self, offset, data):
        data = bytes(data)
        offset = self._check(offset, len(data))
        self._bo.write(np.frombuffer(data, np.uint8), offset)
        self._bo.sync(self._pyxrt.xclBOSyncDirection.XCL_BO_SYNC_BO_TO_DEVICE, len(data),
                      offset)

    def read(self, offset, nbytes):
        nbytes = check_offset(nbytes, align=1, what="nbytes")
        offset = self._check(offset, nbytes)
        if self._dma_status is not None:
            status = self._control.read32(self._dma_status)
            if status:
                what = " and ".join(w for bit, w in ((1, "reading the image"),
                                                     (2, "writing the results"))
                                    if status & bit)
                raise BusError(f"the kernel's last run got an AXI error response from device "
                               f"memory {what} (DMA_STATUS={status:#x})")
        self._bo.sync(self._pyxrt.xclBOSyncDirection.XCL_BO_SYNC_BO_FROM_DEVICE, nbytes, offset)
        return np.asarray(self._bo.read(nbytes, offset)).view(np.uint8).tobytes()


class _XrtWindowMemory(MemoryPort):
    """The memory window of a :class:`~rtl_gen.shell.window.WindowKernel` through its
    buffer and host-commanded copies (module docstring)."""

    def __init__(self, device, pyxrt, bo, control, regs, *, window, align, word, timeout,
                 poll_interval):
        self._device, self._pyxrt, self._bo, self._control = device, pyxrt, bo, control
        self._off = {name: regs.offset(name) for name in
                     ("DMA_OFFSET", "DMA_BYTES", "DMA_CTRL", "DMA_STATUS", "DMA_CYCLES")}
        self._window, self._align, self._word = window, align, word
        self._timeout, self._poll = timeout, poll_interval
        #: DMA_CYCLES of the last copy (None before the first).
        self.last_copy_cycles = None

    def _span(self, offset, nbytes):
        offset = check_offset(offset, align=1)
        nbytes = check_offset(nbytes, align=1, what="nbytes")
        if offset + nbytes > self._window:
            raise ValueError(f"{nbytes} bytes at {offset:#x} go past the memory window "
                             f"({self._window:#x} bytes)")
        lo = offset - offset % self._align
        hi = -(-(offset + nbytes) // self._word) * self._word
        return offset, nbytes, lo, hi

    def _copy(self, lo, hi, to_buffer):
        c, o = self._control, self._off
        c.write32(o["DMA_OFFSET"], lo)
        c.write32(o["DMA_BYTES"], hi - lo)
        c.write32(o["DMA_CTRL"], 1 | int(to_buffer) << 1)
        # The engine accepts START in the cycle the write completes: a later read of
        # DMA_STATUS no longer shows the previous copy's DONE.
        dev = self._device
        deadline = dev.time() + self._timeout
        while True:
            status = c.read32(o["DMA_STATUS"])
            if status >> DMA_FLAGS["DONE"] & 1 and not status >> DMA_FLAGS["BUSY"] & 1:
                break
            if dev.time() > deadline:
                raise TimeoutError(f"copy of {hi - lo} bytes at {lo:#x} not done after "
                                   f"{self._timeout} s (DMA_STATUS={status:#x})")
            dev.sleep(self._poll)
        self.last_copy_cycles = c.read32(o["DMA_CYCLES"])
        errors = [name for name in ("READ_ERROR", "WRITE_ERROR", "LOCKED", "RANGE")
                  if status >> DMA_FLAGS[name] & 1]
        if errors:
            what = "accelerator -> buffer" if to_buffer else "buffer -> accelerator"
            raise BusError(f"copy of {hi - lo} bytes at {lo:#x} ({what}) failed: "
                           f"{', '.join(errors)} (DMA_STATUS={status:#x})")

    def _sync(self, direction, lo, hi):
        d = self._pyxrt.xclBOSyncDirection
        self._bo.sync(getattr(d, f"XCL_BO_SYNC_BO_{direction}"), hi - lo, lo)

    def write(self, offset, data):
        data = bytes(data)
        offset, n, lo, hi = self._span(offset, len(data))
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


def _block_of(kernel):
    """The block of a kernel name: a shipped module (``replay_kernel_k16``) or a block's
    default module name (``replay_kernel``); else the GAE kernel."""
    block = block_of_module(kernel, role="kernel")
    return "gae-kernel" if block is None else block.name


class XrtDevice(Device):
    """An accelerator kernel in an Alveo xclbin (the DMA shell contracts of the module
    docstring): the GAE kernel, or a replay or learner window kernel.

    Parameters
    ----------
    xclbin : str
        Path of the ``.xclbin``.
    device_index : int
        XRT device index (``xbutil examine``).
    kernel : str
        Kernel name in the xclbin (default :data:`XRT_KERNEL_NAME`).
    block : str or None
        One of :data:`XRT_BLOCKS`; default: the block of the shipped kernel named ``kernel``
        (``replay_kernel_k16`` -> ``"replay-kernel"``), else ``"gae-kernel"``.
    cu : str or None
        Compute unit instance (``<kernel>_1`` by Vitis' default naming); the IP is opened as
        ``"<kernel>:{<cu>}"``.
    mem_ptr_offset : int or None
        Byte offset of the shell's 64-bit buffer pointer (default: the accelerator map's span).
    dma_status_offset : int or None
        Byte offset of DMA_STATUS, checked before every read of the buffer (default:
        ``mem_ptr_offset + 8``; ``False`` to skip the check).
    memory_group : int or None
        Memory bank group of the buffer when no kernel object gives it (default 0).
    mem_arg_index : int
        Kernel argument index of the ``m_axi`` pointer, for ``kernel.group_id``.
    copy_timeout, poll_interval : float
        Window kernels: seconds (of :meth:`time`) a copy may take, and between two polls of
        DMA_STATUS.

    Members
    -------
    block : str
    config : GaeCoreConfig, SumTreeConfig or LearnerConfig
        Read back from the HW_* registers (:func:`~sw.gae.driver.read_hw_config`,
        :func:`~sw.replay.driver.read_replay_config`,
        :func:`~sw.learner.driver.read_learner_config`).
    bo : pyxrt.bo
        The memory image.

    Raises
    ------
    RuntimeError
        No register access in this pyxrt, or MEM_PTR does not read back as written (no
        pointer register at ``mem_ptr_offset``, or a buffer address the kernel cannot take).
    """

    has_interrupt = False

    def __init__(self, xclbin, *, device_index=0, kernel=XRT_KERNEL_NAME, cu=None, block=None,
                 mem_ptr_offset=None, dma_status_offset=None, memory_group=None,
                 mem_arg_index=0, copy_timeout=1.0, poll_interval=1e-6):
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
        if block == "gae-kernel":
            self.config = read_hw_config(control)
            base = gae_register_map(self.config)
            size = 1 << self.config.mem_addr_bits
        else:
            base, regs = self._window_maps(control)
            size = control.read32(regs.offset("DMA_WINDOW"))
        if self.kernel is not None:
            group = self.kernel.group_id(mem_arg_index)
        else:
            group = 0 if memory_group is None else memory_group
        self.bo = pyxrt.bo(self.xrt_device, size, pyxrt.bo.flags.normal, group)
        if mem_ptr_offset is None:
            mem_ptr_offset = base.span
        self.mem_ptr_offset = check_offset(mem_ptr_offset, what="mem_ptr_offset")
        address = int(self.bo.address())
        control.write32(self.mem_ptr_offset, address & 0xFFFF_FFFF)
        control.write32(self.mem_ptr_offset + 4, address >> 32)
        back = control.read32(self.mem_ptr_offset) | control.read32(self.mem_ptr_offset + 4) << 32
        if back != address:
            raise RuntimeError(f"MEM_PTR at {self.mem_ptr_offset:#x} reads back {back:#x} after "
                               f"writing the buffer address {address:#x}: no pointer register "
                               f"there, or an address the kernel cannot take (alignment)")
        if block != "gae-kernel":
            align = regs["DMA_ALIGN"].unpack(control.read32(regs.offset("DMA_ALIGN")))
            memory = _XrtWindowMemory(self, pyxrt, self.bo, control, regs, window=size,
                                      align=align["OFFSET"], word=align["BYTES"],
                                      timeout=copy_timeout, poll_interval=poll_interval)
            super().__init__(control, memory)
            return
        if dma_status_offset is None:
            dma_status_offset = self.mem_ptr_offset + 8
        self.dma_status_offset = (None if dma_status_offset is False else
                                  check_offset(dma_status_offset, what="dma_status_offset"))
        super().__init__(control, _XrtMemory(pyxrt, self.bo, size, control,
                                             self.dma_status_offset))

    def _window_maps(self, control):
        """The accelerator's map (from its HW_* registers) and the window kernel's."""
        if self.block == "replay-kernel":
            from sw.replay.driver import read_replay_config
            from sw.replay.spec import replay_register_map
            self.config = read_replay_config(control)
            base = replay_register_map(self.config)
        else:
            from sw.learner.driver import read_learner_config
            from sw.learner.spec import learner_register_map
            self.config = read_learner_config(control)
            base = learner_register_map(self.config)
        name = self.block.replace("-", "_")
        return base, window_kernel_register_map(name, base, gmem_data_width=32)
