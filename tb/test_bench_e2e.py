"""scripts/bench_e2e.py: the framework on tiny shapes (rows, keys, sums, JSON). No wall-clock
assertion: only that the rows are well formed and add up."""

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
sys.path.insert(0, str(SCRIPTS))

import bench_e2e  # noqa: E402
from bench import common, gae, learner, replay, trainer  # noqa: E402


@pytest.fixture
def tiny(monkeypatch):
    """Tiny shapes, no numba (no JIT compile in the fast tier)."""
    monkeypatch.setattr(gae, "SHAPES", ((8, 4),))
    monkeypatch.setattr(replay, "CAPACITIES", (1 << 16, 1 << 8))
    monkeypatch.setattr(replay, "BATCH", 16)
    monkeypatch.setattr(learner, "BATCHES", (4, 65))
    monkeypatch.setattr(trainer, "CONFIGS", (("trainer_zcu106", "zcu106", (1,)),))
    monkeypatch.setattr(trainer, "STEPS", 4)
    monkeypatch.setattr(trainer, "CAPACITY", 256)
    monkeypatch.setattr(common, "numba_or_none", lambda: None)


def test_bench_e2e_rows_and_json(tiny, tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert bench_e2e.main(["--quick", "--rounds", "5", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())
    users = 1 if importlib.util.find_spec("cpprb") else 0     # the torch + cpprb row
    assert [r["block"] for r in rows] == (["gae"] * 8 + ["learner"] * 4 + ["replay"] * 6
                                          + ["trainer"] * (1 + users))
    for r in rows[18:]:
        assert "modeled cycles" in r["config"] and "2^8 inserts=1/step" in r["shape"]
    assert [r["shape"].split(" B=")[0] for r in rows[12:15]] == ["sample", "update",
                                                                "update+sample"]
    assert [r["config"].split()[0] for r in rows[8:12]] == \
        ["learner_kernel_s4", "learner_kernel_s8"] * 2
    assert ["streamed" in r["config"] for r in rows[:8]] == [False] * 2 + [True] * 6
    assert [r["config"].split()[0] for r in rows[:8]] == [
        "gae_kernel_n8", "gae_kernel_n64"] + [m for m in ("gae_kernel_n8", "gae_kernel_n64",
                                                          "gae_accel_n64") for _ in "ab"]
    for last, whole in zip(rows[2:8:2], rows[3:8:2]):   # the iteration holds the last step
        assert "after the last env step" in last["config"]
        assert "whole iteration (8 pushes + finish)" in whole["config"]
        assert whole["shape"] == last["shape"] and whole["baseline_us"] == last["baseline_us"]
        for k in ("host_us", "bus_us", "kernel_us"):
            assert whole[k] >= last[k]
    for r in rows:
        assert tuple(r) == common.ROW_KEYS
        assert r["baseline"] in ("numba", "numpy", "torch", "cpprb", "numba+numpy",
                                 "torch+cpprb")
        assert r["baseline_us"] > 0
        if "REFUSED" in r["config"]:
            assert r["shape"] == "DQN step B=65"
            assert r["total_us"] is None and r["speedup"] is None
            continue
        assert min(r["host_us"], r["bus_us"], r["kernel_us"]) > 0
        assert math.isclose(r["total_us"], r["host_us"] + r["bus_us"] + r["kernel_us"])
        assert math.isclose(r["speedup"], r["baseline_us"] / r["total_us"])
    assert "NOT SHIPPED" in rows[17]["config"] and "2^8" in rows[17]["shape"]
    meta = json.loads(out.with_suffix(".meta.json").read_text())
    from sw.timing import clock_mhz
    clocks = {k[len("clock ("):-1]: v for k, v in meta["assumptions"].items()
              if k.startswith("clock (")}
    assert "gae_kernel_n8" in clocks and "gae_kernel_n64" in clocks
    for module, text in clocks.items():        # the clock each row used, with its label
        mhz, label = clock_mhz(module)
        assert text.startswith(f"{mhz:.0f} MHz {label}"), (module, text)
    assert "PCIe Gen3 x16 (Alveo, XRT)" in " ".join(meta["assumptions"])
    text = capsys.readouterr().out
    assert "| block | config | shape | baseline |" in text and "load average" in text
    assert "| block | module | shape | host / (bus + kernel) |" in text
    ran = [r for r in rows if r["host_us"] is not None]
    assert [(s["block"], s["shape"]) for s in meta["host_share"]] == \
        [(r["block"], r["shape"]) for r in ran]
    for s, r in zip(meta["host_share"], ran):
        assert math.isclose(s["share"], r["host_us"] / (r["bus_us"] + r["kernel_us"]))
        assert math.isclose(s["share_of_kernel"], r["host_us"] / r["kernel_us"])
        assert s["met"] == (s["share"] <= 0.25)


def test_bus_model_counts_every_term():
    from sw.driver import TrafficCounter
    bus = common.BusModel("b", 1e6, 5e5, transfer_us=10, reg_read_us=2, reg_write_us=1,
                          launch_us=7, why="")
    t = TrafficCounter(writes=1, reads=2, bytes_written=10, bytes_read=10, reg_writes=3,
                       reg_reads=4, starts=5)
    assert bus.time_us(t) == pytest.approx(10 + 20 + 3 * 10 + 8 + 3 + 35)


def test_window_copy_cycles_match_the_kernel_model():
    from sw.driver import TrafficCounter
    from sw.gae.spec import copy_plan, kernel_run_cycles, run_cycles
    from sw.registry import shipped_config
    _, cfg = shipped_config("gae_kernel_n8")
    plan = copy_plan(cfg, 100, 16)
    # the stub's kinds: "write" (a copy into the accelerator), "read" (a copy out of it)
    t = TrafficCounter(transfers=[("write", base, n) for _, base, n in plan["in"]]
                       + [("read", base, n) for _, base, n in plan["out"]])
    assert common.window_copy_cycles(cfg, t) + run_cycles(cfg.accel, 100, 16) == \
        kernel_run_cycles(cfg, 100, 16, latency=common.DDR_LATENCY)


def test_row_sums_and_refused():
    r = common.Env.row(block="b", config="c", shape="s", baseline="numba", baseline_us=30,
                       host_us=1, bus_us=2, kernel_us=3)
    assert r["total_us"] == 6 and r["speedup"] == 5
    r = common.Env.refused(block="b", config="c", shape="s", baseline="numba", baseline_us=3,
                           why="too big")
    assert r["speedup"] is None and "REFUSED: too big" in r["config"]


def test_host_shares_of_the_rows():
    """The host-time goal's column: host / (bus + kernel), met at most 25 %; refused rows
    have none."""
    rows = [common.Env.row(block="b", config="m (x)", shape="s", baseline="numba",
                           baseline_us=30, host_us=h, bus_us=2, kernel_us=2) for h in (1, 3)]
    rows.append(common.Env.refused(block="b", config="m", shape="s2", baseline="numba",
                                   baseline_us=3, why="too big"))
    shares = bench_e2e.host_shares(rows)
    assert shares == [("b", "m", "s", 0.25, 0.5, True), ("b", "m", "s", 0.75, 1.5, False)]
    text = bench_e2e.format_shares(shares)
    assert "| b | m | s | 25% | 50% | met |" in text
    assert "| b | m | s | 75% | 150% | not met |" in text
