"""Relative RMS error of GaeDriver's advantages and returns against textbook GAE.

Every figure is ``sqrt(mean((x - ref)**2) / mean(ref**2))`` of the driver's results on the
golden device (bit-exact with the RTL) in its default units (the caller's) against
:func:`sw.gae.golden.gae_reference` on the same float64 inputs. In-place rows give the
default (refined while the driver's error bound exceeds ``result_tolerance``, 3 %) and, in
brackets, one run without refinement (``result_tolerance=None``); ``runs`` counts the runs of
the default (retries and refinements included).

1. **Table**: code widths 8 and 16, in-place and full-precision results, two data sets and
   (gamma, lambda) in (0.99, 0.95), (0.9, 0), (1, 1). ``random``: 64 trajectories x 256
   steps, unit normal rewards, values a random walk (step 0.6) around 1, episode ends with
   probability 0.05 per step (as ``tb/driver_util.rollout``); ``cartpole``: 16 CartPole-v1
   environments x 256 steps, random policy, linear critic fitted to the Monte-Carlo returns
   (:func:`sw.rollouts.collect`), reward +1 per step.
2. **Hard batches**: values spread 3 times the rewards as independent noise, 4 % episode
   ends, 300 steps x 5 trajectories (10 seeds, the worst); CartPole 5 x 300 at
   gamma = lambda = 1; values 10 times the rewards at gamma = 0 (returns a tenth of the
   advantages); gamma = 0.9999, lambda = 1 over the whole depth (the coefficients' rounding).
3. **Sweep** (``--cases``): random batches over the promised ranges, drawn as
   ``tb/gae/test_refinement.py``'s property test draws them (``tb/gae_cases.synthetic``):
   (gamma, lambda) each 0, 1, uniform in [0, 1] or 1 - 10^U(-5, -1); values' RMS 10^U(-1, 1)
   times the rewards' (independent noise, a random walk, or returns plus noise); rewards
   normal, shifted normal, sparse spikes or +1, times 10^U(-3, 3); episode ends with
   probability 0, 0.001, 0.04 or 0.2; 1, 2, 5, 8, 13 or 64 trajectories, T log-uniform up to
   the depth. The worst errors, the share of batches over 3 %, the share refined and the mean
   runs.
4. HEPPO's standardized units (no refinement: no textbook reference), as before.

Usage::

    PYTHONPATH=. python scripts/gae_accuracy.py [--cases 200]
"""

import argparse
import math
import sys
import warnings
from pathlib import Path

import numpy as np

from sw.driver import GaeDriver, GoldenDevice
from sw.gae.golden import gae_reference
from sw.gae.spec import GaeCoreConfig
from sw.registry import shipped_config

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tb"))
from gae_cases import noisy_values_batch, synthetic  # noqa: E402  (the accuracy tests' batches)

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
    """``(adv, ret, last_batch, warning names)`` of one call."""
    drv = GaeDriver(GoldenDevice(cfg), cfg, **kw)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        adv, ret = drv.compute(*batch, gamma, lam)
    return adv, ret, drv.last_batch, [w.category.__name__ for w in caught]


def errors(cfg, batch, gamma, lam, **kw):
    """``(adv error, returns error, runs, refinements)`` of one call."""
    adv, ret, b, _ = run(cfg, batch, gamma, lam, **kw)
    ra, rr = gae_reference(*batch, gamma, lam)
    return rel_rms(adv, ra), rel_rms(ret, rr), b.total_runs, len(b.refinements)


def both(cfg, batch, gamma, lam):
    """The default and one unrefined run: ``(adv, ret, runs, adv1, ret1, refinements)``."""
    a, r, runs, refinements = errors(cfg, batch, gamma, lam)
    a1, r1, _, _ = errors(cfg, batch, gamma, lam, result_tolerance=None)
    return a, r, runs, a1, r1, refinements


def pct(x):
    return f"{100 * x:7.3f}%"


def table(base):
    data = {"random": random_batch(), "cartpole": cartpole_batch()}
    print(f"{'bits':>4} {'results':>7} {'data':>8} {'gamma':>5} {'lam':>4} "
          f"{'adv':>8} {'returns':>8} runs (one run: adv, returns)")
    for bits in (8, 16):
        for results in ("inplace", "full"):
            cfg = GaeCoreConfig.from_dict({**base.to_dict(), "code_bits": bits,
                                           "results": results})
            for name, batch in data.items():
                for g, lam in PAIRS:
                    a, r, runs, a1, r1, _ = both(cfg, batch, g, lam)
                    one = f"({pct(a1)}, {pct(r1)})" if results == "inplace" else ""
                    print(f"{bits:>4} {results:>7} {name:>8} {g:>5} {lam:>4} "
                          f"{pct(a)} {pct(r)} {runs:>4} {one}")


