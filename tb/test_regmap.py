"""Register-map descriptions: validation, ap_ctrl_hs layout, JSON / C header / Markdown output."""

import json
import re
import shutil
import subprocess

import pytest

from sw.regfiles import register_files, to_c_header, to_markdown
from sw.regmap import ACCESS_TYPES, AP_CTRL_HS_REGISTERS, Field, Info, Register, RegisterMap


def gae_like_map():
    """An ap_ctrl_hs map with two rw arguments and one status register."""
    return RegisterMap.with_ap_ctrl_hs("gae_core", [
        Register.scalar("GAMMA", 18, doc="discount factor"),
        Register.scalar("GAMMA_LAMBDA", 18, doc="gamma * lambda"),
        Register("STATUS", None, (
            Field("BUSY", 0, 1, "ro", doc="a batch is in flight"),
            Field("OVERFLOW", 1, 1, "ro_cor", doc="a value saturated"),
            Field("COUNT", 8, 16, "ro", doc="elements done"),
        ), "status"),
    ], doc="GAE core control")


# -- fields ---------------------------------------------------------------------------------------
def test_field_properties():
    f = Field("COUNT", 8, 16, "ro")
    assert (f.msb, f.mask, f.bits) == (23, 0x00FFFF00, "23:8")
    assert f.get(0x12345678) == 0x3456
    assert f.put(0xFFFFFFFF, 0) == 0xFF0000FF
    assert Field("X", 3, 1, "rw").bits == "3"
    assert not Field("K", 0, 4, "wo").readable
    assert Field("K", 0, 4, "wo").host_writable and not Field("S", 0, 4, "ro_cor").host_writable


@pytest.mark.parametrize("kwargs,match", [
    ({"name": "1abc"}, r"field name must be a C identifier.*'1abc'"),
    ({"name": "int"}, r"field name must be a C identifier \(and not a keyword\), not 'int'"),
    ({"name": "a-b"}, r"field name must be a C identifier"),
    ({"width": 0}, r"field 'F': width must be a positive integer, not 0"),
    ({"width": 1.5}, r"field 'F': width must be a positive integer, not 1.5"),
    ({"lsb": -1}, r"field 'F': lsb must be an integer in 0..31, not -1"),
    ({"lsb": 32}, r"field 'F': lsb must be an integer in 0..31, not 32"),
    ({"lsb": 30, "width": 4}, r"field 'F': bits 33:30 do not fit in 32 bits"),
    ({"access": "rx"}, r"field 'F': access must be one of rw, wo, ro, rw_sc, ro_cor, rw_tow, "
                       r"not 'rx'"),
    ({"reset": 16}, r"field 'F': reset must be an integer in 0..15, not 16"),
    ({"reset": -1}, r"field 'F': reset must be an integer in 0..15, not -1"),
    ({"access": "ro", "reset": 1}, r"field 'F': reset of a read-only \('ro'\) field must be 0"),
])
def test_field_validation(kwargs, match):
    args = dict(name="F", lsb=0, width=4, access="rw")
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        Field(**args)


def test_field_put_checks_value():
    with pytest.raises(ValueError, match=r"field 'F': value must be an integer in 0..3, not 4"):
        Field("F", 2, 2, "rw").put(0, 4)


# -- registers ------------------------------------------------------------------------------------
def test_register_validation():
    a, b = Field("A", 0, 4, "rw"), Field("B", 3, 2, "rw")
    with pytest.raises(ValueError, match=r"register 'R': field 'B' \(bits 4:3\) overlaps field "
                                         r"'A' \(bits 3:0\)"):
        Register("R", 0, (a, b))
    with pytest.raises(ValueError, match=r"register 'R': field name 'a' is used twice"):
        Register("R", 0, (a, Field("a", 8, 1, "rw")))
    with pytest.raises(ValueError, match=r"register 'R': offset must be a multiple of 4 in "
                                         r"0..0xfffffffc, not 0x6"):
        Register("R", 6, (a,))
    with pytest.raises(ValueError, match=r"register 'R': offset .* not -0x4"):
        Register("R", -4, (a,))
    with pytest.raises(ValueError, match=r"register 'R': needs at least one field"):
        Register("R", 0, ())
    with pytest.raises(TypeError, match=r"register 'R': fields must be a sequence of Field"):
        Register("R", 0, a)
    with pytest.raises(ValueError, match=r"register name must be a C identifier.*'R 1'"):
        Register("R 1", 0, (a,))


