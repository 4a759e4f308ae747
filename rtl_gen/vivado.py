"""Vivado and Vitis scripts generated from an accelerator's manifest and register map.

Everything board-facing about a shipped accelerator (``hdl/<module>/``) is derived here from the
two files :func:`rtl_gen.emit.emit` writes next to its Verilog: the manifest
``<module>.json`` (ports, widths, clock and reset) and the register map ``<module>_regs.json``
(:class:`~sw.regmap.RegisterMap`). Nothing is typed twice, so the IP metadata cannot
drift from the RTL: a register added to the map appears in the packaged IP, and therefore in
the ``.hwh`` PYNQ reads, at the next ``make vivado-scripts``.

Generated per accelerator, into ``build/vivado/<module>/`` (not committed: they are a pure
function of ``hdl/``, which is committed and checked for freshness by ``tb/test_hdl.py``):

``package_ip.tcl``
    Packages the Verilog as a Vivado IP (IP-XACT ``component.xml``), VLNV :func:`vlnv`, with
    explicit bus interfaces (``s_axi_control`` AXI4-Lite, ``s_axi_mem`` AXI4, ``ap_clk``,
    ``ap_rst_n``, ``interrupt``) and one memory map per AXI slave: every register and field of
    the register map (offset, size, access, description) in ``s_axi_control``, one memory block
    in ``s_axi_mem``.
``zcu106_bd.tcl``
    ZCU106 block design (Zynq UltraScale+ PS, 300 MHz ``pl_clk0``, SmartConnects on HPM0/HPM1,
    an AXI interrupt controller for PYNQ), bitstream, and ``<module>.bit`` + ``<module>.hwh``
    side by side for ``pynq.Overlay``.
``alveo_xo.tcl``, ``alveo_u200.cfg``, ``alveo_u250.cfg``, ``kernel.xml``
    Vitis RTL kernel packaging (``package_xo``, ``ap_ctrl_hs``) and ``v++ --link``
    configurations. A Vitis kernel moves buffers only through AXI4 *master* ports: for a
    kernel with one (:class:`~rtl_gen.gae.kernel.GaeKernel`, ``m_axi_gmem``) the pointer
    argument and the ``m_axi`` port go into the IP and into ``kernel.xml``
    (:func:`kernel_xml`), and the ``.cfg`` files connect the port to a DDR bank; for an
    accelerator whose memory is an AXI4 slave the scripts stop with an explanation (see
    :data:`DMA_GAP`). Alveo cards get no ZCU106 script, ZCU106 designs need ``s_axi_mem``.
``ooc_timing.tcl``
    Out-of-context synthesis and implementation of the accelerator alone at
    :data:`TARGET_FREQ_MHZ` on any part: the quickest timing answer.

The generated scripts source ``scripts/vivado/rlk_common.tcl`` and the constraints in
``constraints/``; ``python -m rtl_gen.vivado`` (``make vivado``, ``make vivado-scripts``) writes
them and runs Vivado / v++ when they are on ``PATH``.
"""

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from sw.registry import LIBRARY, VENDOR, VERSION, vlnv
from sw.regmap import ACCESS_TYPES, RegisterMap

__all__ = [
    "VENDOR", "LIBRARY", "VERSION", "vlnv", "bd_instance", "TARGET_FREQ_MHZ", "BOARDS", "Board",
    "IPXACT_ACCESS", "CONTROL_BLOCK", "MEMORY_BLOCK", "DMA_GAP", "Accelerator", "AxiInterface",
    "find_accelerators", "tcl_str", "package_ip_tcl", "zcu106_bd_tcl", "alveo_xo_tcl",
    "kernel_xml", "vpp_link_cfg", "ooc_timing_tcl", "write_scripts", "board_commands", "main",
    "ALVEO_MEMORY",
]

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS_DIR = ROOT / "scripts" / "vivado"
CONSTRAINTS_DIR = ROOT / "constraints"

#: Kernel clock target of every flow: PS ``pl_clk0`` on the ZCU106, ``kernel_frequency`` on
#: Alveo, the ``create_clock`` of ``constraints/accel_ooc.xdc``.
TARGET_FREQ_MHZ = 300

#: Address block names; a block design addresses them as ``<cell>/<busif>/<block>``.
CONTROL_BLOCK = "reg0"
MEMORY_BLOCK = "mem0"

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

#: Why the Alveo flow stops at ``package_xo`` (printed by ``alveo_xo.tcl`` and the CLI).
DMA_GAP = (
    "a Vitis kernel exchanges buffer data with the host only through AXI4 master (m_axi) ports "
    "that XRT binds to device memory (UG1393, 'Kernel Interface Requirements'); this "
    "accelerator's memory is the AXI4 slave s_axi_mem, which XRT cannot address. Missing: a DMA "
    "shell around the kernel, i.e. an m_axi port plus buffer-address arguments in s_axi_control "
    "and a copy engine between device DDR and s_axi_mem. The kernel blocks are the accelerators "
    "inside such a shell: build hdl/gae_kernel_n8, hdl/replay_kernel_k16 or "
    "hdl/learner_kernel_s4 for Alveo (rtl_gen.shell.window wraps any accelerator with a "
    "memory window)."
)


#: Device memory bank and SLR of a kernel's ``m_axi`` ports on each Alveo card
#: (``sp=<cu>.<port>:<bank>``, ``slr=<cu>:<slr>``): DDR[0] sits in SLR0 on both the U200
#: and the U250 (UG1120), so the compute unit goes next to it.
ALVEO_MEMORY = {"u200": ("DDR[0]", "SLR0"), "u250": ("DDR[0]", "SLR0")}


def bd_instance(module: str) -> str:
    """Cell name of the accelerator in the ZCU106 block design (``<module>_0``).

    PYNQ keys its ``ip_dict`` by cell and, because the cell has two addressed slave
    interfaces, by interface: ``<module>_0/s_axi_control`` and ``<module>_0/s_axi_mem``.
    """
    return f"{module}_0"


@dataclass(frozen=True)
class Board:
    """A target board.

    Parameters
    ----------
    name : str
        ``make vivado BOARD=`` value.
    part : str
        FPGA part.
    flow : str
        ``"bd"`` (Vivado block design with a Zynq PS) or ``"vitis"`` (Alveo kernel).
    platform : str or None
        Vitis platform (``"vitis"`` flows).
    """
    name: str
    part: str
    flow: str
    platform: str | None = None


BOARDS = {
    "zcu106": Board("zcu106", "xczu7ev-ffvc1156-2-e", "bd"),
    "u200": Board("u200", "xcu200-fsgd2104-2-e", "vitis", "xilinx_u200_gen3x16_xdma_2_202110_1"),
    "u250": Board("u250", "xcu250-figd2104-2L-e", "vitis",
                  "xilinx_u250_gen3x16_xdma_4_1_202210_1"),
}

