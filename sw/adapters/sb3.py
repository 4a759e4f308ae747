"""Stable-Baselines3: a ``RolloutBuffer`` whose advantages and returns the GAE accelerator
computes.

::

    from stable_baselines3 import PPO
    from sw.adapters.sb3 import AcceleratedRolloutBuffer

    model = PPO("MlpPolicy", "CartPole-v1", rollout_buffer_class=AcceleratedRolloutBuffer,
                rollout_buffer_kwargs={"gae": "golden"})      # or "pynq:...", "xrt:...", a driver
    model.learn(100_000)

:meth:`AcceleratedRolloutBuffer.compute_returns_and_advantage` hands SB3's arrays to
:meth:`sw.gae.driver.GaeDriver.compute` as they are: ``rewards`` and ``values``
``[n_steps, n_envs]``, SB3's flags in their own convention (``episode_starts``: observation t
starts an episode; ``dones``: the observation after the buffer does) and ``last_values``. SB3
has already folded truncation into the rewards (``collect_rollouts`` adds ``gamma *
V(terminal_observation)`` to the reward of a step that ``TimeLimit.truncated``), so the buffer
has nothing more to do for it. In the driver's default units (the caller's) the results are
SB3's own advantages and returns within the quantization error of the device (docs/gae.md,
"Accuracy"); ``tb/adapters/test_sb3.py`` checks both against SB3's own buffer.
"""

import numpy as np
from stable_baselines3.common.buffers import RolloutBuffer

from .common import gae_driver

__all__ = ["AcceleratedRolloutBuffer"]


class AcceleratedRolloutBuffer(RolloutBuffer):
    """SB3's ``RolloutBuffer`` with GAE on an accelerator.

    Parameters
    ----------
    buffer_size, observation_space, action_space, device, gae_lambda, gamma, n_envs
        As SB3's ``RolloutBuffer`` (PPO passes them).
    gae : str or GaeDriver
        A device spec (``"golden"``, ``"pynq:BITFILE"``, ``"xrt:XCLBIN"``,
        :mod:`sw.rl.devices`) or a :class:`~sw.gae.driver.GaeDriver` on any device.
    module : str
        The shipped configuration the ``"golden"`` spec runs (default ``gae_accel_n8``).
    driver_kwargs : dict or None
        Options of a driver built from a spec (default ``units="caller"``).

    Members
    -------
    gae : GaeDriver
    accelerator_runs : int
        Accelerator runs so far (a call that retried with wider result ranges, or refined its
        results, runs more than once).

    Raises
    ------
    ValueError
        Before the first rollout, if ``n_steps x n_envs`` does not fit the accelerator.
    """

    def __init__(self, buffer_size, observation_space, action_space, device="auto",
                 gae_lambda=1, gamma=0.99, n_envs=1, *, gae="golden", module="gae_accel_n8",
                 driver_kwargs=None):
        super().__init__(buffer_size, observation_space, action_space, device=device,
                         gae_lambda=gae_lambda, gamma=gamma, n_envs=n_envs)
        self.gae = gae_driver(gae, module, **(driver_kwargs or {}))
        self.gae.check_shape(self.buffer_size, self.n_envs)
        self.accelerator_runs = 0

    def compute_returns_and_advantage(self, last_values, dones) -> None:
        """Advantages and returns of the buffer on the accelerator (SB3's signature: the
        values of the observation after the buffer, a tensor, and whether it starts an
        episode)."""
        last = last_values.detach().cpu().numpy().reshape(-1).astype(np.float64)
        kw = dict(last_values=last, gamma=self.gamma, lam=self.gae_lambda,
                  episode_starts=self.episode_starts, next_done=np.asarray(dones).reshape(-1))
        shape = (self.buffer_size, self.n_envs)
        returns = getattr(self, "returns", None)
        if not (isinstance(returns, np.ndarray) and returns.shape == shape
                and returns.dtype == np.float32 and returns.flags.c_contiguous
                and not np.shares_memory(returns, self.advantages)):
            self.returns = np.empty(shape, np.float32)
        if self.advantages.flags.c_contiguous:    # written in place (the driver's out=)
            self.gae.compute(self.rewards, self.values, out=(self.advantages, self.returns),
                             **kw)
        else:
            adv, ret = self.gae.compute(self.rewards, self.values, **kw)
            self.advantages[...], self.returns[...] = adv, ret
        self.accelerator_runs += self.gae.last_batch.total_runs