def test_register_scalar_and_reset():
    r = Register.scalar("ARG", 12, reset=0x123, doc="an argument")
    assert r.offset is None and r.doc == "an argument"
    assert r.fields == (Field("ARG", 0, 12, "rw", 0x123, "an argument"),)
    assert r.path(r.fields[0]) == "ARG"
    mixed = Register("M", 0, (Field("A", 0, 4, "rw", 5), Field("K", 4, 4, "wo", 3),
                              Field("C", 8, 2, "ro_cor", 2)))
    assert mixed.reset == 0x205      # the write-only field reads 0
    assert mixed.path(mixed.field("A")) == "M_A"
    with pytest.raises(KeyError, match="no field 'Z'"):
        mixed.field("Z")


# -- maps -----------------------------------------------------------------------------------------
def test_auto_offsets():
    rm = RegisterMap("m", [Register.scalar("A"), Register.scalar("B"),
                           Register.scalar("C", offset=0x20), Register.scalar("D")])
    assert [r.offset for r in rm] == [0, 4, 0x20, 0x24]
    assert rm.span == 0x28 and rm.min_addr_width == 6
    assert rm["C"].offset == rm.offset("C") == 0x20 and len(rm) == 4
    assert RegisterMap("one", [Register.scalar("A")]).min_addr_width == 2


@pytest.mark.parametrize("regs,match", [
    ([Register.scalar("A", offset=4), Register.scalar("B", offset=4)],
     r"register 'B': offset 0x04 is already used by register 'A'"),
    ([Register.scalar("A", offset=8), Register.scalar("B", offset=4), Register.scalar("C")],
     r"register 'C': offset 0x08 is already used by register 'A'"),
    ([Register.scalar("A"), Register.scalar("a")],
     r"register name 'a' is used twice \(names are compared case-insensitively\)"),
    ([Register("A", None, (Field("B_C", 0, 1, "rw"),)), Register("A_B", None,
                                                                 (Field("C", 0, 1, "rw"),))],
     r"register 'A_B' field 'C' and register 'A' field 'B_C' have the same name 'A_B_C'"),
    ([], r"registers must not be empty"),
])
def test_map_validation(regs, match):
    with pytest.raises(ValueError, match=match):
        RegisterMap("m", regs)


def test_map_argument_validation():
    with pytest.raises(ValueError, match=r"data_width must be 32, not 64"):
        RegisterMap("m", [Register.scalar("A")], 64)
    with pytest.raises(ValueError, match=r"register map name must be a C identifier.*'m-1'"):
        RegisterMap("m-1", [Register.scalar("A")])
    with pytest.raises(ValueError, match=r"protocol must be None or 'ap_ctrl_hs', not 'axi'"):
        RegisterMap("m", [Register.scalar("A")], protocol="axi")
    with pytest.raises(TypeError, match=r"registers must be Register objects"):
        RegisterMap("m", ["A"])
    with pytest.raises(ValueError, match=r"must start with AP_CTRL_HS_REGISTERS"):
        RegisterMap("m", [Register.scalar("A")], protocol="ap_ctrl_hs")


