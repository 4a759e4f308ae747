"""scripts/repro: each entry at a tiny size (one seed, a few steps): the CSV files with their
columns, the figure, the Markdown section, and resumability (a second invocation skips the
finished runs). No learning is asserted."""

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("gymnasium")

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
sys.path.insert(0, str(SCRIPTS))

from repro import common, delay, heppo, paal  # noqa: E402

DOC = "# results\n\nhand-written\n<!-- repro:{0} -->\nOLD-SECTION\n<!-- /repro:{0} -->\ntail\n"


def _docs(tmp_path, name):
    path = tmp_path / "results.md"
    path.write_text(DOC.format(name))
    return path


def _check_outputs(out, name, summary_columns, capsys, rerun, runs):
    """The summary CSV has ``summary_columns`` and ``runs`` rows, the figure is a PNG; a rerun
    runs nothing and leaves the per-run files untouched."""
    rows = common.read_csv(out / f"{name}.csv")
    assert len(rows) == runs
    assert tuple(rows[0]) == tuple(summary_columns)
    assert (out / f"{name}.png").read_bytes()[:4] == b"\x89PNG"
    files = sorted((out / "runs").glob("*.csv"))
    assert len(files) == runs
    stamps = [f.stat().st_mtime_ns for f in files]
    capsys.readouterr()
    assert rerun() == 0
    text = capsys.readouterr().out
    assert f"{runs} of {runs} runs already finished" in text and ": 0 runs in" in text
    assert [f.stat().st_mtime_ns for f in files] == stamps
    return rows


def test_heppo_tiny(tmp_path, capsys):
    out, docs = tmp_path / "heppo", _docs(tmp_path, "heppo")
    argv = ["--envs", "CartPole-v1", "--experiments", "4", "--seeds", "1",
            "--steps", "CartPole-v1=1024", "--out", str(out), "--docs", str(docs)]
    assert heppo.main(argv) == 0
    rows = _check_outputs(out, "heppo", heppo.SUMMARY, capsys, lambda: heppo.main(argv), 1)
    assert [(int(r["experiment"]), r["reward_norm"], int(r["steps"])) for r in rows] == [
        (4, "scale", 1024)]
    curve = common.read_csv(sorted((out / "runs").glob("*.csv"))[0])
    assert tuple(curve[0])[:2] == heppo.CURVE and int(curve[-1]["step"]) <= 1024
    doc = docs.read_text()
    assert "OLD-SECTION" not in doc and "hand-written" in doc and doc.endswith("tail\n")
    assert "**reduced size**" in doc and "| CartPole-v1 | 4 |" in doc


def test_heppo_experiments_map_onto_the_driver_options():
    from sw.gae.driver import GaeDriver
    from sw.rl.ppo import AcceleratorAdvantages, CpuAdvantages

    assert all(isinstance(heppo.advantages(e, "scale", "gae_accel_n8"), CpuAdvantages)
               for e in (1, 2))
    drivers = {e: heppo.advantages(e, "scale", "gae_accel_n8") for e in (3, 4, 5)}
    assert all(isinstance(a, AcceleratorAdvantages) and isinstance(a.driver, GaeDriver)
               for a in drivers.values())
    assert drivers[3].driver.state_dict()["units"] == "caller"
    for e, mode in ((4, "block"), (5, "dynamic")):
        state = drivers[e].driver.state_dict()
        assert state["units"] == "standardized"
        assert state["pipeline"]["reward_standardization"] == mode


def test_paal_tiny(tmp_path, capsys):
    from sw.replay.spec import ReplayOp, SumTreeConfig, run_cycles

    out, docs = tmp_path / "paal", _docs(tmp_path, "paal")
    argv = ["--capacity", "4096", "--batch", "32", "--fanouts", "16", "2", "--rounds", "5",
            "--no-numba", "--out", str(out), "--docs", str(docs)]
    assert paal.main(argv) == 0
    rows = _check_outputs(out, "paal", paal.COLUMNS, capsys, lambda: paal.main(argv), 2)
    assert [int(r["fanout"]) for r in rows] == [2, 16]
    for r in rows:
        cfg = SumTreeConfig(fanout=int(r["fanout"]), capacity=4096)
        assert int(r["levels"]) == cfg.levels
        assert int(r["hw_sample_cycles"]) == run_cycles(cfg, ReplayOp.SAMPLE, 32)
        assert int(r["hw_update_cycles"]) == run_cycles(cfg, ReplayOp.UPDATE, 32)
        assert np.isnan(float(r["numba_sample_us"]))                # --no-numba
        assert min(float(r[f"{c}_{op}_us"]) for c in ("numpy", "sumtree")
                   for op in ("sample", "update")) > 0
    assert "| 16 | 3 |" in docs.read_text()
    assert paal.main(argv + ["--fanouts", "16", "2", "64", "--summarize-only"]) == 0
    assert "1 unfinished runs left out" in capsys.readouterr().out
    assert len(common.read_csv(out / "paal.csv")) == 2                  # K = 64 never ran
    assert "Rebuilt from the finished runs by" in docs.read_text()


def test_delay_tiny(tmp_path, capsys):
    out, docs = tmp_path / "delay", _docs(tmp_path, "delay")
    argv = ["--delays", "0", "2", "--seeds", "1", "--total-steps", "1030", "--out", str(out),
            "--docs", str(docs)]
    assert delay.main(argv) == 0
    rows = _check_outputs(out, "delay", delay.SUMMARY, capsys, lambda: delay.main(argv), 2)
    assert [(int(r["delay"]), r["learner"], int(r["grad_steps"])) for r in rows] == [
        (0, "golden", 30), (2, "golden", 30)]
    assert "| 2 |" in docs.read_text()


def test_bad_arguments_are_named(tmp_path, capsys):
    with pytest.raises(SystemExit):
        heppo.main(["--steps", "CartPole-v1=x", "--out", str(tmp_path)])
    assert "--steps must be ENV=N" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        paal.main(["--fanouts", "3", "--out", str(tmp_path)])
    assert "fanout must be a power of two" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        delay.main(["--delays", "-1", "--out", str(tmp_path)])
    assert "priority_delay must be a non-negative integer" in capsys.readouterr().err
    doc = tmp_path / "x.md"
    doc.write_text("no markers\n")
    with pytest.raises(ValueError, match="must contain the markers <!-- repro:heppo -->"):
        common.write_section(doc, "heppo", "text")
