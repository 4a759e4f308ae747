"""Generated Vivado scripts: what the packager takes from the manifest (and refuses), and
package_ip.tcl under the stub Vivado: the IP-XACT core, its bus interfaces, register map,
memory block and AXI master address spaces (the shared description: vivado_cases.py).
"""

import json
import re
import subprocess
from pathlib import Path

import pytest

from rtl_gen import vivado as V
from sw.regmap import ACCESS_TYPES
from tclstub import TCLSH, needs_tclsh, run_stubbed
from vivado_cases import ACCELS, BD, BD_MASTER, KERNELS, only, options, parse_int


# -- constants and inputs ----------------------------------------------------------------------
def test_shipped_accelerators_found():
    assert "gae_accel_n8" in BD and "gae_accel_n64" in BD
    assert "replay_accel_k16" in BD                  # the prioritized replay accelerator
    # the trainers: accelerators with their own storage master, packaged as kernels too
    assert KERNELS == ["dqn_trainer_u250", "dqn_trainer_zcu106", "gae_kernel_n64",
                       "gae_kernel_n8", "learner_kernel_s4", "learner_kernel_s8",
                       "replay_kernel_k16", "replay_kernel_k16_1m"]
    assert not set(BD) & set(KERNELS)
    assert BD_MASTER == ["dqn_trainer_zcu106"]
    assert not any(a.startswith("gae_pe") for a in ACCELS)      # bare blocks have no CSR


def test_vlnv_and_instance():
    assert V.vlnv("gae_accel_n8") == "rlk:accel:gae_accel_n8:1.0"
    assert V.vlnv("x").split(":") == [V.VENDOR, V.LIBRARY, "x", V.VERSION]
    assert V.bd_instance("gae_accel_n8") == "gae_accel_n8_0"


def test_access_types_map_to_ipxact():
    assert set(V.IPXACT_ACCESS) == set(ACCESS_TYPES)
    assert V.IPXACT_ACCESS == {
        "rw": ("read-write", None, None),
        "wo": ("write-only", None, None),
        "ro": ("read-only", None, None),
        "rw_sc": ("read-write", "oneToSet", None),
        "ro_cor": ("read-only", None, "clear"),
        "rw_tow": ("read-write", "oneToToggle", None),
    }


def test_boards():
    assert V.BOARDS["zcu106"].part == "xczu7ev-ffvc1156-2-e"
    assert V.BOARDS["u200"].part == "xcu200-fsgd2104-2-e"
    assert V.BOARDS["u250"].part == "xcu250-figd2104-2L-e"
    assert V.BOARDS["u200"].platform == "xilinx_u200_gen3x16_xdma_2_202110_1"
    assert V.BOARDS["u250"].platform.startswith("xilinx_u250_gen3x16_xdma")


def test_interfaces_from_manifest(acc):
    ports = {p["name"]: p for p in acc.manifest["ports"]}
    ctl = acc.control
    assert ctl.lite and not ctl.master
    assert ctl.addr_width == ports["s_axi_control_awaddr"]["width"]
    assert ctl.window >= acc.regmap.span and ctl.window == 1 << ctl.addr_width
    if acc.kernel is None:
        assert set(acc.interfaces) == {"s_axi_control", "s_axi_mem"}
        mem = acc.memory
        assert not mem.lite and not mem.master and acc.masters == []
        assert mem.addr_width == ports["s_axi_mem_awaddr"]["width"]
        assert mem.data_width == ports["s_axi_mem_wdata"]["width"]
    else:
        assert set(acc.interfaces) == {"s_axi_control", "m_axi_gmem"} and acc.memory is None
        (gmem,) = acc.masters
        assert gmem.master and not gmem.lite and gmem.addr_width == 64
        assert gmem.data_width == ports["m_axi_gmem_wdata"]["width"]
        assert ctl.window == 0x1000
        (ptr,) = acc.kernel["pointers"]
        assert acc.pointer_of(ptr["lo"]) is acc.pointer_of(ptr["hi"]) is ptr
        assert acc.pointer_of("STATUS") is None


def _port(ports, name):
    return next(p for p in ports if p["name"] == name)


def _add_led(ports):
    ports.append({"name": "debug_led", "dir": "output", "width": 1})


