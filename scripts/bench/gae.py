"""GAE end to end: one batch of rewards/values/dones in, advantages and returns out.

Accelerator: :class:`sw.gae.driver.GaeDriver` ``compute`` on the shipped Alveo kernels
``gae_kernel_n8`` (8 PEs, 64 trajectories x 1024 steps, 128-bit window words) and
``gae_kernel_n64`` (64 PEs, 512-bit window words: a word of codes is one m_axi beat, no
padding), host code timed against
:class:`sw.driver.stub.InstantDevice` (quantization, packing, register writes, unpacking,
dequantization), the bytes it moves through the PCIe model, the run's cycles
(:func:`sw.gae.spec.run_cycles`) plus the window shell's copies.

CPU baselines on the same float32 arrays, results float32 ``[T, N]``:

* ``numba``: the reverse scan over ``[T, N]`` jitted (``fastmath``), the strongest
  straightforward CPU code (PERF.md);
* ``numpy``: the same loop over T vectorized over N (Stable-Baselines3's shape);
* ``torch``: the loop over T on tensors (CleanRL's shape), if torch is installed.

The PPO view (:func:`stream_rows`): the rollout pushes each step's codes towards the
accelerator as it is collected (:meth:`sw.gae.driver.GaeDriver.stream`); one row gives the time
after the last environment step (its push and ``finish``: the rows not yet written, the
bootstrap row, result registers, run, read-back, de-quantization), another the whole
iteration (every push too); rows for the shipped Alveo kernels (PCIe) and the 64-PE
accelerator (ZCU106), against numba GAE on the whole batch.
"""

import numpy as np

from bench.common import traffic_of

#: (T, N) shapes: HEPPO's 64 x 1024 (as [T, N] = [1024, 64]) and a small PPO batch.
SHAPES = ((1024, 64), (128, 8))
#: The shipped Alveo kernels of the batch rows (the first is HEPPO's 8 PEs).
MODULES = ("gae_kernel_n8", "gae_kernel_n64")
GAMMA, LAM = 0.99, 0.95


def numpy_gae(r, v, d, last, gamma, lam):
    """The reverse scan vectorized over the trajectories (float32)."""
    T, N = r.shape
    adv = np.empty_like(r)
    acc = np.zeros(N, r.dtype)
    nxt = last
    g, gl = r.dtype.type(gamma), r.dtype.type(gamma * lam)
    for t in range(T - 1, -1, -1):
        nonterm = 1 - d[t]
        acc = r[t] + g * nxt * nonterm - v[t] + gl * nonterm * acc
        adv[t] = acc
        nxt = v[t]
    return adv, adv + v


def make_numba_gae(numba):
    """The jitted reverse scan, or None without numba."""
    if numba is None:
        return None

    @numba.njit(cache=False, fastmath=True)
    def gae(r, v, d, last, gamma, lam, adv, ret):
        T, N = r.shape
        g = np.float32(gamma)
        gl = np.float32(gamma * lam)
        acc = np.zeros(N, np.float32)
        for t in range(T - 1, -1, -1):
            for n in range(N):
                nxt = last[n] if t == T - 1 else v[t + 1, n]
                nonterm = np.float32(1.0) - d[t, n]
                acc[n] = r[t, n] + g * nxt * nonterm - v[t, n] + gl * nonterm * acc[n]
                adv[t, n] = acc[n]
                ret[t, n] = acc[n] + v[t, n]
    return gae


def torch_gae(torch):
    """CleanRL's loop on tensors, or None without torch."""
    if torch is None:
        return None

    def gae(r, v, d, last, gamma, lam):
        T = r.shape[0]
        adv = torch.empty_like(r)
        acc = torch.zeros_like(last)
        nxt = last
        for t in range(T - 1, -1, -1):
            nonterm = 1.0 - d[t]
            acc = r[t] + gamma * nxt * nonterm - v[t] + gamma * lam * nonterm * acc
            adv[t] = acc
            nxt = v[t]
        return adv, adv + v
    return gae


def _torch():
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(1)
    return torch


def batch(T, N, seed=0):
    """A float32 rollout: rewards, values, dones (float 0/1), last values."""
    rng = np.random.default_rng(seed)
    r = rng.normal(size=(T, N)).astype(np.float32)
    v = rng.normal(size=(T, N)).astype(np.float32)
    d = (rng.random((T, N)) < 0.01).astype(np.float32)
    last = rng.normal(size=N).astype(np.float32)
    return r, v, d, last


