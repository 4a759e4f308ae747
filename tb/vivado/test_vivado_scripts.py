"""Generated Vivado/Vitis scripts (rtl_gen.vivado): run under tclsh with stub Vivado commands.

Vivado is not available here, so these tests check what can be checked without it: the TCL
parses and runs; every Vivado command it calls is one the stubs know, with options from the
command's documentation; the IP-XACT objects it declares match the manifest and the register
map exactly (bus interfaces and port maps, clock/reset associations, one memory map per
slave, every register and field with offset, width and access); the block design connects
every interface and addresses every segment inside the right PS window; the files it reads
exist and the files it writes (.bit/.hwh for PYNQ, .xo) land where the flow says. Vitis
kernels (an AXI master instead of s_axi_mem: gae_kernel_n8, replay_kernel_k16,
learner_kernel_s4) are packaged with their m_axi
port and its address space (16E, width 64, the port's MASTER_ADDRESS_SPACE_REF), the 64-bit
pointer argument bound to it, and a kernel.xml checked argument by argument
against the register map; they get no ZCU106 flow, except the trainer's ZCU106 module, whose
master goes into PS DDR (its block design: test_trainer_bd.py).
"""

import json
import math
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from rtl_gen import vivado as V
from sw.regmap import ACCESS_TYPES
from tclstub import TCLSH, needs_tclsh, run_stubbed

ROOT = Path(__file__).resolve().parents[2]
HDL = ROOT / "hdl"
ACCELS = V.find_accelerators(HDL)
#: Accelerators with an AXI4 memory slave (ZCU106 block design) and Vitis kernels (m_axi).
BD = [a for a in ACCELS if V.Accelerator.load(HDL / a).memory is not None]
KERNELS = [a for a in ACCELS if V.Accelerator.load(HDL / a).kernel is not None]
#: Kernels whose AXI master goes into PS DDR in a ZCU106 block design (the trainer's ZCU106
#: module), and the others, for Alveo only.
BD_MASTER = [a for a in KERNELS if V.zcu106_flow(V.Accelerator.load(HDL / a)) == "master"]
ALVEO_ONLY = [a for a in KERNELS if a not in BD_MASTER]


@pytest.fixture(scope="module", params=ACCELS)
def acc(request):
    return V.Accelerator.load(HDL / request.param)


def only(names):
    """Run a test that uses the ``acc`` fixture for these accelerators only."""
    return pytest.mark.parametrize("acc", names, indirect=True)


@pytest.fixture
def scripts(acc, tmp_path):
    """The generated files of ``acc`` in a fresh directory (as build/vivado/<module>/)."""
    d = tmp_path / acc.module
    V.write_scripts(acc, d)
    return d


def _int(text):
    return int(str(text), 0)


def _range(text):
    m = re.fullmatch(r"(\d+)([KMG]?)", str(text))
    return int(m[1]) << {"": 0, "K": 10, "M": 20, "G": 30}[m[2]]


# Options of the commands the scripts use that take no value.
_SWITCHES = {"-norecurse", "-force", "-import_files", "-kernel", "-all", "-quiet",
             "-latest_file_version", "-delete", "-in_memory", "-rebuild"}


def _options(args):
    """Split a stub call's arguments into ({-option: value or True}, [positional])."""
    opts, pos, i = {}, [], 0
    while i < len(args):
        a = args[i]
        if a.startswith("-") and a not in _SWITCHES and i + 1 < len(args):
            opts[a], i = args[i + 1], i + 2
        elif a.startswith("-"):
            opts[a], i = True, i + 1
        else:
            pos.append(a)
            i += 1
    return opts, pos


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
@pytest.fixture
def packaged(scripts):
    return run_stubbed(scripts / "package_ip.tcl")


