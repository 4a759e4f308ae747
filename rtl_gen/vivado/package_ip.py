"""``package_ip.tcl``: the accelerator as a Vivado IP, bus interfaces and register map declared.

The IP (IP-XACT ``component.xml``, VLNV :func:`sw.registry.vlnv`) gets explicit bus interfaces
(``s_axi_control`` AXI4-Lite, ``s_axi_mem`` AXI4 or the ``m_axi_*`` masters of a kernel,
``ap_clk``, ``ap_rst_n``, ``interrupt``) and one memory map per AXI slave: every register and
field of the register map (offset, size, access, description) in ``s_axi_control``, one
memory block in ``s_axi_mem``. Each AXI master gets an address space of its own name (range
``2**addr_width``, "16E" for 64-bit addresses; width the address width) referenced by its bus
interface's ``MASTER_ADDRESS_SPACE_REF``: what a block design assigns the master's slaves in
(``get_bd_addr_spaces <cell>/m_axi_gmem``) and what Vivado's own inference gives a master. A
kernel's pointer argument is one 64-bit register bound to its master port. ``alveo_xo.tcl``
sources the same script with ``rlk_kernel`` set.
"""

from pathlib import Path

from sw.registry import LIBRARY, VENDOR, VERSION, vlnv
from sw.regmap import ACCESS_TYPES

from .model import BOARDS, CONTROL_BLOCK, MEMORY_BLOCK, Accelerator, check_accelerator
from .tcl import dict_line, prologue, tcl_str

__all__ = ["IPXACT_ACCESS", "register_access", "address_space_range", "package_ip_tcl"]

#: The register map's access types as IP-XACT field properties: ``(ACCESS,
#: MODIFIED_WRITE_VALUE, READ_ACTION)``, ``None`` where IP-XACT's default (plain write, no
#: read side effect) applies.
IPXACT_ACCESS = {
    "rw": ("read-write", None, None),
    "wo": ("write-only", None, None),
    "ro": ("read-only", None, None),
    "rw_sc": ("read-write", "oneToSet", None),       # a written 1 sets; hardware clears
    "ro_cor": ("read-only", None, "clear"),          # reading clears
    "rw_tow": ("read-write", "oneToToggle", None),    # a written 1 toggles (clears a set bit)
}
assert set(IPXACT_ACCESS) == set(ACCESS_TYPES)


def register_access(r) -> str:
    """IP-XACT access of a whole register: ``read-write``, ``read-only`` or ``write-only``,
    from whether any field is readable and any is host-writable."""
    readable = any(f.readable for f in r.fields)
    writable = any(f.host_writable for f in r.fields)
    return ("read-write" if readable and writable else
            "read-only" if readable else "write-only")


def address_space_range(addr_width: int) -> str:
    """IP-XACT range of a master's address space, ``2 ** addr_width`` bytes, as the packager
    writes it: with the largest binary unit that divides it (``64`` -> ``"16E"``, ``32`` ->
    ``"4G"``), as Vivado infers it for a master and Xilinx's packaging scripts spell it."""
    if addr_width < 1:
        raise ValueError(f"address width {addr_width}: a master addresses at least 2 bytes")
    for unit, shift in (("E", 60), ("P", 50), ("T", 40), ("G", 30), ("M", 20), ("K", 10)):
        if addr_width >= shift:
            return f"{1 << (addr_width - shift)}{unit}"
    return str(1 << addr_width)


# -- package_ip.tcl ----------------------------------------------------------------------------
def package_ip_tcl(acc: Accelerator, out_dir) -> str:
    """TCL that packages ``acc`` as a Vivado IP with its bus interfaces and register map.

    Parameters
    ----------
    acc : Accelerator
    out_dir : path
        Where the script will live (paths inside it are relative to it).

    Returns
    -------
    str
        The text of ``package_ip.tcl``.
    """
    check_accelerator(acc)
    buses = list(acc.interfaces.values())
    L = _header(acc, Path(out_dir), buses)
    L += _project(acc)
    for i in buses:
        L += _bus_interface(acc, i)
    L += _clock_reset_interrupt(buses)
    L += _control_map(acc)
    L += _memory_or_address_spaces(acc)
    L += _kernel_and_save(acc)
    return "\n".join(L)


