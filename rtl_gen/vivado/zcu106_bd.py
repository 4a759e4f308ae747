"""``zcu106_bd.tcl``: the ZCU106 block design around an accelerator, for PYNQ.

Zynq UltraScale+ PS with the board preset and a 300 MHz ``pl_clk0``, a SmartConnect on
HPM0_FPD (control registers, AXI interrupt controller), ``proc_sys_reset``, then bitstream, and
``<module>.bit`` + ``<module>.hwh`` side by side for ``pynq.Overlay``. The memory path depends on
the accelerator (:func:`zcu106_flow`): an ``s_axi_mem`` slave sits behind a SmartConnect on
HPM1_FPD; an accelerator that drives its own AXI master (the fused trainer's ``m_axi_gmem``, at
most 128 bits) reaches PS DDR through a SmartConnect into S_AXI_HP0_FPD, with the DDR segments
mapped in its address space so that a ``pynq.allocate`` buffer's physical address is its
pointer (zero copy). Vitis kernels in the window DMA shell (the host commands their copies over
XRT) and masters wider than an HP port go to Alveo.

Unverified (no Vivado here; the tests run the TCL against stubs): the PS properties
``PSU__USE__S_AXI_GP2`` / ``PSU__SAXIGP2__DATA_WIDTH`` (S_AXI_HP0_FPD), its clock pin
``saxihp0_fpd_aclk`` and the segments ``SAXIGP2/HP0_DDR_LOW`` / ``HP0_DDR_HIGH`` with their
offsets and ranges are taken from block-design scripts Vivado wrote (``write_bd_tcl``) in other
projects, not from a run of ours. The master's address space is looked up as
``<cell>/m_axi_gmem``: package_ip.tcl declares it (``ipx::add_address_space m_axi_gmem``, range
16E, width 64, and the interface's ``MASTER_ADDRESS_SPACE_REF``), as Vivado infers one for a
master. An IP packaged without it (by a package_ip.tcl from before that, say) gives the design
nothing to map PS DDR into: the script stops with that explanation rather than build a design
whose master reaches nothing.
"""

from pathlib import Path

from sw.registry import BLOCKS, vlnv

from .model import (BOARDS, CONTROL_BLOCK, MEMORY_BLOCK, TARGET_FREQ_MHZ, Accelerator,
                    check_accelerator)
from .tcl import dict_line, prologue, wrap

__all__ = ["bd_instance", "zcu106_bd_tcl", "zcu106_flow", "zcu106_refusal", "hpm1_width",
           "hp0_width", "ZCU106_BOARD_PART", "HPM0_FPD_BASE", "HPM1_FPD_BASE", "HPM_WINDOW",
           "HPM0_WIDTH", "CONTROL_RANGE", "HP_MAX_WIDTH", "HP0_PORT", "HP0_DDR_SEGMENTS"]

def bd_instance(module: str) -> str:
    """Cell name of the accelerator in the ZCU106 block design (``<module>_0``).

    PYNQ 4 keys its ``ip_dict`` by cell and lists the cell's ``s_axi_mem`` range in
    ``mem_dict`` (docs/boards.md; PYNQ 2's parser keyed ``<cell>/<interface>``).
    """
    return f"{module}_0"


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
#: Data width of M_AXI_HPM0_FPD in the block design (the control port's side).
HPM0_WIDTH = 128


#: The PS's S_AXI_HP ports carry 32, 64 or 128 bits (``PSU__SAXIGP<n>__DATA_WIDTH``).
HP_MAX_WIDTH = 128
#: The PS slave port an accelerator's own AXI master goes into: S_AXI_HP0_FPD, the PS's
#: ``SAXIGP2`` (``PSU__USE__S_AXI_GP2``; GP0/GP1 are HPC0/HPC1, GP3 to GP5 HP1 to HP3, GP6
#: LPD). Not cache coherent: the host flushes and invalidates its buffer (PynqTrainerDevice).
HP0_PORT = "S_AXI_HP0_FPD"
#: PS DDR as S_AXI_HP0_FPD reaches it: the PS's segments ``<ps>/SAXIGP2/<name>`` with the
#: fixed addresses and ranges of its address map (UG1085: DDR_LOW, the first 2 GiB at 0;
#: DDR_HIGH, a 32 GiB window at 0x8_0000_0000 of which the ZCU106's 4 GiB of PS DDR4 use the
#: first 2 GiB). ``(segment, offset, range)``.
HP0_DDR_SEGMENTS = (("HP0_DDR_LOW", 0x0, 2 << 30), ("HP0_DDR_HIGH", 0x8_0000_0000, 32 << 30))


