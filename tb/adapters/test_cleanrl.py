"""The CleanRL adapter (:func:`sw.adapters.cleanrl.compute_gae`) against CleanRL's GAE loop on
the same tensors (random and a CartPole rollout), and against the project's driver."""

import numpy as np
import pytest
import torch

from sw.adapters.cleanrl import compute_gae
from sw.adapters.common import gae_driver
from sw.driver import GaeDriver, GoldenDevice
from sw.rollouts import collect

GAMMA, LAM = 0.99, 0.95


def cleanrl_gae(rewards, values, dones, next_value, next_done, gamma, gae_lambda):
    """CleanRL ppo.py's loop (``dones[t]``: observation t starts an episode)."""
    num_steps = rewards.shape[0]
    advantages = torch.zeros_like(rewards)
    lastgaelam = 0
    for t in reversed(range(num_steps)):
        if t == num_steps - 1:
            nextnonterminal = 1.0 - next_done
            nextvalues = next_value
        else:
            nextnonterminal = 1.0 - dones[t + 1]
            nextvalues = values[t + 1]
        delta = rewards[t] + gamma * nextvalues * nextnonterminal - values[t]
        advantages[t] = lastgaelam = delta + gamma * gae_lambda * nextnonterminal * lastgaelam
    return advantages, advantages + values


def batches():
    rng = np.random.default_rng(0)
    T, M = 128, 8
    starts = (rng.random((T, M)) < 0.05).astype(np.float32)
    values = np.cumsum(rng.normal(scale=0.6, size=(T, M)), axis=0)
    yield "random", (rng.normal(size=(T, M)), values, starts, rng.normal(size=M),
                     (rng.random(M) < 0.3).astype(np.float32))
    ro = collect(num_envs=M, num_steps=T, gamma=GAMMA, seed=5)
    starts = np.vstack([np.zeros((1, M)), ro.dones[:-1]]).astype(np.float32)
    yield "cartpole", (ro.rewards, ro.values, starts, ro.last_values,
                       ro.dones[-1].astype(np.float32))


@pytest.mark.parametrize("name,batch", list(batches()))
def test_compute_gae_equals_cleanrls_loop(name, batch):
    rewards, values, dones, next_value, next_done = (torch.as_tensor(x, dtype=torch.float32)
                                                     for x in batch)
    gae = gae_driver("golden")
    adv, ret = compute_gae(gae, rewards, values, dones, next_value.reshape(1, -1), next_done,
                           GAMMA, LAM)
    ref_adv, ref_ret = cleanrl_gae(rewards, values, dones, next_value, next_done, GAMMA, LAM)
    assert adv.dtype == torch.float32 and adv.shape == rewards.shape
    for x, ref in ((adv, ref_adv), (ret, ref_ret)):
        assert float(((x - ref) ** 2).mean().sqrt() / (ref ** 2).mean().sqrt()) <= 0.03
    # the driver on the same data, CleanRL's flags passed as episode_starts/next_done
    cfg = gae.config
    a, r = GaeDriver(GoldenDevice(cfg), cfg).compute(
        rewards.numpy(), values.numpy(), last_values=next_value.numpy(), gamma=GAMMA, lam=LAM,
        episode_starts=dones.numpy(), next_done=next_done.numpy())
    np.testing.assert_array_equal(adv.numpy(), a.astype(np.float32))
    np.testing.assert_array_equal(ret.numpy(), r.astype(np.float32))


def test_bad_arguments_are_named():
    gae = gae_driver("golden")
    x = torch.zeros(4, 2)
    with pytest.raises(ValueError, match="rewards must be a torch tensor"):
        compute_gae(gae, x.numpy(), x, x, torch.zeros(2), torch.zeros(2), GAMMA, LAM)
    with pytest.raises(ValueError, match="next_done must be bool-like"):
        compute_gae(gae, x, x, x, torch.zeros(2), torch.full((2,), 0.5), GAMMA, LAM)
    with pytest.raises(ValueError, match="gamma must be a real number in"):
        compute_gae(gae, x, x, x, torch.zeros(2), torch.zeros(2), 1.5, LAM)
