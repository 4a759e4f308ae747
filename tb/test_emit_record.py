"""The emission record (rtl_gen/emit_record.py) that lets tb/test_hdl.py skip emitting a shipped
module again: it vouches for a module only while the sources, the parameters and every file are
those of the recorded emission."""

import json

import pytest

from rtl_gen.emit import emit
from rtl_gen.emit_record import file_digests, recorded, source_digest, write_record

MODULE, BLOCK, PARAMS = "pe_rec", "gae-pe", {"k": 2}


@pytest.fixture
def emitted(tmp_path):
    out = tmp_path / "hdl"
    emit(BLOCK, PARAMS, out / MODULE, module=MODULE)
    digest = source_digest()
    record = tmp_path / "record.json"
    write_record(record, out, [(MODULE, BLOCK, PARAMS)], digest)
    return record, out, digest


def test_the_record_vouches_for_the_emitted_files(emitted):
    record, out, digest = emitted
    assert recorded(record, out, MODULE, BLOCK, PARAMS, digest)
    files = json.loads(record.read_text())["modules"][MODULE]["files"]
    assert {f"{MODULE}.v", f"{MODULE}.json"} <= set(files)
    assert files == file_digests(out / MODULE)


def test_any_change_voids_the_record(emitted, tmp_path):
    record, out, digest = emitted
    assert not recorded(record, out, MODULE, BLOCK, PARAMS, "0" * 64)       # other sources
    assert not recorded(record, out, MODULE, BLOCK, {"k": 3}, digest)       # other parameters
    assert not recorded(record, out, MODULE, "sumtree", PARAMS, digest)     # other block
    assert not recorded(record, out, "other", BLOCK, PARAMS, digest)        # not recorded
    assert not recorded(tmp_path / "none.json", out, MODULE, BLOCK, PARAMS, digest)
    verilog = out / MODULE / f"{MODULE}.v"
    verilog.write_text(verilog.read_text() + "// edited\n")                 # a file changed
    assert not recorded(record, out, MODULE, BLOCK, PARAMS, digest)
    record.write_text("{not json")
    assert not recorded(record, out, MODULE, BLOCK, PARAMS, digest)


def test_the_digest_covers_sources_and_timing(tmp_path):
    tree = tmp_path / "pkg"
    (tree / "sub").mkdir(parents=True)
    (tree / "a.py").write_text("x = 1\n")
    (tree / "sub" / "b.py").write_text("y = 2\n")
    timing = tmp_path / "timing.json"
    timing.write_text("{}")
    base = source_digest((tree,), timing)
    assert source_digest((tree,), timing) == base
    (tree / "sub" / "b.py").write_text("y = 3\n")
    edited = source_digest((tree,), timing)
    assert edited != base
    (tree / "sub" / "b.py").rename(tree / "b.py")                           # moved
    assert source_digest((tree,), timing) != edited
    (tree / "b.py").rename(tree / "sub" / "b.py")
    assert source_digest((tree,), timing) == edited
    timing.write_text('{"m": 1}')
    assert source_digest((tree,), timing) != edited
    before = source_digest((tree,), timing)
    (tree / "notes.txt").write_text("not a source")                         # not read
    assert source_digest((tree,), timing) == before
