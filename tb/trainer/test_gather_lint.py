"""The gather engine's Verilog is lint-clean: ``verilator --lint-only -Wall`` with the project's
waiver list (Amaranth's own patterns only), for every storage width (records of 4, 2 and 1
beats, and two records per beat) and queue depths of one, a non-power of two and the most."""

import shutil
import subprocess
from pathlib import Path

import pytest

from rtl_gen.emit import to_verilog
from rtl_gen.trainer.gather import RecordGather
from sw.learner.spec import LearnerConfig
from sw.replay.spec import SumTreeConfig
from sw.trainer.spec import TrainerConfig

WAIVERS = Path(__file__).resolve().parents[2] / "scripts" / "verilator_waivers.vlt"

CASES = [(64, 8), (128, 1), (256, 3), (512, 1), (512, 5), (512, 256)]


@pytest.mark.skipif(shutil.which("verilator") is None, reason="verilator not on PATH")
@pytest.mark.parametrize("width,outstanding", CASES, ids=[f"w{w}-o{o}" for w, o in CASES])
def test_gather_verilog_is_lint_clean(tmp_path, width, outstanding):
    config = TrainerConfig(learner=LearnerConfig(sizes=(4, 16, 2), array=4, max_batch=32,
                                                 sub_batch=8),
                           tree=SumTreeConfig(fanout=4, capacity=1024, max_batch=32),
                           append_window=16, storage_width=width)
    path = tmp_path / "record_gather.v"
    path.write_text(to_verilog(RecordGather(config, max_outstanding=outstanding),
                               "record_gather"))
    res = subprocess.run(["verilator", "--lint-only", "-Wall", str(WAIVERS), str(path)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
