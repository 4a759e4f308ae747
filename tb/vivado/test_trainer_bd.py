"""The fused trainer on the ZCU106: its block design (zcu106_bd.tcl of dqn_trainer_zcu106) run
under tclsh with the stub Vivado commands, its stand-in .hwh, and which trainer gets one.

Unlike the other ZCU106 designs (an s_axi_mem slave behind M_AXI_HPM1_FPD), the trainer drives
its own AXI4 master, m_axi_gmem, into PS DDR: M_AXI_HPM0_FPD -> s_axi_control as everywhere,
m_axi_gmem -> SmartConnect -> S_AXI_HP0_FPD (the PS's SAXIGP2, 128 bits), the DDR segments
mapped in the master's own address space so that a pynq.allocate buffer's physical address
(written into BASE) reaches the buffer. That address space is the packaged IP's (package_ip.tcl
declares m_axi_gmem's, 16E of 64-bit addresses); under the stubs, as in Vivado, a cell of the IP
has <cell>/m_axi_gmem only where the IP declares it. The stubs check the commands and their
options, not that Vivado accepts the PS properties and segment names: those come from
published block designs (docs/boards.md). The .hwh through the real pynq package: tb/driver/test_pynq_trainer.py.
"""

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from rtl_gen import vivado as V
from rtl_gen.vivado.hwh import PS_INSTANCE, zcu106_hwh
from sw.trainer.configs import BOARDS as TRAINER_BOARDS, TRAINERS
from tclstub import needs_tclsh, run_stubbed
from vivado_cases import bd_nets, net_of, options

ROOT = Path(__file__).resolve().parents[2]
HDL = ROOT / "hdl"
MODULE = "dqn_trainer_zcu106"
INST = V.bd_instance(MODULE)
PS = "zynq_ultra_ps_e_0"
GIB = 1 << 30


@pytest.fixture(scope="module")
def acc():
    return V.Accelerator.load(HDL / MODULE)


@pytest.fixture
def scripts(acc, tmp_path):
    d = tmp_path / MODULE
    V.write_scripts(acc, d)
    return d


@pytest.fixture
def packaged(scripts):
    """package_ip.tcl run under the stubs (it leaves ./ip/component.xml for the design)."""
    return run_stubbed(scripts / "package_ip.tcl")


def _range(text):
    m = re.fullmatch(r"(\d+)([KMG]?)", str(text))
    return int(m[1]) << {"": 0, "K": 10, "M": 20, "G": 30}[m[2]]


# -- which trainer goes where ------------------------------------------------------------------
def test_flow_follows_the_trainer_boards():
    """The ZCU106 trainer gets the S_AXI_HP design, the U250 one stays an Alveo kernel: the
    flow's rule (an accelerator's own master, at most 128 bits) agrees with the board of every
    shipped module in sw.trainer.configs.TRAINERS."""
    modules = {module: board for board, _, _, module in TRAINERS.values() if module}
    assert modules == {"dqn_trainer_zcu106": "zcu106", "dqn_trainer_u250": "u250"}
    for module, board in modules.items():
        a = V.Accelerator.load(HDL / module)
        assert a.kernel is not None and a.memory is None
        assert V.zcu106_flow(a) == ("master" if board == "zcu106" else None)
    assert TRAINER_BOARDS["zcu106"][1] <= V.HP_MAX_WIDTH < TRAINER_BOARDS["u250"][1]
    # The window kernels keep the Alveo flow alone, whatever their port width.
    for module in ("gae_kernel_n8", "learner_kernel_s8", "replay_kernel_k16"):
        a = V.Accelerator.load(HDL / module)
        assert V.zcu106_flow(a) is None
        assert V.zcu106_refusal(a) == "a Vitis kernel (AXI master, no s_axi_mem)"
    assert V.zcu106_flow(V.Accelerator.load(HDL / "gae_accel_n8")) == "memory"


def _narrowed(acc, width):
    """``acc`` with m_axi_gmem ``width`` bits wide (data and strobes)."""
    manifest = json.loads(json.dumps(acc.manifest))
    for p in manifest["ports"]:
        if p["name"] in ("m_axi_gmem_wdata", "m_axi_gmem_rdata"):
            p["width"] = width
        if p["name"] == "m_axi_gmem_wstrb":
            p["width"] = width // 8
    return V.Accelerator(acc.hdl_dir, manifest, acc.regmap)


