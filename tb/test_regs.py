"""SystemRDL and IP-XACT exports of the register maps (rtl_gen.regs, sw.rdl; docs/regs.md).

The SystemRDL of every shipped register map compiles with ``systemrdl-compiler`` into the
same registers, addresses, fields, bit ranges, reset values and access (sw/hw and side
effects) as the description, the constant HW_* fields as constants (``hw = na``) whose reset
values are the words the hardware reads; the IP-XACT PeakRDL-ipxact writes from it declares
what the IP packaging script (``package_ip.tcl``) declares, and a register model built from it
passes its reset check against the golden device.
"""

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from systemrdl.rdltypes import AccessType, OnReadType, OnWriteType

from rtl_gen.__main__ import main
from rtl_gen.regs import compile_rdl, export, regmap_modules
from rtl_gen.vivado.model import Accelerator
from rtl_gen.vivado.package_ip import package_ip_tcl
from sw.rdl import to_systemrdl
from sw.registry import BLOCKS, SHIPPED, shipped_config
from sw.regmap import Field, Register, RegisterMap

HDL = Path(__file__).resolve().parents[1] / "hdl"
SPIRIT = "{http://www.spiritconsortium.org/XMLSchema/SPIRIT/1685-2009}"


def regmap(module):
    """The map the exports describe: the HW_* fields' reset values the words they read."""
    block, cfg = shipped_config(module)
    return block.regmap(cfg).with_constant_resets(cfg)


def test_every_shipped_register_map_is_exported():
    assert regmap_modules() == [m for m, b, _ in SHIPPED if BLOCKS[b].role != "unit"]
    assert {"gae_accel_n8", "replay_kernel_k16", "learner_cartpole_s4"} <= set(regmap_modules())


@pytest.mark.parametrize("module", regmap_modules())
def test_systemrdl_compiles_to_the_description(tmp_path, module):
    rm = regmap(module)
    top = compile_rdl(export(module, "rdl", tmp_path)).top
    assert top.inst_name == module
    regs = list(top.registers())
    assert [(r.inst_name, r.absolute_address, r.size) for r in regs] == \
        [(r.name, r.offset, 4) for r in rm]
    for node, r in zip(regs, rm):
        fields = sorted(node.fields(), key=lambda f: f.lsb)
        assert [(f.inst_name, f.lsb, f.msb) for f in fields] == \
            sorted(((f.name, f.lsb, f.msb) for f in r.fields), key=lambda t: t[1])
        for f in fields:
            want = r.field(f.inst_name)
            assert (f.is_sw_readable, f.is_sw_writable) == (want.readable, want.host_writable)
            assert f.get_property("reset") == want.reset
            # the core drives the value of a read-only field, sets or clears bits of others;
            # a HW_* field is a constant
            assert (f.get_property("hw") == AccessType.w) == (want.access == "ro"
                                                              and want.info is None)
            assert (f.get_property("hw") == AccessType.na) == (want.info is not None)
            assert f.get_property("onread") == (OnReadType.rclr if want.access == "ro_cor"
                                                else None)
            assert f.get_property("onwrite") == {"rw_sc": OnWriteType.woset,
                                                 "rw_tow": OnWriteType.wot}.get(want.access)
            assert f.get_property("hwset") == (want.access in ("ro_cor", "rw_tow"))
            assert f.get_property("hwclr") == (want.access == "rw_sc")


