"""The learner driver's argument checks and the records it passes around: what a step takes
(:class:`LearnerBatch`, checked and quantized by :func:`prepare_batch`, no bus access) and what
it returns (:class:`StepDetails`)."""

import math
import warnings
from dataclasses import dataclass, field

import numpy as np

from sw.driver.common import bool_flags, check_finite, warn_level

from . import hostfast
from .errors import LearnerRangeWarning
from .spec import LearnerConfig

__all__ = ["LearnerBatch", "StepDetails", "array_arg", "real_arg", "require_dqn",
           "quantize_arg", "quantize_weights", "sgd_eta", "prepare_batch"]


def require_dqn(config: LearnerConfig, flag, what: str):
    """ValueError if ``flag`` (``what``) asks for the target network of an MSE learner."""
    if flag and config.loss != "dqn":
        raise ValueError(f"{what} needs a DQN learner (loss='mse' has no target network)")


# -- validation ----------------------------------------------------------------------------------
def array_arg(x, name, *, shape, kinds="biuf"):
    """``x`` as a numeric, finite numpy array of ``shape`` (None entries: any length)."""
    try:
        a = np.asarray(x)
    except Exception:  # noqa: BLE001 - ragged lists and the like
        raise ValueError(f"{name} must be a numeric array") from None
    if a.dtype.kind not in kinds:
        what = {"iu": "an integer", "biu": "an integer or bool"}.get(kinds, "a numeric")
        raise ValueError(f"{name} must be {what} array, not dtype {a.dtype}")
    if a.ndim != len(shape) or any(s is not None and s != n for s, n in zip(shape, a.shape)):
        want = "[" + ", ".join("B" if s is None else str(s) for s in shape) + "]"
        raise ValueError(f"{name} must be a {want} array, not shape {a.shape}")
    return check_finite(a, name)