def test_hp_port_width_follows_the_master(acc, tmp_path):
    from rtl_gen.vivado.zcu106_bd import hp0_width

    assert hp0_width(acc) == 128 == acc.masters[0].data_width
    narrow = _narrowed(acc, 64)
    assert V.zcu106_flow(narrow) == "master" and hp0_width(narrow) == 64
    assert "CONFIG.PSU__SAXIGP2__DATA_WIDTH 64 \\" in V.zcu106_bd_tcl(narrow, tmp_path)
    wide = _narrowed(acc, 256)
    assert V.zcu106_flow(wide) is None
    assert "256 bits wide, wider than the ZCU106's S_AXI_HP ports" in V.zcu106_refusal(wide)
    # A manifest from a block that is not an accelerator of its own master: a window kernel.
    manifest = dict(acc.manifest, block="gae-kernel")
    assert V.zcu106_flow(V.Accelerator(acc.hdl_dir, manifest, acc.regmap)) is None


# -- zcu106_bd.tcl -----------------------------------------------------------------------------
@needs_tclsh
def test_trainer_block_design(acc, scripts, packaged):
    rec = run_stubbed(scripts / "zcu106_bd.tcl")
    (opts, pos), = [options(a) for a in rec.calls_of("create_project")]
    assert opts["-part"] == V.BOARDS["zcu106"].part
    assert rec.objects[f"project={pos[0]}"]["props"]["BOARD_PART"] == "xilinx.com:zcu106:part0:2.6"
    cells = {o["name"]: o["props"] for o in rec.of_kind("bd_cell").values()}
    assert set(cells) == {PS, INST, "smartconnect_ctrl", "smartconnect_mem", "axi_intc_0",
                          "rst_pl0"}
    assert cells[INST]["VLNV"] == V.vlnv(MODULE) == "rlk:accel:dqn_trainer_zcu106:1.0"
    assert cells["smartconnect_ctrl"]["CONFIG.NUM_MI"] == "2"
    assert (cells["smartconnect_mem"]["CONFIG.NUM_SI"],
            cells["smartconnect_mem"]["CONFIG.NUM_MI"]) == ("1", "1")
    assert cells["axi_intc_0"]["CONFIG.C_IRQ_CONNECTION"] == "1"
    assert cells["rst_pl0"]["CONFIG.C_EXT_RESET_HIGH"] == "0"
    assert any("apply_board_preset" in " ".join(a) for a in rec.calls_of("apply_bd_automation"))

    # The PS: HPM0_FPD for the registers, S_AXI_HP0_FPD (SAXIGP2) at m_axi_gmem's 128 bits, no
    # HPM1_FPD or HPM0_LPD (their clocks would dangle), the interrupt line, pl_clk0 at 300 MHz.
    psp = {k.removeprefix("CONFIG."): v for k, v in cells[PS].items() if k.startswith("CONFIG.")}
    assert psp == {
        "PSU__FPGA_PL0_ENABLE": "1", "PSU__CRL_APB__PL0_REF_CTRL__FREQMHZ": "300",
        "PSU__USE__M_AXI_GP0": "1", "PSU__MAXIGP0__DATA_WIDTH": "128",
        "PSU__USE__M_AXI_GP1": "0", "PSU__USE__M_AXI_GP2": "0",
        "PSU__USE__S_AXI_GP2": "1", "PSU__SAXIGP2__DATA_WIDTH": "128",
        "PSU__USE__IRQ0": "1"}
    assert int(psp["PSU__SAXIGP2__DATA_WIDTH"]) == acc.masters[0].data_width

    intf = {frozenset(n) for n in bd_nets(rec, "connect_bd_intf_net")}
    assert intf == {frozenset(p) for p in [
        (f"{PS}/M_AXI_HPM0_FPD", "smartconnect_ctrl/S00_AXI"),
        ("smartconnect_ctrl/M00_AXI", f"{INST}/s_axi_control"),
        ("smartconnect_ctrl/M01_AXI", "axi_intc_0/s_axi"),
        (f"{INST}/m_axi_gmem", "smartconnect_mem/S00_AXI"),
        ("smartconnect_mem/M00_AXI", f"{PS}/S_AXI_HP0_FPD")]}
    nets = bd_nets(rec, "connect_bd_net")

    assert net_of(nets, f"{PS}/pl_clk0") == {
        f"{PS}/pl_clk0", f"{PS}/maxihpm0_fpd_aclk", f"{PS}/saxihp0_fpd_aclk",
        "smartconnect_ctrl/aclk", "smartconnect_mem/aclk", "axi_intc_0/s_axi_aclk",
        "rst_pl0/slowest_sync_clk", f"{INST}/ap_clk"}
    assert net_of(nets, f"{PS}/pl_resetn0") == {f"{PS}/pl_resetn0", "rst_pl0/ext_reset_in"}
    assert net_of(nets, f"{INST}/ap_rst_n") == {"rst_pl0/peripheral_aresetn", f"{INST}/ap_rst_n",
                                          "axi_intc_0/s_axi_aresetn"}
    assert net_of(nets, "rst_pl0/interconnect_aresetn") == {
        "rst_pl0/interconnect_aresetn", "smartconnect_ctrl/aresetn", "smartconnect_mem/aresetn"}
    assert net_of(nets, f"{INST}/interrupt") == {f"{INST}/interrupt", "axi_intc_0/intr"}
    assert net_of(nets, "axi_intc_0/irq") == {"axi_intc_0/irq", f"{PS}/pl_ps_irq0"}
    # Every bus interface the package declared is connected, m_axi_gmem included.
    used = {p.split("/", 1)[1] for n in nets + [set(i) for i in intf] for p in n
            if p.startswith(INST + "/")}
    assert used == set(packaged.children("core=core", "bus_interface")) == {
        "s_axi_control", "m_axi_gmem", "ap_clk", "ap_rst_n", "interrupt"}

    # Addresses. The PS's Data space: the control registers and the interrupt controller in
    # the HPM0_FPD window, nothing else (no s_axi_mem).
    data, gmem = f"bd_addr_space={PS}/Data", f"bd_addr_space={INST}/m_axi_gmem"
    by_space = {}
    for args in rec.calls_of("assign_bd_address"):
        opts, pos = options(args)
        by_space.setdefault(opts["-target_address_space"], []).append((opts, pos))
    assert set(by_space) == {data, gmem}
    assert {pos[0].split("=", 1)[1]: (int(o["-offset"], 0), _range(o["-range"]))
            for o, pos in by_space[data]} == {
        f"{INST}/s_axi_control/{V.CONTROL_BLOCK}": (V.HPM0_FPD_BASE, V.CONTROL_RANGE),
        "axi_intc_0/S_AXI/Reg": (V.HPM0_FPD_BASE + V.CONTROL_RANGE, V.CONTROL_RANGE)}
    assert V.CONTROL_RANGE >= acc.control.window
    # The master's own space: PS DDR through the HP0 port where the PS has it (offsets and
    # ranges of HP0_DDR_SEGMENTS, -force), then the rest the port reaches (no segments named).
    *ddr, (rest_opts, rest_pos) = by_space[gmem]
    assert {pos[0]: (int(o["-offset"], 0), _range(o["-range"]), "-force" in o)
            for o, pos in ddr} == {
        f"bd_addr_seg={PS}/SAXIGP2/{name}": (base, size, True)
        for name, base, size in V.HP0_DDR_SEGMENTS}
    assert rest_pos == [] and set(rest_opts) == {"-target_address_space"}
    assert V.HP0_DDR_SEGMENTS == (("HP0_DDR_LOW", 0, 2 * GIB),
                                  ("HP0_DDR_HIGH", 0x8_0000_0000, 32 * GIB))
    # The ZCU106's 4 GiB of PS DDR4 (2 GiB low, 2 GiB high), where pynq.allocate's buffers
    # lie, are inside the mapped segments: zero copy for any buffer address.
    for lo, hi in ((0, 2 * GIB), (0x8_0000_0000, 0x8_0000_0000 + 2 * GIB)):
        assert any(b <= lo and hi <= b + s for _, b, s in V.HP0_DDR_SEGMENTS)
    # The master's address space is looked up -quiet and checked before it is used; the cell
    # has it because the packaged IP declares it (the stubs read it from component.xml).
    assert [s["name"] for s in packaged.children("core=core", "address_space").values()] == \
        ["m_axi_gmem"]
    names = [c[0] for c in rec.calls]
    quiet = [i for i, c in enumerate(rec.calls) if c[0] == "get_bd_addr_spaces"
             and c[-1] == f"{INST}/m_axi_gmem"]
    assert quiet and "-quiet" in rec.calls[quiet[0]]

    # Validate, constraints, run, and the PYNQ files, as for every ZCU106 design.
    assert names.index("validate_bd_design") < names.index("make_wrapper")
    (xdc,) = [options(a)[1][0] for a in rec.calls_of("add_files") if "constrs_1" in a]
    assert Path(xdc) == ROOT / "constraints" / "zcu106.xdc"
    assert ["impl_1", "-to_step", "write_bitstream"] == rec.calls_of("launch_runs")[0][:3]
    out = scripts / "zcu106"
    assert (out / f"{MODULE}.bit").exists() and (out / f"{MODULE}.hwh").exists()


