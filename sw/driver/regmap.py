"""PYNQ-style attribute access to an accelerator's registers, from its :class:`RegisterMap`.

::

    rm = RegisterMapAccess(gae_register_map(config), device.control)
    rm.NUM_TIMESTEPS = 1024          # a whole-register field: assign the value
    rm.CTRL.AUTO_RESTART = 0         # one field: read-modify-write where needed (see below)
    rm.CTRL.AP_START = 1
    rm.STATUS.ERROR                  # one read of STATUS, the field's value
    s = rm.STATUS.read()             # one read, a snapshot: s.ERROR, s.PE_OVERFLOW, int(s)
    int(rm.CTRL), rm.CTRL            # the raw word; a repr listing every field

The map comes from :func:`sw.gae.spec.gae_register_map` (or any
:class:`~sw.regmap.RegisterMap`), its :meth:`~sw.regmap.RegisterMap.to_dict`, or the
``*_regs.json`` written next to the Verilog, so the host never hard-codes an offset.

Every attribute read is one bus read and every attribute write at most one bus read and one bus
write, in program order; nothing is cached except what the hardware cannot give back (see
*shadow* below). Access types follow :mod:`sw.regmap`:

Reading
    A field read reads its whole register. **Reading a register with clear-on-read
    (``ro_cor``) fields clears them** -- ``rm.CTRL.AP_IDLE`` also consumes AP_DONE and
    AP_READY, as on the hardware (and as with PYNQ). Read the register once with
    :meth:`RegisterAccess.read` and look at the snapshot when you need several fields.
    Reading a write-only (``wo``) field raises :class:`RegisterAccessError` (the hardware
    returns 0, which would silently look like a value); ``int(reg)`` and :meth:`read` return
    the raw word with such fields as 0.

Writing a field
    Range-checked (``ValueError`` naming register, field and range); writing a read-only
    (``ro`` or ``ro_cor``) field raises :class:`RegisterAccessError` before any bus access. The
    written word holds the new value in the field's bits and, in the other fields:

    * ``rw``: their current value (read-modify-write: one read of the register first), except
      in a register with ``ro_cor`` fields, where a read would destroy events: there the
      driver's shadow is used instead (see below);
    * ``wo``: the driver's shadow (reads return 0, so the value cannot be read back);
    * ``rw_sc`` and ``rw_tow``: 0, which does nothing -- so writing CTRL.AUTO_RESTART never
      starts the core, writing IP_ISR.AP_DONE = 1 clears exactly that bit and never toggles
      AP_READY, and no write ever "writes back" a bit it read;
    * ``ro``, ``ro_cor`` and reserved bits: 0 (ignored by the hardware).

    If no other field needs preserving (CTRL, IP_ISR, every scalar argument) there is no read
    at all, so the write has no side effect on clear-on-read bits either.
    Writing 0 to an ``rw_sc`` field is allowed and does nothing; writing 1 to an ``rw_tow``
    field toggles (clears) that bit.

Writing a whole register
    ``rm.NUM_TIMESTEPS = 1024`` for a register holding one field named like it (range-checked
    like a field); ``rm.CTRL = 0x81`` writes the raw word for other registers -- allowed only
    if every set bit belongs to a host-writable field (``ValueError`` otherwise: writing
    ``int(rm.CTRL)`` back, with AP_IDLE set, would be a mistake).

Shadow
    The values last written (or, for ``rw`` fields, last read) of ``rw`` and ``wo`` fields,
    starting at their reset values. It is only used where the hardware cannot be asked; if
    another master wrote those registers in between, the shadow is stale.

Values are unsigned raw field contents (a signed register argument is written as its two's
complement, e.g. ``value & ((1 << width) - 1)``); ``bool`` and numpy integers are accepted,
floats are not.
"""

import difflib
import json
import operator
from pathlib import Path

from sw.regmap import Register, RegisterMap

from .mmio import Mmio, check_word

__all__ = ["RegisterAccessError", "RegisterMapAccess", "RegisterAccess", "RegisterValue",
           "load_register_map"]