def _flip_wready(ports):
    _port(ports, "s_axi_mem_wready")["dir"] = "input"


def _drop_rready(ports):
    ports.remove(_port(ports, "s_axi_mem_rready"))


def _drop_memory(ports):
    ports[:] = [p for p in ports if not p["name"].startswith("s_axi_mem_")]


def _narrow_control(ports):
    for name in ("s_axi_control_awaddr", "s_axi_control_araddr"):
        _port(ports, name)["width"] = 4


def _drop_interrupt(ports):
    ports.remove(_port(ports, "interrupt"))


@only(BD)
@pytest.mark.parametrize("edit,message", [
    (_add_led, "port 'debug_led' is not ap_clk"),
    (_flip_wready, "s_axi_mem_wready must be an output"),
    (_drop_rready, "s_axi_mem lacks RREADY"),
    (_drop_memory, "no s_axi_mem"),
    (_narrow_control, "decodes 16 bytes, the register map spans"),
    (_drop_interrupt, "needs a 1-bit output port 'interrupt'"),
])
def test_manifest_errors(acc, edit, message):
    """A manifest the packager could not represent faithfully is refused, with the reason."""
    manifest = json.loads(json.dumps(acc.manifest))
    edit(manifest["ports"])
    with pytest.raises(ValueError, match=re.escape(message)):
        V.Accelerator(acc.hdl_dir, manifest, acc.regmap)


def _flip_awvalid(m):
    _port(m["ports"], "m_axi_gmem_awvalid")["dir"] = "input"


def _no_kernel_entry(m):
    del m["kernel"]


def _pointer_elsewhere(m):
    m["kernel"]["pointers"][0]["offset"] += 4


def _pointer_for_other_port(m):
    m["kernel"]["pointers"][0]["port"] = "m_axi_other"


def _unknown_scalar(m):
    m["kernel"]["scalars"].append("NO_SUCH_REGISTER")


@only(KERNELS)
@pytest.mark.parametrize("edit,message", [
    (_flip_awvalid, "m_axi_gmem_awvalid must be an output on an AXI master"),
    (_no_kernel_entry, "an AXI master needs the manifest's 'kernel' entry"),
    (_pointer_elsewhere, "pointer {ptr} must be registers {ptr}_LO at 0x"),
    (_pointer_for_other_port, "no pointer argument addresses m_axi_gmem"),
    (_unknown_scalar, "kernel arguments ['NO_SUCH_REGISTER'] are not registers"),
])
def test_kernel_manifest_errors(acc, edit, message):
    manifest = json.loads(json.dumps(acc.manifest))
    edit(manifest)
    message = message.format(ptr=acc.kernel["pointers"][0]["name"])
    with pytest.raises(ValueError, match=re.escape(message)):
        V.Accelerator(acc.hdl_dir, manifest, acc.regmap)


@needs_tclsh
def test_tcl_str_round_trip(tmp_path):
    words = ["plain", "two words", "a{b", "}", "back\\slash", 'quote"d', "$dollar", "[cmd]",
             "semi;colon", "", "multi\nline", "tab\there", "(<= 1.0)", "ünïcode"]
    script = tmp_path / "words.tcl"
    script.write_text("fconfigure stdout -encoding utf-8\n" + "".join(
        f"puts [binary encode hex [encoding convertto utf-8 {V.tcl_str(w)}]]\n" for w in words),
        encoding="utf-8")
    out = subprocess.run([TCLSH, str(script)], capture_output=True, text=True, check=True)
    assert [bytes.fromhex(h).decode() for h in out.stdout.split("\n")[:-1]] == words


def test_generation_is_deterministic(acc, tmp_path):
    paths = V.write_scripts(acc, tmp_path)
    first = {p.name: p.read_bytes() for p in paths}
    common = ["package_ip.tcl", "alveo_xo.tcl", "alveo_u200.cfg", "alveo_u250.cfg",
              "ooc_timing.tcl"]
    assert sorted(first) == sorted(common + (["kernel.xml"] if acc.kernel else []) +
                                   (["zcu106_bd.tcl"] if V.zcu106_flow(acc) else []))
    assert ("zcu106_bd.tcl" in first) == (acc.module in BD + BD_MASTER)
    V.write_scripts(acc, tmp_path)
    assert {p.name: p.read_bytes() for p in paths} == first


