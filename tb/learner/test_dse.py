"""The learner DSE script: its cycle model agrees with the tensor unit's, the stage graph is
the training step's dataflow, chosen designs respect the budgets, and the script runs."""

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from sw.learner.spec import TensorUnitConfig
from sw.learner.gemm import stream_cycles

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "dse_learner.py"


def _load():
    spec = importlib.util.spec_from_file_location("dse_learner_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("dse_learner_script", module)
    spec.loader.exec_module(module)
    return module


dse = _load()
SIZES = (4, 64, 64, 2)


@pytest.mark.parametrize("gemm", [(8, 65, 64), (8, 5, 64), (65, 8, 64), (1, 3, 2), (8, 64, 2)])
@pytest.mark.parametrize("rows,cols", [(2, 2), (4, 8), (8, 4), (8, 16)])
def test_item_cycles_are_the_steady_state_of_the_exact_model(gemm, rows, cols):
    """Items streamed back to back: each adds exactly item_cycles to the exact stream model."""
    cfg = TensorUnitConfig(rows=rows, cols=cols)
    M, K, N = gemm
    tiles = -(-M // rows) * -(-N // cols)
    one = stream_cycles([K] * tiles, cfg)
    three = stream_cycles([K] * (3 * tiles), cfg)
    assert three - one == 2 * dse.item_cycles(gemm, rows, cols)


def test_stage_graph_is_the_training_dataflow():
    stages = dse.stages_of(SIZES)
    assert [s.name for s in stages] == ["FW1", "FW2", "FW3", "LOSS", "BW3", "BW2", "WA1", "WA2",
                                        "WA3", "TFW1", "TFW2", "TFW3"]
    deps = dse.stage_inputs(stages)
    assert deps["LOSS"] == ["FW3", "TFW3"]
    assert deps["BW3"] == ["LOSS"] and deps["BW2"] == ["BW3"]
    assert deps["WA3"] == ["LOSS", "FW2"] and deps["WA2"] == ["BW3", "FW1"]
    assert deps["WA1"] == ["BW2"]
    # Unit weights: the critical path is FW1 FW2 FW3 LOSS BW3 BW2 WA1 = 7 stages.
    assert dse.critical_path(stages, {s.name: 1 for s in stages}) == 7
    assert dse.stage_gemm(stages[0], SIZES, 8) == (8, 5, 64)        # FW: bias row
    assert dse.stage_gemm(stages[5], SIZES, 8) == (8, 64, 64)       # BW2: δ·Wᵀ
    assert dse.stage_gemm(stages[6], SIZES, 8) == (5, 8, 64)        # WA1: Xᵀ·δ, K = batch
    ratio = dse.stage_ratio(stages, SIZES)
    assert ratio["BW3"] == 1 and ratio["FW2"] == 4160 / 128


def test_estimates_cover_the_menu():
    doc = json.loads(dse.ESTIMATES.read_text())
    assert "scripts/estimate.py --block tensor-unit" in doc["command"]
    est = dse.load_estimates()
    for r, c in dse.ARRAY_MENU:
        assert est[(r, c)]["dsp"] == r * c           # one DSP48E2 per 16-bit cell
        assert est[(c, r)] is est[(r, c)]
    assert est[(16, 16)]["lut"] > est[(8, 8)]["lut"] > est[(2, 2)]["lut"]


@pytest.mark.parametrize("device", sorted(dse.DEVICES))
def test_chosen_design_fits_and_is_the_fastest_that_fits(device):
    dev = dse.DEVICES[device]
    points = dse.explore(SIZES, 32, dse.load_estimates())
    p = dse.best(points, dev, 0.75)
    assert p is not None and p.fits(dev, 0.75)
    assert p.dsp <= 0.75 * dev.dsp and p.lut <= 0.75 * dev.lut and p.bram36 <= 0.75 * dev.bram36
    assert p.dp * p.pi == 32 and p.pi % p.m == 0
    assert all(q.cycles >= p.cycles for q in points if q.fits(dev, 0.75))
    assert np.isclose(p.steps_per_s(300), 300e6 / (p.t_pipeline + p.t_wu))


def test_script_runs(tmp_path, capsys):
    rc = dse.main(["--batch", "32", "--device", "zcu106", "--no-torch",
                   "--plot", str(tmp_path / "dse.png"), "--json", str(tmp_path / "dse.json")])
    assert rc == 0
    out = capsys.readouterr().out
    from sw.timing import clock_mhz                 # min(target, make timing's estimate)
    mhz, label = clock_mhz("learner_cartpole_s4")
    assert f"Chosen configurations at {mhz:g} MHz ({label})" in out and "zcu106" in out
    doc = json.loads((tmp_path / "dse.json").read_text())
    assert doc["chosen"][0]["batch"] == 32 and (tmp_path / "dse.png").stat().st_size > 0


def test_generator_points_are_buildable_configs():
    """Every generator design point's parameters make a valid LearnerConfig whose exact cycles
    are the point's, with the DSE's arrays per stage."""
    from sw.learner.spec import LearnerConfig
    from sw.learner.schedule import step_cycles

    points = dse.explore(SIZES, 32, dse.load_estimates(), generator=True)
    assert points and all(p.dp in (1, 2, 4) and p.m >= 2 for p in points)
    for p in points[::7]:
        cfg = LearnerConfig.from_dict(p.params)
        assert p.exact_cycles == step_cycles(cfg, 32) == p.cycles
        assert cfg.sub_batch == p.m and cfg.dp == p.dp
        assert cfg.stage_array("fw1") == p.arrays["FW2"]
        assert cfg.stage_array("wa0") == p.arrays["WA1"]
        assert cfg.stage_array("bw2") == p.arrays["BW3"]
        assert cfg.array == max(x for rc in p.arrays.values() for x in rc)


def test_dse_output_elaborates(tmp_path):
    """The script's chosen ZCU106 design for CartPole, B = 32, read back from the JSON it
    writes, elaborates as a LearnerAccelerator; its cycles beat the uniform 8 × 8 pipeline."""
    from amaranth.hdl import Fragment

    from rtl_gen.learner import LearnerAccelerator
    from sw.learner.spec import LearnerConfig
    from sw.learner.schedule import step_cycles

    rc = dse.main(["--batch", "32", "--device", "zcu106", "--no-torch",
                   "--plot", str(tmp_path / "dse.png"), "--json", str(tmp_path / "dse.json"),
                   "--config-dir", str(tmp_path / "cfg")])
    assert rc == 0
    chosen = json.loads((tmp_path / "dse.json").read_text())["chosen"][0]
    params = json.loads((tmp_path / "cfg" / "zcu106_b32.json").read_text())
    assert params == chosen["learner_params"]
    cfg = LearnerConfig.from_dict(params)
    assert len(set(cfg.stage_arrays.split(","))) > 1
    assert step_cycles(cfg, 32) == chosen["cycles"]
    uniform = LearnerConfig(sizes=SIZES, array=8, max_batch=32, sub_batch=8)
    assert chosen["cycles"] < step_cycles(uniform, 32)
    Fragment.get(LearnerAccelerator(cfg), None)


def test_small_dse_point_runs_bit_exact():
    """A DSE point of a small network with mixed per-stage arrays, built and simulated: one
    step bit-exact against the golden model in exactly the DSE's (exact) cycles."""
    from learner_cases import golden, random_case
    from learner_core_sim import check_step, simulate
    from sw.learner.spec import LearnerConfig

    points = dse.explore((3, 6, 5, 2), 8, dse.load_estimates(), generator=True)
    mixed = [p for p in points if len(set(p.arrays.values())) > 1 and p.dp == 2]
    assert mixed
    p = min(mixed, key=lambda q: q.exact_cycles)
    cfg = LearnerConfig.from_dict(p.params)
    case = random_case(cfg, 8, np.random.default_rng(2))
    status, got = simulate(cfg, case)
    check_step(cfg, case, status[0], got, golden(cfg, case))
    assert status[0]["cycles"] == p.exact_cycles