def rows(quick: bool, env, shapes=None) -> list:
    """One row per shape (the module docstring)."""
    from sw.driver import GaeDriver, InstantDevice
    from sw.gae.golden import gae_reference
    from sw.gae.spec import run_cycles
    from sw.registry import shipped_config

    torch = _torch()
    nb = make_numba_gae(env.numba)
    th = torch_gae(torch)
    out = []
    for T, N in shapes or SHAPES:
        r, v, d, last = batch(T, N)
        ref_adv, ref_ret = gae_reference(r, v, d.astype(bool), last, GAMMA, LAM)
        fns = {"numpy": lambda: numpy_gae(r, v, d, last, GAMMA, LAM)}
        if nb is not None:
            adv, ret = np.empty_like(r), np.empty_like(r)
            fns["numba"] = lambda: nb(r, v, d, last, GAMMA, LAM, adv, ret)
            fns["numba"]()
            np.testing.assert_allclose(adv, ref_adv, rtol=1e-3, atol=1e-3)
        if th is not None:
            tr, tv, td, tl = (torch.from_numpy(x) for x in (r, v, d, last))
            fns["torch"] = lambda: th(tr, tv, td, tl, GAMMA, LAM)
        np.testing.assert_allclose(fns["numpy"]()[0], ref_adv, rtol=1e-3, atol=1e-3)
        db = d.astype(bool)
        res = (np.empty_like(r), np.empty_like(r))       # as the numba baseline's
        accels, traffic = {}, {}
        for module in MODULES:
            dev = InstantDevice.for_kernel(module)
            # The stub's results are zeros, whose error no bound accepts: one run per call,
            # as a batch that needs no refinement (one costs about a call more: docs/gae.md)
            drv = GaeDriver(dev, result_tolerance=None)
            accels[module] = (lambda drv=drv: drv.compute(r, v, db, last, GAMMA, LAM,
                                                          out=res))
            # after a batch of other scales (as in PPO: every batch its own registers)
            traffic[module] = traffic_of(dev, accels[module], before=lambda drv=drv: drv.compute(
                r * 1.5, v * 0.5, db, last, GAMMA, LAM, out=res))
        times = env.best_of({**fns, **accels}, desc=f"gae {T}x{N}")
        for module in MODULES:
            host = times.pop(module)
            _, kcfg = shipped_config(module)
            out.append(env.kernel_row(
                block="gae", module=module,
                config=f"{module} (n_pe={kcfg.n_pe}, {kcfg.axi_data_width}-bit words, 8-bit "
                f"codes in place), Alveo", shape=f"T={T} x N={N}", baselines=dict(times),
                host_us=host, traffic=traffic[module],
                run_cycles=run_cycles(kcfg.accel, T, N)))
    env.note("gae refinement", "these rows time one kernel run per call; the default driver "
             "(result_tolerance 0.03) runs a batch's error as a second batch when its error "
             "bound exceeds 3 % (about half of random batches over the promised ranges, 1.8 "
             "runs per call on average: scripts/gae_accuracy.py, docs/gae.md), which adds about "
             "one call's host, bus and kernel time to those")
    env.note("gae PPO view", "the batch rows are compute() after the rollout; the streamed "
             "rows are the time left after the last environment step when the rollout pushes "
             "each step (GaeDriver.stream)")
    return out + stream_rows(quick, env, shapes)


#: Shipped configurations of the streaming rows: (module, bus model).
STREAM_CONFIGS = (("gae_kernel_n8", "alveo"), ("gae_kernel_n64", "alveo"),
                  ("gae_accel_n64", "zcu106"))


def _stub(module):
    """An :class:`~sw.driver.stub.InstantDevice` of a shipped GAE kernel or accelerator."""
    from sw.driver import InstantDevice
    from sw.gae.spec import gae_register_map, hw_info_values
    from sw.registry import shipped_config

    _, cfg = shipped_config(module)
    if hasattr(cfg, "accel"):
        return InstantDevice.for_kernel(module), cfg.accel
    return InstantDevice(gae_register_map(cfg), hw_info_values(cfg), 1 << cfg.mem_addr_bits), cfg


