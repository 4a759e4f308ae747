"""Alveo cards (U200/U250) with XRT's ``pyxrt`` (PYNQ 3.1 dropped Alveo support).

What this backend assumes -- the *DMA shell contract*. Vitis links kernels whose data ports
are AXI4 *masters* (``m_axi``) to device memory; it cannot connect an AXI4 *slave* data port
like the accelerator's ``s_axi_mem``. A real Alveo run therefore needs an RTL shell around
:class:`~rtl_gen.gae.accelerator.GaeAccelerator`, which this repository does not have yet:

1. **Control.** The shell's ``s_axi_control`` shows the accelerator's registers unchanged
   (:func:`~rtl_gen.gae.regs.gae_register_map`, ap_ctrl_hs) plus one 64-bit pointer, two
   words (low, high) at ``mem_ptr_offset`` -- by default the first two words after the
   accelerator's map (``regmap.span``), i.e. the kernel argument a Vitis ``kernel.xml`` would
   declare for the ``m_axi`` port.
2. **Memory.** On AP_START the shell copies the ``1 << config.mem_addr_bits``-byte image at
   that pointer (laid out exactly like the ``s_axi_mem`` window, :mod:`sw.gae.layout`) into
   the accelerator's memory through ``s_axi_mem``, starts the core, copies the window back
   when the core is done, and only then pulses ap_done/ap_ready. (Copying only the
   ``(T + 1) * ceil(M / n_pe)`` rows of each region the run uses is an optimisation the shell
   may make; the contract is the whole image.)
3. **Host side**, with pyxrt's documented API: ``pyxrt.device(index)``,
   ``pyxrt.xclbin(path)``, ``device.load_xclbin(xclbin)`` (the xclbin UUID), the memory image
   as one buffer object ``pyxrt.bo(device, size, pyxrt.bo.flags.normal, group)`` written with
   ``bo.write(buffer, offset)`` + ``bo.sync(XCL_BO_SYNC_BO_TO_DEVICE, size, offset)`` and read
   with ``bo.sync(XCL_BO_SYNC_BO_FROM_DEVICE, size, offset)`` + ``bo.read(size, offset)``,
   its device address ``bo.address()`` written into the pointer registers.
4. **Registers** through ``pyxrt.ip(device, uuid, "<kernel>:{<cu>}")`` (``read_register``,
   ``write_register``) where the installed pyxrt binds ``xrt::ip``; otherwise through
   ``pyxrt.kernel(device, uuid, name, pyxrt.kernel.cu_access_mode.exclusive)``'s
   ``read_register``/``write_register`` (bound by the pyxrt of XRT 2.8 to 2.12). The memory
   bank group is ``kernel.group_id(mem_arg_index)`` when a kernel object is open, else
   ``memory_group`` (default 0).
5. **No interrupt** (pyxrt binds no ``xrt::ip::interrupt``): the driver polls CTRL.AP_DONE.

Everything the driver does is then identical to the other backends: the memory port writes
the codes into the buffer, the registers start the run, the results come back through the
buffer. ``pyxrt`` is imported only when an :class:`XrtDevice` is created.
"""

import numpy as np

from rtl_gen.gae.regs import gae_register_map

from .gae import GAE_KERNEL_NAME, read_hw_config
from .mmio import Device, MemoryPort, Mmio, check_offset, check_word

__all__ = ["XrtDevice"]


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
    def __init__(self, pyxrt, bo, size):
        self._pyxrt = pyxrt
        self._bo = bo
        self._size = size

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
        self._bo.sync(self._pyxrt.xclBOSyncDirection.XCL_BO_SYNC_BO_FROM_DEVICE, nbytes, offset)
        return np.asarray(self._bo.read(nbytes, offset)).view(np.uint8).tobytes()


class XrtDevice(Device):
    """The GAE accelerator in an Alveo xclbin, behind the DMA shell of the module docstring.

    Parameters
    ----------
    xclbin : str
        Path of the ``.xclbin``.
    device_index : int
        XRT device index (``xbutil examine``).
    kernel : str
        Kernel name in the xclbin.
    cu : str or None
        Compute unit instance (``<kernel>_1`` by Vitis' default naming); the IP is opened as
        ``"<kernel>:{<cu>}"``.
    mem_ptr_offset : int or None
        Byte offset of the shell's 64-bit buffer pointer (default: the accelerator map's span).
    memory_group : int or None
        Memory bank group of the buffer when no kernel object gives it (default 0).
    mem_arg_index : int
        Kernel argument index of the ``m_axi`` pointer, for ``kernel.group_id``.

    Members
    -------
    config : GaeCoreConfig
        Read back from the HW_* registers (:func:`~sw.driver.gae.read_hw_config`).
    bo : pyxrt.bo
        The memory image.
    """

    has_interrupt = False

    def __init__(self, xclbin, *, device_index=0, kernel=GAE_KERNEL_NAME, cu=None,
                 mem_ptr_offset=None, memory_group=None, mem_arg_index=0):
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
                                   "the GAE control port")
        control = _XrtMmio(handle)
        self.config = read_hw_config(control)
        size = 1 << self.config.mem_addr_bits
        if self.kernel is not None:
            group = self.kernel.group_id(mem_arg_index)
        else:
            group = 0 if memory_group is None else memory_group
        self.bo = pyxrt.bo(self.xrt_device, size, pyxrt.bo.flags.normal, group)
        if mem_ptr_offset is None:
            mem_ptr_offset = gae_register_map(self.config).span
        self.mem_ptr_offset = check_offset(mem_ptr_offset, what="mem_ptr_offset")
        address = int(self.bo.address())
        control.write32(self.mem_ptr_offset, address & 0xFFFF_FFFF)
        control.write32(self.mem_ptr_offset + 4, address >> 32)
        super().__init__(control, _XrtMemory(pyxrt, self.bo, size))
