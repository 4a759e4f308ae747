# Helpers shared by the scripts rtl_gen.vivado generates into build/vivado/<module>/, which
# source this file where the package is (package data of rtl_gen.vivado).
# Plain Tcl 8.6 plus the Vivado commands get_ipdefs, get_property and get_runs, so the tests in
# tb/vivado/ can run it under tclsh with stub Vivado commands.

namespace eval rlk {}

# The value of environment variable $name, or $default when it is unset or empty.
proc rlk::env {name default} {
    if {[info exists ::env($name)] && $::env($name) ne ""} {
        return $::env($name)
    }
    return $default
}

# Argument $index of `vivado ... -tclargs a b c` (0-based), or $default.
proc rlk::arg {index default} {
    if {[info exists ::argv] && [llength $::argv] > $index} {
        return [lindex $::argv $index]
    }
    return $default
}

# Stop with a message saying what to do when a file the flow needs is missing.
proc rlk::require_file {path hint} {
    if {$path eq "" || ![file exists $path]} {
        error "rlk: missing '$path': $hint"
    }
}

# The newest version of a Xilinx IP, e.g. xilinx.com:ip:smartconnect -> ...:smartconnect:1.0,
# so the scripts work across Vivado releases (IP versions change between them). -dictionary
# sorting compares the numbers in "3.10" and "3.9" as numbers.
proc rlk::latest_ipdef {vlnv_prefix} {
    set defs [get_ipdefs -all "$vlnv_prefix:*"]
    if {$defs eq ""} {
        error "rlk: no IP $vlnv_prefix in this Vivado's catalog"
    }
    return [lindex [lsort -dictionary $defs] end]
}

# Stop unless a run finished (launch_runs returns before it does; wait_on_run does not fail
# when the run does).
proc rlk::require_run {run} {
    set progress [get_property PROGRESS [get_runs $run]]
    if {$progress ne "100%"} {
        error "rlk: run $run stopped at $progress: see\
            [get_property DIRECTORY [get_runs $run]]/runme.log"
    }
}

# The block design's hardware handoff file: under <project>.gen from Vivado 2020.2 on, under
# <project>.srcs before.
proc rlk::find_hwh {proj_dir proj bd} {
    foreach sub [list $proj.gen $proj.srcs] {
        set hwh [file join $proj_dir $sub sources_1 bd $bd hw_handoff $bd.hwh]
        if {[file exists $hwh]} {
            return $hwh
        }
    }
    error "rlk: no $bd.hwh under $proj_dir/$proj.gen or .srcs (generate_target did not run?)"
}