def hpm1_width(acc: Accelerator) -> int:
    """Data width of M_AXI_HPM1_FPD: as wide as ``s_axi_mem`` (the PS allows 32 to 128)."""
    return min(128, max(32, acc.memory.data_width))


def hp0_width(acc: Accelerator) -> int:
    """Data width of S_AXI_HP0_FPD: as wide as the accelerator's AXI master (32 to 128), so the
    SmartConnect between them converts no width."""
    (master,) = acc.masters
    return min(HP_MAX_WIDTH, max(32, master.data_width))


def zcu106_refusal(acc: Accelerator) -> str | None:
    """Why ``acc`` has no ZCU106 block design, as a phrase (``f"{module} is {phrase}"``), or
    None if it has one (see :func:`zcu106_flow`)."""
    check_accelerator(acc)
    if acc.memory is not None:
        return None
    block = BLOCKS.get(acc.manifest.get("block"))
    if block is None or block.role != "accelerator":
        # A kernel in the window DMA shell: its host commands the copies over XRT.
        return "a Vitis kernel (AXI master, no s_axi_mem)"
    if len(acc.masters) != 1:
        return (f"an accelerator with {len(acc.masters)} AXI masters (the ZCU106 block design "
                f"connects one, to {HP0_PORT})")
    (master,) = acc.masters
    if master.data_width > HP_MAX_WIDTH:
        return (f"an accelerator whose {master.name} is {master.data_width} bits wide, wider "
                f"than the ZCU106's S_AXI_HP ports ({HP_MAX_WIDTH})")
    return None


