"""CleanRL: its GAE block (``ppo.py``'s ``with torch.no_grad(): ... lastgaelam`` loop) as one
accelerator call on its own tensors.

::

    from sw.adapters.cleanrl import compute_gae
    from sw.adapters.common import gae_driver

    gae = gae_driver("golden")                                 # or "pynq:...", "xrt:..."
    ...
    with torch.no_grad():
        next_value = agent.get_value(next_obs).reshape(1, -1)
        advantages, returns = compute_gae(gae, rewards, values, dones, next_value, next_done,
                                          args.gamma, args.gae_lambda)

CleanRL's ``dones[t]`` says observation t *starts* an episode and ``next_done`` the same of
the observation after the batch: the driver's ``episode_starts``/``next_done`` convention.
The results are torch tensors of ``rewards``' dtype and device. :mod:`sw.rl.ppo` is a whole
CleanRL-style PPO with the accelerator in the loop.
"""

import numpy as np

__all__ = ["compute_gae"]


def compute_gae(gae, rewards, values, dones, next_value, next_done, gamma, gae_lambda):
    """``(advantages, returns)`` of CleanRL's ``[num_steps, num_envs]`` tensors on
    :class:`~sw.gae.driver.GaeDriver` ``gae`` (``next_value``: ``[num_envs]`` or ``[1,
    num_envs]``; ``next_done``: ``[num_envs]``). Invalid arguments raise the driver's
    ``ValueError`` naming them."""
    import torch

    def host(x, name):
        if isinstance(x, torch.Tensor):
            return x.detach().cpu().numpy()
        if x is None:
            raise ValueError(f"{name} is required")
        return np.asarray(x)

    if not isinstance(rewards, torch.Tensor):
        raise ValueError(f"rewards must be a torch tensor [num_steps, num_envs], not "
                         f"{type(rewards).__name__}")
    adv, ret = gae.compute(host(rewards, "rewards"), host(values, "values"),
                           last_values=host(next_value, "next_value").reshape(-1),
                           gamma=gamma, lam=gae_lambda, episode_starts=host(dones, "dones"),
                           next_done=host(next_done, "next_done").reshape(-1))
    out = [torch.as_tensor(a, dtype=rewards.dtype, device=rewards.device) for a in (adv, ret)]
    return out[0], out[1]
