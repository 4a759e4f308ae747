"""Verilog of a component in time and memory linear in its size, large memories included.

Amaranth's :func:`amaranth.back.verilog.convert` hands every memory's initial contents to Yosys
as one ``$meminit_v2`` cell whose data is built bit by bit (one netlist object per bit: 10
million at a 2**18-leaf sum tree, minutes and gigabytes at 2**20), and Yosys then writes one
``mem[i] = 0;`` line per word. :func:`convert` is the same conversion, step for step (netlist,
RTLIL, the same Yosys script), except that a memory whose initial contents are all zero gets no
``$meminit_v2`` cell (its Verilog has no ``initial`` block: zero is what the FPGA's block and
ultra RAMs hold after configuration and what the test builds use, ``--x-initial 0``) and any
other memory's data is written as one constant string, and the check for combinational cycles
follows a dynamic bit select (``word_select``, ``bit_select``: Amaranth's ``Part`` cell) only
through the bits it can select, not from every output bit to every input bit (a row of a
1024-bit learner block word made 47 million edges of 40,000 cells, a minute of the check). The
Verilog is the same as Amaranth's with its all-zero ``initial`` blocks removed
(:func:`drop_zero_memory_init`); ``tb/test_convert.py`` checks both, and that a cycle is still
found.

A component whose ``elaborate`` asks :func:`shared_instance` (the learner's tensor units, the
GAE accelerator's PEs) is, during a conversion, converted once per distinct key into a module
of its own, ``<top>.<hint>``, written after the top module's, and instantiated wherever it is
used:
Amaranth's passes and Yosys then see each distinct unit once, not once per instance (27
tensor units of 256 cells in a U250-sized learner). Without a conversion (Amaranth's
simulator and Verilog backend) it elaborates its logic in place;
``tb/test_shared_modules.py`` checks both.

The netlist, RTLIL and Yosys steps use Amaranth's internals; they are all in
:mod:`rtl_gen._amaranth_private` (which lists them, and why each), written for the Amaranth
release ``pyproject.toml`` pins, and this module uses only Amaranth's public API. With any other
Amaranth that module refuses to load, and :func:`convert` warns (``RuntimeWarning``) and falls
back to Amaranth's public converter: ``verilog.convert`` with :func:`drop_zero_memory_init`
applied to its text, shared components elaborated in place, and the time and memory of large
memories and dynamic bit selects those of Amaranth.
"""

import contextvars
import re
import warnings

from amaranth.back import rtlil, verilog
from amaranth.hdl import ClockSignal, Instance, ResetSignal, ValueCastable
from amaranth.lib import wiring

try:
    from . import _amaranth_private as _private
    _NO_PRIVATE = None
except ImportError as exc:
    _private = None
    _NO_PRIVATE = str(exc)      # why: another Amaranth release

__all__ = ["convert", "rtlil_text", "shared_instance", "drop_zero_memory_init"]

#: An ``initial`` block of Yosys' ``write_verilog`` that only zeroes memory words, e.g.
#: ``initial begin\n    mem[0] = 144'h000...;\n    mem[1] = ...;\n  end\n``.
_ZERO_INIT = re.compile(
    r"^(?P<ind>[ \t]*)initial begin\n"
    r"(?:[ \t]*[A-Za-z_\\][^\s\[]* ?\[\d+\] = \d+'[hbd]0+;\n)+"
    r"(?P=ind)end\n", re.MULTILINE)


def drop_zero_memory_init(text: str) -> str:
    """Remove the ``initial`` blocks that set every word of a memory to zero.

    Amaranth's ``Memory(init=[])`` still writes one ``mem[i] = 0;`` line per word (megabytes at
    2**20 leaves, and Yosys runs out of memory reading them). Zero is what the FPGA's block and
    ultra RAMs hold after configuration without an INIT attribute, and what the test builds
    (``--x-initial 0``) use, so nothing changes. Only blocks made exclusively of all-zero word
    assignments are removed; a memory with any non-zero initial word keeps its whole block.
    """
    return _ZERO_INIT.sub("", text)


