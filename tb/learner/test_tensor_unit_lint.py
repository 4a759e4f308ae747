"""Emitted tensor-unit Verilog (through ``sw.registry``) is clean under
``verilator --lint-only -Wall`` with the project's waiver list, for corner and default sizes."""

import shutil
import subprocess
from pathlib import Path

import pytest

from rtl_gen.emit import emit

WAIVERS = Path(__file__).resolve().parents[2] / "scripts" / "verilator_waivers.vlt"

CASES = [
    {"rows": 1, "cols": 1, "max_k": 1},
    {"rows": 3, "cols": 2, "in_width": 8, "a_frac": 3, "b_frac": 7, "acc_width": 20,
     "out_width": 20, "out_frac": 10, "rounding": "floor"},      # shift 0: no rounding adder
    {"rows": 2, "cols": 5, "rounding": "half_even", "max_k": 3},
    {"rows": 8, "cols": 8},
]


@pytest.mark.skipif(shutil.which("verilator") is None, reason="verilator not on PATH")
@pytest.mark.parametrize("params", CASES, ids=lambda p: f"{p['rows']}x{p['cols']}")
def test_lint_clean(tmp_path, params):
    manifest = emit("tensor-unit", params, tmp_path)
    assert manifest["latency"]["cycles"] == params["rows"] + params["cols"] + 3
    res = subprocess.run(["verilator", "--lint-only", "-Wall", str(WAIVERS),
                          str(tmp_path / manifest["verilog"])], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
