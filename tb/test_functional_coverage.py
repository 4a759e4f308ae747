"""Functional coverage (tb/fcov, scripts/functional_coverage.py): the AXI monitor classifies
hand-made traffic into the right bins, the catalogue is consistent, and the merge sums the
counts of several runs and lists every bin not hit with its reason or as MISSED."""

import importlib.util
import json

import pytest

import fcov
from fcov.axi import CHANNELS, ROLES, AxiMonitor

IDLE = dict(reset=0, **{f"{c}_{k}": 0 for c in CHANNELS for k in ("valid", "ready")},
            ar_addr=0, aw_addr=0, ar_len=0, aw_len=0, ar_size=3, aw_size=3, w_strb=0xFF,
            w_last=1, r_last=1)


def load_script():
    spec = importlib.util.spec_from_file_location(
        "functional_coverage_script", fcov.ROOT / "scripts" / "functional_coverage.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Recorder:
    """Replaces fcov.sample: the (point, value) pairs a monitor samples."""

    def __init__(self, monkeypatch):
        self.seen = []
        monkeypatch.setattr("fcov.axi.sample", lambda name, value: self.seen.append((name, value)))

    def of(self, name):
        return [v for n, v in self.seen if n == name]


def test_monitor_classifies_bursts_order_and_outstanding(monkeypatch):
    rec = Recorder(monkeypatch)
    m = AxiMonitor("mm_slave", 8)
    # W's first beat before its AW, a 4-beat burst with a partial strobe
    m.step(dict(IDLE, w_valid=1, w_ready=1, w_last=0, w_strb=0x0F))
    m.step(dict(IDLE, aw_valid=1, aw_ready=1, aw_len=3, aw_addr=0x40,
                w_valid=1, w_ready=1, w_last=0))
    m.step(dict(IDLE, w_valid=1, w_ready=1, w_last=1, w_strb=0))
    # two reads outstanding, the second narrow and unaligned; then AW before W
    m.step(dict(IDLE, ar_valid=1, ar_ready=1, ar_len=15))
    m.step(dict(IDLE, ar_valid=1, ar_ready=1, ar_len=0, ar_size=2, ar_addr=0x6))
    m.step(dict(IDLE, aw_valid=1, aw_ready=1))
    m.step(dict(IDLE, w_valid=1, w_ready=1, aw_valid=1, aw_ready=1))    # W of the 2nd AW
    assert rec.of("mm_slave.w_order") == ["w first", "aw first"]
    assert rec.of("mm_slave.w_strb") == ["partial", "all", "none", "all"]
    assert rec.of("mm_slave.aw_len") == [4, 1, 1]
    assert rec.of("mm_slave.ar_len") == [16, 1]
    assert rec.of("mm_slave.ar_size") == ["full", "narrow"]
    assert rec.of("mm_slave.ar_addr") == ["aligned", "unaligned"]
    assert rec.of("mm_slave.reads_outstanding") == [0, 1]
    assert rec.of("mm_slave.writes_outstanding") == [0, 1, 2]
    # reset with reads in flight; then a clean state
    m.step(dict(IDLE, reset=1))
    m.step(dict(IDLE, reset=1))
    assert rec.of("mm_slave.reset") == ["read in flight", "idle"]


def test_monitor_stalls_and_lite(monkeypatch):
    rec = Recorder(monkeypatch)
    m = AxiMonitor("lite", 4)
    for _ in range(5):
        m.step(dict(IDLE, ar_valid=1, ar_ready=0))
    m.step(dict(IDLE, ar_valid=1, ar_ready=1, ar_addr=0x5))
    m.step(dict(IDLE, r_valid=1, r_ready=0))
    m.step(dict(IDLE, reset=1))
    assert rec.of("lite.stall") == ["ar"] * 5 + ["r"]
    assert rec.of("lite.stall_4") == ["ar"]
    assert rec.of("lite.ar_addr") == ["unaligned"]
    assert rec.of("lite.ar_len") == [] and rec.of("lite.reads_outstanding") == []
    assert rec.of("lite.reset") == ["read in flight"]
    with pytest.raises(ValueError, match="role must be one of"):
        AxiMonitor("apb", 4)


def test_catalogue_is_consistent():
    points = fcov.catalogue()
    for role in ROLES:
        assert f"{role}.stall" in points and f"{role}.reset" in points
    for p in points.values():
        assert p.bins and p.doc, p.name
        assert set(p.unreachable) <= set(p.bins), p.name
        assert all(reason.strip() for reason in p.unreachable.values()), p.name
    with pytest.raises(ValueError, match="defined twice"):
        fcov.point("lite.stall", {"x": fcov.eq(1)})
    with pytest.raises(ValueError, match="are not bins"):
        fcov.Point("x.y", {"a": fcov.eq(1)}, {"b": "no"})


def test_count_bins():
    bins = fcov.count_bins(1, 2, 3, 5, 17, top=256)
    assert list(bins) == ["1", "2", "3-4", "5-16", "17-256"]
    assert [k for k, f in bins.items() if f(4)] == ["3-4"]
    assert [k for k, f in bins.items() if f(257)] == []
    assert list(fcov.count_bins(0, 1, 2, 3)) == ["0", "1", "2", "3+"]


def test_merge_sums_runs_and_lists_what_was_not_hit(tmp_path):
    import yaml

    script = load_script()
    runs = tmp_path / "functional"
    runs.mkdir()
    for i, (hits) in enumerate([{"idle": 1, "read in flight": 0},
                                {"idle": 2, "read in flight": 3}]):
        (runs / f"{i}.yml").write_text(yaml.dump({
            "lite": {"size": 3},
            "lite.reset": {"bins:_hits": {**hits, "write in flight": 0}}}))
    cat = {"lite.reset": fcov.Point("lite.reset", {"idle": None, "read in flight": None,
                                                   "write in flight": None},
                                    {"write in flight": "never written here"}, "reset"),
           "lite.stall": fcov.Point("lite.stall", {"aw": None}, {}, "stall")}
    rep = script.report(script.merge(sorted(runs.glob("*.yml"))), cat)
    bins = {r["bin"]: r for r in rep["points"]["lite.reset"]["bins"]}
    assert bins["idle"]["hits"] == 3 and bins["read in flight"]["hits"] == 3
    assert bins["write in flight"] == {"bin": "write in flight", "hits": 0,
                                       "status": "unreachable", "reason": "never written here"}
    assert rep["points"]["lite.stall"]["bins"][0]["status"] == "MISSED"
    assert not rep["points"]["lite.stall"]["sampled"]
    assert (rep["bins"], rep["hit"], rep["unreachable"], rep["missed"]) == (4, 2, 1, 1)
    md = script.markdown(rep, 2)
    assert "**1 missed**" in md and "**aw: MISSED**" in md and "never written here" in md


def test_sampling_exports_counts_that_the_script_reads(tmp_path, monkeypatch):
    """A real cocotb-coverage round trip: sample, export YAML, merge, report."""
    monkeypatch.setenv(fcov.COVERAGE_ENV, "1")
    monkeypatch.setattr(fcov, "OUT", tmp_path / "functional")
    monkeypatch.setattr(fcov, "_FILE", None)
    fcov.sample("dma.stall", "r")
    fcov.sample("dma.stall", "r")
    path = fcov.export()
    assert path is not None and path.parent == tmp_path / "functional"
    script = load_script()
    assert script.main(["--dir", str(tmp_path)]) == 0
    rep = json.loads((tmp_path / "functional.json").read_text())
    r = {b["bin"]: b for b in rep["points"]["dma.stall"]["bins"]}["r"]
    assert r["hits"] >= 2 and r["status"] == "hit"
    assert script.main(["--dir", str(tmp_path), "--check"]) == 1     # most bins not hit here


class _Handle:
    """A stand-in for a cocotb signal handle: ``value`` and ``len``."""

    def __init__(self, value=0, width=1):
        self.value, self.width = value, width

    def __len__(self):
        return self.width


def test_cocotb_port_reads_payload_only_on_a_handshake(monkeypatch):
    from types import SimpleNamespace

    from fcov.cocotb_monitor import _Port

    rec = Recorder(monkeypatch)
    names = {f"{c}{k}" for c in CHANNELS for k in ("valid", "ready")}
    names |= {"araddr", "arlen", "arsize", "awaddr", "awlen", "awsize", "wstrb", "wlast",
              "rlast", "rdata"}
    dut = SimpleNamespace(**{f"m_{n}": _Handle(width=8 if n == "wstrb" else 1) for n in names})
    port = _Port(dut, "m", "dma")
    assert port.monitor.data_bytes == 8
    dut.m_arvalid.value, dut.m_araddr.value, dut.m_arlen.value = 1, 0x40, 7
    dut.m_arsize.value = 3
    port.step(False)                        # AR waits: a stall, no handshake
    dut.m_arready.value = 1
    port.step(False)
    dut.m_arvalid.value = dut.m_arready.value = 0
    port.step(True)
    assert rec.of("dma.stall") == ["ar"]
    assert rec.of("dma.ar_len") == [8] and rec.of("dma.ar_size") == ["full"]
    assert rec.of("dma.reset") == ["read in flight"]
    with pytest.raises(ValueError, match="prefix 'n': the top level has no port n_"):
        _Port(dut, "n", "dma")


def test_cocotb_monitor_starts_nothing_when_off(monkeypatch):
    from fcov.cocotb_monitor import start_axi_monitor

    monkeypatch.delenv(fcov.COVERAGE_ENV, raising=False)
    assert start_axi_monitor(None, None, None, {"p": "lite"}) is None


def test_unreachable_reasons_name_existing_sources():
    import re

    for role, (_, unreachable) in ROLES.items():
        for point, bins in unreachable.items():
            assert f"{role}.{point}" in fcov.POINTS, (role, point)
            for label, reason in bins.items():
                paths = re.findall(r"rtl_gen/[\w/]+\.py", reason)
                assert paths and all((fcov.ROOT / p).exists() for p in paths), (role, label)