#: ZCU106 board part pattern; the newest installed revision is used (2.6 at the time of writing).
ZCU106_BOARD_PART = "xilinx.com:zcu106:part0:*"
#: Zynq UltraScale+ HPM windows (UG1085, PL AXI interfaces): HPM0_FPD 0xA000_0000 and HPM1_FPD
#: 0xB000_0000, 256 MiB each.
HPM0_FPD_BASE = 0xA000_0000
HPM1_FPD_BASE = 0xB000_0000
HPM_WINDOW = 0x1000_0000
#: Block-design address ranges of the control slave and the interrupt controller (64 KiB, the
#: usual Vivado/PYNQ minimum, is far more than the 4 KiB page the 4 KiB Linux UIO map needs).
CONTROL_RANGE = 0x1_0000

# AXI4 signals as (logical name, driven by the master?).
_AXI_SIGNALS = {
    **{f"AW{s}": True for s in ("ID", "ADDR", "LEN", "SIZE", "BURST", "LOCK", "CACHE", "PROT",
                               "QOS", "REGION", "USER", "VALID")},
    "AWREADY": False,
    **{f"W{s}": True for s in ("DATA", "STRB", "LAST", "USER", "VALID")},
    "WREADY": False,
    **{f"B{s}": False for s in ("ID", "RESP", "USER", "VALID")},
    "BREADY": True,
    **{f"AR{s}": True for s in ("ID", "ADDR", "LEN", "SIZE", "BURST", "LOCK", "CACHE", "PROT",
                               "QOS", "REGION", "USER", "VALID")},
    "ARREADY": False,
    **{f"R{s}": False for s in ("ID", "DATA", "RESP", "LAST", "USER", "VALID")},
    "RREADY": True,
}
_AXI_REQUIRED = {"AWADDR", "AWVALID", "AWREADY", "WDATA", "WSTRB", "WVALID", "WREADY", "BRESP",
                 "BVALID", "BREADY", "ARADDR", "ARVALID", "ARREADY", "RDATA", "RRESP", "RVALID",
                 "RREADY"}
_SCALAR_PORTS = {"ap_clk": "input", "ap_rst_n": "input", "interrupt": "output"}


# -- inputs ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AxiInterface:
    """One AXI slave interface found in a manifest's ports.

    Parameters
    ----------
    name : str
        Interface (and port prefix) name, e.g. ``"s_axi_control"``.
    port_map : tuple of (str, str)
        ``(logical, physical)`` pairs, e.g. ``("AWADDR", "s_axi_control_awaddr")``, in port order.
    addr_width, data_width : int
        Widths of ``AWADDR`` and ``WDATA``.
    lite : bool
        AXI4-Lite (no ``AWLEN``) rather than AXI4.
    master : bool
        An AXI master (``m_axi_<name>``) rather than a slave (``s_axi_<name>``).
    """
    name: str
    port_map: tuple
    addr_width: int
    data_width: int
    lite: bool
    master: bool = False

    @property
    def window(self) -> int:
        """Bytes the slave decodes: ``2 ** addr_width``."""
        return 1 << self.addr_width


@dataclass(frozen=True)
class Accelerator:
    """A packaged-ready accelerator: its manifest, register map and AXI interfaces.

    Parameters
    ----------
    hdl_dir : Path
        ``hdl/<module>/``.
    manifest : dict
        ``<module>.json``.
    regmap : RegisterMap
        ``<module>_regs.json``.

    Use :meth:`load`. Members ``module``, ``verilog``, ``interfaces`` (name ->
    :class:`AxiInterface`), ``control`` and ``memory`` (the interfaces named ``s_axi_control``
    and ``s_axi_mem``; ``memory`` is None for a kernel), ``masters`` (the ``m_axi_*``
    interfaces) and ``kernel`` (the manifest's Vitis kernel arguments, or None) are derived and
    checked on construction. An accelerator is a *kernel* if it has an AXI master.

    Raises
    ------
    ValueError
        A port that is neither ``ap_clk``, ``ap_rst_n``, ``interrupt`` nor part of an
        ``s_axi_<name>_*`` AXI slave or ``m_axi_<name>_*`` AXI master (it would be left out of
        the IP), a signal with the wrong direction, a missing AXI signal, a control interface
        that is not a 32-bit AXI4-Lite slave large enough for the register map, no memory
        interface (``s_axi_mem`` or an AXI master), or a kernel whose manifest does not name
        a 64-bit pointer argument (two consecutive registers) for each AXI master.
    """
    hdl_dir: Path
    manifest: dict
    regmap: RegisterMap

    @classmethod
    def load(cls, hdl_dir) -> "Accelerator":
        hdl_dir = Path(hdl_dir)
        manifest = json.loads((hdl_dir / f"{hdl_dir.name}.json").read_text())
        regs = manifest.get("registers")
        if not regs:
            raise ValueError(f"{hdl_dir}: the manifest lists no register map: not an "
                             f"accelerator with an AXI4-Lite control interface")
        regmap = RegisterMap.from_dict(json.loads((hdl_dir / regs["json"]).read_text()))
        return cls(hdl_dir, manifest, regmap)

    def __post_init__(self):
        ports = {p["name"]: p for p in self.manifest["ports"]}
        for name, direction in _SCALAR_PORTS.items():
            if name not in ports or ports[name]["dir"] != direction or ports[name]["width"] != 1:
                raise ValueError(f"{self.module}: needs a 1-bit {direction} port {name!r}")
        groups = {}
        for p in self.manifest["ports"]:
            if p["name"] in _SCALAR_PORTS:
                continue
            head, _, signal = p["name"].rpartition("_")
            logical = signal.upper()
            if not head.startswith(("s_axi_", "m_axi_")) or logical not in _AXI_SIGNALS:
                raise ValueError(f"{self.module}: port {p['name']!r} is not ap_clk, ap_rst_n, "
                                 f"interrupt or an AXI slave signal s_axi_<name>_<signal> or "
                                 f"master signal m_axi_<name>_<signal>; the IP packager would "
                                 f"leave it unconnected")
            master = head.startswith("m_axi_")
            want = "input" if _AXI_SIGNALS[logical] != master else "output"
            if p["dir"] != want:
                raise ValueError(f"{self.module}: {p['name']} must be an {want} on an AXI "
                                 f"{'master' if master else 'slave'}, not an {p['dir']}")
            groups.setdefault(head, []).append((logical, p))
        interfaces = {}
        for name, members in groups.items():
            have = {logical: p for logical, p in members}
            missing = sorted(_AXI_REQUIRED - set(have))
            if missing:
                raise ValueError(f"{self.module}: AXI interface {name} lacks {', '.join(missing)}")
            interfaces[name] = AxiInterface(
                name, tuple((logical, p["name"]) for logical, p in members),
                have["AWADDR"]["width"], have["WDATA"]["width"], "AWLEN" not in have,
                name.startswith("m_axi_"))
        object.__setattr__(self, "interfaces", interfaces)
        control = interfaces.get("s_axi_control")
        if control is None or not control.lite or control.data_width != 32:
            raise ValueError(f"{self.module}: s_axi_control must be a 32-bit AXI4-Lite slave")
        if control.window < self.regmap.span:
            raise ValueError(f"{self.module}: s_axi_control decodes {control.window} bytes, the "
                             f"register map spans {self.regmap.span}")
        if "s_axi_mem" not in interfaces and not self.masters:
            raise ValueError(f"{self.module}: no s_axi_mem memory interface")
        kernel = self.manifest.get("kernel")
        if self.masters:
            if not kernel:
                raise ValueError(f"{self.module}: an AXI master needs the manifest's 'kernel' "
                                 f"entry (its pointer argument)")
            ptrs = {q["port"]: q for q in kernel.get("pointers", ())}
            names = {r.name: r for r in self.regmap}
            for m in self.masters:
                q = ptrs.get(m.name)
                if q is None:
                    raise ValueError(f"{self.module}: no pointer argument addresses {m.name}")
                lo, hi = names.get(q["lo"]), names.get(q["hi"])
                if lo is None or hi is None or not lo.offset == q["offset"] == hi.offset - 4:
                    raise ValueError(f"{self.module}: pointer {q['name']} must be registers "
                                     f"{q['lo']} at {q['offset']:#x} and {q['hi']} right "
                                     f"after it")
            missing = [n for n in kernel.get("scalars", ()) if n not in names]
            if missing:
                raise ValueError(f"{self.module}: kernel arguments {missing} are not registers")
        object.__setattr__(self, "kernel", kernel if self.masters else None)

    @property
    def module(self) -> str:
        return self.manifest["module"]

    @property
    def verilog(self) -> Path:
        return self.hdl_dir / self.manifest["verilog"]

    @property
    def control(self) -> AxiInterface:
        return self.interfaces["s_axi_control"]

    @property
    def memory(self) -> AxiInterface | None:
        return self.interfaces.get("s_axi_mem")

    @property
    def slaves(self) -> list:
        return [i for i in self.interfaces.values() if not i.master]

    @property
    def masters(self) -> list:
        return [i for i in self.interfaces.values() if i.master]

    def pointer_of(self, register: str):
        """The kernel pointer argument whose low or high word is ``register``, or None."""
        for q in (self.kernel or {}).get("pointers", ()):
            if register in (q["lo"], q["hi"]):
                return q
        return None


