"""Memory windows: the byte layout of an accelerator's ``s_axi_mem`` window, one description for
the register files' Markdown table, JSON and C macros.

A :class:`MemoryWindow` is the list of :class:`MemoryRegion` an accelerator's memory port
decodes: each region an array of memory *words* at a byte offset, each word ``lanes`` elements
of ``lane_bits`` bits (lane p at bits ``p * lane_bits ..``, little end first), padded to
``word_bytes`` in host address space. A block builds its window from the same layout functions
its driver packs with (:func:`sw.gae.layout.memory_window`, :func:`sw.replay.spec.memory_window`,
:func:`sw.learner.layout.memory_window`, :func:`sw.trainer.layout.memory_window`;
:meth:`sw.registry.Block.memory_window`), so no offset is kept twice. A Vitis kernel has no
``s_axi_mem``: the buffer whose address is in ``MEM_PTR`` mirrors its accelerator's window byte
for byte (:meth:`MemoryWindow.in_kernel_buffer`). The fused trainer has no window of its own
either: its AXI4 master reads and writes the host's storage at ``BASE_HI:BASE_LO``
(port ``"BASE"``).

:func:`sw.regfiles.register_files` appends :meth:`MemoryWindow.to_markdown` to
``<module>_regs.md``, :meth:`MemoryWindow.to_dict` to ``<module>_regs.json`` (key
``"memory"``) and :meth:`MemoryWindow.c_macros` to ``<module>_regs.h``. Plain Python, no
Amaranth.
"""

import re
from dataclasses import dataclass, field, replace

__all__ = ["LaneField", "MemoryRegion", "MemoryWindow", "ACCESS", "PORTS"]

#: What the host does with a region (the window is RAM: the core does not refuse writes).
ACCESS = {"rw": "the host writes it (inputs) and may read it back",
          "ro": "the core writes it (results); the host reads it"}

#: Where the host finds a window: port -> how the Markdown and the C header name it.
PORTS = {
    "s_axi_mem": ("`s_axi_mem` window", "the s_axi_mem window"),
    "MEM_PTR": ("`MEM_PTR` buffer (a copy of the accelerator's window)",
                "the buffer at MEM_PTR (a copy of the accelerator's window)"),
    "BASE": ("storage at `BASE_HI:BASE_LO` in host memory (the core's AXI4 master reads and "
             "writes it)",
             "the storage at BASE_HI:BASE_LO in host memory (the core's AXI4 master reads and "
             "writes it)"),
}

_C_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _check_int(name, value, lo=0):
    if not isinstance(value, int) or isinstance(value, bool) or value < lo:
        raise ValueError(f"{name} must be an integer >= {lo}, not {value!r}")


def _check_name(what, name):
    if not isinstance(name, str) or not _C_NAME.fullmatch(name):
        raise ValueError(f"{what} must be a C identifier, not {name!r}")


@dataclass(frozen=True)
class LaneField:
    """A bit field of the lanes of a region whose elements pack several values: bits
    ``lsb .. lsb + width - 1`` of the lane, ``frac`` fraction bits (None: an integer or a
    flag). With ``lane`` None the field is in every lane (the learner's ``samples``: one
    sample a lane); otherwise it is in lanes ``lane .. lane + lanes - 1`` of a word only, one
    value a lane (the trainer's records: ``obs`` in lanes 0..n-1, ``reward`` in lane 2n)."""
    name: str
    lsb: int
    width: int
    signed: bool = False
    frac: int | None = None
    doc: str = ""
    lane: int | None = None
    lanes: int = 1

    def __post_init__(self):
        _check_name("field name", self.name)
        _check_int("lsb", self.lsb)
        _check_int("width", self.width, 1)
        if self.frac is not None:
            _check_int("frac", self.frac)
        if self.lane is not None:
            _check_int("lane", self.lane)
        _check_int("lanes", self.lanes, 1)
        if self.lane is None and self.lanes != 1:
            raise ValueError(f"field {self.name!r}: lanes = {self.lanes} needs a first lane")

    @property
    def mask(self) -> int:
        return ((1 << self.width) - 1) << self.lsb

    def to_dict(self) -> dict:
        out = {"name": self.name, "lsb": self.lsb, "width": self.width,
               "signed": self.signed, "frac": self.frac, "doc": self.doc}
        if self.lane is not None:
            out.update(lane=self.lane, lanes=self.lanes)
        return out


