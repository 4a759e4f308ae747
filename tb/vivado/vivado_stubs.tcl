# Stub Vivado/Vitis commands for running the generated scripts under plain tclsh.
#
# Every stub checks its options against the command's documented options (UG835; package_xo:
# UG1393) and its number of positional arguments, records the call, and keeps a small model
# of what Vivado would hold: IP-XACT objects (core, bus interfaces, port maps, memory maps,
# address blocks, registers, fields, address spaces) with their properties, block-design cells,
# and the files a flow writes (component.xml, .hwh, .bit, .xo), so the scripts' own file
# handling runs for real. The stub component.xml holds what a block design reads back from
# the IP: its bus interfaces and address spaces (::stub::write_component); a cell of our IP
# has an address space <cell>/<name> only where the packaged IP declared one that a master
# bus interface references (MASTER_ADDRESS_SPACE_REF), as in Vivado. Any command without a
# stub fails with "invalid command name": the list below is the list of Vivado commands the
# scripts may use.
#
# ::stub::dump writes the calls and the objects as JSON for tb/vivado/tclstub.py.
#
# Environment knobs (for error paths): STUB_WNS (slack reported by runs and timing paths,
# default 0.042), STUB_NO_BOARD=1 (no ZCU106 board files), STUB_HWH_IN_SRCS=1 (the .hwh lands
# under <project>.srcs, as before Vivado 2020.2).

namespace eval ::stub {
    variable calls {}
    variable objects [dict create]
    variable state [dict create]
    variable specs [dict create]
}
namespace eval ::ipx {}

proc ::stub::env {name default} {
    if {[info exists ::env($name)] && $::env($name) ne ""} { return $::env($name) }
    return $default
}

# -- objects: handle -> {kind name parent props} ----------------------------------------------
proc ::stub::new {kind name parent} {
    variable objects
    set handle [expr {$parent eq "" ? "$kind=$name" : "$parent/$kind=$name"}]
    if {[dict exists $objects $handle]} { error "stub: $kind '$name' already exists in $parent" }
    dict set objects $handle [dict create kind $kind name $name parent $parent props {}]
    return $handle
}
proc ::stub::ensure {kind name {parent ""}} {
    variable objects
    set handle [expr {$parent eq "" ? "$kind=$name" : "$parent/$kind=$name"}]
    if {![dict exists $objects $handle]} { new $kind $name $parent }
    return $handle
}
proc ::stub::exists {handle} {
    variable objects
    return [dict exists $objects $handle]
}
proc ::stub::kind_of {handle} {
    variable objects
    if {![dict exists $objects $handle]} { error "stub: '$handle' is not an object" }
    return [dict get $objects $handle kind]
}
proc ::stub::expect_kind {cmd handle kinds} {
    if {[kind_of $handle] ni $kinds} { error "$cmd: '$handle' is not a [join $kinds { or }]" }
}
proc ::stub::children {parent kind} {
    variable objects
    set out {}
    dict for {h o} $objects {
        if {[dict get $o parent] eq $parent && [dict get $o kind] eq $kind} { lappend out $h }
    }
    return $out
}
proc ::stub::delete {handle} {
    variable objects
    foreach h [dict keys $objects] {
        if {$h eq $handle || [string first "$handle/" $h] == 0} { dict unset objects $h }
    }
}
proc ::stub::setprop {handle key value} {
    variable objects
    if {![dict exists $objects $handle]} { error "set_property: '$handle' is not an object" }
    dict set objects $handle props [string toupper $key] $value
}

# -- command definitions --------------------------------------------------------------------
# spec: option names, "-x=" for an option taking a value; min/max positional arguments
# (max -1: unbounded). -quiet and -verbose are accepted everywhere, as in Vivado.
proc ::stub::define {name spec min max} {
    variable specs
    dict set specs $name [list [concat $spec -quiet -verbose] $min $max]
    proc ::$name args "::stub::dispatch [list $name] \$args"
}

