"""DQN with the fused trainer (sw.rl.dqn_trainer) on its golden device: the host only acts and
appends; launches of gradient steps run the loop on the (modeled) card."""

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("gymnasium")

from sw.rl.dqn import DQNConfig, main, plot_curves  # noqa: E402
from sw.rl.dqn_trainer import open_trainer, parse_trainer_spec, train_fused  # noqa: E402
from sw.trainer.schedule import sequential_launch_cycles  # noqa: E402


def test_short_run_accounts_every_launch():
    cfg = DQNConfig(total_steps=400, learning_starts=200, batch=16, target_period=50, seed=2)
    drv = open_trainer("trainer:golden", seed=2)
    res = train_fused(cfg, drv, progress=False)
    assert res.grad_steps == 200                      # one per environment step after 200
    chunks, n, B = 200 // cfg.actor_refresh, cfg.actor_refresh, cfg.batch
    c = drv.config
    # The sequential core's CYCLES of each launch (sw.trainer.schedule): the records arrive
    # at its first boundary (210 at the first launch, which also loads the weights, 10 at
    # the others); with delay 1 a boundary writes a batch back when two are queued.
    want, queued, divide = 0, 0, True
    for launch in range(chunks):
        bounds = []
        for i in range(n + 1):
            w = B if queued > c.delay else 0
            queued -= bool(w)
            k = (210 if launch == 0 else n) if i == 0 else 0
            step = {"batch": B, "divide": divide} if i < n else None
            divide = divide and step is None
            queued += step is not None
            bounds.append((w, k, step))
        want += sequential_launch_cycles(c, bounds, load=launch == 0, final_snapshot=True)
    assert res.learner_cycles == want
    st = drv.stats()
    assert st["consumed"] == cfg.total_steps == drv.produced
    assert st["steps_total"] == 200 and st["snapshot_seq"] == chunks
    assert res.episodes and all(r > 0 for _, r in res.episodes)


def test_device_and_arguments_are_checked(capsys):
    with pytest.raises(ValueError, match="shipped trainer"):
        open_trainer("trainer:sim:learner_kernel_s8")
    with pytest.raises(ValueError, match="trainer:golden"):
        open_trainer("golden")
    with pytest.raises(ValueError, match="trainer:pynq:BITFILE"):
        parse_trainer_spec("trainer:pynq:")
    assert parse_trainer_spec("trainer:xrt:a.xclbin:k") == ("xrt", "a.xclbin", "k")
    with pytest.raises(SystemExit):
        main(["--device", "trainer:xrt", "--backend", "accel"])
    assert "--device" in capsys.readouterr().err
    drv = open_trainer("trainer:golden")
    with pytest.raises(ValueError, match="chunk"):
        train_fused(DQNConfig(total_steps=1200, train_freq=4), drv, chunk=6, progress=False)
    with pytest.raises(TypeError, match="DQNConfig"):
        train_fused({}, drv)


@pytest.mark.slow
def test_dqn_learns_cartpole_on_the_golden_trainer(tmp_path):
    """7k environment steps (6k gradient steps in 600 launches of 10): a random policy scores
    ~22; the fused trainer must pass 150, as the per-call accelerators must
    (tb/rl/test_dqn.py; 208 measured, 156 after 6k steps). Three seeds at 30k steps against the
    CPU program: make dqn-trainer."""
    cfg = DQNConfig(total_steps=7_000, seed=0)
    res = train_fused(cfg, open_trainer("trainer:golden"), progress=False)
    assert res.mean_return(20) > 150, res.mean_return(20)
    plot_curves([res], tmp_path / "curve.png")
    assert (tmp_path / "curve.png").stat().st_size > 10_000
    assert np.isfinite(res.cycles_per_grad_step())