@needs_tclsh
def test_package_project_and_files(acc, scripts, packaged):
    rec = packaged
    (_, pos), = [_options(a) for a in rec.calls_of("add_files")]
    assert [Path(p) for p in pos] == [acc.verilog.resolve()] and acc.verilog.exists()
    (opts, _), = [_options(a) for a in rec.calls_of("ipx::package_project")]
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
    assert bp["USAGE"] == "register" and _int(bp["BASE_ADDRESS"]) == 0 and _int(bp["WIDTH"]) == 32
    rng = _int(bp["RANGE"])
    assert rng == acc.control.window >= acc.regmap.span and rng & (rng - 1) == 0

    regs = rec.children(block["handle"], "register")
    # A kernel pointer's two words are one 64-bit register named after the pointer.
    ptrs = {q["lo"]: q for q in (acc.kernel or {}).get("pointers", ())}
    his = {q["hi"] for q in ptrs.values()}
    assert list(regs) == [ptrs[r.name]["name"] if r.name in ptrs else r.name
                          for r in acc.regmap if r.name not in his]
    for lo, q in ptrs.items():
        o = regs[q["name"]]
        assert _int(o["props"]["ADDRESS_OFFSET"]) == acc.regmap.offset(lo) == q["offset"]
        assert _int(o["props"]["SIZE"]) == 64 and o["props"]["ACCESS"] == "read-write"
        (param,) = rec.children(o["handle"], "register_parameter").values()
        assert param["name"] == "ASSOCIATED_BUSIF" and param["props"]["VALUE"] == q["port"]
        (f,) = rec.children(o["handle"], "field").values()
        lsb = acc.regmap[lo].fields[0].lsb
        assert (_int(f["props"]["BIT_OFFSET"]), _int(f["props"]["BIT_WIDTH"])) == (lsb, 64 - lsb)
    regmap = json.loads((acc.hdl_dir / acc.manifest["registers"]["json"]).read_text())
    for r in regmap["registers"]:
        if r["name"] in ptrs or r["name"] in his:
            continue
        o = regs[r["name"]]["props"]
        assert _int(o["ADDRESS_OFFSET"]) == r["offset"] and _int(o["SIZE"]) == 32
        assert o["DESCRIPTION"] == (r["doc"] or r["name"])
        fields = rec.children(regs[r["name"]]["handle"], "field")
        assert list(fields) == [f["name"] for f in r["fields"]]
        accesses = set()
        for f in r["fields"]:
            p = fields[f["name"]]["props"]
            access, mwv, ra = V.IPXACT_ACCESS[f["access"]]
            assert (_int(p["BIT_OFFSET"]), _int(p["BIT_WIDTH"])) == (f["lsb"], f["width"])
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
    assert _int(p["RANGE"]) == 1 << ports["s_axi_mem_awaddr"]
    assert _int(p["WIDTH"]) == ports["s_axi_mem_wdata"] and p["USAGE"] == "memory"
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


# -- zcu106_bd.tcl -----------------------------------------------------------------------------
def _nets(rec, command):
    return [{a.split("=", 1)[1] for a in _options(args)[1]} for args in rec.calls_of(command)]


