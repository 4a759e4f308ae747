"""Real trajectories from gymnasium environments, for tests and benchmarks.

:func:`collect` steps ``num_envs`` copies of an environment for ``num_steps`` steps with a random
policy (fixed seed) and returns a rollout buffer in the ``[T, N]`` layout of CleanRL and
Stable-Baselines3, with our done convention (``dones[t]``: the episode ended at step t). Values
come from a fixed linear critic fitted by least squares to the Monte-Carlo returns of the same
data, so they have realistic scale and error without training a network.
"""

from dataclasses import dataclass

import numpy as np

__all__ = ["Rollout", "collect"]


@dataclass
class Rollout:
    """A rollout buffer: ``[T, N]`` arrays and the ``[N]`` bootstrap values."""
    observations: np.ndarray   # [T, N, obs_dim]
    rewards: np.ndarray        # [T, N] float64
    values: np.ndarray         # [T, N] float64
    dones: np.ndarray          # [T, N] bool: episode ended (terminated or truncated) at step t
    last_values: np.ndarray    # [N]: V of the observation after the last step
    episode_returns: list      # undiscounted returns of the episodes that finished


def collect(env_id="CartPole-v1", *, num_envs=8, num_steps=256, gamma=0.99, seed=0) -> Rollout:
    """Collect a random-policy rollout and attach linear-critic values (see module docstring).

    Truncated episodes are treated as ended, as CleanRL does.
    """
    import gymnasium as gym

    if num_envs < 1 or num_steps < 1:
        raise ValueError(f"num_envs and num_steps must be positive, not {num_envs}, {num_steps}")
    envs = [gym.make(env_id) for _ in range(num_envs)]
    rng = np.random.default_rng(seed)
    obs_dim = envs[0].observation_space.shape[0]
    obs = np.zeros((num_steps + 1, num_envs, obs_dim))
    rewards = np.zeros((num_steps, num_envs))
    dones = np.zeros((num_steps, num_envs), bool)
    episode_returns, running = [], np.zeros(num_envs)
    for j, env in enumerate(envs):
        env.action_space.seed(seed + j)
        obs[0, j], _ = env.reset(seed=seed + j)
    for t in range(num_steps):
        for j, env in enumerate(envs):
            action = int(rng.integers(env.action_space.n))
            o, r, term, trunc, _ = env.step(action)
            rewards[t, j] = r
            running[j] += r
            if term or trunc:
                dones[t, j] = True
                episode_returns.append(running[j])
                running[j] = 0.0
                o, _ = env.reset()
            obs[t + 1, j] = o
    for env in envs:
        env.close()

    # Monte-Carlo returns (bootstrapping the tail with 0), then a least-squares linear critic.
    mc = np.zeros((num_steps, num_envs))
    nxt = np.zeros(num_envs)
    for t in reversed(range(num_steps)):
        nxt = rewards[t] + gamma * nxt * (1.0 - dones[t])
        mc[t] = nxt

    def features(o):
        return np.concatenate([o, np.ones(o.shape[:-1] + (1,))], axis=-1)

    X = features(obs[:num_steps]).reshape(-1, obs_dim + 1)
    w, *_ = np.linalg.lstsq(X, mc.reshape(-1), rcond=None)
    values = features(obs[:num_steps]) @ w
    last_values = features(obs[num_steps]) @ w
    return Rollout(obs[:num_steps], rewards, values, dones, last_values, episode_returns)
