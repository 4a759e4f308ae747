"""ReplayDriver on the golden device (fast tier): validation before any bus access, hardware
errors and flags as exceptions and warnings, the configuration check, polling. The same driver
code on the RTL: tb/replay/test_driver_rtl.py.
"""

import numpy as np
import pytest

from driver_util import fake_pynq_overlay
from replay_session import RTL, same, session


class _Counting:
    """Wraps a device's control and memory ports, counting accesses."""

    def __init__(self, dev):
        self.n = 0
        ctl, mem = dev.control, dev.memory
        outer = self

        class C:
            def read32(self, off):
                outer.n += 1
                return ctl.read32(off)

            def write32(self, off, v):
                outer.n += 1
                ctl.write32(off, v)

        class M:
            def write(self, off, data):
                outer.n += 1
                mem.write(off, data)

            def read(self, off, n):
                outer.n += 1
                return mem.read(off, n)

        dev.control, dev.memory = C(), M()


def _driver(**kw):
    from sw.replay.spec import SumTreeConfig
    from sw.replay.device import ReplayGoldenDevice
    from sw.replay.driver import ReplayDriver

    cfg = SumTreeConfig(**{**RTL, **kw})
    dev = ReplayGoldenDevice(cfg)
    return ReplayDriver(dev), dev


@pytest.mark.parametrize("call,match", [
    (lambda rb: rb.sample(0, 0.4), "batch must be an integer in 1..64"),
    (lambda rb: rb.sample(65, 0.4), "batch must be an integer in 1..64"),
    (lambda rb: rb.sample(2.0, 0.4), "batch must be an integer"),
    (lambda rb: rb.sample(2, float("nan")), "beta must be"),
    (lambda rb: rb.sample(2, 0.4, targets=[0, 1]), r"targets must be floats"),
    (lambda rb: rb.sample(2, 0.4, targets=np.array([0.1, 1.0])), r"fractions in \[0, 1\)"),
    (lambda rb: rb.sample(2, 0.4, targets=np.zeros(3)), r"shape \(2,\)"),
    (lambda rb: rb.update([1, 2], priorities=[1.0]), "priorities must have 2 elements"),
    (lambda rb: rb.update([1, 2], [1.0]), "td_errors must have 2 elements"),
    (lambda rb: rb.update([1000], [1.0]), r"indices must be in 0..999"),
    (lambda rb: rb.update([-1], [1.0]), r"indices must be in 0..999"),
    (lambda rb: rb.update([1.0], [1.0]), "indices must be integers"),
    (lambda rb: rb.update([[1]], [1.0]), "indices must be a 1-D array"),
    (lambda rb: rb.update([1], priorities=[np.inf]), "finite and non-negative"),
    (lambda rb: rb.update([1], priorities=[-0.5]), "finite and non-negative"),
    (lambda rb: rb.update([1], [np.inf]), "td_errors must be finite"),
    (lambda rb: rb.insert(["a"]), "priorities must be real numbers"),
    (lambda rb: rb.insert([1.0], count=2), "not both"),
    (lambda rb: rb.insert(count=0), "count must be an integer"),
    (lambda rb: rb.update_and_sample(np.arange(65), np.ones(65), 4, 0.4),
     r"len\(indices\) must be an integer in 1..64"),
    (lambda rb: rb.update_and_sample([1], [1.0], 65, 0.4), "batch must be"),
    (lambda rb: rb.read([5000]), "indices must be in"),
    (lambda rb: rb.seed(-1), "seed must be an integer"),
    (lambda rb: rb.seed(1 << 32), "seed must be an integer"),
])
def test_invalid_input_raises_before_any_bus_access(call, match):
    rb, dev = _driver()
    counter = _Counting(dev)
    with pytest.raises(ValueError, match=match):
        call(rb)
    assert counter.n == 0


def test_flags_become_exceptions_and_warnings():
    from sw.replay.driver import PrioritySaturatedWarning, ReplayEmptyError, ReplayError
    from sw.replay.spec import ReplayOp

    rb, dev = _driver()
    with pytest.raises(ReplayEmptyError):
        rb.sample(3, 0.4)
    with pytest.warns(PrioritySaturatedWarning):
        rb.insert([1.0, 1e9])
    assert rb.max_priority == rb.config.priority_format.max_value
    with pytest.raises(ReplayError, match="error 2: batch size"):
        rb._run(ReplayOp.READ, 0)
    with pytest.raises(ReplayError, match="error 1: unknown operation"):
        rb.register_map.OP = 9
        rb.register_map.CTRL.AP_START = 1
        rb._wait(1e-3)
    # An index the tree refuses (written behind the driver's back) raises.
    dev.memory.write(0, (1000).to_bytes(8, "little"))
    with pytest.raises(ReplayError, match="invalid index"):
        rb._run(ReplayOp.UPDATE, 1)


