"""The Vivado flow's command line (python -m rtl_gen.vivado scripts|run) and ``make vivado``:
which accelerators ``--hdl`` finds in any generator output, the tools run in batch mode, and
the messages without Vivado or v++ (the shared description: vivado_cases.py).
"""

import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from rtl_gen import vivado as V
from tclstub import needs_tclsh, run_stubbed
from vivado_cases import ACCELS, BD, BD_MASTER, HDL, KERNELS, ROOT


# -- CLI and Makefile --------------------------------------------------------------------------
def test_cli_scripts(tmp_path, capsys):
    assert V.main(["scripts", "--hdl", str(HDL), "--out", str(tmp_path)]) == 0
    for a in ACCELS:
        assert (tmp_path / a / "package_ip.tcl").exists()
        assert (tmp_path / a / "zcu106_bd.tcl").exists() == (a in BD + BD_MASTER)
        assert (tmp_path / a / "kernel.xml").exists() == (a in KERNELS)
    assert "wrote" in capsys.readouterr().out


def test_cli_without_vivado(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert V.main(["run", "--hdl", str(HDL), "--board", "zcu106", "--out", str(tmp_path)]) == 3
    err = capsys.readouterr().err
    assert "vivado not found on PATH" in err
    assert f"-source {tmp_path / 'gae_accel_n8' / 'package_ip.tcl'}" in err
    assert f"-source {tmp_path / 'gae_accel_n8' / 'zcu106_bd.tcl'}" in err


def test_cli_alveo_without_tools(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert V.main(["run", "--hdl", str(HDL), "--board", "u250", "--out", str(tmp_path)]) == 3
    err = capsys.readouterr().err
    assert "v++ and vivado not found" in err and "DMA shell" in err
    assert "v++ --link --target hw --config" in err and "alveo_u250.cfg" in err


def test_cli_kernel_on_alveo_and_zcu106(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert V.main(["run", "--hdl", str(HDL), "--board", "u200", "--accel", "gae_kernel_n8",
                   "--out", str(tmp_path)]) == 3
    err = capsys.readouterr().err
    assert "v++ and vivado not found" in err and "DMA shell" not in err
    assert (tmp_path / "gae_kernel_n8" / "kernel.xml").exists()
    assert V.main(["run", "--hdl", str(HDL), "--board", "zcu106", "--accel", "gae_kernel_n8",
                   "--out", str(tmp_path)]) == 2
    assert "is a Vitis kernel (AXI master, no s_axi_mem): build it for u200 or u250" in \
        capsys.readouterr().err


def test_cli_bad_board(tmp_path, capsys):
    assert V.main(["run", "--hdl", str(HDL), "--board", "zcu102", "--out", str(tmp_path)]) == 2
    assert "BOARD must be one of zcu106, u200, u250, ooc" in capsys.readouterr().err


# -- --hdl: any generator output ---------------------------------------------------------------
def _copy_module(module, dst):
    """The files ``python -m rtl_gen <block> --out dst`` writes for ``module``, copied from
    hdl/ (the manifest, the Verilog, the register files)."""
    dst.mkdir(parents=True, exist_ok=True)
    for f in (HDL / module).iterdir():
        shutil.copy(f, dst / f.name)
    return dst


@pytest.mark.parametrize("layout", ["flat", "tree", "nested", "module_dir", "manifest"])
def test_cli_hdl_layouts(tmp_path, capsys, layout):
    """``--hdl`` takes a directory of manifests, a tree of them, one module's directory, or a
    manifest file; bare blocks (no register map) are skipped."""
    src = tmp_path / "gen"
    modules = ["gae_accel_n8", "gae_kernel_n8", "gae_pe_k2"]
    if layout == "flat":            # python -m rtl_gen <block> --out gen, three times
        for m in modules:
            _copy_module(m, src)
        hdl, want = src, {"gae_accel_n8", "gae_kernel_n8"}
    elif layout in ("tree", "nested"):
        for m in modules:
            _copy_module(m, src / ("gae/" if layout == "nested" else "") / m)
        hdl, want = src, {"gae_accel_n8", "gae_kernel_n8"}
    elif layout == "module_dir":
        hdl, want = HDL / "gae_kernel_n8", {"gae_kernel_n8"}
    else:
        hdl, want = HDL / "gae_accel_n8" / "gae_accel_n8.json", {"gae_accel_n8"}
    out = tmp_path / "out"
    assert V.main(["scripts", "--hdl", str(hdl), "--out", str(out)]) == 0
    assert {p.name for p in out.iterdir()} == want
    for m in want:
        assert (out / m / "package_ip.tcl").exists() and (out / m / "ooc_timing.tcl").exists()
    assert "wrote" in capsys.readouterr().out


@needs_tclsh
def test_cli_flat_output_runs(tmp_path):
    """Scripts of a flat generator output find its Verilog (hdl_dir is the manifest's
    directory): the out-of-context run under the stub Vivado reads it."""
    src = _copy_module("gae_accel_n8", tmp_path / "gen")
    assert V.main(["scripts", "--hdl", str(src), "--out", str(tmp_path / "out")]) == 0
    rec = run_stubbed(tmp_path / "out" / "gae_accel_n8" / "ooc_timing.tcl")
    assert [Path(p) for p in rec.calls_of("read_verilog")[0]] == [src / "gae_accel_n8.v"]


def test_cli_real_generator_output(tmp_path):
    """What the user ran: ``python -m rtl_gen gae-accel --out DIR``, then ``--hdl DIR``."""
    from rtl_gen.__main__ import main as rtl_gen_main

    gen = tmp_path / "gen"
    assert rtl_gen_main(["gae-accel", "--n-pe", "2", "--capacity", "64",
                         "--max-trajectories", "4", "--name", "tiny_gae",
                         "--out", str(gen)]) == 0
    assert V.main(["scripts", "--hdl", str(gen), "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "tiny_gae" / "zcu106_bd.tcl").exists()


@pytest.mark.parametrize("case,message", [
    ("missing", "--hdl '{hdl}': no such file or directory"),
    ("empty", "--hdl '{hdl}': no accelerator found"),
    ("block", "(gae_pe_k2: a block without a control interface)"),
    ("block_manifest", "(gae_pe_k2: a block without a control interface)"),
    ("not_manifest", "--hdl '{hdl}' is not a manifest written by rtl_gen"),
    ("twice", "--hdl '{hdl}': module gae_accel_n8 is there twice"),
    ("bad_json", "gae_accel_n8.json: not valid JSON"),
])
def test_cli_hdl_nothing_found(tmp_path, capsys, case, message):
    """Nothing to generate from is an error (exit 2) naming --hdl, never a silent success."""
    hdl = tmp_path / "gen"
    if case == "empty":
        hdl.mkdir()
        (hdl / "notes.json").write_text("{}")
    elif case == "block":
        hdl = HDL / "gae_pe_k2"
    elif case == "block_manifest":
        hdl = HDL / "gae_pe_k2" / "gae_pe_k2.json"
    elif case == "not_manifest":
        hdl = HDL / "gae_accel_n8" / "gae_accel_n8_regs.json"
    elif case == "twice":
        _copy_module("gae_accel_n8", hdl / "a")
        _copy_module("gae_accel_n8", hdl / "b")
    elif case == "bad_json":
        _copy_module("gae_accel_n8", hdl)
        (hdl / "gae_accel_n8.json").write_text("{")
    out = tmp_path / "out"
    assert V.main(["scripts", "--hdl", str(hdl), "--out", str(out)]) == 2
    assert message.format(hdl=hdl) in capsys.readouterr().err
    assert not out.exists()


def test_cli_accel_not_at_hdl(tmp_path, capsys):
    assert V.main(["scripts", "--hdl", str(HDL / "gae_accel_n8"), "--accel", "gae_kernel_n8",
                   "--out", str(tmp_path)]) == 2
    assert (f"--accel 'gae_kernel_n8' is not an accelerator at --hdl "
            f"'{HDL / 'gae_accel_n8'}' (there: gae_accel_n8)") in capsys.readouterr().err


def test_cli_run_picks_the_only_accelerator(tmp_path, monkeypatch, capsys):
    """``run`` without --accel: the only accelerator at --hdl; of several, gae_accel_n8; else
    an error asking for --accel."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    manifest = HDL / "replay_accel_k16" / "replay_accel_k16.json"
    assert V.main(["run", "--board", "ooc", "--hdl", str(manifest),
                   "--out", str(tmp_path / "out")]) == 3
    assert (tmp_path / "out" / "replay_accel_k16" / "ooc_timing.tcl").exists()
    assert V.main(["run", "--board", "ooc", "--hdl", str(HDL),
                   "--out", str(tmp_path / "out")]) == 3
    assert (tmp_path / "out" / "gae_accel_n8" / "ooc_timing.tcl").exists()
    src = tmp_path / "gen"
    for m in ("replay_accel_k16", "learner_cartpole_s4"):
        _copy_module(m, src)
    capsys.readouterr()
    assert V.main(["run", "--board", "ooc", "--hdl", str(src),
                   "--out", str(tmp_path / "out")]) == 2
    assert "holds 2 accelerators (learner_cartpole_s4, replay_accel_k16): name one with " \
        "--accel" in capsys.readouterr().err


def test_find_manifests_and_accelerators(tmp_path):
    assert V.find_accelerators(HDL) == ACCELS
    manifests = V.find_manifests(HDL)
    assert set(ACCELS) < set(manifests) and "gae_pe_k2" in manifests
    assert manifests["gae_accel_n8"] == HDL / "gae_accel_n8" / "gae_accel_n8.json"
    assert V.find_accelerators(HDL / "gae_pe_k2") == []
    with pytest.raises(FileNotFoundError, match=r"^path '.*missing': no such file or dir"):
        V.find_manifests(tmp_path / "missing")
    with pytest.raises(ValueError, match=r"^path '.*_regs.json' is not a manifest"):
        V.find_manifests(HDL / "gae_accel_n8" / "gae_accel_n8_regs.json")


def test_accelerator_load_paths(tmp_path):
    by_dir = V.Accelerator.load(HDL / "gae_accel_n8")
    by_file = V.Accelerator.load(HDL / "gae_accel_n8" / "gae_accel_n8.json")
    assert by_dir.module == by_file.module == "gae_accel_n8"
    assert by_dir.hdl_dir == by_file.hdl_dir == HDL / "gae_accel_n8"
    with pytest.raises(FileNotFoundError, match=r"^path '.*': no manifest gen.json in that "):
        V.Accelerator.load(_copy_module("gae_accel_n8", tmp_path / "gen"))
    with pytest.raises(ValueError, match="lists no register map"):
        V.Accelerator.load(HDL / "gae_pe_k2")


def _fake_tool(bin_dir, name, log):
    bin_dir.mkdir(exist_ok=True)
    tool = bin_dir / name
    tool.write_text(f"#!/bin/sh\necho {name} \"$@\" >> {log}\n")
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)


@pytest.mark.parametrize("board,tools,steps", [
    ("zcu106", ["vivado"], ["package_ip.tcl", "zcu106_bd.tcl"]),
    ("u200", ["vivado", "v++"], ["alveo_xo.tcl", "alveo_u200.cfg"]),
    ("ooc", ["vivado"], ["ooc_timing.tcl"]),
])
def test_cli_runs_tools_in_batch_mode(tmp_path, monkeypatch, board, tools, steps):
    log = tmp_path / "calls.log"
    for t in tools:
        _fake_tool(tmp_path / "bin", t, log)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    assert V.main(["run", "--hdl", str(HDL), "--board", board, "--out", str(tmp_path / "out"),
                   "--part", "xcu250-figd2104-2L-e"]) == 0
    calls = log.read_text().splitlines()
    assert len(calls) == len(steps)
    for call, step in zip(calls, steps):
        assert step in call
        if call.startswith("vivado"):
            assert call.startswith("vivado -mode batch")
    if board == "ooc":
        assert "-tclargs xcu250-figd2104-2L-e" in calls[0]


def test_make_vivado_without_vivado(tmp_path):
    make = shutil.which("make")
    if make is None:
        pytest.skip("make not on PATH")
    stamp = subprocess.run([make, "-s", "--no-print-directory",
                            "--eval=rlk-print-stamp: ; @echo $(STAMP)", "rlk-print-stamp"],
                           cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    if subprocess.run([make, "-q", stamp], cwd=ROOT).returncode != 0:
        pytest.skip("the .venv stamp is out of date; `make` would reinstall")
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path)}
    res = subprocess.run([make, "-s", "vivado", "BOARD=zcu106", f"VIVADO_OUT={tmp_path}"],
                         cwd=ROOT, env=env, capture_output=True, text=True)
    assert res.returncode != 0
    assert "vivado not found on PATH" in res.stderr and "vivado -mode batch" in res.stderr
    assert (tmp_path / "gae_accel_n8" / "zcu106_bd.tcl").exists()
    res = subprocess.run([make, "-s", "vivado"], cwd=ROOT, env=env, capture_output=True,
                         text=True)
    assert res.returncode != 0 and "set BOARD=" in res.stderr
