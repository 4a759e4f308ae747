"""Adapters for the RL libraries users already run: the accelerators behind their own classes.

* :mod:`sw.adapters.sb3` -- :class:`~sw.adapters.sb3.AcceleratedRolloutBuffer`, a
  Stable-Baselines3 ``RolloutBuffer`` whose ``compute_returns_and_advantage`` runs on a GAE
  device (``PPO(..., rollout_buffer_class=AcceleratedRolloutBuffer)``);
* :mod:`sw.adapters.torchrl` -- :class:`~sw.adapters.torchrl.AcceleratedGAE`, TorchRL's
  ``GAE`` value estimator with the accelerator doing the recursion (same tensordict keys), and
  :class:`~sw.adapters.torchrl.AcceleratedPrioritizedSampler`, TorchRL's
  ``PrioritizedSampler`` backed by the replay accelerator;
* :mod:`sw.adapters.cleanrl` -- :func:`~sw.adapters.cleanrl.compute_gae`, CleanRL's GAE block
  (torch tensors, ``dones`` = "episode starts", ``next_done``) in one call;
* :mod:`sw.adapters.common` -- :func:`~sw.adapters.common.gae_driver` and
  :func:`~sw.adapters.common.replay_driver`: a driver from a device spec
  (:mod:`sw.rl.devices`) or a driver given as is.

Each library is an optional extra (``pip install -e '.[adapters]'``, which ``make`` installs);
importing :mod:`sw` or this package needs none of them: a submodule imports its library when
it is imported itself. Page: docs/use_from_rl.md.
"""
