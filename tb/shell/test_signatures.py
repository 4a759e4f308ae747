"""The core-shell interfaces (:mod:`rtl_gen.shell.signatures`), fast tier: members, flows, widths
and init of :class:`MemoryPortSignature` and :class:`RunControlSignature`, the register-map
signatures :class:`ArgsSignature` and :class:`StatusSignature` (:func:`arg_fields`,
:func:`status_fields`, :func:`field_port`), the flat signal names of :class:`FlatSignature`
(``<interface>_<member>``, or after the member), equality, and that a core and its shell connect
by signature."""


import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from rtl_gen.shell.signatures import (ArgsSignature, FlatSignature, MemoryPortSignature,
                                      RunControlSignature, StatusSignature, arg_fields,
                                      field_port, status_fields)
from sw.regmap import Field, Info, Register, RegisterMap
from sw.replay.spec import SumTreeConfig, replay_register_map
from sw.shell.spec import SHELL_FIELDS

# Components built here and never elaborated: collect them while the filter hides their
# UnusedElaboratable warnings (tb/conftest.py, collect_components).
pytestmark = [pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable"),
              pytest.mark.usefixtures("collect_components")]


def members(sig):
    """``{name: (flow, width, init)}`` of a signature of ports (no init given: 0)."""
    return {n: (m.flow, m.shape, 0 if m.init is None else m.init)
            for n, m in sig.members.items()}


def demo_map():
    """Every kind of user register: arguments (one field, several fields), a mixed register,
    a status register with the shell's fields, the shell's CYCLES, a result, an event
    register, a constant."""
    return RegisterMap.with_ap_ctrl_hs("demo", [
        Register.scalar("N", 8, doc="an argument"),
        Register("MODE", None, (Field("CODE", 0, 2, "rw"), Field("FAST", 4, 1, "rw"))),
        Register("CMD", None, (Field("GO", 0, 1, "rw_sc"), Field("ARG", 8, 8, "rw"))),
        Register("STATUS", None, (Field("ERROR", 0, 2, "ro"), Field("START_REFUSED", 2, 1, "ro"),
                                  Field("FLAG", 8, 1, "ro"), Field("SEEN", 9, 1, "ro_cor"))),
        Register.scalar("CYCLES", 32, "ro"),
        Register.scalar("RESULT", 16, "ro"),
        Register("EVENTS", None, (Field("HIT", 0, 4, "rw_tow"),)),
        Register.scalar("HW_SIZE", 32, "ro", info=Info("size")),
    ])


# -- MemoryPortSignature -----------------------------------------------------------------------
def test_memory_port_members_flows_and_init():
    sig = MemoryPortSignature(data_width=64, addr_width=10)
    assert (sig.data_width, sig.addr_width) == (64, 10)
    assert members(sig) == {
        "enable": (In, 1, 1), "addr": (Out, 10, 0), "re": (Out, 1, 0), "we": (Out, 8, 0),
        "wdata": (Out, 64, 0), "rdata": (In, 64, 0)}
    # the target's view (a core's host port)
    assert {n: m.flow for n, m in sig.flip().members.items()} == {
        "enable": Out, "addr": In, "re": In, "we": In, "wdata": In, "rdata": Out}
    assert sig == MemoryPortSignature(data_width=64, addr_width=10)
    assert hash(sig) == hash(MemoryPortSignature(data_width=64, addr_width=10))
    assert sig != MemoryPortSignature(data_width=32, addr_width=10)
    assert sig != MemoryPortSignature(data_width=64, addr_width=11)