@needs_tclsh
@pytest.mark.parametrize("env,message", [
    ({"STUB_WNS": "-0.25"}, "timing not met at 300 MHz"),
    ({"STUB_NO_BOARD": "1"}, "no ZCU106 board part"),
])
def test_trainer_block_design_stops(scripts, packaged, env, message):
    rec = run_stubbed(scripts / "zcu106_bd.tcl", env=env, check=False)
    assert message in rec.error
    assert not (scripts / "zcu106" / f"{MODULE}.bit").exists()


@needs_tclsh
def test_trainer_block_design_needs_the_ip(scripts):
    rec = run_stubbed(scripts / "zcu106_bd.tcl", check=False)
    assert "run package_ip.tcl first" in rec.error and not rec.calls


@needs_tclsh
def test_trainer_ip_declares_the_master_address_space(acc, scripts, packaged):
    """package_ip.tcl gives m_axi_gmem its address space (range 16E = 2**64 bytes, width 64,
    named after the interface) and the interface's reference to it; the saved IP declares
    both, which is what the block design finds as <cell>/m_axi_gmem."""
    (gmem,) = acc.masters
    (space,) = packaged.children("core=core", "address_space").values()
    assert (space["name"], space["props"]) == (gmem.name, {"RANGE": "16E", "WIDTH": "64"})
    assert 16 << 60 == 1 << gmem.addr_width
    busif = packaged.children("core=core", "bus_interface")[gmem.name]
    assert busif["props"]["INTERFACE_MODE"] == "master"
    assert busif["props"]["MASTER_ADDRESS_SPACE_REF"] == gmem.name
    ns = "{http://www.spiritconsortium.org/XMLSchema/SPIRIT/1685-2009}"
    root = ET.parse(scripts / "ip" / "component.xml").getroot()
    (ref,) = root.iter(f"{ns}addressSpaceRef")
    assert ref.get(f"{ns}addressSpaceRef") == gmem.name
    (xs,) = root.iter(f"{ns}addressSpace")
    assert [xs.findtext(f"{ns}{t}") for t in ("name", "range", "width")] == \
        [gmem.name, "16E", "64"]


