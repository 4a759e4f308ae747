"""A minimal ``.hwh`` of the ZCU106 block design, for PYNQ without Vivado.

Vivado writes ``<design>.hwh`` (hardware handoff: the block design's cells, their parameters,
ports, bus interfaces, address blocks with every register and field of the packaged IP, and the
processor's memory map) next to the bitstream; ``pynq.Overlay`` parses it into ``ip_dict``,
``mem_dict`` and each IP's ``register_map``. :func:`zcu106_hwh` writes the part of that file
PYNQ reads, for the design :mod:`.zcu106_bd` builds, from the same manifest and register map
as ``package_ip.tcl`` (the register and field properties are those the IP declares, so what
Vivado would copy into its ``.hwh``); docs/boards.md lists what it leaves out. The tests load
it with the real ``pynq`` package. For an accelerator with its own AXI master (the trainer)
the design is the one with S_AXI_HP0_FPD: the master's ``MEMORYMAP`` lists the PS DDR segments
it reaches, the PS module the HP port and its width (``C_SAXIGP2_DATA_WIDTH``, which PYNQ
programs into the port's AFIFM on download); how Vivado spells those entries was not checked
against a Vivado run.
"""

from xml.sax.saxutils import quoteattr

from sw.registry import vlnv

from .model import BOARDS, CONTROL_BLOCK, MEMORY_BLOCK, TARGET_FREQ_MHZ, Accelerator, \
    check_accelerator
from .package_ip import IPXACT_ACCESS, register_access
from .zcu106_bd import (CONTROL_RANGE, HP0_DDR_SEGMENTS, HP0_PORT, HPM0_FPD_BASE, HPM0_WIDTH,
                        HPM1_FPD_BASE, HPM_WINDOW, ZCU106_BOARD_PART, bd_instance, hp0_width,
                        hpm1_width, zcu106_flow, zcu106_refusal)

__all__ = ["PS_INSTANCE", "PS_VLNV", "PL0_DIVISORS", "PL0_ACT_MHZ", "zcu106_hwh"]

#: The Zynq UltraScale+ processing system cell and its IP version (Vivado 2022.2 to 2024.2).
PS_INSTANCE = "zynq_ultra_ps_e_0"
PS_VLNV = "xilinx.com:ip:zynq_ultra_ps_e:3.5"
_AXIMM = "xilinx.com:interface:aximm:1.0"
#: pl_clk0 on the ZCU106 preset: IOPLL (1499.985 MHz) / 5 / 1 (zcu106_bd.tcl asks for 300 MHz),
#: from the board table (:data:`sw.boards.BOARDS`).
PL0_DIVISORS = BOARDS["zcu106"].clock_divisors
PL0_ACT_MHZ = BOARDS["zcu106"].clock_actual_mhz


def _tag(name, attrs, children=None, indent=0):
    pad = "  " * indent
    text = " ".join(f"{k}={quoteattr(str(v))}" for k, v in attrs)
    head = f"{pad}<{name}{' ' + text if text else ''}"
    if not children:
        return [head + "/>"]
    return [head + ">", *children, f"{pad}</{name}>"]


def _props(props, indent):
    return [line for k, v in props for line in _tag("PROPERTY", [("NAME", k), ("VALUE", v)],
                                                    indent=indent)]


def _register(r, indent):
    fields = []
    for f in r.fields:
        access, mwv, ra = IPXACT_ACCESS[f.access]
        fields += _tag("FIELD", [("NAME", f.name)], _props([
            ("DESCRIPTION", f.doc or f"{r.name}.{f.name}"), ("ADDRESS_OFFSET", f.lsb),
            ("ACCESS", access), ("MODIFIED_READ_VALUES", mwv or ""),
            ("WRITE_CONSTRAINT", 0), ("READ_ACTION", ra or ""), ("BIT_OFFSET", f.lsb),
            ("BIT_WIDTH", f.width)], indent + 2), indent + 1)
    return _tag("REGISTER", [("NAME", r.name)], _props([
        ("DESCRIPTION", r.doc or r.name), ("ADDRESS_OFFSET", f"{r.offset:#x}"), ("SIZE", 32),
        ("ACCESS", register_access(r)), ("IS_ENABLED", "true"),
        ("RESET_VALUE", f"{r.reset:#x}")], indent + 1)
        + _tag("FIELDS", [], fields, indent + 1), indent)


def _port(p, indent, **extra):
    attrs = [("DIR", "I" if p["dir"] == "input" else "O")]
    if p["width"] > 1:
        attrs += [("LEFT", p["width"] - 1), ("RIGHT", 0)]
    return _tag("PORT", attrs + [("NAME", p["name"])] + list(extra.items()), indent=indent)


