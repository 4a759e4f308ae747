"""Bit-exact fixed-point training step of an MLP on tensor units, with a rigorous error bound.

One SGD step of an L-layer MLP (ReLU hidden layers, linear output) in the order of CF'22's
learner pipeline, every matrix product a tensor-unit GEMM (:func:`sw.learner.gemm.gemm_fixed`)
with the configurations :meth:`LearnerNumerics.tensor_unit` derives:

FW
    ``z_l = [h_{l-1}, 1]·W_l`` (bias = last row of W_l), ``h_l = relu(z_l)``, ``Q = z_L``.
LOSS
    MSE: ``δ_L = Q - Y``. DQN: ``y = r + γ·(1-d)·max_a Q_target(s', a)`` (the target network's
    FW, run by a parallel chain of tensor units), ``δ_L[b, a_b] = w_b·(Q[b, a_b] - y_b)`` and 0
    for the actions not taken, with per-sample loss weights ``w_b`` (prioritized replay's
    importance-sampling weights, ``loss_weight_format``; 1.0 by default). The loss is
    ``(1/B)·Σ_b w_b·(Q[b, a_b] - y_b)²`` and its gradient ``(2/B)·δ_L``; the factor 2/B is
    folded into the update coefficient η so δ keeps its magnitude in fixed point. The product
    ``w_b·(Q - y)`` is exact and rounded once into the grad format (so w = 1.0 gives δ bit for
    bit as without weights).
BW
    ``δ_{l-1} = (δ_l·W_lᵀ) ⊙ [z_{l-1} > 0]`` (W_l without its bias row; Wᵀ is a read
    order).
WA
    ``G_l = [h_{l-1}, 1]ᵀ·δ_l``, read out at accumulator width without rounding. With
    ``sub_batch=m`` (the learner pipeline, :class:`rtl_gen.learner.core.LearnerCore`) the
    reduction over the batch is one GEMM per sub-batch of m samples whose results are added in
    order into an ``acc_width`` scratchpad with saturation; without saturation this is the same
    number. With ``dp=D`` as well (D parallel pipelines), sub-batch p is added into the
    scratchpad of pipeline ``p mod D`` and the weight update adds the D scratchpads in pipeline
    order, with saturation (pipelines without a sub-batch contribute nothing).
WU
    ``W_l ← saturate(W_l - rshift_round(η·G_l))`` with ``η = lr·2/B`` quantized.

:func:`train_step` returns every intermediate (raw integers) and the saturation flags;
:func:`error_bounds` propagates a bound on ``|fixed - exact|`` through the same steps, elementwise,
for the case where the float reference starts from the same quantized weights and inputs:
each GEMM adds at most one rounding (half an ulp, one ulp for ``"floor"``), errors propagate
through ``|W|`` (ReLU and max are 1-Lipschitz), a ReLU mask may differ from the exact one only
where ``|ẑ| ≤ E_z`` (then the error is at most ``|ĝ| + E_g``), and WA and WU propagate the
product rule. The bound is rigorous as long as nothing saturated (``train_step`` reports that).
"""

from dataclasses import dataclass, field

import numpy as np

from sw.fixed import FixedFormat
from sw.learner.gemm import gemm_fixed
from sw.learner.spec import LearnerNumerics

__all__ = ["StepResult", "TargetSync", "init_weights", "quantize_coef", "forward",
           "dqn_targets", "train_step", "error_bounds", "rounding_error"]


def rounding_error(fmt: FixedFormat) -> float:
    """Largest error of one conversion into ``fmt``: half an ulp, or one ulp for floor."""
    return fmt.ulp * (1.0 if fmt.rounding == "floor" else 0.5)


def init_weights(num: LearnerNumerics, rng, *, scale=1.0):
    """PyTorch's default ``nn.Linear`` initialisation, U(±1/sqrt(fan_in)) for weights and
    biases, quantized to the weight format. Returns a list of raw ``(n_in + 1) × n_out``
    arrays."""
    out = []
    for rows, n_out in num.weight_shapes():          # rows = fan_in + 1 (the bias row)
        bound = scale / np.sqrt(rows - 1)
        out.append(num.weight_format.quantize(rng.uniform(-bound, bound, (rows, n_out))))
    return out


