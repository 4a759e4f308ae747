"""The compiled host kernels come from numba's on-disk cache in a new process: a first process
(an empty ``NUMBA_CACHE_DIR``) compiles every kernel of :data:`MODULES` through the drivers'
host paths and saves them; a second one runs the same calls, loads them all and compiles
nothing (no cache miss on any kernel, no file added to the cache). No wall-clock assertion.

Run as a script (``python tb/test_jit_cache.py``), this file is that process: it prints the
compile statistics of every kernel as JSON."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: The kernel modules (every numba dispatcher in them is checked).
MODULES = ("sw.fixedkernels", "sw.gae.hostkernels", "sw.learner.hostkernels",
           "sw.replay.hostkernels", "sw.trainer.hostkernels")


def _gae_calls(rng):
    """Batches (8- and 16-bit codes, whole and partial words), two streams, a lookup."""
    from sw.driver import GaeDriver, GoldenDevice
    from sw.gae import hostfast
    from sw.gae.spec import GaeCoreConfig
    from sw.registry import shipped_config

    _, n8 = shipped_config("gae_accel_n8")
    for cfg in (n8, GaeCoreConfig.from_dict({**n8.to_dict(), "code_bits": 16})):
        drv = GaeDriver(GoldenDevice(cfg), cfg)
        for T, M in ((24, 16), (20, 13)):
            r, v = rng.normal(size=(T, M)), rng.normal(size=(T, M))
            d, last = rng.random((T, M)) < 0.1, rng.normal(size=M)
            drv.compute(r, v, d, last, gamma=0.99, lam=0.95)
            for _ in range(2):          # the second stream pushes on the first one's scales
                s = drv.stream(M, T, 0.99, 0.95)
                for t in range(T):
                    s.push(r[t], v[t], d[t])
                s.finish(last)
    hostfast.take(rng.normal(size=16), rng.integers(-8, 8, (3, 4)), 8)


def _replay_calls(rng):
    from sw.registry import shipped_config
    from sw.replay.device import ReplayGoldenDevice
    from sw.replay.driver import ReplayDriver

    rb = ReplayDriver(ReplayGoldenDevice(shipped_config("replay_accel_k16")[1]))
    rb.insert(rng.random(64))
    rb.update(rng.integers(0, 64, 16), priorities=rng.random(16))
    rb.sample(16, 0.4)


def _learner_calls(rng):
    """A DQN step (the one-pass batch) and a prepared batch's images (the packing kernels)."""
    from sw.driver import LearnerDriver
    from sw.learner import hostfast
    from sw.learner.device import LearnerGoldenDevice
    from sw.registry import shipped_config

    cfg = shipped_config("learner_cartpole_s4")[1]
    drv = LearnerDriver(LearnerGoldenDevice(cfg), cfg)
    drv.init_weights()
    B = 8
    args = (rng.normal(size=(B, 4)), rng.integers(0, 2, B), rng.normal(size=B),
            rng.normal(size=(B, 4)), rng.random(B) < 0.2)
    drv.train_step(*args, lr=1e-3)
    assert hostfast.batch_images(cfg, drv.prepare(*args, lr=1e-3)) is not None


def _trainer_calls(rng):
    """Records appended (the compiled quantize-and-pack pass)."""
    from sw.registry import shipped_config
    from sw.trainer.device import TrainerGoldenDevice
    from sw.trainer.driver import TrainerDriver

    drv = TrainerDriver(TrainerGoldenDevice(shipped_config("dqn_trainer_zcu106")[1]))
    drv.insert(rng.normal(size=(8, 4)), rng.integers(0, 2, 8), rng.normal(size=8),
               rng.normal(size=(8, 4)), rng.random(8) < 0.2)


def _exercise():
    """Every host path that runs a kernel; the kernels' compile statistics as JSON."""
    import importlib

    import numpy as np
    from numba.core.registry import CPUDispatcher

    from sw.fixed import FixedFormat

    rng = np.random.default_rng(0)
    FixedFormat(16, 8).quantize(rng.normal(size=32))
    _gae_calls(rng)
    _replay_calls(rng)
    _learner_calls(rng)
    _trainer_calls(rng)
    stats = {}
    for name in MODULES:
        for attr, d in vars(importlib.import_module(name)).items():
            if isinstance(d, CPUDispatcher):
                s = d.stats
                stats[f"{name}.{attr}"] = {"signatures": len(d.signatures),
                                           "hits": sum(s.cache_hits.values()),
                                           "misses": sum(s.cache_misses.values())}
    print(json.dumps(stats))


def _cache_files(folder):
    return sorted(str(p.relative_to(folder)) for p in Path(folder).rglob("*")
                  if p.suffix in (".nbi", ".nbc"))


def _run(cache):
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("NUMBA_DISABLE_JIT", None)
    out = subprocess.run([sys.executable, __file__], env=env, cwd=ROOT, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_second_process_compiles_nothing(tmp_path):
    pytest.importorskip("numba")
    first = _run(tmp_path)
    files = _cache_files(tmp_path)
    # the first process reached every kernel, compiled it and saved it
    assert first and all(s["signatures"] > 0 and s["misses"] > 0 for s in first.values()), \
        {k: s for k, s in first.items() if not s["signatures"] or not s["misses"]}
    assert len(files) >= 2 * len(first)          # an index and a data file each, at least
    second = _run(tmp_path)
    assert second.keys() == first.keys()
    missed = {k: s["misses"] for k, s in second.items() if s["misses"]}
    assert not missed, f"compiled again in a new process: {missed}"
    assert sum(s["hits"] for s in second.values()) > 0
    assert _cache_files(tmp_path) == files, "the cache grew in the second process"


if __name__ == "__main__":
    _exercise()
