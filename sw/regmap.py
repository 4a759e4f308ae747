"""Register maps: one description feeds the AXI4-Lite CSR block, the C header, JSON and docs.

A :class:`RegisterMap` is a list of 32-bit :class:`Register` words at byte offsets, each made of
:class:`Field` bit ranges with an access type. :class:`~rtl_gen.shell.lite_csr.AxiLiteCsr` builds
the hardware from it, the drivers' :class:`~sw.driver.regmap.RegisterMapAccess` packs and unpacks
fields with :meth:`Field.get`/:meth:`Field.put` (:meth:`Register.pack`/:meth:`Register.unpack`
for whole words); :meth:`RegisterMap.to_json` writes the machine-readable map (read back by
:meth:`RegisterMap.from_dict`), :mod:`sw.regfiles` the C constants and the docs tables
(:func:`~sw.regfiles.register_files`, the files shipped beside the Verilog) and :mod:`sw.rdl`
SystemRDL, all deterministic text. This module imports no Amaranth: it is the host's
description of the hardware as much as the generator's.

Constant registers that describe the hardware (``HW_*``) carry an :class:`Info` per field: the
configuration parameter the field holds. :meth:`RegisterMap.info_values` packs a configuration
into their words (what the gateware drives and the golden devices answer) and
:meth:`RegisterMap.decode_info` unpacks words read from a device into parameters (what a driver
checks or builds its configuration from), so no block encodes those bits by hand. In a block's
map their fields' reset value is 0 (nothing in the CSR block is reset to it); the exports
(:func:`sw.regfiles.register_files`, SystemRDL, IP-XACT) take
:meth:`RegisterMap.with_constant_resets`, whose reset values are the words they read, so that a
register model built from an export expects after reset what the hardware answers.

Access types (the host is the AXI4-Lite master, the core is the logic behind the CSR block):

``"rw"``
    Read/write. The host writes it (byte lanes per WSTRB), the core sees the value.
``"wo"``
    Write-only: like ``"rw"`` but reads return 0.
``"ro"``
    Read-only: reads return the core's input; host writes are ignored.
``"rw_sc"``
    Read/write, set by the host, cleared by hardware: a written 1 sets a bit, a written 0 does
    nothing, the core clears it (``AP_START``: cleared on the ``ap_ready`` handshake).
``"ro_cor"``
    Read-only, clear on read: the core sets bits with one-cycle pulses, they stay set until the
    host reads the register (``AP_DONE``, ``AP_READY``). A set and a read in the same cycle leave
    the bit set, so no event is lost.
``"rw_tow"``
    Read, toggle on write: the core sets bits with pulses, a written 1 toggles a bit (so writing
    back the value read clears exactly the bits seen), a written 0 does nothing. A set in the same
    cycle as a write wins (``IP_ISR``).

Reserved bits (not covered by a field) read as 0 and ignore writes.

The Vitis HLS ``ap_ctrl_hs`` layout (:meth:`RegisterMap.with_ap_ctrl_hs`), as in the
``*_control_s_axi.v`` that Vitis HLS 2021.1 and later generate (UG1399, "S_AXILITE Control
Register Map")::

    0x00 CTRL    bit 0 AP_START     rw_sc   host writes 1 to start; cleared when the core pulses
                                            ap_ready, unless AUTO_RESTART is set (then it stays 1)
                 bit 1 AP_DONE      ro_cor  set by an ap_done pulse, cleared by reading CTRL
                 bit 2 AP_IDLE      ro      ap_idle, registered (one cycle late)
                 bit 3 AP_READY     ro_cor  set by an ap_ready pulse while AUTO_RESTART is 0,
                                            cleared by reading CTRL
                 bit 7 AUTO_RESTART rw      keep AP_START set: the core restarts after each run
    0x04 GIER    bit 0 ENABLE       rw      global interrupt enable
    0x08 IP_IER  bit 0 AP_DONE      rw      enable the ap_done interrupt
                 bit 1 AP_READY     rw      enable the ap_ready interrupt
    0x0C IP_ISR  bit 0 AP_DONE      rw_tow  set by ap_done while IP_IER.AP_DONE; write 1 to clear
                 bit 1 AP_READY     rw_tow  set by ap_ready while IP_IER.AP_READY
    0x10...      the kernel's arguments and status registers

    interrupt = GIER.ENABLE & (IP_ISR.AP_DONE | IP_ISR.AP_READY)

Details that follow Vitis exactly: writing 0 to AP_START does not stop a run; a write to CTRL
with WSTRB[0] low changes nothing; while auto-restart is active (AUTO_RESTART set, or cleared but
the core not yet idle) AP_DONE is not set by each run's ap_done but once, when the core goes idle
after AUTO_RESTART was cleared; IP_ISR bits are set by the raw ap_done/ap_ready pulses; the
interrupt is ``GIER & |ISR`` (an ISR bit set before its IER bit was cleared still interrupts
until the host clears it). Differences from Vitis: arguments are packed at consecutive words
(Vitis leaves a reserved word after each scalar argument); CTRL bit 9 (a read-only copy of the
interrupt line, added in later Vitis versions) is not provided; unmapped addresses answer SLVERR
(Vitis answers OKAY with data 0); addresses are decoded per word, so a byte address inside a
register selects it (Vitis compares the whole address); AW and W are accepted in either order
(Vitis takes W only after AW), see :class:`~rtl_gen.shell.lite_csr.AxiLiteCsr` for the timing.
"""

