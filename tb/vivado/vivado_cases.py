"""The tests of the generated Vivado/Vitis scripts (rtl_gen.vivado), run under tclsh with stub
Vivado commands (tclstub.py): the accelerators they cover and the parsing of the recorded calls.

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

The tests: the manifest checks and package_ip.tcl in test_package_ip.py; the ZCU106 block
design, the Alveo/Vitis and out-of-context scripts and the constraints in
test_vivado_flows.py; the command line and ``make vivado`` in test_vivado_cli.py. Their
fixtures (``acc``, ``scripts``, ``packaged``) are in conftest.py.
"""

import re
from pathlib import Path

import pytest

from rtl_gen import vivado as V

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


def only(names):
    """Run a test that uses the ``acc`` fixture for these accelerators only."""
    return pytest.mark.parametrize("acc", names, indirect=True)


def parse_int(text):
    """A TCL property value as an integer (decimal or 0x hex)."""
    return int(str(text), 0)


def parse_range(text):
    """An IP-XACT/block-design range such as ``4K`` or ``16M`` in bytes."""
    m = re.fullmatch(r"(\d+)([KMG]?)", str(text))
    return int(m[1]) << {"": 0, "K": 10, "M": 20, "G": 30}[m[2]]


#: Options of the commands the scripts use that take no value.
_SWITCHES = {"-norecurse", "-force", "-import_files", "-kernel", "-all", "-quiet",
             "-latest_file_version", "-delete", "-in_memory", "-rebuild"}


def options(args):
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


def bd_nets(rec, command):
    """One set per recorded ``command`` call (``connect_bd_net``, ``connect_bd_intf_net``):
    its pins, the part after ``=`` of each positional argument."""
    return [{a.split("=", 1)[1] for a in options(args)[1]} for args in rec.calls_of(command)]


def net_of(nets, pin):
    """The one net of :func:`bd_nets` that ``pin`` is on (an assertion otherwise)."""
    found = [n for n in nets if pin in n]
    assert len(found) == 1, f"{pin} on {len(found)} nets"
    return found[0]

