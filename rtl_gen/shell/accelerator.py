"""Shared kernel shell: what every accelerator top level does the same way.

Every accelerator (GAE, GAE kernel, learner, replay) exposes the ports a Vivado block design or a
Vitis/XRT kernel expects: ``ap_clk``, ``ap_rst_n`` (active low, synchronous), ``interrupt`` and
the flat AXI ports of its bus bridges (an :class:`~rtl_gen.shell.lite_csr.AxiLiteCsr` on
``s_axi_control`` plus an AXI4 slave or master). This module is the one copy of that glue:

* :func:`shell_members` builds the component signature from the bridges,
* :func:`shell_domain` makes the local ``sync`` domain from ``ap_clk``/``ap_rst_n``,
* :func:`connect_bridges` passes the bridges' AXI ports through to the top level,
* :func:`ap_ctrl_hs` wires the ``ap_ctrl_hs`` handshake and the refused-start rule (AP_START
  written while busy is dropped, not queued, and sets a sticky flag),
* :func:`drive_constants` drives constant read-only registers (``HW_*``) field by field,
* :func:`host_port_members` and :func:`check_host_options` give an accelerator the option to
  show its memory as a local word port instead of the AXI4 slave ``s_axi_mem``, so that a DMA
  shell (:class:`~rtl_gen.shell.window.WindowKernel`) can drive it; :func:`host_shell`
  elaborates either.
"""

import types

from amaranth.hdl import ClockDomain, Signal
from amaranth.lib.wiring import In, Out

__all__ = ["shell_members", "shell_domain", "connect_bridges", "ap_ctrl_hs", "drive_constants",
           "host_port_members", "check_host_options", "accelerator_members", "HOST_PORTS"]

#: Where an accelerator's memory goes: ``"axi"``, the AXI4 slave ``s_axi_mem`` (standalone,
#: with its own ``ap_clk``/``ap_rst_n``); ``"local"``, the word port of
#: :func:`host_port_members` (embedded in a DMA shell, clocked by the parent's ``sync``).
HOST_PORTS = ("axi", "local")


def _bridge_ports(bridge):
    prefix = f"{bridge.prefix}_"
    for name, member in bridge.signature.members.items():
        if name.startswith(prefix):
            yield name, member


def shell_members(*bridges) -> dict:
    """Signature members of a kernel top level: ``ap_clk``, ``ap_rst_n``, ``interrupt`` and the
    ``<prefix>_*`` AXI ports of each bridge (anything with ``prefix`` and ``signature``)."""
    members = {"ap_clk": In(1), "ap_rst_n": In(1), "interrupt": Out(1)}
    for bridge in bridges:
        for name, member in _bridge_ports(bridge):
            if name in members:
                raise ValueError(f"two bridges declare the port {name!r}")
            members[name] = member
    return members


def shell_domain(m, top):
    """Add the local ``sync`` domain clocked by ``top.ap_clk``, reset while ``ap_rst_n`` is low."""
    m.domains.sync = cd = ClockDomain("sync", local=True)
    m.d.comb += [cd.clk.eq(top.ap_clk), cd.rst.eq(~top.ap_rst_n)]
    return cd


def connect_bridges(m, top, *bridges):
    """Connect each bridge's ``<prefix>_*`` ports to the same-named ports of ``top``."""
    for bridge in bridges:
        for name, member in _bridge_ports(bridge):
            outer, inner = getattr(top, name), getattr(bridge, name)
            if member.flow == In:
                m.d.comb += inner.eq(outer)
            else:
                m.d.comb += outer.eq(inner)


def ap_ctrl_hs(m, top, csr, *, busy, ready=None, done=None, start=None, clear=None):
    """The ``ap_ctrl_hs`` handshake between ``csr`` and a core, and the refused-start rule.

    ``busy`` (level) drives AP_IDLE; ``ready`` and ``done`` (one-cycle pulses) drive AP_READY and
    AP_DONE unless None (the caller drives them itself); ``start`` (a core input) follows
    AP_START unless None. An AP_START write while ``busy`` and AUTO_RESTART is off is refused:
    AP_START is cleared without a handshake and the returned sticky signal rises; it falls in the
    cycle ``clear`` is high (default ``ready``: the next accepted start).

    Returns ``(start_refused, refused)``: the sticky flag for STATUS and the one-cycle pulse.
    """
    refused = Signal()
    start_refused = Signal()
    m.d.comb += [
        csr.ap_idle.eq(~busy),
        top.interrupt.eq(csr.interrupt),
        refused.eq(csr.ap_start_write & busy & ~csr.auto_restart),
        csr.ap_start_refuse.eq(refused),
    ]
    if start is not None:
        m.d.comb += start.eq(csr.ap_start)
    if ready is not None:
        m.d.comb += csr.ap_ready.eq(ready)
    if done is not None:
        m.d.comb += csr.ap_done.eq(done)
    clear = ready if clear is None else clear
    if clear is None:
        raise ValueError("ap_ctrl_hs needs ready or clear to reset the START_REFUSED flag")
    # The start that clears the flag and a refused write cannot fall in the same cycle: a start
    # is accepted only while idle, a write is refused only while busy.
    with m.If(clear):
        m.d.sync += start_refused.eq(0)
    with m.Elif(refused):
        m.d.sync += start_refused.eq(1)
    return start_refused, refused


