"""The fused trainer on a board: its storage is host memory the core reaches by its AXI4
master, so a board backend is a control port plus a buffer.

* :class:`PynqTrainerDevice`, ZCU106 with PYNQ: the packaged ``dqn_trainer_zcu106`` (VLNV
  ``rlk:accel:dqn_trainer*``) with ``s_axi_control`` on M_AXI_HPM0_FPD and ``m_axi_gmem`` on
  an S_AXI_HP port into PS DDR; the storage is one ``pynq.allocate`` buffer (contiguous,
  zero copy): the host writes records into it and flushes them before the doorbell, and
  invalidates before it reads snapshots and the trace. ``interrupt`` through
  ``pynq.Interrupt`` when wired, else the driver polls.
* :class:`XrtTrainerDevice`, Alveo U250 with XRT's ``pyxrt``: the ``dqn_trainer_u250`` kernel,
  its registers through ``pyxrt.ip`` (or ``pyxrt.kernel``'s register access), the storage one
  ``pyxrt.bo`` in the kernel's memory bank, written with ``bo.write`` + ``bo.sync`` to the
  device and read with ``bo.sync`` from the device + ``bo.read``; no interrupt (polled).

Both give the driver the buffer's bus address as ``storage_address`` (into BASE_HI:BASE_LO)
and carry the configuration (``config``): the trainer's HW_* registers describe its tree and
bus, not its network, so the configuration is the shipped module's unless given. ``pynq``
and ``pyxrt`` are imported only when a device is made.
"""

import numpy as np

from sw.driver.mmio import Device, MemoryPort, byte_view, check_span
from sw.driver.pynq_device import PynqDevice
from sw.registry import block_of_module, shipped_config, vlnv

from .layout import storage_bytes
from .spec import TrainerConfig

__all__ = ["PynqTrainerDevice", "XrtTrainerDevice", "BufferStorage", "TRAINER_VLNV"]

#: VLNV prefix of the trainer accelerators (any shipped configuration).
TRAINER_VLNV = vlnv("dqn_trainer")


def _config(config, module):
    if config is None:
        if block_of_module(module) is None or block_of_module(module).name != "dqn-trainer":
            raise ValueError(f"config must be given for a module that is not a shipped "
                             f"trainer, not None (module {module!r})")
        config = shipped_config(module)[1]
    if not isinstance(config, TrainerConfig):
        raise TypeError(f"config must be a TrainerConfig, not {config!r}")
    return config


class BufferStorage(MemoryPort):
    """The storage as a host buffer the core reads and writes by DMA.

    Parameters
    ----------
    size : int
        Bytes of the storage.
    write, read : callable
        ``write(offset, data)`` puts bytes into the buffer *and* makes them visible to the
        device (a cache flush, a sync); ``read(offset, nbytes)`` makes the device's writes
        visible and returns the bytes.
    """

    def __init__(self, size, write, read):
        self._size, self._write, self._read = size, write, read

    def write(self, offset, data):
        offset, _ = check_span(offset, byte_view(data).nbytes, self._size)
        self._write(offset, byte_view(data))

    def read(self, offset, nbytes):
        offset, nbytes = check_span(offset, nbytes, self._size)
        return bytes(self._read(offset, nbytes))


