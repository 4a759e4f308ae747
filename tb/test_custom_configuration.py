"""docs/custom_configuration.md as a reader follows it: every ``python`` command of its ``sh``
blocks runs (in a temporary directory instead of ``build/``) and succeeds, the Vivado runs stop
with exit code 3 where Vivado is not installed, the ``python`` blocks run, the ``c`` block
compiles against the generated header and its register and memory accesses work on the golden
device. The commands marked "Yosys" run in the ``heavy`` tier only (``make test-heavy``: one to
two minutes of synthesis of the page's 8-ary tree; ``tb/test_estimate.py`` and
``tb/test_timing.py`` run the same two scripts on a PE in ``make test``)."""

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "custom_configuration.md"
MODULE = "replay_k8_4k"


def blocks(lang):
    return re.findall(rf"^```{lang}[ \t]*\n(.*?)^```[ \t]*$", PAGE.read_text(),
                      re.MULTILINE | re.DOTALL)


def commands():
    """``(argv, comment)`` of every command line of the page's ``sh`` blocks, in order."""
    out = []
    for block in blocks("sh"):
        for line in block.splitlines():
            cmd, _, comment = line.partition("#")
            if cmd.strip():
                out.append((shlex.split(cmd), comment.strip()))
    return out


def localize(text: str, tmp: Path) -> str:
    """``build/...`` of the page is ``tmp/...`` here."""
    return re.sub(r"(?<![\w/.])build/", f"{tmp}/", text)


def run_page(tmp: Path, *, yosys: bool):
    """Run the page's commands; those marked Yosys only with ``yosys``."""
    ran = []
    for argv, comment in commands():
        assert argv[0] == "python", f"the page's commands are python commands, not {argv}"
        if "Yosys" in comment and not yosys:
            continue
        vivado = "needs Vivado" in comment
        if vivado and shutil.which("vivado"):
            continue                      # it would build: not for the test suite
        args = [sys.executable] + [localize(a, tmp) for a in argv[1:]]
        res = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=600)
        want = 3 if vivado else 0
        assert res.returncode == want, (f"{shlex.join(argv)}: exit {res.returncode}, not "
                                        f"{want}\n{res.stdout}\n{res.stderr}")
        if vivado:
            assert "not found on PATH, so nothing was built" in res.stderr
        ran.append(argv)
    return ran


@pytest.fixture(scope="module")
def page_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("custom")
    return tmp, run_page(tmp, yosys=False)


def test_the_commands_run(page_run):
    tmp, ran = page_run
    gen = tmp / MODULE
    for suffix in (".v", ".json", "_regs.h", "_regs.json", "_regs.md"):
        assert (gen / f"{MODULE}{suffix}").is_file(), suffix
    man = json.loads((gen / f"{MODULE}.json").read_text())
    assert man["config"]["fanout"] == 8 and man["config"]["capacity"] == 4096
    assert (gen / "regs" / f"{MODULE}.xml").is_file()
    assert (tmp / "vivado" / MODULE / "package_ip.tcl").is_file()
    assert (tmp / "replay_kernel_k8" / "replay_kernel_k8_regs.h").is_file()
    regs = json.loads((gen / f"{MODULE}_regs.json").read_text())
    assert [r["name"] for r in regs["memory"]["regions"]][:2] == ["IDX_IN", "PRIO_IN"]
    assert any(a[:3] == ["python", "scripts/timing.py", "--manifest"] for a, _ in commands())


def test_the_python_blocks_run(page_run):
    tmp, _ = page_run
    (code,) = blocks("python")
    exec(compile(localize(code, tmp), f"{PAGE.name}, python block", "exec"), {})


def _macros(header: Path) -> dict:
    """The integer macros of a generated header."""
    out = {}
    for name, value in re.findall(r"^#define (\w+)\s+(\S+)", header.read_text(), re.MULTILINE):
        value = value.rstrip("uUlL")
        if re.fullmatch(r"0x[0-9a-fA-F]+|\d+", value):
            out[name] = int(value, 0)
    return out


def test_the_c_block_compiles_and_its_accesses_work(page_run):
    tmp, _ = page_run
    (code,) = blocks("c")
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is not None:
        res = subprocess.run([cc, "-std=c11", "-Wall", "-Werror", "-fsyntax-only",
                              "-I", str(tmp / MODULE), "-x", "c", "-"],
                             input=code, capture_output=True, text=True)
        assert res.returncode == 0, res.stderr
    # The block's accesses, word for word, on the golden device of the manifest's configuration.
    from sw.driver import ReplayDriver
    from sw.manifest import load_manifest
    from sw.replay.spec import ReplayOp

    gen = load_manifest(tmp / MODULE)
    dev = gen.block.load("device")(gen.config)
    m = _macros(tmp / MODULE / f"{MODULE}_regs.h")
    P = MODULE.upper()
    assert int(re.search(r"REPLAY_INSERT = (\d+)", code).group(1)) == ReplayOp.INSERT
    priority = [1.0, 0.5, 2.25]
    for i, p in enumerate(priority):
        raw = int(p * (1 << m[f"{P}_MEM_PRIO_IN_FRAC"]) + 0.5)
        dev.memory.write(m[f"{P}_MEM_PRIO_IN_OFFSET"] + i * m[f"{P}_MEM_PRIO_IN_WORD_BYTES"],
                         raw.to_bytes(8, "little"))
    dev.control.write32(m[f"{P}_BATCH_SIZE_OFFSET"], len(priority))
    dev.control.write32(m[f"{P}_OP_OFFSET"], ReplayOp.INSERT << m[f"{P}_OP_CODE_SHIFT"])
    dev.control.write32(m[f"{P}_CTRL_OFFSET"], m[f"{P}_CTRL_AP_START_MASK"])
    for _ in range(1000):
        if dev.control.read32(m[f"{P}_CTRL_OFFSET"]) & m[f"{P}_CTRL_AP_DONE_MASK"]:
            break
        dev.sleep(1e-6)
    else:
        raise AssertionError("AP_DONE never set")
    drv = ReplayDriver(dev, gen.config)
    assert drv.size == len(priority)
    assert np.allclose(drv.read([0, 1, 2]), priority)


@pytest.mark.heavy
def test_the_yosys_commands_run(tmp_path):
    """The whole page, synthesis included: the manifest's clock is estimated afterwards."""
    ran = run_page(tmp_path, yosys=True)
    assert any("scripts/timing.py" in a for argv in ran for a in argv)
    man = json.loads((tmp_path / MODULE / f"{MODULE}.json").read_text())
    assert man["clock_mhz"]["label"] in ("estimated", "target")
    assert (tmp_path / MODULE / f"{MODULE}_timing.json").is_file()


def test_the_page_is_linked_and_checked():
    index = (ROOT / "docs" / "index.md").read_text()
    assert "(custom_configuration.md)" in index