def quantize_coef(value: float, fmt: FixedFormat, name: str) -> int:
    """A runtime coefficient (γ, η) as a raw integer; refuses values that do not fit."""
    raw, over = fmt.quantize(value, return_overflow=True)
    if over:
        raise ValueError(f"{name} = {value} does not fit {fmt} "
                         f"({fmt.min_value}..{fmt.max_value})")
    return int(raw)


def _check_weights(weights, num):
    shapes = num.weight_shapes()
    if len(weights) != len(shapes):
        raise ValueError(f"expected {len(shapes)} weight matrices, not {len(weights)}")
    out = []
    for l, (w, shape) in enumerate(zip(weights, shapes)):
        w = np.asarray(w)
        if w.shape != shape:
            raise ValueError(f"weights[{l}] must have shape {shape}, not {w.shape}")
        out.append(num.weight_format.check_raw(w, f"weights[{l}]").astype(np.int64))
    return out


def _check_batch(x, n_in, name, num):
    x = np.asarray(x)
    if x.ndim != 2 or x.shape[1] != n_in or x.shape[0] < 1:
        raise ValueError(f"{name} must be a B × {n_in} array, not shape {x.shape}")
    if x.shape[0] > num.max_k:
        raise ValueError(f"batch size {x.shape[0]} exceeds max_k ({num.max_k}) of the WA "
                         f"tensor unit")
    return num.act_format.check_raw(x, name).astype(np.int64)


def _augment(h, num):
    """Append the constant-1.0 input that multiplies the bias row."""
    ones = np.full((h.shape[0], 1), 1 << num.act_frac, dtype=np.int64)
    return np.concatenate([h, ones], axis=1)


def _convert(x, from_frac, fmt):
    """Raw values with ``from_frac`` fraction bits into ``fmt`` (round, saturate)."""
    x = np.asarray(x, dtype=np.int64)
    if fmt.frac >= from_frac:
        return fmt.saturate(x << (fmt.frac - from_frac))
    return fmt.saturate(fmt.rshift_round(x, from_frac - fmt.frac))


def forward(weights, x, num: LearnerNumerics):
    """FW through all layers. Returns ``(q, inputs, pre, overflow)``: Q values (raw act format),
    the augmented input of each layer, the pre-activations of each layer, and the or of all
    saturation flags."""
    weights = _check_weights(weights, num)
    h = _check_batch(x, num.sizes[0], "x", num)
    tu = num.tensor_unit("fw")
    inputs, pre, ovf = [], [], False
    for l, w in enumerate(weights):
        xa = _augment(h, num)
        z, o = gemm_fixed(xa, w, tu, return_overflow=True)
        inputs.append(xa)
        pre.append(z)
        ovf |= bool(o.any())
        h = np.maximum(z, 0) if l < len(weights) - 1 else z
    return h, inputs, pre, ovf


def dqn_targets(q_next, rewards, dones, gamma: int, num: LearnerNumerics):
    """``y = saturate(r + rshift_round(γ·(1-d)·max_a q_next))``, raw act format.

    Returns ``(y, overflow)``; ``gamma`` is raw in ``num.coef_format``.
    """
    act = num.act_format
    best = np.asarray(q_next, dtype=np.int64).max(axis=1)
    keep = ~np.asarray(dones, dtype=bool)
    disc = act.rshift_round(best * gamma * keep, num.coef_width - 1)
    y, o = act.saturate(np.asarray(rewards, dtype=np.int64) + disc)
    return y, o