def find_accelerators(hdl_root) -> list:
    """Names of the directories in ``hdl_root`` whose manifest has a register map, sorted."""
    found = []
    for d in sorted(Path(hdl_root).iterdir()):
        m = d / f"{d.name}.json"
        if m.is_file() and json.loads(m.read_text()).get("registers"):
            found.append(d.name)
    return found


# -- TCL text helpers --------------------------------------------------------------------------
_TCL_PLAIN = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.:/+*,=@%")


def tcl_str(text) -> str:
    """``text`` as one TCL word that evaluates to exactly ``text``.

    Bare if it only has plain characters, in braces if it has no braces or backslashes (braces
    are literal), else double-quoted with ``\\ " $ [ ] { }`` and control characters escaped.
    """
    text = str(text)
    if text and set(text) <= _TCL_PLAIN:
        return text
    if not any(c in text for c in "{}\\") and "\n" not in text:
        return "{" + text + "}"
    out = []
    for c in text:
        if c in '\\"$[]{}':
            out.append("\\" + c)
        elif ord(c) < 0x20:
            out.append(f"\\x{ord(c):02x}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def _rel(target: Path, out_dir: Path) -> str:
    return Path(os.path.relpath(Path(target).resolve(), Path(out_dir).resolve())).as_posix()


def _prologue(acc: Accelerator, out_dir: Path, name: str, purpose: list, usage: str) -> list:
    regs = acc.manifest["registers"]["json"]
    lines = [
        f"# {name}: generated by rtl_gen.vivado from hdl/{acc.module}/{acc.module}.json (the",
        f"# manifest) and {regs} (the register map). Do not edit: `make vivado-scripts`",
        "# regenerates it.",
        "#",
        *(f"# {p}" if p else "#" for p in purpose),
        "#",
        f"# Usage: {usage}",
        "",
        "# Paths are relative to this script, so the tree can move.",
        "set script_dir [file dirname [file normalize [info script]]]",
        "set hdl_dir [file normalize [file join $script_dir "
        f"{tcl_str(_rel(acc.hdl_dir, out_dir))}]]",
        f"set constraints_dir [file normalize [file join $script_dir "
        f"{tcl_str(_rel(CONSTRAINTS_DIR, out_dir))}]]",
        f"source [file join $script_dir {tcl_str(_rel(SCRIPTS_DIR / 'rlk_common.tcl', out_dir))}]",
        f"set module {acc.module}",
        "",
    ]
    return lines


def _dict_line(props: list, target: str, indent: str = "") -> list:
    """``set_property -dict [list K V ...] target``, one property per continuation line."""
    body = [f"{indent}set_property -dict [list \\"]
    for k, v in props:
        body.append(f"{indent}    {k} {tcl_str(v)} \\")
    body.append(f"{indent}] {target}")
    return body


# -- package_ip.tcl ----------------------------------------------------------------------------
def package_ip_tcl(acc: Accelerator, out_dir) -> str:
    """TCL that packages ``acc`` as a Vivado IP with its bus interfaces and register map.

    Parameters
    ----------
    acc : Accelerator
    out_dir : path
        Where the script will live (paths inside it are relative to it).
    """
    out_dir = Path(out_dir)
    rm, ctl, mem = acc.regmap, acc.control, acc.memory
    buses = list(acc.interfaces.values())
    busifs = ":".join(i.name for i in buses)
    n_fields = sum(len(r.fields) for r in rm)
    pointers = (acc.kernel or {}).get("pointers", [])
    L = _prologue(acc, out_dir, "package_ip.tcl", [
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
    L += [
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
        *_dict_line([("NAME", acc.module), ("VERSION", VERSION),
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
    for i in buses:
        mode = "master" if i.master else "slave"
        L += [
            "",
            f"# {i.name}: AXI4{'-Lite' if i.lite else ''} {mode}, "
            f"{len(i.port_map)} ports (logical name <- port).",
            f"set bif [ipx::add_bus_interface {i.name} $core]",
            *_dict_line([("ABSTRACTION_TYPE_VLNV", "xilinx.com:interface:aximm_rtl:1.0"),
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
    L += [
        "",
        "# ap_clk clocks every AXI interface; ap_rst_n is its (synchronous) active-low reset.",
        "# ASSOCIATED_BUSIF/ASSOCIATED_RESET tell IP integrator and Vitis which clock domain the",
        "# interfaces are in. No FREQ_HZ: the block design or the platform propagates it.",
        "set bif [ipx::add_bus_interface ap_clk $core]",
        *_dict_line([("ABSTRACTION_TYPE_VLNV", "xilinx.com:signal:clock_rtl:1.0"),
                     ("BUS_TYPE_VLNV", "xilinx.com:signal:clock:1.0"),
                     ("INTERFACE_MODE", "slave")], "$bif"),
        "set_property PHYSICAL_NAME ap_clk [ipx::add_port_map CLK $bif]",
        f"set_property VALUE {busifs} [ipx::add_bus_parameter ASSOCIATED_BUSIF $bif]",
        "set_property VALUE ap_rst_n [ipx::add_bus_parameter ASSOCIATED_RESET $bif]",
        "",
        "set bif [ipx::add_bus_interface ap_rst_n $core]",
        *_dict_line([("ABSTRACTION_TYPE_VLNV", "xilinx.com:signal:reset_rtl:1.0"),
                     ("BUS_TYPE_VLNV", "xilinx.com:signal:reset:1.0"),
                     ("INTERFACE_MODE", "slave")], "$bif"),
        "set_property PHYSICAL_NAME ap_rst_n [ipx::add_port_map RST $bif]",
        "set_property VALUE ACTIVE_LOW [ipx::add_bus_parameter POLARITY $bif]",
        "",
        "# The interrupt is a level (GIER & (IP_ISR bits)) held until the host clears IP_ISR;",
        "# LEVEL_HIGH lets an AXI interrupt controller configure its input as a level.",
        "set bif [ipx::add_bus_interface interrupt $core]",
        *_dict_line([("ABSTRACTION_TYPE_VLNV", "xilinx.com:signal:interrupt_rtl:1.0"),
                     ("BUS_TYPE_VLNV", "xilinx.com:signal:interrupt:1.0"),
                     ("INTERFACE_MODE", "master")], "$bif"),
        "set_property PHYSICAL_NAME interrupt [ipx::add_port_map INTERRUPT $bif]",
        "set_property VALUE LEVEL_HIGH [ipx::add_bus_parameter SENSITIVITY $bif]",
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
        *_dict_line([("BASE_ADDRESS", 0), ("RANGE", ctl.window), ("WIDTH", 32),
                     ("USAGE", "register"), ("ACCESS", "read-write")], "$block"),
    ]
    for r in rm:
        q = acc.pointer_of(r.name)
        if q is not None:
            if r.name == q["lo"]:
                L += _pointer_register(q, r)
            continue
        readable = any(f.readable for f in r.fields)
        writable = any(f.host_writable for f in r.fields)
        reg_access = ("read-write" if readable and writable else
                      "read-only" if readable else "write-only")
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
    if mem is not None:
        L += [
            "",
            f"# 5. s_axi_mem's memory map: one memory block over its {mem.window}-byte window",
            f"#    (2**{mem.addr_width}; the memory regions and their layout: sw/ and the "
            "README).",
            "set mm [ipx::add_memory_map s_axi_mem $core]",
            "set_property SLAVE_MEMORY_MAP_REF s_axi_mem \\",
            "    [ipx::get_bus_interfaces s_axi_mem -of_objects $core]",
            f"set block [ipx::add_address_block {MEMORY_BLOCK} $mm]",
            *_dict_line([("BASE_ADDRESS", 0), ("RANGE", mem.window), ("WIDTH", mem.data_width),
                         ("USAGE", "memory"), ("ACCESS", "read-write"),
                         ("DESCRIPTION", f"{acc.module} memory regions")], "$block"),
        ]
    else:
        L += ["", "# 5. No memory map for the AXI master(s): they address device memory."]
    L += [
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
    return "\n".join(L)


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


# -- zcu106_bd.tcl -----------------------------------------------------------------------------
def _range_text(n: int) -> str:
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def zcu106_bd_tcl(acc: Accelerator, out_dir) -> str:
    """TCL for the ZCU106 block design, bitstream and PYNQ ``.bit``/``.hwh`` of ``acc``.

    Parameters
    ----------
    acc : Accelerator
    out_dir : path
        Where the script will live; the IP is expected in ``<out_dir>/ip`` (package_ip.tcl).
    """
    out_dir = Path(out_dir)
    board, mem = BOARDS["zcu106"], acc.memory
    inst = bd_instance(acc.module)
    if mem is None:
        raise ValueError(f"{acc.module}: the ZCU106 block design needs an s_axi_mem slave; "
                         f"a kernel with an AXI master is for the Alveo flow")
    if mem.window > HPM_WINDOW:
        raise ValueError(f"{acc.module}: s_axi_mem ({mem.window} bytes) does not fit the "
                         f"256 MiB HPM1_FPD window")
    hpm1_width = min(128, max(32, mem.data_width))
    L = _prologue(acc, out_dir, "zcu106_bd.tcl", [
        f"ZCU106 ({board.part}) block design around {acc.module}, bitstream, and the files",
        "PYNQ loads: <module>.bit and <module>.hwh side by side (pynq.Overlay('<module>.bit')).",
        "",
        f"  Zynq UltraScale+ PS (ZCU106 board preset) --pl_clk0 {TARGET_FREQ_MHZ} MHz--> "
        "everything below",
        f"  M_AXI_HPM0_FPD -> smartconnect_ctrl -> {inst + '/s_axi_control':<30} at "
        f"{HPM0_FPD_BASE:#010x}, {_range_text(CONTROL_RANGE)}",
        f"                                      -> {'axi_intc_0/s_axi':<30} at "
        f"{HPM0_FPD_BASE + CONTROL_RANGE:#010x}, {_range_text(CONTROL_RANGE)}",
        f"  M_AXI_HPM1_FPD -> smartconnect_mem  -> {inst + '/s_axi_mem':<30} at "
        f"{HPM1_FPD_BASE:#010x}, {_range_text(mem.window)}",
        f"  {inst}/interrupt -> axi_intc_0/intr, axi_intc_0/irq -> pl_ps_irq0 (PYNQ's",
        "  pynq.Interrupt needs an AXI interrupt controller between an IP and the PS)",
        "  proc_sys_reset: pl_resetn0 -> ap_rst_n and the interconnect resets, synchronised",
        "",
        "Needs the IP from package_ip.tcl in ./ip and the ZCU106 board files installed.",
        "Environment: RLK_JOBS (parallel runs, default 4).",
    ], "vivado -mode batch -source zcu106_bd.tcl [-tclargs <out_dir>]")
    L += [
        "set ip_dir [file join $script_dir ip]",
        "set out_dir [file normalize [rlk::arg 0 [file join $script_dir zcu106]]]",
        "set proj_dir [file join $out_dir project]",
        "set proj rlk_zcu106",
        "set bd system",
        "set jobs [rlk::env RLK_JOBS 4]",
        "rlk::require_file [file join $ip_dir component.xml] \\",
        "    \"run package_ip.tcl first (make vivado does)\"",
        "",
        "# 1. Project on the ZCU106 part with its board part: the board preset carries the",
        "#    PS's DDR, MIO and clock settings, without which the PS would not boot.",
        f"create_project -force $proj $proj_dir -part {board.part}",
        f"set board_parts [get_board_parts -quiet -latest_file_version {ZCU106_BOARD_PART}]",
        "set board_part [lindex [lsort -dictionary $board_parts] end]",
        "if {$board_part eq \"\"} {",
        f"    error \"rlk: no ZCU106 board part ({ZCU106_BOARD_PART}) is installed:\\",
        "        install the board files from Vivado's board store (xhub) or point "
        "XILINX_BOARD_PATHS at "
        "them\"",
        "}",
        "set_property BOARD_PART $board_part [current_project]",
        "set_property IP_REPO_PATHS [list $ip_dir] [current_project]",
        "update_ip_catalog -rebuild",
        f"if {{[get_ipdefs -all {vlnv(acc.module)}] eq \"\"}} {{",
        f"    error \"rlk: {vlnv(acc.module)} is not in the IP catalog of $ip_dir\"",
        "}",
        "",
        "# Cell names.",
        "set ps zynq_ultra_ps_e_0",
        f"set accel {inst}",
        "set sc_ctrl smartconnect_ctrl",
        "set sc_mem smartconnect_mem",
        "set intc axi_intc_0",
        "set rst rst_pl0",
        "",
        "# 2. The block design: the PS with the board preset, then our settings on top of it.",
        "create_bd_design $bd",
        "create_bd_cell -type ip -vlnv [rlk::latest_ipdef xilinx.com:ip:zynq_ultra_ps_e] $ps",
        "apply_bd_automation -rule xilinx.com:bd_rule:zynq_ultra_ps_e \\",
        "    -config {apply_board_preset \"1\"} [get_bd_cells $ps]",
        f"# pl_clk0 at {TARGET_FREQ_MHZ} MHz from the IOPLL (the PS picks the divisors: IOPLL / 5 "
        "on the",
        "# ZCU106 preset, 299.997 MHz). HPM0 and HPM1 FPD masters on, HPM0 LPD off (its clock",
        "# would be left unconnected); HPM1 as wide as s_axi_mem (the PS allows 32 to 128).",
        "# pl_ps_irq0 takes the interrupt controller's output.",
        *_dict_line([("CONFIG.PSU__FPGA_PL0_ENABLE", 1),
                     ("CONFIG.PSU__CRL_APB__PL0_REF_CTRL__FREQMHZ", TARGET_FREQ_MHZ),
                     ("CONFIG.PSU__USE__M_AXI_GP0", 1),
                     ("CONFIG.PSU__MAXIGP0__DATA_WIDTH", 128),
                     ("CONFIG.PSU__USE__M_AXI_GP1", 1),
                     ("CONFIG.PSU__MAXIGP1__DATA_WIDTH", hpm1_width),
                     ("CONFIG.PSU__USE__M_AXI_GP2", 0),
                     ("CONFIG.PSU__USE__IRQ0", 1)], "[get_bd_cells $ps]"),
        "",
        f"# The accelerator, VLNV {vlnv(acc.module)} (a PYNQ driver binds to it).",
        f"create_bd_cell -type ip -vlnv {vlnv(acc.module)} $accel",
        "",
        "# SmartConnects convert the PS's 128-bit AXI4 with 16-bit IDs to the AXI4-Lite control",
        "# port and to s_axi_mem's width and 1-bit IDs. Separate HPM ports keep bulk memory",
        "# traffic from queueing in front of register accesses.",
        "set sc [rlk::latest_ipdef xilinx.com:ip:smartconnect]",
        "create_bd_cell -type ip -vlnv $sc $sc_ctrl",
        "set_property -dict {CONFIG.NUM_SI 1 CONFIG.NUM_MI 2} [get_bd_cells $sc_ctrl]",
        "create_bd_cell -type ip -vlnv $sc $sc_mem",
        "set_property -dict {CONFIG.NUM_SI 1 CONFIG.NUM_MI 1} [get_bd_cells $sc_mem]",
        "",
        "# AXI interrupt controller: pynq.Interrupt waits on interrupts through one.",
        "# C_IRQ_CONNECTION 1: a single irq line to the PS. Its input's sensitivity follows the",
        "# IP's interrupt interface (SENSITIVITY LEVEL_HIGH, package_ip.tcl).",
        "create_bd_cell -type ip -vlnv [rlk::latest_ipdef xilinx.com:ip:axi_intc] $intc",
        "set_property CONFIG.C_IRQ_CONNECTION 1 [get_bd_cells $intc]",
        "",
        "# proc_sys_reset synchronises the PS's asynchronous, active-low pl_resetn0 to pl_clk0:",
        "# ap_rst_n and the interconnect resets are synchronous to ap_clk (no false path).",
        "create_bd_cell -type ip -vlnv [rlk::latest_ipdef xilinx.com:ip:proc_sys_reset] $rst",
        "set_property CONFIG.C_EXT_RESET_HIGH 0 [get_bd_cells $rst]",
        "",
        "# 3. Connections.",
        "connect_bd_intf_net [get_bd_intf_pins $ps/M_AXI_HPM0_FPD] "
        "[get_bd_intf_pins $sc_ctrl/S00_AXI]",
        "connect_bd_intf_net [get_bd_intf_pins $sc_ctrl/M00_AXI] "
        "[get_bd_intf_pins $accel/s_axi_control]",
        "connect_bd_intf_net [get_bd_intf_pins $sc_ctrl/M01_AXI] [get_bd_intf_pins $intc/s_axi]",
        "connect_bd_intf_net [get_bd_intf_pins $ps/M_AXI_HPM1_FPD] "
        "[get_bd_intf_pins $sc_mem/S00_AXI]",
        "connect_bd_intf_net [get_bd_intf_pins $sc_mem/M00_AXI] "
        "[get_bd_intf_pins $accel/s_axi_mem]",
        "# One clock for everything: no clock-domain crossing anywhere in the PL.",
        "connect_bd_net [get_bd_pins $ps/pl_clk0] \\",
        "    [get_bd_pins $ps/maxihpm0_fpd_aclk] [get_bd_pins $ps/maxihpm1_fpd_aclk] \\",
        "    [get_bd_pins $sc_ctrl/aclk] [get_bd_pins $sc_mem/aclk] \\",
        "    [get_bd_pins $intc/s_axi_aclk] [get_bd_pins $rst/slowest_sync_clk] \\",
        "    [get_bd_pins $accel/ap_clk]",
        "connect_bd_net [get_bd_pins $ps/pl_resetn0] [get_bd_pins $rst/ext_reset_in]",
        "connect_bd_net [get_bd_pins $rst/peripheral_aresetn] \\",
        "    [get_bd_pins $accel/ap_rst_n] [get_bd_pins $intc/s_axi_aresetn]",
        "connect_bd_net [get_bd_pins $rst/interconnect_aresetn] \\",
        "    [get_bd_pins $sc_ctrl/aresetn] [get_bd_pins $sc_mem/aresetn]",
        "connect_bd_net [get_bd_pins $accel/interrupt] [get_bd_pins $intc/intr]",
        "connect_bd_net [get_bd_pins $intc/irq] [get_bd_pins $ps/pl_ps_irq0]",
        "",
        "# 4. Addresses in the PS's view (its Data address space): the control registers and",
        "#    the interrupt controller in the HPM0_FPD window, the memory in the HPM1_FPD",
        "#    window, sized from the manifest (2**AWADDR width).",
        "set data [get_bd_addr_spaces $ps/Data]",
        f"assign_bd_address -target_address_space $data -offset {HPM0_FPD_BASE:#010x} "
        f"-range {_range_text(CONTROL_RANGE)} \\",
        f"    [get_bd_addr_segs $accel/s_axi_control/{CONTROL_BLOCK}] -force",
        "assign_bd_address -target_address_space $data "
        f"-offset {HPM0_FPD_BASE + CONTROL_RANGE:#010x} -range {_range_text(CONTROL_RANGE)} \\",
        "    [get_bd_addr_segs $intc/S_AXI/Reg] -force",
        f"assign_bd_address -target_address_space $data -offset {HPM1_FPD_BASE:#010x} "
        f"-range {_range_text(mem.window)} \\",
        f"    [get_bd_addr_segs $accel/s_axi_mem/{MEMORY_BLOCK}] -force",
        "",
        "# 5. Validate, save, and synthesise the design as a whole (SYNTH_CHECKPOINT_MODE None:",
        "#    no out-of-context IP runs, so the PS's clk_pl_0 constraint times every IP).",
        "validate_bd_design",
        "save_bd_design",
        "set bd_file [get_files $bd.bd]",
        "set_property SYNTH_CHECKPOINT_MODE None $bd_file",
        "generate_target all $bd_file",
        "set wrapper [make_wrapper -files $bd_file -top]",
        "add_files -norecurse $wrapper",
        "set_property top ${bd}_wrapper [current_fileset]",
        "# Board constraints: what the block design does not say (constraints/zcu106.xdc).",
        "add_files -fileset constrs_1 -norecurse [file join $constraints_dir zcu106.xdc]",
        "update_compile_order -fileset sources_1",
        "",
        "# 6. Synthesis, implementation, bitstream. A bitstream that misses timing is kept in the",
        "#    run directory but not handed to PYNQ.",
        "launch_runs impl_1 -to_step write_bitstream -jobs $jobs",
        "wait_on_run impl_1",
        "rlk::require_run impl_1",
        "set wns [get_property STATS.WNS [get_runs impl_1]]",
        "if {$wns ne \"\" && $wns < 0} {",
        f"    error \"rlk: timing not met at {TARGET_FREQ_MHZ} MHz (WNS $wns ns): the bitstream "
        "stays in\\",
        "        $proj_dir and is not copied\"",
        "}",
        "",
        "# 7. The .bit and the .hwh (hardware handoff: addresses, registers, interrupts) with the",
        "#    same base name, which is how pynq.Overlay finds the .hwh of a .bit.",
        "set bit [lindex [glob -nocomplain [file join $proj_dir $proj.runs impl_1 *.bit]] 0]",
        "rlk::require_file $bit \"impl_1 wrote no bitstream\"",
        "set hwh [rlk::find_hwh $proj_dir $proj $bd]",
        "file copy -force $bit [file join $out_dir $module.bit]",
        "file copy -force $hwh [file join $out_dir $module.hwh]",
        f"puts \"rlk: [file join $out_dir $module].bit and .hwh ready (WNS $wns ns at "
        f"{TARGET_FREQ_MHZ} MHz)\"",
        "",
    ]
    return "\n".join(L)


# -- Alveo -------------------------------------------------------------------------------------
def alveo_xo_tcl(acc: Accelerator, out_dir) -> str:
    """TCL that packages ``acc`` as a Vitis RTL kernel (``.xo``).

    A kernel (an accelerator with an AXI master) is packaged with the ``kernel.xml`` of
    :func:`kernel_xml` next to the script; any other accelerator is guarded by
    :data:`DMA_GAP` (the script stops unless ``RLK_FORCE_XO=1``).
    """
    out_dir = Path(out_dir)
    if acc.kernel is not None:
        return _kernel_xo_tcl(acc, out_dir)
    m_axi = [i for i in acc.interfaces if i.startswith("m_axi_")]
    stop = (f"rlk: {acc.module} cannot be linked as a Vitis kernel: {DMA_GAP} "
            "Set RLK_FORCE_XO=1 to run package_xo anyway.")
    L = _prologue(acc, out_dir, "alveo_xo.tcl", [
        f"Packages {acc.module} as a Vitis RTL kernel object (<module>.xo) with package_xo and",
        "the ap_ctrl_hs control protocol, for `v++ --link` with alveo_u200.cfg / alveo_u250.cfg.",
        "",
        "It stops before packaging unless RLK_FORCE_XO=1, because the result could not link",
        "into a working xclbin:",
        *_wrap(DMA_GAP, 90),
    ], "vivado -mode batch -source alveo_xo.tcl [-tclargs <out_dir>]")
    L += [
        "set out_dir [file normalize [rlk::arg 0 [file join $script_dir alveo]]]",
        f"set has_m_axi {1 if m_axi else 0}",
        "if {!$has_m_axi && ![rlk::env RLK_FORCE_XO 0]} {",
        "    error [join [list \\",
        *(f"        {tcl_str(part)} \\" for part in _wrap(stop, 84)),
        "    ]]",
        "}",
        "",
        "# 1. A separate copy of the IP with the kernel properties (package_ip.tcl, rlk_kernel).",
        "set rlk_kernel 1",
        "set rlk_ip_dir [file join $out_dir ip_kernel]",
        f"set rlk_part {BOARDS['u200'].part}",
        "source [file join $script_dir package_ip.tcl]",
        "",
        "# 2. The kernel object. Its kernel.xml is derived from the IP (registers, interfaces).",
        "set xo [file join $out_dir $module.xo]",
        "package_xo -kernel_name $module -ctrl_protocol ap_ctrl_hs -ip_directory $rlk_ip_dir \\",
        "    -xo_path $xo -force",
        "puts \"rlk: wrote $xo\"",
        "",
    ]
    return "\n".join(L)


def _kernel_xo_tcl(acc: Accelerator, out_dir: Path) -> str:
    ports = ", ".join(m.name for m in acc.masters)
    L = _prologue(acc, out_dir, "alveo_xo.tcl", [
        f"Packages the kernel {acc.module} as a Vitis RTL kernel object (<module>.xo) for",
        "`v++ --link` with alveo_u200.cfg / alveo_u250.cfg: the IP with the Vitis kernel",
        f"properties (package_ip.tcl with rlk_kernel), and kernel.xml (next to this script,",
        f"generated from the manifest: the ap_ctrl_hs protocol, the AXI master(s) {ports} and",
        "the kernel arguments: the pointer(s) into device memory first, then the scalars).",
    ], "vivado -mode batch -source alveo_xo.tcl [-tclargs <out_dir>]")
    L += [
        "set out_dir [file normalize [rlk::arg 0 [file join $script_dir alveo]]]",
        "set kernel_xml [file join $script_dir kernel.xml]",
        "rlk::require_file $kernel_xml \"run `make vivado-scripts` (it writes kernel.xml)\"",
        "",
        "# 1. A separate copy of the IP with the kernel properties (package_ip.tcl, rlk_kernel).",
        "set rlk_kernel 1",
        "set rlk_ip_dir [file join $out_dir ip_kernel]",
        f"set rlk_part {BOARDS['u200'].part}",
        "source [file join $script_dir package_ip.tcl]",
        "",
        "# 2. The kernel object. With -kernel_xml the control protocol comes from the XML's",
        "#    hwControlProtocol (ap_ctrl_hs), not from -ctrl_protocol.",
        "set xo [file join $out_dir $module.xo]",
        "package_xo -kernel_name $module -kernel_xml $kernel_xml -ip_directory $rlk_ip_dir \\",
        "    -xo_path $xo -force",
        "puts \"rlk: wrote $xo\"",
        "",
    ]
    return "\n".join(L)


def kernel_xml(acc: Accelerator) -> str:
    """The Vitis ``kernel.xml`` of a kernel (UG1393, "RTL Kernel XML File").

    Ports: ``s_axi_control`` (slave, its decoded window) and every AXI master (64-bit range).
    Arguments, in this order (their ``id``): every pointer of the manifest (``addressQualifier``
    1, size 8, at its low register's offset, on its master port), then every scalar register
    the manifest lists (``addressQualifier`` 0, size 4). So a pointer's index, which
    ``xrt::kernel::group_id`` takes, is its position among the pointers (0 for one).
    """
    from xml.sax.saxutils import quoteattr

    if acc.kernel is None:
        raise ValueError(f"{acc.module} is not a kernel: it has no AXI master")
    k = acc.kernel

    def tag(name, attrs, indent):
        return " " * indent + f"<{name} " + " ".join(
            f"{a}={quoteattr(str(v))}" for a, v in attrs) + "/>"

    lines = ['<?xml version="1.0" encoding="UTF-8"?>',
             f"<!-- {acc.module}: generated by rtl_gen.vivado from {acc.module}.json; do not "
             "edit. -->",
             '<root versionMajor="1" versionMinor="6">',
             f'  <kernel name="{acc.module}" language="ip_c" vlnv="{vlnv(acc.module)}" '
             'attributes="" preferredWorkGroupSizeMultiple="0" workGroupSize="1" '
             'interrupt="true" hwControlProtocol="ap_ctrl_hs">',
             "    <ports>",
             tag("port", [("name", "s_axi_control"), ("mode", "slave"),
                          ("range", f"{acc.control.window:#x}"), ("dataWidth", 32),
                          ("portType", "addressable"), ("base", "0x0")], 6)]
    for m in acc.masters:
        lines.append(tag("port", [("name", m.name), ("mode", "master"),
                                  ("range", "0xFFFFFFFFFFFFFFFF"), ("dataWidth", m.data_width),
                                  ("portType", "addressable"), ("base", "0x0")], 6))
    lines += ["    </ports>", "    <args>"]
    index = 0
    for q in k["pointers"]:
        lines.append(tag("arg", [("name", q["name"]), ("addressQualifier", 1), ("id", index),
                                 ("port", q["port"]), ("size", "0x8"),
                                 ("offset", f"{q['offset']:#x}"), ("type", "void*"),
                                 ("hostOffset", "0x0"), ("hostSize", "0x8")], 6))
        index += 1
    for name in k["scalars"]:
        lines.append(tag("arg", [("name", name), ("addressQualifier", 0), ("id", index),
                                 ("port", "s_axi_control"), ("size", "0x4"),
                                 ("offset", f"{acc.regmap.offset(name):#x}"),
                                 ("type", "uint"), ("hostOffset", "0x0"),
                                 ("hostSize", "0x4")], 6))
        index += 1
    lines += ["    </args>", "  </kernel>", "</root>", ""]
    return "\n".join(lines)


def _wrap(text, width):
    words, lines, cur = text.split(), [], ""
    for w in words:
        if cur and len(cur) + 1 + len(w) > width:
            lines.append(cur)
            cur = w
        else:
            cur = f"{cur} {w}" if cur else w
    return lines + ([cur] if cur else [])


def vpp_link_cfg(acc: Accelerator, board: str) -> str:
    """``v++ --link`` configuration file text for ``acc`` on an Alveo ``board``."""
    b = BOARDS[board]
    if b.flow != "vitis":
        raise ValueError(f"board {board!r} is not a Vitis platform")
    m = acc.module
    f = TARGET_FREQ_MHZ
    paragraphs = [
        f"Kernel clock: an Alveo kernel takes ap_clk from the platform's scalable kernel clock "
        f"0 (ap_clk2 would take clock 1), and XRT programs that clock from the xclbin when it "
        f"loads it. kernel_frequency=0:{f} below is `v++ --kernel_frequency 0:{f}` on the "
        f"command line. Platforms with fixed clocks (embedded ones) take `--clock.defaultFreqHz "
        f"{f * 1_000_000}` ([clock] defaultFreqHz={f * 1_000_000}) instead, and Vitis 2023.2 "
        f"and later also --freqhz={f}MHz. No kernel XDC: the platform constrains the clock "
        f"(constraints/alveo_kernel.xdc).",
    ]
    bank, slr = ALVEO_MEMORY[board]
    if acc.kernel is None:
        paragraphs += [
            f"This does not link yet: {DMA_GAP}",
            "With a DMA shell, add sp=<cu>.<m_axi port>:DDR[n] lines to [connectivity], one "
            "bank per port, and slr=<cu>:SLRn to keep the compute unit next to its bank.",
        ]
    else:
        paragraphs += [
            f"Memory: the kernel's AXI master(s) ({', '.join(i.name for i in acc.masters)}) "
            f"go to {bank} (sp=), and the compute unit to {slr} (slr=), the SLR of that bank, "
            f"so no AXI path crosses an SLR. XRT allocates the host's buffer in the bank the "
            f"pointer argument's port is connected to (xrt::kernel::group_id).",
        ]
    lines = [
        f"# v++ --link configuration for {m} on the Alveo {board.upper()} ({b.part}),",
        f"# platform {b.platform}. Generated by rtl_gen.vivado; do not edit.",
        "#",
        f"#   v++ --link --target hw --config alveo_{board}.cfg",
        f"#       -o {m}_{board}.xclbin alveo/{m}.xo",
    ]
    for para in paragraphs:
        lines += ["#", *(f"# {t}" for t in _wrap(para, 92))]
    lines += [
        f"platform={b.platform}",
        f"kernel_frequency=0:{f}",
        "",
        "[connectivity]",
        "# One compute unit named <kernel>_1.",
        f"nk={m}:1:{m}_1",
    ]
    if acc.kernel is not None:
        lines += [f"sp={m}_1.{i.name}:{bank}" for i in acc.masters]
        lines.append(f"slr={m}_1:{slr}")
    lines.append("")
    return "\n".join(lines)


def ooc_timing_tcl(acc: Accelerator, out_dir) -> str:
    """TCL for an out-of-context synthesis + implementation of ``acc`` alone, with timing."""
    out_dir = Path(out_dir)
    L = _prologue(acc, out_dir, "ooc_timing.tcl", [
        f"Out-of-context synthesis, placement and routing of {acc.module} alone at "
        f"{TARGET_FREQ_MHZ} MHz",
        "(constraints/accel_ooc.xdc) on any part: timing and utilisation without a block design",
        "or a platform. Ports are not timed (in a system they meet registered interconnect).",
    ], "vivado -mode batch -source ooc_timing.tcl [-tclargs <part> [<out_dir>]]")
    L += [
        f"set part [rlk::arg 0 {BOARDS['zcu106'].part}]",
        "set out_dir [file normalize [rlk::arg 1 [file join $script_dir ooc_$part]]]",
        "file mkdir $out_dir",
        "set verilog [file join $hdl_dir $module.v]",
        "rlk::require_file $verilog \"run `make` to emit hdl/\"",
        "",
        "# Non-project flow: read, synthesise as a block (no I/O buffers), implement.",
        "read_verilog $verilog",
        "read_xdc -mode out_of_context [file join $constraints_dir accel_ooc.xdc]",
        "synth_design -top $module -part $part -mode out_of_context",
        "opt_design",
        "place_design",
        "route_design",
        "report_timing_summary -file [file join $out_dir timing_summary.rpt]",
        "report_utilization -file [file join $out_dir utilization.rpt]",
        "write_checkpoint -force [file join $out_dir $module.dcp]",
        "set wns [get_property SLACK [get_timing_paths -delay_type max -max_paths 1]]",
        f"puts \"rlk: $module on $part at {TARGET_FREQ_MHZ} MHz: WNS $wns ns (reports in "
        "$out_dir)\"",
        "if {$wns < 0} {",
        f"    error \"rlk: timing not met at {TARGET_FREQ_MHZ} MHz on $part (WNS $wns ns)\"",
        "}",
        "",
    ]
    return "\n".join(L)


# -- writing and running -----------------------------------------------------------------------
def write_scripts(acc: Accelerator, out_dir) -> list:
    """Write every generated file of ``acc`` into ``out_dir``; returns their paths.

    A kernel (AXI master, no ``s_axi_mem``) gets ``kernel.xml`` and no ZCU106 script.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {"package_ip.tcl": package_ip_tcl(acc, out_dir)}
    if acc.memory is not None:
        files["zcu106_bd.tcl"] = zcu106_bd_tcl(acc, out_dir)
    files.update({
        "alveo_xo.tcl": alveo_xo_tcl(acc, out_dir),
        "alveo_u200.cfg": vpp_link_cfg(acc, "u200"),
        "alveo_u250.cfg": vpp_link_cfg(acc, "u250"),
        "ooc_timing.tcl": ooc_timing_tcl(acc, out_dir),
    })
    if acc.kernel is not None:
        files["kernel.xml"] = kernel_xml(acc)
    paths = []
    for name, text in files.items():
        p = out_dir / name
        if not p.exists() or p.read_text() != text:    # keep time stamps when unchanged
            p.write_text(text)
        paths.append(p)
    return paths


def _vivado(script: Path, log_dir: Path, *args) -> list:
    return ["vivado", "-mode", "batch", "-nojournal", "-log", str(log_dir / f"{script.stem}.log"),
            "-source", str(script), *(["-tclargs", *map(str, args)] if args else [])]


def board_commands(module: str, board: str, out_dir, *, part: str | None = None) -> list:
    """Commands (argument lists) that build ``module`` for ``board`` from ``out_dir``'s scripts.

    Parameters
    ----------
    module : str
        Accelerator name (``hdl/<module>``).
    board : str
        A key of :data:`BOARDS` or ``"ooc"`` (out-of-context timing on ``part``).
    out_dir : path
        ``build/vivado/<module>``, holding :func:`write_scripts`'s output.
    part : str, optional
        Part of the ``"ooc"`` run (default the ZCU106's).
    """
    d = Path(out_dir)
    if board == "ooc":
        p = part or BOARDS["zcu106"].part
        return [_vivado(d / "ooc_timing.tcl", d, p, d / f"ooc_{p}")]
    if board not in BOARDS:
        raise ValueError(f"board must be one of {', '.join([*BOARDS, 'ooc'])}, not {board!r}")
    if BOARDS[board].flow == "bd":
        return [_vivado(d / "package_ip.tcl", d), _vivado(d / "zcu106_bd.tcl", d)]
    return [_vivado(d / "alveo_xo.tcl", d, d / "alveo"),
            ["v++", "--link", "--target", "hw", "--config", str(d / f"alveo_{board}.cfg"),
             "--temp_dir", str(d / f"_x_{board}"), "-o", str(d / f"{module}_{board}.xclbin"),
             str(d / "alveo" / f"{module}.xo")]]


def main(argv=None) -> int:
    """``python -m rtl_gen.vivado {scripts,run}``: see ``--help`` and scripts/vivado/README.md."""
    ap = argparse.ArgumentParser(prog="python -m rtl_gen.vivado",
                                 description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    sp = sub.add_parser("scripts", help="write the TCL and v++ configurations")
    sp.add_argument("--hdl", type=Path, default=ROOT / "hdl", help="shipped HDL (default hdl/)")
    sp.add_argument("--out", type=Path, default=ROOT / "build" / "vivado")
    sp.add_argument("--accel", action="append", help="accelerator(s) (default: all in --hdl)")
    rp = sub.add_parser("run", help="write the scripts of one accelerator and run its flow")
    rp.add_argument("--board", required=True, help="zcu106, u200, u250 or ooc")
    rp.add_argument("--accel", default="gae_accel_n8")
    rp.add_argument("--part", help="part of the ooc run (default the ZCU106's)")
    rp.add_argument("--hdl", type=Path, default=ROOT / "hdl")
    rp.add_argument("--out", type=Path, default=ROOT / "build" / "vivado")
    args = ap.parse_args(argv)
    try:
        if args.command == "scripts":
            names = args.accel or find_accelerators(args.hdl)
            for name in names:
                acc = Accelerator.load(args.hdl / name)
                for p in write_scripts(acc, args.out / name):
                    print(f"wrote {p}")
            return 0
        if args.board not in (*BOARDS, "ooc"):
            raise ValueError(f"BOARD must be one of {', '.join([*BOARDS, 'ooc'])}, "
                             f"not {args.board!r}")
        acc = Accelerator.load(args.hdl / args.accel)
        if args.board in BOARDS and BOARDS[args.board].flow == "bd" and acc.memory is None:
            raise ValueError(f"{acc.module} is a Vitis kernel (AXI master, no s_axi_mem): "
                             f"build it for u200 or u250, not {args.board}")
        out = (args.out / args.accel).resolve()     # absolute: the commands run from there
        write_scripts(acc, out)
    except (ValueError, OSError, KeyError, json.JSONDecodeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    commands = board_commands(acc.module, args.board, out, part=args.part)
    tools = sorted({c[0] for c in commands})
    missing = [t for t in tools if shutil.which(t) is None]
    if BOARDS.get(args.board) and BOARDS[args.board].flow == "vitis" and \
            not any(i.startswith("m_axi_") for i in acc.interfaces):
        note = f"note: the {args.board} flow stops before package_xo for {acc.module}: {DMA_GAP}"
        print("\n".join(_wrap(note, 96)), file=sys.stderr)
    if missing:
        print(f"error: {' and '.join(missing)} not found on PATH, so nothing was built.\n"
              f"The scripts are in {out}. On a machine with Vivado/Vitis (settings64.sh "
              f"sourced), run:", file=sys.stderr)
        for c in commands:
            print("  " + shlex.join(c), file=sys.stderr)
        return 3
    for c in commands:
        print("+ " + shlex.join(c), flush=True)
        res = subprocess.run(c, cwd=out)
        if res.returncode != 0:
            print(f"error: {c[0]} failed with exit code {res.returncode}", file=sys.stderr)
            return res.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