# -- package_ip.tcl ----------------------------------------------------------------------------
@needs_tclsh
def test_package_project_and_files(acc, scripts, packaged):
    rec = packaged
    (_, pos), = [options(a) for a in rec.calls_of("add_files")]
    assert [Path(p) for p in pos] == [acc.verilog.resolve()] and acc.verilog.exists()
    (opts, _), = [options(a) for a in rec.calls_of("ipx::package_project")]
    assert opts["-vendor"] == V.VENDOR and opts["-library"] == V.LIBRARY
    assert Path(opts["-root_dir"]) == scripts / "ip" and "-import_files" in opts
    core = rec.objects["core=core"]["props"]
    assert core["NAME"] == acc.module and core["VERSION"] == V.VERSION
    assert "SDX_KERNEL" not in core
    assert rec.calls_of("ipx::check_integrity") == [["core=core"]]
    names = [c[0] for c in rec.calls]
    assert names.index("ipx::save_core") > max(i for i, n in enumerate(names)
                                                if n.startswith("ipx::add_"))
    assert names[-1] == "close_project"
    assert (scripts / "ip" / "component.xml").exists()


@needs_tclsh
def test_bus_interfaces(acc, packaged):
    rec = packaged
    busifs = rec.children("core=core", "bus_interface")
    assert set(busifs) == set(acc.interfaces) | {"ap_clk", "ap_rst_n", "interrupt"}

    def props(name):
        return busifs[name]["props"]

    def params(name):
        return {n: o["props"]["VALUE"]
                for n, o in rec.children(busifs[name]["handle"], "bus_parameter").items()}

    mapped = {}
    for name, b in busifs.items():
        for logical, pm in rec.children(b["handle"], "port_map").items():
            assert pm["props"]["PHYSICAL_NAME"] not in mapped
            mapped[pm["props"]["PHYSICAL_NAME"]] = (name, logical)
    # Every port of the manifest is in exactly one interface, under its AXI logical name.
    assert set(mapped) == {p["name"] for p in acc.manifest["ports"]}
    for physical, (bus, logical) in mapped.items():
        if bus.startswith(("s_axi_", "m_axi_")):
            assert physical == f"{bus}_{logical.lower()}"
    assert mapped["ap_clk"] == ("ap_clk", "CLK") and mapped["ap_rst_n"] == ("ap_rst_n", "RST")
    assert mapped["interrupt"] == ("interrupt", "INTERRUPT")

    for axi in acc.interfaces.values():
        p = props(axi.name)
        assert p["ABSTRACTION_TYPE_VLNV"] == "xilinx.com:interface:aximm_rtl:1.0"
        assert p["BUS_TYPE_VLNV"] == "xilinx.com:interface:aximm:1.0"
        assert p["INTERFACE_MODE"] == ("master" if axi.master else "slave")
        assert p.get("SLAVE_MEMORY_MAP_REF") == (None if axi.master else axi.name)
        assert p.get("MASTER_ADDRESS_SPACE_REF") == (axi.name if axi.master else None)
        if axi.master:
            lim = acc.kernel["m_axi"][axi.name]
            assert params(axi.name) == {
                "MAX_BURST_LENGTH": str(lim["max_burst"]),
                "NUM_READ_OUTSTANDING": str(lim["outstanding"]),
                "NUM_WRITE_OUTSTANDING": str(lim["outstanding"])}
    assert props("ap_clk")["BUS_TYPE_VLNV"] == "xilinx.com:signal:clock:1.0"
    assert props("ap_rst_n")["BUS_TYPE_VLNV"] == "xilinx.com:signal:reset:1.0"
    assert props("interrupt")["BUS_TYPE_VLNV"] == "xilinx.com:signal:interrupt:1.0"
    assert props("interrupt")["INTERFACE_MODE"] == "master"
    assert params("ap_clk") == {"ASSOCIATED_BUSIF": ":".join(acc.interfaces),
                                "ASSOCIATED_RESET": "ap_rst_n"}
    assert params("ap_clk")["ASSOCIATED_BUSIF"] in ("s_axi_control:s_axi_mem",
                                                    "s_axi_control:m_axi_gmem")
    assert params("ap_rst_n") == {"POLARITY": "ACTIVE_LOW"}
    assert params("interrupt") == {"SENSITIVITY": "LEVEL_HIGH"}
    assert "active low" in acc.manifest["reset"]