import json
import keyword
import re
from dataclasses import dataclass, replace
from dataclasses import field as dc_field

__all__ = ["ACCESS_TYPES", "Info", "Field", "Register", "RegisterMap", "AP_CTRL_HS_REGISTERS"]

#: Access type -> one-line description (used in the generated docs and headers).
ACCESS_TYPES = {
    "rw": "read/write",
    "wo": "write-only (reads return 0)",
    "ro": "read-only, driven by the core",
    "rw_sc": "write 1 to set, cleared by hardware",
    "ro_cor": "read-only, set by the core, clear on read",
    "rw_tow": "set by the core, write 1 to toggle (clear)",
}

_C_KEYWORDS = frozenset("""
    auto break case char const continue default do double else enum extern float for goto if
    inline int long register restrict return short signed sizeof static struct switch typedef
    union unsigned void volatile while _Bool _Complex _Imaginary _Alignas _Alignof _Atomic
    _Generic _Noreturn _Static_assert _Thread_local bool true false
""".split())
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

DATA_WIDTH = 32
MAX_OFFSET = (1 << 32) - 4


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _check_name(what, name):
    if not isinstance(name, str) or not _IDENT.match(name) or name in _C_KEYWORDS \
            or keyword.iskeyword(name):
        raise ValueError(f"{what} must be a C identifier (and not a keyword), not {name!r}")


