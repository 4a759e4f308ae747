"""The accelerator shells' specification: the window DMA shell that makes an accelerator a
Vitis/XRT kernel (register map, copy flags, parameters, copy cycles). Plain Python, no Amaranth:
the gateware is :class:`rtl_gen.shell.window.WindowKernel`, the host side
:class:`sw.driver.XrtDevice`.

Vitis links a kernel to device memory only through AXI4 *master* ports (UG1393, "Kernel
Interface Requirements"), but the replay and learner accelerators keep their data in on-chip
memory behind an AXI4 *slave*. The window shell adds an AXI4 master ``m_axi_gmem`` and a copy
engine the host commands through the registers of :func:`window_kernel_register_map`: the host
allocates one buffer that mirrors the accelerator's memory window byte for byte, writes its
device address into ``MEM_PTR`` once, and moves blocks between the buffer and the accelerator
with DMA_OFFSET / DMA_BYTES / DMA_CTRL.
"""

from dataclasses import dataclass

from sw.config import check_int
from sw.regmap import Field, Info, Register, RegisterMap

__all__ = ["SHELL_FIELDS", "SHELL_VERSION", "HOST_READ_LATENCY", "DmaParams", "GMEM", "KERNEL_POINTER", "CONTROL_ADDR_WIDTH", "GMEM_WIDTHS", "DMA_FLAGS",
           "TO_ACCELERATOR", "TO_BUFFER", "DMA_PARAMS", "without_dma_params", "check_dma_params",
           "window_kernel_register_map", "kernel_register_map", "copy_cycles", "kernel_args"]

#: ``(register, field)`` of every accelerator's register map that its ``ap_ctrl_hs`` shell
#: drives itself, not the core: the error code of the last start, the refused-start flag and
#: the cycle count of the last run.
SHELL_FIELDS = (("STATUS", "ERROR"), ("STATUS", "START_REFUSED"), ("CYCLES", "CYCLES"))

#: Cycles from a host read of a core's memory (``host.re``) to its word on ``host.rdata``, in
#: every shipped core: the request registered in the core, the block RAM, a register at its
#: output (Vivado absorbs it into the RAM's output register), the region and sub-word
#: multiplexer into a register. The shells (:class:`~rtl_gen.shell.mm_slave.AxiMemorySlave`,
#: :class:`~rtl_gen.shell.dma.AxiDma`) take the latency from the core's port signature.
HOST_READ_LATENCY = 4

#: Name of the kernel's AXI4 master (the ``m_axi`` port Vitis connects to device memory).
GMEM = "m_axi_gmem"
#: The pointer argument (``MEM_PTR_LO``/``MEM_PTR_HI``; ``MEM_PTR`` in ``kernel.xml``).
KERNEL_POINTER = "MEM_PTR"
#: Control-port address width: a 4 KiB window, what Vitis HLS kernels decode.
CONTROL_ADDR_WIDTH = 12
GMEM_WIDTHS = (32, 64, 128, 256, 512)

#: DMA_STATUS bits: BUSY and DONE (state), then the error flags of the last copy.
DMA_FLAGS = {"BUSY": 0, "DONE": 1, "READ_ERROR": 2, "WRITE_ERROR": 3, "LOCKED": 4, "RANGE": 5}
#: DMA_CTRL.DIR values.
TO_ACCELERATOR, TO_BUFFER = 0, 1


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


#: The parameters a kernel configuration adds to its accelerator's (GAE, replay, learner).
DMA_PARAMS = ("gmem_data_width", "max_burst", "max_outstanding")

#: Version of the window shell's register layout, in its SHELL_VERSION register. 1: the first
#: layout (MEM_PTR, DMA_OFFSET, DMA_BYTES, DMA_CTRL, DMA_STATUS, DMA_CYCLES, DMA_WINDOW,
#: DMA_ALIGN, SHELL_VERSION), shared by every kernel since the GAE kernel moved onto it
#: (docs/changelog.md).
SHELL_VERSION = 1


def without_dma_params(config, base_cls):
    """The ``base_cls`` part of a kernel configuration: ``config`` without :data:`DMA_PARAMS`
    (what the accelerator, its register map and driver use)."""
    d = config.to_dict()
    for name in DMA_PARAMS:
        del d[name]
    return base_cls.from_dict(d)


def check_dma_params(*, gmem_data_width, max_burst, max_outstanding, word_bits):
    """Validate the shell's parameters (``ValueError`` naming the parameter).

    ``gmem_data_width``: one of :data:`GMEM_WIDTHS`, at least the accelerator's memory word
    (``word_bits``); ``max_burst`` 1..256; ``max_outstanding`` 1..32.
    """
    if not _is_int(gmem_data_width) or gmem_data_width not in GMEM_WIDTHS \
            or gmem_data_width < word_bits:
        raise ValueError(f"gmem_data_width must be one of {', '.join(map(str, GMEM_WIDTHS))} "
                         f"and at least the accelerator's memory word ({word_bits} bits), "
                         f"not {gmem_data_width!r}")
    check_int("max_burst", max_burst, 1, 256)
    check_int("max_outstanding", max_outstanding, 1, 32)


