"""PPO whose advantages come from the GAE accelerator (sw.rl.ppo): it learns CartPole.

The accelerator here is the golden model of the shipped ``gae_accel_n8`` configuration behind
:class:`sw.driver.GaeDriver` (bit-exact with the RTL, see tb/driver), with 8-bit codes in and
8-bit results written back in place, exactly what a board computes.
"""

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("gymnasium")

from sw.gae.golden import gae_reference  # noqa: E402
from sw.rl.ppo import (AcceleratorAdvantages, CpuAdvantages, PPOConfig,  # noqa: E402
                       accelerator, golden_accelerator, plot_curves, train)
from sw.rollouts import collect  # noqa: E402
from sw.gae import spec as gae_spec


def test_ppo_learns_cartpole_with_gae_on_the_golden_accelerator(tmp_path):
    """60k steps (58 iterations of 8 x 128), each rollout streamed into the accelerator step by
    step (GaeDriver.stream): a random policy scores ~22; PPO with the
    accelerator's advantages must pass 120 (158 measured streamed, with the values clipped
    below 1 % in every batch) (175 measured on the development machine, CPU float
    GAE 214 with the same seed; over 3 seeds at 100k steps 234 vs 246). Every batch is one
    accelerator run of exactly ``gae_spec.run_cycles(cfg, 128, 8)`` cycles."""
    adv = golden_accelerator("gae_accel_n8", streaming=True)
    cfg = PPOConfig(total_steps=60_000, seed=0)
    res = train(cfg, adv, progress=False)
    assert res.gae_calls == cfg.iterations == 58
    assert adv.runs == res.gae_calls                 # no batch needed a re-run
    run = gae_spec.run_cycles(adv.driver.config, cfg.num_steps, cfg.num_envs)
    assert adv.cycles == res.gae_calls * run == 58 * 156     # 155 before write_latency 6
    assert adv.streaming and res.push_seconds > 0
    first = np.mean([r for _, r in res.episodes[:20]])
    assert first < 40, first
    assert res.mean_return(20) > 120, res.mean_return(20)
    plot_curves([res], tmp_path / "curve.png")
    assert (tmp_path / "curve.png").stat().st_size > 10_000


def test_accelerator_and_cpu_advantages_agree_on_cartpole_rollouts():
    """Same reward normalisation on both sides ("scale": CartPole's +1 stays 1): the 8-bit
    in-place advantages are within 6 % RMS of the float64 ones, returns within 3 %."""
    ro = collect("CartPole-v1", num_envs=8, num_steps=128, seed=3)
    hw, cpu = golden_accelerator("gae_accel_n8"), CpuAdvantages("scale")
    a_hw, r_hw = hw(ro.rewards, ro.values, ro.dones, ro.last_values, 0.99, 0.95)
    a_cpu, r_cpu = cpu(ro.rewards, ro.values, ro.dones, ro.last_values, 0.99, 0.95)
    a_ref, r_ref = gae_reference(ro.rewards, ro.values, ro.dones, ro.last_values, 0.99, 0.95)
    np.testing.assert_allclose(a_cpu, a_ref, rtol=1e-12)    # the RMS of all-ones rewards is 1
    rel = lambda x, y: np.sqrt(np.mean((x - y) ** 2) / np.mean(y ** 2))  # noqa: E731
    assert rel(a_hw, a_cpu) < 0.06, rel(a_hw, a_cpu)
    assert rel(r_hw, r_cpu) < 0.03, rel(r_hw, r_cpu)


def test_centred_rewards_erase_cartpole_signal():
    """Why the default is "scale": HEPPO's centring turns CartPole's constant reward into 0,
    so the only thing left in the advantages is the critic's own TD error."""
    ro = collect("CartPole-v1", num_envs=4, num_steps=64, seed=1)
    a, _ = CpuAdvantages("center")(ro.rewards, np.zeros_like(ro.values), ro.dones,
                                   np.zeros(4), 0.99, 0.95)
    assert not a.any()


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="num_envs must be a positive integer"):
        PPOConfig(num_envs=0)
    with pytest.raises(ValueError, match="minibatches must divide"):
        PPOConfig(num_envs=3, num_steps=5, minibatches=4)
    with pytest.raises(ValueError, match="gamma must be in"):
        PPOConfig(gamma=1.5)
    with pytest.raises(ValueError, match="module must be a shipped GAE accelerator"):
        golden_accelerator("gae_pe_k2")
    with pytest.raises(TypeError, match="advantages must be callable"):
        train(PPOConfig(total_steps=1024), None)
    assert isinstance(golden_accelerator(), AcceleratorAdvantages)


def test_raw_reward_and_block_advantages_for_heppo_experiments():
    """HEPPO Table III's experiment 1 (CpuAdvantages(None): textbook GAE of the raw rewards),
    3 (the accelerator in the caller's units: that GAE within 8-bit quantization error) and 4
    (rewards block-standardized: a batch of rewards times 5 gives the same advantages)."""
    ro = collect("CartPole-v1", num_envs=8, num_steps=64, seed=2)
    args = (ro.values, ro.dones, ro.last_values, 0.99, 0.95)
    a_ref, r_ref = gae_reference(ro.rewards, *args)
    a_raw, r_raw = CpuAdvantages(None)(ro.rewards, *args)
    np.testing.assert_array_equal(a_raw, a_ref)
    a_hw, _ = accelerator(units="caller")(ro.rewards, *args)
    assert np.sqrt(np.mean((a_hw - a_ref) ** 2) / np.mean(a_ref ** 2)) < 0.03
    block = accelerator(reward_standardization="block")
    a1, _ = block(ro.rewards, *args)
    a5, _ = block(5 * ro.rewards, *args)
    np.testing.assert_array_equal(a1, a5)
    dynamic = accelerator()
    dynamic(ro.rewards, *args)
    assert not np.array_equal(dynamic(5 * ro.rewards, *args)[0], a1)
    with pytest.raises(ValueError, match="reward_norm must be one of center, scale or None, "
                                         "not 'raw'"):
        CpuAdvantages("raw")