@needs_tclsh
def test_register_map_declared(acc, packaged):
    """Every register and field of <module>_regs.json, and nothing else, as PYNQ reads them."""
    rec = packaged
    maps = rec.children("core=core", "memory_map")
    assert set(maps) == {i.name for i in acc.slaves}
    # Exactly one block per map: the packager's inferred block is gone (PYNQ drops the
    # register map of an interface with two blocks).
    blocks = rec.children(maps["s_axi_control"]["handle"], "address_block")
    assert list(blocks) == [V.CONTROL_BLOCK]
    block = blocks[V.CONTROL_BLOCK]
    bp = block["props"]
    assert bp["USAGE"] == "register"
    assert parse_int(bp["BASE_ADDRESS"]) == 0 and parse_int(bp["WIDTH"]) == 32
    rng = parse_int(bp["RANGE"])
    assert rng == acc.control.window >= acc.regmap.span and rng & (rng - 1) == 0

    regs = rec.children(block["handle"], "register")
    # A kernel pointer's two words are one 64-bit register named after the pointer.
    ptrs = {q["lo"]: q for q in (acc.kernel or {}).get("pointers", ())}
    his = {q["hi"] for q in ptrs.values()}
    assert list(regs) == [ptrs[r.name]["name"] if r.name in ptrs else r.name
                          for r in acc.regmap if r.name not in his]
    for lo, q in ptrs.items():
        o = regs[q["name"]]
        assert parse_int(o["props"]["ADDRESS_OFFSET"]) == acc.regmap.offset(lo) == q["offset"]
        assert parse_int(o["props"]["SIZE"]) == 64 and o["props"]["ACCESS"] == "read-write"
        (param,) = rec.children(o["handle"], "register_parameter").values()
        assert param["name"] == "ASSOCIATED_BUSIF" and param["props"]["VALUE"] == q["port"]
        (f,) = rec.children(o["handle"], "field").values()
        lsb = acc.regmap[lo].fields[0].lsb
        assert (parse_int(f["props"]["BIT_OFFSET"]),
                parse_int(f["props"]["BIT_WIDTH"])) == (lsb, 64 - lsb)
    regmap = json.loads((acc.hdl_dir / acc.manifest["registers"]["json"]).read_text())
    for r in regmap["registers"]:
        if r["name"] in ptrs or r["name"] in his:
            continue
        o = regs[r["name"]]["props"]
        assert parse_int(o["ADDRESS_OFFSET"]) == r["offset"] and parse_int(o["SIZE"]) == 32
        assert o["DESCRIPTION"] == (r["doc"] or r["name"])
        fields = rec.children(regs[r["name"]]["handle"], "field")
        assert list(fields) == [f["name"] for f in r["fields"]]
        accesses = set()
        for f in r["fields"]:
            p = fields[f["name"]]["props"]
            access, mwv, ra = V.IPXACT_ACCESS[f["access"]]
            assert (parse_int(p["BIT_OFFSET"]), parse_int(p["BIT_WIDTH"])) == (f["lsb"], f["width"])
            assert p["ACCESS"] == access
            assert p.get("MODIFIED_WRITE_VALUE") == mwv and p.get("READ_ACTION") == ra
            assert p["DESCRIPTION"] == (f["doc"] or f"{r['name']}.{f['name']}")
            accesses.add(access)
        want = ("read-write" if "read-write" in accesses or accesses >= {"read-only",
                                                                         "write-only"}
                else accesses.pop())
        assert o["ACCESS"] == want
    ctrl = {n: f["props"] for n, f in rec.children(regs["CTRL"]["handle"], "field").items()}
    assert ctrl["AP_START"]["MODIFIED_WRITE_VALUE"] == "oneToSet"
    assert ctrl["AP_DONE"]["READ_ACTION"] == "clear"