@dataclass(frozen=True)
class MemoryRegion:
    """One region of a memory window.

    Members
    -------
    name : str
        A C identifier (upper-cased in the macros).
    offset : int
        Byte offset of word 0 in the window.
    bytes : int
        Bytes of address space the region spans (the next region starts there or later).
    words : int
        Memory words the region holds (word ``a`` at ``offset + a * word_bytes``).
    word_bytes : int
        Bytes one word takes in the window (its lanes, then zero padding).
    lanes, lane_bits : int
        Elements per word and bits per element.
    signed : bool
        Elements are two's complement.
    frac : int or None
        Fraction bits of the elements' fixed-point format (``value = raw * 2**-frac``); None
        when the elements are codes or packed fields (the doc says how to read them).
    access : str
        A key of :data:`ACCESS`.
    doc : str
        What the elements are and which word holds what.
    fields : tuple of LaneField
        Bit fields of a lane that packs several values; empty otherwise.
    """
    name: str
    offset: int
    bytes: int
    words: int
    word_bytes: int
    lanes: int
    lane_bits: int
    signed: bool
    frac: int | None
    access: str
    doc: str = ""
    fields: tuple = field(default=())

    def __post_init__(self):
        _check_name("region name", self.name)
        for name in ("offset", "bytes", "words", "word_bytes", "lanes", "lane_bits"):
            _check_int(name, getattr(self, name), 0 if name == "offset" else 1)
        if self.lanes * self.lane_bits > 8 * self.word_bytes:
            raise ValueError(f"region {self.name!r}: {self.lanes} lanes of {self.lane_bits} "
                             f"bits do not fit a word of {self.word_bytes} bytes")
        if self.words * self.word_bytes > self.bytes:
            raise ValueError(f"region {self.name!r}: {self.words} words of {self.word_bytes} "
                             f"bytes do not fit its {self.bytes} bytes")
        if self.access not in ACCESS:
            raise ValueError(f"access must be one of {', '.join(ACCESS)}, not {self.access!r}")
        if self.frac is not None:
            _check_int("frac", self.frac)
        for f in self.fields:
            if not isinstance(f, LaneField) or f.lsb + f.width > self.lane_bits:
                raise ValueError(f"region {self.name!r}: fields must be LaneFields inside its "
                                 f"{self.lane_bits}-bit lanes, not {f!r}")
            if f.lane is not None and f.lane + f.lanes > self.lanes:
                raise ValueError(f"region {self.name!r}: field {f.name!r} in lanes {f.lane} .. "
                                 f"{f.lane + f.lanes - 1} is outside its {self.lanes} lanes")

    @property
    def end(self) -> int:
        return self.offset + self.bytes

    def word_offset(self, word: int) -> int:
        """Byte offset of memory word ``word`` in the window."""
        return self.offset + word * self.word_bytes

    def to_dict(self) -> dict:
        return {"name": self.name, "offset": self.offset, "bytes": self.bytes,
                "words": self.words, "word_bytes": self.word_bytes, "lanes": self.lanes,
                "lane_bits": self.lane_bits, "signed": self.signed, "frac": self.frac,
                "access": self.access, "doc": self.doc,
                "fields": [f.to_dict() for f in self.fields]}


