"""GAE end to end: one batch of rewards/values/dones in, advantages and returns out.

Accelerator: :class:`sw.gae.driver.GaeDriver` ``compute`` on the shipped Alveo kernel
``gae_kernel_n8`` (8 PEs, 64 trajectories x 1024 steps), host code timed against
:class:`sw.driver.stub.InstantDevice` (quantization, packing, register writes, unpacking,
dequantization), the bytes it moves through the PCIe model, the run's cycles
(:func:`sw.gae.spec.run_cycles`) plus the window shell's copies.

CPU baselines on the same float32 arrays, results float32 ``[T, N]``:

* ``numba``: the reverse scan over ``[T, N]`` jitted (``fastmath``), the strongest
  straightforward CPU code (PERF.md);
* ``numpy``: the same loop over T vectorized over N (Stable-Baselines3's shape);
* ``torch``: the loop over T on tensors (CleanRL's shape), if torch is installed.

The PPO view "time the accelerator adds after the last environment step" is the same figure
today: the driver takes the whole batch once the rollout has ended, so nothing overlaps the
rollout. Hiding the transfers behind the environment steps needs a streaming API (write each
step's rewards and values as they come), which the driver does not have.
"""

import numpy as np

from bench.common import traffic_of

#: (T, N) shapes: HEPPO's 64 x 1024 (as [T, N] = [1024, 64]) and a small PPO batch.
SHAPES = ((1024, 64), (128, 8))
MODULE = "gae_kernel_n8"
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

    _, kcfg = shipped_config(MODULE)
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
        dev = InstantDevice.for_kernel(MODULE)
        drv = GaeDriver(dev)
        db = d.astype(bool)

        def accel():
            return drv.compute(r, v, db, last, GAMMA, LAM)
        traffic = traffic_of(dev, accel)
        times = env.best_of({**fns, "host": accel}, desc=f"gae {T}x{N}")
        host = times.pop("host")
        out.append(env.kernel_row(
            block="gae", module=MODULE,
            config=f"{MODULE} (n_pe={kcfg.n_pe}, 8-bit codes in place), Alveo",
            shape=f"T={T} x N={N}", baselines=times, host_us=host, traffic=traffic,
            run_cycles=run_cycles(kcfg.accel, T, N)))
    env.note("gae PPO view", "the time added after the last env step equals total_us today: "
             "the driver takes the batch after the rollout; overlapping it needs a streaming "
             "API")
    return out