# Each section below returns its lines of the script, in the script's order.
def _header(acc: Accelerator, out_dir: Path, buses) -> list:
    """The prologue: what the IP declares, the variables a caller may set."""
    rm, mem = acc.regmap, acc.memory
    n_fields = sum(len(r.fields) for r in rm)
    pointers = (acc.kernel or {}).get("pointers", [])
    return prologue(acc, out_dir, "package_ip.tcl", [
        f"Packages {acc.module} as a Vivado IP (IP-XACT component.xml), VLNV {vlnv(acc.module)}:",
        *(f"  {i.name:<14} AXI4{'-Lite' if i.lite else ''} {'master' if i.master else 'slave'}, "
          f"{i.addr_width}-bit address, {i.data_width}-bit data" for i in buses),
        "  ap_clk         clock of every interface; ap_rst_n its active-low reset",
        "  interrupt      level-high interrupt (GIER & IP_ISR of the ap_ctrl_hs registers)",
        f"Memory maps: s_axi_control block {CONTROL_BLOCK} with the {len(rm)} registers and "
        f"{n_fields} fields of",
        "the register map (PYNQ builds `register_map` from them: they reach the .hwh of a block",
        (f"design); s_axi_mem block {MEMORY_BLOCK}, {mem.window} bytes of memory." if mem else
         "design). A kernel pointer argument (two 32-bit words in the map) is one 64-bit"),
        *([] if mem else ["register with ASSOCIATED_BUSIF naming the m_axi port it addresses: "
                          + ", ".join(f"{q['name']} -> {q['port']}" for q in pointers) + "."]),
        "",
        "Variables a caller may set before sourcing this script:",
        "  rlk_ip_dir   output directory (default: first -tclargs argument, else ./ip)",
        "  rlk_kernel   1: also mark the IP as a Vitis RTL kernel (ap_ctrl_hs) and run the",
        "               kernel design-rule check (alveo_xo.tcl does this)",
        "  rlk_part     part of the scratch project (default the ZCU106's; the IP itself is",
        "               plain RTL, declared for every family)",
    ], "vivado -mode batch -source package_ip.tcl [-tclargs <ip_dir>]")


def _project(acc: Accelerator) -> list:
    """Steps 1 and 2, the scratch project and the packaging, and the start of step 3: the
    inferred bus interfaces, memory maps (and the masters' address spaces) removed."""
    L = [
        "if {![info exists rlk_ip_dir]} {",
        "    set rlk_ip_dir [file normalize [rlk::arg 0 [file join $script_dir ip]]]",
        "}",
        "if {![info exists rlk_kernel]} { set rlk_kernel 0 }",
        f"if {{![info exists rlk_part]}} {{ set rlk_part {BOARDS['zcu106'].part} }}",
        "set verilog [file join $hdl_dir $module.v]",
        "rlk::require_file $verilog \"run `make` to emit hdl/\"",
        "",
        "# 1. A scratch project holding only the accelerator's Verilog. ipx::package_project",
        "#    wants a project on disk (in-memory projects are deprecated for packaging).",
        "set work_dir [file join [file dirname $rlk_ip_dir] package_ip_work]",
        "file delete -force $work_dir $rlk_ip_dir",
        "create_project -force rlk_package $work_dir -part $rlk_part",
        "add_files -norecurse $verilog",
        "set_property top $module [current_fileset]",
        "update_compile_order -fileset sources_1",
        "",
        "# 2. Package it; -import_files copies the Verilog into the IP (self-contained).",
        f"ipx::package_project -root_dir $rlk_ip_dir -vendor {VENDOR} -library {LIBRARY} \\",
        "    -taxonomy /UserIP -import_files -force",
        "set core [ipx::current_core]",
        *dict_line([("NAME", acc.module), ("VERSION", VERSION),
                     ("DISPLAY_NAME", acc.module),
                     ("DESCRIPTION", acc.manifest.get("summary", acc.module)),
                     ("VENDOR_DISPLAY_NAME", "rl-fpga-kernels")], "$core"),
        "# Plain RTL: usable on every family (zynquplus for the ZCU106, virtexuplus for Alveo).",
        "set_property SUPPORTED_FAMILIES {} $core",
        "set_property AUTO_FAMILY_SUPPORT_LEVEL level_2 $core",
        "",
        "# 3. Bus interfaces, declared from the manifest's ports rather than inferred: inference",
        "#    guesses from names and also creates its own memory map and address block, and a",
        "#    second block on s_axi_control would make PYNQ drop the register map. Start clean.",
        "ipx::remove_all_bus_interface $core",
        "foreach mm [ipx::get_memory_maps -of_objects $core] {",
        "    ipx::remove_memory_map [get_property NAME $mm] $core",
        "}",
    ]
    if acc.masters:
        L += [
            "# Inference also gives each master an address space, which outlives its bus",
            "# interface; step 5 declares them again.",
            "foreach as [ipx::get_address_spaces -of_objects $core] {",
            "    ipx::remove_address_space [get_property NAME $as] $core",
            "}",
        ]
    return L