_READ_ONLY = ("ro", "ro_cor")
_NO_EFFECT_WHEN_ZERO = ("rw_sc", "rw_tow")


class RegisterAccessError(AttributeError):
    """Writing a read-only field or register, or reading a write-only field.

    An ``AttributeError`` because it is raised by attribute access (like assigning to a
    property without a setter).
    """


def load_register_map(regmap) -> RegisterMap:
    """A :class:`RegisterMap` from itself, its ``to_dict()``, JSON text or a JSON file path."""
    if isinstance(regmap, RegisterMap):
        return regmap
    if isinstance(regmap, dict):
        return RegisterMap.from_dict(regmap)
    if isinstance(regmap, Path) or (isinstance(regmap, str) and not regmap.lstrip()
                                    .startswith("{")):
        path = Path(regmap)
        if not path.is_file():
            raise ValueError(f"regmap: no register map JSON file at {str(path)!r}")
        regmap = path.read_text()
    if isinstance(regmap, str):
        try:
            d = json.loads(regmap)
        except json.JSONDecodeError as e:
            raise ValueError(f"regmap: not valid JSON ({e})") from None
        return RegisterMap.from_dict(d)
    raise TypeError(f"regmap must be a RegisterMap, a dict, JSON text or a path, not {regmap!r}")


def _check_value(reg: Register, f, value):
    where = f"{reg.name}.{f.name}" if f.name != reg.name else reg.name
    top = (1 << f.width) - 1
    try:
        v = operator.index(value)
    except TypeError:
        raise ValueError(f"{where}: value must be an integer in 0..{top} "
                         f"({f.width} bits), not {value!r}") from None
    if not 0 <= v <= top:
        raise ValueError(f"{where}: value must be an integer in 0..{top} ({f.width} bits), "
                         f"not {value!r}")
    return v


def _suggest(name, names):
    close = difflib.get_close_matches(str(name), list(names), n=3)
    return f" (did you mean {', '.join(close)}?)" if close else ""


class RegisterValue(int):
    """A register word as read: an ``int`` with one attribute per readable field.

    ``snapshot.ERROR`` extracts a field without another bus access; ``snapshot.fields`` is a
    dict of every readable field.
    """

    def __new__(cls, word: int, register: Register):
        self = super().__new__(cls, word)
        self._register = register
        return self

    @property
    def register(self) -> Register:
        return self._register

    @property
    def fields(self) -> dict:
        return {f.name: f.get(int(self)) for f in self._register.fields if f.readable}

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        for f in self._register.fields:
            if f.name == name:
                if not f.readable:
                    raise RegisterAccessError(f"{self._register.name}.{name} is write-only: "
                                              f"reads return 0")
                return f.get(int(self))
        raise AttributeError(f"register {self._register.name} has no field {name!r}"
                             + _suggest(name, (f.name for f in self._register.fields)))

    def __getitem__(self, name):
        return self.__getattr__(name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | {f.name for f in self._register.fields})

    def __repr__(self):
        return f"{self._register.name}={int(self):#010x} ({_describe(self._register, self)})"

    def __reduce__(self):
        return (int, (int(self),))


def _describe(reg: Register, word: int) -> str:
    parts = []
    for f in reg.fields:
        value = f"{f.get(word)}" if f.readable else "?"
        parts.append(f"{f.name}={value} [{f.access}]")
    return ", ".join(parts)