@dataclass(frozen=True)
class DmaParams:
    """The window shell's parameters, mixed into a kernel configuration before its
    accelerator's configuration: ``class ReplayKernelConfig(DmaParams, SumTreeConfig)``.

    Parameters
    ----------
    gmem_data_width : int
        Data width W of ``m_axi_gmem``: one of :data:`GMEM_WIDTHS`, at least the accelerator's
        memory word, ``W / 8`` dividing the window's bytes (Alveo DDR: 512). The copy rate is one memory word per cycle whatever W
        is: a wider W only means fewer, fuller beats.
    max_burst : int
        Most beats per AXI burst, 1..256 (bursts never cross 4 KiB either).
    max_outstanding : int
        Most bursts in flight per direction, 1..32.

    A subclass gives :attr:`window_word_bits` and :attr:`window_bytes` (the accelerator's memory
    window, from its spec) and the class attributes ``kernel_name`` (the register map's name),
    ``kernel_doc`` and ``accel_register_map`` (the accelerator's map function);
    :attr:`accel` is the accelerator's part of the configuration.
    """
    gmem_data_width: int = 512
    max_burst: int = 256
    max_outstanding: int = 4

    #: SHELL_VERSION of the register layout (:data:`SHELL_VERSION`).
    shell_version = SHELL_VERSION

    def __post_init__(self):
        super().__post_init__()
        check_dma_params(gmem_data_width=self.gmem_data_width, max_burst=self.max_burst,
                         max_outstanding=self.max_outstanding, word_bits=self.window_word_bits)
        if self.window_bytes % (self.gmem_data_width // 8):
            raise ValueError(f"gmem_data_width / 8 must divide the memory window "
                             f"({self.window_bytes} bytes), not {self.gmem_data_width!r}")

    @property
    def accel(self):
        """The accelerator's configuration: this one without the shell's parameters."""
        base = next(c for c in type(self).__mro__[1:]
                    if "__dataclass_fields__" in vars(c) and not issubclass(c, DmaParams))
        return without_dma_params(self, base)

    @property
    def pointer_align(self) -> int:
        """Alignment of MEM_PTR and DMA_OFFSET in bytes (``gmem_data_width / 8``)."""
        return self.gmem_data_width // 8

    @property
    def window_word_bits(self) -> int:
        """Bits of the accelerator's memory word (the granularity of a copy)."""
        raise NotImplementedError

    @property
    def window_bytes(self) -> int:
        """Bytes of the accelerator's memory window."""
        raise NotImplementedError


def window_kernel_register_map(name: str, base: RegisterMap, *, gmem_data_width: int,
                               doc: str = "") -> RegisterMap:
    """``base`` (an ap_ctrl_hs map) unchanged, then the shell's registers from ``base.span``.

    ``MEM_PTR_LO``/``MEM_PTR_HI``: the buffer's 64-bit device address (kernel argument 0; the
    bits below ``log2(gmem_data_width / 8)`` are not stored and read 0). ``DMA_OFFSET``: byte
    offset of a copy in the window and in the buffer, ``DMA_BYTES``: its length, ``DMA_CTRL``:
    START (a written 1 starts the copy; cleared when the copy is accepted) and DIR (0: buffer
    to accelerator, 1: accelerator to buffer), ``DMA_STATUS`` (:data:`DMA_FLAGS`),
    ``DMA_CYCLES`` (cycles of the last copy), ``DMA_WINDOW`` (bytes of the window),
    ``DMA_ALIGN`` (granularities of DMA_OFFSET and DMA_BYTES) and ``SHELL_VERSION``
    (:data:`SHELL_VERSION`). The last three are constants of the kernel configuration
    (:class:`DmaParams`; :meth:`~sw.regmap.RegisterMap.info_values` of it).
    """
    if not isinstance(base, RegisterMap) or base.protocol != "ap_ctrl_hs":
        raise ValueError(f"base must be an ap_ctrl_hs RegisterMap, not {base!r}")
    align = gmem_data_width // 8
    lo = (align - 1).bit_length()
    ptr_lo = (Field("MEM_PTR_LO", lo, 32 - lo, "rw",
                    doc=f"buffer address bits 31:{lo} (bits {lo - 1}:0 read 0: the buffer is "
                        f"{align}-byte aligned)"),) if lo else \
        (Field("MEM_PTR_LO", 0, 32, "rw", doc="buffer address bits 31:0"),)
    flag_doc = {
        "BUSY": "a copy is in progress",
        "DONE": "the last copy has ended (or was refused)",
        "READ_ERROR": "a read of the buffer was not answered OKAY",
        "WRITE_ERROR": "a write of the buffer was not answered OKAY",
        "LOCKED": "the accelerator was running: the copy was refused, or some words were not "
                  "moved",
        "RANGE": "DMA_OFFSET or DMA_BYTES misaligned (DMA_ALIGN) or past DMA_WINDOW: refused",
    }
    extra = (
        Register("MEM_PTR_LO", base.span, ptr_lo,
                 doc="device address of the buffer (low word)"),
        Register.scalar("MEM_PTR_HI", 32, "rw", doc="device address of the buffer (high word)"),
        Register.scalar("DMA_OFFSET", 32, "rw", doc="byte offset of the next copy in the "
                                                    "window and in the buffer"),
        Register.scalar("DMA_BYTES", 32, "rw", doc="bytes of the next copy"),
        Register("DMA_CTRL", None, (
            Field("START", 0, 1, "rw_sc", doc="write 1: start a copy (cleared when accepted; "
                                              "waits while a copy runs)"),
            Field("DIR", 1, 1, "rw", doc="0: buffer to accelerator, 1: accelerator to buffer")),
            doc="copy command"),
        Register("DMA_STATUS", None, tuple(
            Field(flag, bit, 1, "ro", doc=flag_doc[flag]) for flag, bit in DMA_FLAGS.items()),
            doc="copy state; the error flags describe the last copy (cleared at its start)"),
        Register.scalar("DMA_CYCLES", 32, "ro", doc="cycles of the last copy"),
        Register.scalar("DMA_WINDOW", 32, "ro", doc="bytes of the accelerator's memory window",
                        info=Info("window_bytes")),
        Register("DMA_ALIGN", None, (
            Field("OFFSET", 0, 16, "ro", doc="DMA_OFFSET must be a multiple of this "
                                             "(gmem_data_width / 8)",
                  info=Info("gmem_data_width", scale=8)),
            Field("BYTES", 16, 16, "ro", doc="DMA_BYTES must be a multiple of this (the "
                                             "memory word)",
                  info=Info("window_word_bits", scale=8))),
            doc="granularities of a copy"),
        Register.scalar("SHELL_VERSION", 32, "ro",
                        doc=f"version of this register layout ({SHELL_VERSION})",
                        info=Info("shell_version")),
    )
    return RegisterMap.with_ap_ctrl_hs(name, base.user_registers + extra, doc=doc)


def copy_cycles(nbytes: int, word_bytes: int, *, latency: int, to_device: bool = False,
                local_read_latency: int = HOST_READ_LATENCY) -> int:
    """DMA_CYCLES of an accepted copy of ``nbytes`` when device memory never stalls and
    answers ``latency`` cycles after a request: ``N + L + 7`` into the accelerator, ``N + L +
    6 + R`` out of it (``to_device``: its memory read with latency ``R =
    local_read_latency``); 0 words: 3.

    The 7: the command state (1), the DMA's burst planners (2: the first burst's length is
    registered in two stages before the first request or local read), the request register
    (1), the last word's local write or the W buffer (1 + R out of the accelerator, 2 into it),
    ``done`` (1)."""
    if not isinstance(local_read_latency, int) or local_read_latency < 1:
        raise ValueError(f"local_read_latency must be a positive integer, "
                         f"not {local_read_latency!r}")
    n = nbytes // word_bytes
    if not n:
        return 3
    return n + latency + (6 + local_read_latency if to_device else 7)


def kernel_register_map(config: DmaParams) -> RegisterMap:
    """A kernel's control map: the accelerator's registers (``accel_register_map`` of
    ``config.accel``) unchanged, then the window shell's
    (:func:`window_kernel_register_map`, layout :data:`SHELL_VERSION`)."""
    if not isinstance(config, DmaParams):
        raise TypeError(f"config must be a kernel configuration (DmaParams), not {config!r}")
    return window_kernel_register_map(config.kernel_name,
                                      config.accel_register_map(config.accel),
                                      gmem_data_width=config.gmem_data_width,
                                      doc=config.kernel_doc)


def kernel_args(config, regmap: RegisterMap, base: RegisterMap) -> dict:
    """What a Vitis ``kernel.xml`` needs beyond the ports and the register map, for a kernel
    of ``config`` (with ``gmem_data_width``, ``max_burst``, ``max_outstanding``) whose control
    map ``regmap`` extends the accelerator's ``base``.

    ``m_axi``: per master port, the burst and outstanding limits (IP bus parameters);
    ``pointers``: per pointer argument, its name, the port it addresses and its two register
    words; ``scalars``: the accelerator's argument registers (every field host-writable).
    """
    return {
        "m_axi": {GMEM: {"data_width": config.gmem_data_width, "max_burst": config.max_burst,
                         "outstanding": config.max_outstanding}},
        "pointers": [{"name": KERNEL_POINTER, "port": GMEM, "lo": f"{KERNEL_POINTER}_LO",
                      "hi": f"{KERNEL_POINTER}_HI",
                      "offset": regmap.offset(f"{KERNEL_POINTER}_LO")}],
        "scalars": [r.name for r in base.user_registers
                    if all(f.access == "rw" for f in r.fields)],
    }
