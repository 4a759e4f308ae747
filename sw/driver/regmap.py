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

Hot paths
    The drivers' runs use raw words by register name, one bus access each with the same
    checks and shadows, without the attribute machinery (0.5-0.8 µs of Python instead of
    1-2.5 µs): :meth:`~RegisterMapAccess.word` (a word from fields, computed once),
    :meth:`~RegisterMapAccess.read_word`, :meth:`~RegisterMapAccess.write_word`,
    :meth:`~RegisterMapAccess.fields_of` (a read word's fields), and
    :meth:`~RegisterMapAccess.write_word_changed`, which skips the write when the word is
    what this map last wrote to that register (registers of ``rw`` fields only: the
    arguments), by any map sharing its ``written`` dict (the drivers of one device object
    share one). A write by another master or process, or not through such a map, is not
    seen: :meth:`~RegisterMapAccess.forget` makes the next writes unconditional.
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

    def __new__(cls, word: int, register: Register, _table=None):
        self = super().__new__(cls, word)
        self._register = register
        self._table = _field_table(register) if _table is None else _table
        return self

    @property
    def register(self) -> Register:
        return self._register

    @property
    def fields(self) -> dict:
        word = int(self)
        return {name: (word >> lsb) & top
                for name, (lsb, top, readable) in self._table.items() if readable}

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            lsb, top, readable = self._table[name]
        except KeyError:
            raise AttributeError(f"register {self._register.name} has no field {name!r}"
                                 + _suggest(name, self._table)) from None
        if not readable:
            raise RegisterAccessError(f"{self._register.name}.{name} is write-only: "
                                      f"reads return 0")
        return (int(self) >> lsb) & top

    def __getitem__(self, name):
        return self.__getattr__(name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | {f.name for f in self._register.fields})

    def __repr__(self):
        return f"{self._register.name}={int(self):#010x} ({_describe(self._register, self)})"

    def __reduce__(self):
        return (int, (int(self),))


def _field_table(reg: Register) -> dict:
    """Field name -> ``(lsb, (1 << width) - 1, readable)`` of ``reg``, in field order (what
    a :class:`RegisterValue` extracts; built once per register by :class:`RegisterMapAccess`)."""
    return {f.name: (f.lsb, (1 << f.width) - 1, f.readable) for f in reg.fields}


class _Plan:
    """What every access to one register needs, computed once from its fields (a
    :class:`RegisterMapAccess` keeps one per register): its offset, its field table, the
    shadow entries a read refreshes (``rw`` fields) and a write refreshes (``rw`` and ``wo``),
    whether it has clear-on-read fields, and the write recipes of the field sets written so
    far (:meth:`RegisterMapAccess._write_fields`)."""

    __slots__ = ("reg", "offset", "table", "by_name", "on_read", "on_write", "has_cor",
                 "recipes", "writable", "readable", "storage")

    def __init__(self, reg: Register):
        self.reg = reg
        self.offset = reg.offset
        self.table = _field_table(reg)
        self.by_name = {f.name: f for f in reg.fields}
        self.on_read = tuple(((reg.name, f.name), f.lsb, (1 << f.width) - 1)
                             for f in reg.fields if f.access == "rw")
        self.on_write = tuple(((reg.name, f.name), f.lsb, (1 << f.width) - 1)
                              for f in reg.fields if f.access in ("rw", "wo"))
        self.has_cor = any(f.access == "ro_cor" for f in reg.fields)
        self.recipes = {}
        self.writable = sum(f.mask for f in reg.fields if f.host_writable)
        self.readable = tuple((f.name, f.lsb, (1 << f.width) - 1) for f in reg.fields
                              if f.readable)
        self.storage = bool(reg.fields) and all(f.access == "rw" for f in reg.fields)

    def recipe(self, names):
        """How to write the fields ``names`` (a tuple): ``(checks, from_read, from_shadow)``
        with ``checks`` ``(name, field, lsb, top)`` of the written fields, ``from_read`` the
        ``(key, lsb, top)`` of the ``rw`` fields kept from a read of the register (empty when
        none is needed) and ``from_shadow`` those kept from the shadow (``wo`` fields, and
        ``rw`` ones beside clear-on-read fields). Raises for an unknown or read-only field."""
        got = self.recipes.get(names)
        if got is not None:
            return got
        reg, by_name = self.reg, self.by_name
        checks = []
        for name in names:
            if name not in by_name:
                raise AttributeError(f"register {reg.name} has no field {name!r}"
                                     + _suggest(name, by_name))
            f = by_name[name]
            if f.access in _READ_ONLY:
                raise RegisterAccessError(f"{reg.name}.{name} is read-only ({f.access!r})")
            checks.append((name, f, f.lsb, (1 << f.width) - 1))
        kept_rw = tuple(((reg.name, f.name), f.lsb, (1 << f.width) - 1) for f in reg.fields
                        if f.name not in names and f.access == "rw")
        kept_wo = tuple(((reg.name, f.name), f.lsb, (1 << f.width) - 1) for f in reg.fields
                        if f.name not in names and f.access == "wo")
        read = bool(kept_rw) and not self.has_cor
        got = (tuple(checks), kept_rw if read else (), (() if read else kept_rw) + kept_wo)
        self.recipes[names] = got
        return got


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
        return self._owner._read_word(self._reg)

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
    written : dict or None
        Offset -> word last written, shared by the maps of one set of registers (the drivers
        pass :func:`sw.driver.common.written_registers` of their device, so two drivers of
        one device never skip a write the other made); None: this map's own.

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

    def __init__(self, regmap, mmio: Mmio, *, written=None):
        rm = load_register_map(regmap)
        if not (callable(getattr(mmio, "read32", None))
                and callable(getattr(mmio, "write32", None))):
            raise TypeError(f"mmio must have read32(offset) and write32(offset, value), "
                            f"not {mmio!r}")
        object.__setattr__(self, "_regmap", rm)
        object.__setattr__(self, "_mmio", mmio)
        object.__setattr__(self, "_by_name", {r.name: RegisterAccess(self, r) for r in rm})
        object.__setattr__(self, "_plans", {r.name: _Plan(r) for r in rm})
        # Registers as instance attributes too, so ``rm.CTRL`` is found without a call of
        # __getattr__ (a name starting with "_" stays reachable only as an item).
        for name, access in self._by_name.items():
            if not name.startswith("_"):
                object.__setattr__(self, name, access)
        # offset -> the word last written, for write_word_changed: this map's own, or one
        # shared by every map on the same registers (``written``)
        if written is not None and not isinstance(written, dict):
            raise TypeError(f"written must be a dict or None, not {written!r}")
        object.__setattr__(self, "_written", {} if written is None else written)
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
            if type(value) is not int or value < 0 or value >> f.width:
                value = _check_value(reg, f, value)
            self._commit(reg, value << f.lsb)
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

    # -- hot paths: raw words by register name ------------------------------------------------
    def _named(self, name) -> _Plan:
        try:
            return self._plans[name]
        except KeyError:
            raise AttributeError(f"register map {self._regmap.name!r} has no register {name!r}"
                                 + _suggest(name, self._by_name)) from None

    def word(self, name: str, **fields) -> int:
        """The raw word of register ``name`` holding ``fields`` (the others 0), checked as a
        write of those fields is (range, read-only, unknown names); no bus access. For
        :meth:`write_word` on a driver's hot path, computed once."""
        plan = self._named(name)
        checks, _, _ = plan.recipe(tuple(fields))
        word = 0
        for fname, f, lsb, _ in checks:
            word |= _check_value(plan.reg, f, fields[fname]) << lsb
        return word

    def read_word(self, name: str) -> int:
        """One bus read of register ``name``: its raw word (``int(rm.NAME)`` without the
        attribute machinery; ``rw`` shadows refreshed, ``ro_cor`` fields cleared)."""
        plan = self._named(name)
        return self._read_word(plan.reg, plan)

    def write_word(self, name: str, word: int):
        """One bus write of the raw ``word`` to register ``name``, as ``rm.NAME.write(word)``:
        only host-writable bits may be set (``ValueError``); shadows refreshed."""
        plan = self._named(name)
        if type(word) is not int or word < 0 or word & ~plan.writable:
            self._write_word(plan.reg, word)          # raises, naming the register
        self._commit(plan.reg, word, plan)

    def write_word_changed(self, name: str, word: int) -> bool:
        """:meth:`write_word`, skipped when ``word`` is what was last written to register
        ``name`` through this map, or through any map sharing its ``written`` dict (a register
        of ``rw`` fields only, which hold what is written: an argument). Returns whether it
        wrote. Writes by other masters or processes, or not through such a map, are not seen:
        call :meth:`forget` after them (or after a reset)."""
        plan = self._named(name)
        if not plan.storage:
            raise ValueError(f"{name}: only a register of rw fields keeps what was written")
        if type(word) is int and self._written.get(plan.offset) == word:
            return False
        self.write_word(name, word)
        return True

    def forget(self):
        """Forget what was written (:meth:`write_word_changed` writes every register again)."""
        self._written.clear()

    def fields_of(self, name: str, word: int) -> dict:
        """The readable fields of register ``name`` in ``word`` (a value of
        :meth:`read_word`), name -> int: ``rm.NAME.read().fields`` without a bus access."""
        return {f: (word >> lsb) & top for f, lsb, top in self._named(name).readable}

    # -- bus access ------------------------------------------------------------------------------
    def _plan(self, reg: Register) -> _Plan:
        plan = self._plans.get(reg.name)
        if plan is None or plan.reg is not reg:          # a Register from elsewhere
            plan = _Plan(reg)
        return plan

    def _read(self, reg: Register) -> RegisterValue:
        plan = self._plan(reg)
        return RegisterValue(self._read_word(reg, plan), reg, plan.table)

    def _read_word(self, reg: Register, plan=None) -> int:
        """One bus read of ``reg``: the word as a plain ``int`` (the shadow of its ``rw``
        fields refreshed)."""
        if plan is None:
            plan = self._plan(reg)
        word = self._mmio.read32(plan.offset)
        if type(word) is not int or not 0 <= word <= 0xFFFF_FFFF:   # what check_word passes
            word = check_word(word, what=f"{reg.name} read value")
        shadow = self._shadow
        for key, lsb, top in plan.on_read:
            shadow[key] = (word >> lsb) & top
        return word

    def _write_fields(self, reg: Register, values: dict):
        plan = self._plan(reg)
        try:
            checks, from_read, from_shadow = plan.recipe(tuple(values))
        except AttributeError:             # an unknown or read-only field (or both)
            for name, value in values.items():    # the first error in the fields' order
                f = plan.by_name.get(name)
                if f is not None and f.access not in _READ_ONLY:
                    _check_value(reg, f, value)
                else:
                    break
            raise
        word = 0
        for name, f, lsb, top in checks:
            v = values[name]
            if type(v) is not int or not 0 <= v <= top:
                v = _check_value(reg, f, v)
            word |= v << lsb
        if from_read:
            current = self._read_word(reg, plan)
            for _, lsb, top in from_read:
                word |= current & (top << lsb)
        shadow = self._shadow
        for key, lsb, top in from_shadow:
            word |= shadow[key] << lsb
        self._commit(reg, word, plan)

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

    def _commit(self, reg: Register, word: int, plan=None):
        if plan is None:
            plan = self._plan(reg)
        self._mmio.write32(plan.offset, word)
        self._written[plan.offset] = word
        shadow = self._shadow
        for key, lsb, top in plan.on_write:
            shadow[key] = (word >> lsb) & top