def _pointer(q, lo, indent):
    """A kernel pointer argument as package_ip.tcl declares it: one 64-bit register at the low
    word's offset, one field above the alignment bits."""
    (f,) = lo.fields
    field = _tag("FIELD", [("NAME", q["name"])], _props([
        ("DESCRIPTION", f"device address, {1 << f.lsb}-byte aligned"),
        ("ADDRESS_OFFSET", f.lsb), ("ACCESS", "read-write"), ("MODIFIED_READ_VALUES", ""),
        ("WRITE_CONSTRAINT", 0), ("READ_ACTION", ""), ("BIT_OFFSET", f.lsb),
        ("BIT_WIDTH", 64 - f.lsb)], indent + 2), indent + 1)
    return _tag("REGISTER", [("NAME", q["name"])], _props([
        ("DESCRIPTION", lo.doc or q["name"]), ("ADDRESS_OFFSET", f"{lo.offset:#x}"),
        ("SIZE", 64), ("ACCESS", "read-write"), ("IS_ENABLED", "true"),
        ("RESET_VALUE", f"{lo.reset:#x}")], indent + 1)
        + _tag("FIELDS", [], field, indent + 1), indent)


def _busif(i, ports, indent):
    maps = []
    for logical, physical in i.port_map:
        w = ports[physical]["width"]
        maps += _tag("PORTMAP", [("LEFT", w - 1), ("LOGICAL", logical), ("PHYSICAL", physical),
                                 ("RIGHT", 0)] if w > 1 else
                     [("LOGICAL", logical), ("PHYSICAL", physical)], indent=indent + 2)
    params = _tag("PARAMETER", [("NAME", "PROTOCOL"), ("VALUE", "AXI4LITE" if i.lite
                                                               else "AXI4")], indent=indent + 2)
    params += _tag("PARAMETER", [("NAME", "DATA_WIDTH"), ("VALUE", i.data_width)],
                   indent=indent + 2)
    params += _tag("PARAMETER", [("NAME", "ADDR_WIDTH"), ("VALUE", i.addr_width)],
                   indent=indent + 2)
    return _tag("BUSINTERFACE", [("DATAWIDTH", i.data_width), ("NAME", i.name),
                                 ("TYPE", "MASTER" if i.master else "SLAVE"), ("VLNV", _AXIMM)],
                [*_tag("PARAMETERS", [], params, indent + 1),
                 *_tag("PORTMAPS", [], maps, indent + 1)], indent)


def _memrange(inst, block, base, size, master, slave, memtype, indent):
    return _tag("MEMRANGE", [
        ("ADDRESSBLOCK", block), ("BASENAME", "C_BASEADDR"), ("BASEVALUE", f"{base:#010X}"),
        ("HIGHNAME", "C_HIGHADDR"), ("HIGHVALUE", f"{base + size - 1:#010X}"),
        ("INSTANCE", inst), ("IS_DATA", "TRUE"), ("IS_INSTRUCTION", "TRUE"),
        ("MASTERBUSINTERFACE", master), ("MEMTYPE", memtype), ("SLAVEBUSINTERFACE", slave)],
        indent=indent)