class _SharedModules:
    """The modules :func:`shared_instance` made while converting top module ``prefix``: each
    distinct key converted once, as module ``<prefix>.<hint>`` (``_<n>`` added if taken)."""

    def __init__(self, prefix):
        self.prefix = prefix
        self.modules = {}       # key -> (module name, clock and reset port names)
        self.names = set()      # module names given out
        self.texts = []         # RTLIL of each, in the order converted
        self.whole = set()      # ids of the components being converted: elaborated in full

    def module(self, key, hint, build):
        if key not in self.modules:
            name, n = f"{self.prefix}.{hint}", 0
            while name in self.names:
                n += 1
                name = f"{self.prefix}.{hint}_{n}"
            self.names.add(name)
            component = build()
            self.whole.add(id(component))
            text, domain_ports = _private.module_rtlil(component, name, top=False)
            unknown = set(domain_ports) - set(_DOMAIN_PORTS)
            if unknown:
                raise ValueError(f"shared module {name} has inputs {sorted(unknown)} that are "
                                 f"not ports of its signature nor the sync domain's")
            self.modules[key] = (name, domain_ports)
            self.texts.append(text)
        return self.modules[key]


_DOMAIN_PORTS = {"clk": lambda: ClockSignal("sync"), "rst": lambda: ResetSignal("sync")}
_shared = contextvars.ContextVar("rtl_gen_convert_shared", default=None)


def shared_instance(component, key, hint, build):
    """While :func:`rtlil_text` (so :func:`convert`) converts a design: an ``Instance`` of the
    module that stands for ``component`` and every other component of the same ``key`` (a
    hashable value that determines the component's logic, e.g. its class and configuration),
    for ``component.elaborate`` to return. The module is ``build()`` (a new component equal to
    ``component``) converted once per key, named ``<top>.<hint>``, and its Verilog follows the
    top module's; the instance connects every port of the signature, and the ``sync`` domain's
    clock and reset. Otherwise (Amaranth's simulator or Verilog backend, a conversion that fell
    back to it, or ``component`` is the one being converted) None: the component elaborates
    its logic itself.

    Amaranth's combinational-cycle check does not see through the instance: each module is
    checked on its own, and a shared component must have no combinational path from an input
    port to an output port that its users could close (the tensor unit's ``i.ready`` follows
    ``o.ready``; the learner ties ``o.ready`` high)."""
    scope = _shared.get()
    if scope is None or id(component) in scope.whole:
        return None
    name, domain_ports = scope.module(key, hint, build)
    ports = []
    for path, member, value in component.signature.flatten(component):
        if isinstance(value, ValueCastable):
            value = value.as_value()
        ports.append(("i" if member.flow == wiring.In else "o", "__".join(map(str, path)), value))
    ports += [("i", port, _DOMAIN_PORTS[port]()) for port in domain_ports]
    return Instance(name, *ports)


def _fall_back():
    """Whether :func:`convert` and :func:`rtlil_text` must use Amaranth's public converters (see
    the module docstring), with a ``RuntimeWarning`` saying why if so."""
    if _private is not None:
        return False
    warnings.warn(f"rtl_gen.convert falls back to amaranth.back.verilog.convert ({_NO_PRIVATE}): "
                  f"shared components are elaborated in place, and large memories take "
                  f"Amaranth's time and memory", RuntimeWarning, stacklevel=3)
    return True


def rtlil_text(component: wiring.Component, name: str) -> str:
    """RTLIL of ``component`` as module ``name`` (Amaranth's, without source locations), with
    no initialiser for all-zero memories, then the modules of its :func:`shared_instance`
    components. Falling back (see the module docstring): ``amaranth.back.rtlil.convert``'s,
    all-zero initialisers included."""
    if _fall_back():
        return rtlil.convert(component, name=name, emit_src=False)
    scope = _SharedModules(name)
    scope.whole.add(id(component))
    token = _shared.set(scope)
    try:
        text, _ = _private.module_rtlil(component, name, top=True)
    finally:
        _shared.reset(token)
    return "".join([text, *scope.texts])


def convert(component: wiring.Component, name: str, *, progress=None) -> str:
    """Verilog of ``component`` as module ``name``: ``amaranth.back.verilog.convert(component,
    name=name, emit_src=False)`` without the ``initial`` blocks of all-zero memories, each
    :func:`shared_instance` component a module of its own after the top's (same file).
    ``progress``: a tqdm bar advanced by one after each of the two steps (Amaranth, Yosys).
    Falling back (see the module docstring): :func:`drop_zero_memory_init` of
    ``verilog.convert``'s text, in one step."""
    def step(what):
        if progress is not None:
            progress.set_postfix_str(what)
            progress.refresh()

    if _fall_back():
        step("Amaranth's verilog.convert")
        verilog_text = drop_zero_memory_init(verilog.convert(component, name=name,
                                                             emit_src=False))
        if progress is not None:
            progress.update(2)
        return verilog_text
    step("elaborating, netlist, RTLIL")
    text = rtlil_text(component, name)
    if progress is not None:
        progress.update()
    step("Yosys")
    verilog_text = _private.rtlil_to_verilog(text)
    if progress is not None:
        progress.update()
    return verilog_text