@dataclass
class StepResult:
    """Everything one training step computed (raw integers unless noted).

    Attributes
    ----------
    weights : list of arrays
        Updated weights.
    q : array B × n_out
        Q values (act format) before the update.
    target : array
        TD targets y (B, DQN) or the targets Y (MSE), act format.
    inputs, pre : lists of arrays
        Augmented input and pre-activation of each layer.
    deltas : list of arrays
        δ of each layer's output (grad format), after the ReLU mask.
    bw : list of arrays
        BW outputs ``δ_l·W_lᵀ`` before the mask (``bw[l-1]`` for layer l; ``bw[-1]`` unused).
    grads : list of arrays
        Weight gradients G (wgrad format): the loss gradient is ``(2/B)·G``.
    loss : float
        ``(1/B)·Σ (Q - y)²`` in real units, from the fixed-point ``Q - y`` before conversion
        (without the loss weights: what the LOSS registers hold).
    overflow : dict of str to bool
        Saturation anywhere in FW, the target, δ_L, BW, WA or WU.
    extra : dict
        DQN only: target weights, target network FW (``q_next``, ``next_inputs``,
        ``next_pre``), actions, dones and γ, for the error bound.
    loss_sum : int
        ``Σ (Q - y)²`` over the batch in raw units (``2·act_frac`` fraction bits), exact:
        ``loss = loss_sum · 2**(-2·act_frac) / B``.
    synced : bool
        DQN: the step copied the updated weights into the target network (``sync_target``).
    next_target_weights : list of arrays or None
        DQN: the target weights after the step (the updated weights if synced, else the
        target weights the step used).
    moments, log_v, residuals : list of arrays or None
        Adam: the first moments, the logarithms of the second moments and the master weights'
        residuals after the step (:mod:`sw.learner.adam`); None for SGD.
    """
    weights: list
    q: np.ndarray
    target: np.ndarray
    inputs: list
    pre: list
    deltas: list
    bw: list
    grads: list
    loss: float
    overflow: dict
    extra: dict = field(default_factory=dict)
    loss_sum: int = 0
    synced: bool = False
    next_target_weights: list = None
    moments: list = None
    log_v: list = None
    residuals: list = None

    @property
    def any_overflow(self) -> bool:
        return any(self.overflow.values())


class TargetSync:
    """The learner's target-network sync rule (registers SYNC_TARGET, SYNC_PERIOD, SYNC_COUNT).

    A step syncs if it is forced or if it makes the count of steps since the last sync reach
    the period (``period`` > 0; 0 = never by count). The count restarts at 0 after a sync and
    saturates at ``2**bits - 1``. :meth:`step` is called once per started step (not for a
    start refused for its batch size), in the order the hardware decides it: at the start.
    """

    def __init__(self, period: int = 0, count: int = 0, *, bits: int = 16):
        top = (1 << bits) - 1
        for name, v in (("period", period), ("count", count)):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or not 0 <= v <= top:
                raise ValueError(f"{name} must be an integer in 0..{top}, not {v!r}")
        self.period, self.count, self.top = int(period), int(count), top

    def step(self, force: bool = False) -> bool:
        """Whether this step syncs; advances the count."""
        due = bool(force) or (self.period > 0 and self.count + 1 >= self.period)
        self.count = 0 if due else min(self.count + 1, self.top)
        return due


