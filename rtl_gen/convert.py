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

It uses Amaranth's internal modules (``_ir``, ``_nir``, ``back.rtlil``): Amaranth is pinned
(``pyproject.toml``), and the test above catches a change.
"""

from amaranth.back import rtlil
from amaranth.back.verilog import _convert_rtlil_text
from amaranth.hdl import _ast, _ir, _nir
from amaranth.lib import wiring

__all__ = ["convert", "rtlil_text", "build_netlist", "comb_edges"]


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


def _check_comb_cycles(netlist):
    """Amaranth's ``Netlist.check_comb_cycles`` on :func:`comb_edges`, without recursion:
    ``CombinationalCycle`` naming the cells of the first cycle found."""
    checked, busy = set(), set()

    def visit(root):
        if root in checked:
            return
        stack = [(root, None)]
        busy.add(root)
        while stack:
            net, it = stack[-1]
            if it is None:
                if net.is_const:
                    srcs = []
                elif net.is_late:
                    srcs = [netlist.connections[net]]
                else:
                    srcs = comb_edges(netlist.cells[net.cell], net.bit)
                it = iter(srcs)
                stack[-1] = (net, it)
            for src in it:
                if src in checked:
                    continue
                if src in busy:
                    path = [n for n, _ in stack[[n for n, _ in stack].index(src):]]
                    raise _nir.CombinationalCycle(
                        "Combinational cycle detected, through the nets "
                        + ", ".join(_describe(netlist, n) for n in path))
                busy.add(src)
                stack.append((src, None))
                break
            else:
                stack.pop()
                busy.discard(net)
                checked.add(net)

    for cell_idx, cell in enumerate(netlist.cells):
        for net in cell.output_nets(cell_idx):
            visit(net)
    for value in netlist.signals.values():
        for net in value:
            visit(net)


def _describe(netlist, net):
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


def rtlil_text(component: wiring.Component, name: str) -> str:
    """RTLIL of ``component`` as module ``name`` (Amaranth's, without source locations), with
    no initialiser for all-zero memories."""
    fragment = _ir.Fragment.get(component, None)
    netlist = build_netlist(fragment, _ports(component), name)
    empty = rtlil.EmptyModuleChecker(netlist)
    design = rtlil.Design(emit_src=False)
    for module_idx, module in enumerate(netlist.modules):
        if empty.is_empty(module_idx):
            continue
        builder = design.module(".".join(module.name), src_loc=module.src_loc)
        if module_idx == 0:
            builder.attribute("top", 1)
        _ModuleEmitter(builder, netlist, module, _ast.SignalDict(), empty_checker=empty).emit()
    return str(design)


def convert(component: wiring.Component, name: str, *, progress=None) -> str:
    """Verilog of ``component`` as module ``name``: ``amaranth.back.verilog.convert(component,
    name=name, emit_src=False)`` without the ``initial`` blocks of all-zero memories.
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