def _bus_interface(acc: Accelerator, i) -> list:
    """Step 3 for the AXI interface ``i``: its bus interface, port map and (a master's)
    burst limits."""
    mode = "master" if i.master else "slave"
    L = [
        "",
        f"# {i.name}: AXI4{'-Lite' if i.lite else ''} {mode}, "
        f"{len(i.port_map)} ports (logical name <- port).",
        f"set bif [ipx::add_bus_interface {i.name} $core]",
        *dict_line([("ABSTRACTION_TYPE_VLNV", "xilinx.com:interface:aximm_rtl:1.0"),
                     ("BUS_TYPE_VLNV", "xilinx.com:interface:aximm:1.0"),
                     ("INTERFACE_MODE", mode)], "$bif"),
        "foreach {logical physical} {",
    ]
    pairs = [f"{lg:<8} {ph:<26}" for lg, ph in i.port_map]
    for k in range(0, len(pairs), 2):
        L.append(("    " + "  ".join(pairs[k:k + 2])).rstrip())
    L += [
        "} {",
        "    set_property PHYSICAL_NAME $physical [ipx::add_port_map $logical $bif]",
        "}",
    ]
    if i.master:
        lim = acc.kernel["m_axi"][i.name]
        L += [
            "# What the master issues, so the interconnect Vitis inserts sizes its buffers:",
            "# the longest burst and the bursts in flight per direction.",
        ]
        for param, value in (("MAX_BURST_LENGTH", lim["max_burst"]),
                             ("NUM_READ_OUTSTANDING", lim["outstanding"]),
                             ("NUM_WRITE_OUTSTANDING", lim["outstanding"])):
            L.append(f"set_property VALUE {value} [ipx::add_bus_parameter {param} $bif]")
    return L


def _clock_reset_interrupt(buses) -> list:
    """Step 3's single-signal interfaces: ap_clk (associated with every AXI interface),
    ap_rst_n and interrupt."""
    busifs = ":".join(i.name for i in buses)
    return [
        "",
        "# ap_clk clocks every AXI interface; ap_rst_n is its (synchronous) active-low reset.",
        "# ASSOCIATED_BUSIF/ASSOCIATED_RESET tell IP integrator and Vitis which clock domain the",
        "# interfaces are in. No FREQ_HZ: the block design or the platform propagates it.",
        "set bif [ipx::add_bus_interface ap_clk $core]",
        *dict_line([("ABSTRACTION_TYPE_VLNV", "xilinx.com:signal:clock_rtl:1.0"),
                     ("BUS_TYPE_VLNV", "xilinx.com:signal:clock:1.0"),
                     ("INTERFACE_MODE", "slave")], "$bif"),
        "set_property PHYSICAL_NAME ap_clk [ipx::add_port_map CLK $bif]",
        f"set_property VALUE {busifs} [ipx::add_bus_parameter ASSOCIATED_BUSIF $bif]",
        "set_property VALUE ap_rst_n [ipx::add_bus_parameter ASSOCIATED_RESET $bif]",
        "",
        "set bif [ipx::add_bus_interface ap_rst_n $core]",
        *dict_line([("ABSTRACTION_TYPE_VLNV", "xilinx.com:signal:reset_rtl:1.0"),
                     ("BUS_TYPE_VLNV", "xilinx.com:signal:reset:1.0"),
                     ("INTERFACE_MODE", "slave")], "$bif"),
        "set_property PHYSICAL_NAME ap_rst_n [ipx::add_port_map RST $bif]",
        "set_property VALUE ACTIVE_LOW [ipx::add_bus_parameter POLARITY $bif]",
        "",
        "# The interrupt is a level (GIER & (IP_ISR bits)) held until the host clears IP_ISR;",
        "# LEVEL_HIGH lets an AXI interrupt controller configure its input as a level.",
        "set bif [ipx::add_bus_interface interrupt $core]",
        *dict_line([("ABSTRACTION_TYPE_VLNV", "xilinx.com:signal:interrupt_rtl:1.0"),
                     ("BUS_TYPE_VLNV", "xilinx.com:signal:interrupt:1.0"),
                     ("INTERFACE_MODE", "master")], "$bif"),
        "set_property PHYSICAL_NAME interrupt [ipx::add_port_map INTERRUPT $bif]",
        "set_property VALUE LEVEL_HIGH [ipx::add_bus_parameter SENSITIVITY $bif]",
    ]