def hard_batches(base):
    from sw.rollouts import collect

    print("hard batches, 8-bit in place: adv, returns, runs (one run: adv, returns)")
    for g, lam in PAIRS:
        rows = np.array([both(base, noisy_values_batch(seed), g, lam) for seed in range(10)])
        a, r, runs, a1, r1, _ = rows.max(axis=0)
        print(f"  values 3x rewards, 300 x 5, worst of 10 seeds, ({g}, {lam}): {pct(a)} "
              f"{pct(r)} {runs:.0f} ({pct(a1)}, {pct(r1)})")
    ro = collect("CartPole-v1", num_envs=5, num_steps=300, seed=0)
    a, r, runs, a1, r1, _ = both(base, (ro.rewards, ro.values, ro.dones, ro.last_values),
                                 1.0, 1.0)
    print(f"  CartPole 300 x 5, (1, 1): {pct(a)} {pct(r)} {runs} ({pct(a1)}, {pct(r1)})")
    batch = synthetic(1, 300, 5, reward="gauss", value="iid", ratio=10.0)
    a, r, runs, a1, r1, _ = both(base, batch, 0.0, 0.0)
    print(f"  values 10x rewards, 300 x 5, (0, 0): {pct(a)} {pct(r)} {runs} "
          f"({pct(a1)}, {pct(r1)})")
    batch = synthetic(0, base.depth - 1, 1, reward="constant", value="walk", ratio=1.0,
                      p_done=0.0)
    a, r, runs, a1, r1, _ = both(base, batch, 0.9999, 1.0)
    full = GaeCoreConfig.from_dict({**base.to_dict(), "results": "full"})
    af, rf, _, _ = errors(full, batch, 0.9999, 1.0)
    print(f"  reward +1, {base.depth - 1} x 1, (0.9999, 1): {pct(a)} {pct(r)} {runs} "
          f"({pct(a1)}, {pct(r1)}); full-precision results {pct(af)} {pct(rf)}")


def sweep(base, n, seed=0):
    """Random batches over the promised ranges (module docstring)."""
    rng = np.random.default_rng(seed)

    def coef():
        kind = rng.integers(4)
        return (0.0, 1.0, rng.uniform(), 1.0 - 10.0 ** rng.uniform(-5, -1))[kind]

    rows = []
    while len(rows) < n:
        M = int(rng.choice([1, 2, 5, 8, 13, 64]))
        t_max = base.depth // -(-M // base.n_pe) - 1
        T = min(t_max, max(1, round(math.exp(rng.uniform(0, 1.03 * math.log(t_max))))))
        case = dict(seed=int(rng.integers(2 ** 32)), T=T, M=M,
                    reward=str(rng.choice(["gauss", "shifted", "sparse", "constant"])),
                    value=str(rng.choice(["iid", "walk", "critic"])),
                    ratio=10.0 ** rng.uniform(-1, 1), scale=10.0 ** rng.uniform(-3, 3),
                    p_done=float(rng.choice([0.0, 0.001, 0.04, 0.2])))
        g, lam = coef(), coef()
        batch = synthetic(**case)
        ra, rr = gae_reference(*batch, g, lam)
        if not (np.mean(ra ** 2) > 0 and np.mean(rr ** 2) > 0):
            continue                                  # a sparse batch of zeros
        rows.append(both(base, batch, g, lam))
    rows = np.array(rows)
    refined = rows[:, 5] > 0
    print(f"sweep over the promised ranges, {n} batches, 8-bit in place:")
    for name, cols in (("default", (0, 1)), ("one run", (3, 4))):
        worst = rows[:, cols].max(axis=0)
        over = (rows[:, cols].max(axis=1) > 0.03).mean()
        print(f"  {name:>8}: worst adv {pct(worst[0])}, returns {pct(worst[1])}; "
              f"{100 * over:.1f} % of the batches over 3 %")
    print(f"  default: {100 * refined.mean():.1f} % refined ({100 * (rows[:, 5] > 1).mean():.1f}"
          f" % twice), {rows[:, 2].mean():.2f} runs per call on average (retries included)")


def standardized(base):
    data = {"random": random_batch(), "cartpole": cartpole_batch()}
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
                          f"{pct(rel_rms(adv, ra))} {pct(rel_rms(ret, rr))}")
    print("standardized units (HEPPO mode, reward_norm='center') against textbook GAE:")
    for name, batch in data.items():
        for g, lam in PAIRS:
            adv, ret, _, _ = run(base, batch, g, lam, units="standardized")
            ra, _ = gae_reference(*batch, g, lam)
            print(f"   8 inplace {name:>8} {g:>5} {lam:>4} {100 * rel_rms(adv, ra):7.1f}%")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=200,
                    help="batches of the sweep (default 200; 0 skips it)")
    args = ap.parse_args()
    _, base = shipped_config("gae_accel_n8")
    table(base)
    hard_batches(base)
    if args.cases:
        sweep(base, args.cases)
    standardized(base)


if __name__ == "__main__":
    main()
