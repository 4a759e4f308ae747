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
(:func:`rtl_gen.emit.drop_zero_memory_init`); ``tb/test_convert.py`` checks both, and that a
cycle is still found.

A component whose ``elaborate`` asks :func:`shared_instance` (the learner's tensor units, the
GAE accelerator's PEs) is, during a conversion, converted once per distinct key into a module
of its own, ``<top>.<hint>``, written after the top module's, and instantiated wherever it is
used:
Amaranth's passes and Yosys then see each distinct unit once, not once per instance (27
tensor units of 256 cells in a U250-sized learner). Without a conversion (Amaranth's
simulator and Verilog backend) it elaborates its logic in place as before;
``tb/test_shared_modules.py`` checks both.

It uses Amaranth's internal modules (``_ir``, ``_nir``, ``back.rtlil``): Amaranth is pinned
(``pyproject.toml``), and the test above catches a change.
"""

import contextlib
import contextvars

from amaranth.back import rtlil
from amaranth.back.verilog import _convert_rtlil_text
from amaranth.hdl import ClockSignal, Instance, ResetSignal, _ast, _ir, _nir
from amaranth.lib import wiring

__all__ = ["convert", "rtlil_text", "shared_instance", "build_netlist", "comb_edges"]


def comb_edges(cell, bit):
    """The nets output ``bit`` of ``cell`` depends on combinationally: Amaranth's
    ``comb_edges_to``, except for a ``Part`` (``value >> offset * stride``, ``width`` bits),
    whose bit ``bit`` can only be ``value[bit + k * stride]``, the sign bit, or zero."""
    if not isinstance(cell, _nir.Part):
        return [src for src, _ in cell.comb_edges_to(bit)]
    value = cell.value
    edges = [value[i] for i in range(bit, len(value), max(cell.stride, 1))]
    if cell.value_signed and len(value):
        edges.append(value[len(value) - 1])
    return edges + list(cell.offset)


def _whole_cell_edges(cell):
    """The nets every output bit of ``cell`` depends on, if they are the same for every bit
    (what :func:`comb_edges` gives for each; computed once per cell), else None."""
    if isinstance(cell, _nir.Operator):
        if len(cell.inputs) == 1:
            return None if cell.operator == "~" else tuple(cell.inputs[0])
        if len(cell.inputs) == 2 and cell.operator not in ("&", "|", "^"):
            return tuple(cell.inputs[0]) + tuple(cell.inputs[1])
        return None
    if isinstance(cell, (_nir.Matches, _nir.AsyncReadPort, _nir.FlipFlop)):
        return tuple(comb_edges(cell, 0))
    return None


def _assignment_list_edges(cell):
    """:func:`comb_edges` of every output bit of an ``AssignmentList``, in one pass over its
    assignments (``comb_edges_to`` scans them all for each bit)."""
    edges = [[net] for net in cell.default]
    width = len(edges)
    for assign in cell.assignments:
        cond, start, value = assign.cond, assign.start, assign.value
        for bit in range(max(start, 0), min(start + len(value), width)):
            edges[bit] += (cond, value[bit - start])
    return edges


def _check_comb_cycles(netlist):
    """Amaranth's ``Netlist.check_comb_cycles`` on :func:`comb_edges`, without recursion:
    ``CombinationalCycle`` naming the cells of the first cycle found. Nets are handled as the
    integers they are (``Net``: ``cell << 16 | bit``, negative if late, 0 and 1 constant), and
    the edges of a cell whose output bits all depend on the same nets are listed once, those of
    an ``AssignmentList`` in one pass."""
    checked, busy = set(), set()
    cells, connections = netlist.cells, netlist.connections
    whole = {}      # cell index -> its edges (_whole_cell_edges), per bit, or None

    def sources(net):
        if net < 2:
            return () if net >= 0 else (connections[net],)
        cell_idx = net >> 16
        try:
            edges = whole[cell_idx]
        except KeyError:
            cell = cells[cell_idx]
            if isinstance(cell, _nir.AssignmentList):
                edges = whole[cell_idx] = _assignment_list_edges(cell)
            else:
                edges = whole[cell_idx] = _whole_cell_edges(cell)
        if edges is None:
            return comb_edges(cells[cell_idx], net & 0xffff)
        if type(edges) is list:
            return edges[net & 0xffff]
        return edges

    def visit(root):
        if root in checked:
            return
        stack = [(root, iter(sources(root)))]
        busy.add(root)
        while stack:
            net, it = stack[-1]
            for src in it:
                if src in checked:
                    continue
                if src in busy:
                    path = [n for n, _ in stack[[n for n, _ in stack].index(src):]]
                    raise _nir.CombinationalCycle(
                        "Combinational cycle detected, through the nets "
                        + ", ".join(_describe(netlist, n) for n in path))
                busy.add(src)
                stack.append((src, iter(sources(src))))
                break
            else:
                stack.pop()
                busy.discard(net)
                checked.add(net)

    for cell_idx, cell in enumerate(netlist.cells):
        width = _output_width(cell)
        if width is None:
            nets = cell.output_nets(cell_idx)
        else:
            nets = range(cell_idx << 16, (cell_idx << 16) + width)
        for net in nets:
            if net not in checked:
                visit(net)
    for value in netlist.signals.values():
        for net in value:
            if net not in checked:
                visit(net)


def _output_width(cell):
    """The number of output bits of ``cell`` if they are bits 0, 1, ... (what ``output_nets``
    gives, as a set of ``Net``), else None."""
    if isinstance(cell, (_nir.Operator, _nir.Part)):
        return cell.width
    if isinstance(cell, _nir.AssignmentList):
        return len(cell.default)
    if isinstance(cell, _nir.FlipFlop):
        return len(cell.data)
    return None


def _describe(netlist, net):
    net = _nir.Net(net)
    if net.is_late:
        sig, bit = netlist.late_to_signal[net]
        return f"signal {sig.name} bit {bit}"
    cell = netlist.cells[net.cell]
    where = "" if cell.src_loc is None else f" ({cell.src_loc[0]}:{cell.src_loc[1]})"
    return f"cell {type(cell).__qualname__} bit {net.bit}{where}"


def build_netlist(fragment, ports, name):
    """``amaranth.hdl._ir.build_netlist`` with :func:`_check_comb_cycles` (the same steps)."""
    design = fragment.prepare(ports=ports, hierarchy=(name,))
    netlist = _nir.Netlist()
    _ir._emit_netlist(netlist, design, all_undef_to_ff=False)
    _check_comb_cycles(netlist)
    netlist.resolve_all_nets()
    _ir._compute_net_flows(netlist)
    _ir._compute_ports(netlist)
    _ir._compute_ionet_dirs(netlist)
    _ir._compute_io_ports(netlist, design.ports)
    return netlist


class _ModuleEmitter(rtlil.ModuleEmitter):
    def sigspec(self, *parts):
        """Amaranth's ``ModuleEmitter.sigspec`` (the same text) on plain lists and integers:
        a fifth of its RTLIL emission time was spent there."""
        value = []
        for part in parts:
            if isinstance(part, _nir.Net):
                value.append(part)
            else:
                value.extend(part)
        nets, count = self.nets, len(value)
        chunks = []
        begin_pos = 0
        while begin_pos < count:
            end_pos = begin_pos
            if value[begin_pos] in (0, 1):
                while end_pos < count and value[end_pos] in (0, 1):
                    end_pos += 1
                bits = "".join("1" if net else "0" for net in value[begin_pos:end_pos])[::-1]
                chunks.append(f"{end_pos - begin_pos}'{bits}")
            else:
                wire, start_bit = nets[value[begin_pos]]
                end_pos += 1
                bit = start_bit + 1
                while (end_pos < count and value[end_pos] not in (0, 1)
                        and nets[value[end_pos]] == (wire, bit)):
                    end_pos += 1
                    bit += 1
                width = end_pos - begin_pos
                if width == 1:
                    chunks.append(f"{wire.name} [{start_bit}]")
                else:
                    chunks.append(f"{wire.name} [{start_bit + width - 1}:{start_bit}]")
            begin_pos = end_pos
        if len(chunks) == 1:
            return chunks[0]
        return "{ " + " ".join(reversed(chunks)) + " }"

    def emit_memory(self, cell_idx, cell):
        if not any(cell.init):
            return                  # all zero: no initialiser (see the module docstring)
        info = self.memories[cell_idx]
        data = "".join(format(row & ((1 << cell.width) - 1), f"0{cell.width}b")
                       for row in reversed(cell.init))
        self.builder.cell("$meminit_v2", ports={
            "ADDR": self.sigspec(),
            "DATA": f"{len(data)}'{data}",
            "EN": self.sigspec(_nir.Value.ones(cell.width)),
        }, parameters={
            "MEMID": info.memid,
            "ABITS": 0,
            "WIDTH": cell.width,
            "WORDS": cell.depth,
            "PRIORITY": 0,
        }, src_loc=cell.src_loc)


def _ports(component):
    ports = {}
    for path, member, value in component.signature.flatten(component):
        if isinstance(value, _ast.ValueCastable):
            value = value.as_value()
        if isinstance(value, _ast.Value):
            ports["__".join(map(str, path))] = (
                value, _ir.PortDirection.Input if member.flow == wiring.In
                else _ir.PortDirection.Output)
    return ports


def _module_rtlil(component, name, *, top):
    """RTLIL of ``component`` as module ``name`` (its submodules ``name.<sub>``), and the names
    of its top-level inputs that are not signature ports (the clock and reset of ``sync``)."""
    fragment = _ir.Fragment.get(component, None)
    ports = _ports(component)
    netlist = build_netlist(fragment, ports, name)
    empty = rtlil.EmptyModuleChecker(netlist)
    design = rtlil.Design(emit_src=False)
    for module_idx, module in enumerate(netlist.modules):
        if empty.is_empty(module_idx):
            continue
        builder = design.module(".".join(module.name), src_loc=module.src_loc)
        if module_idx == 0 and top:
            builder.attribute("top", 1)
        _ModuleEmitter(builder, netlist, module, _ast.SignalDict(), empty_checker=empty).emit()
    return str(design), [p for p in netlist.top.ports_i if p not in ports]


def _value_new(cls, nets=()):
    if isinstance(nets, _nir.Net):
        return tuple.__new__(cls, (nets,))
    return tuple.__new__(cls, nets)


def _from_cell(cls, cell, bit):
    return cls((cell << 16) | bit)


def _resolve_value(self, value):
    connections, nets = self.connections, []
    for net in value:
        while net < 0:
            net = connections[net]
        nets.append(net)
    return _nir.Value(nets)


@contextlib.contextmanager
def _fast_nir():
    """Amaranth's ``Value(nets)``, ``Net.from_cell`` and ``Netlist.resolve_value`` without the
    checks of their arguments (each net an ``Net``, a bit below 2**16), for the duration of a
    conversion: the same results for the netlists Amaranth builds, which pass them, and these
    three were a third of Amaranth's time on a U250-sized learner (tens of millions of calls).
    Restored afterwards, so that the rest of Amaranth (and its simulator) keeps its checks."""
    saved = (_nir.Value.__dict__["__new__"], _nir.Net.__dict__["from_cell"],
             _nir.Netlist.__dict__["resolve_value"])
    _nir.Value.__new__ = staticmethod(_value_new)
    _nir.Net.from_cell = classmethod(_from_cell)
    _nir.Netlist.resolve_value = _resolve_value
    try:
        yield
    finally:
        _nir.Value.__new__, _nir.Net.from_cell, _nir.Netlist.resolve_value = saved


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
            text, domain_ports = _module_rtlil(component, name, top=False)
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
    clock and reset. Otherwise (Amaranth's simulator or Verilog backend, or ``component`` is
    the one being converted) None: the component elaborates its logic itself.

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
        if isinstance(value, _ast.ValueCastable):
            value = value.as_value()
        ports.append(("i" if member.flow == wiring.In else "o", "__".join(map(str, path)), value))
    ports += [("i", port, _DOMAIN_PORTS[port]()) for port in domain_ports]
    return Instance(name, *ports)


def rtlil_text(component: wiring.Component, name: str) -> str:
    """RTLIL of ``component`` as module ``name`` (Amaranth's, without source locations), with
    no initialiser for all-zero memories, then the modules of its :func:`shared_instance`
    components."""
    scope = _SharedModules(name)
    scope.whole.add(id(component))
    token = _shared.set(scope)
    try:
        with _fast_nir():
            text, _ = _module_rtlil(component, name, top=True)
    finally:
        _shared.reset(token)
    return "".join([text, *scope.texts])


def convert(component: wiring.Component, name: str, *, progress=None) -> str:
    """Verilog of ``component`` as module ``name``: ``amaranth.back.verilog.convert(component,
    name=name, emit_src=False)`` without the ``initial`` blocks of all-zero memories, each
    :func:`shared_instance` component a module of its own after the top's (same file).
    ``progress``: a tqdm bar advanced by one after each of the two steps (Amaranth, Yosys)."""
    def step(what):
        if progress is not None:
            progress.set_postfix_str(what)
            progress.refresh()

    step("elaborating, netlist, RTLIL")
    text = rtlil_text(component, name)
    if progress is not None:
        progress.update()
    step("Yosys")
    verilog_text = _convert_rtlil_text(text)
    if progress is not None:
        progress.update()
    return verilog_text
