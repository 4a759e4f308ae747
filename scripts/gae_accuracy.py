"""Relative RMS error of GaeDriver's advantages and returns against textbook GAE (issue #14).

For each code width (8, 16), result mode (8/16-bit codes written back in place, or the PE's
full-precision words), data set and (gamma, lambda) in (0.99, 0.95), (0.9, 0), (1, 1), the
driver runs on the golden device (bit-exact with the RTL) in its default units (the caller's)
and its results are compared with :func:`sw.golden.gae.gae_reference` on the same float64
inputs: ``sqrt(mean((x - ref)**2) / mean(ref**2))``. A last block repeats the 8-bit in-place
case in HEPPO's standardized units against textbook GAE of the caller's rewards (what the
driver returned by default before issue #14).

Data: ``random`` -- 64 trajectories x 256 steps, unit normal rewards, values a random walk
(step 0.6) around 1, episode ends with probability 0.05 per step (as ``tb/driver_util.rollout``);
``cartpole`` -- 16 CartPole-v1 environments x 256 steps, random policy, linear critic fitted
to the Monte-Carlo returns (:func:`sw.rollouts.collect`), reward +1 per step.

Usage::

    PYTHONPATH=. python scripts/gae_accuracy.py
"""

import math
import warnings

import numpy as np

from sw.driver import GaeDriver, GoldenDevice
from sw.gae.golden import gae_reference
from sw.gae.spec import GaeCoreConfig
from sw.registry import shipped_config

PAIRS = ((0.99, 0.95), (0.9, 0.0), (1.0, 1.0))


def rel_rms(x, ref):
    return math.sqrt(np.mean((x - ref) ** 2) / np.mean(ref ** 2))


def random_batch(T=256, M=64, seed=1):
    rng = np.random.default_rng(seed)
    dones = rng.random((T, M)) < 0.05
    rewards = rng.normal(size=(T, M))
    values = 2.0 * np.cumsum(rng.normal(scale=0.3, size=(T, M)), axis=0) + 1.0
    last = values[-1] + rng.normal(scale=0.3, size=M)
    return rewards, values, dones, last


def cartpole_batch(T=256, M=16, seed=3):
    from sw.rollouts import collect

    ro = collect("CartPole-v1", num_envs=M, num_steps=T, seed=seed)
    return ro.rewards, ro.values, ro.dones, ro.last_values


def run(cfg, batch, gamma, lam, **kw):
    drv = GaeDriver(GoldenDevice(cfg), cfg, **kw)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        adv, ret = drv.compute(*batch, gamma, lam)
    return adv, ret, drv.last_batch.runs, [w.category.__name__ for w in caught]


def main():
    _, base = shipped_config("gae_accel_n8")
    data = {"random": random_batch(), "cartpole": cartpole_batch()}
    print(f"{'bits':>4} {'results':>7} {'data':>8} {'gamma':>5} {'lam':>4} "
          f"{'adv':>8} {'returns':>8} runs warnings")
    for bits in (8, 16):
        for results in ("inplace", "full"):
            cfg = GaeCoreConfig.from_dict({**base.to_dict(), "code_bits": bits,
                                           "results": results})
            for name, batch in data.items():
                for g, lam in PAIRS:
                    adv, ret, runs, warned = run(cfg, batch, g, lam)
                    ra, rr = gae_reference(*batch, g, lam)
                    print(f"{bits:>4} {results:>7} {name:>8} {g:>5} {lam:>4} "
                          f"{100 * rel_rms(adv, ra):7.3f}% {100 * rel_rms(ret, rr):7.3f}% "
                          f"{runs:>4} {','.join(warned) or '-'}")
    print("standardized units (HEPPO mode): the quantization error, against float GAE of the "
          "standardized rewards and the caller's values:")
    for bits in (8, 16):
        for results in ("inplace", "full"):
            cfg = GaeCoreConfig.from_dict({**base.to_dict(), "code_bits": bits,
                                           "results": results})
            for name, batch in data.items():
                for g, lam in PAIRS:
                    drv = GaeDriver(GoldenDevice(cfg), cfg, units="standardized")
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        adv, ret = drv.compute(*batch, g, lam)
                    zr = drv.last_batch.prepared["standardized_rewards"]
                    ra, rr = gae_reference(zr, *batch[1:], g, lam)
                    print(f"{bits:>4} {results:>7} {name:>8} {g:>5} {lam:>4} "
                          f"{100 * rel_rms(adv, ra):7.3f}% {100 * rel_rms(ret, rr):7.3f}%")
    print("standardized units (HEPPO mode, reward_norm='center') against textbook GAE:")
    for name, batch in data.items():
        for g, lam in PAIRS:
            adv, ret, _, _ = run(base, batch, g, lam, units="standardized")
            ra, _ = gae_reference(*batch, g, lam)
            print(f"   8 inplace {name:>8} {g:>5} {lam:>4} {100 * rel_rms(adv, ra):7.1f}%")


if __name__ == "__main__":
    main()