class RegisterAccess:
    """One register of a :class:`RegisterMapAccess`: fields as attributes (see the module doc).

    Attribute names are the field names; ``read``, ``write`` and attributes starting with ``_``
    are the class's own (a field named ``read`` or ``write`` is reached as ``reg["read"]``).
    ``int(reg)`` and ``reg == value`` read the register.
    """

    __slots__ = ("_owner", "_reg")

    def __init__(self, owner: "RegisterMapAccess", reg: Register):
        object.__setattr__(self, "_owner", owner)
        object.__setattr__(self, "_reg", reg)

    # -- description --------------------------------------------------------------------------
    @property
    def _register(self) -> Register:
        return self._reg

    @property
    def _offset(self) -> int:
        return self._reg.offset

    def _field(self, name):
        for f in self._reg.fields:
            if f.name == name:
                return f
        raise AttributeError(f"register {self._reg.name} has no field {name!r}"
                             + _suggest(name, (f.name for f in self._reg.fields)))

    # -- reading -------------------------------------------------------------------------------
    def read(self) -> RegisterValue:
        """One bus read: the word, with fields as attributes (clears ``ro_cor`` fields)."""
        return self._owner._read(self._reg)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        f = self._field(name)
        if not f.readable:
            raise RegisterAccessError(f"{self._reg.name}.{name} is write-only ('wo'): reads "
                                      f"return 0; the driver's last written value is "
                                      f"{self._owner._shadow[self._reg.name, f.name]}")
        return f.get(int(self.read()))

    def __getitem__(self, name):
        return self.__getattr__(name)

    def __int__(self):
        return int(self.read())

    __index__ = __int__

    def __eq__(self, other):
        try:
            other = operator.index(other)
        except TypeError:
            return NotImplemented
        return int(self) == other

    __hash__ = None

    # -- writing -------------------------------------------------------------------------------
    def write(self, value=None, /, **fields):
        """Write the raw word ``value``, or the given fields (one bus write; see the module
        doc for what goes into the other fields)."""
        if value is not None and fields:
            raise ValueError(f"{self._reg.name}: give a raw word or fields, not both")
        if value is not None:
            self._owner._write_word(self._reg, value)
        elif fields:
            self._owner._write_fields(self._reg, fields)
        else:
            raise ValueError(f"{self._reg.name}: nothing to write")

    def __setattr__(self, name, value):
        if name.startswith("_"):
            raise AttributeError(f"cannot set {name!r} on a register")
        self._owner._write_fields(self._reg, {name: value})

    def __setitem__(self, name, value):
        self._owner._write_fields(self._reg, {name: value})

    # -- interactive ---------------------------------------------------------------------------
    def __dir__(self):
        return sorted({"read", "write"} | {f.name for f in self._reg.fields})

    def __repr__(self):
        """Reads the register once (clear-on-read fields are cleared, as on PYNQ)."""
        word = self.read()
        return (f"Register({self._reg.name} @ {self._reg.offset:#04x} = {int(word):#010x}: "
                f"{_describe(self._reg, word)})")