@dataclass(frozen=True)
class MemoryWindow:
    """The regions of an accelerator's memory window, in address order.

    Members
    -------
    regions : tuple of MemoryRegion
    addr_bits : int
        Byte address bits of the memory port.
    port : str
        Where the host finds the window (a key of :data:`PORTS`): ``"s_axi_mem"`` (an
        accelerator's AXI4 slave), ``"MEM_PTR"`` (a kernel's buffer, :meth:`in_kernel_buffer`)
        or ``"BASE"`` (host memory that the core's AXI4 master reads and writes, from the
        address in ``BASE_HI:BASE_LO``: the fused trainer's storage).
    doc : str
        How a word's lanes and the regions are laid out.
    span : int or None
        Bytes the host addresses, if more than up to the end of the last region (a kernel's
        buffer, ``DMA_WINDOW``; the trainer's storage, :func:`sw.trainer.layout.storage_bytes`).
    """
    regions: tuple
    addr_bits: int
    port: str = "s_axi_mem"
    doc: str = ""
    span: int | None = None

    def __post_init__(self):
        if not self.regions or not all(isinstance(r, MemoryRegion) for r in self.regions):
            raise ValueError(f"regions must be a non-empty sequence of MemoryRegion, not "
                             f"{self.regions!r}")
        _check_int("addr_bits", self.addr_bits, 1)
        if self.port not in PORTS:
            raise ValueError(f"port must be one of {', '.join(PORTS)}, not {self.port!r}")
        names = [r.name.upper() for r in self.regions]
        if len(set(names)) != len(names):
            raise ValueError(f"region names must differ in upper case: {names}")
        for a, b in zip(self.regions, self.regions[1:]):
            if b.offset < a.end:
                raise ValueError(f"region {b.name!r} at {b.offset:#x} overlaps {a.name!r} "
                                 f"(up to {a.end:#x})")
        if self.span is not None and (not isinstance(self.span, int)
                                      or self.span < self.regions[-1].end):
            raise ValueError(f"span must be an integer >= {self.regions[-1].end} (the end of "
                             f"the last region), not {self.span!r}")
        if self.bytes > 1 << self.addr_bits:
            raise ValueError(f"the window's {self.bytes} bytes need more than addr_bits = "
                             f"{self.addr_bits}")

    def __getitem__(self, name: str) -> MemoryRegion:
        for r in self.regions:
            if r.name == name:
                return r
        raise KeyError(f"memory window has no region {name!r}")

    def __iter__(self):
        return iter(self.regions)

    @property
    def bytes(self) -> int:
        """Bytes the host addresses: :attr:`span`, by default up to the end of the last
        region."""
        return self.regions[-1].end if self.span is None else self.span

    def in_kernel_buffer(self, nbytes: int) -> "MemoryWindow":
        """This window as a Vitis kernel's host sees it: the same bytes in the buffer at
        ``MEM_PTR``, ``nbytes`` long (the kernel's ``DMA_WINDOW``), moved to and from the
        accelerator by the window shell's copies."""
        return replace(self, port="MEM_PTR", span=nbytes, doc=(
            f"{self.doc} A kernel has no s_axi_mem: the buffer whose device address is in "
            f"MEM_PTR mirrors this window byte for byte, and DMA_OFFSET / DMA_BYTES / DMA_CTRL "
            f"copy blocks between it and the accelerator (docs/shell.md).").strip())

    # -- exports --------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {"port": self.port, "bytes": self.bytes, "addr_bits": self.addr_bits,
                "doc": self.doc, "access": dict(ACCESS),
                "regions": [r.to_dict() for r in self.regions]}

    def c_macros(self, prefix: str) -> str:
        """C macros, ``PREFIX_MEM_BYTES``, ``PREFIX_MEM_ADDR_BITS`` and per region
        ``PREFIX_MEM_<REGION>_{OFFSET,BYTES,WORDS,WORD_BYTES,LANES,LANE_BITS,SIGNED,FRAC}``
        (``FRAC`` only for fixed-point elements), per lane field
        ``PREFIX_MEM_<REGION>_<FIELD>_{SHIFT,WIDTH,MASK,SIGNED,FRAC}`` (and ``_LANE``, its
        first lane, ``_LANES``, how many, for a field in some lanes only): text for inside a
        header's include guard (:func:`sw.regfiles.to_c_header`'s ``extra``)."""
        _check_name("prefix", prefix)
        base = f"{prefix}_MEM".upper()
        where = PORTS[self.port][1]
        lines = [(None, f"Memory: byte offsets in {where}. {self.doc}"),
                 (f"{base}_BYTES", f"0x{self.bytes:x}u"),
                 (f"{base}_ADDR_BITS", str(self.addr_bits))]
        for r in self.regions:
            m = f"{base}_{r.name.upper()}"
            lines += [(None, f"{r.name} ({r.access}): {r.doc}"),
                      (f"{m}_OFFSET", f"0x{r.offset:x}u"), (f"{m}_BYTES", f"0x{r.bytes:x}u"),
                      (f"{m}_WORDS", f"{r.words}u"), (f"{m}_WORD_BYTES", f"{r.word_bytes}u"),
                      (f"{m}_LANES", f"{r.lanes}u"), (f"{m}_LANE_BITS", f"{r.lane_bits}u"),
                      (f"{m}_SIGNED", str(int(r.signed)))]
            if r.frac is not None:
                lines.append((f"{m}_FRAC", str(r.frac)))
            for f in r.fields:
                fm = f"{m}_{f.name.upper()}"
                if f.lane is not None:
                    lines += [(f"{fm}_LANE", f"{f.lane}u"), (f"{fm}_LANES", f"{f.lanes}u")]
                lines += [(f"{fm}_SHIFT", str(f.lsb)), (f"{fm}_WIDTH", str(f.width)),
                          (f"{fm}_MASK", f"0x{f.mask:x}ull"), (f"{fm}_SIGNED", str(int(f.signed)))]
                if f.frac is not None:
                    lines.append((f"{fm}_FRAC", str(f.frac)))
        width = max(len(name) for name, _ in lines if name)
        out = []
        for name, value in lines:
            if name is None:
                out += ["", f"/* {_c_comment(value)} */"]
            else:
                out.append(f"#define {name:<{width}} {value}")
        return "\n".join(out).lstrip("\n") + "\n"

    def to_markdown(self) -> str:
        """A heading, the layout and a table of the regions (and one of lane fields, if
        any)."""
        def cell(text):
            return str(text).replace("|", "\\|").replace("\n", " ")

        ow = max(2, len(f"{self.bytes - 1:x}"))
        where = PORTS[self.port][0]
        out = [f"Memory: the {where}, {self.bytes:,} bytes ({self.addr_bits} address bits). "
               f"{cell(self.doc)}", "",
               "| Offset | Region | Bytes | Words | Word bytes | Lanes × bits | Signed | Frac "
               "| Access | Description |",
               "|-------:|--------|------:|------:|-----------:|-------------:|--------|-----:"
               "|--------|-------------|"]
        for r in self.regions:
            out.append(f"| 0x{r.offset:0{ow}x} | {r.name} | {r.bytes:#x} | {r.words:,} | "
                       f"{r.word_bytes} | {r.lanes} × {r.lane_bits} | "
                       f"{'yes' if r.signed else 'no'} | "
                       f"{'—' if r.frac is None else r.frac} | {r.access} | {cell(r.doc)} |")
        packed = [(r, f) for r in self.regions for f in r.fields]
        if packed:
            # a column of lanes only where some field is in some lanes only
            some = any(f.lane is not None for _, f in packed)
            out += ["", "| Region |" + (" Lanes |" if some else "")
                    + " Lane bits | Field | Signed | Frac | Description |",
                    "|--------|" + ("------:|" if some else "")
                    + "----------:|-------|--------|-----:|-------------|"]
            for r, f in packed:
                bits = f"{f.lsb + f.width - 1}:{f.lsb}" if f.width > 1 else str(f.lsb)
                lanes = ("all" if f.lane is None else str(f.lane) if f.lanes == 1
                         else f"{f.lane}..{f.lane + f.lanes - 1}")
                out.append(f"| {r.name} |" + (f" {lanes} |" if some else "")
                           + f" {bits} | {f.name} | {'yes' if f.signed else 'no'} | "
                           f"{'—' if f.frac is None else f.frac} | {cell(f.doc)} |")
        out += ["", "Access: " + "; ".join(f"`{a}` {d}" for a, d in ACCESS.items()) + ".", ""]
        return "\n".join(out)


def _c_comment(text):
    return str(text).replace("*/", "* /").replace("\n", " ")
