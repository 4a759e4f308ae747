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


# -- the resource model: the generator's memories, and Yosys' counts -------------------------------
from sw.learner.resources import (learner_dsps, learner_memories, learner_resources,  # noqa: E402
                                  map_memory)

REPO = SCRIPT.parents[1]

#: Small configurations whose cores are elaborated to compare their memories with the model:
#: one pipeline, two pipelines with per-stage arrays (the ZCU106 candidate's shape), MSE.
MODEL_CONFIGS = {
    "dqn-s4": dict(sizes=(4, 8, 8, 2), array=4, max_batch=32, sub_batch=4),
    "dqn-dp2-stages": dict(sizes=(4, 8, 8, 2), array=4, max_batch=64, sub_batch=4, dp=2,
                           stage_arrays="fw0:2x4,tfw0:2x4,wa0:2x4,fw2:2x2,tfw2:2x2,wa2:2x2,"
                                        "bw2:2x2", axi_data_width=32),
    "mse-dp4": dict(sizes=(3, 6, 5, 2), array=2, max_batch=16, sub_batch=2, dp=4, loss="mse"),
}

#: Yosys' BRAM36 (RAMB36E2 + RAMB18E2 / 2) and DSP48E2 of configurations not shipped, with
#: where they were measured. The shipped learners' counts are read from hdl/timing.json.
YOSYS_COUNTS = {
    # sw.registry.CANDIDATES' learner_zcu106_dp2 (two 8 x 8 pipelines, per-stage arrays,
    # B <= 256): Debian's Yosys 0.23, `read_verilog; synth_xilinx -family xcup -flatten; stat`
    # (make estimate-candidates), 2026-12-02; docs/learner.md, Resources.
    "learner_zcu106_dp2": {"bram36": 435, "dsp": 822},
}

#: Model minus Yosys per configuration, as docs/learner.md states them (BRAM36, DSP48E2).
STATED_DIFFERENCES = {
    "learner_cartpole_s4": (0, 0),
    "learner_kernel_s4": (0, 0),
    "learner_kernel_s8": (0, 0),
    "learner_zcu106_dp2": (0, 0),
}


def _yosys_counts():
    """(config, BRAM36, DSP48E2) of every configuration with a Yosys count."""
    from sw.registry import candidate_config, shipped_config

    timing = json.loads((REPO / "hdl" / "timing.json").read_text())["modules"]
    out = {}
    for name in ("learner_cartpole_s4", "learner_kernel_s4", "learner_kernel_s8"):
        res = timing[name]["resources"]
        out[name] = (shipped_config(name)[1], res["bram36"], res["dsp"])
    for name, counts in YOSYS_COUNTS.items():
        out[name] = (candidate_config(name)[1], counts["bram36"], counts["dsp"])
    return out


@pytest.mark.parametrize("name", sorted(STATED_DIFFERENCES))
def test_model_against_yosys(name):
    """BRAM36 and DSP48E2 of the model within 10 % of Yosys' (the kernels' shell memories
    have asynchronous reads: LUT RAM, no block RAM), and the differences the docs state."""
    config, bram, dsp = _yosys_counts()[name]
    res = learner_resources(config)
    d_bram, d_dsp = res.bram36 - bram, res.dsp - dsp
    print(f"{name}: BRAM36 model {res.bram36:g} Yosys {bram} ({d_bram:+g}, "
          f"{100 * d_bram / bram:+.1f} %); DSP48E2 model {res.dsp} Yosys {dsp} ({d_dsp:+d})")
    assert abs(d_bram) <= 0.1 * bram and abs(d_dsp) <= 0.1 * dsp
    assert (d_bram, d_dsp) == STATED_DIFFERENCES[name]


def _elaborated_memories(config):
    """The generator's memories of ``config``'s core: hardware name -> Memory."""
    from amaranth.hdl import Fragment

    from rtl_gen.learner.core import LearnerCore

    class Core(LearnerCore):
        def elaborate(self, platform):
            self.module = super().elaborate(platform)
            return self.module

    core = Core(config)
    Fragment.get(core, None)            # the whole core elaborated (nothing left unused)
    return {x.name: core.module.submodules[f"mem_{x.name}"] for x in learner_memories(config)}


@pytest.mark.parametrize("case", sorted(MODEL_CONFIGS) + ["learner_cartpole_s4"])
def test_memories_are_the_generators(case):
    """Every modelled memory is one the core builds, with its width, depth, read ports, write
    port and write granularity."""
    from sw.learner.spec import LearnerConfig
    from sw.registry import shipped_config

    config = (shipped_config(case)[1] if case.startswith("learner_")
              else LearnerConfig(**MODEL_CONFIGS[case]))
    built = _elaborated_memories(config)
    for x in learner_memories(config):
        mem = built[x.name]
        got = (mem.shape.width, mem.depth, len(mem.read_ports), len(mem.write_ports),
               mem.write_ports[0].signature.granularity)
        assert got == (x.width, x.depth, x.read_ports, x.write_ports, x.granularity), x.name
        assert x.width % x.enable_bits == 0 and x.enable_bits % x.granularity == 0