def test_ap_ctrl_hs_layout():
    rm = gae_like_map()
    assert rm.protocol == "ap_ctrl_hs"
    assert [(r.name, r.offset) for r in rm] == [
        ("CTRL", 0x00), ("GIER", 0x04), ("IP_IER", 0x08), ("IP_ISR", 0x0C),
        ("GAMMA", 0x10), ("GAMMA_LAMBDA", 0x14), ("STATUS", 0x18)]
    ctrl = rm["CTRL"]
    assert [(f.name, f.lsb, f.access) for f in ctrl.fields] == [
        ("AP_START", 0, "rw_sc"), ("AP_DONE", 1, "ro_cor"), ("AP_IDLE", 2, "ro"),
        ("AP_READY", 3, "ro_cor"), ("AUTO_RESTART", 7, "rw")]
    assert [(f.name, f.lsb, f.access) for f in rm["GIER"].fields] == [("ENABLE", 0, "rw")]
    assert [(f.name, f.lsb, f.access) for f in rm["IP_IER"].fields] == [
        ("AP_DONE", 0, "rw"), ("AP_READY", 1, "rw")]
    assert [(f.name, f.lsb, f.access) for f in rm["IP_ISR"].fields] == [
        ("AP_DONE", 0, "rw_tow"), ("AP_READY", 1, "rw_tow")]
    assert all(r.reset == 0 for r in AP_CTRL_HS_REGISTERS)
    assert [r.name for r in rm.user_registers] == ["GAMMA", "GAMMA_LAMBDA", "STATUS"]
    assert rm.min_addr_width == 5
    # explicit offsets after the control block, auto-assignment continues from there
    rm2 = RegisterMap.with_ap_ctrl_hs("k", [Register.scalar("A", offset=0x40),
                                            Register.scalar("B")])
    assert (rm2["A"].offset, rm2["B"].offset) == (0x40, 0x44)
    assert RegisterMap.with_ap_ctrl_hs("empty").user_registers == ()


def test_ap_ctrl_hs_reserved_offsets():
    with pytest.raises(ValueError, match=r"register 'A': offset 0x08 is already used by "
                                         r"register 'IP_IER'"):
        RegisterMap.with_ap_ctrl_hs("k", [Register.scalar("A", offset=8)])
    with pytest.raises(ValueError, match=r"register name 'CTRL' is used twice"):
        RegisterMap.with_ap_ctrl_hs("k", [Register.scalar("CTRL")])
    with pytest.raises(TypeError, match=r"args must be a sequence of Register"):
        RegisterMap.with_ap_ctrl_hs("k", Register.scalar("A"))


# -- generators -----------------------------------------------------------------------------------
def test_json_round_trip_and_contents():
    rm = gae_like_map()
    text = rm.to_json()
    assert text == rm.to_json() and text.endswith("}\n")
    d = json.loads(text)
    assert d["name"] == "gae_core" and d["protocol"] == "ap_ctrl_hs" and d["data_width"] == 32
    assert d["doc"] == "GAE core control"
    regs = {r["name"]: r for r in d["registers"]}
    assert list(regs) == ["CTRL", "GIER", "IP_IER", "IP_ISR", "GAMMA", "GAMMA_LAMBDA", "STATUS"]
    assert regs["STATUS"]["offset"] == 0x18 and regs["STATUS"]["doc"] == "status"
    count = regs["STATUS"]["fields"][2]
    assert count == {"name": "COUNT", "lsb": 8, "width": 16, "access": "ro", "reset": 0,
                     "doc": "elements done", "mask": 0x00FFFF00}
    assert regs["CTRL"]["fields"][0]["access"] == "rw_sc"
    assert RegisterMap.from_dict(d) == rm
    plain = RegisterMap("p", [Register.scalar("X", 8, "wo", reset=3)])
    assert RegisterMap.from_dict(json.loads(plain.to_json())) == plain


def test_constant_fields_export_what_they_read():
    """HW_* fields (an Info) keep reset 0 in the gateware's map; the exports' map
    (with_constant_resets) holds the configuration's words, which the JSON, C header and
    Markdown carry, and the JSON keeps each field's parameter so that it loads back."""
    from sw.gae.spec import GaeCoreConfig, gae_register_map

    cfg = GaeCoreConfig(n_pe=4, max_trajectories=8, capacity=32)
    rm = gae_register_map(cfg)
    words = rm.info_values(cfg)
    assert all(f.reset == 0 for r in rm.info_registers for f in r.fields)
    out = rm.with_constant_resets(cfg)
    def layout(m):
        return [(r.name, r.offset, [(f.name, f.lsb, f.width, f.access) for f in r.fields])
                for r in m]
    assert layout(out) == layout(rm) and out != rm     # the same map but the resets
    assert {r.name: r.reset for r in out.info_registers} == words
    assert [r.reset for r in out if not r.is_info] == [r.reset for r in rm if not r.is_info]
    back = RegisterMap.from_dict(json.loads(out.to_json()))
    assert {r.name: r.reset for r in back.info_registers} == words
    assert back.decode_info(words) == rm.decode_info(words)
    files = register_files(rm, cfg, "m")
    assert files["m_regs.json"] == out.to_json()
    hw = next(r for r in out.info_registers if r.reset)
    assert f"M_{hw.name}_RESET" in files["m_regs.h"] and f"0x{hw.reset:08x}" in files["m_regs.md"]
    assert f"M_{hw.name}_RESET 0x{hw.reset:08x}u" in " ".join(files["m_regs.h"].split())
    assert Field("N", 0, 8, "ro", reset=5, info=Info("n_pe")).reset == 5
    assert Info.from_dict(Info("pe.mode", choices=("a", "b")).to_dict()) == \
        Info("pe.mode", choices=("a", "b"))


