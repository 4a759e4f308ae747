"""The shipped Verilog in hdl/: up to date with the generators and lint-clean."""

import filecmp
import subprocess
from pathlib import Path

import pytest

from sw.registry import SHIPPED
from rtl_gen.emit import emit
from rtl_gen.emit_record import recorded, source_digest

ROOT = Path(__file__).resolve().parent.parent
HDL = ROOT / "hdl"
WAIVERS = ROOT / "scripts" / "verilator_waivers.vlt"
RECORD = ROOT / "build" / "hdl_record.json"       # written by `make` (python -m rtl_gen shipped)


@pytest.fixture(scope="module")
def digest():
    return source_digest()


@pytest.mark.parametrize("module,block,params", SHIPPED, ids=[s[0] for s in SHIPPED])
def test_hdl_is_regenerated(tmp_path, module, block, params, digest):
    """hdl/<module>/ is what the generators emit now: emitted again and compared, unless
    ``make``'s record (rtl_gen/emit_record.py) shows that these very sources emitted exactly
    these files."""
    if recorded(RECORD, HDL, module, block, params, digest):
        return
    emit(block, params, tmp_path, module=module)
    for suffix in (".v", ".json"):
        shipped = HDL / module / f"{module}{suffix}"
        assert shipped.exists(), f"{shipped} missing: run `make`"
        assert filecmp.cmp(tmp_path / f"{module}{suffix}", shipped, shallow=False), \
            f"{shipped} is stale: run `make` and commit hdl/"


@pytest.mark.parametrize("module", [s[0] for s in SHIPPED])
def test_hdl_lint_clean(module):
    res = subprocess.run(["verilator", "--lint-only", "-Wall", str(WAIVERS),
                          str(HDL / module / f"{module}.v")], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


def test_shipped_table_is_generated():
    """hdl/shipped.md (written by `python -m rtl_gen shipped` next to the Verilog) lists every
    shipped module. The docs' tables are checked by tb/test_docs.py."""
    import json

    from rtl_gen.emit import shipped_table

    manifests = [json.loads((HDL / m / f"{m}.json").read_text()) for m, _, _ in SHIPPED]
    assert (HDL / "shipped.md").read_text() == shipped_table(manifests), \
        "hdl/shipped.md is stale: run `make` and commit hdl/"
