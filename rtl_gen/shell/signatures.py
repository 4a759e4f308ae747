"""The interfaces between an accelerator's core and its shell, as ``wiring.Signature``\\ s.

Every accelerator core (:class:`~rtl_gen.gae.core.GaeCore`,
:class:`~rtl_gen.replay.core.ReplayCore`, :class:`~rtl_gen.learner.core.LearnerCore`) has the
same four members, connected by :func:`amaranth.lib.wiring.connect` to its shell
(:class:`~rtl_gen.shell.accelerator.AcceleratorShell`):

``ctrl: In(RunControlSignature(error_bits))``
    start a run, see it busy, ready (arguments taken) and done, its error code and cycles.
``args: In(ArgsSignature(regmap))``
    the run arguments: every field of the register map's argument registers.
``status: Out(StatusSignature(regmap))``
    what the core reports in read-only registers (flags, results), besides the shell's own
    STATUS.ERROR, STATUS.START_REFUSED and CYCLES.
``host: In(MemoryPortSignature(data_width, addr_width))``
    the host's word port into the core's memory (behind an AXI4 slave or a DMA shell).

The signals of these interfaces are named flat, ``<interface>_<member>`` for the memory port
(``host_addr``) and after the register field for the others (``status_error``, ``batch_size``):
the names of the register map and of the shipped netlists, readable in a waveform viewer.
"""

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from sw.shell.spec import SHELL_FIELDS

__all__ = ["FlatSignature", "MemoryPortSignature", "RunControlSignature", "ArgsSignature",
           "StatusSignature", "field_port", "arg_fields", "status_fields"]


class FlatSignature(wiring.Signature):
    """A signature whose port signals are named ``<prefix><member>`` instead of Amaranth's
    ``<path>__<member>``.

    Parameters
    ----------
    members : dict
        Port members (no nested interfaces).
    prefix : str or None
        Name prefix of the signals; None (default) uses the interface's name and ``_``
        (``host_addr`` for member ``addr`` of interface ``host``); ``""`` names each signal
        after its member.
    """

    def __init__(self, members, *, prefix=None):
        self._prefix = prefix
        super().__init__(members)

    def create(self, *, path=None, src_loc_at=0):
        iface = super().create(path=path, src_loc_at=src_loc_at + 1)
        if self._prefix is not None:
            prefix = self._prefix
        else:
            prefix = "_".join(str(p) for p in (path or ())) + ("_" if path else "")
        for name in self.members:
            getattr(iface, name).name = f"{prefix}{name}"
        return iface

    def __eq__(self, other):
        return type(self) is type(other) and self.members == other.members

    def __hash__(self):
        return hash(tuple(self.members))


class MemoryPortSignature(FlatSignature):
    """A host's word port into an accelerator's memory, seen from the host (the initiator).

    ``addr`` ``Out(addr_width)`` (word address), ``re`` ``Out(1)`` (read: the word is on
    ``rdata`` ``In(data_width)`` ``read_latency`` cycles later; ``addr`` and ``re`` may change
    every cycle, reads are pipelined), ``we`` ``Out(data_width // 8)`` (byte write enables),
    ``wdata`` ``Out(data_width)``, and ``enable`` ``In(1, init=1)``: 1 while the host may access
    the memory (the core is idle); accesses while it is 0 do not touch the memory (read data is
    then undefined). A write is seen by reads issued from the next cycle on. Throughput one
    word per cycle.

    ``read_latency`` is part of the signature (two ports with different latencies are
    different signatures): a shell takes it from the core it serves.
    """

    def __init__(self, *, data_width: int, addr_width: int, read_latency: int = 1):
        if not isinstance(data_width, int) or data_width < 8 or data_width % 8:
            raise ValueError(f"data_width must be a positive multiple of 8, not {data_width!r}")
        if not isinstance(addr_width, int) or addr_width < 1:
            raise ValueError(f"addr_width must be a positive integer, not {addr_width!r}")
        if not isinstance(read_latency, int) or isinstance(read_latency, bool) \
                or not 1 <= read_latency <= 8:
            raise ValueError(f"read_latency must be an integer from 1 to 8, "
                             f"not {read_latency!r}")
        self.data_width, self.addr_width = data_width, addr_width
        self.read_latency = read_latency
        super().__init__({"enable": In(1, init=1), "addr": Out(addr_width), "re": Out(1),
                          "we": Out(data_width // 8), "wdata": Out(data_width),
                          "rdata": In(data_width)})

    def __eq__(self, other):
        return super().__eq__(other) and self.read_latency == other.read_latency

    def __hash__(self):
        return hash((tuple(self.members), self.read_latency))


class RunControlSignature(FlatSignature):
    """Start and follow one run of a core, seen from the controller (the shell).

    ``start`` ``Out(1)`` (level: a run is wanted; the core takes it when idle and pulses
    ``ready``), ``busy`` ``In(1)`` (level), ``ready`` and ``done`` ``In(1)`` (one-cycle
    pulses), ``error`` ``In(error_bits)`` (STATUS.ERROR of the last start, 0: accepted) and
    ``cycles`` ``In(32)`` (cycles of the last run). Signals are named after their members.
    """

    def __init__(self, *, error_bits: int):
        if not isinstance(error_bits, int) or error_bits < 1:
            raise ValueError(f"error_bits must be a positive integer, not {error_bits!r}")
        self.error_bits = error_bits
        super().__init__({"start": Out(1), "busy": In(1), "ready": In(1), "done": In(1),
                          "error": In(error_bits), "cycles": In(32)}, prefix="")


def field_port(reg, f) -> str:
    """The port name of field ``f`` of register ``reg``: ``<reg>_<field>`` in lower case, or
    ``<reg>`` for a field named like its register."""
    return reg.path(f).lower()


def arg_fields(regmap) -> list:
    """``(register, field)`` of the run arguments: every field of the user registers whose
    fields are all ``"rw"``, in map order."""
    return [(r, f) for r in regmap.user_registers
            if all(f.access == "rw" for f in r.fields) for f in r.fields]


def status_fields(regmap) -> list:
    """``(register, field)`` a core reports: the read-only (``"ro"``) fields of the user
    registers that are neither constants (:class:`~sw.regmap.Info`) nor the shell's
    (:data:`~sw.shell.spec.SHELL_FIELDS`), in map order."""
    return [(r, f) for r in regmap.user_registers for f in r.fields
            if f.access == "ro" and f.info is None and (r.name, f.name) not in SHELL_FIELDS]


class ArgsSignature(FlatSignature):
    """The run arguments of a register map (:func:`arg_fields`), seen from the register block:
    one ``Out(width)`` member per field, named by :func:`field_port`."""

    def __init__(self, regmap):
        super().__init__({field_port(r, f): Out(f.width) for r, f in arg_fields(regmap)},
                         prefix="")


class StatusSignature(FlatSignature):
    """What a core reports in a register map (:func:`status_fields`), seen from the core: one
    ``Out(width)`` member per field, named by :func:`field_port`."""

    def __init__(self, regmap):
        super().__init__({field_port(r, f): Out(f.width) for r, f in status_fields(regmap)},
                         prefix="")