def _macros(header):
    return dict(re.findall(r"^#define (\w+)\s+(\S+)", header, re.M))


def test_c_header():
    rm = gae_like_map()
    h = to_c_header(rm, "GAE")
    assert h == to_c_header(rm, "GAE")
    m = _macros(h)
    assert "#ifndef GAE_REGMAP_H" in h and h.rstrip().endswith("#endif /* GAE_REGMAP_H */")
    assert m["GAE_CTRL_OFFSET"] == "0x00" and m["GAE_IP_ISR_OFFSET"] == "0x0c"
    assert m["GAE_GAMMA_OFFSET"] == "0x10" and m["GAE_STATUS_OFFSET"] == "0x18"
    assert m["GAE_CTRL_AP_START_MASK"] == "0x00000001u"
    assert m["GAE_CTRL_AUTO_RESTART_SHIFT"] == "7"
    assert m["GAE_CTRL_AUTO_RESTART_MASK"] == "0x00000080u"
    assert m["GAE_GAMMA_MASK"] == "0x0003ffffu" and m["GAE_GAMMA_WIDTH"] == "18"
    assert m["GAE_STATUS_COUNT_SHIFT"] == "8" and m["GAE_STATUS_COUNT_MASK"] == "0x00ffff00u"
    assert "GAE_GAMMA_GAMMA_MASK" not in m      # whole-register field: no repeated name
    assert re.search(r"GAE_STATUS_OVERFLOW_SHIFT\s+1\s+/\* ro_cor: a value saturated \*/", h)
    for access in ACCESS_TYPES:
        assert f" *   {access}" in h
    # default prefix: the map's name in upper case
    assert "#define GAE_CORE_GAMMA_OFFSET" in to_c_header(rm)
    with pytest.raises(ValueError, match=r"prefix must be a C identifier.*'9x'"):
        to_c_header(rm, "9x")
    for write in (to_c_header, to_markdown, lambda m: register_files(m, None, "m")):
        with pytest.raises(TypeError, match=r"regmap must be a RegisterMap, not 'GAE'"):
            write("GAE")


def test_c_header_compiles():
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    rm = gae_like_map()
    src = to_c_header(rm, "GAE") + """
_Static_assert(GAE_STATUS_OFFSET == 0x18, "offset");
_Static_assert((GAE_STATUS_COUNT_MASK >> GAE_STATUS_COUNT_SHIFT) == 0xffffu, "mask");
_Static_assert(GAE_CTRL_AP_START_MASK == 1u << GAE_CTRL_AP_START_SHIFT, "shift");
int main(void) { return 0; }
"""
    res = subprocess.run([cc, "-std=c11", "-Wall", "-Werror", "-fsyntax-only", "-x", "c", "-"],
                         input=src, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def test_markdown():
    rm = gae_like_map()
    md = to_markdown(rm)
    assert md == to_markdown(rm)
    lines = md.splitlines()
    assert lines[0] == "GAE core control"
    assert "| Offset | Register | Reset | Description |" in lines
    assert "| 0x18 | STATUS | 0x00000000 | status |" in lines
    assert "| 0x00 | CTRL | 0 | AP_START | rw_sc | 0x0 | write 1 to start; cleared on ap_ready " \
           "unless AUTO_RESTART |" in lines
    assert "| | | 7 | AUTO_RESTART | rw | 0x0 | restart the core after each run |" in lines
    assert "| | | 23:8 | COUNT | ro | 0x0 | elements done |" in lines
    assert "| 0x10 | GAMMA | 17:0 | GAMMA | rw | 0x0 | discount factor |" in lines
    piped = to_markdown(RegisterMap("p", [Register.scalar("A", doc="a | b")]))
    assert "a \\| b" in piped