def train_step(weights, obs, num: LearnerNumerics, *, lr: int, actions=None, rewards=None,
               dones=None, next_obs=None, target_weights=None, gamma=None, targets=None,
               loss_weights=None, sub_batch=None, dp=1, sync_target=False, adam=None):
    """One bit-exact SGD (or Adam) step (see the module docstring).

    Parameters
    ----------
    weights : list of int arrays
        Raw weights, ``(n_in + 1) × n_out`` each (``num.weight_shapes()``).
    obs : int array, B × n_in
        Raw inputs (act format).
    num : LearnerNumerics
    lr : int or None
        Raw update coefficient η = lr·2/B in ``num.lr_format`` (:func:`quantize_coef`); not
        used (None) with ``adam``.
    actions, rewards, dones, next_obs, target_weights, gamma
        DQN batch: actions taken (B ints), rewards (raw act format), episode ends, next
        observations, target network weights, raw γ in ``num.coef_format``.
    targets : int array, B × n_out, optional
        MSE targets instead of the DQN arguments (raw act format).
    loss_weights : int array, B, optional
        DQN: raw per-sample loss weights in ``num.loss_weight_format`` (δ of sample b is
        ``w_b·(Q - y)``); default None: 1.0 each. Not for MSE.
    sub_batch : int, optional
        Compute WA per sub-batch of this many samples and add the partial gradients with
        saturation, in order (see the module docstring); default: one reduction.
    dp : int
        Pipelines the sub-batches are dealt to (round robin); their scratchpads are added in
        order with saturation (see the module docstring). Default 1.
    sync_target : bool
        DQN: copy the updated weights into the target network after the step
        (:attr:`StepResult.next_target_weights`; :class:`TargetSync` decides it per step).
    adam : tuple, optional
        ``(moments, log_v, regs)`` or ``(moments, log_v, regs, residuals)``: Adam instead of
        SGD (:func:`sw.learner.adam.adam_update_raw`): per layer the raw first moments and
        second-moment logarithms (shaped as the weights), the raw ADAM_* registers of the
        step, and per layer the master weights' raw residuals (default: 0).

    Returns
    -------
    StepResult

    Raises
    ------
    ValueError
        For inconsistent shapes, out-of-range raw values, or a batch larger than ``max_k``.
    """
    act, gfmt, wfmt = num.act_format, num.grad_format, num.weight_format
    weights = _check_weights(weights, num)
    n_out = num.sizes[-1]
    q, inputs, pre, ovf_fw = forward(weights, obs, num)
    B = q.shape[0]
    ovf = {"fw": ovf_fw}
    extra = {}
    dqn = targets is None
    if dqn:
        if any(v is None for v in (actions, rewards, dones, next_obs, target_weights, gamma)):
            raise ValueError("a DQN step needs actions, rewards, dones, next_obs, "
                             "target_weights and gamma (or give targets for MSE)")
        actions = np.asarray(actions)
        if actions.shape != (B,) or actions.min() < 0 or actions.max() >= n_out:
            raise ValueError(f"actions must be B = {B} integers in 0..{n_out - 1}")
        for name, v in (("rewards", rewards), ("dones", dones)):
            if np.shape(v) != (B,):
                raise ValueError(f"{name} must have shape ({B},), not {np.shape(v)}")
        act.check_raw(rewards, "rewards")
        if not 0 <= int(gamma) <= num.coef_format.max_raw:
            raise ValueError(f"gamma must be raw {num.coef_format} in "
                             f"0..{num.coef_format.max_raw}, not {gamma!r}")
        next_obs = _check_batch(next_obs, num.sizes[0], "next_obs", num)
        if next_obs.shape[0] != B:
            raise ValueError(f"next_obs must have {B} rows, not {next_obs.shape[0]}")
        target_weights = _check_weights(target_weights, num)
        q_next, next_inputs, next_pre, ovf["target_fw"] = forward(target_weights, next_obs, num)
        wfmt_l = num.loss_weight_format
        if loss_weights is None:
            lw = None
        else:
            lw = np.asarray(loss_weights)
            if lw.shape != (B,):
                raise ValueError(f"loss_weights must have shape ({B},), not {lw.shape}")
            lw = wfmt_l.check_raw(lw, "loss_weights").astype(np.int64)
        y, o = dqn_targets(q_next, rewards, dones, int(gamma), num)
        ovf["target"] = bool(o.any())
        diff = np.zeros_like(q)
        rows = np.arange(B)
        diff[rows, actions] = q[rows, actions] - y
        target = y
        extra.update(target_weights=target_weights, q_next=q_next, next_inputs=next_inputs,
                     next_pre=next_pre, actions=actions, dones=np.asarray(dones, bool),
                     gamma=int(gamma), loss_weights=lw)
    else:
        if loss_weights is not None:
            raise ValueError("loss_weights need a DQN step (the MSE learner has no per-sample "
                             "weights)")
        targets = np.asarray(targets)
        if targets.shape != q.shape:
            raise ValueError(f"targets must have shape {q.shape}, not {targets.shape}")
        target = act.check_raw(targets, "targets").astype(np.int64)
        diff = q - target
    loss = float(np.sum(act.to_float(diff) ** 2) / B)
    loss_sum = int(np.sum(diff.astype(object) ** 2))
    if dqn and extra["loss_weights"] is not None:
        delta, o = _convert(diff * extra["loss_weights"][:, None],
                            num.act_frac + num.loss_weight_format.frac, gfmt)
    else:
        delta, o = _convert(diff, num.act_frac, gfmt)
    ovf["delta"] = bool(o.any())

    L = len(weights)
    deltas = [None] * L
    bw = [None] * L
    deltas[L - 1] = delta
    tu_bw, tu_wa = num.tensor_unit("bw"), num.tensor_unit("wa")
    ovf["bw"] = False
    for l in range(L - 1, 0, -1):
        g, o = gemm_fixed(deltas[l], weights[l][:-1].T, tu_bw, return_overflow=True)
        ovf["bw"] |= bool(o.any())
        bw[l - 1] = g
        deltas[l - 1] = np.where(pre[l - 1] > 0, g, 0)
    grads, new_weights = [], []
    ovf["wa"] = ovf["wu"] = False
    shift = num.lr_frac + num.act_frac + num.grad_frac - num.weight_frac
    if sub_batch is not None and (not isinstance(sub_batch, (int, np.integer))
                                  or isinstance(sub_batch, bool) or sub_batch < 1):
        raise ValueError(f"sub_batch must be a positive integer, not {sub_batch!r}")
    if not isinstance(dp, (int, np.integer)) or isinstance(dp, bool) or dp < 1:
        raise ValueError(f"dp must be a positive integer, not {dp!r}")
    chunk = B if sub_batch is None else int(sub_batch)
    gfmt_wa = num.wgrad_format
    if adam is not None:
        from .adam import adam_update_raw
        moments_in, logv_in, adam_regs, *rest = adam
        res_in = rest[0] if rest else [None] * L
        if len(moments_in) != L or len(logv_in) != L or len(res_in) != L:
            raise ValueError(f"adam needs {L} moments, {L} log_v and {L} residual arrays")
        new_m, new_lv, new_r = [], [], []
    elif lr is None:
        raise ValueError("lr must be given for an SGD step (or give adam)")
    for l in range(L):
        pads = [None] * dp                       # one scratchpad per pipeline
        for p, s0 in enumerate(range(0, B, chunk)):
            part, o = gemm_fixed(inputs[l][s0:s0 + chunk].T, deltas[l][s0:s0 + chunk], tu_wa,
                                 return_overflow=True)
            ovf["wa"] |= bool(o.any())
            d = p % dp
            if pads[d] is None:
                pads[d] = part
            else:
                pads[d], o = gfmt_wa.saturate(pads[d] + part)
                ovf["wa"] |= bool(o.any())
        g = pads[0]
        for pad in pads[1:]:
            if pad is not None:
                g, o = gfmt_wa.saturate(g + pad)
                ovf["wa"] |= bool(o.any())
        grads.append(g)
        if adam is not None:
            w, mo, lv, res, o = adam_update_raw(num, weights[l], g, moments_in[l], logv_in[l],
                                                adam_regs, res_in[l])
            new_m.append(mo)
            new_lv.append(lv)
            new_r.append(res)
            ovf["wu"] |= o
        else:
            w, o = wfmt.saturate(weights[l] - wfmt.rshift_round(int(lr) * g, shift))
            ovf["wu"] |= bool(o.any())
        new_weights.append(w)
    synced = dqn and bool(sync_target)
    if not dqn and sync_target:
        raise ValueError("sync_target needs a DQN step (an MSE step has no target network)")
    nxt = None
    if dqn:
        nxt = [w.copy() for w in (new_weights if synced else target_weights)]
    return StepResult(new_weights, q, target, inputs, pre, deltas, bw, grads, loss, ovf, extra,
                      loss_sum, synced, nxt, *((new_m, new_lv, new_r) if adam is not None
                                               else (None, None, None)))