@dataclass(frozen=True)
class Info:
    """The configuration parameter a constant read-only field holds (``HW_*`` registers).

    Parameters
    ----------
    param : str
        Attribute path into the configuration, dots between names: ``"n_pe"``,
        ``"pe.data_width"``; an integer part indexes a sequence (``"sizes.2"``).
    scale : int
        The field holds ``value // scale`` (``value`` must be a multiple): e.g. 8 for a bus
        width stored in bytes.
    choices : tuple
        The field holds the index of ``value`` in ``choices`` (a bool parameter uses
        ``(False, True)``; an enumeration its names).
    """
    param: str
    scale: int = 1
    choices: tuple = ()

    def __post_init__(self):
        if not isinstance(self.param, str) or not all(
                p.isidentifier() or p.isdigit() for p in self.param.split(".")):
            raise ValueError(f"param must be a dotted attribute path, not {self.param!r}")
        if not _is_int(self.scale) or self.scale < 1:
            raise ValueError(f"scale must be a positive integer, not {self.scale!r}")
        object.__setattr__(self, "choices", tuple(self.choices))

    def value(self, config):
        """The parameter's value in ``config``."""
        v = config
        for part in self.param.split("."):
            v = v[int(part)] if part.isdigit() else getattr(v, part)
        return v

    def encode(self, config) -> int:
        """The field value of ``config``."""
        v = self.value(config)
        if self.choices:
            return self.choices.index(v)
        v = int(v)
        if v % self.scale:
            raise ValueError(f"{self.param} = {v} is not a multiple of {self.scale}")
        return v // self.scale

    def to_dict(self) -> dict:
        """``{"param": ..., "scale": ..., "choices": [...]}`` (JSON values)."""
        return {"param": self.param, "scale": self.scale, "choices": list(self.choices)}

    @classmethod
    def from_dict(cls, d: dict) -> "Info":
        return cls(d["param"], d.get("scale", 1), tuple(d.get("choices", ())))

    def decode(self, raw: int):
        """The parameter value a field value stands for (``ValueError`` for an index past
        ``choices``)."""
        if self.choices:
            if not 0 <= raw < len(self.choices):
                raise ValueError(f"{self.param}: field value {raw} is not an index of "
                                 f"{self.choices}")
            return self.choices[raw]
        return raw * self.scale


@dataclass(frozen=True)
class Field:
    """A bit range of a register.

    Parameters
    ----------
    name : str
        C identifier, unique within its register (case-insensitively).
    lsb : int
        Lowest bit, 0..31.
    width : int
        Bits, 1..32; ``lsb + width`` must not exceed 32.
    access : str
        One of :data:`ACCESS_TYPES`.
    reset : int
        Value after reset, 0..2**width-1. 0 for ``"ro"`` (the core drives those bits), except
        for a constant field (``info``), which may hold the value it reads
        (:meth:`RegisterMap.with_constant_resets`).
    doc : str
        One line for the generated documentation.
    info : Info or None
        For a constant read-only field (access ``"ro"``) that describes the hardware: the
        configuration parameter it holds. Not compared; written to the JSON (:meth:`to_dict`).
    """
    name: str
    lsb: int
    width: int
    access: str
    reset: int = 0
    doc: str = ""
    info: Info | None = dc_field(default=None, compare=False, kw_only=True)

    def __post_init__(self):
        _check_name("field name", self.name)
        where = f"field {self.name!r}"
        if not _is_int(self.lsb) or not 0 <= self.lsb < DATA_WIDTH:
            raise ValueError(f"{where}: lsb must be an integer in 0..{DATA_WIDTH - 1}, "
                             f"not {self.lsb!r}")
        if not _is_int(self.width) or self.width < 1:
            raise ValueError(f"{where}: width must be a positive integer, not {self.width!r}")
        if self.lsb + self.width > DATA_WIDTH:
            raise ValueError(f"{where}: bits {self.lsb + self.width - 1}:{self.lsb} do not fit "
                             f"in {DATA_WIDTH} bits")
        if self.access not in ACCESS_TYPES:
            raise ValueError(f"{where}: access must be one of {', '.join(ACCESS_TYPES)}, "
                             f"not {self.access!r}")
        if not _is_int(self.reset) or not 0 <= self.reset < (1 << self.width):
            raise ValueError(f"{where}: reset must be an integer in 0..{(1 << self.width) - 1}, "
                             f"not {self.reset!r}")
        if self.access == "ro" and self.reset != 0 and self.info is None:
            raise ValueError(f"{where}: reset of a read-only ('ro') field must be 0 (the core "
                             f"drives it; a constant field with an info may hold its value), "
                             f"not {self.reset!r}")
        if not isinstance(self.doc, str):
            raise TypeError(f"{where}: doc must be a string, not {self.doc!r}")
        if self.info is not None and (not isinstance(self.info, Info) or self.access != "ro"):
            raise ValueError(f"{where}: info must be an Info on a read-only ('ro') field, "
                             f"not {self.info!r} on an {self.access!r} field")

    @property
    def msb(self) -> int:
        return self.lsb + self.width - 1

    @property
    def mask(self) -> int:
        """The field's bits within the 32-bit register word."""
        return ((1 << self.width) - 1) << self.lsb

    @property
    def bits(self) -> str:
        """``"7"`` or ``"15:8"``."""
        return str(self.lsb) if self.width == 1 else f"{self.msb}:{self.lsb}"

    @property
    def readable(self) -> bool:
        """Reads return the field's value (all access types but ``"wo"``)."""
        return self.access != "wo"

    @property
    def host_writable(self) -> bool:
        """Host writes change the field."""
        return self.access in ("rw", "wo", "rw_sc", "rw_tow")

    def get(self, word: int) -> int:
        """The field's value in a register word."""
        return (word >> self.lsb) & ((1 << self.width) - 1)

    def put(self, word: int, value: int) -> int:
        """``word`` with the field replaced by ``value`` (which must fit)."""
        if not _is_int(value) or not 0 <= value < (1 << self.width):
            raise ValueError(f"field {self.name!r}: value must be an integer in "
                             f"0..{(1 << self.width) - 1}, not {value!r}")
        return (word & ~self.mask) | (value << self.lsb)

    def to_dict(self) -> dict:
        out = {"name": self.name, "lsb": self.lsb, "width": self.width, "access": self.access,
               "reset": self.reset, "doc": self.doc, "mask": self.mask}
        if self.info is not None:
            out["info"] = self.info.to_dict()
        return out


