"""The replay driver's session of the driver tests: :func:`session` is blocking driver code that
returns everything observable (indices, weights, priorities, warnings, errors, STATUS, CYCLES,
RESPONSE_CYCLES); :func:`same` compares two transcripts. Run on the golden device
(tb/replay/test_driver.py, tb/driver/test_xrt_window.py) and on the RTL
(tb/replay/test_driver_rtl.py, tb/replay/test_kernel_xrt_rtl.py)."""

import warnings

import numpy as np

#: The replay accelerator of the driver tests: K = 4, a capacity that is not a power of 4.
RTL = dict(fanout=4, capacity=1000, priority_width=24, priority_frac=12, input_guard_bits=4,
           target_bits=28, max_batch=64)


def _record(fn, *args, **kwargs):
    """(result or exception text, warning classes) of one driver call."""
    with warnings.catch_warnings(record=True) as ws:
        warnings.simplefilter("always")
        try:
            result = fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - the transcript records it
            result = f"{type(e).__name__}: {e}"
    # (the simulator's bus models emit DeprecationWarnings: only the driver's warnings count)
    return result, sorted({w.category.__name__ for w in ws
                           if issubclass(w.category, RuntimeWarning)})


def session(device) -> list:
    """Blocking driver code; returns everything observable, for comparison across devices."""
    from sw.replay.driver import ReplayDriver

    rb = ReplayDriver(device, timeout=1e-3)          # waits for the clearing sweep after reset
    rm = rb.register_map
    cfg = rb.config
    rng = np.random.default_rng(5)
    log = [cfg.to_dict()]

    def step(name, fn, *args, **kwargs):
        log.append((name, _record(fn, *args, **kwargs), dict(rb.last_status)))

    step("sample empty", rb.sample, 4, 0.4)
    step("seed", rb.seed, 2026)
    step("insert max", rb.insert, count=150)
    pr = rng.uniform(0, 4, 900)
    pr[::97] = 1e5                                    # above the leaf format: saturates
    step("insert", rb.insert, pr)                     # 1050 in all: wraps
    step("state", lambda: (rb.size, rb.write_pointer, rb.total(), rb.max_priority))
    for b in (1, 17, 64):
        step(f"sample prng {b}", rb.sample, b, 0.5)
        step(f"sample host {b}", rb.sample, b, 0.7, targets=rng.random(b))
    idx = rng.integers(0, cfg.capacity, 64)
    step("update", rb.update, idx, priorities=rng.uniform(0, 8, 64))
    step("update chunks", rb.update, rng.integers(0, cfg.capacity, 150),
         priorities=rng.uniform(0, 2, 150))
    step("update td", rb.update, idx[:20], rng.normal(0, 2, 20))
    step("read", rb.read, idx)
    for relaxed in (False, True):
        step(f"fused {relaxed}", rb.update_and_sample, rng.integers(0, cfg.capacity, 40),
             None, 48, 0.4, priorities=rng.uniform(0, 3, 40), relaxed=relaxed)
        step(f"fused host {relaxed}", rb.update_and_sample, rng.integers(0, cfg.capacity, 64),
             rng.normal(0, 3, 64), 8, 1.0, targets=rng.random(8), relaxed=relaxed)
    step("bad batch (hardware)", rb._run, __import__("sw.replay.spec", fromlist=["x"])
         .ReplayOp.SAMPLE, 0)
    step("reset", rb.reset)
    step("sample after reset", rb.sample, 2, 0.4)
    step("state after reset", lambda: (rb.size, rb.write_pointer, rb.total(), rb.max_priority))
    poll = ReplayDriver(device, cfg, use_interrupt=False, poll_interval=2e-7, timeout=1e-3)
    log.append(("poll", _record(poll.insert, [1.0, 2.0, 3.0]), dict(poll.last_status)))
    log.append(("poll sample", _record(poll.sample, 5, 0.4), dict(poll.last_status)))
    log.append({r._register.name: int(r) for r in rm if r._register.name.startswith("HW_")})
    return log


def same(a, b, path="log"):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        np.testing.assert_array_equal(a, b, err_msg=path)
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), (path, a, b)
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{path}[{i}]")
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), (path, a, b)
        for k in a:
            same(a[k], b[k], f"{path}.{k}")
    else:
        assert a == b, (path, a, b)