@needs_tclsh
@only(BD)
def test_zcu106_block_design(acc, scripts, packaged):
    rec = run_stubbed(scripts / "zcu106_bd.tcl")
    inst, ps = V.bd_instance(acc.module), "zynq_ultra_ps_e_0"
    (opts, pos), = [_options(a) for a in rec.calls_of("create_project")]
    assert opts["-part"] == V.BOARDS["zcu106"].part
    project = rec.objects[f"project={pos[0]}"]["props"]
    assert project["BOARD_PART"] == "xilinx.com:zcu106:part0:2.6"     # the newest revision
    cells = {o["name"]: o["props"] for o in rec.of_kind("bd_cell").values()}
    assert cells[inst]["VLNV"] == V.vlnv(acc.module)
    # Xilinx IPs at their newest version (the stubs list 1.10 after 1.9).
    assert cells[ps]["VLNV"] == "xilinx.com:ip:zynq_ultra_ps_e:1.10"
    assert cells["axi_intc_0"]["CONFIG.C_IRQ_CONNECTION"] == "1"
    assert cells["rst_pl0"]["CONFIG.C_EXT_RESET_HIGH"] == "0"
    assert cells["smartconnect_ctrl"]["CONFIG.NUM_MI"] == "2"
    assert any("apply_board_preset" in " ".join(a) for a in rec.calls_of("apply_bd_automation"))
    psp = cells[ps]
    assert psp["CONFIG.PSU__CRL_APB__PL0_REF_CTRL__FREQMHZ"] == str(V.TARGET_FREQ_MHZ) == "300"
    assert psp["CONFIG.PSU__USE__M_AXI_GP0"] == psp["CONFIG.PSU__USE__M_AXI_GP1"] == "1"
    assert psp["CONFIG.PSU__USE__IRQ0"] == "1" and psp["CONFIG.PSU__USE__M_AXI_GP2"] == "0"
    assert _int(psp["CONFIG.PSU__MAXIGP1__DATA_WIDTH"]) == min(128, acc.memory.data_width)

    intf = {frozenset(n) for n in _nets(rec, "connect_bd_intf_net")}
    assert intf == {frozenset(p) for p in [
        (f"{ps}/M_AXI_HPM0_FPD", "smartconnect_ctrl/S00_AXI"),
        ("smartconnect_ctrl/M00_AXI", f"{inst}/s_axi_control"),
        ("smartconnect_ctrl/M01_AXI", "axi_intc_0/s_axi"),
        (f"{ps}/M_AXI_HPM1_FPD", "smartconnect_mem/S00_AXI"),
        ("smartconnect_mem/M00_AXI", f"{inst}/s_axi_mem")]}
    nets = _nets(rec, "connect_bd_net")

    def net_of(pin):
        found = [n for n in nets if pin in n]
        assert len(found) == 1, f"{pin} on {len(found)} nets"
        return found[0]

    assert net_of(f"{ps}/pl_clk0") == {
        f"{ps}/pl_clk0", f"{ps}/maxihpm0_fpd_aclk", f"{ps}/maxihpm1_fpd_aclk",
        "smartconnect_ctrl/aclk", "smartconnect_mem/aclk", "axi_intc_0/s_axi_aclk",
        "rst_pl0/slowest_sync_clk", f"{inst}/ap_clk"}
    assert net_of(f"{ps}/pl_resetn0") == {f"{ps}/pl_resetn0", "rst_pl0/ext_reset_in"}
    assert net_of(f"{inst}/ap_rst_n") == {"rst_pl0/peripheral_aresetn", f"{inst}/ap_rst_n",
                                          "axi_intc_0/s_axi_aresetn"}
    assert net_of("rst_pl0/interconnect_aresetn") >= {"smartconnect_ctrl/aresetn",
                                                      "smartconnect_mem/aresetn"}
    assert net_of(f"{inst}/interrupt") == {f"{inst}/interrupt", "axi_intc_0/intr"}
    assert net_of("axi_intc_0/irq") == {"axi_intc_0/irq", f"{ps}/pl_ps_irq0"}
    # Every bus interface the package declared is connected in the block design.
    used = {p.split("/", 1)[1] for n in nets + [set(i) for i in intf] for p in n
            if p.startswith(inst + "/")}
    assert used == set(packaged.children("core=core", "bus_interface"))

    # Addresses: one segment per declared address block, in the right HPM window, no overlap.
    maps = packaged.children("core=core", "memory_map")
    blocks = {f"{inst}/{m}/{b}": _int(o["props"]["RANGE"]) for m, mo in maps.items()
              for b, o in packaged.children(mo["handle"], "address_block").items()}
    assigned = {}
    for args in rec.calls_of("assign_bd_address"):
        opts, pos = _options(args)
        assert opts["-target_address_space"] == f"bd_addr_space={ps}/Data" and "-force" in opts
        (seg,) = pos
        assigned[seg.split("=", 1)[1]] = (_int(opts["-offset"]), _range(opts["-range"]))
    assert set(blocks) <= set(assigned) and set(assigned) - set(blocks) == {"axi_intc_0/S_AXI/Reg"}
    for seg, size in blocks.items():
        base, rng = assigned[seg]
        assert rng >= size and base % rng == 0
    windows = {"s_axi_control": V.HPM0_FPD_BASE, "s_axi_mem": V.HPM1_FPD_BASE}
    for seg, (base, rng) in assigned.items():
        w = windows.get(seg.split("/")[1], V.HPM0_FPD_BASE)
        assert w <= base and base + rng <= w + V.HPM_WINDOW
    spans = sorted(assigned.values())
    assert all(a + r <= b for (a, r), (b, _) in zip(spans, spans[1:]))
    assert assigned[f"{inst}/s_axi_mem/{V.MEMORY_BLOCK}"][1] == acc.memory.window

    # Constraints, run, and the PYNQ files.
    (xdc,) = [_options(a)[1][0] for a in rec.calls_of("add_files") if "constrs_1" in a]
    assert Path(xdc) == ROOT / "constraints" / "zcu106.xdc" and Path(xdc).exists()
    names = [c[0] for c in rec.calls]
    assert names.index("validate_bd_design") < names.index("make_wrapper")
    assert ["impl_1", "-to_step", "write_bitstream"] == rec.calls_of("launch_runs")[0][:3]
    out = scripts / "zcu106"
    assert (out / f"{acc.module}.bit").exists() and (out / f"{acc.module}.hwh").exists()


@needs_tclsh
@only(BD)
@pytest.mark.parametrize("env,message", [
    ({"STUB_WNS": "-0.25"}, "timing not met at 300 MHz"),
    ({"STUB_NO_BOARD": "1"}, "no ZCU106 board part"),
])
def test_zcu106_stops(acc, scripts, packaged, env, message):
    rec = run_stubbed(scripts / "zcu106_bd.tcl", env=env, check=False)
    assert message in rec.error
    assert not (scripts / "zcu106" / f"{acc.module}.bit").exists()


@needs_tclsh
@only(BD)
def test_zcu106_older_vivado_hwh_location(acc, scripts, packaged):
    run_stubbed(scripts / "zcu106_bd.tcl", env={"STUB_HWH_IN_SRCS": "1"})
    assert (scripts / "zcu106" / f"{acc.module}.hwh").exists()


@needs_tclsh
@only(BD)
def test_zcu106_needs_the_ip(scripts):
    rec = run_stubbed(scripts / "zcu106_bd.tcl", check=False)
    assert "run package_ip.tcl first" in rec.error and not rec.calls