def tcl_registers(module):
    """name -> (offset, size, access, {field: (offset, width, access, mwv, read action)}) as
    package_ip.tcl declares them."""
    text = package_ip_tcl(Accelerator.load(HDL / module), HDL / module)
    regs, cur = {}, None
    for line in text.splitlines():
        if m := re.match(r"set reg \[ipx::add_register (\w+) \$block\]", line):
            cur = regs.setdefault(m.group(1), [None, {}])
        elif m := re.match(r"set field \[ipx::add_field (\w+) \$reg\]", line):
            fname = m.group(1)
        elif m := re.match(r"set_property -dict \{(.*)\} \$(reg|field)", line):
            props = dict(zip(*[iter(m.group(1).split())] * 2))
            if m.group(2) == "reg":
                cur[0] = (int(props["ADDRESS_OFFSET"], 16), int(props["SIZE"]),
                          props["ACCESS"])
            else:
                cur[1][fname] = (int(props["BIT_OFFSET"]), int(props["BIT_WIDTH"]),
                                 props["ACCESS"], props.get("MODIFIED_WRITE_VALUE"),
                                 props.get("READ_ACTION"))
    return {k: (*v[0], v[1]) for k, v in regs.items()}


def ipxact_registers(path):
    def text(node, tag):
        e = node.find(SPIRIT + tag)
        return None if e is None else e.text

    out = {}
    for reg in ET.parse(path).getroot().iter(SPIRIT + "register"):
        fields = {text(f, "name"): (int(text(f, "bitOffset")), int(text(f, "bitWidth")),
                                    text(f, "access"), text(f, "modifiedWriteValue"),
                                    text(f, "readAction"))
                  for f in reg.iter(SPIRIT + "field")}
        acc = {a for f in fields.values() for a in f[2].split("-")}
        access = ("read-write" if {"read", "write"} <= acc else
                  "read-only" if "read" in acc else "write-only")
        out[text(reg, "name")] = (int(text(reg, "addressOffset"), 0), int(text(reg, "size")),
                                  access, fields)
    return out


@pytest.mark.parametrize("module", regmap_modules())
def test_ipxact_from_peakrdl_matches_the_packaging_tcl(tmp_path, module):
    got = ipxact_registers(export(module, "ipxact", tmp_path))
    want = tcl_registers(module)
    kernel = Accelerator.load(HDL / module).kernel or {}
    for q in kernel.get("pointers", ()):
        # package_ip.tcl declares a pointer argument as one 64-bit register over its two words
        off, size, access, fields = want.pop(q["name"])
        lo, hi = got.pop(q["lo"]), got.pop(q["hi"])
        assert (off, size, access) == (lo[0], 64, "read-write") and hi[0] == off + 4
        (lsb, width, _, _, _), = fields.values()
        (lo_lsb, lo_w, *_), = lo[3].values()
        (hi_lsb, hi_w, *_), = hi[3].values()
        assert (lsb, lsb + width) == (lo_lsb, 32 + hi_lsb + hi_w)
    assert got == want


def ipxact_reset_model(path):
    """name -> (offset, [(lsb, width, reset value)] of the fields a register model checks
    after reset): readable, not volatile, inside the register's reset mask (UVM's
    ``uvm_reg_hw_reset_seq`` skips volatile fields)."""
    def text(node, tag):
        e = node.find(SPIRIT + tag)
        return None if e is None else e.text

    out = {}
    for reg in ET.parse(path).getroot().iter(SPIRIT + "register"):
        reset = reg.find(SPIRIT + "reset")
        value = int(text(reset, "value"), 0) if reset is not None else 0
        mask = int(text(reset, "mask"), 0) if reset is not None else 0
        checked = []
        for f in reg.iter(SPIRIT + "field"):
            lsb, width = int(text(f, "bitOffset")), int(text(f, "bitWidth"))
            bits = ((1 << width) - 1) << lsb
            if (text(f, "volatile") != "true" and "read" in text(f, "access")
                    and bits & mask == bits):
                checked.append((lsb, width, (value & bits) >> lsb))
        out[text(reg, "name")] = (int(text(reg, "addressOffset"), 0), checked)
    return out