def _package_without_master_space(scripts):
    """Package the IP with package_ip.tcl less its address-space lines (as package_ip.tcl
    was before it declared the master's address space)."""
    text = (scripts / "package_ip.tcl").read_text()
    start = text.index("set space [ipx::add_address_space m_axi_gmem $core]")
    end = text.index("[ipx::get_bus_interfaces m_axi_gmem -of_objects $core]\n", start)
    old = scripts / "package_ip_old.tcl"
    old.write_text(text[:start] + text[end:].split("\n", 1)[1])
    rec = run_stubbed(old)
    assert not rec.calls_of("ipx::add_address_space")
    return rec


@needs_tclsh
def test_trainer_block_design_needs_the_master_address_space(scripts):
    """An IP whose m_axi_gmem has no address space (nothing to map PS DDR into) stops the
    script with the fix, before any address of the master is assigned."""
    _package_without_master_space(scripts)
    rec = run_stubbed(scripts / "zcu106_bd.tcl", check=False)
    assert f"{INST} has no address space m_axi_gmem" in rec.error
    assert "ipx::add_address_space m_axi_gmem" in rec.error
    assert "package it again with package_ip.tcl" in rec.error
    spaces = [options(a)[0]["-target_address_space"] for a in rec.calls_of("assign_bd_address")]
    assert spaces == [f"bd_addr_space={PS}/Data"] * 2
    assert "validate_bd_design" not in [c[0] for c in rec.calls]
    # Packaged again by the generated package_ip.tcl, the same design goes through.
    run_stubbed(scripts / "package_ip.tcl")
    rec = run_stubbed(scripts / "zcu106_bd.tcl")
    assert rec.error is None and "validate_bd_design" in [c[0] for c in rec.calls]


