"""Emitted learner Verilog (through ``sw.registry``) is clean under
``verilator --lint-only -Wall`` with the project's waiver list."""

import shutil
import subprocess
from pathlib import Path

import pytest

from rtl_gen.emit import emit

WAIVERS = Path(__file__).resolve().parents[2] / "scripts" / "verilator_waivers.vlt"

CASES = [
    {"sizes": [3, 4, 2], "array": 2, "max_batch": 8, "sub_batch": 2, "loss": "mse"},
    {"sizes": [5, 7, 3, 3], "array": 2, "max_batch": 6, "sub_batch": 4, "rounding": "floor",
     "axi_data_width": 32},
    {"sizes": [4, 64, 64, 2], "array": 4, "max_batch": 64, "sub_batch": 8},
    {"sizes": [3, 5, 3], "array": 2, "max_batch": 16, "sub_batch": 4, "dp": 4},
    {"sizes": [4, 9, 6, 2], "array": 4, "max_batch": 16, "sub_batch": 8, "dp": 2,
     "stage_arrays": "fw:2x4,tfw:4x2,bw1:2x2,wa:2x4,wa2:4x2"},
    {"sizes": [3, 5, 2], "array": 2, "max_batch": 8, "sub_batch": 2, "loss": "mse",
     "optimizer": "adam"},
]


@pytest.mark.skipif(shutil.which("verilator") is None, reason="verilator not on PATH")
@pytest.mark.parametrize("params", CASES,
                         ids=lambda p: "-".join(map(str, p["sizes"])) + f"-dp{p.get('dp', 1)}"
                         + ("-stages" if "stage_arrays" in p else "")
                         + ("-adam" if p.get("optimizer") == "adam" else ""))
def test_lint_clean(tmp_path, params):
    manifest = emit("learner", params, tmp_path)
    assert manifest["registers"]["json"] == "learner_regs.json"
    res = subprocess.run(["verilator", "--lint-only", "-Wall", str(WAIVERS),
                          str(tmp_path / manifest["verilog"])], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