# -- Alveo -------------------------------------------------------------------------------------
@only(ALVEO_ONLY)
def test_zcu106_refuses_a_kernel(acc, tmp_path):
    why = ("an accelerator whose m_axi_gmem is 512 bits wide, wider than the ZCU106's "
           "S_AXI_HP ports (128)" if acc.module == "dqn_trainer_u250" else
           "a Vitis kernel (AXI master, no s_axi_mem)")
    assert V.zcu106_refusal(acc) == why and V.zcu106_flow(acc) is None
    with pytest.raises(ValueError, match=re.escape(
            f"{acc.module} is {why}: the ZCU106 block design needs an s_axi_mem slave or an "
            f"AXI master the accelerator drives itself, at most 128 bits wide (S_AXI_HP0_FPD); "
            f"build it for the Alveo flow")):
        V.zcu106_bd_tcl(acc, tmp_path)


@needs_tclsh
@only(BD)
def test_alveo_xo_stops_with_the_missing_dma_shell(scripts):
    rec = run_stubbed(scripts / "alveo_xo.tcl", check=False)
    assert "m_axi" in rec.error and "DMA shell" in rec.error and "s_axi_mem" in rec.error
    assert not rec.calls


@needs_tclsh
@only(BD)
def test_alveo_xo_forced(acc, scripts):
    rec = run_stubbed(scripts / "alveo_xo.tcl", env={"RLK_FORCE_XO": "1"})
    core = rec.objects["core=core"]["props"]
    assert core["SDX_KERNEL"] == "true" and core["SDX_KERNEL_TYPE"] == "rtl"
    assert core["VITIS_DRC"] == "ctrl_protocol ap_ctrl_hs"
    assert rec.calls_of("ipx::check_integrity") == [["-kernel", "core=core"]]
    (opts, _), = [_options(a) for a in rec.calls_of("package_xo")]
    assert opts["-kernel_name"] == acc.module and opts["-ctrl_protocol"] == "ap_ctrl_hs"
    assert Path(opts["-ip_directory"]) == scripts / "alveo" / "ip_kernel"
    assert Path(opts["-xo_path"]) == scripts / "alveo" / f"{acc.module}.xo"
    assert Path(opts["-xo_path"]).exists()


@needs_tclsh
@only(KERNELS)
def test_alveo_xo_kernel(acc, scripts):
    """A kernel is packaged without RLK_FORCE_XO, with its kernel.xml, as a Vitis kernel."""
    rec = run_stubbed(scripts / "alveo_xo.tcl")
    core = rec.objects["core=core"]["props"]
    assert core["SDX_KERNEL"] == "true" and core["SDX_KERNEL_TYPE"] == "rtl"
    assert core["VITIS_DRC"] == "ctrl_protocol ap_ctrl_hs"
    assert rec.calls_of("ipx::check_integrity") == [["-kernel", "core=core"]]
    (opts, _), = [_options(a) for a in rec.calls_of("package_xo")]
    assert opts["-kernel_name"] == acc.module and "-ctrl_protocol" not in opts
    assert Path(opts["-kernel_xml"]) == scripts / "kernel.xml"
    assert Path(opts["-ip_directory"]) == scripts / "alveo" / "ip_kernel"
    assert Path(opts["-xo_path"]).exists()
    # The kernel copy of the IP declares the master's address space too (package_xo reads it).
    (gmem,) = acc.masters
    (space,) = rec.children("core=core", "address_space").values()
    assert space["name"] == gmem.name and space["props"] == {"RANGE": "16E", "WIDTH": "64"}
    assert rec.objects[f"core=core/bus_interface={gmem.name}"]["props"][
        "MASTER_ADDRESS_SPACE_REF"] == gmem.name
    assert f'addressSpaceRef="{gmem.name}"' in \
        (scripts / "alveo" / "ip_kernel" / "component.xml").read_text()
    (scripts / "kernel.xml").unlink()
    rec = run_stubbed(scripts / "alveo_xo.tcl", check=False)
    assert "kernel.xml" in rec.error and not rec.calls


