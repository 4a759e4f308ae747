# tclsh run_stubbed.tcl <record.json> <script.tcl> [args...]
#
# Sources vivado_stubs.tcl, then <script.tcl> at global level with ::argv set to [args] (as
# `vivado -mode batch -source <script.tcl> -tclargs args` would), and writes what the stubs
# recorded to <record.json>, including the script's error message if it stopped with one.
set here [file dirname [file normalize [info script]]]
source [file join $here vivado_stubs.tcl]
lassign $argv record script
set argv [lrange $argv 2 end]
set argc [llength $argv]
set failed [catch {uplevel #0 [list source $script]} message]
::stub::dump $record [expr {$failed ? $message : ""}]
exit 0