@needs_tclsh
@only(BD)
def test_memory_block_sized_from_manifest(acc, packaged):
    maps = packaged.children("core=core", "memory_map")
    blocks = packaged.children(maps["s_axi_mem"]["handle"], "address_block")
    assert list(blocks) == [V.MEMORY_BLOCK]
    p = blocks[V.MEMORY_BLOCK]["props"]
    ports = {q["name"]: q["width"] for q in acc.manifest["ports"]}
    assert parse_int(p["RANGE"]) == 1 << ports["s_axi_mem_awaddr"]
    assert parse_int(p["WIDTH"]) == ports["s_axi_mem_wdata"] and p["USAGE"] == "memory"
    assert not packaged.children(blocks[V.MEMORY_BLOCK]["handle"], "register")


def test_address_space_range():
    from rtl_gen.vivado.package_ip import address_space_range

    assert address_space_range(64) == "16E" and 16 << 60 == 1 << 64
    assert [address_space_range(w) for w in (32, 40, 49, 12, 3)] == ["4G", "1T", "512T", "4K",
                                                                      "8"]
    with pytest.raises(ValueError, match="address width 0"):
        address_space_range(0)


@needs_tclsh
def test_master_address_spaces(acc, scripts, packaged):
    """Every AXI master has an address space of its own name, 2**64 bytes (16E) of 64-bit
    addresses, referenced by its bus interface; the one inference left (modelled by the stubs
    from the m_axi_*_araddr ports) is removed first. An accelerator without a master declares
    none and its script never touches address spaces."""
    from rtl_gen.vivado.package_ip import address_space_range

    rec = packaged
    spaces = rec.children("core=core", "address_space")
    busifs = rec.children("core=core", "bus_interface")
    assert set(spaces) == {m.name for m in acc.masters}
    for m in acc.masters:
        assert m.addr_width == 64 and address_space_range(m.addr_width) == "16E"
        assert spaces[m.name]["props"] == {"RANGE": "16E", "WIDTH": "64"}
        assert busifs[m.name]["props"]["MASTER_ADDRESS_SPACE_REF"] == m.name
    names = [c[0] for c in rec.calls]
    if acc.masters:
        assert rec.calls_of("ipx::remove_address_space") == [[m.name, "core=core"]
                                                             for m in acc.masters]
        assert rec.calls_of("ipx::add_address_space") == [[m.name, "core=core"]
                                                          for m in acc.masters]
        assert max(i for i, n in enumerate(names) if n == "ipx::remove_address_space") < \
            min(i for i, n in enumerate(names) if n == "ipx::add_address_space") < \
            names.index("ipx::save_core")
    else:
        assert not [n for n in names if "address_space" in n]
        assert "address_space" not in (scripts / "package_ip.tcl").read_text()
    # What the saved IP declares (the stubs' component.xml): the master's addressSpaceRef and
    # the space with its range and width.
    import xml.etree.ElementTree as ET

    ns = {"spirit": "http://www.spiritconsortium.org/XMLSchema/SPIRIT/1685-2009"}
    root = ET.parse(scripts / "ip" / "component.xml").getroot()
    refs = {b.findtext("spirit:name", namespaces=ns):
            b.find("spirit:master/spirit:addressSpaceRef", ns)
            for b in root.iterfind("spirit:busInterfaces/spirit:busInterface", ns)}
    assert {n: r.get(f"{{{ns['spirit']}}}addressSpaceRef") for n, r in refs.items()
            if r is not None} == {m.name: m.name for m in acc.masters}
    assert {a.findtext("spirit:name", namespaces=ns): (a.findtext("spirit:range", namespaces=ns),
                                                       a.findtext("spirit:width", namespaces=ns))
            for a in root.iterfind("spirit:addressSpaces/spirit:addressSpace", ns)} == \
        {m.name: ("16E", "64") for m in acc.masters}


@needs_tclsh
@only(["gae_kernel_n8"])
def test_master_reference_needs_its_address_space(scripts):
    """The stubs refuse to save a core whose master references an address space it does not
    have (a dangling IP-XACT addressSpaceRef), and the inferred one alone is not a space the
    master references: both halves of the declaration are needed."""
    text = (scripts / "package_ip.tcl").read_text()
    start = text.index("set space [ipx::add_address_space m_axi_gmem $core]")
    end = text.index("set_property MASTER_ADDRESS_SPACE_REF", start)
    (scripts / "no_space.tcl").write_text(text[:start] + text[end:])
    rec = run_stubbed(scripts / "no_space.tcl", check=False)
    assert "m_axi_gmem references address space 'm_axi_gmem', which the core does not have" \
        in rec.error
