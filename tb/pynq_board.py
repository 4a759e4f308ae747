"""A ZCU106 for the real ``pynq`` package (PYNQ 4) without a board.

Only the lowest layer is stood in for: the physical address space the PS sees
(:class:`BoardSpace`: the accelerator's ``s_axi_control`` and ``s_axi_mem`` windows are a golden
device's control and memory ports, everything else -- the PS's clock and AXI width registers
PYNQ programs on download -- plain words with the ZCU106's PLL setting), reached either through
a ``pynq.Device`` subclass with PYNQ's ``REGISTER_RW`` capability (:class:`MemoryDevice`, what
``pynq.MMIO`` calls ``read_registers``/``write_registers`` on) or through the gRPC services a
PYNQ remote board runs (:class:`RemoteBoard`, on 127.x.y.z:7967, what ``PYNQ_REMOTE_DEVICES``
connects to). Everything above -- ``Overlay``, the ``.hwh`` parser, ``ip_dict``, ``DefaultIP``,
``RegisterMap``, ``MMIO``, ``Clocks``, ``RemoteDevice`` -- is PYNQ's own code. The overlay's
``.hwh`` is :func:`rtl_gen.vivado.hwh.zcu106_hwh` of a shipped accelerator.
"""

import random
import struct
import threading
from concurrent import futures
from pathlib import Path

__all__ = ["IOPLL_CTRL", "IOPLL_CTRL_RESET", "PL0_REF_CTRL", "FPD_AXI_FS", "BoardSpace",
           "write_overlay", "memory_device", "RemoteBoard"]

#: CRL_APB.IOPLL_CTRL and its ZCU106 value: FBDIV 90, DIV2 -> 33.333 MHz * 90 / 2 = 1499.985 MHz.
IOPLL_CTRL = 0xFF5E_0020
IOPLL_CTRL_RESET = (1 << 16) | (90 << 8)
#: CRL_APB.PL0_REF_CTRL (DIVISOR0 bits 13:8, DIVISOR1 bits 21:16, CLKACT bit 24).
PL0_REF_CTRL = 0xFF5E_00C0
#: FPD_SLCR.AXI_FS: the HPM0/HPM1 FPD data widths (bits 9:8, 11:10; 0/1/2 = 32/64/128).
FPD_AXI_FS = 0xFD61_5000


class BoardSpace:
    """The PS's physical address space: ``(base, size, device)`` windows of a golden device
    (control at ``ctrl``, memory at ``mem``), other addresses plain 32-bit words. ``writes``
    records the writes outside the windows (PS registers)."""

    def __init__(self, device, *, ctrl, ctrl_range, mem, mem_range):
        self.device = device
        self.ctrl, self.ctrl_range, self.mem, self.mem_range = ctrl, ctrl_range, mem, mem_range
        self.words = {IOPLL_CTRL: IOPLL_CTRL_RESET}
        self.writes = []
        self.lock = threading.Lock()

    def _window(self, addr, n):
        for base, size, kind in ((self.ctrl, self.ctrl_range, "ctrl"),
                                 (self.mem, self.mem_range, "mem")):
            if base <= addr < base + size:
                if addr + n > base + size:
                    raise ValueError(f"access {addr:#x}+{n} crosses the end of a window")
                return kind, addr - base
        return None, addr

    def read(self, addr: int, n: int) -> bytes:
        with self.lock:
            kind, off = self._window(addr, n)
            if kind == "mem":
                return bytes(self.device.memory.read(off, n))
            words = [self.device.control.read32(off + i) if kind == "ctrl"
                     else self.words.get(addr + i, 0) for i in range(0, n, 4)]
            return struct.pack(f"<{len(words)}I", *words)

    def write(self, addr: int, data: bytes):
        data = bytes(data)
        with self.lock:
            kind, off = self._window(addr, len(data))
            if kind == "mem":
                self.device.memory.write(off, data)
                return
            for i, (w,) in enumerate(struct.iter_unpack("<I", data)):
                if kind == "ctrl":
                    self.device.control.write32(off + 4 * i, w)
                else:
                    self.words[addr + 4 * i] = w
                    self.writes.append((addr + 4 * i, w))


def write_overlay(directory, module: str) -> tuple:
    """``<module>.bit`` (a header and a few bytes: nothing here configures a PL) and
    ``<module>.hwh`` (:func:`~rtl_gen.vivado.hwh.zcu106_hwh` of the shipped ``hdl/<module>``)
    in ``directory``; returns ``(bit path, Accelerator)``."""
    from rtl_gen.vivado.hwh import zcu106_hwh
    from rtl_gen.vivado.model import BOARDS, Accelerator

    acc = Accelerator.load(Path(__file__).resolve().parents[1] / "hdl" / module)
    directory = Path(directory)
    (directory / f"{module}.hwh").write_text(zcu106_hwh(acc))

    def field(tag, text):
        raw = text.encode() + b"\0"
        return bytes([tag]) + struct.pack(">h", len(raw)) + raw

    payload = b"\xff" * 16 + bytes.fromhex("aa995566") + b"\x20\x00\x00\x00" * 3
    bit = (struct.pack(">h", 9) + bytes(9) + struct.pack(">h", 1)
           + field(0x61, f"{module}_bd_wrapper;UserID=0XFFFFFFFF;Version=2024.1")
           + field(0x62, BOARDS["zcu106"].part.rsplit("-", 2)[0])
           + field(0x63, "2026/01/01") + field(0x64, "00:00:00")
           + b"\x65" + struct.pack(">i", len(payload)) + payload)
    path = directory / f"{module}.bit"
    path.write_bytes(bit)
    return path, acc