@pytest.mark.parametrize("module", regmap_modules())
def test_a_register_model_from_the_ipxact_passes_its_reset_check(tmp_path, module):
    """Every register read after reset returns the reset values the IP-XACT declares for its
    checked fields: the accelerators' golden devices (bit-exact with the RTL at the register
    level), a kernel's accelerator part on its accelerator's golden device and its shell's
    HW_* words as the gateware is built with them. The HW_* registers are among the checked
    (HW_CAPACITY reads 65536 on replay_accel_k16, not 0)."""
    block, cfg = shipped_config(module)
    model = ipxact_reset_model(export(module, "ipxact", tmp_path))
    constants = block.regmap(cfg).info_values(cfg)
    if block.role == "kernel":
        accel = block.accelerator
        dev = accel.load("device")(cfg.accel)
        base = {r.name for r in accel.regmap(cfg.accel)}
    else:
        dev, base = block.load("device")(cfg), {r.name for r in block.regmap(cfg)}
    checked_hw = 0
    for name, (offset, fields) in model.items():
        word = dev.control.read32(offset) if name in base else constants.get(name, 0)
        for lsb, width, reset in fields:
            assert (word >> lsb) & ((1 << width) - 1) == reset, (name, lsb, word, reset)
        checked_hw += name in constants and bool(fields)
    assert checked_hw == len(constants) > 0
    if module == "replay_accel_k16":
        assert model["HW_CAPACITY"][1] == [(0, 32, 65536)]


def test_cli_writes_rdl_and_explains_bad_modules(tmp_path, capsys):
    assert main(["regs", "--module", "gae_accel_n8", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "gae_accel_n8.rdl").read_text() == to_systemrdl(regmap("gae_accel_n8"),
                                                                        name="gae_accel_n8")
    assert main(["regs", "--module", "gae_pe_k2", "--out", str(tmp_path)]) == 2
    assert "module must be a shipped module with a register map" in capsys.readouterr().err


def test_names_that_are_systemrdl_keywords_are_escaped(tmp_path):
    rm = RegisterMap("m", (Register("field", 0, (Field("sw", 0, 4, "rw", reset=3),)),
                           Register.scalar("NAME", 8, "ro")))
    path = tmp_path / "m.rdl"
    path.write_text(to_systemrdl(rm))
    (a, b) = compile_rdl(path).top.registers()
    assert (a.inst_name, a.absolute_address, b.inst_name) == ("field", 0, "NAME")
    assert a.get_child_by_name("sw").get_property("reset") == 3
    with pytest.raises(TypeError, match="regmap must be a RegisterMap"):
        to_systemrdl({"name": "m"})


def test_cli_exports_any_generated_configuration(tmp_path, capsys):
    """``--manifest`` takes a configuration that is not shipped: its manifest, or the directory
    ``python -m rtl_gen`` wrote it to; the export is its own register map's."""
    from rtl_gen.emit import emit
    from sw.registry import block

    gen = tmp_path / "replay_k8_4k"
    emit("replay-accel", {"fanout": 8, "capacity": 4096}, gen, module="replay_k8_4k")
    cfg = block("replay-accel").config.from_dict({"fanout": 8, "capacity": 4096})
    want = to_systemrdl(block("replay-accel").regmap(cfg).with_constant_resets(cfg),
                        name="replay_k8_4k")
    for path in (gen, gen / "replay_k8_4k.json"):
        assert main(["regs", "--manifest", str(path), "--out", str(tmp_path / "out")]) == 0
        assert (tmp_path / "out" / "replay_k8_4k.rdl").read_text() == want
        assert not (tmp_path / "out" / "replay_accel_k16.rdl").exists()   # only what was named
    assert "HW_CAPACITY" in want and "4096" in want
    # a block without a register map, a path that is no manifest: errors naming the argument
    emit("gae-pe", {"k": 2}, tmp_path / "pe", module="pe_small")
    capsys.readouterr()
    assert main(["regs", "--manifest", str(tmp_path / "pe"), "--out", str(tmp_path)]) == 2
    assert "must be of a block with a register map, not of 'gae-pe'" in capsys.readouterr().err
    assert main(["regs", "--manifest", str(tmp_path / "nope"), "--out", str(tmp_path)]) == 2
    assert "--manifest must be a manifest <module>.json" in capsys.readouterr().err