def _fw_bounds(weights, batch, num):
    """Elementwise bounds of |ẑ_l - z_l| through FW from exact inputs (list per layer)."""
    rf = rounding_error(num.act_format) if num.tensor_unit("fw").shift else 0.0
    wf = num.weight_format
    e_in = np.zeros((batch, num.sizes[0] + 1))
    e_z = []
    for w in weights:
        ez = e_in @ np.abs(wf.to_float(w)) + rf
        e_z.append(ez)
        e_in = np.concatenate([ez, np.zeros((batch, 1))], axis=1)  # ReLU; the bias input
    return e_z


def error_bounds(weights, step: StepResult, num: LearnerNumerics, *, lr: int) -> dict:
    """Bounds on ``|fixed - exact|`` (real units, elementwise) for one :func:`train_step`.

    The exact step starts from the same quantized weights, inputs, rewards, γ and η (as real
    numbers). Returns a dict with ``"q"`` (B × n_out), ``"target"`` (B), ``"delta"`` (list per
    layer), ``"grad"`` (list per layer, bound on G; the loss gradient is ``2/B`` times G) and
    ``"weights"`` (list per layer, updated weights).

    Raises
    ------
    ValueError
        If the step saturated anywhere (the bound would not hold).
    """
    if step.any_overflow:
        bad = ", ".join(k for k, v in step.overflow.items() if v)
        raise ValueError(f"the step saturated ({bad}): no error bound")
    act, gfmt, wfmt = num.act_format, num.grad_format, num.weight_format
    weights = _check_weights(weights, num)
    L = len(weights)
    B, n_out = step.q.shape
    e_z = _fw_bounds(weights, B, num)
    e_q = e_z[-1]
    out = {"q": e_q}
    if step.extra:
        e_next = _fw_bounds(step.extra["target_weights"], B, num)[-1]
        gamma = num.coef_format.to_float(step.extra["gamma"])
        keep = ~step.extra["dones"]
        e_y = gamma * keep * e_next.max(axis=1) + rounding_error(act)
        rows, acts = np.arange(B), step.extra["actions"]
        e_diff = np.zeros((B, n_out))
        e_diff[rows, acts] = e_q[rows, acts] + e_y
        out["target"] = e_y
    else:
        e_diff = e_q
        out["target"] = np.zeros(B)
    conv = rounding_error(gfmt) if num.grad_frac < num.act_frac else 0.0
    lw = step.extra.get("loss_weights") if step.extra else None
    if lw is not None:                            # δ = round(w·(Q - y)): scaled error, rounded
        wf = num.loss_weight_format
        e_diff = e_diff * wf.to_float(lw)[:, None]
        if num.grad_frac < num.act_frac + wf.frac:
            conv = rounding_error(gfmt)
    e_delta = [None] * L
    e_delta[L - 1] = e_diff + np.where(e_diff > 0, conv, 0.0)
    rb = rounding_error(gfmt) if num.tensor_unit("bw").shift else 0.0
    for l in range(L - 1, 0, -1):
        e_g = e_delta[l] @ np.abs(wfmt.to_float(weights[l][:-1])).T + rb
        zhat = act.to_float(step.pre[l - 1])
        ghat = np.abs(gfmt.to_float(step.bw[l - 1]))
        amb = np.abs(zhat) <= e_z[l - 1]          # the exact ReLU mask may differ here
        e_delta[l - 1] = np.where(amb, ghat + e_g, np.where(zhat > 0, e_g, 0.0))
    out["delta"] = e_delta
    wa = num.tensor_unit("wa")
    rw = rounding_error(wa.out_format) if wa.shift else 0.0
    eta = num.lr_format.to_float(lr)
    e_grad, e_w = [], []
    for l in range(L):
        x = np.abs(act.to_float(step.inputs[l]))
        e_x = (np.concatenate([e_z[l - 1], np.zeros((B, 1))], axis=1) if l
               else np.zeros(x.shape))
        d = np.abs(gfmt.to_float(step.deltas[l]))
        eg = x.T @ e_delta[l] + e_x.T @ (d + e_delta[l]) + rw
        e_grad.append(eg)
        e_w.append(eta * eg + rounding_error(wfmt))
    out["grad"] = e_grad
    out["weights"] = e_w
    return out