proc ::stub::parse {cmd argl} {
    variable specs
    lassign [dict get $specs $cmd] spec min max
    set opts [dict create]
    set pos {}
    for {set i 0} {$i < [llength $argl]} {incr i} {
        set a [lindex $argl $i]
        if {[string match {-[a-z_]*} $a]} {
            if {"$a=" in $spec} {
                if {$i + 1 >= [llength $argl]} { error "$cmd: option $a needs a value" }
                dict set opts $a [lindex $argl [incr i]]
            } elseif {$a in $spec} {
                dict set opts $a 1
            } else {
                error "$cmd: unknown option $a"
            }
        } else {
            lappend pos $a
        }
    }
    if {[llength $pos] < $min || ($max >= 0 && [llength $pos] > $max)} {
        error "$cmd: [llength $pos] positional arguments ($pos), expected $min..$max"
    }
    return [list $opts $pos]
}

proc ::stub::dispatch {cmd argl} {
    variable calls
    lassign [parse $cmd $argl] opts pos
    lappend calls [list $cmd {*}$argl]
    set handler ::stub::h::$cmd
    if {[llength [info commands $handler]]} { return [$handler $opts $pos] }
    return ""
}
namespace eval ::stub::h {}
namespace eval ::stub::h::ipx {}

proc ::stub::opt {opts name {default ""}} {
    if {[dict exists $opts $name]} { return [dict get $opts $name] }
    return $default
}
proc ::stub::need {cmd opts names} {
    foreach n $names {
        if {![dict exists $opts $n]} { error "$cmd: $n is required" }
    }
}
proc ::stub::st {key {default ""}} {
    variable state
    if {[dict exists $state $key]} { return [dict get $state $key] }
    return $default
}
proc ::stub::set_st {key value} {
    variable state
    dict set state $key $value
}
proc ::stub::touch {path} {
    file mkdir [file dirname $path]
    close [open $path w]
    return $path
}

# -- projects and files ---------------------------------------------------------------------
::stub::define create_project {-part= -force -in_memory -ip -rtl_kernel} 0 2
::stub::define current_project {} 0 1
::stub::define close_project {-delete} 0 0
::stub::define current_fileset {-constrset -simset} 0 1
::stub::define add_files {-fileset= -of_objects= -norecurse -copy_to= -force
    -scan_for_includes} 1 -1
::stub::define update_compile_order {-fileset=} 0 0
::stub::define set_property {-dict= -name= -value= -objects=} 1 3
::stub::define get_property {-min -max} 2 2
::stub::define get_files {-compile_order= -used_in= -references -of_objects= -filter= -regexp
    -nocase -all -norecurse} 0 -1
::stub::define update_ip_catalog {-rebuild -add_ip= -repo_path= -scan_changes
    -update_module_ref} 0 0
::stub::define get_ipdefs {-all -filter= -regexp -nocase -name= -vlnv=} 0 1
::stub::define get_board_parts {-latest_file_version -latest_hw_revision -filter= -regexp
    -nocase -of_objects=} 0 1

