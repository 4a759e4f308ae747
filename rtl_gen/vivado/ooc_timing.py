"""``ooc_timing.tcl``: out-of-context synthesis and implementation of the accelerator alone.

The quickest timing answer: no block design or platform, any part, the 300 MHz ``ap_clk`` of
``constraints/accel_ooc.xdc``, timing and utilisation reports, and an error if WNS < 0.
"""

from pathlib import Path

from .model import BOARDS, TARGET_FREQ_MHZ, Accelerator, check_accelerator
from .tcl import prologue

__all__ = ["ooc_timing_tcl"]

def ooc_timing_tcl(acc: Accelerator, out_dir) -> str:
    """TCL for an out-of-context synthesis + implementation of ``acc`` alone, with timing.

    Parameters
    ----------
    acc : Accelerator
    out_dir : path
        Where the script will live (paths inside it are relative to it).

    Returns
    -------
    str
        The text of ``ooc_timing.tcl`` (``-tclargs <part> [<out_dir>]``).
    """
    check_accelerator(acc)
    out_dir = Path(out_dir)
    L = prologue(acc, out_dir, "ooc_timing.tcl", [
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


