"""The Vivado flow's package data: found in a checkout and in an installed (non-editable) wheel.

The generated scripts source ``rlk_common.tcl`` and the XDC files by path. In a checkout they
are ``rtl_gen/vivado/rlk_common.tcl`` and the top-level ``constraints/``; in a wheel,
``pyproject.toml`` maps ``constraints/`` onto the data-only package
``rtl_gen.vivado.constraints``. :func:`test_wheel_flow` builds the wheel, installs it into a
plain directory and generates the scripts from there, with nothing of the checkout on
``sys.path``; :func:`test_editable_install_flow` checks that ``pip install -e`` (``make``)
still works and uses the checkout's files. Both take a few seconds.
"""

import os
import re
import shutil
import site as sitelib
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from setuptools import find_packages

from rtl_gen.vivado import resources
from tclstub import needs_tclsh, run_stubbed

ROOT = Path(__file__).resolve().parents[2]
XDC = sorted(p.name for p in (ROOT / "constraints").glob("*.xdc"))
DATA_PACKAGE = "rtl_gen.vivado.constraints"


def test_package_list_complete():
    """pyproject.toml lists its packages (a find directive cannot add the data package): the
    list must be what ``find`` would return plus the data package, so no new package is left
    out of the wheel."""
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = find_packages(str(ROOT), include=["rtl_gen*", "sw*"])
    assert sorted(tool["packages"]) == sorted([*found, DATA_PACKAGE])
    assert tool["package-dir"] == {DATA_PACKAGE: "constraints"}
    assert tool["package-data"] == {"rtl_gen.vivado": ["*.tcl"], DATA_PACKAGE: ["*.xdc"]}


def test_data_in_checkout():
    assert resources.common_tcl() == ROOT / "rtl_gen" / "vivado" / "rlk_common.tcl"
    assert resources.constraints_dir() == ROOT / "constraints"
    assert resources.common_tcl().is_file() and XDC
    assert not (ROOT / "scripts" / "vivado" / "rlk_common.tcl").exists()    # one copy only


def test_data_name_checked():
    with pytest.raises(ValueError, match=r"name must be one of 'rlk_common.tcl', "
                                         r"'constraints', not 'zcu106.xdc'"):
        resources.data_path("zcu106.xdc")


def _project_copy(dst: Path) -> Path:
    """The checkout without what a wheel never holds. Building in place would write build/
    and *.egg-info into the checkout, and setuptools packs whatever an earlier build left in
    build/lib (a module since removed, say), so the wheel is built from a fresh copy."""
    top = {".git", ".venv", "build", "dist", "hdl", "tb", "sim_build", ".pytest_cache",
           ".hypothesis"}
    shutil.copytree(ROOT, dst, ignore=lambda d, names: [
        n for n in names if (Path(d) == ROOT and n in top) or n == "__pycache__"
        or n.endswith(".egg-info")])
    return dst


def _pip(*args, cwd):
    res = subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check",
                          "--no-input", *args], cwd=cwd, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    return res


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """``(site, wheel)``: the project's wheel and the directory it was installed into."""
    pytest.importorskip("pip")
    tmp = tmp_path_factory.mktemp("wheel")
    src = _project_copy(tmp / "src")
    _pip("wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w",
         str(tmp / "dist"), str(src), cwd=tmp)
    (wheel,) = (tmp / "dist").glob("rl_fpga_kernels-*.whl")
    site = tmp / "site"
    _pip("install", "--no-deps", "--no-index", "-q", "--target", str(site), str(wheel), cwd=tmp)
    return site, wheel


def test_wheel_contents(installed):
    _, wheel = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "rtl_gen/vivado/rlk_common.tcl" in names
    assert {f"rtl_gen/vivado/constraints/{x}" for x in XDC} <= names
    assert "rtl_gen/vivado/__main__.py" in names and "rtl_gen/vivado.py" not in names
    assert not any(n.startswith(("constraints/", "scripts/")) for n in names)


