"""The trainer replay side's Verilog is lint-clean: ``verilator --lint-only -Wall`` with the
project's waiver list (Amaranth's own patterns only), for the tests' small trainer, one with
delay 0 (a one-batch queue), 128 slots and narrow formats, and
the default trainer (slow)."""

import shutil
import subprocess
from pathlib import Path

import pytest

from rtl_gen.emit import to_verilog
from rtl_gen.trainer.replay import TrainerReplay
from sw.learner.spec import LearnerConfig
from sw.replay.spec import SumTreeConfig
from sw.trainer.spec import TrainerConfig

WAIVERS = Path(__file__).resolve().parents[2] / "scripts" / "verilator_waivers.vlt"


def _small(delay, **tree):
    tree = {"fanout": 4, "capacity": 256, "max_batch": 32, **tree}
    return TrainerConfig(learner=LearnerConfig(sizes=(4, 16, 2), array=4, max_batch=32,
                                               sub_batch=8),
                         tree=SumTreeConfig(**tree), append_window=16, delay=delay)


CASES = {
    "small": lambda: _small(1),
    "narrow-delay0": lambda: _small(0, capacity=128, priority_width=20, target_bits=8),
    "default": TrainerConfig,
}
#: The default trainer (2**16 leaves, fanout 16) takes the longest to convert.
MARKS = {"default": [pytest.mark.slow]}


@pytest.mark.skipif(shutil.which("verilator") is None, reason="verilator not on PATH")
@pytest.mark.parametrize("name", [pytest.param(n, marks=MARKS.get(n, [])) for n in CASES])
def test_replay_verilog_is_lint_clean(tmp_path, name):
    path = tmp_path / "trainer_replay.v"
    path.write_text(to_verilog(TrainerReplay(CASES[name]()), "trainer_replay"))
    res = subprocess.run(["verilator", "--lint-only", "-Wall", str(WAIVERS), str(path)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