@pytest.mark.parametrize("kwargs,msg", [
    (dict(data_width=12, addr_width=4), "data_width must be a positive multiple of 8, not 12"),
    (dict(data_width=0, addr_width=4), "data_width must be a positive multiple of 8, not 0"),
    (dict(data_width=64.0, addr_width=4), "data_width must be .* not 64.0"),
    (dict(data_width=32, addr_width=0), "addr_width must be a positive integer, not 0"),
    (dict(data_width=32, addr_width="4"), "addr_width must be a positive integer, not '4'"),
])
def test_memory_port_parameter_checks(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        MemoryPortSignature(**kwargs)


def test_memory_port_keyword_only():
    with pytest.raises(TypeError):
        MemoryPortSignature(32, 4)


# -- RunControlSignature -----------------------------------------------------------------------
def test_run_control_members_flows_and_init():
    sig = RunControlSignature(error_bits=3)
    assert sig.error_bits == 3
    assert members(sig) == {
        "start": (Out, 1, 0), "busy": (In, 1, 0), "ready": (In, 1, 0), "done": (In, 1, 0),
        "error": (In, 3, 0), "cycles": (In, 32, 0)}
    assert sig == RunControlSignature(error_bits=3) != RunControlSignature(error_bits=2)
    # same members, another kind of signature: not equal
    assert sig != FlatSignature(dict(sig.members), prefix="")
    with pytest.raises(ValueError, match="error_bits must be a positive integer, not 0"):
        RunControlSignature(error_bits=0)


# -- flat names --------------------------------------------------------------------------------
class Core(wiring.Component):
    """A component with the four standard members (the shape of every accelerator core)."""

    def __init__(self, regmap):
        super().__init__({
            "ctrl": In(RunControlSignature(error_bits=2)),
            "args": In(ArgsSignature(regmap)),
            "status": Out(StatusSignature(regmap)),
            "host": In(MemoryPortSignature(data_width=32, addr_width=4)),
        })

    def elaborate(self, platform):
        return Module()


def test_flat_signal_names():
    """Memory ports: ``<interface>_<member>``; run control, arguments and status: after the
    member (the register map's names), whatever the interface is called."""
    core = Core(demo_map())
    assert [s.name for s in (core.host.addr, core.host.re, core.host.we, core.host.wdata,
                             core.host.rdata, core.host.enable)] == \
        ["host_addr", "host_re", "host_we", "host_wdata", "host_rdata", "host_enable"]
    assert [getattr(core.ctrl, n).name for n in core.ctrl.signature.members] == \
        ["start", "busy", "ready", "done", "error", "cycles"]
    assert core.args.mode_code.name == "mode_code" and core.args.n.name == "n"
    assert core.status.status_flag.name == "status_flag" and core.status.result.name == "result"
    assert core.host.enable.init == 1
    # another interface name, another prefix
    mem = MemoryPortSignature(data_width=32, addr_width=4).create(path=("mem",))
    assert mem.wdata.name == "mem_wdata"
    nested = MemoryPortSignature(data_width=32, addr_width=4).create(path=("a", "b"))
    assert nested.addr.name == "a_b_addr"
    assert MemoryPortSignature(data_width=32, addr_width=4).create().addr.name == "addr"
    # an explicit prefix
    named = FlatSignature({"x": Out(2), "y": In(1)}, prefix="p_").create(path=("q",))
    assert (named.x.name, named.y.name) == ("p_x", "p_y")


def test_interfaces_connect_by_signature():
    """A core's members connect to the shell's flipped ones (wiring.connect checks the
    signatures), and not to those of another register map."""
    rm = demo_map()
    core = Core(rm)
    ctrl = RunControlSignature(error_bits=2).create(path=("c",))
    args = ArgsSignature(rm).create(path=("a",))
    status = StatusSignature(rm).flip().create(path=("s",))
    host = MemoryPortSignature(data_width=32, addr_width=4).create(path=("h",))
    m = Module()
    wiring.connect(m, ctrl, core.ctrl)
    wiring.connect(m, args, core.args)
    wiring.connect(m, core.status, status)
    wiring.connect(m, host, core.host)
    other = ArgsSignature(RegisterMap.with_ap_ctrl_hs("o", [Register.scalar("N", 9)]))
    with pytest.raises(wiring.ConnectionError):
        wiring.connect(Module(), other.create(path=("o",)), Core(rm).args)


# -- ArgsSignature, StatusSignature ------------------------------------------------------------
def test_field_port():
    rm = demo_map()
    assert field_port(rm["N"], rm["N"].field("N")) == "n"
    assert field_port(rm["MODE"], rm["MODE"].field("FAST")) == "mode_fast"
    assert field_port(rm["STATUS"], rm["STATUS"].field("START_REFUSED")) == \
        "status_start_refused"


def test_args_and_status_of_a_register_map():
    """Arguments: every field of the user registers whose fields are all ``rw``, in map
    order; status: the ``ro`` fields that are neither constants nor the shell's
    (SHELL_FIELDS), in map order; both ``Out`` of the field's width."""
    rm = demo_map()
    assert [(r.name, f.name) for r, f in arg_fields(rm)] == [
        ("N", "N"), ("MODE", "CODE"), ("MODE", "FAST")]
    assert [(r.name, f.name) for r, f in status_fields(rm)] == [
        ("STATUS", "FLAG"), ("RESULT", "RESULT")]
    assert SHELL_FIELDS == (("STATUS", "ERROR"), ("STATUS", "START_REFUSED"),
                            ("CYCLES", "CYCLES"))
    assert members(ArgsSignature(rm)) == {"n": (Out, 8, 0), "mode_code": (Out, 2, 0),
                                          "mode_fast": (Out, 1, 0)}
    assert members(StatusSignature(rm)) == {"status_flag": (Out, 1, 0),
                                            "result": (Out, 16, 0)}
    assert ArgsSignature(rm) == ArgsSignature(demo_map())
    assert StatusSignature(rm) != ArgsSignature(rm)


def test_args_and_status_of_the_replay_map():
    """A real map (what ReplayCore's docstring lists)."""
    rm = replay_register_map(SumTreeConfig(fanout=2, capacity=10, max_batch=8))
    assert list(ArgsSignature(rm).members) == ["op_code", "op_prng", "op_relaxed", "batch_size",
                                               "update_size", "seed"]
    assert list(StatusSignature(rm).members) == [
        "status_empty", "status_saturated", "status_invalid_index", "status_tree_busy",
        "response_cycles", "total_lo", "total_hi", "max_priority_lo", "max_priority_hi",
        "size", "write_pointer"]
    assert not any(n.startswith("hw_") for n in StatusSignature(rm).members)
