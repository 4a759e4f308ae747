"""The generator CLI: emits Verilog and a manifest, rejects bad parameters with clear errors."""

import json
import subprocess
import sys

import pytest

from rtl_gen.__main__ import main
from sw.gae.spec import GaePeConfig


def test_emit_with_flags(tmp_path, capsys):
    assert main(["gae-pe", "--k", "3", "--mode", "interleaved", "--out", str(tmp_path)]) == 0
    manifest = json.loads((tmp_path / "gae_pe.json").read_text())
    assert manifest["config"]["k"] == 3 and manifest["config"]["mode"] == "interleaved"
    assert manifest["latency"]["cycles"] == GaePeConfig(k=3, mode="interleaved").latency == 10
    text = (tmp_path / "gae_pe.v").read_text()
    assert "module gae_pe(" in text
    ports = {p["name"]: p for p in manifest["ports"]}
    assert ports["i__payload"]["fields"]["reward"] == {"offset": 0, "width": 32, "signed": True}
    assert ports["gamma"]["width"] == 17 and ports["o__valid"]["dir"] == "output"
    assert "latency 10 cycles" in capsys.readouterr().out


def test_emit_from_config_file_with_override(tmp_path):
    cfg = tmp_path / "pe.json"
    cfg.write_text(json.dumps({"k": 4, "data_width": 24, "data_frac": 8}))
    assert main(["gae-pe", "--config", str(cfg), "--k", "2", "--name", "my_pe",
                 "--out", str(tmp_path / "o")]) == 0
    manifest = json.loads((tmp_path / "o" / "my_pe.json").read_text())
    assert manifest["config"]["k"] == 2 and manifest["config"]["data_width"] == 24
    assert "module my_pe(" in (tmp_path / "o" / "my_pe.v").read_text()


@pytest.mark.parametrize("args,message", [
    (["--k", "0"], "error: k must be an integer in 1..16, not 0"),
    (["--k", "two"], "error: k must be an integer, not 'two'"),
    (["--data-width", "64"], "error: data_width must be an integer in 8..32, not 64"),
    (["--mode", "fast"], "error: mode must be one of lookahead, interleaved, not 'fast'"),
])
def test_bad_parameters_exit_nonzero_naming_the_parameter(tmp_path, capsys, args, message):
    assert main(["gae-pe", *args, "--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_unknown_parameter_in_config_file(tmp_path, capsys):
    cfg = tmp_path / "pe.json"
    cfg.write_text(json.dumps({"kk": 3}))
    assert main(["gae-pe", "--config", str(cfg), "--out", str(tmp_path)]) == 2
    assert "unknown GAE PE parameter(s): kk" in capsys.readouterr().err


def test_module_entry_point_and_list():
    out = subprocess.run([sys.executable, "-m", "rtl_gen", "list"], capture_output=True,
                         text=True, check=True).stdout
    assert "gae-pe" in out and "--coef-width" in out


@pytest.mark.parametrize("name", ["bad name", "../escape", "a/b", "9lives", "module", "x-y", ""])
def test_bad_module_name_is_refused_before_writing(tmp_path, capsys, name):
    out = tmp_path / "out"
    assert main(["gae-pe", "--name", name, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "error: name must be a Verilog identifier" in err and repr(name) in err
    assert not out.exists() and [p.name for p in tmp_path.iterdir()] == []


def test_emit_refuses_a_bad_module_name_too(tmp_path):
    from rtl_gen.emit import emit

    with pytest.raises(ValueError, match=r"module must be a Verilog identifier .*'\.\./x'"):
        emit("gae-pe", {}, tmp_path, module="../x")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("text,message", [
    ("{k: 3}", "must be JSON"),
    ("[1, 2]", "must hold a JSON object of parameters, not a list"),
    ('{"kk": 3}', "unknown GAE PE parameter(s): kk"),
])
def test_config_file_errors_name_the_file(tmp_path, capsys, text, message):
    cfg = tmp_path / "my_pe.json"
    cfg.write_text(text)
    assert main(["gae-pe", "--config", str(cfg), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert f"error: --config {cfg}: " in err and message in err, err
    assert not (tmp_path / "o").exists()


def test_missing_config_file_is_named(tmp_path, capsys):
    missing = tmp_path / "nope.json"
    assert main(["gae-pe", "--config", str(missing), "--out", str(tmp_path / "o")]) == 2
    assert f"error: --config {missing}: " in capsys.readouterr().err


@pytest.mark.parametrize("block,expected", [
    ("gae-pe", ["--k V an integer in 1..16; default 2",
                "--mode V one of lookahead, interleaved; default 'lookahead'"]),
    ("replay-accel", ["an integer in 1..1048576", "a power of two in 2..64", "default 16"]),
    ("learner", ["one of dqn, mse", "default 'dqn'"]),
])
def test_block_help_shows_defaults_and_ranges(capsys, block, expected):
    with pytest.raises(SystemExit) as e:
        main([block, "--help"])
    assert e.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    for text in expected:
        assert text in out, (text, out)


@pytest.mark.parametrize("command", [["gae-pe", "--k", "3"], ["regs", "--module", "gae_accel_n8"]])
def test_an_out_that_is_a_file_is_named(tmp_path, capsys, command):
    """A file where --out's directory would go (or above it) is refused, naming --out, before
    anything is elaborated or written."""
    existing = tmp_path / "existing"
    existing.write_text("mine")
    assert main([*command, "--out", str(existing)]) == 2
    assert (f"error: --out {existing}: must be a directory, and a file of that name exists"
            in capsys.readouterr().err)
    assert main([*command, "--out", str(existing / "sub")]) == 2
    assert (f"error: --out {existing / 'sub'}: cannot make the directory, {existing} is a file"
            in capsys.readouterr().err)
    assert existing.read_text() == "mine" and sorted(tmp_path.iterdir()) == [existing]


def test_an_out_file_is_named_by_the_module_entry_point(tmp_path):
    (tmp_path / "existing").write_text("")
    run = subprocess.run([sys.executable, "-m", "rtl_gen", "gae-pe", "--out", "existing"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert run.returncode == 2
    assert run.stderr == "error: --out existing: must be a directory, and a file of that name " \
                         "exists\n"