proc ::stub::h::create_project {opts pos} {
    lassign $pos name dir
    if {$name eq "" || $dir eq ""} { error "create_project: give a name and a directory" }
    ::stub::need create_project $opts -part
    ::stub::set_st proj $name
    ::stub::set_st proj_dir [file normalize $dir]
    ::stub::set_st part [dict get $opts -part]
    file mkdir $dir
    set h [::stub::ensure project $name]
    ::stub::setprop $h PART [dict get $opts -part]
    return $h
}
proc ::stub::h::current_project {opts pos} {
    if {[::stub::st proj] eq ""} { error "current_project: no open project" }
    return "project=[::stub::st proj]"
}
proc ::stub::h::close_project {opts pos} {
    if {[::stub::st proj] eq ""} { error "close_project: no open project" }
    ::stub::set_st proj ""
}
proc ::stub::h::current_fileset {opts pos} {
    if {[::stub::st proj] eq ""} { error "current_fileset: no open project" }
    return [::stub::ensure fileset sources_1]
}
proc ::stub::h::add_files {opts pos} {
    if {[::stub::st proj] eq ""} { error "add_files: no open project" }
    # The design sources, which ipx::package_project infers interfaces from.
    if {[::stub::opt $opts -fileset sources_1] eq "sources_1"} {
        ::stub::set_st sources [concat [::stub::st sources] $pos]
    }
}
proc ::stub::h::set_property {opts pos} {
    if {[dict exists $opts -dict]} {
        if {[llength $pos] != 1} { error "set_property -dict: give one object list" }
        set kv [dict get $opts -dict]
        if {[llength $kv] % 2} { error "set_property -dict: odd-length list $kv" }
        set objs [lindex $pos 0]
    } else {
        if {[llength $pos] != 3} { error "set_property: expected name value objects" }
        lassign $pos name value objs
        set kv [list $name $value]
    }
    if {$objs eq ""} { error "set_property: no objects" }
    foreach o $objs {
        foreach {k v} $kv { ::stub::setprop $o $k $v }
    }
}
proc ::stub::h::get_property {opts pos} {
    lassign $pos name obj
    set key [string toupper $name]
    set o [dict get $::stub::objects $obj]
    if {[dict exists $o props $key]} { return [dict get $o props $key] }
    switch -- $key {
        NAME { return [dict get $o name] }
        PROGRESS { return 100% }
        STATS.WNS - SLACK { return [::stub::env STUB_WNS 0.042] }
        DIRECTORY {
            return [file join [::stub::st proj_dir] [::stub::st proj].runs [dict get $o name]]
        }
    }
    error "get_property: $obj has no property $name"
}
proc ::stub::h::get_files {opts pos} {
    set pattern [lindex $pos 0]
    set bd [::stub::st bd]
    if {$bd ne "" && $pattern eq "$bd.bd"} {
        set f [file join [::stub::st proj_dir] [::stub::st proj].srcs sources_1 bd $bd $bd.bd]
        return [::stub::ensure file $f]
    }
    error "get_files: no file matches '$pattern'"
}
proc ::stub::h::get_ipdefs {opts pos} {
    set pattern [lindex $pos 0]
    if {[string match {*:\*} $pattern]} {
        # Two versions, listed oldest-last, so only a numeric-aware sort finds the newest.
        set base [string range $pattern 0 end-1]
        return [list ${base}1.10 ${base}1.9]
    }
    if {[string match xilinx.com:* $pattern]} { return [list $pattern] }
    # Our own IP: in the catalog if an IP repo path holds a packaged component.xml.
    foreach dir [::stub::st ip_repo_paths] {
        if {[file exists [file join $dir component.xml]]} { return [list $pattern] }
    }
    return ""
}
proc ::stub::h::get_board_parts {opts pos} {
    if {[::stub::env STUB_NO_BOARD 0]} { return "" }
    set base [string range [lindex $pos 0] 0 end-1]
    return [list ${base}2.6 ${base}2.5]
}
proc ::stub::h::update_ip_catalog {opts pos} {
    set h "project=[::stub::st proj]"
    set props [dict get $::stub::objects $h props]
    if {[dict exists $props IP_REPO_PATHS]} {
        ::stub::set_st ip_repo_paths [dict get $props IP_REPO_PATHS]
    }
}

# -- IP packager ------------------------------------------------------------------------------
::stub::define ipx::package_project {-root_dir= -vendor= -library= -name= -version= -taxonomy=
    -module= -import_files -set_current= -force -force_update_compile_order -generated_files
    -archive_source_project} 0 0
::stub::define ipx::current_core {} 0 1
::stub::define ipx::remove_all_bus_interface {} 1 1
::stub::define ipx::get_memory_maps {-of_objects= -filter= -regexp -nocase} 0 1
::stub::define ipx::remove_memory_map {} 2 2
::stub::define ipx::get_bus_interfaces {-of_objects= -filter= -regexp -nocase} 0 1
::stub::define ipx::add_bus_interface {} 2 2
::stub::define ipx::add_port_map {} 2 2
::stub::define ipx::add_bus_parameter {} 2 2
::stub::define ipx::add_memory_map {} 2 2
::stub::define ipx::add_address_block {} 2 2
::stub::define ipx::add_register {} 2 2
::stub::define ipx::add_field {} 2 2
::stub::define ipx::add_register_parameter {} 2 2
::stub::define ipx::get_address_spaces {-of_objects= -filter= -regexp -nocase} 0 1
::stub::define ipx::add_address_space {} 2 2
::stub::define ipx::remove_address_space {} 2 2
::stub::define ipx::create_xgui_files {} 1 1
::stub::define ipx::update_checksums {} 1 1
::stub::define ipx::check_integrity {-kernel -xrt -quiet_message} 1 1
::stub::define ipx::save_core {} 0 1