class RegisterMapAccess:
    """Attribute access to every register of a map through an :class:`~sw.driver.mmio.Mmio`.

    Parameters
    ----------
    regmap : RegisterMap, dict, str or Path
        The map: a :class:`~sw.regmap.RegisterMap`, its ``to_dict()``, JSON text or the
        path of a ``*_regs.json`` file.
    mmio : Mmio
        The control port (anything with ``read32(offset)`` and ``write32(offset, value)``).

    Registers are attributes (``rm.CTRL``, :class:`RegisterAccess`) and items (``rm["CTRL"]``);
    assigning to one writes it (see the module docstring). Own attributes start with ``_``
    (``_regmap``, ``_mmio``, ``_shadow``) so they never hide a register.

    Raises
    ------
    AttributeError
        For an unknown register or field (the message suggests close names).
    RegisterAccessError
        Writing a read-only field/register, reading a write-only field.
    ValueError
        A value outside its field, or a raw word setting read-only or reserved bits.
    """

    def __init__(self, regmap, mmio: Mmio):
        rm = load_register_map(regmap)
        if not (callable(getattr(mmio, "read32", None))
                and callable(getattr(mmio, "write32", None))):
            raise TypeError(f"mmio must have read32(offset) and write32(offset, value), "
                            f"not {mmio!r}")
        object.__setattr__(self, "_regmap", rm)
        object.__setattr__(self, "_mmio", mmio)
        object.__setattr__(self, "_by_name", {r.name: RegisterAccess(self, r) for r in rm})
        object.__setattr__(self, "_shadow", {
            (r.name, f.name): f.reset for r in rm for f in r.fields if f.access in ("rw", "wo")})
        # registers that are one writable field of their own name: a write is that field alone
        object.__setattr__(self, "_plain", {
            r.name: (r, r.fields[0]) for r in rm if len(r.fields) == 1
            and r.fields[0].name == r.name and r.fields[0].access not in _READ_ONLY})

    # -- mapping-like --------------------------------------------------------------------------
    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._by_name[name]
        except KeyError:
            raise AttributeError(f"register map {self._regmap.name!r} has no register {name!r}"
                                 + _suggest(name, self._by_name)) from None

    def __getitem__(self, name):
        return self.__getattr__(name)

    def __setattr__(self, name, value):
        if name.startswith("_"):
            raise AttributeError(f"cannot set {name!r} on a register map")
        plain = self._plain.get(name)
        if plain is not None:            # what _write_fields does for it, without its lookups
            reg, f = plain
            self._commit(reg, f.put(0, _check_value(reg, f, value)))
            return
        reg = self.__getattr__(name)._register
        if len(reg.fields) == 1 and reg.fields[0].name == reg.name:
            self._write_fields(reg, {reg.name: value})
        else:
            self._write_word(reg, value)

    def __setitem__(self, name, value):
        self.__setattr__(name, value)

    def __iter__(self):
        return iter(self._by_name.values())

    def __contains__(self, name):
        return name in self._by_name

    def __len__(self):
        return len(self._by_name)

    def __dir__(self):
        return sorted(self._by_name)

    def __repr__(self):
        """Reads every register except those with clear-on-read fields (shown, not read)."""
        lines = [f"RegisterMap {self._regmap.name!r}:"]
        for r in self._regmap:
            if any(f.access == "ro_cor" for f in r.fields):
                lines.append(f"  {r.offset:#06x} {r.name}: (not read: clear-on-read fields)")
            else:
                word = self._read(r)
                lines.append(f"  {r.offset:#06x} {r.name} = {int(word):#010x}: "
                             f"{_describe(r, word)}")
        return "\n".join(lines)

    # -- bus access ------------------------------------------------------------------------------
    def _read(self, reg: Register) -> RegisterValue:
        word = self._mmio.read32(reg.offset)
        if type(word) is not int or not 0 <= word <= 0xFFFF_FFFF:   # what check_word passes
            word = check_word(word, what=f"{reg.name} read value")
        for f in reg.fields:
            if f.access == "rw":
                self._shadow[reg.name, f.name] = f.get(word)
        return RegisterValue(word, reg)

    def _write_fields(self, reg: Register, values: dict):
        by_name = {f.name: f for f in reg.fields}
        new = {}
        for name, value in values.items():
            if name not in by_name:
                raise AttributeError(f"register {reg.name} has no field {name!r}"
                                     + _suggest(name, by_name))
            f = by_name[name]
            if f.access in _READ_ONLY:
                raise RegisterAccessError(f"{reg.name}.{name} is read-only ({f.access!r})")
            new[name] = _check_value(reg, f, value)
        keep = [f for f in reg.fields if f.name not in new and f.access == "rw"]
        current = None
        if keep and not any(f.access == "ro_cor" for f in reg.fields):
            current = self._read(reg)
        word = 0
        for f in reg.fields:
            if f.name in new:
                word = f.put(word, new[f.name])
            elif f.access == "rw":
                word = f.put(word, f.get(current) if current is not None
                             else self._shadow[reg.name, f.name])
            elif f.access == "wo":
                word = f.put(word, self._shadow[reg.name, f.name])
        self._commit(reg, word)

    def _write_word(self, reg: Register, value):
        writable = [f for f in reg.fields if f.host_writable]
        if not writable:
            raise RegisterAccessError(f"register {reg.name} is read-only")
        word = check_word(value, what=f"{reg.name} (raw word)")
        mask = sum(f.mask for f in writable)
        if word & ~mask:
            raise ValueError(f"{reg.name}: raw word {word:#010x} sets bits {word & ~mask:#010x} "
                             f"that are reserved or read-only (writable mask {mask:#010x})")
        self._commit(reg, word)

    def _commit(self, reg: Register, word: int):
        self._mmio.write32(reg.offset, word)
        for f in reg.fields:
            if f.access in ("rw", "wo"):
                self._shadow[reg.name, f.name] = f.get(word)