def _control_map(acc: Accelerator) -> list:
    """Step 4: s_axi_control's memory map, its address block, every register and field (a
    kernel's pointer arguments as 64-bit registers)."""
    rm, ctl = acc.regmap, acc.control
    L = [
        "",
        "# 4. s_axi_control's memory map: one address block covering the port's decoded window",
        f"#    ({ctl.window} bytes = 2**{ctl.addr_width}, the register span {rm.span:#x} rounded "
        "up to a power of two;",
        "#    unmapped words inside it answer SLVERR), then every register and field.",
        "#    Access types of sw.regmap as IP-XACT field properties:",
    ]
    for a, (acc_, mwv, ra) in IPXACT_ACCESS.items():
        extra = "".join(f" + {k} {v}" for k, v in (("MODIFIED_WRITE_VALUE", mwv),
                                                   ("READ_ACTION", ra)) if v)
        L.append(f"#      {a:<7} ACCESS {acc_}{extra}")
    L += [
        "set mm [ipx::add_memory_map s_axi_control $core]",
        "set_property SLAVE_MEMORY_MAP_REF s_axi_control \\",
        "    [ipx::get_bus_interfaces s_axi_control -of_objects $core]",
        f"set block [ipx::add_address_block {CONTROL_BLOCK} $mm]",
        *dict_line([("BASE_ADDRESS", 0), ("RANGE", ctl.window), ("WIDTH", 32),
                     ("USAGE", "register"), ("ACCESS", "read-write")], "$block"),
    ]
    for r in rm:
        q = acc.pointer_of(r.name)
        if q is not None:
            if r.name == q["lo"]:
                L += _pointer_register(q, r)
            continue
        reg_access = register_access(r)
        L += [
            "",
            f"set reg [ipx::add_register {r.name} $block]",
            f"set_property -dict {{ADDRESS_OFFSET {r.offset:#04x} SIZE 32 ACCESS {reg_access}}} "
            "$reg",
            f"set_property DESCRIPTION {tcl_str(r.doc or r.name)} $reg",
        ]
        for f in r.fields:
            ipx_access, mwv, ra = IPXACT_ACCESS[f.access]
            props = f"BIT_OFFSET {f.lsb} BIT_WIDTH {f.width} ACCESS {ipx_access}"
            if mwv:
                props += f" MODIFIED_WRITE_VALUE {mwv}"
            if ra:
                props += f" READ_ACTION {ra}"
            L += [f"set field [ipx::add_field {f.name} $reg]",
                  f"set_property -dict {{{props}}} $field",
                  f"set_property DESCRIPTION {tcl_str(f.doc or f'{r.name}.{f.name}')} $field"]
    return L


