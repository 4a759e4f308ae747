"""Training-step cases for the learner pipeline tests (fast and slow tier): random DQN or MSE
batches in raw fixed point, the host memory images of :mod:`sw.learner.layout`, and the
golden :func:`sw.learner.mlp.train_step` with the pipeline's sub-batches."""

from dataclasses import dataclass, field

import numpy as np

from sw.learner.spec import LearnerConfig
from sw.learner.layout import pack_matrix, pack_samples, regions
from sw.learner.mlp import init_weights, quantize_coef, train_step


@dataclass
class Case:
    """One step's inputs (raw integers) and arguments."""
    weights: list
    obs: np.ndarray
    lr: int
    gamma: int = 0
    actions: np.ndarray = None
    rewards: np.ndarray = None
    dones: np.ndarray = None
    next_obs: np.ndarray = None
    target_weights: list = field(default_factory=list)
    targets: np.ndarray = None
    sync_target: bool = False          # DQN: force a target sync at the end of the step
    loss_weights: np.ndarray = None    # DQN: raw per-sample loss weights (None: all 1.0)

    @property
    def batch(self) -> int:
        return len(self.obs)


def random_loss_weights(cfg: LearnerConfig, B: int, rng):
    """Raw loss weights as prioritized replay gives them (normalized by their maximum, so
    one is 1.0), with a 0 and the smallest positive weight among them when B allows."""
    fmt = cfg.numerics.loss_weight_format
    raw = rng.integers(0, (1 << fmt.frac) + 1, B)
    special = [1 << fmt.frac, 0, 1][:B]
    raw[:len(special)] = special
    return rng.permutation(raw)


def random_case(cfg: LearnerConfig, B: int, rng, *, lr=0.05, gamma=0.99, scale=1.0,
                p_done=0.2, weighted=False) -> Case:
    """A random batch; ``weighted`` (DQN): random loss weights (:func:`random_loss_weights`)."""
    num = cfg.numerics
    act = num.act_format
    n_in, n_out = cfg.sizes[0], cfg.sizes[-1]
    w = init_weights(num, rng, scale=scale)
    eta = quantize_coef(lr * 2 / B, num.lr_format, "eta")
    obs = act.quantize(rng.normal(0, 1, (B, n_in)))
    if cfg.loss == "mse":
        return Case(w, obs, eta, targets=act.quantize(rng.normal(0, 1, (B, n_out))))
    wt = [num.weight_format.quantize(num.weight_format.to_float(x) + rng.normal(0, 0.05, x.shape))
          for x in w]
    case = Case(w, obs, eta, gamma=quantize_coef(gamma, num.coef_format, "gamma"),
                actions=rng.integers(0, n_out, B), rewards=act.quantize(rng.normal(0.5, 0.5, B)),
                dones=rng.random(B) < p_done, next_obs=act.quantize(rng.normal(0, 1, (B, n_in))),
                target_weights=wt)
    if weighted:
        case.loss_weights = random_loss_weights(cfg, B, rng)
    return case


def golden(cfg: LearnerConfig, case: Case, weights=None, *, target_weights=None, sync=None):
    """:func:`train_step` as the pipelines compute it (WA per sub-batch, dp scratchpads).

    ``target_weights`` replaces the case's (a chain of steps with syncs); ``sync`` replaces
    ``case.sync_target`` (the decision of :class:`sw.learner.mlp.TargetSync`)."""
    w = case.weights if weights is None else weights
    if cfg.loss == "mse":
        return train_step(w, case.obs, cfg.numerics, lr=case.lr, targets=case.targets,
                          sub_batch=cfg.sub_batch, dp=cfg.dp)
    tw = case.target_weights if target_weights is None else target_weights
    return train_step(w, case.obs, cfg.numerics, lr=case.lr, actions=case.actions,
                      rewards=case.rewards, dones=case.dones, next_obs=case.next_obs,
                      target_weights=tw, gamma=case.gamma, loss_weights=case.loss_weights,
                      sub_batch=cfg.sub_batch, dp=cfg.dp,
                      sync_target=case.sync_target if sync is None else sync)


def input_images(cfg: LearnerConfig, case: Case, *, weights=True) -> dict:
    """Region name -> bytes to write at the region's base for this case."""
    out = {"obs": pack_matrix(cfg, "obs", case.obs)}
    if cfg.loss == "mse":
        out["targets"] = pack_matrix(cfg, "targets", case.targets)
    else:
        out["next_obs"] = pack_matrix(cfg, "next_obs", case.next_obs)
        out["samples"] = pack_samples(cfg, case.actions, case.rewards, case.dones,
                                      case.loss_weights)
    if weights:
        for l, m in enumerate(case.weights):
            out[f"w{l}"] = pack_matrix(cfg, f"w{l}", m)
        for l, m in enumerate(case.target_weights):
            out[f"tw{l}"] = pack_matrix(cfg, f"tw{l}", m)
    return out


def expected_regions(cfg: LearnerConfig, step) -> dict:
    """Region name -> expected matrix after the step (results and updated weights)."""
    L = cfg.n_layers
    out = {"q": step.q}
    for l in range(L - 1):
        out[f"h{l}"] = np.maximum(step.pre[l], 0)
    for l in range(L):
        out[f"delta{l}"] = step.deltas[l]
        out[f"w{l}"] = step.weights[l]
        out[f"grad{l}"] = step.grads[l]
    if cfg.loss == "dqn":
        out["tq"] = step.extra["q_next"]
        for l in range(L):
            out[f"tw{l}"] = step.next_target_weights[l]
        for l in range(L - 1):
            out[f"th{l}"] = np.maximum(step.extra["next_pre"][l], 0)
    names = {r.name for r in regions(cfg)}
    assert set(out) <= names, set(out) - names
    return out


def region_rows(cfg: LearnerConfig, name: str, B: int) -> int:
    """Rows of a region's matrix in a step of B samples."""
    if name.startswith(("w", "tw", "grad")):
        l = int(name.lstrip("targdw"))
        return cfg.sizes[l] + 1
    return B