@only(KERNELS)
def test_kernel_xml(acc, scripts):
    """kernel.xml (UG1393 format): ports, then the pointer (id 0) and the scalar arguments,
    each at its register's offset."""
    import xml.etree.ElementTree as ET

    root = ET.parse(scripts / "kernel.xml").getroot()
    assert (root.get("versionMajor"), root.get("versionMinor")) == ("1", "6")
    (k,) = root
    assert k.get("name") == acc.module and k.get("vlnv") == V.vlnv(acc.module)
    assert (k.get("language"), k.get("hwControlProtocol"), k.get("interrupt")) == \
        ("ip_c", "ap_ctrl_hs", "true")
    ports = {p.get("name"): p.attrib for p in k.find("ports")}
    assert ports["s_axi_control"] == {"name": "s_axi_control", "mode": "slave",
                                      "range": "0x1000", "dataWidth": "32",
                                      "portType": "addressable", "base": "0x0"}
    (gmem,) = acc.masters
    assert ports[gmem.name]["mode"] == "master"
    assert int(ports[gmem.name]["dataWidth"]) == gmem.data_width
    assert int(ports[gmem.name]["range"], 16) == 2 ** 64 - 1
    args = [a.attrib for a in k.find("args")]
    assert [int(a["id"]) for a in args] == list(range(len(args)))
    ptr = args[0]
    (q,) = acc.kernel["pointers"]
    assert (ptr["name"], ptr["addressQualifier"], ptr["port"], _int(ptr["offset"]),
            _int(ptr["size"])) == (q["name"], "1", gmem.name, acc.regmap.offset(q["lo"]), 8)
    assert [a["name"] for a in args[1:]] == acc.kernel["scalars"]
    for a in args[1:]:
        assert (a["addressQualifier"], a["port"], _int(a["size"])) == ("0", "s_axi_control", 4)
        assert _int(a["offset"]) == acc.regmap.offset(a["name"])
    # The scalar arguments are the core's run arguments, all of them writable registers.
    assert all(acc.regmap[a["name"]].fields[0].access == "rw" for a in args[1:])


def test_kernel_xml_needs_a_kernel():
    with pytest.raises(ValueError, match="not a kernel"):
        V.kernel_xml(V.Accelerator.load(HDL / BD[0]))


@pytest.mark.parametrize("board", ["u200", "u250"])
def test_vpp_link_config(acc, scripts, board):
    text = (scripts / f"alveo_{board}.cfg").read_text()
    section, entries = None, []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, _, value = line.partition("=")
        entries.append((section, key, value))
    cu = f"{acc.module}_1"
    bank, slr = V.ALVEO_MEMORY[board]
    memory = [("connectivity", "sp", f"{cu}.{m.name}:{bank}") for m in acc.masters]
    memory += [("connectivity", "slr", f"{cu}:{slr}")] if acc.kernel else []
    assert entries == [
        (None, "platform", V.BOARDS[board].platform),
        (None, "kernel_frequency", f"0:{V.TARGET_FREQ_MHZ}"),
        ("connectivity", "nk", f"{acc.module}:1:{cu}"),
        *memory,
    ]
    assert "--kernel_frequency" in text and "clock.defaultFreqHz" in text
    assert ("DMA shell" in text) == (acc.kernel is None)


def test_vpp_link_config_rejects_zcu106(acc):
    with pytest.raises(ValueError, match="not a Vitis platform"):
        V.vpp_link_cfg(acc, "zcu106")
    with pytest.raises(ValueError, match="board must be one of u200, u250"):
        V.vpp_link_cfg(acc, "u280")


@pytest.mark.parametrize("writer", [V.package_ip_tcl, V.zcu106_bd_tcl, V.alveo_xo_tcl,
                                    V.ooc_timing_tcl, V.write_scripts])
def test_writers_check_acc(writer, tmp_path):
    with pytest.raises(TypeError, match=r"^acc must be an Accelerator \(Accelerator.load\), "
                                        r"not PosixPath"):
        writer(HDL / "gae_accel_n8", tmp_path)


# -- ooc_timing.tcl ----------------------------------------------------------------------------
@needs_tclsh
def test_ooc_timing(acc, scripts):
    part = V.BOARDS["u250"].part
    rec = run_stubbed(scripts / "ooc_timing.tcl", part, scripts / "ooc")
    (opts, _), = [_options(a) for a in rec.calls_of("synth_design")]
    assert opts == {"-top": acc.module, "-part": part, "-mode": "out_of_context"}
    (opts, pos), = [_options(a) for a in rec.calls_of("read_xdc")]
    assert opts == {"-mode": "out_of_context"}
    assert Path(pos[0]) == ROOT / "constraints" / "accel_ooc.xdc"
    assert [Path(p) for p in rec.calls_of("read_verilog")[0]] == [acc.verilog.resolve()]
    assert (scripts / "ooc" / "timing_summary.rpt").exists()
    bad = run_stubbed(scripts / "ooc_timing.tcl", part, env={"STUB_WNS": "-0.01"}, check=False)
    assert "timing not met" in bad.error


# -- constraints -------------------------------------------------------------------------------
XDC = sorted((ROOT / "constraints").glob("*.xdc"))


def test_constraint_files_present():
    assert {p.name for p in XDC} >= {"zcu106.xdc", "alveo_kernel.xdc", "accel_ooc.xdc"}


