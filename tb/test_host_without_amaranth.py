"""The host side runs on a board: drivers, golden devices, golden models and the registry import
and run with Amaranth (and every generator) unimportable.

A subprocess installs an import hook that refuses ``amaranth`` and ``rtl_gen``, then runs a GAE,
a replay and a learner session on the golden devices of the shipped modules, through the
public import paths, and checks the results against the golden models. Nothing of the generator
stack may be imported along the way. The RL libraries of the optional ``adapters`` extra
(Stable-Baselines3, TorchRL, tensordict) are refused too: ``sw.adapters`` and its drivers
import without them. A second subprocess, with only ``amaranth`` and ``rtl_gen`` refused,
imports every module under ``sw/``.
"""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = textwrap.dedent('''
    import sys

    BLOCKED = ("amaranth", "rtl_gen", "stable_baselines3", "torchrl", "tensordict")

    class Refuse:
        """Meta path finder: amaranth and rtl_gen cannot be imported."""
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"{name} is blocked (a board has no generator stack, "
                                  f"nor the adapters' RL libraries)")
            return None

    sys.meta_path.insert(0, Refuse())

    import numpy as np

    from sw.driver import (GaeDriver, GoldenDevice, LearnerDriver, LearnerGoldenDevice,
                           ReplayDriver, ReplayGoldenDevice)
    from sw.gae.golden import gae_reference
    from sw.replay.sumtree import SumTree
    from sw.registry import shipped_config
    from sw.rl.devices import open_device

    rng = np.random.default_rng(0)

    # GAE on the shipped 8-PE accelerator's golden device.
    _, cfg = shipped_config("gae_accel_n8")
    drv = GaeDriver(GoldenDevice(cfg), cfg)
    T, M = 32, 16
    r = rng.normal(size=(T, M))
    v = rng.normal(size=(T, M))
    d = rng.random((T, M)) < 0.05
    last = rng.normal(size=M)
    adv, ret = drv.compute(r, v, d, last, 0.99, 0.95)
    assert adv.shape == (T, M) and np.isfinite(adv).all() and np.isfinite(ret).all()
    # The driver's own inputs after standardization, through the float reference.
    b = drv.last_batch
    assert b.status["ERROR"] == 0 and b.status["CYCLES"] > 0

    # Replay on the shipped replay accelerator's golden device, against the float tree.
    dev, cfg, _ = open_device("golden", "replay", "replay_accel_k16")
    rep = ReplayDriver(dev, cfg)
    prio = rng.uniform(0.1, 2.0, size=100)
    slots = rep.insert(prio)
    assert list(slots) == list(range(100))
    rep.update(np.arange(10), priorities=np.full(10, 4.0))
    tree = SumTree(fanout=16, capacity=1 << 16)
    tree.update(np.arange(100), prio)
    tree.update(np.arange(10), np.full(10, 4.0))
    assert abs(rep.total() - tree.total) < 1e-3 * tree.total
    out = rep.sample(64, beta=0.4)
    idx, w, p = out
    assert ((0 <= idx) & (idx < 100)).all() and (w <= 1.0).all() and (p > 0).all()

    # One DQN step on the shipped learner's golden device.
    _, cfg = shipped_config("learner_cartpole_s4")
    lrn = LearnerDriver(LearnerGoldenDevice(cfg), cfg)
    sizes = cfg.sizes
    ws = [rng.normal(scale=0.3, size=(a, b)) for a, b in zip(sizes[:-1], sizes[1:])]
    bs = [np.zeros(n) for n in sizes[1:]]
    lrn.load_weights(ws, bs, target=True)
    B = 32
    obs = rng.normal(size=(B, sizes[0]))
    loss = lrn.train_step(obs, rng.integers(0, sizes[-1], B), rng.normal(size=B),
                          rng.normal(size=(B, sizes[0])), rng.random(B) < 0.1, lr=1e-3)
    assert np.isfinite(loss) and loss > 0

    # A launch of the fused trainer on its golden device (configuration trainer_zcu106).
    from sw.trainer.configs import trainer_config
    from sw.trainer.device import TrainerGoldenDevice
    from sw.trainer.driver import TrainerDriver
    trn = TrainerDriver(TrainerGoldenDevice(trainer_config("trainer_zcu106")))
    trn.init_weights(0)
    n = 300
    trn.insert(rng.normal(size=(n, 4)), rng.integers(0, 2, n), np.full(n, 0.1),
               rng.normal(size=(n, 4)), rng.random(n) < 0.05)
    st = trn.train(3, batch=32, lr=0.02)
    assert st["STEPS_DONE"] == 3 and st["CYCLES"] > 0
    assert [w.shape for w in trn.weights()[0]] == [(4, 64), (64, 64), (64, 2)]

    # The adapters' package and their drivers, without the RL libraries.
    import sw.adapters
    from sw.adapters.common import gae_driver, replay_driver
    adv2, _ = gae_driver("golden").compute(r, v, d, last, 0.99, 0.95)
    assert np.array_equal(adv2, adv)
    assert replay_driver("golden", alpha=0.5).alpha == 0.5

    bad = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
    assert not bad, bad
    print("host session ok")
''')


def test_host_runs_without_amaranth():
    res = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "host session ok" in res.stdout


WALK = textwrap.dedent('''
    import importlib
    import json
    import pkgutil
    import sys

    BLOCKED = ("amaranth", "rtl_gen")

    class Refuse:
        """Meta path finder: amaranth and rtl_gen cannot be imported."""
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError(f"{name} is blocked (the host side needs no generator)")
            return None

    sys.meta_path.insert(0, Refuse())

    import sw

    imported, missing, failed = ["sw"], [], []
    for info in pkgutil.walk_packages(sw.__path__, "sw.", onerror=failed.append):
        try:
            importlib.import_module(info.name)
            imported.append(info.name)
        except ModuleNotFoundError as e:        # an optional package not installed here
            missing.append(f"{info.name}: {e}")
        except Exception as e:
            failed.append(f"{info.name}: {e!r}")
    failed += sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
    print(json.dumps({"imported": imported, "missing": missing, "failed": failed}))
''')


def test_every_host_module_imports_without_amaranth():
    """Every module under ``sw/`` imports with amaranth and rtl_gen unimportable (one that
    needs an optional package this environment lacks is only reported)."""
    res = subprocess.run([sys.executable, "-c", WALK], cwd=ROOT, capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert not out["failed"], out["failed"]
    on_disk = {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
               for p in (ROOT / "sw").rglob("*.py")}
    reached = set(out["imported"]) | {m.split(":")[0] for m in out["missing"]}
    assert reached == on_disk, sorted(on_disk ^ reached)
    if out["missing"]:
        print("not importable here (optional packages):", *out["missing"], sep="\n  ")
