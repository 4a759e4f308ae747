"""The GAE driver's session for comparing devices: :func:`session` is blocking driver code (the
unmodified :class:`~sw.gae.driver.GaeDriver`) that returns everything observable -- advantages
and returns of :meth:`~sw.gae.driver.GaeDriver.compute`, its retries, the code-level
:meth:`~sw.gae.driver.GaeDriver.run`, STATUS words and CYCLES, a refused run, what a second
start and a memory access during a run raise, a start refused during a run, the HW_*
registers; :func:`compare` checks two transcripts. Run on the RTL of the GAE kernel through
:class:`~sw.driver.xrt_device.XrtDevice` (tb/gae/test_kernel_xrt_rtl.py) and on
:class:`~sw.gae.device.GoldenDevice`.
"""

import warnings

import numpy as np

from driver_util import rollout

__all__ = ["session", "compare"]


def _warned(ws):
    return sorted({w.category.__name__ for w in ws if issubclass(w.category, RuntimeWarning)})


def session(device, config, *, seed=41) -> dict:
    """Blocking driver code on ``device`` of the accelerator ``config`` (a
    :class:`~sw.gae.spec.GaeCoreConfig`, checked against the HW_* registers); returns everything
    observable (module docstring)."""
    from sw.gae.driver import GaeDriver, GaeError
    from sw.gae.golden import quantize_coefs
    from sw.gae.spec import GaeCoreArgs

    drv = GaeDriver(device, config, timeout=1e-3, poll_interval=2e-7)
    cfg = drv.config
    rng = np.random.default_rng(seed)
    out = {"config": cfg.to_dict(), "compute": []}
    n = cfg.n_pe
    shapes = [(48, 2 * n), (min(100, cfg.capacity), cfg.max_trajectories), (5, 3), (9, n + 1)]
    for i, (T, M) in enumerate(shapes):
        batch = rollout(rng, T, M, reward="sparse" if i % 2 == 0 else "gauss")
        with warnings.catch_warnings(record=True) as ws:
            warnings.simplefilter("always")
            adv, ret = drv.compute(*batch, 0.99, 0.95)
        out["compute"].append((adv, ret, drv.last_batch.runs, dict(drv.last_status),
                               _warned(ws)))
    # Result ranges too narrow for the batch: saturated in-place results, run again wider.
    narrow = GaeDriver(device, config, timeout=1e-3, poll_interval=2e-7,
                       result_range=(0.05, 0.05))
    with warnings.catch_warnings(record=True) as ws:
        warnings.simplefilter("always")
        adv, ret = narrow.compute(*rollout(rng, 20, n + 3), 0.99, 0.95)
    out["compute"].append((adv, ret, narrow.last_batch.runs, dict(narrow.last_status),
                           _warned(ws)))
    # The code-level run with arguments of our own.
    q, rf = cfg.code_max, cfg.reg_format
    T, M = 30, 11
    codes = [rng.integers(-q, q + 1, (T, M)), rng.integers(-q, q + 1, (T, M)),
             rng.integers(-q, q + 1, M), rng.random((T, M)) < 0.1]
    g, gl = quantize_coefs(0.97, 0.9, cfg.pe)
    s, rs = cfg.scale_format.quantize, cfg.result_scale_format.quantize
    args = GaeCoreArgs(T, M, g, gl, s(0.1), 0, s(0.05),
                       int(rf.quantize(0.25)), rs(2.0), 0, rs(4.0),
                       int(rf.quantize(0.5)))
    with warnings.catch_warnings(record=True) as ws:
        warnings.simplefilter("always")
        out["run"] = drv.run(*codes, args)
    out["run_warned"] = _warned(ws)
    # A refused run: GaeError, memory untouched.
    drv.start(GaeCoreArgs(T, M, (1 << cfg.pe.coef_frac) + 1, gl, 0, 0, 0, 0))
    try:
        drv.wait()
        out["error"] = None
    except GaeError as e:
        out["error"] = e.code
    out["error_status"] = dict(drv.last_status)
    out["after_error"] = drv.read_results(T, M)
    # During the longest run: a second start, a memory access and a raw AP_START.
    T, M = cfg.capacity, cfg.max_trajectories
    codes = [rng.integers(-q, q + 1, (T, M)), rng.integers(-q, q + 1, (T, M)),
             rng.integers(-q, q + 1, M), rng.random((T, M)) < 0.05]
    drv.load(*codes)
    args.num_timesteps, args.num_trajectories = T, M
    drv.start(args)
    during = []
    for what, fn in (("start", lambda: drv.start(args)),
                     ("memory", lambda: device.memory.read(0, 16))):
        try:
            fn()
            during.append((what, None))
        except Exception as e:  # noqa: BLE001 - the transcript records the exception class
            during.append((what, type(e).__name__))
    drv.register_map.CTRL.AP_START = 1
    with warnings.catch_warnings(record=True) as ws:
        warnings.simplefilter("always")
        out["busy_status"] = drv.wait()
    out["during"], out["busy_warned"] = during, _warned(ws)
    out["busy_results"] = drv.read_results(T, M)
    out["hw"] = {r._register.name: int(r) for r in drv.register_map
                 if r._register.name.startswith("HW_")}
    return out


def compare(rtl: dict, gold: dict):
    """Assert two transcripts of :func:`session` equal, arrays bit for bit."""
    assert rtl["config"] == gold["config"]
    assert len(rtl["compute"]) == len(gold["compute"])
    for i, (a, b) in enumerate(zip(rtl["compute"], gold["compute"])):
        np.testing.assert_array_equal(a[0], b[0], err_msg=f"advantages of compute {i}")
        np.testing.assert_array_equal(a[1], b[1], err_msg=f"returns of compute {i}")
        assert a[2:] == b[2:], (i, a[2:], b[2:])
    for key in ("adv", "rtg"):
        np.testing.assert_array_equal(rtl["run"][key], gold["run"][key], err_msg=key)
    assert {k: v for k, v in rtl["run"].items() if k not in ("adv", "rtg")} == \
        {k: v for k, v in gold["run"].items() if k not in ("adv", "rtg")}
    for key in ("after_error", "busy_results"):
        for x, y in zip(rtl[key], gold[key]):
            np.testing.assert_array_equal(x, y, err_msg=key)
    for key in ("run_warned", "error", "error_status", "during", "busy_status", "busy_warned",
                "hw"):
        assert rtl[key] == gold[key], (key, rtl[key], gold[key])
    # What the session is meant to exercise did happen.
    assert gold["error"] == 4
    assert gold["during"] == [("start", "GaeBusyError"), ("memory", "BusError")]
    assert gold["busy_status"]["START_REFUSED"] == 1
    assert "StartRefusedWarning" in gold["busy_warned"]
