"""What a user of the RL programs reads: a device spec that cannot be opened ends with exit
status 2 and a message naming the spec and what is missing (never a traceback); ``--plot``
reports the file it wrote; warnings come once, counted, after the progress bar; the plot's
title and the summary say what ran."""

import subprocess
import sys
import warnings

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("gymnasium")

from sw.rl import dqn, ppo  # noqa: E402
from sw.rl.devices import DeviceSpecError, check_files  # noqa: E402
from sw.rl.plot import plot_path  # noqa: E402


def _cli(args, cwd):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd)


@pytest.mark.parametrize("args,message", [
    (["-m", "sw.rl.ppo", "--backend", "accel", "--device", "pynq:missing.bit"],
     "--device: device spec 'pynq:missing.bit': the bitfile 'missing.bit' does not exist"),
    (["-m", "sw.rl.dqn", "--backend", "accel", "--learner-device", "xrt:nofile.xclbin"],
     "--learner-device: device spec 'xrt:nofile.xclbin': the xclbin 'nofile.xclbin' does not "
     "exist"),
    (["-m", "sw.dist.dqn", "--learner-device", "xrt:nofile.xclbin", "--quiet"],
     "--learner-device: device spec 'xrt:nofile.xclbin': the xclbin 'nofile.xclbin' does not "
     "exist"),
])
def test_a_missing_file_exits_2_naming_the_spec(tmp_path, args, message):
    run = _cli(args, tmp_path)
    assert run.returncode == 2, run.stderr
    assert message in " ".join(run.stderr.split())
    assert "Traceback" not in run.stderr and run.stdout == ""


def _refused(main, argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    out = capsys.readouterr()
    assert "mean return" not in out.out
    return " ".join(out.err.split())


@pytest.mark.parametrize("argv,message", [
    (["--backend", "accel", "--replay-device", "pynq:r.bit"],
     "--replay-device: device spec 'pynq:r.bit': the block design's 'r.hwh', which PYNQ reads "
     "beside the bitfile, does not exist"),
    (["--backend", "both", "--device", "trainer:pynq:missing.bit"],
     "--device: device spec 'trainer:pynq:missing.bit': the bitfile 'missing.bit' does not "
     "exist"),
    (["--backend", "accel", "--device", "trainer:xrt:missing.xclbin"],
     "--device: device spec 'trainer:xrt:missing.xclbin': the xclbin 'missing.xclbin' does "
     "not exist"),
    (["--backend", "accel", "--learner-device", "xrt:."],
     "--learner-device: device spec 'xrt:.': the xclbin '.' is not a file"),
])
def test_dqn_names_every_missing_file(tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "r.bit").write_bytes(b"")
    assert message in _refused(dqn.main, argv, capsys)


def test_a_cpu_run_does_not_open_the_device_specs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert dqn.main(["--backend", "cpu", "--total-steps", "1010",
                     "--learner-device", "xrt:nofile.xclbin"]) == 0
    assert "10 gradient steps" in capsys.readouterr().out


def test_a_missing_package_exits_2_naming_the_spec_and_the_package(tmp_path, monkeypatch,
                                                                   capsys):
    monkeypatch.chdir(tmp_path)
    for name in ("k.xclbin", "g.bit", "g.hwh"):
        (tmp_path / name).write_bytes(b"")
    monkeypatch.setitem(sys.modules, "pyxrt", None)      # not installed, wherever this runs
    monkeypatch.setitem(sys.modules, "pynq", None)
    err = _refused(dqn.main, ["--backend", "accel", "--learner-device", "xrt:k.xclbin"], capsys)
    assert ("--learner-device: device spec 'xrt:k.xclbin': needs the 'pyxrt' package, which "
            "is not installed here (XRT's Python binding") in err
    err = _refused(dqn.main, ["--backend", "accel", "--device", "trainer:xrt:k.xclbin"], capsys)
    assert "--device: device spec 'trainer:xrt:k.xclbin': needs the 'pyxrt' package" in err
    err = _refused(ppo.main, ["--backend", "accel", "--device", "pynq:g.bit"], capsys)
    assert "--device: device spec 'pynq:g.bit': needs the 'pynq' package, which is not " \
           "installed here" in err


def test_a_board_the_backend_cannot_open_is_a_spec_error(tmp_path, monkeypatch, capsys):
    import sw.driver

    def no_board(*args, **kwargs):
        raise RuntimeError("No Devices Found")

    monkeypatch.chdir(tmp_path)
    (tmp_path / "g.bit").write_bytes(b"")
    (tmp_path / "g.hwh").write_bytes(b"")
    monkeypatch.setattr(sw.driver, "PynqDevice", no_board)
    err = _refused(ppo.main, ["--backend", "accel", "--device", "pynq:g.bit"], capsys)
    assert "--device: device spec 'pynq:g.bit': PYNQ could not open it: No Devices Found" in err


def test_check_files_reads_through_trainer_specs_and_ignores_models(tmp_path):
    assert check_files("golden") == ("golden", None, None)
    assert check_files("sim:gae_accel_n8") == ("sim", None, "gae_accel_n8")
    with pytest.raises(DeviceSpecError) as e:
        check_files(f"trainer:xrt:{tmp_path / 'no.xclbin'}:k")
    assert e.value.spec == f"trainer:xrt:{tmp_path / 'no.xclbin'}:k"
    assert "does not exist" in e.value.problem
    (tmp_path / "t.xclbin").write_bytes(b"")
    assert check_files(f"trainer:xrt:{tmp_path / 't.xclbin'}") == (
        "xrt", str(tmp_path / "t.xclbin"), None)


# -- --plot -----------------------------------------------------------------------------------
def test_plot_path_is_the_file_written(tmp_path):
    assert plot_path(tmp_path / "curve", "ppo.png") == tmp_path / "curve.png"
    assert plot_path(tmp_path / "curve.v2", "ppo.png") == tmp_path / "curve.v2.png"
    assert plot_path(tmp_path / "curve.pdf", "ppo.png") == tmp_path / "curve.pdf"
    assert plot_path(tmp_path / "curve.SVG", "ppo.png") == tmp_path / "curve.SVG"
    assert plot_path(tmp_path, "ppo.png") == tmp_path / "ppo.png"
    assert plot_path(f"{tmp_path}/new/", "ppo.png") == tmp_path / "new" / "ppo.png"
    assert plot_path(tmp_path / "a" / "b", "x.png") == tmp_path / "a" / "b.png"
    assert not (tmp_path / "new").exists() and not (tmp_path / "a").exists()
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match=r"--plot \S+/file/c: \S+/file is a file, not a "
                                         r"directory"):
        plot_path(tmp_path / "file" / "c", "x.png")
    (tmp_path / "d.png").mkdir()
    with pytest.raises(ValueError, match=r"--plot \S+/d: \S+/d.png is a directory"):
        plot_path(tmp_path / "d", "x.png")
    with pytest.raises(ValueError, match="--plot must name a file or a directory, not ''"):
        plot_path("", "x.png")


