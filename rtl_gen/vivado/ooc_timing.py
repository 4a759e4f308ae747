"""``ooc_timing.tcl``: out-of-context synthesis and implementation of the accelerator alone.

The quickest timing answer: no block design or platform, any part, the 300 MHz ``ap_clk`` of
``constraints/accel_ooc.xdc``, timing and utilisation reports, and an error if WNS < 0.
"""

from pathlib import Path

from .model import BOARDS, TARGET_FREQ_MHZ, Accelerator, check_accelerator
from .tcl import prologue

__all__ = ["ooc_timing_tcl", "module_timing_tcl"]

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




def module_timing_tcl(manifest: dict, verilog, out_dir, *, period_ns: float,
                      part: str | None = None) -> str:
    """TCL for an out-of-context run of *any* emitted module, with the reports that check
    ``make timing``'s estimate (``scripts/timing.py --vivado DIR``).

    Unlike :func:`ooc_timing_tcl` it needs no register map (processing elements and other
    units have none) and constrains the manifest's own clock port (``clk`` or ``ap_clk``)
    inline. It reports timing (the 10 worst paths), utilisation and the logic-level
    distribution, and prints ``rlk-timing: <module> WNS <ns> Fmax <MHz>``; it does not fail on
    negative slack, since the point is the number.

    Parameters
    ----------
    manifest : dict
        The module's ``<module>.json``.
    verilog : path-like
        Its Verilog.
    out_dir : path-like
        Where the script will live; the Verilog path is written relative to it.
    period_ns : float
        The clock period to constrain (ns), e.g. ``1000 / 300``.
    part : str, optional
        Default part (the ZCU106's, -2); ``-tclargs <part>`` overrides it.
    """
    if not (isinstance(period_ns, (int, float)) and period_ns > 0):
        raise ValueError(f"period_ns must be a positive number, not {period_ns!r}")
    module = manifest.get("module")
    clock = str(manifest.get("clock", "")).split(" ")[0]
    if not module or not clock:
        raise ValueError("manifest must name its module and clock port (a <module>.json "
                         "written by rtl_gen.emit)")
    from .tcl import relative, tcl_str
    v = tcl_str(relative(Path(verilog), Path(out_dir)))
    part = part or BOARDS["zcu106"].part
    return "\n".join([
        f"# timing_ooc.tcl: out-of-context synthesis and implementation of {module} alone,",
        f"# {clock} at {period_ns:.3f} ns; written by scripts/timing.py --vivado (Vivado's",
        "# answer to make timing's estimate: compare Fmax and the logic levels).",
        "# Usage: vivado -mode batch -source timing_ooc.tcl [-tclargs <part>]",
        "set script_dir [file dirname [file normalize [info script]]]",
        f"set part [expr {{[llength $argv] > 0 ? [lindex $argv 0] : \"{part}\"}}]",
        f"set module {module}",
        "set out_dir [file join $script_dir ooc_$part]",
        "file mkdir $out_dir",
        f"read_verilog [file join $script_dir {v}]",
        "# The clock, as an XDC read before synthesis so that synthesis is timing driven.",
        "set xdc [file join $out_dir clock.xdc]",
        "set f [open $xdc w]",
        f"puts $f {{create_clock -period {period_ns:.3f} -name {clock} [get_ports {clock}]}}",
        "close $f",
        "read_xdc -mode out_of_context $xdc",
        "synth_design -top $module -part $part -mode out_of_context",
        "opt_design",
        "place_design",
        "route_design",
        "report_timing_summary -file [file join $out_dir timing_summary.rpt]",
        "report_timing -max_paths 10 -nworst 1 -file [file join $out_dir worst_paths.rpt]",
        "report_design_analysis -logic_level_distribution -file "
        "[file join $out_dir logic_levels.rpt]",
        "report_utilization -file [file join $out_dir utilization.rpt]",
        "set wns [get_property SLACK [get_timing_paths -delay_type max -max_paths 1]]",
        f"set fmax [expr {{1000.0 / ({period_ns:.3f} - $wns)}}]",
        "puts \"rlk-timing: $module on $part: WNS $wns ns Fmax [format %.1f $fmax] MHz "
        "(reports in $out_dir)\"",
        "",
    ])