# -- the .hwh stand-in -------------------------------------------------------------------------
@needs_tclsh
def test_trainer_hwh_matches_the_design(acc, packaged):
    """zcu106_hwh of the trainer: the accelerator's registers as the IP declares them (BASE one
    64-bit register), its m_axi_gmem master with the PS DDR segments of the design in its
    memory map, and the PS with S_AXI_HP0_FPD at 128 bits and no HPM1."""
    root = ET.fromstring(zcu106_hwh(acc))
    mods = {m.get("INSTANCE"): m for m in root.iter("MODULE")}
    assert set(mods) == {INST, PS_INSTANCE} and PS_INSTANCE == PS
    accel, ps = mods[INST], mods[PS]
    assert accel.get("VLNV") == V.vlnv(MODULE)
    busifs = {b.get("NAME"): (b.get("TYPE"), int(b.get("DATAWIDTH")))
              for b in accel.find("BUSINTERFACES")}
    assert busifs == {"s_axi_control": ("SLAVE", 32), "m_axi_gmem": ("MASTER", 128)}
    (block,) = accel.find("ADDRESSBLOCKS")
    assert (block.get("INTERFACE"), block.get("NAME"), block.get("USAGE")) == \
        ("s_axi_control", V.CONTROL_BLOCK, "register")
    regs = {r.get("NAME"): {p.get("NAME"): p.get("VALUE") for p in r.findall("PROPERTY")}
            for r in block.iter("REGISTER")}
    # The registers the packaged IP declares, by the same names and offsets.
    maps = packaged.children("core=core", "memory_map")
    (ip_block,) = packaged.children(maps["s_axi_control"]["handle"], "address_block").values()
    declared = packaged.children(ip_block["handle"], "register")
    assert list(regs) == list(declared)
    for name, o in declared.items():
        assert int(regs[name]["ADDRESS_OFFSET"], 0) == int(o["props"]["ADDRESS_OFFSET"], 0)
        assert regs[name]["SIZE"] == o["props"]["SIZE"]
    assert regs["BASE"]["SIZE"] == "64" and "BASE_LO" not in regs and "BASE_HI" not in regs
    params = {p.get("NAME"): p.get("VALUE") for p in accel.find("PARAMETERS")}
    assert int(params["C_S_AXI_CONTROL_BASEADDR"], 16) == V.HPM0_FPD_BASE
    assert not any(k.startswith("C_S_AXI_MEM") for k in params)
    ranges = [m.attrib for m in accel.find("MEMORYMAP")]
    assert [(r["ADDRESSBLOCK"], int(r["BASEVALUE"], 16),
             int(r["HIGHVALUE"], 16) + 1 - int(r["BASEVALUE"], 16)) for r in ranges] == \
        list(V.HP0_DDR_SEGMENTS)
    assert {(r["INSTANCE"], r["MASTERBUSINTERFACE"], r["SLAVEBUSINTERFACE"], r["MEMTYPE"])
            for r in ranges} == {(PS, "m_axi_gmem", "S_AXI_HP0_FPD", "MEMORY")}

    pp = {p.get("NAME"): p.get("VALUE") for p in ps.find("PARAMETERS")}
    assert (pp["C_SAXIGP2_DATA_WIDTH"], pp["PSU__USE__S_AXI_GP2"],
            pp["PSU__SAXIGP2__DATA_WIDTH"]) == ("128", "1", "128")
    assert pp["PSU__USE__M_AXI_GP1"] == "0" and "C_MAXIGP1_DATA_WIDTH" not in pp
    assert {b.get("NAME"): b.get("TYPE") for b in ps.find("BUSINTERFACES")} == {
        "M_AXI_HPM0_FPD": "MASTER", "S_AXI_HP0_FPD": "SLAVE"}
    (ctl,) = ps.find("MEMORYMAP")
    assert (ctl.get("INSTANCE"), ctl.get("SLAVEBUSINTERFACE"), int(ctl.get("BASEVALUE"), 16)) \
        == (INST, "s_axi_control", V.HPM0_FPD_BASE)


def test_hwh_refuses_an_alveo_only_kernel():
    for module, why in (("dqn_trainer_u250", "m_axi_gmem is 512 bits wide"),
                        ("gae_kernel_n8", "a Vitis kernel")):
        with pytest.raises(ValueError, match=f"acc: {module} is .*{why}.*: no ZCU106 block "):
            zcu106_hwh(V.Accelerator.load(HDL / module))


# -- CLI ---------------------------------------------------------------------------------------
def test_cli_trainer_on_zcu106(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert V.main(["run", "--hdl", str(HDL), "--board", "zcu106", "--accel", MODULE,
                   "--out", str(tmp_path)]) == 3
    err = capsys.readouterr().err
    assert "vivado not found on PATH" in err
    for script in ("package_ip.tcl", "zcu106_bd.tcl"):
        assert f"-source {tmp_path / MODULE / script}" in err
    assert V.board_commands(MODULE, "zcu106", tmp_path)[1][-1] == str(tmp_path / "zcu106_bd.tcl")
    assert V.main(["run", "--hdl", str(HDL), "--board", "zcu106", "--accel", "dqn_trainer_u250",
                   "--out", str(tmp_path)]) == 2
    assert ("dqn_trainer_u250 is an accelerator whose m_axi_gmem is 512 bits wide, wider than "
            "the ZCU106's S_AXI_HP ports (128): build it for u200 or u250, not zcu106") in \
        capsys.readouterr().err
    assert not (tmp_path / "dqn_trainer_u250").exists()