@pytest.mark.parametrize("given,written", [("curves", "curves.png"), ("out/", "out/ppo.png"),
                                           ("c.pdf", "c.pdf")])
def test_ppo_reports_the_plot_it_wrote(tmp_path, monkeypatch, capsys, given, written):
    monkeypatch.chdir(tmp_path)
    assert ppo.main(["--backend", "cpu", "--total-steps", "1024", "--plot", given]) == 0
    out = capsys.readouterr().out
    assert f"wrote {written}\n" in out and (tmp_path / written).stat().st_size > 5_000
    assert "cpu-float64: final return" in out and "(one seed)" in out and "1 seeds" not in out


def test_a_plot_that_cannot_be_written_is_refused_up_front(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "f").write_text("")
    monkeypatch.setattr(ppo, "train", lambda *a, **k: pytest.fail("trained"))
    assert "--plot f/x: f is a file, not a directory" in _refused(
        ppo.main, ["--backend", "cpu", "--plot", "f/x"], capsys)


def test_ppo_title_names_the_backends_that_ran(monkeypatch, tmp_path):
    import sw.rl.plot
    titles = []
    monkeypatch.setattr(sw.rl.plot, "plot_returns",
                        lambda results, path, *, title, **kw: titles.append(title))
    cfg = {"env_id": "CartPole-v1"}
    acc = ppo.TrainResult("gae_accel_n8 (golden model)", cfg)
    cpu = ppo.TrainResult("cpu-float64", cfg)
    ppo.plot_curves([acc, acc], tmp_path / "a.png")
    ppo.plot_curves([acc, cpu, cpu], tmp_path / "b.png")
    assert titles == ["PPO on CartPole-v1: GAE on gae_accel_n8 (golden model)",
                      "PPO on CartPole-v1: GAE on gae_accel_n8 (golden model) vs cpu-float64"]


# -- warnings -----------------------------------------------------------------------------------
def test_ppo_prints_the_driver_warnings_once_after_the_bar(monkeypatch, capsys):
    """Every batch warns (as the GAE driver's ClippingWarning can): one line after the run
    counts them, none is printed on its own."""
    from sw.gae.driver import ClippingWarning

    class Warned(ppo.CpuAdvantages):
        def __call__(self, *args):
            warnings.warn("GAE input clipping: 2 % of the values clipped", ClippingWarning)
            return super().__call__(*args)

    def accelerator(*args, **kwargs):
        adv = Warned()
        adv.name = "warned"
        return adv

    monkeypatch.setattr(ppo, "accelerator", accelerator)
    assert ppo.main(["--backend", "accel", "--total-steps", "3072"]) == 0
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "Warning" in line]
    assert lines == ["warning during warned seed 0: ClippingWarning, 3 times; the first: GAE "
                     "input clipping: 2 % of the values clipped"], err
    assert err.index("100%") < err.index("warning during")     # after the bar's last line


@pytest.mark.slow
def test_ppo_defaults_print_no_warning_into_the_bar(tmp_path):
    """The default PPO run on the golden accelerator (about 15 s of training), its stderr a
    pipe: plain lines, and whatever the driver warns comes as one summary line per kind."""
    run = _cli(["-m", "sw.rl.ppo", "--backend", "accel", "--plot", "ppo"], tmp_path)
    assert run.returncode == 0, run.stderr
    assert "\r" not in run.stderr
    noted = [line for line in run.stderr.splitlines() if "Warning" in line]
    assert all(line.startswith("warning during gae_accel_n8 (golden model) seed 0: ")
               for line in noted), run.stderr
    assert len(noted) == len({line.split(":")[1] for line in noted})      # once per kind
    assert "wrote ppo.png" in run.stdout and (tmp_path / "ppo.png").exists()
    final = float(run.stdout.split("final return ")[1].split()[0])
    assert np.isfinite(final)
