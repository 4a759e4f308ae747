"""The trainer accelerator's Verilog is lint-clean (``verilator --lint-only -Wall`` with the
project's waiver list) for the tests' small trainer, and its ports are the ones a Vivado IP
and a Vitis RTL kernel need."""

import shutil
import subprocess
from pathlib import Path

import pytest

from rtl_gen.emit import port_table, to_verilog
from rtl_gen.trainer.accelerator import TrainerAccelerator

from .core_bench import small_config

# test_ports builds components without elaborating them.
pytestmark = pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")

WAIVERS = Path(__file__).resolve().parents[2] / "scripts" / "verilator_waivers.vlt"


def test_ports():
    acc = TrainerAccelerator(small_config(storage_width=128))
    names = {p["name"] for p in port_table(acc)}
    assert {"ap_clk", "ap_rst_n", "interrupt", "s_axi_control_awaddr", "m_axi_gmem_araddr",
            "m_axi_gmem_wdata", "m_axi_gmem_bready"} <= names
    assert not any(n.startswith(("s_axi_mem", "args", "status", "ctrl")) for n in names)
    with pytest.raises(TypeError, match="config must be a TrainerConfig"):
        TrainerAccelerator({"learner": {}})


@pytest.mark.skipif(shutil.which("verilator") is None, reason="verilator not on PATH")
def test_accelerator_verilog_is_lint_clean(tmp_path):
    path = tmp_path / "dqn_trainer.v"
    path.write_text(to_verilog(TrainerAccelerator(small_config()), "dqn_trainer"))
    res = subprocess.run(["verilator", "--lint-only", "-Wall", str(WAIVERS), str(path)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