@pytest.mark.parametrize("xdc", XDC, ids=[p.name for p in XDC])
def test_every_constraint_is_commented(xdc):
    """Each command follows a comment saying why (the convention of constraints/)."""
    prev = "#"
    for n, line in enumerate(xdc.read_text().splitlines(), 1):
        assert len(line) <= 100, f"{xdc.name}:{n} longer than 100 columns"
        s = line.strip()
        if s and not s.startswith("#"):
            assert prev.startswith("#") or prev.endswith("\\"), f"{xdc.name}:{n} uncommented"
        if s:
            prev = s
        else:
            prev = ""


@needs_tclsh
@pytest.mark.parametrize("xdc", XDC, ids=[p.name for p in XDC])
def test_xdc_parses(xdc, tmp_path):
    rec = run_stubbed(xdc, cwd=tmp_path)
    clocks = rec.calls_of("create_clock")
    if xdc.name == "accel_ooc.xdc":
        (opts, pos), = [_options(a) for a in clocks]
        assert math.isclose(float(opts["-period"]), 1000 / V.TARGET_FREQ_MHZ, abs_tol=5e-4)
        assert opts["-name"] == "ap_clk" and pos == ["port=ap_clk"]
    else:
        # On the boards the PS (pl_clk0) or the Vitis platform creates the clock.
        assert clocks == []
    if xdc.name == "zcu106.xdc":
        assert rec.calls_of("set_property") == [["BITSTREAM.GENERAL.COMPRESS", "TRUE",
                                                 "design=current"]]
    if xdc.name == "alveo_kernel.xdc":
        assert rec.calls == []


# -- CLI and Makefile --------------------------------------------------------------------------
def test_cli_scripts(tmp_path, capsys):
    assert V.main(["scripts", "--hdl", str(HDL), "--out", str(tmp_path)]) == 0
    for a in ACCELS:
        assert (tmp_path / a / "package_ip.tcl").exists()
        assert (tmp_path / a / "zcu106_bd.tcl").exists() == (a in BD + BD_MASTER)
        assert (tmp_path / a / "kernel.xml").exists() == (a in KERNELS)
    assert "wrote" in capsys.readouterr().out


