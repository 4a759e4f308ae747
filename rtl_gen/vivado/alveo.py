"""Alveo U200/U250: ``alveo_xo.tcl`` (Vitis RTL kernel ``.xo``), ``kernel.xml`` and the
``v++ --link`` configurations ``alveo_u200.cfg`` / ``alveo_u250.cfg``.

A Vitis kernel moves buffers only through AXI4 *master* ports: for a kernel with one (a window
kernel, :class:`~rtl_gen.shell.window.WindowKernel`: ``m_axi_gmem``) the pointer argument and
the ``m_axi`` port go into the IP and into ``kernel.xml`` (:func:`kernel_xml`), and the ``.cfg``
files connect the port to a DDR bank (:data:`ALVEO_MEMORY`); for an accelerator whose memory
is an AXI4 slave the scripts stop with an explanation (:data:`DMA_GAP`).
"""

from pathlib import Path
from xml.sax.saxutils import quoteattr

from sw.registry import vlnv

from .model import BOARDS, TARGET_FREQ_MHZ, Accelerator, check_accelerator
from .tcl import prologue, tcl_str, wrap

__all__ = ["DMA_GAP", "ALVEO_MEMORY", "alveo_xo_tcl", "kernel_xml", "vpp_link_cfg"]

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


def alveo_xo_tcl(acc: Accelerator, out_dir) -> str:
    """TCL that packages ``acc`` as a Vitis RTL kernel (``.xo``).

    A kernel (an accelerator with an AXI master) is packaged with the ``kernel.xml`` of
    :func:`kernel_xml` next to the script; any other accelerator is guarded by
    :data:`DMA_GAP` (the script stops unless ``RLK_FORCE_XO=1``).

    Parameters
    ----------
    acc : Accelerator
    out_dir : path
        Where the script will live (it sources ``package_ip.tcl`` from there).

    Returns
    -------
    str
        The text of ``alveo_xo.tcl``.
    """
    check_accelerator(acc)
    out_dir = Path(out_dir)
    if acc.kernel is not None:
        return _kernel_xo_tcl(acc, out_dir)
    m_axi = [i for i in acc.interfaces if i.startswith("m_axi_")]
    stop = (f"rlk: {acc.module} cannot be linked as a Vitis kernel: {DMA_GAP} "
            "Set RLK_FORCE_XO=1 to run package_xo anyway.")
    L = prologue(acc, out_dir, "alveo_xo.tcl", [
        f"Packages {acc.module} as a Vitis RTL kernel object (<module>.xo) with package_xo and",
        "the ap_ctrl_hs control protocol, for `v++ --link` with alveo_u200.cfg / alveo_u250.cfg.",
        "",
        "It stops before packaging unless RLK_FORCE_XO=1, because the result could not link",
        "into a working xclbin:",
        *wrap(DMA_GAP, 90),
    ], "vivado -mode batch -source alveo_xo.tcl [-tclargs <out_dir>]")
    L += [
        "set out_dir [file normalize [rlk::arg 0 [file join $script_dir alveo]]]",
        f"set has_m_axi {1 if m_axi else 0}",
        "if {!$has_m_axi && ![rlk::env RLK_FORCE_XO 0]} {",
        "    error [join [list \\",
        *(f"        {tcl_str(part)} \\" for part in wrap(stop, 84)),
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
    L = prologue(acc, out_dir, "alveo_xo.tcl", [
        f"Packages the kernel {acc.module} as a Vitis RTL kernel object (<module>.xo) for",
        "`v++ --link` with alveo_u200.cfg / alveo_u250.cfg: the IP with the Vitis kernel",
        "properties (package_ip.tcl with rlk_kernel), and kernel.xml (next to this script,",
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

    Parameters
    ----------
    acc : Accelerator
        A kernel (with an AXI master).

    Returns
    -------
    str
        The XML text.

    Raises
    ------
    ValueError
        ``acc`` is not a kernel.
    """
    if check_accelerator(acc).kernel is None:
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




def vpp_link_cfg(acc: Accelerator, board: str) -> str:
    """``v++ --link`` configuration file text for ``acc`` on an Alveo ``board``.

    Parameters
    ----------
    acc : Accelerator
    board : str
        A Vitis board of :data:`BOARDS` (``"u200"``, ``"u250"``).

    Returns
    -------
    str
        The text of ``alveo_<board>.cfg``: platform, kernel clock, connectivity.

    Raises
    ------
    ValueError
        ``board`` is not a Vitis board.
    """
    check_accelerator(acc)
    vitis = [n for n, b in BOARDS.items() if b.flow == "vitis"]
    if board not in vitis:
        raise ValueError(f"board {board!r} is not a Vitis platform: board must be one of "
                         f"{', '.join(vitis)}")
    b = BOARDS[board]
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
        lines += ["#", *(f"# {t}" for t in wrap(para, 92))]
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