proc ::stub::h::ipx::package_project {opts pos} {
    if {[::stub::st proj] eq ""} { error "ipx::package_project: no open project" }
    ::stub::need ipx::package_project $opts {-root_dir -vendor -library}
    set root [file normalize [dict get $opts -root_dir]]
    ::stub::set_st ip_root $root
    set core [::stub::new core core ""]
    ::stub::setprop $core VENDOR [dict get $opts -vendor]
    ::stub::setprop $core LIBRARY [dict get $opts -library]
    # What inference leaves behind (the scripts must remove it): an AXI interface and a
    # memory map with an automatic address block; for every AXI master port group of the
    # sources (m_axi_<x>_araddr), its interface and an address space of the same name, which
    # removing the interface does not remove.
    ::stub::new bus_interface s_axi_control $core
    ::stub::new address_block reg0 [::stub::new memory_map s_axi_control $core]
    set masters {}
    foreach f [::stub::st sources] {
        if {![file isfile $f]} { continue }
        set fh [open $f]
        set text [read $fh]
        close $fh
        foreach {- m} [regexp -all -inline {\m(m_axi_[A-Za-z0-9_]+)_araddr\M} $text] {
            lappend masters $m
        }
    }
    foreach m [lsort -unique $masters] {
        ::stub::new bus_interface $m $core
        ::stub::new address_space $m $core
    }
    ::stub::touch [file join $root component.xml]
    return ""
}
proc ::stub::h::ipx::current_core {opts pos} {
    if {![::stub::exists core=core]} { error "ipx::current_core: nothing packaged" }
    return core=core
}
proc ::stub::h::ipx::remove_all_bus_interface {opts pos} {
    ::stub::expect_kind ipx::remove_all_bus_interface [lindex $pos 0] core
    foreach h [::stub::children [lindex $pos 0] bus_interface] { ::stub::delete $h }
}
proc ::stub::h::ipx::get_memory_maps {opts pos} {
    set core [::stub::opt $opts -of_objects]
    ::stub::expect_kind ipx::get_memory_maps $core core
    return [::stub::children $core memory_map]
}
proc ::stub::h::ipx::remove_memory_map {opts pos} {
    lassign $pos name core
    set h "$core/memory_map=$name"
    if {![::stub::exists $h]} { error "ipx::remove_memory_map: no memory map $name" }
    ::stub::delete $h
}
proc ::stub::h::ipx::get_address_spaces {opts pos} {
    set core [::stub::opt $opts -of_objects]
    ::stub::expect_kind ipx::get_address_spaces $core core
    set out [::stub::children $core address_space]
    if {[llength $pos]} {
        set out [lsearch -all -inline -exact $out "$core/address_space=[lindex $pos 0]"]
    }
    return $out
}
proc ::stub::h::ipx::remove_address_space {opts pos} {
    lassign $pos name core
    ::stub::expect_kind ipx::remove_address_space $core core
    set h "$core/address_space=$name"
    if {![::stub::exists $h]} { error "ipx::remove_address_space: no address space $name" }
    ::stub::delete $h
}
proc ::stub::h::ipx::get_bus_interfaces {opts pos} {
    set h "[::stub::opt $opts -of_objects]/bus_interface=[lindex $pos 0]"
    if {![::stub::exists $h]} { error "ipx::get_bus_interfaces: no bus interface $h" }
    return $h
}
foreach {cmd kind parent_kind} {
    add_bus_interface bus_interface core
    add_port_map port_map bus_interface
    add_bus_parameter bus_parameter bus_interface
    add_memory_map memory_map core
    add_address_block address_block memory_map
    add_register register address_block
    add_field field register
    add_register_parameter register_parameter register
    add_address_space address_space core
} {
    proc ::stub::h::ipx::$cmd {opts pos} [string map [list @K $kind @P $parent_kind @C $cmd] {
        lassign $pos name parent
        ::stub::expect_kind ipx::@C $parent @P
        return [::stub::new @K $name $parent]
    }]
}
foreach cmd {create_xgui_files update_checksums check_integrity} {
    proc ::stub::h::ipx::$cmd {opts pos} {
        ::stub::expect_kind ipx [lindex $pos 0] core
    }
}
proc ::stub::h::ipx::save_core {opts pos} {
    set core [lindex $pos 0]
    if {$core eq ""} { set core core=core }
    ::stub::expect_kind ipx::save_core $core core
    # A master's reference must name an address space of the core (IP-XACT addressSpaceRef).
    foreach b [::stub::children $core bus_interface] {
        set props [dict get $::stub::objects $b props]
        if {[dict exists $props MASTER_ADDRESS_SPACE_REF]} {
            set ref [dict get $props MASTER_ADDRESS_SPACE_REF]
            if {![::stub::exists "$core/address_space=$ref"]} {
                error "ipx::save_core: [dict get $::stub::objects $b name] references\
                    address space '$ref', which the core does not have"
            }
        }
    }
    ::stub::write_component $core [file join [::stub::st ip_root] component.xml]
    ::stub::set_st saved_core 1
}