def _memory_or_address_spaces(acc: Accelerator) -> list:
    """Step 5: s_axi_mem's memory map, or the AXI masters' address spaces."""
    mem = acc.memory
    if mem is not None:
        return [
            "",
            f"# 5. s_axi_mem's memory map: one memory block over its {mem.window}-byte window",
            f"#    (2**{mem.addr_width}; the memory regions and their layout: docs/ and "
            "the block's sw/<block>/spec.py).",
            "set mm [ipx::add_memory_map s_axi_mem $core]",
            "set_property SLAVE_MEMORY_MAP_REF s_axi_mem \\",
            "    [ipx::get_bus_interfaces s_axi_mem -of_objects $core]",
            f"set block [ipx::add_address_block {MEMORY_BLOCK} $mm]",
            *dict_line([("BASE_ADDRESS", 0), ("RANGE", mem.window), ("WIDTH", mem.data_width),
                         ("USAGE", "memory"), ("ACCESS", "read-write"),
                         ("DESCRIPTION", f"{acc.module} memory regions")], "$block"),
        ]
    if not acc.masters:
        return ["", "# 5. No memory map for the AXI master(s): they address device memory."]
    L = [
        "",
        "# 5. No memory map for the AXI master(s): they address memory elsewhere. Each gets",
        "#    an address space of its own name, as wide as its addresses, referenced by its",
        "#    bus interface (MASTER_ADDRESS_SPACE_REF), as Vivado's inference declares a",
        "#    master: a block design assigns the slaves the master reaches in it",
        "#    (get_bd_addr_spaces <cell>/<master>); package_xo sees the master as in an",
        "#    inferred RTL kernel.",
    ]
    for i in acc.masters:
        L += [
            f"set space [ipx::add_address_space {i.name} $core]",
            *dict_line([("RANGE", address_space_range(i.addr_width)),
                         ("WIDTH", i.addr_width)], "$space"),
            f"set_property MASTER_ADDRESS_SPACE_REF {i.name} \\",
            f"    [ipx::get_bus_interfaces {i.name} -of_objects $core]",
        ]
    return L


def _kernel_and_save(acc: Accelerator) -> list:
    """Steps 6 and 7: the Vitis kernel properties (with ``rlk_kernel``), the checks, the
    save."""
    return [
        "",
        "# 6. Vitis RTL kernel properties, only when packaging for Alveo (alveo_xo.tcl): the",
        "#    ap_ctrl_hs protocol of CTRL/GIER/IP_IER/IP_ISR; the platform sets the clock.",
        "if {$rlk_kernel} {",
        "    set_property SDX_KERNEL true $core",
        "    set_property SDX_KERNEL_TYPE rtl $core",
        "    set_property VITIS_DRC {ctrl_protocol ap_ctrl_hs} $core",
        "    set_property IPI_DRC {ignore_freq_hz true} $core",
        "}",
        "",
        "# 7. GUI files and checksums, the integrity check (the kernel one for Vitis), save.",
        "ipx::create_xgui_files $core",
        "ipx::update_checksums $core",
        "if {$rlk_kernel} {",
        "    ipx::check_integrity -kernel $core",
        "} else {",
        "    ipx::check_integrity $core",
        "}",
        "ipx::save_core $core",
        "close_project -delete",
        f"puts \"rlk: packaged {vlnv(acc.module)} in $rlk_ip_dir\"",
        "",
    ]


def _pointer_register(q: dict, lo) -> list:
    """IP-XACT lines of a kernel pointer argument: one 64-bit register at the low word's offset
    (the two 32-bit words of the register map), with ASSOCIATED_BUSIF = the m_axi port: what
    package_xo reads to bind the argument to the port (as the RTL Kernel Wizard declares it)."""
    (f,) = lo.fields
    return [
        "",
        f"# {q['name']}: 64-bit pointer argument ({q['lo']} + {q['hi']}) for {q['port']}.",
        f"set reg [ipx::add_register {q['name']} $block]",
        f"set_property -dict {{ADDRESS_OFFSET {lo.offset:#04x} SIZE 64 ACCESS read-write}} $reg",
        f"set_property DESCRIPTION {tcl_str(lo.doc or q['name'])} $reg",
        f"set_property VALUE {q['port']} [ipx::add_register_parameter ASSOCIATED_BUSIF $reg]",
        f"set field [ipx::add_field {q['name']} $reg]",
        f"set_property -dict {{BIT_OFFSET {f.lsb} BIT_WIDTH {64 - f.lsb} ACCESS read-write}} "
        "$field",
        f"set_property DESCRIPTION {tcl_str(f'device address, {1 << f.lsb}-byte aligned')} "
        "$field",
    ]

