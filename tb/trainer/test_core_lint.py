"""The trainer core's Verilog is lint-clean: ``verilator --lint-only -Wall`` with the project's
waiver list (Amaranth's own patterns only), for the tests' small trainer at storage widths 64,
128 and 512."""

import shutil
import subprocess
from pathlib import Path

import pytest

from rtl_gen.emit import to_verilog
from rtl_gen.trainer.core import TrainerCore

from .core_bench import small_config

WAIVERS = Path(__file__).resolve().parents[2] / "scripts" / "verilator_waivers.vlt"


@pytest.mark.skipif(shutil.which("verilator") is None, reason="verilator not on PATH")
@pytest.mark.parametrize("width", [64, 128, 512])
def test_core_verilog_is_lint_clean(tmp_path, width):
    path = tmp_path / "trainer_core.v"
    path.write_text(to_verilog(TrainerCore(small_config(storage_width=width)), "trainer_core"))
    res = subprocess.run(["verilator", "--lint-only", "-Wall", str(WAIVERS), str(path)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