def zcu106_hwh(acc: Accelerator) -> str:
    """The ``.hwh`` text of ``acc`` alone in the ZCU106 block design of :mod:`.zcu106_bd`.

    The accelerator cell (VLNV :func:`~sw.registry.vlnv`, ports, ``s_axi_control`` and
    ``s_axi_mem`` bus interfaces, address blocks ``reg0`` with every register and field and
    ``mem0``), and the PS cell with its HPM0/HPM1 FPD masters, data widths, ``pl_clk0`` and the
    memory map that places ``s_axi_control`` at ``HPM0_FPD_BASE`` and ``s_axi_mem`` at
    ``HPM1_FPD_BASE``, as ``zcu106_bd.tcl`` assigns them. For an accelerator with its own AXI
    master (:func:`~.zcu106_bd.zcu106_flow` ``"master"``: the trainer) no ``mem0`` and no HPM1:
    the master bus interface with a ``MEMORYMAP`` of the PS DDR segments it reaches through
    S_AXI_HP0_FPD, and that port on the PS. Raises ``ValueError`` for an accelerator with no
    ZCU106 block design (a Vitis kernel) or an ``s_axi_mem`` larger than the HPM1 window.
    """
    check_accelerator(acc)
    mem = acc.memory
    flow = zcu106_flow(acc)
    if flow is None:
        raise ValueError(f"acc: {acc.module} is {zcu106_refusal(acc)}: no ZCU106 block "
                         f"design")
    if mem is not None and mem.window > HPM_WINDOW:
        raise ValueError(f"acc: {acc.module}'s s_axi_mem ({mem.window} bytes) does not fit "
                         f"the 256 MiB HPM1_FPD window")
    inst, part = bd_instance(acc.module), BOARDS["zcu106"].part
    ports = {p["name"]: p for p in acc.manifest["ports"]}
    regs = []
    for r in acc.regmap:
        q = acc.pointer_of(r.name)
        if q is None:
            regs += _register(r, 6)
        elif r.name == q["lo"]:
            regs += _pointer(q, r, 6)
    blocks = _tag("ADDRESSBLOCK", [("ACCESS", "read-write"), ("INTERFACE", "s_axi_control"),
                                   ("NAME", CONTROL_BLOCK), ("RANGE", acc.control.window),
                                   ("USAGE", "register")], _tag("REGISTERS", [], regs, 5), 4)
    if mem is not None:
        blocks += _tag("ADDRESSBLOCK", [("ACCESS", "read-write"), ("INTERFACE", "s_axi_mem"),
                                        ("NAME", MEMORY_BLOCK), ("RANGE", mem.window),
                                        ("USAGE", "memory")], indent=4)
    clk_hz = round(TARGET_FREQ_MHZ * 1e6)
    port_lines = []
    for p in acc.manifest["ports"]:
        extra = {"ap_clk": {"SIGIS": "clk", "CLKFREQUENCY": clk_hz},
                 "ap_rst_n": {"SIGIS": "rst", "POLARITY": "ACTIVE_LOW"},
                 "interrupt": {"SIGIS": "INTERRUPT", "SENSITIVITY": "LEVEL_HIGH"}}
        port_lines += _port(p, 4, **extra.get(p["name"], {}))
    busifs = [line for i in acc.interfaces.values() for line in _busif(i, ports, 4)]
    params = [("Component_Name", f"{acc.module}_bd_{inst}"), ("EDK_IPTYPE", "PERIPHERAL"),
              ("C_S_AXI_CONTROL_BASEADDR", f"{HPM0_FPD_BASE:#010X}"),
              ("C_S_AXI_CONTROL_HIGHADDR", f"{HPM0_FPD_BASE + CONTROL_RANGE - 1:#010X}")]
    if mem is not None:
        params += [("C_S_AXI_MEM_BASEADDR", f"{HPM1_FPD_BASE:#010X}"),
                   ("C_S_AXI_MEM_HIGHADDR", f"{HPM1_FPD_BASE + mem.window - 1:#010X}")]
    # A master's view: the PS DDR segments the block design maps in its address space.
    master_map = [] if mem is not None else _tag("MEMORYMAP", [], [
        line for m in acc.masters for name, base, size in HP0_DDR_SEGMENTS
        for line in _memrange(PS_INSTANCE, name, base, size, m.name, HP0_PORT, "MEMORY", 4)],
        3)
    accel = _tag("MODULE", [
        ("FULLNAME", f"/{inst}"), ("HWVERSION", "1.0"), ("INSTANCE", inst),
        ("IPTYPE", "PERIPHERAL"), ("IS_ENABLE", "1"), ("MODCLASS", "PERIPHERAL"),
        ("MODTYPE", acc.module), ("VLNV", vlnv(acc.module))], [
        *_tag("DOCUMENTS", [], indent=3),
        *_tag("ADDRESSBLOCKS", [], blocks, 3),
        *_tag("PARAMETERS", [], [line for k, v in params for line in _tag(
            "PARAMETER", [("NAME", k), ("VALUE", v)], indent=4)], 3),
        *_tag("PORTS", [], port_lines, 3),
        *_tag("BUSINTERFACES", [], busifs, 3),
        *master_map], 2)
    if mem is not None:
        hpm1 = hpm1_width(acc)
        ps_params = [("C_MAXIGP0_DATA_WIDTH", HPM0_WIDTH), ("C_MAXIGP1_DATA_WIDTH", hpm1),
                     ("PSU__USE__M_AXI_GP0", 1), ("PSU__MAXIGP0__DATA_WIDTH", HPM0_WIDTH),
                     ("PSU__USE__M_AXI_GP1", 1), ("PSU__MAXIGP1__DATA_WIDTH", hpm1),
                     ("PSU__USE__M_AXI_GP2", 0)]
        ps_ports = (("M_AXI_HPM0_FPD", "MASTER", HPM0_WIDTH), ("M_AXI_HPM1_FPD", "MASTER", hpm1))
    else:
        # HPM1 off; S_AXI_HP0_FPD (SAXIGP2) on, as wide as the master. PYNQ programs the HP
        # port's AFIFM width from C_SAXIGP2_DATA_WIDTH on download.
        hp0 = hp0_width(acc)
        ps_params = [("C_MAXIGP0_DATA_WIDTH", HPM0_WIDTH), ("C_SAXIGP2_DATA_WIDTH", hp0),
                     ("PSU__USE__M_AXI_GP0", 1), ("PSU__MAXIGP0__DATA_WIDTH", HPM0_WIDTH),
                     ("PSU__USE__M_AXI_GP1", 0), ("PSU__USE__M_AXI_GP2", 0),
                     ("PSU__USE__S_AXI_GP2", 1), ("PSU__SAXIGP2__DATA_WIDTH", hp0)]
        ps_ports = (("M_AXI_HPM0_FPD", "MASTER", HPM0_WIDTH), (HP0_PORT, "SLAVE", hp0))
    ps_params += [("PSU__CRL_APB__PL0_REF_CTRL__FREQMHZ", TARGET_FREQ_MHZ),
                  ("PSU__USE__IRQ0", 1)]
    for i in range(4):                      # pl_clk0 = IOPLL / 5 / 1; pl_clk1..3 off
        on = i == 0
        ps_params += [(f"PSU__FPGA_PL{i}_ENABLE", int(on)),
                      (f"PSU__CRL_APB__PL{i}_REF_CTRL__SRCSEL", "IOPLL"),
                      (f"PSU__CRL_APB__PL{i}_REF_CTRL__DIVISOR0", PL0_DIVISORS[0] if on else 4),
                      (f"PSU__CRL_APB__PL{i}_REF_CTRL__DIVISOR1", PL0_DIVISORS[1] if on else 1),
                      (f"PSU__CRL_APB__PL{i}_REF_CTRL__ACT_FREQMHZ",
                       PL0_ACT_MHZ if on else 100)]
    ps_busifs = []
    for name, kind, width in ps_ports:
        ps_busifs += _tag("BUSINTERFACE", [("DATAWIDTH", width), ("NAME", name),
                                           ("TYPE", kind), ("VLNV", _AXIMM)], indent=4)
    ps = _tag("MODULE", [
        ("CONFIGURABLE", "TRUE"), ("FULLNAME", f"/{PS_INSTANCE}"), ("HWVERSION", "3.5"),
        ("INSTANCE", PS_INSTANCE), ("IPTYPE", "PERIPHERAL"), ("IS_ENABLE", "1"),
        ("IS_PL", "FALSE"), ("MODTYPE", "zynq_ultra_ps_e"), ("VLNV", PS_VLNV)], [
        *_tag("DOCUMENTS", [], indent=3),
        *_tag("PARAMETERS", [], [line for k, v in ps_params for line in _tag(
            "PARAMETER", [("NAME", k), ("VALUE", v)], indent=4)], 3),
        *_tag("PORTS", [], _tag("PORT", [("DIR", "O"), ("NAME", "pl_clk0"), ("SIGIS", "clk"),
                                         ("CLKFREQUENCY", clk_hz)], indent=4), 3),
        *_tag("BUSINTERFACES", [], ps_busifs, 3),
        *_tag("MEMORYMAP", [], [
            *_memrange(inst, CONTROL_BLOCK, HPM0_FPD_BASE, CONTROL_RANGE, "M_AXI_HPM0_FPD",
                       "s_axi_control", "REGISTER", 4),
            *([] if mem is None else _memrange(
                inst, MEMORY_BLOCK, HPM1_FPD_BASE, mem.window, "M_AXI_HPM1_FPD", "s_axi_mem",
                "MEMORY", 4))], 3),
        *_tag("PERIPHERALS", [], _tag("PERIPHERAL", [("INSTANCE", inst)], indent=4), 3)], 2)
    device, package, speed = part[2:].split("-")[0], part.split("-")[1], "-" + \
        part.split("-")[2]
    lines = [
        '<?xml version="1.0" encoding="UTF-8" standalone="no" ?>',
        *_tag("EDKSYSTEM", [("EDWVERSION", "1.2"), ("TIMESTAMP", "generated by rtl_gen"),
                            ("VIVADOVERSION", "2024.1")], [
            *_tag("SYSTEMINFO", [("ARCH", "zynquplus"),
                                 ("BOARD", ZCU106_BOARD_PART.replace("*", "2.6")),
                                 ("DEVICE", device), ("NAME", f"{acc.module}_bd"),
                                 ("PACKAGE", package), ("SPEEDGRADE", speed)], indent=1),
            *_tag("EXTERNALPORTS", [], indent=1),
            *_tag("EXTERNALINTERFACES", [], indent=1),
            *_tag("MODULES", [], [*accel, *ps], 1)]),
    ]
    return "\n".join(lines) + "\n"
