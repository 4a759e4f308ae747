"""Generated Vivado/Vitis scripts per board under the stub Vivado: the ZCU106 block design
(zcu106_bd.tcl), the Alveo/Vitis kernel (alveo_xo.tcl, kernel.xml, the v++ link configs),
the out-of-context timing run (ooc_timing.tcl) and the constraint files (the shared
description: vivado_cases.py).
"""

import math
import re
from pathlib import Path

import pytest

from rtl_gen import vivado as V
from tclstub import needs_tclsh, run_stubbed
from vivado_cases import (ALVEO_ONLY, BD, HDL, KERNELS, ROOT, bd_nets, net_of, only, options,
                          parse_int, parse_range)


# -- zcu106_bd.tcl -----------------------------------------------------------------------------
@needs_tclsh
@only(BD)
def test_zcu106_block_design(acc, scripts, packaged):
    rec = run_stubbed(scripts / "zcu106_bd.tcl")
    inst, ps = V.bd_instance(acc.module), "zynq_ultra_ps_e_0"
    (opts, pos), = [options(a) for a in rec.calls_of("create_project")]
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
    assert parse_int(psp["CONFIG.PSU__MAXIGP1__DATA_WIDTH"]) == min(128, acc.memory.data_width)

    intf = {frozenset(n) for n in bd_nets(rec, "connect_bd_intf_net")}
    assert intf == {frozenset(p) for p in [
        (f"{ps}/M_AXI_HPM0_FPD", "smartconnect_ctrl/S00_AXI"),
        ("smartconnect_ctrl/M00_AXI", f"{inst}/s_axi_control"),
        ("smartconnect_ctrl/M01_AXI", "axi_intc_0/s_axi"),
        (f"{ps}/M_AXI_HPM1_FPD", "smartconnect_mem/S00_AXI"),
        ("smartconnect_mem/M00_AXI", f"{inst}/s_axi_mem")]}
    nets = bd_nets(rec, "connect_bd_net")

    assert net_of(nets, f"{ps}/pl_clk0") == {
        f"{ps}/pl_clk0", f"{ps}/maxihpm0_fpd_aclk", f"{ps}/maxihpm1_fpd_aclk",
        "smartconnect_ctrl/aclk", "smartconnect_mem/aclk", "axi_intc_0/s_axi_aclk",
        "rst_pl0/slowest_sync_clk", f"{inst}/ap_clk"}
    assert net_of(nets, f"{ps}/pl_resetn0") == {f"{ps}/pl_resetn0", "rst_pl0/ext_reset_in"}
    assert net_of(nets, f"{inst}/ap_rst_n") == {"rst_pl0/peripheral_aresetn", f"{inst}/ap_rst_n",
                                          "axi_intc_0/s_axi_aresetn"}
    assert net_of(nets, "rst_pl0/interconnect_aresetn") >= {"smartconnect_ctrl/aresetn",
                                                      "smartconnect_mem/aresetn"}
    assert net_of(nets, f"{inst}/interrupt") == {f"{inst}/interrupt", "axi_intc_0/intr"}
    assert net_of(nets, "axi_intc_0/irq") == {"axi_intc_0/irq", f"{ps}/pl_ps_irq0"}
    # Every bus interface the package declared is connected in the block design.
    used = {p.split("/", 1)[1] for n in nets + [set(i) for i in intf] for p in n
            if p.startswith(inst + "/")}
    assert used == set(packaged.children("core=core", "bus_interface"))

    # Addresses: one segment per declared address block, in the right HPM window, no overlap.
    maps = packaged.children("core=core", "memory_map")
    blocks = {f"{inst}/{m}/{b}": parse_int(o["props"]["RANGE"]) for m, mo in maps.items()
              for b, o in packaged.children(mo["handle"], "address_block").items()}
    assigned = {}
    for args in rec.calls_of("assign_bd_address"):
        opts, pos = options(args)
        assert opts["-target_address_space"] == f"bd_addr_space={ps}/Data" and "-force" in opts
        (seg,) = pos
        assigned[seg.split("=", 1)[1]] = (parse_int(opts["-offset"]), parse_range(opts["-range"]))
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
    (xdc,) = [options(a)[1][0] for a in rec.calls_of("add_files") if "constrs_1" in a]
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
    (opts, _), = [options(a) for a in rec.calls_of("package_xo")]
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
    (opts, _), = [options(a) for a in rec.calls_of("package_xo")]
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
    assert (ptr["name"], ptr["addressQualifier"], ptr["port"], parse_int(ptr["offset"]),
            parse_int(ptr["size"])) == (q["name"], "1", gmem.name, acc.regmap.offset(q["lo"]), 8)
    assert [a["name"] for a in args[1:]] == acc.kernel["scalars"]
    for a in args[1:]:
        assert (a["addressQualifier"], a["port"], parse_int(a["size"])) == ("0", "s_axi_control", 4)
        assert parse_int(a["offset"]) == acc.regmap.offset(a["name"])
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
    (opts, _), = [options(a) for a in rec.calls_of("synth_design")]
    assert opts == {"-top": acc.module, "-part": part, "-mode": "out_of_context"}
    (opts, pos), = [options(a) for a in rec.calls_of("read_xdc")]
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
        (opts, pos), = [options(a) for a in clocks]
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
