"""scripts/bench_floor.py: every goal's floor from the cycle models and the bus model (no
wall-clock assertion: the host loops are replaced by numpy stand-ins, their times by whatever
they take)."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
sys.path.insert(0, str(SCRIPTS))

import bench_floor  # noqa: E402
from bench.common import ALVEO_PCIE  # noqa: E402
from sw.gae import spec as gae_spec  # noqa: E402
from sw.learner.schedule import step_cycles  # noqa: E402
from sw.registry import shipped_config  # noqa: E402
from sw.replay import spec as replay_spec  # noqa: E402
from sw.timing import TARGET_MHZ, clock_mhz  # noqa: E402


def _numpy_kernels():
    def quantize(x, scale, offset, out):
        out[...] = np.clip(np.floor(x * scale + offset + 0.5), -128, 127)

    def pack_bits(d, out):
        out[...] = np.packbits(d.reshape(-1), bitorder="little")

    def dequantize(c, v, scale, adv, ret):
        adv[...] = c * scale
        ret[...] = adv + v

    return quantize, pack_bits, dequantize


def _bench_rows(gae_us=100.0, replay_us=(30.0, 10.0), learner_us=100.0):
    rows = []
    for T, N in ((1024, 64), (128, 8)):
        rows.append({"block": "gae", "config": "gae_kernel_n8", "shape": f"T={T} x N={N}",
                     "baseline_us": gae_us})
        rows.append({"block": "gae", "config": "gae_kernel_n8 streamed", "shape":
                     f"T={T} x N={N}", "baseline_us": 1.0})
    for cap in (16, 20):
        for op, us in zip(("sample", "update"), replay_us):
            rows.append({"block": "replay", "config": "k16", "shape": f"{op} B=256, N=2^{cap}",
                         "baseline_us": us})
    for B in (32, 64, 256):
        rows.append({"block": "learner", "config": "s4", "shape": f"DQN step B={B}",
                     "baseline_us": learner_us})
    return rows


@pytest.fixture
def run(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(bench_floor, "host_kernels", _numpy_kernels)

    def run(**baselines):
        src, out = tmp_path / "bench.json", tmp_path / "floor.json"
        src.write_text(json.dumps(_bench_rows(**baselines)))
        assert bench_floor.main(["--bench-json", str(src), "--json", str(out)]) == 0
        capsys.readouterr()
        return json.loads(out.read_text())
    return run


def test_floor_rows_from_the_cycle_models(run):
    rows = run()
    assert [r["what"] for r in rows].count("replay sample") == 2
    for r in rows:
        assert r["floor_us"] == pytest.approx(r["host_us"] + r["bus_us"] + r["kernel_us"])
        assert r["kernel_us"] == pytest.approx(r["cycles"] / r["clock_mhz"])
        assert r["floor_300_us"] == pytest.approx(r["floor_us"] - r["kernel_us"]
                                                  + r["cycles"] / TARGET_MHZ)
        assert r["bus_us"] == pytest.approx(r["payload_bytes"] / ALVEO_PCIE.write_bytes_per_s
                                            * 1e6 + ALVEO_PCIE.launch_us)
    _, gae = shipped_config("gae_kernel_n8")
    g = rows[0]
    assert (g["what"], g["shape"]) == ("gae batch", "T=1024 x N=64")
    assert g["cycles"] == gae_spec.run_cycles(gae, 1024, 64)
    assert g["clock_mhz"] == clock_mhz("gae_kernel_n8")[0]
    assert g["payload_bytes"] == 1024 * 64 * 3 + 1024 * 64 // 8 + 64
    _, rk = shipped_config("replay_kernel_k16")
    s = next(r for r in rows if r["what"] == "replay sample")
    assert s["cycles"] == replay_spec.run_cycles(rk, replay_spec.ReplayOp.SAMPLE, 256)
    _, rm = shipped_config("replay_kernel_k16_1m")
    s20 = [r for r in rows if r["what"] == "replay sample"][1]
    assert "2^20" in s20["config"] and s20["clock_mhz"] == clock_mhz("replay_kernel_k16_1m")[0]
    assert s20["cycles"] == replay_spec.run_cycles(rm, replay_spec.ReplayOp.SAMPLE, 256)
    _, lk = shipped_config("learner_kernel_s4")
    first = next(r for r in rows if r["what"] == "learner DQN step")
    assert first["cycles"] == step_cycles(lk, 64) and first["goal"] == 10.0


def test_reachable_follows_the_allowance(run):
    slow = run(gae_us=1e6, replay_us=(1e6, 1e6), learner_us=1e6)
    fast = run(gae_us=1.0, replay_us=(1.0, 1.0), learner_us=1.0)
    for s, f in zip(slow, fast):
        if s["goal"] is None:
            assert s["reachable"] is None and s["allowed_us"] is None
            continue
        assert s["allowed_us"] == pytest.approx(1e6 / s["goal"])
        assert s["reachable"] is True and f["reachable"] is False


def test_missing_bench_json_names_the_fix(tmp_path):
    with pytest.raises(SystemExit, match="make bench"):
        bench_floor.main(["--bench-json", str(tmp_path / "none.json"),
                          "--json", str(tmp_path / "out.json")])
