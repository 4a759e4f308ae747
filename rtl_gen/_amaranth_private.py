"""Every use of Amaranth's private API in the project, for the one Amaranth release it was
written against (:data:`WRITTEN_FOR`, the version ``pyproject.toml`` pins).

Importing this module with any other Amaranth raises ``ImportError`` before it touches a private
name; :mod:`rtl_gen.convert` then converts through Amaranth's public
:func:`amaranth.back.verilog.convert` instead (slower, see there). Nothing here changes Amaranth:
its classes and functions are called or subclassed, never replaced.

What is private, and the cost each avoids (measured on the designs named):

* The steps of ``amaranth.hdl._ir.build_netlist`` (``Fragment.prepare`` with ``PortDirection``
  ports, ``_emit_netlist``, ``Netlist.resolve_all_nets``, the ``_compute_*`` passes), run by
  :func:`build_netlist` with :func:`check_comb_cycles` in place of Amaranth's
  ``Netlist.check_comb_cycles``: Amaranth's check links every output bit of a dynamic bit
  select (``word_select``, ``bit_select``: the ``Part`` cell) to every input bit, 47 million
  edges of 40,000 cells and a minute of the check for a row select of an 8 x 8 learner's
  1024-bit block word, and scans an ``AssignmentList``'s assignments once per output bit. The
  public converters always run Amaranth's check. The netlist is a ``Netlist`` subclass
  (:class:`_Netlist`) whose ``resolve_value`` and ``add_value_cell`` skip their per-net checks:
  a tenth of the conversion's CPU time on the largest learners.
* ``amaranth.back.rtlil``'s ``ModuleEmitter``, ``EmptyModuleChecker`` and ``Design`` (the loop of
  ``rtlil.convert_fragment``), with the emitter subclassed (:class:`_ModuleEmitter`): a memory's
  initial contents as one constant string, none at all if they are zero, instead of one netlist
  object per bit (10 million at a 2**18-leaf sum tree; minutes and gigabytes at 2**20, and Yosys
  then writes one ``mem[i] = 0;`` line per word), and ``sigspec`` on plain lists and integers
  (a fifth of the RTLIL emission's time). A module is emitted without the ``top`` attribute
  when it is not the top (a shared module of :func:`rtl_gen.convert.shared_instance`), and
  :func:`module_rtlil` returns the netlist's top-level inputs that are not signature ports
  (the ``sync`` domain's clock and reset), which the shared module's instances connect.
* ``amaranth.back.verilog._convert_rtlil_text``: Amaranth's own Yosys script on that RTLIL
  (:func:`rtlil_to_verilog`); the public converters start from a component, not from text.
* ``amaranth.hdl._nir``'s cell classes, ``Net`` and ``Value``, read by the cycle check and the
  emitter, and ``amaranth.hdl._ast.SignalDict`` (the emitter's name map).

``tb/test_convert.py`` compares the Verilog with Amaranth's own ``verilog.convert`` (byte for
byte once the memory override is removed), checks that a cycle through a dynamic bit select is
still found, and that this module refuses another Amaranth version.
"""

import amaranth

#: The Amaranth release this module was written against and is tested with.
WRITTEN_FOR = "0.5.10"

if amaranth.__version__ != WRITTEN_FOR:
    raise ImportError(f"rtl_gen._amaranth_private uses Amaranth {WRITTEN_FOR}'s internals; "
                      f"Amaranth {amaranth.__version__} is installed")

# The private names, only once the version is known to be the one above.
from amaranth.back import rtlil                                     # noqa: E402
from amaranth.back.verilog import _convert_rtlil_text               # noqa: E402
from amaranth.hdl import CombinationalCycle, Fragment, Value        # noqa: E402
from amaranth.hdl import ValueCastable, _ast, _ir, _nir             # noqa: E402
from amaranth.lib import wiring                                     # noqa: E402

__all__ = ["WRITTEN_FOR", "module_rtlil", "rtlil_to_verilog", "build_netlist", "comb_edges",
           "check_comb_cycles"]


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


def check_comb_cycles(netlist):
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
                    raise CombinationalCycle(
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


def _ports(component):
    """The ports of ``component``'s signature, as ``verilog.convert`` gives them to
    ``Fragment.prepare``: ``{"a__b": (value, PortDirection)}``."""
    ports = {}
    for path, member, value in component.signature.flatten(component):
        if isinstance(value, ValueCastable):
            value = value.as_value()
        if isinstance(value, Value):
            ports["__".join(map(str, path))] = (
                value, _ir.PortDirection.Input if member.flow == wiring.In
                else _ir.PortDirection.Output)
    return ports


class _Netlist(_nir.Netlist):
    """Amaranth's ``Netlist`` whose ``resolve_value`` and ``add_value_cell`` build their
    ``Value`` without checking each net again (``Value(nets)`` asserts that each is a ``Net``,
    ``Net.from_cell`` that each bit is below 2**16; here each net is a ``Net`` by construction,
    and a cell's width is checked once): the same values, in millions of calls. Elaborating,
    netlisting and writing the RTLIL of a U250-sized learner takes 55 s of CPU with them, 61 s
    with Amaranth's. Only the netlists of :func:`build_netlist` are of this class; Amaranth's
    own ``Netlist``, ``Value`` and ``Net`` keep their checks."""

    def resolve_value(self, value):
        connections, nets = self.connections, []
        for net in value:
            while net < 0:
                net = connections[net]
            nets.append(net)
        return tuple.__new__(_nir.Value, nets)

    def add_value_cell(self, width, cell):
        assert width <= 1 << 16
        base = self.add_cell(cell) << 16
        return tuple.__new__(_nir.Value, map(_nir.Net, range(base, base + width)))


def build_netlist(component, name):
    """The netlist of ``component`` as module ``name``, its ports those of its signature:
    ``amaranth.hdl._ir.build_netlist`` (the same steps) with :func:`check_comb_cycles`."""
    fragment = Fragment.get(component, None)
    design = fragment.prepare(ports=_ports(component), hierarchy=(name,))
    netlist = _Netlist()
    _ir._emit_netlist(netlist, design, all_undef_to_ff=False)
    check_comb_cycles(netlist)
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
        """Amaranth's ``$meminit_v2`` cell with its data as one constant string, or none if
        every initial word is zero (no ``initial`` block in the Verilog)."""
        if not any(cell.init):
            return
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


def module_rtlil(component, name, *, top):
    """RTLIL of ``component`` as module ``name`` (its submodules ``name.<sub>``), without source
    locations, marked as the design's top if ``top`` (as ``amaranth.back.rtlil.convert`` writes
    it, with :class:`_ModuleEmitter`'s memories), and the names of its top-level inputs that are
    not signature ports (the clock and reset of ``sync``)."""
    netlist = build_netlist(component, name)
    empty = rtlil.EmptyModuleChecker(netlist)
    design = rtlil.Design(emit_src=False)
    for module_idx, module in enumerate(netlist.modules):
        if empty.is_empty(module_idx):
            continue
        builder = design.module(".".join(module.name), src_loc=module.src_loc)
        if module_idx == 0 and top:
            builder.attribute("top", 1)
        _ModuleEmitter(builder, netlist, module, _ast.SignalDict(), empty_checker=empty).emit()
    signature_ports = _ports(component)
    return str(design), [p for p in netlist.top.ports_i if p not in signature_ports]


def rtlil_to_verilog(text):
    """Verilog of RTLIL ``text``: what ``amaranth.back.verilog.convert`` runs Yosys on RTLIL
    with (``amaranth.back.verilog._convert_rtlil_text``)."""
    return _convert_rtlil_text(text)
