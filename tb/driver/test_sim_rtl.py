"""The same synchronous driver code on the Verilated RTL (SimDevice) and the GoldenDevice.

:func:`session` is plain blocking code: it builds a :class:`~sw.gae.driver.GaeDriver` (the
configuration read back from the HW_* registers), computes GAE on a few rollouts, runs codes
directly, provokes a refused run, polls instead of waiting for the interrupt, and exercises the
register-level semantics the fast tier checks on the model. The cocotb test runs it once in a
``bridge`` thread (cocotb.task) against the RTL through :class:`~sw.driver.sim.SimDevice` and once
against a :class:`~sw.gae.device.GoldenDevice`, and requires identical transcripts: float
results bit for bit, STATUS and CYCLES word for word.
"""

import warnings

import numpy as np
import pytest

from cocotb_util import load_manifest, run_block

from driver_util import SMALL, rollout


@pytest.mark.slow
def test_driver_on_rtl_matches_golden_device():
    run_block("gae-accel", SMALL, __file__, seed=20260301)


def session(device) -> dict:
    """Blocking driver code; returns everything observable, for comparison across devices."""
    from sw.gae.spec import GaeCoreConfig
    from sw.driver import GaeDriver, GaeError, GaeOverflowWarning
    from sw.gae.golden import quantize_coefs
    from sw.gae.spec import GaeCoreArgs

    out = {}
    drv = GaeDriver(device, timeout=1e-3)
    cfg = drv.config
    out["config"] = cfg.to_dict()
    rng = np.random.default_rng(31)
    out["compute"] = []
    for T, M, reward in ((16, 8, "sparse"), (9, 3, "gauss"), (32, 2, "sparse")):
        adv, ret = drv.compute(*rollout(rng, T, M, reward=reward), 0.99, 0.95)
        out["compute"].append((adv, ret, dict(drv.last_status), drv.last_batch.runs))
    # Code level: random codes and coefficients, every flag compared.
    q = cfg.code_max
    T, M = 12, 6
    codes = [rng.integers(-q, q + 1, (T, M)), rng.integers(-q, q + 1, (T, M)),
             rng.integers(-q, q + 1, M), rng.random((T, M)) < 0.2]
    rf = cfg.reg_format
    g, gl = quantize_coefs(0.95, 0.9, cfg.pe)
    s, rs = cfg.scale_format.quantize, cfg.result_scale_format.quantize
    args = GaeCoreArgs(T, M, g, gl, s(0.1), 0, s(0.05),
                       int(rf.quantize(-0.5)), rs(2.0), 0,
                       rs(4.0), int(rf.quantize(1.0)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", GaeOverflowWarning)
        out["run"] = drv.run(*codes, args)
    # A refused run: done at once, ERROR set, memory untouched.
    bad = GaeCoreArgs(T, M, (1 << cfg.pe.coef_frac) + 1, gl, 0, 0, 0, 0)
    drv.start(bad)
    try:
        drv.wait()
        out["error"] = None
    except GaeError as e:
        out["error"] = e.code
    out["after_error"] = drv.read_results(T, M)
    # Polling instead of the interrupt.
    poll = GaeDriver(device, GaeCoreConfig.from_dict(out["config"]), use_interrupt=False,
                     poll_interval=2e-7, timeout=1e-3)
    out["poll"] = poll.compute(*rollout(rng, 20, 5), 0.9, 0.8)
    # Register-level semantics (as tb/driver/test_regmap.py checks on the model).
    rm = drv.register_map
    log = out["registers"] = []
    rm.CTRL.AUTO_RESTART = 1
    rm.CTRL.AUTO_RESTART = 0
    log.append(rm.CTRL.read().fields)                 # idle, nothing started
    rm.IP_IER = 0b11
    rm.GIER.ENABLE = 1
    rm.NUM_TIMESTEPS = 0                              # an invalid run completes at once
    rm.CTRL.AP_START = 1
    device.sleep(1e-7)
    log.append(rm.IP_ISR.read().fields)
    rm.IP_ISR.AP_DONE = 1                             # clears exactly that bit
    log.append(rm.IP_ISR.read().fields)
    rm.IP_ISR.AP_READY = 1
    log.append(rm.IP_ISR.read().fields)
    log.append(rm.STATUS.read().fields)
    log.append(rm.CTRL.read().fields)
    log.append(rm.CTRL.read().fields)                 # AP_DONE was cleared by the read
    log.append({r._register.name: int(r) for r in rm if r._register.name.startswith("HW_")})
    return out


def compare(rtl: dict, gold: dict):
    assert rtl["config"] == gold["config"]
    for (a, r, s, n), (ga, gr, gs, gn) in zip(rtl["compute"], gold["compute"]):
        np.testing.assert_array_equal(a, ga)
        np.testing.assert_array_equal(r, gr)
        assert s == gs and n == gn, (s, gs, n, gn)
    for key in ("adv", "rtg"):
        np.testing.assert_array_equal(rtl["run"][key], gold["run"][key])
    assert {k: v for k, v in rtl["run"].items() if k not in ("adv", "rtg")} == \
        {k: v for k, v in gold["run"].items() if k not in ("adv", "rtg")}
    assert rtl["error"] == gold["error"] == 4
    for x, y in zip(rtl["after_error"], gold["after_error"]):
        np.testing.assert_array_equal(x, y)
    for x, y in zip(rtl["poll"], gold["poll"]):
        np.testing.assert_array_equal(x, y)
    assert rtl["registers"] == gold["registers"], (rtl["registers"], gold["registers"])


try:
    import cocotb
except ImportError:  # pragma: no cover
    cocotb = None

if cocotb is not None:
    @cocotb.test()
    async def same_driver_code_on_rtl_and_golden(dut):
        """session() through SimDevice (bridge/resume) == session() on GoldenDevice."""
        from sw.gae.spec import GaeCoreConfig
        from sw.driver import GoldenDevice, SimDevice

        cfg = GaeCoreConfig.from_dict(load_manifest()["config"])
        sim = SimDevice(dut)
        await sim.start()
        try:                                          # blocking calls need a bridge thread
            sim.control.read32(0)
            raise AssertionError("a SimDevice call outside a bridge thread did not raise")
        except RuntimeError as e:
            assert "device.call(fn)" in str(e), e
        rtl = await sim.call(session, sim)
        gold = session(GoldenDevice(cfg))
        compare(rtl, gold)
        dut._log.info("driver session identical on RTL and golden model; RTL cycles %s",
                      [c[2]["CYCLES"] for c in rtl["compute"]])