# component.xml as the stubs write it: the bus interfaces (mode and, for a master, its
# addressSpaceRef; for a slave its memoryMapRef) and the address spaces (range, width), one
# element a line, in IP-XACT 1685-2009's element names. Not a complete component.xml: what a
# block design of the IP reads back (::stub::read_address_spaces) and the tests inspect.
proc ::stub::xml {s} { return [string map {& &amp; < &lt; > &gt; \" &quot;} $s] }
proc ::stub::write_component {core path} {
    variable objects
    set sp spirit
    set ns http://www.spiritconsortium.org/XMLSchema/SPIRIT/1685-2009
    set lines [list {<?xml version="1.0" encoding="UTF-8"?>} \
        "<!-- written by the stub ipx::save_core (tb/vivado/vivado_stubs.tcl) -->" \
        "<$sp:component xmlns:$sp=\"$ns\">" "  <$sp:busInterfaces>"]
    foreach b [::stub::children $core bus_interface] {
        set o [dict get $objects $b]
        set props [dict get $o props]
        set name [::stub::xml [dict get $o name]]
        set mode [expr {[dict exists $props INTERFACE_MODE] ?
                        [dict get $props INTERFACE_MODE] : ""}]
        set ref ""
        if {$mode eq "master" && [dict exists $props MASTER_ADDRESS_SPACE_REF]} {
            set r [::stub::xml [dict get $props MASTER_ADDRESS_SPACE_REF]]
            set ref "<$sp:addressSpaceRef $sp:addressSpaceRef=\"$r\"/>"
        } elseif {$mode eq "slave" && [dict exists $props SLAVE_MEMORY_MAP_REF]} {
            set r [::stub::xml [dict get $props SLAVE_MEMORY_MAP_REF]]
            set ref "<$sp:memoryMapRef $sp:memoryMapRef=\"$r\"/>"
        }
        set m [expr {$mode eq "" ? "" : "<$sp:$mode>$ref</$sp:$mode>"}]
        lappend lines "    <$sp:busInterface><$sp:name>$name</$sp:name>$m</$sp:busInterface>"
    }
    lappend lines "  </$sp:busInterfaces>" "  <$sp:addressSpaces>"
    foreach a [::stub::children $core address_space] {
        set o [dict get $objects $a]
        set line "    <$sp:addressSpace><$sp:name>[::stub::xml [dict get $o name]]</$sp:name>"
        foreach {key tag} {RANGE range WIDTH width} {
            if {[dict exists $o props $key]} {
                append line "<$sp:$tag>[::stub::xml [dict get $o props $key]]</$sp:$tag>"
            }
        }
        lappend lines "$line</$sp:addressSpace>"
    }
    lappend lines "  </$sp:addressSpaces>" "</$sp:component>"
    file mkdir [file dirname $path]
    set f [open $path w]
    puts $f [join $lines \n]
    close $f
}
# The address spaces a cell of the IP in <ip_dir> has: those of component.xml that a master
# bus interface references.
proc ::stub::read_address_spaces {path} {
    set f [open $path]
    set text [read $f]
    close $f
    set spaces {}
    set re {<spirit:addressSpace><spirit:name>([^<]*)</spirit:name>}
    foreach {- name} [regexp -all -inline $re $text] { lappend spaces $name }
    set out {}
    set re {<spirit:master><spirit:addressSpaceRef spirit:addressSpaceRef="([^"]*)"/>}
    foreach {- ref} [regexp -all -inline $re $text] {
        if {$ref in $spaces} { lappend out $ref }
    }
    return $out
}

# -- block design ---------------------------------------------------------------------------
::stub::define create_bd_design {-dir= -cell= -mode= -bdsource=} 1 1
::stub::define create_bd_cell {-vlnv= -type= -reference= -prefix=} 1 1
::stub::define apply_bd_automation {-rule= -dict= -config= -opts=} 1 1
::stub::define get_bd_cells {-hierarchical -regexp -filter= -of_objects=} 0 -1
::stub::define get_bd_pins {-hierarchical -regexp -filter= -of_objects=} 0 -1
::stub::define get_bd_intf_pins {-hierarchical -regexp -filter= -of_objects=} 0 -1
::stub::define get_bd_addr_spaces {-hierarchical -regexp -filter= -of_objects=} 0 -1
::stub::define get_bd_addr_segs {-hierarchical -regexp -filter= -of_objects= -excluded} 0 -1
::stub::define connect_bd_net {-net= -boundary_type=} 2 -1
::stub::define connect_bd_intf_net {-intf_net= -boundary_type=} 2 2
::stub::define assign_bd_address {-target_address_space= -boundary -master_boundary -external
    -dict= -import_from_file= -export_to_file= -export_gui_to_file= -offset= -range=
    -base_high= -with_locktype= -with_name= -force} 0 -1
::stub::define validate_bd_design {-force -design=} 0 0
::stub::define save_bd_design {} 0 1
::stub::define generate_target {-force} 2 2
::stub::define make_wrapper {-files= -top -testbench -inst_template -fileset= -import
    -force} 0 0

proc ::stub::h::create_bd_design {opts pos} {
    if {[::stub::st proj] eq ""} { error "create_bd_design: no open project" }
    ::stub::set_st bd [lindex $pos 0]
}
proc ::stub::h::create_bd_cell {opts pos} {
    if {[::stub::st bd] eq ""} { error "create_bd_cell: no block design" }
    ::stub::need create_bd_cell $opts {-type -vlnv}
    set vlnv [dict get $opts -vlnv]
    if {[llength [::stub::h::get_ipdefs {-all 1} [list $vlnv]]] == 0} {
        error "create_bd_cell: no IP $vlnv in the catalog"
    }
    set h [::stub::new bd_cell [lindex $pos 0] ""]
    ::stub::setprop $h VLNV $vlnv
    if {![string match xilinx.com:* $vlnv]} {
        # Our IP: its address spaces are those its component.xml declares.
        set spaces {}
        foreach dir [::stub::st ip_repo_paths] {
            set xml [file join $dir component.xml]
            if {[file exists $xml]} { set spaces [::stub::read_address_spaces $xml] }
        }
        ::stub::set_st "addr_spaces:[lindex $pos 0]" $spaces
    }
    return $h
}
proc ::stub::h::apply_bd_automation {opts pos} {
    ::stub::need apply_bd_automation $opts {-rule -config}
    ::stub::expect_kind apply_bd_automation [lindex $pos 0] bd_cell
}
proc ::stub::h::get_bd_cells {opts pos} {
    set h "bd_cell=[lindex $pos 0]"
    if {![::stub::exists $h]} { error "get_bd_cells: no cell [lindex $pos 0]" }
    return $h
}
# Pins, interface pins, address spaces and segments: "<cell>/<rest>", the cell must exist.
foreach {cmd kind} {
    get_bd_pins bd_pin get_bd_intf_pins bd_intf_pin
    get_bd_addr_spaces bd_addr_space get_bd_addr_segs bd_addr_seg
} {
    proc ::stub::h::$cmd {opts pos} [string map [list @K $kind @C $cmd] {
        set path [lindex $pos 0]
        set cell [lindex [split $path /] 0]
        if {![::stub::exists bd_cell=$cell]} { error "@C: no cell $cell (for $path)" }
        return [::stub::ensure @K $path]
    }]
}
# A cell of our IP has only the address spaces its package declares; as in Vivado, asking for
# another finds nothing (an empty result, not an error).
rename ::stub::h::get_bd_addr_spaces ::stub::h::_get_bd_addr_spaces
proc ::stub::h::get_bd_addr_spaces {opts pos} {
    set path [lindex $pos 0]
    lassign [split $path /] cell space
    set key "addr_spaces:$cell"
    if {[dict exists $::stub::state $key] && $space ni [::stub::st $key]} { return "" }
    return [::stub::h::_get_bd_addr_spaces $opts $pos]
}
proc ::stub::h::connect_bd_net {opts pos} {
    foreach p $pos { ::stub::expect_kind connect_bd_net $p bd_pin }
}
proc ::stub::h::connect_bd_intf_net {opts pos} {
    foreach p $pos { ::stub::expect_kind connect_bd_intf_net $p bd_intf_pin }
}
proc ::stub::h::assign_bd_address {opts pos} {
    ::stub::expect_kind assign_bd_address [::stub::opt $opts -target_address_space] bd_addr_space
    foreach p $pos { ::stub::expect_kind assign_bd_address $p bd_addr_seg }
}
proc ::stub::h::validate_bd_design {opts pos} {
    ::stub::set_st validated 1
}
proc ::stub::h::generate_target {opts pos} {
    set bd [::stub::st bd]
    set sub [expr {[::stub::env STUB_HWH_IN_SRCS 0] ? "srcs" : "gen"}]
    ::stub::touch [file join [::stub::st proj_dir] [::stub::st proj].$sub sources_1 bd $bd \
        hw_handoff $bd.hwh]
}
proc ::stub::h::make_wrapper {opts pos} {
    ::stub::need make_wrapper $opts -files
    if {![::stub::st validated 0]} { error "make_wrapper: block design not validated" }
    set bd [::stub::st bd]
    ::stub::set_st wrapper 1
    return [::stub::touch [file join [::stub::st proj_dir] [::stub::st proj].gen sources_1 bd \
        $bd hdl ${bd}_wrapper.v]]
}

# -- runs -------------------------------------------------------------------------------------
::stub::define launch_runs {-jobs= -to_step= -next_step -host= -remote_cmd= -scripts_only
    -lsf_cmd= -sge_cmd= -custom_script= -dir= -force} 1 -1
::stub::define wait_on_run {-timeout=} 1 1
::stub::define get_runs {-filter= -regexp -nocase -of_objects=} 0 1

proc ::stub::h::launch_runs {opts pos} {
    if {![::stub::st wrapper 0]} { error "launch_runs: no top-level wrapper" }
    if {[lindex $pos 0] eq "impl_1" && [::stub::opt $opts -to_step] eq "write_bitstream"} {
        set bd [::stub::st bd]
        ::stub::touch [file join [::stub::st proj_dir] [::stub::st proj].runs impl_1 \
            ${bd}_wrapper.bit]
    }
}
proc ::stub::h::get_runs {opts pos} {
    return [::stub::ensure run [lindex $pos 0]]
}

# -- Vitis ------------------------------------------------------------------------------------
::stub::define package_xo {-kernel_name= -force -kernel_xml= -output_kernel_xml= -design_xml=
    -ip_directory= -parent_ip_directory= -kernel_files= -kernel_xml_args= -kernel_xml_pipes=
    -kernel_xml_connections= -ctrl_protocol= -xo_path=} 0 0

proc ::stub::h::package_xo {opts pos} {
    ::stub::need package_xo $opts {-kernel_name -xo_path}
    set ip [::stub::opt $opts -ip_directory]
    if {![file exists [file join $ip component.xml]]} { error "package_xo: no IP in '$ip'" }
    set xml [::stub::opt $opts -kernel_xml]
    if {$xml ne "" && ![file exists $xml]} { error "package_xo: no kernel XML '$xml'" }
    ::stub::touch [dict get $opts -xo_path]
}

# -- non-project synthesis and implementation ----------------------------------------------
::stub::define read_verilog {-library= -sv} 1 -1
::stub::define read_xdc {-ref= -cells= -no_add -mode= -unmanaged} 1 1
::stub::define synth_design {-top= -part= -mode= -flatten_hierarchy= -directive= -rtl
    -retiming -no_timing_driven} 0 0
::stub::define opt_design {-directive=} 0 0
::stub::define place_design {-directive=} 0 0
::stub::define route_design {-directive=} 0 0
::stub::define report_timing_summary {-file= -max_paths= -delay_type=
    -report_unconstrained} 0 0
::stub::define report_utilization {-file= -hierarchical} 0 0
::stub::define report_timing {-file= -max_paths= -nworst= -delay_type= -from= -to=} 0 0
::stub::define report_design_analysis {-file= -logic_level_distribution -timing} 0 0
::stub::define write_checkpoint {-force -cell=} 1 1
::stub::define get_timing_paths {-delay_type= -max_paths= -nworst= -setup -hold -from=
    -to=} 0 0

proc ::stub::h::read_verilog {opts pos} {
    foreach f $pos {
        if {![file exists $f]} { error "read_verilog: no file $f" }
    }
}
proc ::stub::h::read_xdc {opts pos} {
    if {![file exists [lindex $pos 0]]} { error "read_xdc: no file [lindex $pos 0]" }
}
proc ::stub::h::synth_design {opts pos} {
    ::stub::need synth_design $opts {-top -part}
}
foreach cmd {report_timing_summary report_utilization report_timing report_design_analysis} {
    proc ::stub::h::$cmd {opts pos} {
        if {[dict exists $opts -file]} { ::stub::touch [dict get $opts -file] }
    }
}
proc ::stub::h::write_checkpoint {opts pos} {
    ::stub::touch [lindex $pos 0]
}
proc ::stub::h::get_timing_paths {opts pos} {
    return [::stub::ensure timing_path worst]
}

# -- XDC --------------------------------------------------------------------------------------
::stub::define current_design {} 0 1
::stub::define create_clock {-period= -name= -waveform= -add} 0 1
::stub::define get_ports {-filter= -regexp -nocase -of_objects=
    -scoped_to_current_instance} 0 -1
::stub::define get_cells {-hierarchical -filter= -regexp -nocase -of_objects=} 0 -1
::stub::define get_pins {-hierarchical -filter= -regexp -nocase -of_objects=} 0 -1
::stub::define get_clocks {-filter= -regexp -nocase -of_objects= -include_generated_clocks} 0 -1
::stub::define set_false_path {-from= -to= -through= -setup -hold -rise -fall -reset_path} 0 0
::stub::define set_max_delay {-from= -to= -through= -datapath_only} 1 1
::stub::define set_clock_groups {-name= -asynchronous -physically_exclusive
    -logically_exclusive -group=} 0 0

proc ::stub::h::current_design {opts pos} { return [::stub::ensure design current] }
proc ::stub::h::get_ports {opts pos} {
    set out {}
    foreach p $pos { lappend out [::stub::ensure port $p] }
    return $out
}
proc ::stub::h::create_clock {opts pos} {
    ::stub::need create_clock $opts -period
    if {![string is double -strict [dict get $opts -period]]} {
        error "create_clock: -period must be a number"
    }
}

# -- JSON dump --------------------------------------------------------------------------------
proc ::stub::json {s} {
    return "\"[string map {\\ \\\\ \" \\\" \n \\n \r \\r \t \\t} $s]\""
}
proc ::stub::dump {path error_message} {
    variable calls
    variable objects
    set out "\{\"error\": [expr {$error_message eq {} ? {null} : [json $error_message]}],\n"
    append out "\"calls\": \["
    set sep ""
    foreach c $calls {
        set words {}
        foreach w $c { lappend words [json $w] }
        append out "$sep\[[join $words {, }]\]"
        set sep ",\n"
    }
    append out "\],\n\"objects\": \{"
    set sep ""
    dict for {h o} $objects {
        set props {}
        dict for {k v} [dict get $o props] { lappend props "[json $k]: [json $v]" }
        append out "$sep[json $h]: \{\"kind\": [json [dict get $o kind]],\
            \"name\": [json [dict get $o name]], \"parent\": [json [dict get $o parent]],\
            \"props\": \{[join $props {, }]\}\}"
        set sep ",\n"
    }
    append out "\}\}\n"
    set f [open $path w]
    puts -nonewline $f $out
    close $f
}
