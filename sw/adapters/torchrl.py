"""TorchRL: the GAE value estimator and the prioritized sampler, backed by the accelerators.

::

    from torchrl.data import LazyTensorStorage, TensorDictReplayBuffer
    from sw.adapters.torchrl import AcceleratedGAE, AcceleratedPrioritizedSampler

    gae = AcceleratedGAE(gamma=0.99, lmbda=0.95, value_network=critic, gae="golden")
    gae(rollout)                                   # writes "advantage" and "value_target"

    rb = TensorDictReplayBuffer(storage=LazyTensorStorage(10_000), batch_size=256,
                                sampler=AcceleratedPrioritizedSampler(10_000, alpha=0.6,
                                                                      beta=0.4, replay="golden"),
                                priority_key="td_error")
    batch = rb.sample()                            # "index", "priority_weight"
    rb.update_tensordict_priority(batch)           # after the loss wrote batch["td_error"]

:class:`AcceleratedGAE` is TorchRL's :class:`torchrl.objectives.value.GAE` (the same keys,
``set_keys``, value network calls, ``time_dim`` and ``average_gae``) whose recursion runs on a
GAE device through :meth:`sw.gae.driver.GaeDriver.compute`. TorchRL's GAE bootstraps every step
from its own ``("next", "state_value")``; the driver takes ``state_value[t + 1]`` within an
episode, so the difference ``gamma * (next_value[t] - value[t + 1])`` of a step that is not
done is added to its reward (0 for the usual one-step rollouts, where both are the value of
the same observation), and a step that is done but not terminated is a truncation
bootstrapped from its next value. The results are then TorchRL's within the device's
quantization error (docs/gae.md, "Accuracy").

:class:`AcceleratedPrioritizedSampler` is TorchRL's
:class:`torchrl.data.PrioritizedSampler` (``alpha``, ``beta``, ``eps``, ``default_priority``,
``mark_update``, ``update_priority``) whose sum tree is the replay accelerator: a priority
``p`` is stored as ``(p + eps) ** alpha`` (the driver's ``(|delta| + eps) ** alpha``), new
entries get TorchRL's default (the largest priority given so far, 1 before any), the device
samples proportionally to the stored priorities, and ``priority_weight`` is TorchRL's
``(p_i / min_j p_j) ** -beta``. With the buffer's ``generator`` the sampling fractions are
drawn from it as TorchRL draws them (so both sample the same indices, up to the priority
format's rounding); without, the device's PRNG draws them. ``tb/adapters/test_torchrl.py``
runs TorchRL's own sampler (its Python code over numpy segment trees: TorchRL's C++ extension
does not load with torch 2.13) beside this one.
"""

import math
import pathlib
import warnings

import numpy as np
import torch
from tensordict.nn import dispatch, set_skip_existing
from torchrl.data.replay_buffers.samplers import PrioritizedSampler
from torchrl.objectives.utils import hold_out_net
from torchrl.objectives.value import GAE

from sw.replay.spec import td_priorities

from .common import gae_driver, replay_driver

__all__ = ["AcceleratedGAE", "AcceleratedPrioritizedSampler"]


