"""The Stable-Baselines3 adapter (:mod:`sw.adapters.sb3`) against SB3's own ``RolloutBuffer``
and the project's driver on the same data (random batches and a CartPole rollout), on the
golden device, through a PYNQ device spec and on the Verilated RTL, and one short PPO
learning run.

Accuracy targets are those of docs/gae.md ("Accuracy"): relative RMS error <= 3 % with the
shipped 8-bit codes, <= 0.1 % with 16-bit codes, at gamma = 0.99, lambda = 0.95.
"""

import gymnasium as gym
import numpy as np
import pytest
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.logger import configure

from sw.adapters.sb3 import AcceleratedRolloutBuffer
from sw.driver import GaeDriver, GoldenDevice
from sw.gae.golden import gae_reference
from sw.gae.spec import GaeCoreConfig
from sw.rollouts import collect

GAMMA, LAM = 0.99, 0.95
SPACES = (gym.spaces.Box(-1.0, 1.0, (4,), np.float32), gym.spaces.Discrete(2))


def rel(x, ref):
    return float(np.sqrt(np.mean((x - ref) ** 2) / np.mean(ref ** 2)))


def random_batch(rng, T, M):
    """SB3's buffer contents: rewards, values, episode_starts [T, M], last values, dones."""
    starts = rng.random((T, M)) < 0.05
    starts[0] = True
    values = 2.0 * np.cumsum(rng.normal(scale=0.3, size=(T, M)), axis=0) + 1.0
    return (rng.normal(size=(T, M)), values, starts, values[-1] + rng.normal(size=M),
            rng.random(M) < 0.3)


def cartpole_batch(T, M):
    """A CartPole-v1 rollout (random policy, linear critic) in SB3's flag convention."""
    ro = collect(num_envs=M, num_steps=T, gamma=GAMMA, seed=3)
    starts = np.vstack([np.ones((1, M), bool), ro.dones[:-1]])
    return ro.rewards, ro.values, starts, ro.last_values, ro.dones[-1]


def fill(buf, batch):
    rewards, values, starts, last, dones = batch
    buf.rewards[:] = rewards
    buf.values[:] = values
    buf.episode_starts[:] = starts
    buf.compute_returns_and_advantage(torch.as_tensor(last, dtype=torch.float32)[:, None],
                                      dones)
    return buf


def buffers(T, M, **kw):
    ref = RolloutBuffer(T, *SPACES, gamma=GAMMA, gae_lambda=LAM, n_envs=M)
    acc = AcceleratedRolloutBuffer(T, *SPACES, gamma=GAMMA, gae_lambda=LAM, n_envs=M, **kw)
    return ref, acc


@pytest.mark.parametrize("data", ["random", "cartpole"])
def test_equals_sb3_within_the_quantization_error(data):
    T, M = 128, 8
    batch = random_batch(np.random.default_rng(1), T, M) if data == "random" \
        else cartpole_batch(T, M)
    ref, acc = buffers(T, M)
    fill(ref, batch)
    fill(acc, batch)
    assert acc.accelerator_runs >= 1 and acc.gae.last_status["CYCLES"] > 0
    assert acc.advantages.dtype == np.float32 and acc.returns.dtype == np.float32
    assert rel(acc.advantages, ref.advantages) <= 0.03
    assert rel(acc.returns, ref.returns) <= 0.03
    # SB3's own buffer is textbook GAE (float32): the library's reference in SB3's convention.
    rewards, values, starts, last, dones = batch
    ended = np.vstack([starts[1:], dones[None]])
    adv, ret = gae_reference(rewards, values, ended, last, GAMMA, LAM)
    np.testing.assert_allclose(ref.advantages, adv, rtol=1e-4, atol=1e-4)
    # ... and the adapter is the project's driver on the same data, bit for bit.
    cfg = acc.gae.config
    drv = GaeDriver(GoldenDevice(cfg), cfg)
    adv, ret = drv.compute(rewards.astype(np.float32), values.astype(np.float32),
                           last_values=torch.as_tensor(last, dtype=torch.float32).numpy(),
                           gamma=GAMMA, lam=LAM, episode_starts=starts, next_done=dones)
    np.testing.assert_array_equal(acc.advantages, adv.astype(np.float32))
    np.testing.assert_array_equal(acc.returns, ret.astype(np.float32))