@dataclass(frozen=True)
class Register:
    """A 32-bit register at a byte offset, made of non-overlapping fields.

    Parameters
    ----------
    name : str
        C identifier, unique within its map (case-insensitively).
    offset : int or None
        Byte offset, a multiple of 4; ``None`` lets :class:`RegisterMap` place it at the word
        after the previous register.
    fields : sequence of Field
        At least one; kept in the given order.
    doc : str
        One line for the generated documentation.

    A field named like its register is a *whole-register* field: its hardware port and its C
    macros drop the field name (see :meth:`path`). :meth:`scalar` builds such a register.
    """
    name: str
    offset: int | None
    fields: tuple
    doc: str = ""

    def __post_init__(self):
        _check_name("register name", self.name)
        where = f"register {self.name!r}"
        if self.offset is not None and (not _is_int(self.offset) or self.offset % 4
                                        or not 0 <= self.offset <= MAX_OFFSET):
            off = f"{self.offset:#x}" if _is_int(self.offset) else repr(self.offset)
            raise ValueError(f"{where}: offset must be a multiple of 4 in 0..{MAX_OFFSET:#x}, "
                             f"not {off}")
        if isinstance(self.fields, Field) or not hasattr(self.fields, "__iter__"):
            raise TypeError(f"{where}: fields must be a sequence of Field, not {self.fields!r}")
        fields = tuple(self.fields)
        object.__setattr__(self, "fields", fields)
        if not fields:
            raise ValueError(f"{where}: needs at least one field")
        seen = {}
        for f in fields:
            if not isinstance(f, Field):
                raise TypeError(f"{where}: fields must be Field objects, not {f!r}")
            if f.name.lower() in seen:
                raise ValueError(f"{where}: field name {f.name!r} is used twice "
                                 f"(names are compared case-insensitively)")
            seen[f.name.lower()] = f
        for i, a in enumerate(fields):
            for b in fields[:i]:
                if a.mask & b.mask:
                    raise ValueError(f"{where}: field {a.name!r} (bits {a.bits}) overlaps "
                                     f"field {b.name!r} (bits {b.bits})")
        if not isinstance(self.doc, str):
            raise TypeError(f"{where}: doc must be a string, not {self.doc!r}")

    @classmethod
    def scalar(cls, name, width=DATA_WIDTH, access="rw", *, offset=None, reset=0, doc="",
               info=None):
        """A register holding one field of the same name in bits ``width-1..0``."""
        return cls(name, offset, (Field(name, 0, width, access, reset, doc, info=info),), doc)

    @property
    def is_info(self) -> bool:
        """Every field is a constant describing the hardware (has an :class:`Info`)."""
        return all(f.info is not None for f in self.fields)

    def pack(self, values: dict) -> int:
        """The register word holding ``values`` (field name -> value; missing fields 0)."""
        unknown = set(values) - {f.name for f in self.fields}
        if unknown:
            raise KeyError(f"register {self.name!r} has no field(s) {', '.join(sorted(unknown))}")
        word = 0
        for f in self.fields:
            if f.name in values:
                word = f.put(word, values[f.name])
        return word

    def unpack(self, word: int) -> dict:
        """Field name -> value of a register word."""
        return {f.name: f.get(word) for f in self.fields}

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"register {self.name!r} has no field {name!r}")

    def path(self, f: Field) -> str:
        """``REG_FIELD``, or ``REG`` for a whole-register field (named like the register)."""
        return self.name if f.name == self.name else f"{self.name}_{f.name}"

    @property
    def reset(self) -> int:
        """The register word after reset, as a read returns it (``"wo"`` fields read 0)."""
        return sum(f.reset << f.lsb for f in self.fields if f.readable)

    def to_dict(self) -> dict:
        """The map as plain data (what :meth:`from_dict` reads back and the JSON holds)."""
        return {"name": self.name, "offset": self.offset, "doc": self.doc, "reset": self.reset,
                "fields": [f.to_dict() for f in self.fields]}


