"""What the DQN loops share: the hyper-parameters, the result of a run and the float Q network.

:func:`sw.rl.dqn.train` (learner and replay accelerators, or the CPU baseline),
:func:`sw.rl.dqn_trainer.train_fused` (the fused trainer) and the distributed system
(:mod:`sw.dist`) take a :class:`DQNConfig`, start from :func:`init_weights` and act with
:func:`forward`; the two loops return a :class:`DQNResult`.
"""

from dataclasses import dataclass, field

import numpy as np

from sw.config import check_real
from sw.replay.spec import PER_ALPHA

__all__ = ["DQNConfig", "DQNResult", "OPTIMIZERS", "ADAM_LR", "init_weights", "forward"]

#: The learners' optimizers: plain SGD (the default) or Adam (torch's, no weight decay).
OPTIMIZERS = ("sgd", "adam")
#: The command line's learning rate for Adam (``DQNConfig.lr`` is SGD's).
ADAM_LR = 2.5e-4


@dataclass(frozen=True)
class DQNConfig:
    """Hyper-parameters. Steps are environment steps unless named otherwise."""
    env_id: str = "CartPole-v1"
    total_steps: int = 30_000
    batch: int = 64
    gamma: float = 0.99
    lr: float = 0.02                    # 0.01 before the IS weights (mean ~0.5) reached the loss
    reward_scale: float = 0.1
    learning_starts: int = 1000
    train_freq: int = 1
    target_period: int = 250            # gradient steps between target-network syncs
    actor_refresh: int = 10             # gradient steps between weight read-backs
    eps_start: float = 1.0
    eps_end: float = 0.05
    eps_fraction: float = 0.4
    alpha: float = PER_ALPHA
    beta: float = 0.4
    prio_eps: float = 1e-3
    priority_delay: int = 0             # gradient steps a priority write-back waits (D)
    hidden: int = 64
    seed: int = 0
    optimizer: str = "sgd"              # "adam": both learners use Adam with learning rate lr

    def __post_init__(self):
        for name in ("total_steps", "batch", "learning_starts", "train_freq", "target_period",
                     "actor_refresh", "hidden"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive integer, not {v!r}")
        for name in ("gamma", "eps_start", "eps_end", "eps_fraction", "alpha"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], not {v!r}")
        for name in ("lr", "reward_scale", "prio_eps"):
            check_real(name, getattr(self, name))
        check_real("beta", self.beta, positive=False)
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, not "
                             f"{self.optimizer!r}")
        d = self.priority_delay
        if isinstance(d, bool) or not isinstance(d, int) or d < 0:
            raise ValueError(f"priority_delay must be a non-negative integer, not {d!r}")
        if self.total_steps <= self.learning_starts:
            raise ValueError(f"total_steps must be above learning_starts "
                             f"({self.learning_starts}) or nothing is trained, not "
                             f"{self.total_steps}")

    def epsilon(self, step):
        frac = min(1.0, step / max(1.0, self.eps_fraction * self.total_steps))
        return self.eps_start + frac * (self.eps_end - self.eps_start)


@dataclass
class DQNResult:
    """``episodes``: (env step, return); ``losses``: (gradient step, batch loss); seconds spent
    in the learner and the replay calls and overall; accelerator cycles of the learner and
    replay runs (0 on the CPU)."""
    name: str
    config: dict
    episodes: list = field(default_factory=list)
    losses: list = field(default_factory=list)
    learner_seconds: float = 0.0
    replay_seconds: float = 0.0
    total_seconds: float = 0.0
    grad_steps: int = 0
    learner_cycles: int = 0
    replay_cycles: int = 0

    def cycles_per_grad_step(self) -> float:
        """Accelerator cycles per gradient step: the learner step, the fused update + sample
        run and ``train_freq`` single inserts (the inserts before ``learning_starts`` are spread
        over the gradient steps too; host and bus time not included)."""
        return (self.learner_cycles + self.replay_cycles) / max(self.grad_steps, 1)

    def mean_return(self, last=20) -> float:
        if not self.episodes:
            return float("nan")
        return float(np.mean([r for _, r in self.episodes[-last:]]))


def init_weights(sizes, rng):
    """Initial float weights of an MLP with layer ``sizes`` (input first), drawn from the numpy
    Generator ``rng``: He-uniform hidden layers, small output layer, zero biases. Returns
    ``(ws, bs)``; ``ws[l]`` is ``n_in x n_out``."""
    ws, bs = [], []
    for l, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        lim = np.sqrt(6.0 / a) if l < len(sizes) - 2 else 0.1 / np.sqrt(a)
        ws.append(rng.uniform(-lim, lim, (a, b)))
        bs.append(np.zeros(b))
    return ws, bs


def forward(ws, bs, x):
    """Q values of the MLP (ReLU between layers) for observations ``x``: the float policy of
    an actor (:mod:`sw.rl.dqn`, :mod:`sw.rl.dqn_trainer`, :mod:`sw.dist.actor`)."""
    for l, (w, b) in enumerate(zip(ws, bs)):
        x = x @ w + b
        if l < len(ws) - 1:
            x = np.maximum(x, 0.0)
    return x
