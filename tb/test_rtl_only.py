"""An RTL-only install works: the generator needs none of the RL extras.

``pip install .`` (no extras) is what a user who only wants Verilog installs, and ``make
EXTRAS=`` what it runs (README, "Verilog only"): the base dependencies must not name torch,
gymnasium or matplotlib, and a subprocess in which those cannot be imported (a meta-path
blocker) emits a shipped module through the CLI and checks the docs' generated tables, the two
steps of ``make hdl``.
"""

import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: The packages of the ``rl`` extra: none of them may be needed to emit Verilog.
RL_ONLY = ("torch", "gymnasium", "matplotlib")

SCRIPT = textwrap.dedent('''
    import runpy, sys

    class Refuse:
        """Meta path finder: the RL extras cannot be imported."""
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in {blocked!r}:
                raise ImportError(f"{{name}} is blocked (an RTL-only install)")
            return None

    sys.meta_path.insert(0, Refuse())

    from rtl_gen.__main__ import main
    assert main(["gae-pe", "--k", "3", "--out", {out!r}, "--name", "gae_pe_k3"]) == 0
    sys.argv = ["update_docs.py", "--check"]
    try:
        runpy.run_path("scripts/update_docs.py", run_name="__main__")
    except SystemExit as e:
        assert not e.code, e.code
    assert not set({blocked!r}) & {{m.split(".")[0] for m in sys.modules}}
    print("ok")
''')


def test_base_dependencies_have_no_rl_packages():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {d.split("=")[0].split("<")[0].split(">")[0].split("[")[0].strip().lower()
             for d in project["dependencies"]}
    assert not names & set(RL_ONLY), names
    rl = {d.split("=")[0].strip() for d in project["optional-dependencies"]["rl"]}
    assert set(RL_ONLY) <= rl


def test_emit_without_rl_packages(tmp_path):
    script = SCRIPT.format(blocked=RL_ONLY, out=str(tmp_path))
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip().endswith("ok")
    assert (tmp_path / "gae_pe_k3.v").read_text() == (ROOT / "hdl/gae_pe_k3/gae_pe_k3.v").read_text()
