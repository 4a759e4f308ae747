"""The sum tree's Verilog, emitted through the block registry, is lint-clean: ``verilator
--lint-only -Wall`` with the project's waiver list (Amaranth's own patterns only)."""

import shutil
import subprocess
from pathlib import Path

import pytest

from rtl_gen.emit import emit

WAIVERS = Path(__file__).resolve().parents[2] / "scripts" / "verilator_waivers.vlt"

PARAMS = [
    dict(fanout=2, capacity=1, priority_width=8, priority_frac=2),       # one level, one group
    dict(fanout=4, capacity=17, priority_width=12, priority_frac=4, target_bits=9),
    dict(fanout=8, capacity=4096),                                        # a power of K
    dict(fanout=16, capacity=5000, input_guard_bits=0),
    dict(fanout=64, capacity=3000, priority_width=28, priority_frac=12, target_bits=20),
]


@pytest.mark.skipif(shutil.which("verilator") is None, reason="verilator not on PATH")
@pytest.mark.parametrize("params", PARAMS, ids=[f"k{p['fanout']}-n{p['capacity']}"
                                                for p in PARAMS])
def test_sumtree_verilog_is_lint_clean(tmp_path, params):
    manifest = emit("sumtree", params, tmp_path)
    res = subprocess.run(["verilator", "--lint-only", "-Wall", str(WAIVERS),
                          str(tmp_path / manifest["verilog"])], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