def _ap_ctrl_hs_registers():
    return (
        Register("CTRL", 0x00, (
            Field("AP_START", 0, 1, "rw_sc", doc="write 1 to start; cleared on ap_ready "
                                                 "unless AUTO_RESTART"),
            Field("AP_DONE", 1, 1, "ro_cor", doc="the core finished a run (clear on read)"),
            Field("AP_IDLE", 2, 1, "ro", doc="the core is idle"),
            Field("AP_READY", 3, 1, "ro_cor", doc="the core can take new arguments "
                                                  "(clear on read)"),
            Field("AUTO_RESTART", 7, 1, "rw", doc="restart the core after each run"),
        ), "Control signals (ap_ctrl_hs)"),
        Register("GIER", 0x04, (Field("ENABLE", 0, 1, "rw", doc="global interrupt enable"),),
                 "Global interrupt enable"),
        Register("IP_IER", 0x08, (
            Field("AP_DONE", 0, 1, "rw", doc="interrupt on ap_done"),
            Field("AP_READY", 1, 1, "rw", doc="interrupt on ap_ready"),
        ), "IP interrupt enable"),
        Register("IP_ISR", 0x0C, (
            Field("AP_DONE", 0, 1, "rw_tow", doc="ap_done happened (write 1 to clear)"),
            Field("AP_READY", 1, 1, "rw_tow", doc="ap_ready happened (write 1 to clear)"),
        ), "IP interrupt status"),
    )


#: The four ``ap_ctrl_hs`` control registers at 0x00..0x0C (see the module docstring).
AP_CTRL_HS_REGISTERS = _ap_ctrl_hs_registers()
PROTOCOLS = (None, "ap_ctrl_hs")