def test_cli_without_vivado(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert V.main(["run", "--hdl", str(HDL), "--board", "zcu106", "--out", str(tmp_path)]) == 3
    err = capsys.readouterr().err
    assert "vivado not found on PATH" in err
    assert f"-source {tmp_path / 'gae_accel_n8' / 'package_ip.tcl'}" in err
    assert f"-source {tmp_path / 'gae_accel_n8' / 'zcu106_bd.tcl'}" in err


def test_cli_alveo_without_tools(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert V.main(["run", "--hdl", str(HDL), "--board", "u250", "--out", str(tmp_path)]) == 3
    err = capsys.readouterr().err
    assert "v++ and vivado not found" in err and "DMA shell" in err
    assert "v++ --link --target hw --config" in err and "alveo_u250.cfg" in err


def test_cli_kernel_on_alveo_and_zcu106(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert V.main(["run", "--hdl", str(HDL), "--board", "u200", "--accel", "gae_kernel_n8",
                   "--out", str(tmp_path)]) == 3
    err = capsys.readouterr().err
    assert "v++ and vivado not found" in err and "DMA shell" not in err
    assert (tmp_path / "gae_kernel_n8" / "kernel.xml").exists()
    assert V.main(["run", "--hdl", str(HDL), "--board", "zcu106", "--accel", "gae_kernel_n8",
                   "--out", str(tmp_path)]) == 2
    assert "is a Vitis kernel (AXI master, no s_axi_mem): build it for u200 or u250" in \
        capsys.readouterr().err


def test_cli_bad_board(tmp_path, capsys):
    assert V.main(["run", "--hdl", str(HDL), "--board", "zcu102", "--out", str(tmp_path)]) == 2
    assert "BOARD must be one of zcu106, u200, u250, ooc" in capsys.readouterr().err


# -- --hdl: any generator output ---------------------------------------------------------------
def _copy_module(module, dst):
    """The files ``python -m rtl_gen <block> --out dst`` writes for ``module``, copied from
    hdl/ (the manifest, the Verilog, the register files)."""
    dst.mkdir(parents=True, exist_ok=True)
    for f in (HDL / module).iterdir():
        shutil.copy(f, dst / f.name)
    return dst


@pytest.mark.parametrize("layout", ["flat", "tree", "nested", "module_dir", "manifest"])
def test_cli_hdl_layouts(tmp_path, capsys, layout):
    """``--hdl`` takes a directory of manifests, a tree of them, one module's directory, or a
    manifest file; bare blocks (no register map) are skipped."""
    src = tmp_path / "gen"
    modules = ["gae_accel_n8", "gae_kernel_n8", "gae_pe_k2"]
    if layout == "flat":            # python -m rtl_gen <block> --out gen, three times
        for m in modules:
            _copy_module(m, src)
        hdl, want = src, {"gae_accel_n8", "gae_kernel_n8"}
    elif layout in ("tree", "nested"):
        for m in modules:
            _copy_module(m, src / ("gae/" if layout == "nested" else "") / m)
        hdl, want = src, {"gae_accel_n8", "gae_kernel_n8"}
    elif layout == "module_dir":
        hdl, want = HDL / "gae_kernel_n8", {"gae_kernel_n8"}
    else:
        hdl, want = HDL / "gae_accel_n8" / "gae_accel_n8.json", {"gae_accel_n8"}
    out = tmp_path / "out"
    assert V.main(["scripts", "--hdl", str(hdl), "--out", str(out)]) == 0
    assert {p.name for p in out.iterdir()} == want
    for m in want:
        assert (out / m / "package_ip.tcl").exists() and (out / m / "ooc_timing.tcl").exists()
    assert "wrote" in capsys.readouterr().out


@needs_tclsh
def test_cli_flat_output_runs(tmp_path):
    """Scripts of a flat generator output find its Verilog (hdl_dir is the manifest's
    directory): the out-of-context run under the stub Vivado reads it."""
    src = _copy_module("gae_accel_n8", tmp_path / "gen")
    assert V.main(["scripts", "--hdl", str(src), "--out", str(tmp_path / "out")]) == 0
    rec = run_stubbed(tmp_path / "out" / "gae_accel_n8" / "ooc_timing.tcl")
    assert [Path(p) for p in rec.calls_of("read_verilog")[0]] == [src / "gae_accel_n8.v"]


def test_cli_real_generator_output(tmp_path):
    """What the user ran: ``python -m rtl_gen gae-accel --out DIR``, then ``--hdl DIR``."""
    from rtl_gen.__main__ import main as rtl_gen_main

    gen = tmp_path / "gen"
    assert rtl_gen_main(["gae-accel", "--n-pe", "2", "--capacity", "64",
                         "--max-trajectories", "4", "--name", "tiny_gae",
                         "--out", str(gen)]) == 0
    assert V.main(["scripts", "--hdl", str(gen), "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "tiny_gae" / "zcu106_bd.tcl").exists()


@pytest.mark.parametrize("case,message", [
    ("missing", "--hdl '{hdl}': no such file or directory"),
    ("empty", "--hdl '{hdl}': no accelerator found"),
    ("block", "(gae_pe_k2: a block without a control interface)"),
    ("block_manifest", "(gae_pe_k2: a block without a control interface)"),
    ("not_manifest", "--hdl '{hdl}' is not a manifest written by rtl_gen"),
    ("twice", "--hdl '{hdl}': module gae_accel_n8 is there twice"),
    ("bad_json", "gae_accel_n8.json: not valid JSON"),
])
def test_cli_hdl_nothing_found(tmp_path, capsys, case, message):
    """Nothing to generate from is an error (exit 2) naming --hdl, never a silent success."""
    hdl = tmp_path / "gen"
    if case == "empty":
        hdl.mkdir()
        (hdl / "notes.json").write_text("{}")
    elif case == "block":
        hdl = HDL / "gae_pe_k2"
    elif case == "block_manifest":
        hdl = HDL / "gae_pe_k2" / "gae_pe_k2.json"
    elif case == "not_manifest":
        hdl = HDL / "gae_accel_n8" / "gae_accel_n8_regs.json"
    elif case == "twice":
        _copy_module("gae_accel_n8", hdl / "a")
        _copy_module("gae_accel_n8", hdl / "b")
    elif case == "bad_json":
        _copy_module("gae_accel_n8", hdl)
        (hdl / "gae_accel_n8.json").write_text("{")
    out = tmp_path / "out"
    assert V.main(["scripts", "--hdl", str(hdl), "--out", str(out)]) == 2
    assert message.format(hdl=hdl) in capsys.readouterr().err
    assert not out.exists()


def test_cli_accel_not_at_hdl(tmp_path, capsys):
    assert V.main(["scripts", "--hdl", str(HDL / "gae_accel_n8"), "--accel", "gae_kernel_n8",
                   "--out", str(tmp_path)]) == 2
    assert (f"--accel 'gae_kernel_n8' is not an accelerator at --hdl "
            f"'{HDL / 'gae_accel_n8'}' (there: gae_accel_n8)") in capsys.readouterr().err


def test_cli_run_picks_the_only_accelerator(tmp_path, monkeypatch, capsys):
    """``run`` without --accel: the only accelerator at --hdl; of several, gae_accel_n8; else
    an error asking for --accel."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    manifest = HDL / "replay_accel_k16" / "replay_accel_k16.json"
    assert V.main(["run", "--board", "ooc", "--hdl", str(manifest),
                   "--out", str(tmp_path / "out")]) == 3
    assert (tmp_path / "out" / "replay_accel_k16" / "ooc_timing.tcl").exists()
    assert V.main(["run", "--board", "ooc", "--hdl", str(HDL),
                   "--out", str(tmp_path / "out")]) == 3
    assert (tmp_path / "out" / "gae_accel_n8" / "ooc_timing.tcl").exists()
    src = tmp_path / "gen"
    for m in ("replay_accel_k16", "learner_cartpole_s4"):
        _copy_module(m, src)
    capsys.readouterr()
    assert V.main(["run", "--board", "ooc", "--hdl", str(src),
                   "--out", str(tmp_path / "out")]) == 2
    assert "holds 2 accelerators (learner_cartpole_s4, replay_accel_k16): name one with " \
        "--accel" in capsys.readouterr().err


def test_find_manifests_and_accelerators(tmp_path):
    assert V.find_accelerators(HDL) == ACCELS
    manifests = V.find_manifests(HDL)
    assert set(ACCELS) < set(manifests) and "gae_pe_k2" in manifests
    assert manifests["gae_accel_n8"] == HDL / "gae_accel_n8" / "gae_accel_n8.json"
    assert V.find_accelerators(HDL / "gae_pe_k2") == []
    with pytest.raises(FileNotFoundError, match=r"^path '.*missing': no such file or dir"):
        V.find_manifests(tmp_path / "missing")
    with pytest.raises(ValueError, match=r"^path '.*_regs.json' is not a manifest"):
        V.find_manifests(HDL / "gae_accel_n8" / "gae_accel_n8_regs.json")


def test_accelerator_load_paths(tmp_path):
    by_dir = V.Accelerator.load(HDL / "gae_accel_n8")
    by_file = V.Accelerator.load(HDL / "gae_accel_n8" / "gae_accel_n8.json")
    assert by_dir.module == by_file.module == "gae_accel_n8"
    assert by_dir.hdl_dir == by_file.hdl_dir == HDL / "gae_accel_n8"
    with pytest.raises(FileNotFoundError, match=r"^path '.*': no manifest gen.json in that "):
        V.Accelerator.load(_copy_module("gae_accel_n8", tmp_path / "gen"))
    with pytest.raises(ValueError, match="lists no register map"):
        V.Accelerator.load(HDL / "gae_pe_k2")


def _fake_tool(bin_dir, name, log):
    bin_dir.mkdir(exist_ok=True)
    tool = bin_dir / name
    tool.write_text(f"#!/bin/sh\necho {name} \"$@\" >> {log}\n")
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)


@pytest.mark.parametrize("board,tools,steps", [
    ("zcu106", ["vivado"], ["package_ip.tcl", "zcu106_bd.tcl"]),
    ("u200", ["vivado", "v++"], ["alveo_xo.tcl", "alveo_u200.cfg"]),
    ("ooc", ["vivado"], ["ooc_timing.tcl"]),
])
def test_cli_runs_tools_in_batch_mode(tmp_path, monkeypatch, board, tools, steps):
    log = tmp_path / "calls.log"
    for t in tools:
        _fake_tool(tmp_path / "bin", t, log)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    assert V.main(["run", "--hdl", str(HDL), "--board", board, "--out", str(tmp_path / "out"),
                   "--part", "xcu250-figd2104-2L-e"]) == 0
    calls = log.read_text().splitlines()
    assert len(calls) == len(steps)
    for call, step in zip(calls, steps):
        assert step in call
        if call.startswith("vivado"):
            assert call.startswith("vivado -mode batch")
    if board == "ooc":
        assert "-tclargs xcu250-figd2104-2L-e" in calls[0]


def test_make_vivado_without_vivado(tmp_path):
    make = shutil.which("make")
    if make is None:
        pytest.skip("make not on PATH")
    stamp = subprocess.run([make, "-s", "--no-print-directory",
                            "--eval=rlk-print-stamp: ; @echo $(STAMP)", "rlk-print-stamp"],
                           cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    if subprocess.run([make, "-q", stamp], cwd=ROOT).returncode != 0:
        pytest.skip("the .venv stamp is out of date; `make` would reinstall")
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path)}
    res = subprocess.run([make, "-s", "vivado", "BOARD=zcu106", f"VIVADO_OUT={tmp_path}"],
                         cwd=ROOT, env=env, capture_output=True, text=True)
    assert res.returncode != 0
    assert "vivado not found on PATH" in res.stderr and "vivado -mode batch" in res.stderr
    assert (tmp_path / "gae_accel_n8" / "zcu106_bd.tcl").exists()
    res = subprocess.run([make, "-s", "vivado"], cwd=ROOT, env=env, capture_output=True,
                         text=True)
    assert res.returncode != 0 and "set BOARD=" in res.stderr