def stream_rows(quick: bool, env, shapes=None) -> list:
    """The PPO view, two rows per configuration and shape. The rollout pushes each step into
    the accelerator (:meth:`sw.gae.driver.GaeDriver.stream`: rows staged on the host and
    written ``FLUSH_ROWS`` at a time).

    * **after the last step**: the last step's push and ``finish`` (the unwritten rows and the
      bootstrap row, the result registers, the run, the read-back, the de-quantization):
      what the accelerator adds between the last environment step and the advantages;
    * **whole iteration**: that plus the other ``T - 1`` pushes, host and bus, which the
      rollout pays step by step (the driver's writes are synchronous): the GAE cost of one
      PPO iteration, against numba GAE on the whole batch after the rollout, which costs the
      rollout nothing.

    ``host_us``: the calls on the instant stub; ``bus_us``: what they move; ``kernel_us``:
    the run (and, on the Alveo kernel, the window shell's copies of the transfers) at the
    estimated clock. Timed in the same rounds as the baselines."""
    import time
    import warnings

    from sw.driver import GaeDriver
    from sw.gae.driver import ClippingWarning
    from sw.gae.spec import run_cycles
    from sw.gae.stream import FLUSH_ROWS
    from sw.registry import shipped_config

    from bench.common import _calls_per_round, window_copy_cycles

    nb = make_numba_gae(env.numba)
    out = []
    for module, bus_name in STREAM_CONFIGS:
        dev, cfg = _stub(module)
        _, shipped = shipped_config(module)
        hz, _ = env.clock(module)
        bus = env.bus(bus_name)
        for T, N in shapes or SHAPES:
            r, v, d, last = batch(T, N, seed=1)
            r64, v64, db, last64 = (np.asarray(x, np.float64) for x in (r, v, d, last))
            db = db.astype(bool)
            other = (r64 * 1.5, v64 * 0.5, last64 * 1.5)     # a batch of other scales
            drv = GaeDriver(dev, cfg, result_tolerance=None)     # as in rows()
            base = {"numpy": lambda: numpy_gae(r, v, d, last, GAMMA, LAM)}
            if nb is not None:
                adv, ret = np.empty_like(r), np.empty_like(r)
                base = {"numba": lambda: nb(r, v, d, last, GAMMA, LAM, adv, ret)}
                base["numba"]()
            res = (np.empty_like(r), np.empty_like(r))   # as the numba baseline's

            def pushes(rr=r64, vv=v64):
                """A stream with the first T - 1 steps pushed; seconds per push."""
                s = drv.stream(N, T, GAMMA, LAM)
                p0 = time.perf_counter()
                for t in range(T - 1):
                    s.push(rr[t], vv[t], db[t])
                return s, (time.perf_counter() - p0) / max(1, T - 1)

            def after(s, rr=r64, vv=v64, ll=last64):
                """The last step's push and finish."""
                s.push(rr[T - 1], vv[T - 1], db[T - 1])
                s.finish(ll, out=res)

            s, _ = pushes()                      # the first stream is the batch path
            after(s)
            reps = {name: _calls_per_round(fn, 2e-3) for name, fn in base.items()}
            best = {k: np.inf for k in (*base, "after", "push")}
            for _ in env.progress(range(env.rounds), desc=f"gae stream {module} {T}x{N}",
                                  leave=False):
                for name, fn in base.items():
                    t0 = time.perf_counter()
                    for _ in range(reps[name]):
                        fn()
                    best[name] = min(best[name], (time.perf_counter() - t0) / reps[name])
                s, push = pushes()
                best["push"] = min(best["push"], push)
                t0 = time.perf_counter()
                after(s)
                best["after"] = min(best["after"], time.perf_counter() - t0)
            with warnings.catch_warnings():       # ranges fixed from the other batch clip
                warnings.simplefilter("ignore", ClippingWarning)
                s, _ = pushes(*other[:2])       # a batch of other scales first, as in PPO
                after(s, *other)
                dev.traffic.reset()
                s, _ = pushes()
                during = _copy(dev.traffic)
                dev.traffic.reset()
                after(s)
                fin = _copy(dev.traffic)
            cycles = run_cycles(cfg, T, N)
            copies = push_copies = 0
            if hasattr(shipped, "accel"):
                copies = window_copy_cycles(shipped, fin)
                push_copies = window_copy_cycles(shipped, during)
            name = min(base, key=lambda k: best[k])
            env.note(f"gae stream {module} T={T} x N={N}",
                     f"after the last step: {fin.writes} writes ({fin.bytes_written:,} B), "
                     f"{fin.reads} reads ({fin.bytes_read:,} B), "
                     f"{fin.reg_writes + fin.reg_reads} register accesses, {cycles:,} run + "
                     f"{copies:,} copy cycles; the other {T - 1} pushes: host "
                     f"{best['push'] * 1e6:,.1f} us each, {during.writes} writes "
                     f"({during.bytes_written:,} B, rows written {FLUSH_ROWS} at a time) = bus "
                     f"{bus.time_us(during) / max(1, T - 1):,.2f} us per step, "
                     f"{push_copies:,} copy cycles in all")
            kind = bus.name.split(" (")[0]
            after_us = (best["after"] * 1e6, bus.time_us(fin), (cycles + copies) / hz * 1e6)
            out.append(env.row(
                block="gae", config=f"{module} streamed: time after the last env step, {kind}",
                shape=f"T={T} x N={N}", baseline=name, baseline_us=best[name] * 1e6,
                host_us=after_us[0], bus_us=after_us[1], kernel_us=after_us[2]))
            out.append(env.row(
                block="gae", config=f"{module} streamed: whole iteration ({T} pushes + "
                f"finish), {kind}", shape=f"T={T} x N={N}", baseline=name,
                baseline_us=best[name] * 1e6,
                host_us=after_us[0] + best["push"] * (T - 1) * 1e6,
                bus_us=after_us[1] + bus.time_us(during),
                kernel_us=after_us[2] + push_copies / hz * 1e6))
    return out


def _copy(t):
    from sw.driver.stub import TrafficCounter
    return TrafficCounter(**t.as_dict(), transfers=list(t.transfers))