def test_wheel_flow(installed, tmp_path):
    """``python -m rtl_gen.vivado scripts`` from the installed wheel, run elsewhere: the
    scripts are written and point at the wheel's TCL and XDC files, which exist."""
    site, _ = installed
    env = {**os.environ, "PYTHONPATH": str(site)}
    out = tmp_path / "out"
    cmd = [sys.executable, "-c",
           "import runpy, rtl_gen.vivado as v; print('from', v.__file__, flush=True); "
           "runpy.run_module('rtl_gen.vivado', run_name='__main__')",
           "scripts", "--hdl", str(ROOT / "hdl"), "--out", str(out), "--accel", "gae_accel_n8"]
    res = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"from {site / 'rtl_gen' / 'vivado' / '__init__.py'}" in res.stdout
    d = out / "gae_accel_n8"
    assert {p.name for p in d.iterdir()} >= {"package_ip.tcl", "zcu106_bd.tcl", "ooc_timing.tcl"}
    text = (d / "ooc_timing.tcl").read_text()
    (constraints,) = re.findall(r"set constraints_dir .*\$script_dir (\S+)\]\]", text)
    (common,) = re.findall(r"source \[file join \$script_dir (\S+)\]", text)
    packaged = site / "rtl_gen" / "vivado"
    assert (d / constraints).resolve() == packaged / "constraints"
    assert (d / common).resolve() == packaged / "rlk_common.tcl"
    assert sorted(p.name for p in (packaged / "constraints").glob("*.xdc")) == XDC


@needs_tclsh
def test_wheel_scripts_run(installed, tmp_path):
    """The installed module's ``ooc_timing.tcl`` under the stub Vivado: it sources the
    packaged rlk_common.tcl and reads the packaged XDC file."""
    site, _ = installed
    out = tmp_path / "out"
    res = subprocess.run([sys.executable, "-m", "rtl_gen.vivado", "scripts", "--hdl",
                          str(ROOT / "hdl"), "--accel", "gae_accel_n8", "--out", str(out)],
                         cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(site)},
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    rec = run_stubbed(out / "gae_accel_n8" / "ooc_timing.tcl")
    (xdc,) = [a[-1] for a in rec.calls_of("read_xdc")]
    assert Path(xdc) == site / "rtl_gen" / "vivado" / "constraints" / "accel_ooc.xdc"


def test_editable_install_flow(tmp_path):
    """``pip install -e`` (what ``make`` runs) still works with the package-dir mapping, and
    the flow then finds constraints/ in the checkout (the mapping exists only in wheels).

    The venv reuses this interpreter's site-packages (pip, setuptools) through a ``.pth`` line,
    which adds the directory to ``sys.path`` without running the ``.pth`` files in it."""
    pytest.importorskip("pip")
    src = _project_copy(tmp_path / "src").resolve()
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    (site,) = (venv / "lib").glob("python3.*/site-packages")
    (site / "zz_parent_env.pth").write_text("\n".join(sitelib.getsitepackages()) + "\n")
    res = subprocess.run([str(python), "-m", "pip", "--disable-pip-version-check", "install",
                          "-q", "--no-deps", "--no-build-isolation", "--no-index", "-e",
                          str(src)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    res = subprocess.run([str(python), "-c",
                          "import rtl_gen.vivado as v, rtl_gen.vivado.resources as r; "
                          "print(v.__file__); print(r.constraints_dir()); print(r.common_tcl())"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.split() == [str(src / "rtl_gen" / "vivado" / "__init__.py"),
                                  str(src / "constraints"),
                                  str(src / "rtl_gen" / "vivado" / "rlk_common.tcl")]
    out = tmp_path / "out"
    res = subprocess.run([str(python), "-m", "rtl_gen.vivado", "scripts", "--hdl",
                          str(ROOT / "hdl" / "gae_accel_n8"), "--out", str(out)],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    text = (out / "gae_accel_n8" / "ooc_timing.tcl").read_text()
    (constraints,) = re.findall(r"set constraints_dir .*\$script_dir (\S+)\]\]", text)
    assert (out / "gae_accel_n8" / constraints).resolve() == src / "constraints"