def zcu106_flow(acc: Accelerator) -> str | None:
    """How ``acc`` sits in the ZCU106 block design, or None where it does not.

    ``"memory"``: its ``s_axi_mem`` slave behind M_AXI_HPM1_FPD (the GAE, replay and learner
    accelerators). ``"master"``: an accelerator that drives its own AXI master (a block whose
    role in :data:`sw.registry.BLOCKS` is ``"accelerator"``, with one ``m_axi`` port of at most
    :data:`HP_MAX_WIDTH` bits: ``dqn_trainer_zcu106``) into PS DDR through S_AXI_HP0_FPD.
    None: a Vitis kernel in the window DMA shell, or a master wider than an HP port
    (``dqn_trainer_u250``'s 512 bits): those are for the Alveo flow.
    """
    if zcu106_refusal(acc) is not None:
        return None
    return "memory" if acc.memory is not None else "master"


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

    Returns
    -------
    str
        The text of ``zcu106_bd.tcl``.

    Raises
    ------
    ValueError
        ``acc`` has no ZCU106 block design (:func:`zcu106_flow` is None: a Vitis kernel, or an
        AXI master wider than an HP port), or an ``s_axi_mem`` larger than the 256 MiB HPM1
        window.
    """
    check_accelerator(acc)
    mem = acc.memory
    flow = zcu106_flow(acc)
    if flow is None:
        raise ValueError(f"{acc.module} is {zcu106_refusal(acc)}: the ZCU106 block design "
                         f"needs an s_axi_mem slave or an AXI master the accelerator drives "
                         f"itself, at most {HP_MAX_WIDTH} bits wide ({HP0_PORT}); build it "
                         f"for the Alveo flow")
    if mem is not None and mem.window > HPM_WINDOW:
        raise ValueError(f"{acc.module}: s_axi_mem ({mem.window} bytes) does not fit the "
                         f"256 MiB HPM1_FPD window")
    master = flow == "master"
    L = _header(acc, Path(out_dir), master)
    L += _project(acc)
    L += _block_design(acc, master)
    L += _ip_cells(acc, master)
    L += _connections(acc, master)
    L += _addresses(acc, master)
    L += _implementation()
    return "\n".join(L)


# Each section below returns its lines of the script, in the script's order.
def _header(acc: Accelerator, out_dir: Path, master: bool) -> list:
    """The prologue: the design as a diagram (the control path, the memory path of an
    ``s_axi_mem`` slave or of the accelerator's own master), what the script needs."""
    board, mem = BOARDS["zcu106"], acc.memory
    inst = bd_instance(acc.module)
    if master:
        (gmem,) = acc.masters
        hp0 = hp0_width(acc)
        pointers = ", ".join(f"{q['name']} ({q['lo']}, {q['hi']})"
                             for q in acc.kernel["pointers"])
        memory_path = ["  " + line for line in wrap(
            f"{inst}/{gmem.name} -> smartconnect_mem -> {HP0_PORT} ({hp0}-bit, not coherent) "
            "-> PS DDR, mapped in the accelerator's own address space as the PS has it: "
            + " and ".join(f"{name} at {offset:#x}, {_range_text(size)}"
                           for name, offset, size in HP0_DDR_SEGMENTS)
            + f"; so the physical address of a pynq.allocate buffer, written into {pointers}, "
            "is where the accelerator finds it (zero copy)", 88)]
    else:
        memory_path = [
            f"  M_AXI_HPM1_FPD -> smartconnect_mem  -> {inst + '/s_axi_mem':<30} at "
            f"{HPM1_FPD_BASE:#010x}, {_range_text(mem.window)}",
        ]
    return prologue(acc, out_dir, "zcu106_bd.tcl", [
        f"ZCU106 ({board.part}) block design around {acc.module}, bitstream, and the files",
        "PYNQ loads: <module>.bit and <module>.hwh side by side (pynq.Overlay('<module>.bit')).",
        "",
        f"  Zynq UltraScale+ PS (ZCU106 board preset) --pl_clk0 {TARGET_FREQ_MHZ} MHz--> "
        "everything below",
        f"  M_AXI_HPM0_FPD -> smartconnect_ctrl -> {inst + '/s_axi_control':<30} at "
        f"{HPM0_FPD_BASE:#010x}, {_range_text(CONTROL_RANGE)}",
        f"                                      -> {'axi_intc_0/s_axi':<30} at "
        f"{HPM0_FPD_BASE + CONTROL_RANGE:#010x}, {_range_text(CONTROL_RANGE)}",
        *memory_path,
        f"  {inst}/interrupt -> axi_intc_0/intr, axi_intc_0/irq -> pl_ps_irq0 (PYNQ's",
        "  pynq.Interrupt needs an AXI interrupt controller between an IP and the PS)",
        "  proc_sys_reset: pl_resetn0 -> ap_rst_n and the interconnect resets, synchronised",
        "",
        "Needs the IP from package_ip.tcl in ./ip and the ZCU106 board files installed.",
        *(["Unverified without Vivado: the S_AXI_HP0_FPD properties, pins and segments below",
           "(from published block designs, not from a run of this script)."] if master else []),
        "Environment: RLK_JOBS (parallel runs, default 4).",
    ], "vivado -mode batch -source zcu106_bd.tcl [-tclargs <out_dir>]")


def _project(acc: Accelerator) -> list:
    """Step 1, the project on the ZCU106's part and board part with the IP's repository,
    and the cell names."""
    board, inst = BOARDS["zcu106"], bd_instance(acc.module)
    return [
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
    ]


def _block_design(acc: Accelerator, master: bool) -> list:
    """Step 2: the block design, the PS with the board preset and our settings (pl_clk0,
    the HPM ports, S_AXI_HP0_FPD for a master, the interrupt), the accelerator's cell."""
    L = [
        "",
        "# 2. The block design: the PS with the board preset, then our settings on top of it.",
        "create_bd_design $bd",
        "create_bd_cell -type ip -vlnv [rlk::latest_ipdef xilinx.com:ip:zynq_ultra_ps_e] $ps",
        "apply_bd_automation -rule xilinx.com:bd_rule:zynq_ultra_ps_e \\",
        "    -config {apply_board_preset \"1\"} [get_bd_cells $ps]",
        f"# pl_clk0 at {TARGET_FREQ_MHZ} MHz from the IOPLL (the PS picks the divisors: IOPLL / "
        f"{BOARDS['zcu106'].clock_divisors[0]} on the",
    ]
    if master:
        (gmem,) = acc.masters
        L += [
            f"# ZCU106 preset, {BOARDS['zcu106'].clock_actual_mhz} MHz). HPM0 FPD master on; HPM1 "
            "FPD and HPM0 LPD off (their",
            f"# clocks would be left unconnected). {HP0_PORT} (the PS's SAXIGP2, "
            "PSU__USE__S_AXI_GP2)",
            f"# on, as wide as {gmem.name} (the PS allows 32 to 128). pl_ps_irq0 takes the "
            "interrupt",
            "# controller's output.",
            *dict_line([("CONFIG.PSU__FPGA_PL0_ENABLE", 1),
                         ("CONFIG.PSU__CRL_APB__PL0_REF_CTRL__FREQMHZ", TARGET_FREQ_MHZ),
                         ("CONFIG.PSU__USE__M_AXI_GP0", 1),
                         ("CONFIG.PSU__MAXIGP0__DATA_WIDTH", HPM0_WIDTH),
                         ("CONFIG.PSU__USE__M_AXI_GP1", 0),
                         ("CONFIG.PSU__USE__M_AXI_GP2", 0),
                         ("CONFIG.PSU__USE__S_AXI_GP2", 1),
                         ("CONFIG.PSU__SAXIGP2__DATA_WIDTH", hp0_width(acc)),
                         ("CONFIG.PSU__USE__IRQ0", 1)], "[get_bd_cells $ps]"),
        ]
    else:
        L += [
            f"# ZCU106 preset, {BOARDS['zcu106'].clock_actual_mhz} MHz). HPM0 and HPM1 FPD masters "
            "on, HPM0 LPD off (its clock",
            "# would be left unconnected); HPM1 as wide as s_axi_mem (the PS allows 32 to 128).",
            "# pl_ps_irq0 takes the interrupt controller's output.",
            *dict_line([("CONFIG.PSU__FPGA_PL0_ENABLE", 1),
                         ("CONFIG.PSU__CRL_APB__PL0_REF_CTRL__FREQMHZ", TARGET_FREQ_MHZ),
                         ("CONFIG.PSU__USE__M_AXI_GP0", 1),
                         ("CONFIG.PSU__MAXIGP0__DATA_WIDTH", HPM0_WIDTH),
                         ("CONFIG.PSU__USE__M_AXI_GP1", 1),
                         ("CONFIG.PSU__MAXIGP1__DATA_WIDTH", hpm1_width(acc)),
                         ("CONFIG.PSU__USE__M_AXI_GP2", 0),
                         ("CONFIG.PSU__USE__IRQ0", 1)], "[get_bd_cells $ps]"),
        ]
    return L + [
        "",
        f"# The accelerator, VLNV {vlnv(acc.module)} (a PYNQ driver binds to it).",
        f"create_bd_cell -type ip -vlnv {vlnv(acc.module)} $accel",
        "",
    ]


def _ip_cells(acc: Accelerator, master: bool) -> list:
    """The SmartConnects of the control and memory paths, the AXI interrupt controller,
    proc_sys_reset."""
    if master:
        (gmem,) = acc.masters
        hp0 = hp0_width(acc)
        L = [
            "# SmartConnects: one converts the PS's 128-bit AXI4 with 16-bit IDs to the AXI4-Lite",
            f"# control port; the other takes {gmem.name} ({gmem.data_width}-bit data, "
            f"{gmem.addr_width}-bit addresses, its",
            f"# own IDs) to {HP0_PORT} ({hp0}-bit data, the PS's 49-bit addresses and 6-bit "
            "IDs). Separate",
            "# paths keep the storage traffic from queueing in front of register accesses.",
        ]
    else:
        L = [
            "# SmartConnects convert the PS's 128-bit AXI4 with 16-bit IDs to the AXI4-Lite "
            "control",
            "# port and to s_axi_mem's width and 1-bit IDs. Separate HPM ports keep bulk memory",
            "# traffic from queueing in front of register accesses.",
        ]
    return L + [
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
    ]


def _connections(acc: Accelerator, master: bool) -> list:
    """Step 3: the AXI paths, one clock, the synchronised resets, the interrupt."""
    L = [
        "",
        "# 3. Connections.",
        "connect_bd_intf_net [get_bd_intf_pins $ps/M_AXI_HPM0_FPD] "
        "[get_bd_intf_pins $sc_ctrl/S00_AXI]",
        "connect_bd_intf_net [get_bd_intf_pins $sc_ctrl/M00_AXI] "
        "[get_bd_intf_pins $accel/s_axi_control]",
        "connect_bd_intf_net [get_bd_intf_pins $sc_ctrl/M01_AXI] [get_bd_intf_pins $intc/s_axi]",
    ]
    if master:
        (gmem,) = acc.masters
        L += [
            f"connect_bd_intf_net [get_bd_intf_pins $accel/{gmem.name}] "
            "[get_bd_intf_pins $sc_mem/S00_AXI]",
            "connect_bd_intf_net [get_bd_intf_pins $sc_mem/M00_AXI] "
            f"[get_bd_intf_pins $ps/{HP0_PORT}]",
        ]
        port_clocks = "[get_bd_pins $ps/maxihpm0_fpd_aclk] [get_bd_pins $ps/saxihp0_fpd_aclk]"
    else:
        L += [
            "connect_bd_intf_net [get_bd_intf_pins $ps/M_AXI_HPM1_FPD] "
            "[get_bd_intf_pins $sc_mem/S00_AXI]",
            "connect_bd_intf_net [get_bd_intf_pins $sc_mem/M00_AXI] "
            "[get_bd_intf_pins $accel/s_axi_mem]",
        ]
        port_clocks = "[get_bd_pins $ps/maxihpm0_fpd_aclk] [get_bd_pins $ps/maxihpm1_fpd_aclk]"
    L += [
        "# One clock for everything: no clock-domain crossing anywhere in the PL.",
        "connect_bd_net [get_bd_pins $ps/pl_clk0] \\",
        f"    {port_clocks} \\",
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
    ]
    return L


def _addresses(acc: Accelerator, master: bool) -> list:
    """Step 4: the addresses in the PS's view; for a master, PS DDR in the accelerator's
    view."""
    mem = acc.memory
    if master:
        L = [
            "# 4. Addresses in the PS's view (its Data address space): the control registers and",
            "#    the interrupt controller in the HPM0_FPD window.",
        ]
    else:
        L = [
            "# 4. Addresses in the PS's view (its Data address space): the control registers and",
            "#    the interrupt controller in the HPM0_FPD window, the memory in the HPM1_FPD",
            "#    window, sized from the manifest (2**AWADDR width).",
        ]
    L += [
        "set data [get_bd_addr_spaces $ps/Data]",
        f"assign_bd_address -target_address_space $data -offset {HPM0_FPD_BASE:#010x} "
        f"-range {_range_text(CONTROL_RANGE)} \\",
        f"    [get_bd_addr_segs $accel/s_axi_control/{CONTROL_BLOCK}] -force",
        "assign_bd_address -target_address_space $data "
        f"-offset {HPM0_FPD_BASE + CONTROL_RANGE:#010x} -range {_range_text(CONTROL_RANGE)} \\",
        "    [get_bd_addr_segs $intc/S_AXI/Reg] -force",
    ]
    if master:
        (gmem,) = acc.masters
        L += [
            f"# In the accelerator's view (the address space of {gmem.name}): PS DDR where the PS "
            "has it,",
            "# so the physical address of a pynq.allocate buffer (PS DDR) reaches the buffer. The",
            "# address space is the IP's (package_ip.tcl declares it); an IP packaged without one",
            "# has no addresses to give, and the design would not reach memory.",
            f"set gmem [get_bd_addr_spaces -quiet $accel/{gmem.name}]",
            "if {$gmem eq \"\"} {",
            f"    error \"rlk: $accel has no address space {gmem.name}: its IP must declare one "
            "for the\\",
            f"        master (ipx::add_address_space {gmem.name} + MASTER_ADDRESS_SPACE_REF, as "
            "package_ip.tcl\\",
            "        does): package it again with package_ip.tcl\"",
            "}",
        ]
        for name, offset, size in HP0_DDR_SEGMENTS:
            L += [
                f"assign_bd_address -target_address_space $gmem -offset {offset:#011x} "
                f"-range {_range_text(size)} \\",
                f"    [get_bd_addr_segs $ps/SAXIGP2/{name}] -force",
            ]
        L += [
            "# The rest the HP port reaches (HP0_LPS_OCM, HP0_QSPI) where the PS has it, so that",
            "# validate_bd_design finds no unassigned segment.",
            "assign_bd_address -target_address_space $gmem",
        ]
    else:
        L += [
            f"assign_bd_address -target_address_space $data -offset {HPM1_FPD_BASE:#010x} "
            f"-range {_range_text(mem.window)} \\",
            f"    [get_bd_addr_segs $accel/s_axi_mem/{MEMORY_BLOCK}] -force",
        ]
    return L


def _implementation() -> list:
    """Steps 5 to 7: validate and synthesise the design, implement it, the bitstream, and
    the .bit and .hwh for PYNQ."""
    return [
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