@dataclass(frozen=True)
class RegisterMap:
    """A named list of registers with resolved offsets, validated.

    Parameters
    ----------
    name : str
        C identifier; the default prefix of the C macros.
    registers : sequence of Register
        At least one. Registers with ``offset=None`` are placed at the word after the previous
        register (the first at 0); the stored registers all have integer offsets and keep the
        given order.
    data_width : int
        Register width in bits; 32 (the only width supported so far).
    protocol : str or None
        ``"ap_ctrl_hs"`` if the map starts with :data:`AP_CTRL_HS_REGISTERS` (use
        :meth:`with_ap_ctrl_hs`); the CSR block then implements the Vitis HLS control logic.
    doc : str
        One paragraph for the generated documentation.

    Raises
    ------
    ValueError
        Offsets not multiples of 4 or used twice, fields overlapping or outside 32 bits, names
        that are not C identifiers or are used twice (register names, field names within a
        register, and the ``REG_FIELD`` paths, all compared case-insensitively), widths < 1.
        Each message names the offending register and field.
    """
    name: str
    registers: tuple
    data_width: int = DATA_WIDTH
    protocol: str | None = dc_field(default=None, kw_only=True)
    doc: str = dc_field(default="", kw_only=True)

    def __post_init__(self):
        _check_name("register map name", self.name)
        if not _is_int(self.data_width) or self.data_width != DATA_WIDTH:
            raise ValueError(f"data_width must be {DATA_WIDTH}, not {self.data_width!r}")
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be None or 'ap_ctrl_hs', not {self.protocol!r}")
        if isinstance(self.registers, Register) or not hasattr(self.registers, "__iter__"):
            raise TypeError(f"registers must be a sequence of Register, not {self.registers!r}")
        regs, cursor = [], 0
        for r in self.registers:
            if not isinstance(r, Register):
                raise TypeError(f"registers must be Register objects, not {r!r}")
            if r.offset is None:
                if cursor > MAX_OFFSET:
                    raise ValueError(f"register {r.name!r}: no offset left after {MAX_OFFSET:#x}")
                r = replace(r, offset=cursor)
            cursor = r.offset + 4
            regs.append(r)
        if not regs:
            raise ValueError("registers must not be empty")
        object.__setattr__(self, "registers", tuple(regs))
        by_name, by_offset, by_path = {}, {}, {}
        for r in regs:
            if r.name.lower() in by_name:
                raise ValueError(f"register name {r.name!r} is used twice "
                                 f"(names are compared case-insensitively)")
            by_name[r.name.lower()] = r
            if r.offset in by_offset:
                raise ValueError(f"register {r.name!r}: offset {r.offset:#04x} is already used "
                                 f"by register {by_offset[r.offset].name!r}")
            by_offset[r.offset] = r
            for f in r.fields:
                p = r.path(f).lower()
                if p in by_path:
                    q, g = by_path[p]
                    raise ValueError(f"register {r.name!r} field {f.name!r} and register "
                                     f"{q.name!r} field {g.name!r} have the same name "
                                     f"{r.path(f)!r} in the C header and the ports")
                by_path[p] = (r, f)
        if self.protocol == "ap_ctrl_hs":
            if regs[:4] != list(AP_CTRL_HS_REGISTERS):
                raise ValueError("an ap_ctrl_hs map must start with AP_CTRL_HS_REGISTERS: "
                                 "build it with RegisterMap.with_ap_ctrl_hs")
            for r in regs[4:]:
                if r.offset < 0x10:
                    raise ValueError(f"register {r.name!r}: offsets 0x00..0x0c are reserved "
                                     f"for the ap_ctrl_hs registers, not {r.offset:#04x}")
        if not isinstance(self.doc, str):
            raise TypeError(f"doc must be a string, not {self.doc!r}")

    @classmethod
    def with_ap_ctrl_hs(cls, name, args=(), *, doc=""):
        """The Vitis HLS ``ap_ctrl_hs`` control registers, then ``args`` from 0x10 upward.

        ``args`` are :class:`Register` objects (e.g. :meth:`Register.scalar`); those without an
        offset go to the word after the previous register, starting at 0x10.
        """
        if isinstance(args, Register) or not hasattr(args, "__iter__"):
            raise TypeError(f"args must be a sequence of Register, not {args!r}")
        return cls(name, AP_CTRL_HS_REGISTERS + tuple(args), protocol="ap_ctrl_hs", doc=doc)

    @classmethod
    def from_dict(cls, d: dict) -> "RegisterMap":
        """Inverse of :meth:`to_dict` (derived keys such as ``mask`` and ``reset`` are ignored)."""
        regs = tuple(
            Register(r["name"], r["offset"],
                     tuple(Field(f["name"], f["lsb"], f["width"], f["access"], f.get("reset", 0),
                                 f.get("doc", ""),
                                 info=Info.from_dict(f["info"]) if "info" in f else None)
                           for f in r["fields"]),
                     r.get("doc", ""))
            for r in d["registers"])
        return cls(d["name"], regs, d.get("data_width", DATA_WIDTH),
                   protocol=d.get("protocol"), doc=d.get("doc", ""))

    # -- queries --------------------------------------------------------------------------------
    def __getitem__(self, name: str) -> Register:
        for r in self.registers:
            if r.name == name:
                return r
        raise KeyError(f"register map {self.name!r} has no register {name!r}")

    def __iter__(self):
        return iter(self.registers)

    def __len__(self):
        return len(self.registers)

    def offset(self, name: str) -> int:
        return self[name].offset

    @property
    def user_registers(self) -> tuple:
        """The registers after the protocol's control registers (all of them without one)."""
        return self.registers[4:] if self.protocol == "ap_ctrl_hs" else self.registers

    @property
    def span(self) -> int:
        """Bytes from 0 to the end of the last register."""
        return max(r.offset for r in self.registers) + 4

    @property
    def min_addr_width(self) -> int:
        """Address bits needed to reach every register (at least 2)."""
        return max(2, (self.span - 1).bit_length())

    # -- constant registers describing the hardware ---------------------------------------------
    @property
    def info_registers(self) -> tuple:
        """The registers whose fields all carry an :class:`Info` (``HW_*``), in map order."""
        return tuple(r for r in self.registers if r.is_info)

    def info_values(self, config) -> dict:
        """Register name -> word of every info register, packed from ``config``."""
        return {r.name: r.pack({f.name: f.info.encode(config) for f in r.fields})
                for r in self.info_registers}

    def with_constant_resets(self, config) -> "RegisterMap":
        """This map with every constant field's (``HW_*``, an :class:`Info`) reset value the
        value it reads in ``config`` (:meth:`info_values`), instead of 0: the form of the
        exports (JSON, C header, Markdown, SystemRDL, IP-XACT), so that a register model built
        from one expects after reset what the hardware reads. Equal to this map otherwise;
        the gateware takes the constants from :meth:`info_values`."""
        regs = tuple(replace(r, fields=tuple(
            replace(f, reset=f.info.encode(config)) if f.info is not None else f
            for f in r.fields)) for r in self.registers)
        return replace(self, registers=regs)

    def decode_info(self, words: dict) -> dict:
        """Parameter path -> value from info register words (register name -> word), e.g.
        ``{"n_pe": 8, "pe.data_width": 32}``; ``ValueError`` if a field value stands for no
        parameter value."""
        out = {}
        for r in self.info_registers:
            if r.name in words:
                for f in r.fields:
                    out[f.info.param] = f.info.decode(f.get(words[r.name]))
        return out

    # -- serialised form ------------------------------------------------------------------------
    def to_dict(self) -> dict:
        """The map as plain data (what :meth:`from_dict` reads back and the JSON holds)."""
        return {"name": self.name, "data_width": self.data_width, "protocol": self.protocol,
                "doc": self.doc, "registers": [r.to_dict() for r in self.registers]}

    def to_json(self) -> str:
        """:meth:`to_dict` as indented JSON text, ending with a newline."""
        return json.dumps(self.to_dict(), indent=2) + "\n"