def memory_device(space: BoardSpace):
    """A ``pynq.Device`` over ``space`` (``REGISTER_RW``: ``pynq.MMIO`` reads and writes
    through ``read_registers``/``write_registers``), parsing overlays as PYNQ does for a
    board it reaches without XRT (the ``.hwh`` beside the ``.bit``), downloading by
    recording the bitstream."""
    import pynq
    from pynq.pl_server import remote_device

    class MemoryDevice(pynq.Device):
        def __init__(self):
            super().__init__("zcu106-memory")
            self.capabilities = {"REGISTER_RW": True}
            self.arch = "aarch64"                   # the ZCU106's Cortex-A53 (pynq.Clocks)
            self.name = "ZCU106"
            self.downloads = []

        def read_registers(self, address, length):
            return space.read(address, length)

        def write_registers(self, address, data):
            space.write(address, data)

        def get_bitfile_metadata(self, bitfile_name, partial=False):
            return remote_device._get_bitstream_handler(bitfile_name).get_parser(
                partial=partial)

        def download(self, bitstream, parser=None):
            self.downloads.append(bitstream.bitfile_name)
            super().post_download(bitstream, parser, self.name)

    return MemoryDevice()


class RemoteBoard:
    """The gRPC services of a PYNQ remote board (``pynq.remote``'s RemoteDevice and Mmio), on
    a random loopback address at PYNQ's port 7967, over a :class:`BoardSpace`. Files (the
    ``/proc`` and ``fpga_manager`` entries PYNQ reads, the bitstream it writes) are a dict;
    the PL answers only after a bitstream was written to ``fpga_manager``. Use as a context
    manager; ``address`` is what ``PYNQ_REMOTE_DEVICES`` names."""

    def __init__(self, space: BoardSpace):
        self.space = space
        self.files = {"/proc/version": b"Linux version 6.6.10-xilinx-v2024.1 (aarch64)",
                      "/proc/device-tree/chosen/pynq_board": b"ZCU106\0",
                      "/sys/class/fpga_manager/fpga0/state": b"operating",
                      "/sys/class/fpga_manager/fpga0/flags": b"0"}
        self.programmed = None
        self.mmios = {}
        self.calls = []

    def __enter__(self):
        import grpc
        from pynq.pl_server.remote_device import PYNQ_PORT
        from pynq.remote import mmio_pb2, mmio_pb2_grpc, remote_device_pb2, \
            remote_device_pb2_grpc

        board = self

        class Device(remote_device_pb2_grpc.RemoteDeviceServicer):
            def existsfile(self, request, context):
                board.calls.append(("exists", request.file_path))
                return remote_device_pb2.ExistsFileResponse(
                    exists=request.file_path in board.files)

            def readfile(self, request, context):
                board.calls.append(("read", request.file_path))
                yield remote_device_pb2.ReadFileResponse(data=board.files[request.file_path])

            def writefile(self, request_iterator, context):
                path, data = None, b""
                for chunk in request_iterator:
                    path, data = chunk.file_path, data + chunk.data
                board.calls.append(("write", path))
                board.files[path] = data
                if path == "/sys/class/fpga_manager/fpga0/firmware":
                    board.programmed = data.decode()
                return remote_device_pb2.WriteFileResponse()

            def set_bitstream_attrs(self, request, context):
                board.calls.append(("attrs", request.binfile_name))
                return remote_device_pb2.SetBitstreamAttrsResponse(status=True)

        class Mmio(mmio_pb2_grpc.MmioServicer):
            def get_mmio(self, request, context):
                key = f"mmio{len(board.mmios)}"
                board.mmios[key] = (request.base_addr, request.length)
                return mmio_pb2.GetMmioResponse(status=True, mmio_id=key)

            def _check(self, mmio_id, offset, n):
                base, length = board.mmios[mmio_id]
                addr = base + offset
                if offset + n > length:
                    return None, f"offset {offset:#x} is outside the {length}-byte mapping"
                in_pl = board.space._window(addr, n)[0] is not None
                if in_pl and board.programmed is None:
                    return None, "the PL is not configured"
                return addr, None

            def read(self, request, context):
                addr, err = self._check(request.mmio_id, request.offset, 4)
                if err:
                    return mmio_pb2.ReadResponse(status=False, msg=err)
                word = int.from_bytes(board.space.read(addr, 4), "little")
                return mmio_pb2.ReadResponse(status=True, data=word)

            def write(self, request, context):
                addr, err = self._check(request.mmio_id, request.offset, len(request.data))
                if err:
                    return mmio_pb2.WriteResponse(status=False, msg=err)
                board.space.write(addr, request.data)
                return mmio_pb2.WriteResponse(status=True)

        for _ in range(20):
            address = f"127.{random.randrange(1, 255)}.{random.randrange(256)}." \
                      f"{random.randrange(1, 255)}"
            server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
            remote_device_pb2_grpc.add_RemoteDeviceServicer_to_server(Device(), server)
            mmio_pb2_grpc.add_MmioServicer_to_server(Mmio(), server)
            try:
                if server.add_insecure_port(f"{address}:{PYNQ_PORT}"):
                    break
            except RuntimeError:
                pass
        else:
            raise RuntimeError(f"no free loopback address for port {PYNQ_PORT}")
        self.server, self.address = server, address
        server.start()
        return self

    def __exit__(self, *exc):
        self.server.stop(grace=None).wait()
