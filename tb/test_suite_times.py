"""scripts/suite_times.py: reads pytest's JUnit report into per-tier, per-folder times and the
slowest tests."""

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "suite_times.py"

XML = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tb.gae.test_pe_rtl" name="test_pe_rtl[k2]" time="30.5" />
<testcase classname="tb.gae.test_pe_sim" name="test_a" time="1.5" />
<testcase classname="tb.test_hdl" name="test_hdl_lint_clean[x]" time="2.0" />
<testcase classname="tb.shell.test_dma_sim.TestBursts" name="test_b" time="4.0" />
</testsuite></testsuites>"""


def _load():
    spec = importlib.util.spec_from_file_location("suite_times_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_report_is_summarized_per_tier_folder_and_test(tmp_path):
    mod = _load()
    report = tmp_path / "r.xml"
    report.write_text(XML)
    times = mod.read_report(report)
    assert times == {"tb/gae/test_pe_rtl.py::test_pe_rtl[k2]": 30.5,
                     "tb/gae/test_pe_sim.py::test_a": 1.5,
                     "tb/test_hdl.py::test_hdl_lint_clean[x]": 2.0,
                     "tb/shell/test_dma_sim.py::TestBursts::test_b": 4.0}
    s = mod.summarize(times, {"tb/gae/test_pe_rtl.py::test_pe_rtl[k2]"}, top=2)
    assert s["tiers"] == {"thorough (slow)": {"tests": 1, "seconds": 30.5},
                          "fast": {"tests": 3, "seconds": 7.5}}
    assert s["folders"] == {"tb/gae": 32.0, "tb/shell": 4.0, "tb": 2.0}
    assert s["slowest"] == [["tb/gae/test_pe_rtl.py::test_pe_rtl[k2]", 30.5],
                            ["tb/shell/test_dma_sim.py::TestBursts::test_b", 4.0]]
    assert s["total_s"] == 38.0 and s["tests"] == 4


def test_missing_report_is_named(tmp_path, capsys):
    mod = _load()
    with pytest.raises(SystemExit) as e:
        mod.main([str(tmp_path / "none.xml")])
    assert e.value.code == 2
    assert "none.xml not found: run `make test` first" in capsys.readouterr().err