class AcceleratedGAE(GAE):
    """TorchRL's GAE estimator on a GAE device (module docstring).

    Parameters
    ----------
    gamma, lmbda, value_network, average_gae, skip_existing, time_dim, advantage_key, ...
        As :class:`torchrl.objectives.value.GAE` (keyword arguments are passed on). Refused:
        ``differentiable=True`` (the accelerator computes no gradient), ``shifted`` and
        ``auto_reset_env``.
    gae : str or GaeDriver
        A device spec (:mod:`sw.rl.devices`) or a driver on any device.
    module : str
        The shipped configuration the ``"golden"`` spec runs.
    driver_kwargs : dict or None
        Options of a driver built from a spec (default ``units="caller"``).

    Members
    -------
    driver : GaeDriver
    """

    def __init__(self, *, gamma, lmbda, value_network=None, gae="golden",
                 module="gae_accel_n8", driver_kwargs=None, **kwargs):
        for name in ("differentiable", "shifted", "auto_reset_env"):
            if kwargs.get(name):
                raise ValueError(f"{name} must be False for AcceleratedGAE (the accelerator "
                                 f"runs the plain recursion), not {kwargs[name]!r}")
        super().__init__(gamma=gamma, lmbda=lmbda, value_network=value_network, **kwargs)
        self.driver = gae_driver(gae, module, **(driver_kwargs or {}))

    @dispatch
    def forward(self, tensordict, *, params=None, target_params=None, time_dim=None):
        """Write ``advantage`` and ``value_target`` into ``tensordict`` (shape ``[*B, T]``) and
        return it, as :meth:`torchrl.objectives.value.GAE.forward`."""
        if self.skip_existing is not None:
            with set_skip_existing(self.skip_existing):
                return self._forward(tensordict, params, target_params, time_dim)
        return self._forward(tensordict, params, target_params, time_dim)

    def value_estimate(self, tensordict, params=None, target_params=None, time_dim=None,
                       **kwargs):
        """The ``value_target`` of :meth:`forward` (advantage + value), ``tensordict`` left
        unchanged, as :meth:`torchrl.objectives.value.GAE.value_estimate`."""
        out = self._forward(tensordict.copy(), params, target_params, time_dim)
        return out.get(self.tensor_keys.value_target)

    @torch.no_grad()
    def _forward(self, tensordict, params, target_params, time_dim):
        if tensordict.batch_dims < 1:
            raise ValueError(f"tensordict must have a time dimension (batch_size [*B, T]), "
                             f"not batch_size {tuple(tensordict.batch_size)}")
        keys = self.tensor_keys
        if tensordict.get(keys.steps_to_next_obs, None) is not None:
            raise ValueError(f"{keys.steps_to_next_obs!r} (multi-step returns) is not "
                             f"supported by AcceleratedGAE")
        if self.value_network is not None:
            if params is not None:
                params = params.detach()
                if target_params is None:
                    target_params = params.clone(False)
            with hold_out_net(self.value_network):
                value, next_value, _ = self._call_value_nets(
                    data=tensordict, params=params, next_params=target_params,
                    single_call=False, value_key=keys.value, detach_next=True,
                    vmap_randomness=self.vmap_randomness)
        else:
            value = tensordict.get(keys.value, None)
            next_value = tensordict.get(("next", keys.value), None)
            for key, x in ((keys.value, value), (("next", keys.value), next_value)):
                if x is None:
                    raise ValueError(f"the tensor with key {key!r} is missing, and no value "
                                     f"network was given")
        reward = tensordict.get(("next", keys.reward))
        done = tensordict.get(("next", keys.done))
        terminated = tensordict.get(("next", keys.terminated), done)
        dim = self._get_time_dim(time_dim, tensordict)
        gamma, lmbda = float(self.gamma), float(self.lmbda)
        adv = self.estimate(value, next_value, reward, done, terminated, gamma, lmbda, dim)
        target = adv + value
        if self.average_gae:
            adv = (adv - adv.mean()) / adv.std().clamp_min(1e-4)
        tensordict.set(keys.advantage, adv)
        tensordict.set(keys.value_target, target)
        return tensordict

    def estimate(self, value, next_value, reward, done, terminated, gamma, lmbda, time_dim):
        """The advantages of TorchRL's ``generalized_advantage_estimate`` (same arguments,
        tensors of one shape with time at ``time_dim``) from the accelerator."""
        shapes = {tuple(x.shape) for x in (value, next_value, reward, done, terminated)}
        if len(shapes) != 1:
            raise ValueError(f"value, next value, reward, done and terminated must have one "
                             f"shape, not {sorted(shapes)}")
        moved = value.movedim(time_dim, 0).shape
        T = moved[0]

        def host(x, dtype=np.float64):
            return x.detach().movedim(time_dim, 0).reshape(T, -1).cpu().numpy().astype(dtype)

        v, nv, r = host(value), host(next_value), host(reward)
        d, term = host(done, bool), host(terminated, bool)
        d |= term                                        # terminated implies done
        # TorchRL bootstraps step t from next_value[t]; the driver from value[t + 1]: carry
        # the difference in the reward of steps that are not done.
        r[:-1] += gamma * np.where(d[:-1], 0.0, nv[:-1] - v[1:])
        adv, _ = self.driver.compute(r, v, last_values=nv[-1], gamma=gamma, lam=lmbda,
                                     terminated=term, truncated=d & ~term, final_values=nv)
        out = torch.as_tensor(adv.reshape(moved), dtype=value.dtype, device=value.device)
        return out.movedim(0, time_dim)