def test_sixteen_bit_codes_meet_the_tighter_target():
    cfg = GaeCoreConfig(n_pe=8, max_trajectories=8, capacity=256, code_bits=16)
    T, M = 128, 8
    batch = cartpole_batch(T, M)
    ref, acc = buffers(T, M, gae=GaeDriver(GoldenDevice(cfg), cfg))
    fill(ref, batch)
    fill(acc, batch)
    assert rel(acc.advantages, ref.advantages) <= 1e-3
    assert rel(acc.returns, ref.returns) <= 1e-3


def test_runs_on_a_pynq_device_spec(monkeypatch, tmp_path):
    """The same buffer on a device spec: ``pynq:BITFILE`` opens the overlay (a fake pynq over
    a golden device's memory) and reads the configuration back from the HW_* registers."""
    from driver_util import fake_pynq_overlay

    from sw.registry import shipped_config
    from sw.rl import devices

    module = "gae_accel_n8"
    _, cfg = shipped_config(module)
    fake_pynq_overlay(monkeypatch, GoldenDevice(cfg), "gae_accel_0", module)
    monkeypatch.setattr(devices, "_OVERLAYS", {})
    for name in ("gae.bit", "gae.hwh"):          # the spec's files must exist
        (tmp_path / name).write_bytes(b"")
    T, M = 16, 4
    batch = random_batch(np.random.default_rng(2), T, M)
    ref, acc = buffers(T, M, gae=f"pynq:{tmp_path / 'gae.bit'}")
    assert (acc.gae.config.n_pe, acc.gae.config.depth) == (cfg.n_pe, cfg.depth)   # read back
    fill(ref, batch)
    fill(acc, batch)
    assert rel(acc.advantages, ref.advantages) <= 0.03


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match=r"T=2000 steps x M=64 trajectories do not fit"):
        AcceleratedRolloutBuffer(2000, *SPACES, n_envs=64)
    with pytest.raises(ValueError, match="gae must be a GaeDriver or a device spec"):
        AcceleratedRolloutBuffer(16, *SPACES, gae=42)
    with pytest.raises(ValueError, match="device spec must be 'golden'"):
        AcceleratedRolloutBuffer(16, *SPACES, gae="fpga")
    cfg = GaeCoreConfig(n_pe=8, max_trajectories=8, capacity=64)
    with pytest.raises(ValueError, match="driver options"):
        AcceleratedRolloutBuffer(16, *SPACES, gae=GaeDriver(GoldenDevice(cfg), cfg),
                                 driver_kwargs={"units": "caller"})


@pytest.fixture
def one_thread():
    """torch on one thread: the 2-core machine is shared (no wall-clock is asserted)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def test_sb3_ppo_trains_cartpole_through_the_accelerator(one_thread, tmp_path):
    """A short learning run (2,048 steps, 4 iterations): SB3's PPO with the adapter as its
    rollout buffer runs, every iteration's GAE goes through the accelerator, and what it
    learns from is finite. The learning result of a longer run is in docs/use_from_rl.md."""
    env = make_vec_env("CartPole-v1", n_envs=4, seed=0)
    model = PPO("MlpPolicy", env, n_steps=128, batch_size=128, n_epochs=2, seed=0,
                device="cpu", rollout_buffer_class=AcceleratedRolloutBuffer,
                rollout_buffer_kwargs={"gae": "golden"})
    model.set_logger(configure(str(tmp_path), []))   # not SB3's default: a new /tmp/SB3-* folder
    model.learn(2048)
    buf = model.rollout_buffer
    assert isinstance(buf, AcceleratedRolloutBuffer)
    assert buf.accelerator_runs >= 4                 # one call (or more, retried) per rollout
    assert np.isfinite(buf.advantages).all() and np.isfinite(buf.returns).all()
    assert len(model.ep_info_buffer) > 0
    assert all(np.isfinite(e["r"]) for e in model.ep_info_buffer)


@pytest.mark.slow
def test_runs_on_the_verilated_rtl():
    """The buffer given a driver on the Verilated RTL (:func:`sw.driver.open_sim`) computes
    bit for bit what the same buffer computes on the golden device."""
    from sw.driver.sim_process import open_sim
    from sw.registry import shipped_config

    _, cfg = shipped_config("gae_accel_n8")
    T, M = 16, 4
    batch = random_batch(np.random.default_rng(5), T, M)
    gold = fill(buffers(T, M, gae=GaeDriver(GoldenDevice(cfg), cfg))[1], batch)
    with open_sim("gae_accel_n8", quiet=True) as dev:
        rtl = fill(buffers(T, M, gae=GaeDriver(dev))[1], batch)
    np.testing.assert_array_equal(rtl.advantages, gold.advantages)
    np.testing.assert_array_equal(rtl.returns, gold.returns)