def drive_constants(m, csr, regmap, values: dict):
    """Drive the read-only fields of the registers named in ``values`` with constants.

    ``values`` maps a register name to its 32-bit value; each field gets its bits, on the CSR
    port ``<reg>_<field>`` (or ``<reg>`` for a field named like its register).
    """
    for reg, value in values.items():
        for f in regmap[reg].fields:
            port = f"{reg}_{f.name}".lower() if f.name != reg else reg.lower()
            m.d.comb += getattr(csr, port).eq(f.get(value))


def host_port_members(data_width: int, addr_width: int) -> dict:
    """The local memory port of an accelerator built with ``host_port="local"``.

    ``host_addr`` ``In(addr_width)`` (word address), ``host_re`` ``In(1)`` (read; the word is
    on ``host_rdata`` ``Out(data_width)`` in the next cycle), ``host_we`` ``In(data_width // 8)``
    (byte write enables), ``host_wdata`` ``In(data_width)``, and ``host_enable`` ``Out(1)``:
    1 while the host may access the memory (the accelerator is idle); accesses while it is 0
    do not touch the memory (read data is then undefined). The same contract as the memory side of
    :class:`~rtl_gen.shell.mm_slave.AxiMemorySlave`, seen from the memory.
    """
    return {"host_addr": In(addr_width), "host_re": In(1), "host_we": In(data_width // 8),
            "host_wdata": In(data_width), "host_rdata": Out(data_width), "host_enable": Out(1)}


def check_host_options(base_map, host_port, regmap):
    """Validate an accelerator's ``host_port`` and ``regmap`` options; return the map to use.

    ``regmap`` (None: ``base_map``) must hold the registers of ``base_map`` unchanged and may
    add more after them (what a DMA shell adds).
    """
    if host_port not in HOST_PORTS:
        raise ValueError(f"host_port must be one of {', '.join(map(repr, HOST_PORTS))}, "
                         f"not {host_port!r}")
    if regmap is None:
        return base_map
    n = len(base_map.registers)
    if (not hasattr(regmap, "registers") or regmap.protocol != base_map.protocol
            or tuple(regmap.registers[:n]) != tuple(base_map.registers)):
        raise ValueError(f"regmap must start with the registers of {base_map.name!r} "
                         f"unchanged, not {regmap!r}")
    return regmap


def accelerator_members(csr, mem, host_port, *, data_width, addr_width) -> dict:
    """Members of an accelerator top: :func:`shell_members` of ``csr`` and ``mem`` for
    ``host_port="axi"``; for ``"local"``, ``interrupt``, the ``csr`` ports and
    :func:`host_port_members` (no clock or reset ports: the parent's ``sync`` domain)."""
    if host_port == "axi":
        return shell_members(csr, mem)
    members = shell_members(csr)
    del members["ap_clk"], members["ap_rst_n"]
    members.update(host_port_members(data_width, addr_width))
    return members


def host_shell(m, top, csr, mem, host_port, *, core_name, core):
    """Elaborate an accelerator's shell around ``core`` (added as submodule ``core_name``).

    For ``host_port="axi"``: the ``sync`` domain from ``ap_clk``/``ap_rst_n``, ``csr`` and the
    AXI4 slave ``mem`` as submodules, their ports passed through; returns ``mem``. For
    ``"local"``: ``csr`` only (the parent's ``sync`` domain), and the memory port is the
    top's ``host_*`` ports, returned with ``mem_*`` names (what the slave's side offers) so
    the caller wires one memory interface either way.
    """
    axi = host_port == "axi"
    if axi:
        shell_domain(m, top)
    m.submodules.csr = csr
    if axi:
        m.submodules.mem = mem
    m.submodules[core_name] = core
    if axi:
        connect_bridges(m, top, csr, mem)
        return mem
    connect_bridges(m, top, csr)
    return types.SimpleNamespace(
        mem_addr=top.host_addr, mem_re=top.host_re, mem_we=top.host_we,
        mem_wdata=top.host_wdata, mem_rdata=top.host_rdata, enable=top.host_enable)