def real_arg(value, name, lo, hi=None):
    if isinstance(value, (bool, np.bool_)) or not isinstance(
            value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a real number, not {value!r}")
    v = float(value)
    if not math.isfinite(v) or v < lo or (hi is not None and v > hi):
        rng = f"in [{lo:g}, {hi:g}]" if hi is not None else f">= {lo:g}"
        raise ValueError(f"{name} must be a real number {rng}, not {value!r}")
    return v


def quantize_arg(x, fmt, name, on_range="error"):
    """Real values ``x`` as raw int64 of ``fmt``; values outside its range raise a ValueError
    naming ``name`` and the first such element (``on_range="error"``) or saturate with a
    :class:`~sw.learner.errors.LearnerRangeWarning` (``"clip"``)."""
    raw, over = fmt.quantize(x, return_overflow=True)
    if over.any():
        idx = tuple(int(i) for i in np.argwhere(over)[0])
        where = f"{name}[{', '.join(map(str, idx))}]" if idx else name
        value = np.asarray(x, np.float64)[idx] if idx else float(x)
        msg = (f"{name}: {int(over.sum())} value(s) outside the {fmt} range "
               f"[{fmt.min_value:g}, {fmt.max_value:g}], the first {where} = {value:g}")
        if on_range == "error":
            raise ValueError(msg + " (scale them, or on_range='clip' to saturate)")
        warnings.warn(msg + ": saturated", LearnerRangeWarning, stacklevel=warn_level())
    return raw.astype(np.int64, copy=False)


def quantize_weights(sizes, fmt, weights, biases, on_range="error") -> list:
    """Float ``weights[l]`` (``sizes[l] x sizes[l+1]``) and ``biases[l]`` (``sizes[l+1]``)
    as the raw ``(sizes[l] + 1) x sizes[l+1]`` matrices of ``fmt`` the hardware stores (bias
    in the last row); shapes and ranges checked (:func:`quantize_arg`)."""
    shapes = [(a, b) for a, b in zip(sizes[:-1], sizes[1:])]
    L = len(shapes)
    for name, seq in (("weights", weights), ("biases", biases)):
        if isinstance(seq, np.ndarray) or not hasattr(seq, "__len__") or len(seq) != L:
            raise ValueError(f"{name} must be a sequence of {L} arrays (one per layer), "
                             f"not {type(seq).__name__}"
                             + (f" of length {len(seq)}" if hasattr(seq, "__len__") else ""))
    out = []
    for l, ((n_in, n_out), w, b) in enumerate(zip(shapes, weights, biases)):
        a = np.asarray(w) if not isinstance(w, np.ndarray) else w
        if a.ndim == 2 and a.shape == (n_out, n_in) and n_in != n_out:
            raise ValueError(f"weights[{l}] must have shape ({n_in}, {n_out}) (n_in x n_out, "
                             f"y = x @ W + b), not {a.shape}: transpose torch's "
                             f"nn.Linear.weight")
        a = array_arg(w, f"weights[{l}]", shape=(n_in, n_out), kinds="iuf")
        bb = array_arg(b, f"biases[{l}]", shape=(n_out,), kinds="iuf")
        out.append(np.vstack([quantize_arg(a, fmt, f"weights[{l}]", on_range),
                              quantize_arg(bb, fmt, f"biases[{l}]", on_range)[None]]))
    return out


@dataclass
class LearnerBatch:
    """One step's arguments as the hardware takes them (raw integers), from
    :meth:`LearnerDriver.prepare`; no hardware involved.

    Members
    -------
    batch_size : int
    obs, next_obs : int arrays ``[B, n_in]`` (act format); ``next_obs`` None for MSE
    actions, rewards, dones : ``[B]`` (rewards raw act format); None for MSE
    targets : int array ``[B, n_out]`` (MSE) or None
    lr : int
        Raw ``eta = lr * 2 / B`` in the LR format (0 for an Adam learner, which does not use
        it).
    gamma : int
        Raw discount in the coefficient format (0 for MSE).
    lr_value, gamma_value : float
        As given; for an Adam learner ``lr_value`` is the step's Adam learning rate
        (``adam.lr`` when ``lr`` was None; 0: the driver's ``adam.lr`` when the step runs).
    loss_weights : int array ``[B]`` or None
        DQN: raw per-sample loss weights (coefficient format); None: all 1.0.
    """
    batch_size: int
    obs: np.ndarray
    lr: int
    gamma: int = 0
    actions: np.ndarray = None
    rewards: np.ndarray = None
    dones: np.ndarray = None
    next_obs: np.ndarray = None
    targets: np.ndarray = None
    lr_value: float = 0.0
    gamma_value: float = 0.0
    loss_weights: np.ndarray = None


@dataclass
class StepDetails:
    """What ``train_step(..., details=True)`` returns.

    Members
    -------
    loss : float
        As :meth:`LearnerDriver.train_step` returns it.
    loss_sum : int
        LOSS_HI:LOSS_LO, ``sum (Q - y)**2`` in raw units (``2 act_frac`` fraction bits).
    q : float array ``[B, n_out]``
        Q values of the step (before the update).
    td_errors : float array
        ``Q - y`` as the step back-propagated it (grad format, saturated if DELTA_OVERFLOW):
        ``[B]`` at the actions taken (DQN), ``[B, n_out]`` (MSE). With loss weights (DQN):
        ``Q[a] - y`` without the weights, computed on the host from the Q values and the
        target network's Q values read back (exact, act format), for new priorities.
    weighted_loss : float
        ``(1/B) sum_b w_b (Q[b, a_b] - y_b)**2``, the loss the step descended (``loss`` when
        no weights were given).
    cycles : int
        CYCLES: accelerator cycles of the step.
    synced : bool
        The target network was set to the updated weights after this step.
    status : dict
        STATUS fields, LOSS and CYCLES.
    """
    loss: float
    loss_sum: int
    q: np.ndarray
    td_errors: np.ndarray
    cycles: int
    synced: bool
    status: dict = field(default_factory=dict)
    weighted_loss: float = None


# -- one step's batch ----------------------------------------------------------------------------
def sgd_eta(lr, B, eta_format):
    """``(raw eta, lr)`` of an SGD step's learning rate ``lr`` (a real number >= 0) for a batch
    of ``B``: ``eta = lr * 2 / B`` in the LR register's format ``eta_format``; ``ValueError``
    if it falls outside it or rounds to 0 while ``lr > 0``."""
    lr = real_arg(lr, "lr", 0.0)
    eta = lr * 2.0 / B
    eta_raw, over = eta_format.quantize(eta, return_overflow=True)
    if over:
        raise ValueError(f"lr = {lr:g} gives eta = lr * 2 / B = {eta:g} outside the LR "
                         f"register's {eta_format} range [0, {eta_format.max_value:g}]")
    if lr > 0 and int(eta_raw) == 0:
        raise ValueError(f"lr = {lr:g} gives eta = lr * 2 / B = {eta:g}, below the LR "
                         f"register's resolution {eta_format.ulp:g}: it would round to 0")
    return int(eta_raw), lr


def prepare_batch(cfg: LearnerConfig, obs, actions, rewards, next_obs, dones, targets, gamma,
                  loss_weights, *, lr_of, on_range="error", dqn_params=None):
    """One step's batch of the learner ``cfg``, checked and quantized (the arguments of
    :meth:`LearnerDriver.prepare <sw.learner.driver.LearnerDriver.prepare>`; the checks of
    :mod:`sw.learner.driver`'s module docstring, ``ValueError`` naming the first bad
    argument): ``(batch, images)``, ``images`` the batch's memory images where the compiled DQN
    pass made them (:func:`sw.learner.hostfast.dqn_batch` with ``dqn_params``: the arrays
    checked, quantized and packed at once), else None. ``lr_of(B)``: ``(raw eta, lr)`` of the
    step's learning rate for ``B`` samples (:func:`sgd_eta`, or an Adam learner's). No bus
    access."""
    if targets is None and dqn_params is not None:
        fast = hostfast.dqn_batch(cfg, dqn_params, obs, actions, rewards, next_obs, dones,
                                  loss_weights)
        if fast is not None:
            raw, images = fast
            B = raw["obs"].shape[0]
            eta_raw, lr = lr_of(B)
            gamma = real_arg(gamma, "gamma", 0.0, 1.0)
            g_raw, _ = cfg.numerics.coef_format.quantize(gamma, return_overflow=True)
            return LearnerBatch(
                B, raw["obs"], eta_raw, int(g_raw), raw["actions"], raw["rewards"],
                raw["dones"], raw["next_obs"], lr_value=lr, gamma_value=gamma,
                loss_weights=raw["loss_weights"]), images
    num = cfg.numerics
    n_in, n_out = cfg.sizes[0], cfg.sizes[-1]
    act = num.act_format
    x = array_arg(obs, "obs", shape=(None, n_in), kinds="iuf")
    B = x.shape[0]
    if not 1 <= B <= cfg.max_batch:
        raise ValueError(f"obs must hold 1..{cfg.max_batch} samples (max_batch), not {B}")
    eta_raw, lr = lr_of(B)
    batch = LearnerBatch(B, quantize_arg(x, act, "obs", on_range), eta_raw, lr_value=lr)
    dqn_args = {"actions": actions, "rewards": rewards, "next_obs": next_obs,
                "dones": dones, "loss_weights": loss_weights}
    if cfg.loss == "mse":
        given = [k for k, v in dqn_args.items() if v is not None]
        if given:
            raise ValueError(f"{', '.join(given)}: only for a DQN learner; this one's "
                             f"loss is 'mse' (give targets)")
        if targets is None:
            raise ValueError("targets must be given for an MSE learner (a [B, "
                             f"{n_out}] array)")
        t = array_arg(targets, "targets", shape=(B, n_out), kinds="iuf")
        batch.targets = quantize_arg(t, act, "targets", on_range)
        return batch, None
    if targets is not None:
        raise ValueError("targets: only for an MSE learner; this one's loss is 'dqn' "
                         "(give actions, rewards, next_obs, dones)")
    missing = [k for k, v in dqn_args.items() if v is None and k != "loss_weights"]
    if missing:
        raise ValueError(f"{', '.join(missing)} must be given for a DQN learner")
    a = array_arg(actions, "actions", shape=(B,), kinds="iu")
    if B and (a.min() < 0 or a.max() >= n_out):
        bad = int(np.argwhere((a < 0) | (a >= n_out))[0][0])
        raise ValueError(f"actions must be integers in 0..{n_out - 1}, not actions[{bad}] "
                         f"= {int(a[bad])}")
    r = array_arg(rewards, "rewards", shape=(B,), kinds="biuf")
    xn = array_arg(next_obs, "next_obs", shape=(B, n_in), kinds="iuf")
    d = bool_flags(array_arg(dones, "dones", shape=(B,), kinds="biuf"), "dones")
    gamma = real_arg(gamma, "gamma", 0.0, 1.0)
    g_raw, _ = num.coef_format.quantize(gamma, return_overflow=True)
    batch.actions = a.astype(np.int64)
    batch.rewards = quantize_arg(r.astype(np.float64), act, "rewards", on_range)
    batch.next_obs = quantize_arg(xn, act, "next_obs", on_range)
    batch.dones = d
    batch.gamma, batch.gamma_value = int(g_raw), gamma
    if loss_weights is not None:
        lw = array_arg(loss_weights, "loss_weights", shape=(B,), kinds="iuf")
        if B and (lw.min() < 0 or lw.max() > 1):
            bad = int(np.argwhere((lw < 0) | (lw > 1))[0][0])
            raise ValueError(f"loss_weights must be in [0, 1] (normalize them by their "
                             f"maximum, as prioritized replay does), not loss_weights[{bad}]"
                             f" = {float(lw[bad]):g}")
        batch.loss_weights = num.loss_weight_format.quantize(
            lw.astype(np.float64)).astype(np.int64)
    return batch, None