class PynqTrainerDevice(Device):
    """The trainer in a PYNQ overlay, its storage a ``pynq.allocate`` buffer.

    Parameters
    ----------
    bitfile : str or None
        The overlay's ``.bit`` (``.hwh`` beside it); or None with ``overlay=``.
    overlay : pynq.Overlay or None
    config : TrainerConfig or None
        Default: the shipped configuration of ``module``.
    module : str
        Shipped trainer module (default ``dqn_trainer_zcu106``).
    name : str or None
        Instance name in the block design; default the one IP with VLNV
        :data:`TRAINER_VLNV`.
    use_interrupt : bool
        Use ``pynq.Interrupt`` if the pin is wired.

    Members
    -------
    config, storage_address, buffer, instance
    """

    def __init__(self, bitfile=None, *, overlay=None, config=None,
                 module="dqn_trainer_zcu106", name=None, use_interrupt=True, download=True):
        from sw.driver.pynq_device import (PynqMmio, _import_pynq, find_gae_windows,
                                           overlay_windows)
        pynq = _import_pynq()
        self.config = _config(config, module)
        if overlay is None:
            if bitfile is None:
                raise ValueError("give bitfile= or overlay=")
            overlay = pynq.Overlay(bitfile, download=download)
        self.overlay = overlay
        instance, control, _ = find_gae_windows(overlay_windows(overlay), name=name,
                                                vlnv=TRAINER_VLNV)
        self.instance = instance
        on = {"device": overlay.device} if getattr(overlay, "device", None) is not None else {}
        ctl = pynq.MMIO(control["phys_addr"], control["addr_range"], **on)
        size = storage_bytes(self.config)
        self.buffer = buf = pynq.allocate(shape=(size,), dtype=np.uint8, **on)
        address = getattr(buf, "device_address", None)
        self.storage_address = int(buf.physical_address if address is None else address)

        def write(offset, data):
            buf[offset:offset + data.nbytes] = np.frombuffer(data, np.uint8)
            buf.flush()

        def read(offset, nbytes):
            buf.invalidate()
            return np.array(buf[offset:offset + nbytes], np.uint8).tobytes()

        super().__init__(PynqMmio(ctl), BufferStorage(size, write, read))
        self._interrupt = None
        self._loop = None
        if use_interrupt:
            self._interrupt = PynqDevice._find_interrupt(pynq, instance, control)
        self.has_interrupt = self._interrupt is not None

    # The interrupt wait of PynqDevice (its ``_interrupt`` and ``_loop``).
    wait_interrupt = PynqDevice.wait_interrupt

    def close(self):
        """Free the buffer (and stop the interrupt loop)."""
        PynqDevice.close(self)
        if getattr(self, "buffer", None) is not None:
            free = getattr(self.buffer, "freebuffer", None)
            if free is not None:
                free()
            self.buffer = None


class XrtTrainerDevice(Device):
    """The trainer kernel in an Alveo xclbin, its storage a ``pyxrt.bo``.

    Parameters
    ----------
    xclbin : str
    config : TrainerConfig or None
        Default: the shipped configuration of ``kernel``.
    kernel : str
        Kernel name in the xclbin (default ``dqn_trainer_u250``).
    device_index : int
    cu : str or None
        Compute unit (default ``<kernel>_1``).
    memory_group : int
        Memory bank group of the buffer when no kernel object gives it.

    Members
    -------
    config, storage_address, bo
    """

    has_interrupt = False

    def __init__(self, xclbin, *, config=None, kernel="dqn_trainer_u250", device_index=0,
                 cu=None, memory_group=0):
        from sw.driver.xrt_device import _import_pyxrt, _XrtMmio
        self.config = _config(config, kernel)
        pyxrt = _import_pyxrt()
        self.xrt_device = pyxrt.device(device_index)
        self.uuid = self.xrt_device.load_xclbin(pyxrt.xclbin(str(xclbin)))
        cu = cu or f"{kernel}_1"
        group = memory_group
        if hasattr(pyxrt, "ip"):
            handle = pyxrt.ip(self.xrt_device, self.uuid, f"{kernel}:{{{cu}}}")
        else:
            handle = pyxrt.kernel(self.xrt_device, self.uuid, kernel,
                                  pyxrt.kernel.cu_access_mode.exclusive)
            if not hasattr(handle, "read_register"):
                raise RuntimeError("this pyxrt binds neither xrt::ip nor "
                                   "xrt::kernel::read_register: no register access")
            group = handle.group_id(0)
        size = storage_bytes(self.config)
        self.bo = bo = pyxrt.bo(self.xrt_device, size, pyxrt.bo.flags.normal, group)
        self.storage_address = int(bo.address())
        sync = pyxrt.xclBOSyncDirection

        def write(offset, data):
            bo.write(data, offset)
            bo.sync(sync.XCL_BO_SYNC_BO_TO_DEVICE, data.nbytes, offset)

        def read(offset, nbytes):
            bo.sync(sync.XCL_BO_SYNC_BO_FROM_DEVICE, nbytes, offset)
            return np.asarray(bo.read(nbytes, offset)).view(np.uint8).tobytes()

        super().__init__(_XrtMmio(handle), BufferStorage(size, write, read))
