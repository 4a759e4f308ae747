"""Tests of ``scripts/rtl_coverage.py`` (``make coverage``, docs/testing.md) on hand-written
Verilator coverage files: parsing, merging per configuration, the summary, the annotation and
the lcov file. No Verilator build; fast."""

import importlib.util
import json
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "rtl_coverage.py"


def _load():
    spec = importlib.util.spec_from_file_location("coverage_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("coverage_script", module)
    spec.loader.exec_module(module)
    return module


cov = _load()

VERILOG = """module top(input clk, input a, output reg q);
  always @(posedge clk)
    if (a)
      q <= 1'b1;
    else
      q <= 1'b0;
endmodule
"""


def _point(src, **fields):
    f = {"f": str(src), **fields}
    return "".join(f"\x01{k}\x02{v}" for k, v in f.items())


def _dat(src, counts):
    """A .dat file of five points of ``src`` with ``counts``: a line point (lines 2-3), two
    branch points (the if's arms), two toggle points."""
    keys = [
        _point(src, l="2", n="3", page="v_line/top", t="line", o="block", S="2-3", h="TOP.top"),
        _point(src, l="3", n="5", page="v_branch/top", t="branch", o="if", S="4", h="TOP.top"),
        _point(src, l="3", n="6", page="v_branch/top", t="branch", o="else", S="6",
               h="TOP.top"),
        _point(src, l="1", n="20", page="v_toggle/top", o="a:0->1", h="TOP.top"),
        _point(src, l="1", n="30", page="v_toggle/top", o="q:0->1", h="TOP.top"),
    ]
    return "# SystemC::Coverage-3\n" + "".join(f"C '{k}' {c}\n" for k, c in zip(keys, counts))


@pytest.fixture
def tree(tmp_path):
    src = tmp_path / "top.v"
    src.write_text(VERILOG)
    group = tmp_path / "dat" / "top-0123456789ab"
    group.mkdir(parents=True)
    (group / "t-1-0.dat").write_text(_dat(src, [5, 5, 0, 1, 0]))
    (group / "t-2-0.dat").write_text(_dat(src, [3, 0, 0, 2, 0]))
    return tmp_path, src


def test_parse_and_types(tree):
    tmp, src = tree
    points = cov.read_dat(tmp / "dat" / "top-0123456789ab" / "t-1-0.dat")
    assert len(points) == 5
    types = sorted(cov.point_type(f) for f, _ in points.values())
    assert types == ["branch", "branch", "line", "toggle", "toggle"]   # toggle from the page
    fields, count = next(iter(points.values()))
    assert fields["f"] == str(src) and fields["l"] == "2" and count == 5
    assert cov._lines(fields) == [2, 3]


def test_merge_sums_counts(tree):
    tmp, _ = tree
    points = cov.merge(sorted((tmp / "dat" / "top-0123456789ab").glob("*.dat")))
    assert sorted(c for _, c in points.values()) == [0, 0, 3, 5, 8]
    s = cov.summarize(points)
    assert list(s) == ["line", "branch", "toggle", "toggle_named"]
    assert s["line"] == {"hit": 1, "total": 1, "percent": 100.0}
    assert s["branch"] == {"hit": 1, "total": 2, "percent": 50.0}
    assert s["toggle"] == {"hit": 1, "total": 2, "percent": 50.0}


def test_merge_combines_instances(tmp_path):
    """The same point of two instances (other hierarchy) is one point, counts summed."""
    src = tmp_path / "x.v"
    key = _point(src, l="1", n="1", page="v_line/m", t="line", o="block")
    f = tmp_path / "a.dat"
    f.write_text(f"# SystemC::Coverage-3\nC '{key}\x01h\x02TOP.a' 0\nC '{key}\x01h\x02TOP.b' 4\n")
    (fields, count), = cov.read_dat(f).values()
    assert count == 4 and fields["h"] == "TOP.a,TOP.b"


def test_yosys_artefacts_and_temporaries(tmp_path):
    """The points of Yosys's time-0 trigger are dropped; ``$<n>`` temporaries are toggle
    points but not ``toggle_named`` ones."""
    src = tmp_path / "y.v"
    src.write_text("module y;\n"
                   "  reg \\$auto$verilog_backend.cc:2355:dump_module$1  = 0;\n"
                   "  always @* begin\n"
                   "    if (\\$auto$verilog_backend.cc:2355:dump_module$1 ) begin end\n"
                   "    x = a;\n"
                   "  end\n")
    f = tmp_path / "a.dat"
    f.write_text("# SystemC::Coverage-3\n"
                 f"C '{_point(src, l='2', t='toggle', o='__024auto__024verilog:0->1')}' 0\n"
                 f"C '{_point(src, l='4', n='1', t='branch', o='if')}' 0\n"
                 f"C '{_point(src, l='4', n='2', t='branch', o='else')}' 7\n"
                 f"C '{_point(src, l='3', t='line', o='block', S='3-5')}' 7\n"
                 f"C '{_point(src, l='5', n='1', t='toggle', o='__0241:0->1')}' 0\n"
                 f"C '{_point(src, l='5', n='2', t='toggle', o='x:0->1')}' 3\n")
    points, excluded = cov.drop_artefacts(cov.read_dat(f))
    assert excluded == 3
    s = cov.summarize(points)
    assert "branch" not in s and s["line"]["percent"] == 100.0
    assert s["toggle"] == {"hit": 1, "total": 2, "percent": 50.0}
    assert s["toggle_named"] == {"hit": 1, "total": 1, "percent": 100.0}


def test_threshold(tmp_path):
    src = tmp_path / "x.v"
    f = tmp_path / "a.dat"
    f.write_text("# SystemC::Coverage-3\n"
                 f"C '{_point(src, l='1', t='line', s='10')}' 9\n"
                 f"C '{_point(src, l='2', t='line', s='10')}' 10\n")
    assert cov.summarize(cov.read_dat(f))["line"] == {"hit": 1, "total": 2, "percent": 50.0}


def test_bad_line(tmp_path):
    f = tmp_path / "a.dat"
    f.write_text("# SystemC::Coverage-3\nnonsense\n")
    with pytest.raises(ValueError, match="not a coverage point"):
        cov.read_dat(f)


def test_report(tree):
    tmp, src = tree
    out = tmp / "out"
    printed = []
    cache = tmp / "sim-coverage"                      # the build's manifest: module, config
    (cache / "top-0123456789ab" / "src").mkdir(parents=True)
    (cache / "top-0123456789ab" / "src" / "top.json").write_text(
        json.dumps({"module": "top", "config": {"k": 2}}))
    summary = cov.report(tmp / "dat", out, cache, html=False,
                         echo=lambda *a, **k: printed.append(a[0]))
    row, = summary["configurations"]
    assert row["configuration"] == "top-0123456789ab" and row["runs"] == 2
    assert row["module"] == "top" and row["config"] == {"k": 2}
    assert row["tests"] == ["t"]
    assert row["types"]["toggle"]["percent"] == 50.0
    assert json.loads((out / "summary.json").read_text()) == summary
    md = (out / "summary.md").read_text()
    assert ('| top-0123456789ab | top | {"k":2} | 2 | 100.0 (1/1) | 50.0 (1/2) | 50.0 (1/2) '
            "| 50.0 (1/2) | 0 |") in md
    assert printed[0] == md
    # The merged file reads back as the same points.
    merged = cov.read_dat(out / "merged" / "top-0123456789ab.dat")
    assert sorted(c for _, c in merged.values()) == [0, 0, 3, 5, 8]
    # Annotation: the if line carries its unhit branch point.
    ann = (out / "annotated" / "top-0123456789ab" / "top.v").read_text().splitlines()
    line3 = next(i for i, t in enumerate(ann) if t.endswith("    if (a)"))
    assert ann[line3].startswith("%000000")
    assert "branch else" in ann[line3 + 1]
    assert ann[line3 - 1].startswith(" 000008")              # line 2: the block, hit 8 times
    # lcov: lines 2 and 3 from the line point's S, the if's two arms as branches.
    info = (out / "coverage.info").read_text().splitlines()
    assert f"SF:{src}" in info
    assert "DA:2,8" in info and "DA:3,8" in info and "LH:2" in info
    assert "BRDA:3,0,0,5" in info and "BRDA:3,0,1,-" in info and "BRH:1" in info


def test_main_without_data(tmp_path, capsys):
    assert cov.main(["--dat-dir", str(tmp_path / "none"), "--out", str(tmp_path / "out"),
                     "--no-html"]) == 1
    assert "no .dat files" in capsys.readouterr().err


def test_no_script_shadows_an_installed_module():
    """cocotb hands the test process's ``sys.path`` (which holds ``scripts/`` once a test of a
    benchmark script ran) to every simulation it starts: a script named like an installed or
    standard module (``coverage``, which numba imports when present) would be imported in its
    place there."""
    import importlib.machinery

    root = SCRIPT.parent.parent
    ours = {str(root), str(root / "scripts"), str(root / "tb"), ""}
    path = [p for p in sys.path if p not in ours and not p.startswith(str(root / "tb"))]
    names = [p.stem for p in (root / "scripts").glob("*.py")]
    optional = {"coverage", "torch", "cpprb", "ray", "pynq", "pyxrt"}  # imported when present
    shadowing = [n for n in names
                 if n in sys.stdlib_module_names or n in optional
                 or importlib.machinery.PathFinder.find_spec(n, path) is not None]
    assert not shadowing, f"scripts named like installed modules: {shadowing}"
