"""Generated configurations read back from their manifests (sw.manifest): what
``scripts/timing.py --manifest``, ``python -m rtl_gen regs --manifest`` and
``sw.driver.open_driver`` take. No Amaranth: the manifests are the shipped ones, copied."""

import json
import shutil
from pathlib import Path

import pytest

from sw.manifest import load_manifest
from sw.registry import SHIPPED, shipped_config

HDL = Path(__file__).resolve().parents[1] / "hdl"


@pytest.mark.parametrize("module", [m for m, _, _ in SHIPPED])
def test_shipped_manifests_are_their_configurations(module):
    gen = load_manifest(HDL / module)
    block, config = shipped_config(module)
    assert (gen.module, gen.block, gen.config) == (module, block, config)
    assert gen.verilog == HDL / module / f"{module}.v" and gen.verilog.is_file()
    assert load_manifest(HDL / module / f"{module}.json") == gen
    if block.regmap is None:
        assert gen.file("json") is None
    else:
        assert gen.file("c_header") == HDL / module / f"{module}_regs.h"


def test_a_directory_of_another_name_with_one_manifest(tmp_path):
    for name in ("replay_accel_k16.json", "replay_accel_k16.v"):
        shutil.copy(HDL / "replay_accel_k16" / name, tmp_path / name)
    assert load_manifest(tmp_path).module == "replay_accel_k16"
    for name in ("gae_pe_k2.json", "gae_pe_k2.v"):
        shutil.copy(HDL / "gae_pe_k2" / name, tmp_path / name)
    with pytest.raises(ValueError, match=r"^manifest '.*' holds 2 manifests \(gae_pe_k2.json, "
                                         r"replay_accel_k16.json\): name one of them$"):
        load_manifest(tmp_path)
    assert load_manifest(tmp_path / "gae_pe_k2.json").block.name == "gae-pe"


def test_bad_paths_are_errors_naming_the_argument(tmp_path):
    with pytest.raises(ValueError, match=r"^--manifest must be a manifest <module>.json or the "
                                         r"directory .*no such file or directory"):
        load_manifest(tmp_path / "nope", argument="--manifest")
    with pytest.raises(ValueError, match="a directory without a <module>.json next to"):
        load_manifest(tmp_path)
    with pytest.raises(ValueError, match=r"^manifest must be the path of a manifest"):
        load_manifest(None)
    (tmp_path / "x.json").write_text("not json")
    with pytest.raises(ValueError, match="not a file that is not JSON"):
        load_manifest(tmp_path / "x.json")
    (tmp_path / "x.json").write_text('{"module": "x"}')
    with pytest.raises(ValueError, match="must be a manifest written by python -m rtl_gen"):
        load_manifest(tmp_path / "x.json")
    man = json.loads((HDL / "replay_accel_k16" / "replay_accel_k16.json").read_text())
    (tmp_path / "x.json").write_text(json.dumps({**man, "block": "warp-drive"}))
    with pytest.raises(ValueError, match=r"block must be one of gae-pe, .*not 'warp-drive'"):
        load_manifest(tmp_path / "x.json")
    (tmp_path / "x.json").write_text(json.dumps({**man, "config": {"fanout": 3}}))
    with pytest.raises(ValueError, match=r"x.json': fanout must be a power of two"):
        load_manifest(tmp_path / "x.json")