def test_weights_and_relaxed_semantics():
    rb, dev = _driver()
    rb.insert([1.0, 3.0, 0.0, 4.0])
    idx, w, p = rb.sample(8, 0.5, targets=np.array([0, .1, .15, .2, .5, .6, .9, .99]))
    np.testing.assert_array_equal(idx, [0, 0, 1, 1, 3, 3, 3, 3])     # t = 4: P(0..1) = 4 <= t
    np.testing.assert_array_equal(p, [1, 1, 3, 3, 4, 4, 4, 4])
    raw = (4 * p / 8.0) ** -0.5
    np.testing.assert_allclose(w, raw / raw.max())
    # Relaxed: the samples see the tree before the run's updates; strict: after them.
    x = np.array([0.05, 0.95])
    idx_r, _, p_r = rb.update_and_sample([0, 3], None, 2, 0.5, targets=x, relaxed=True,
                                         priorities=[0.0, 0.0])
    np.testing.assert_array_equal(idx_r, [0, 3])
    rb.update([0, 3], priorities=[1.0, 4.0])
    idx_s, _, p_s = rb.update_and_sample([0, 3], None, 2, 0.5, targets=x,
                                         priorities=[0.0, 0.0])
    np.testing.assert_array_equal(idx_s, [1, 1])
    assert rb.total() == 3.0


def test_config_checked_against_hardware():
    from sw.replay.spec import SumTreeConfig
    from sw.replay.device import ReplayGoldenDevice
    from sw.replay.driver import ReplayConfigMismatchError, ReplayDriver

    dev = ReplayGoldenDevice(SumTreeConfig(**RTL))
    assert ReplayDriver(dev).config == SumTreeConfig(**RTL)
    with pytest.raises(ReplayConfigMismatchError, match="HW_CAPACITY"):
        ReplayDriver(dev, {**RTL, "capacity": 999})
    from sw.gae.device import GoldenDevice
    from sw.gae.spec import GaeCoreConfig
    with pytest.raises(ReplayConfigMismatchError, match="do not describe a replay"):
        ReplayDriver(GoldenDevice(GaeCoreConfig()))


def test_golden_device_session_is_deterministic():
    from sw.replay.spec import SumTreeConfig
    from sw.replay.device import ReplayGoldenDevice

    a = session(ReplayGoldenDevice(SumTreeConfig(**RTL)))
    b = session(ReplayGoldenDevice(SumTreeConfig(**RTL)))
    same(a, b)
    errors = [e for e in a if isinstance(e, tuple) and isinstance(e[1][0], str)]
    assert len(errors) == 3, errors         # two empty samples, the refused batch


def test_pynq_replay_ip_runs_the_driver(monkeypatch):
    """ReplayIP (bound to the shipped replay accelerators' VLNVs) and
    PynqDevice(vlnv=REPLAY_VLNV) on a fake pynq whose MMIO windows are a golden device."""
    from sw.registry import SHIPPED
    from sw.replay.spec import SumTreeConfig
    from sw.driver import REPLAY_VLNV, REPLAY_VLNVS, ReplayDriver
    from sw.driver import pynq_device as pb
    from sw.replay.device import ReplayGoldenDevice

    module, _, params = next(s for s in SHIPPED if s[1] == "replay-accel")
    cfg = SumTreeConfig.from_dict(params)
    dev = ReplayGoldenDevice(cfg)
    ip_dict, vl = fake_pynq_overlay(monkeypatch, dev, "replay_0", module)
    ReplayIP = pb.replay_ip_class()
    assert pb.replay_ip_class() is ReplayIP and pb.ReplayIP is ReplayIP
    assert vl in REPLAY_VLNVS and ReplayIP.bindto == list(REPLAY_VLNVS)
    ip = ReplayIP(ip_dict["replay_0/s_axi_control"])
    assert ip.register_map.HW_CAPACITY == cfg.capacity
    with pytest.raises(AttributeError, match="s_axi_mem window"):
        ReplayIP(ip_dict["replay_0/s_axi_mem"]).register_map
    rb = ip.driver()
    assert rb is ip.driver() and not rb._use_irq and rb.config == cfg
    slots = rb.insert([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(slots, [0, 1, 2])
    np.testing.assert_array_equal(rb.read(slots), [1.0, 2.0, 3.0])
    board = pb.PynqDevice("replay.bit", vlnv=REPLAY_VLNV)
    assert board.instance == "replay_0"
    assert ReplayDriver(board).total() == 6.0


def test_exports():
    import sw.driver as d

    for name in ("ReplayDriver", "ReplayGoldenDevice", "ReplayError", "ReplayEmptyError",
                 "ReplayBusyError", "ReplayTimeoutError", "ReplayConfigMismatchError",
                 "PrioritySaturatedWarning", "PriorityClampedWarning", "read_replay_config",
                 "REPLAY_VLNV"):
        assert name in d.__all__ and hasattr(d, name)