class AcceleratedPrioritizedSampler(PrioritizedSampler):
    """TorchRL's prioritized sampler on the replay accelerator (module docstring).

    Parameters
    ----------
    max_capacity : int
        The storage's size; at most the accelerator's capacity.
    alpha, beta, eps, reduction
        As :class:`torchrl.data.PrioritizedSampler` (``eps`` default 1e-8, TorchRL's).
    replay : str or ReplayDriver
        A device spec (:mod:`sw.rl.devices`) or a driver on any device; it is reset here.
    module : str
        The shipped configuration the ``"golden"`` spec runs.

    Members
    -------
    driver : ReplayDriver
    """

    def __init__(self, max_capacity, alpha, beta, eps=1e-8, *, reduction="max",
                 replay="golden", module="replay_accel_k16"):
        for name, x in (("alpha", alpha), ("beta", beta), ("eps", eps)):
            if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) \
                    or x < 0:
                raise ValueError(f"{name} must be a finite number >= 0, not {x!r}")
        if isinstance(replay, str):
            self.driver = replay_driver(replay, module, alpha=alpha, eps=eps)
        else:
            self.driver = replay_driver(replay, module)
        cap = self.driver.config.capacity
        if isinstance(max_capacity, bool) or not isinstance(max_capacity, int) \
                or not 1 <= max_capacity <= cap:
            raise ValueError(f"max_capacity must be an integer in 1..{cap} (the replay "
                             f"accelerator's capacity), not {max_capacity!r}")
        super().__init__(max_capacity, alpha, beta, eps, reduction=reduction)

    def _init(self):
        """Empty: the accelerator reset, TorchRL's raw maximum forgotten."""
        self._sum_tree = self._min_tree = None
        self._max_priority = None
        self.driver.alpha, self.driver.eps = float(self._alpha), float(self._eps)
        self.driver.reset()
        self._stored = np.zeros(self._max_capacity)     # what the tree holds, for min_j p_j

    @property
    def alpha(self):
        return self._alpha

    @alpha.setter
    def alpha(self, value):
        if value < 0:
            raise ValueError(f"alpha must be a number >= 0, not {value!r}")
        old, self._alpha = self._alpha, value
        self.driver.alpha = float(value)
        n = self.driver.size
        if value == old or n == 0:
            return
        if old == 0:
            warnings.warn("alpha changed from 0: the stored (uniform) priorities are kept until "
                          "each is updated", RuntimeWarning, stacklevel=2)
            return
        p = self._stored[:n]
        raw = np.clip(p ** (1.0 / old) - self._eps, 0.0, None)
        new = np.where(p > 0, (raw + self._eps) ** value, 0.0)
        self.driver.update(np.arange(n), priorities=new)
        self._stored[:n] = new

    def _indices(self, index):
        idx = torch.as_tensor(index).detach().cpu().numpy()
        if idx.ndim > 1:
            raise ValueError("AcceleratedPrioritizedSampler supports 1-D storages only: "
                             f"index must be 1-D, not shape {idx.shape}")
        return idx.reshape(-1).astype(np.int64)

    @torch.no_grad()
    def update_priority(self, index, priority, *, storage=None):
        """Store ``(priority + eps) ** alpha`` at ``index`` (entries -1 skipped); an index
        not yet in the accelerator is inserted."""
        idx = self._indices(index)
        p = torch.as_tensor(priority).detach().cpu().numpy().astype(np.float64).reshape(-1)
        if p.size == 1 and idx.size != 1:
            p = np.full(idx.size, p[0])
        if p.size != idx.size:
            raise ValueError(f"priority must be one number or one per index ({idx.size}), "
                             f"not {p.size}")
        keep = idx >= 0
        idx, p = idx[keep], p[keep]
        if idx.size == 0:
            return
        if idx.max() >= self._max_capacity:
            raise ValueError(f"index must be in 0..{self._max_capacity - 1} (max_capacity), "
                             f"not {int(idx.max())}")
        if not np.all(np.isfinite(p)) or p.min() < 0:
            raise ValueError("priority must be finite and >= 0 (|TD error|)")
        if self._max_priority[0] is None or p.max() > self._max_priority[0]:
            self._max_priority = (float(p.max()), int(idx[p.argmax()]))
        stored = td_priorities(p, self._alpha, self._eps)
        size = self.driver.size
        if np.array_equal(idx, np.arange(size, size + idx.size)):
            self.driver.insert(stored)                   # the usual extend: one run
        else:
            if idx.max() >= size:
                self.driver.insert(np.zeros(int(idx.max()) + 1 - size))
            self.driver.update(idx, td_errors=p)
        self._stored[idx] = stored

    def sample(self, storage, batch_size):
        """``(index, {"priority_weight": w})`` of ``batch_size`` entries, as TorchRL's."""
        n = len(storage)
        if n == 0:
            raise RuntimeError("Cannot sample from an empty storage.")
        batch = int(batch_size)
        idx, prio = [], []
        step = self.driver.config.max_batch
        for lo in range(0, batch, step):
            k = min(step, batch - lo)
            targets = None
            if self._rng is not None:
                targets = torch.rand(k, generator=self._rng).numpy().astype(np.float64)
            i, _, p = self.driver.sample(k, beta=self._beta, targets=targets)
            idx.append(i)
            prio.append(p)
        idx, prio = np.concatenate(idx), np.concatenate(prio)
        stored = self._stored[:n]
        p_min = stored[stored > 0].min()
        weight = (prio / p_min) ** -self._beta
        return (torch.as_tensor(idx, dtype=torch.long),
                {"priority_weight": torch.as_tensor(weight, dtype=torch.float32)})

    def state_dict(self):
        """``alpha``, ``beta``, ``eps``, the raw maximum and the stored priorities."""
        n = self.driver.size
        return {"_alpha": self._alpha, "_beta": self._beta, "_eps": self._eps,
                "_max_priority": self._max_priority,
                "priorities": torch.as_tensor(self._stored[:n].copy())}

    def load_state_dict(self, state_dict):
        """Restore a :meth:`state_dict`: the accelerator is reset and refilled."""
        self._alpha, self._beta, self._eps = (state_dict[k] for k in ("_alpha", "_beta",
                                                                     "_eps"))
        self._init()
        p = np.asarray(state_dict["priorities"], np.float64)
        if p.size:
            self.driver.insert(p)
        self._stored[:p.size] = p
        self._max_priority = state_dict["_max_priority"]

    def dumps(self, path):
        path = pathlib.Path(path)
        path.mkdir(parents=True, exist_ok=True)
        torch.save(self.state_dict(), path / "sampler_state.pt")

    def loads(self, path):
        self.load_state_dict(torch.load(pathlib.Path(path) / "sampler_state.pt",
                                        weights_only=False))