@pytest.mark.parametrize("module", ["learner_cartpole_s4", "learner_kernel_s8"])
def test_memories_are_those_of_the_shipped_verilog(module):
    """The core's memories in the shipped Verilog (name, width, depth) are the model's; the
    others are the shells' FIFOs."""
    import re

    from sw.registry import shipped_config

    text = (REPO / "hdl" / module / f"{module}.v").read_text()
    found = {(n, int(w) + 1, int(d) + 1)
             for w, n, d in re.findall(r"^\s*reg \[(\d+):0\] (\S+) \[(\d+):0\];", text, re.M)}
    model = {(f"mem_{x.name}", x.width, x.depth)
             for x in learner_memories(shipped_config(module)[1])}
    assert model <= found
    assert {n for n, _, _ in found - model} <= {"storage", "wbuf"}


# Yosys 0.70 (synth_xilinx -family xcup -flatten -run :map_ffram on learner_cartpole_s4.v,
# memory_libmap's log, 2026-12-07): memory -> (cells, primitive).
S4_MAPPED = {
    "delta0": (8, "RAMB36E2"), "delta1": (16, "RAMB36E2"), "mask0": (1, "RAMB36E2"),
    "w1": (8, "RAMB36E2"), "tw1": (4, "RAMB36E2"), "grad1": (30, "RAMB18E2"),
    "delta2": (80, "RAM64M8"), "samples": (36, "RAM64M8"), "obs": (128, "RAM64M8"),
    "grad0": (80, "RAM32M16"), "w2": (64, "RAM32M16"), "tw0": (32, "RAM32M16"),
}


def test_memory_mapping_is_yosys():
    """Single memories of learner_cartpole_s4 mapped as Yosys' memory_libmap mapped them."""
    from sw.registry import shipped_config

    mems = {x.name: x for x in learner_memories(shipped_config("learner_cartpole_s4")[1])}
    for name, (cells, cell) in S4_MAPPED.items():
        mp = map_memory(mems[name])
        assert (mp.cells, mp.cell) == (cells, cell), name
    res = learner_resources(shipped_config("learner_cartpole_s4")[1])
    assert (res.ramb36, res.ramb18) == (86, 30)          # Yosys: 86 RAMB36E2, 30 RAMB18E2


# Yosys 0.70 on the ZCU106 candidate's core (Amaranth's RTLIL, its memory initializations
# deleted as the Verilog's are under SYNTHESIS; proc; flatten; opt_expr; opt_clean; memory -nomap;
# memory_libmap as synth_xilinx -family xcup runs it; 2026-12-07): 435 BRAM36 in all, as Yosys
# 0.23's whole synthesis. Pipeline 0's gradient scratchpads have two writers (WA and WU's
# reduction), so their enables are per 2-lane group, not per row: 32 RAMB36E2 against 29.
CANDIDATE_MAPPED = {
    "h0_p0": (30, "RAMB36E2"), "th0_p1": (15, "RAMB36E2"), "delta1_p0": (32, "RAMB36E2"),
    "grad1_p0": (32, "RAMB36E2"), "grad1_p1": (29, "RAMB36E2"), "w1": (64, "RAMB36E2"),
    "tw1": (32, "RAMB36E2"), "mask0_p0": (1, "RAMB36E2"), "obs": (512, "RAM32M16"),
    "samples": (70, "RAM32M16"), "grad0_p0": (160, "RAM32M16"), "grad0_p1": (152, "RAM32M16"),
}


def test_candidate_mapping_is_yosys():
    """Memories of the two-pipeline candidate with per-stage arrays mapped as Yosys did."""
    from sw.registry import candidate_config

    config = candidate_config("learner_zcu106_dp2")[1]
    mems = {x.name: x for x in learner_memories(config)}
    for name, (cells, cell) in CANDIDATE_MAPPED.items():
        mp = map_memory(mems[name])
        assert (mp.cells, mp.cell) == (cells, cell), name


def test_dsps_by_part():
    from sw.learner.spec import LearnerConfig

    cfg = LearnerConfig(sizes=(4, 64, 64, 2), array=4, max_batch=64, sub_batch=8)
    assert learner_dsps(cfg) == {"tensor_units": 11 * 16, "loss": 3, "wu": 3 * 4 * 2,
                                 "total": 203}
    mse = LearnerConfig(sizes=(4, 64, 64, 2), array=4, max_batch=64, sub_batch=8, loss="mse",
                        dp=2)
    assert learner_dsps(mse)["loss"] == 2 * 4                 # S squares per pipeline
    assert learner_dsps(mse)["tensor_units"] == 2 * 8 * 16    # no target network


def test_generator_points_use_the_model():
    """A generator design point's BRAM36 and DSPs are the model's of its configuration; its
    LUTs include the LUT RAM."""
    from sw.learner.spec import LearnerConfig

    points = dse.explore(SIZES, 64, dse.load_estimates(), generator=True)
    est = dse.load_estimates()
    for p in points[::11]:
        res = learner_resources(LearnerConfig.from_dict(p.params))
        assert (p.bram36, p.dsp) == (res.bram36, res.dsp)
        arrays_lut = p.dp * sum(est[rc]["lut"] for rc in p.arrays.values())
        assert p.lut == arrays_lut + res.lutram


@pytest.mark.parametrize("bad", [None, {"sizes": (4, 8, 2)}])
def test_resource_model_refuses_a_non_config(bad):
    for f in (learner_memories, learner_dsps, learner_resources):
        with pytest.raises(TypeError, match="config must be a LearnerConfig, not"):
            f(bad)
