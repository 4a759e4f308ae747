"""``zcu106_bd.tcl``: the ZCU106 block design around an accelerator, for PYNQ.

Zynq UltraScale+ PS with the board preset and a 300 MHz ``pl_clk0``, SmartConnects on
HPM0_FPD (control registers, AXI interrupt controller) and HPM1_FPD (``s_axi_mem``),
``proc_sys_reset``, then bitstream, and ``<module>.bit`` + ``<module>.hwh`` side by side for
``pynq.Overlay``. Only for accelerators with an ``s_axi_mem`` slave; kernels go to Alveo.
"""

from pathlib import Path

from sw.registry import vlnv

from .model import (BOARDS, CONTROL_BLOCK, MEMORY_BLOCK, TARGET_FREQ_MHZ, Accelerator,
                    check_accelerator)
from .tcl import dict_line, prologue

__all__ = ["bd_instance", "zcu106_bd_tcl", "hpm1_width", "ZCU106_BOARD_PART", "HPM0_FPD_BASE",
           "HPM1_FPD_BASE", "HPM_WINDOW", "HPM0_WIDTH", "CONTROL_RANGE"]

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


def hpm1_width(acc: Accelerator) -> int:
    """Data width of M_AXI_HPM1_FPD: as wide as ``s_axi_mem`` (the PS allows 32 to 128)."""
    return min(128, max(32, acc.memory.data_width))


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
        ``acc`` has no ``s_axi_mem`` (a kernel), or one larger than the 256 MiB HPM1 window.
    """
    check_accelerator(acc)
    out_dir = Path(out_dir)
    board, mem = BOARDS["zcu106"], acc.memory
    inst = bd_instance(acc.module)
    if mem is None:
        raise ValueError(f"{acc.module}: the ZCU106 block design needs an s_axi_mem slave; "
                         f"a kernel with an AXI master is for the Alveo flow")
    if mem.window > HPM_WINDOW:
        raise ValueError(f"{acc.module}: s_axi_mem ({mem.window} bytes) does not fit the "
                         f"256 MiB HPM1_FPD window")
    hpm1 = hpm1_width(acc)
    L = prologue(acc, out_dir, "zcu106_bd.tcl", [
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
        *dict_line([("CONFIG.PSU__FPGA_PL0_ENABLE", 1),
                     ("CONFIG.PSU__CRL_APB__PL0_REF_CTRL__FREQMHZ", TARGET_FREQ_MHZ),
                     ("CONFIG.PSU__USE__M_AXI_GP0", 1),
                     ("CONFIG.PSU__MAXIGP0__DATA_WIDTH", HPM0_WIDTH),
                     ("CONFIG.PSU__USE__M_AXI_GP1", 1),
                     ("CONFIG.PSU__MAXIGP1__DATA_WIDTH", hpm1),
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

