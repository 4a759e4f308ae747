"""Adam in the learner's weight update, in fixed point: the formats, the registers, what the host
computes per step, and the bit-exact golden update. Plain Python and numpy, no Amaranth: the WU
stage (:class:`rtl_gen.learner.stages.wu.WuStage`) builds the same integer steps.

torch's Adam (``torch.optim.Adam``, no weight decay, no amsgrad) on the gradient ``g`` of the
mean squared error, step t::

    m ← β1·m + (1 - β1)·g,   v ← β2·v + (1 - β2)·g²
    W ← W - lr/(1 - β1^t) · m / (sqrt(v / (1 - β2^t)) + ε)

The learner's gradient is ``G = (B/2)·g`` (:attr:`sw.learner.mlp.StepResult.grads`: the 2/B of
the mean is not applied) and ``m / (sqrt(v) + ε)`` is invariant to that scale once ε is scaled
with it, so the WU stage keeps ``m`` and ``v`` of G and the host folds the bias corrections and
the scale into two per-step logarithms (:func:`adam_registers`)::

    W ← W - lr_t · m / (sqrt(v) + ε_t),  lr_t = lr·sqrt(1 - β2^t)/(1 - β1^t),
                                          ε_t = ε·sqrt(1 - β2^t)·B/2

Per weight, raw integers (``F`` = :attr:`ADAM_POWER`'s ``log_frac`` = 16 fraction bits for
every logarithm, which is ``1 + 7 + 16`` = 24 bits signed, ``L0`` = its ``log_min``: a
logarithm equal to ``L0`` stands for the value 0):

* ``m`` (:func:`moment_format`: the gradient's width and fraction plus
  :data:`MOMENT_EXTRA` = 8 bits) ← ``m + round((G·2**8 - m)·c1 / 2**16)``, ``c1`` = 1 - β1
  with 16 fraction bits (register ADAM_C1). A convex combination: it cannot overflow.
* ``v`` is kept as its logarithm ``λ`` (region ``v<l>``): the gradient's square spans far more
  octaves than a fixed-point word, its logarithm does not. ``λ ← logadd(λ + log2 β2,
  2·log2|G| + log2(1 - β2))`` (registers ADAM_LOG_B2, ADAM_LOG_C2; each sum clamped to the
  logarithm's range, ``L0`` kept for a zero), with
  ``logadd(a, b) = max(a, b) + log2(1 + 2**-|a - b|)`` computed by the power unit's
  :func:`~sw.powers.exp2_raw` (into :data:`SB_FRAC` fraction bits) and
  :func:`~sw.powers.log2_raw` (:func:`logadd_raw`).
* ``δ = logadd(floor(λ/2), log2 ε_t)``: the logarithm of ``sqrt(v) + ε_t`` (register
  ADAM_LOG_EPS; ``L0`` for ε = 0).
* ``u = exp2(clamp(log2|m| + log2 lr_t - δ))`` rounded to the master weights' format
  (register ADAM_LOG_LR; 0 where m is 0), saturating at ``2**(width + 8) - 1`` (flag
  WU_OVERFLOW), and ``M ← saturate(M - sign(m)·u)`` (flag WU_OVERFLOW) on the master weight
  ``M = W·2**8 + r``: the weights keep :data:`MASTER_EXTRA` = 8 more fraction bits as a
  signed residual ``r`` in ``-128..127`` (regions ``wl<l>``), and the weight the network uses
  is M rounded to the weight format, ``W = (M + 128) >> 8``, ``r = M - W·2**8``. Without
  them an update is rounded to the weight's ulp (2**-13 at the defaults): Adam's steps of
  about lr = 2.5e-4 would be two ulps, and every step below 0.24·lr lost (DQN on CartPole
  learned to 0.69 of torch's return that way, docs/rl.md).

The errors against float64 Adam on the same gradients are those of the power unit (a few
``2**-16`` relative per logarithm, docs/fixed_point.md) plus the rounding of ``u`` to the
master format: half an ulp of M (2**-22) per step.
"""

import math

import numpy as np

from sw.fixed import FixedFormat
from sw.powers import EXP2_LATENCY, LOG2_LATENCY, PowerConfig, exp2_raw, log2_raw

__all__ = ["OPTIMIZERS", "ADAM_POWER", "MOMENT_EXTRA", "C1_FRAC", "C1_WIDTH", "SB_FRAC",
           "MASTER_EXTRA", "ADAM_ARGS", "LOGADD_LATENCY", "ADAM_WU_LATENCY", "moment_format", "log_format",
           "residual_format",
           "adam_registers", "logadd_raw", "adam_update_raw", "AdamHyper"]

#: Optimizers of the learner's WU stage (``LearnerConfig.optimizer``).
OPTIMIZERS = ("sgd", "adam")
#: The power unit's tables and logarithm format for Adam (the trainer's defaults).
ADAM_POWER = PowerConfig()
#: Fraction bits the first moment keeps beyond the gradient's.
MOMENT_EXTRA = 8
#: Fraction bits the master weights keep beyond the weights' (the residual in ``wl<l>``).
MASTER_EXTRA = 8
#: ADAM_C1 = 1 - β1: unsigned, 17 bits with 16 fraction bits (1.0 exact: β1 = 0).
C1_FRAC = 16
C1_WIDTH = 17
#: Fraction bits of ``2**-|a - b|`` inside :func:`logadd_raw`.
SB_FRAC = 24

#: Adam's step arguments (registers with optimizer="adam"): name -> (core port, signed, doc).
#: Every logarithm is ``ADAM_POWER.log_width`` bits, ``log_frac`` fraction bits.
ADAM_ARGS = {
    "ADAM_C1": ("adam_c1", False, "1 - beta1, unsigned, 16 fraction bits (17 bits)"),
    "ADAM_LOG_B2": ("adam_log_b2", True, "log2(beta2), signed log format (log_min: beta2 = 0)"),
    "ADAM_LOG_C2": ("adam_log_c2", True, "log2(1 - beta2), signed log format"),
    "ADAM_LOG_LR": ("adam_log_lr", True, "log2(lr * sqrt(1 - beta2^t) / (1 - beta1^t)) of "
                    "step t, signed log format (the driver writes it every step)"),
    "ADAM_LOG_EPS": ("adam_log_eps", True, "log2(eps * sqrt(1 - beta2^t) * B / 2) of step t, "
                     "signed log format (log_min: eps = 0)"),
}

#: Pipeline latency of one logadd in the WU stage: the difference (1), exp2, the 1 + x and
#: log2 (the log2 unit registers its input), the sum with the maximum (1).
LOGADD_LATENCY = 1 + EXP2_LATENCY + LOG2_LATENCY + 1
#: Cycles from the WU stage's reduced gradient row to its written row with Adam (the SGD
#: path's is 5): log2|G| and, beside it, the first moment; the two logarithm sums (1); logadd
#: for v; half of it (1); logadd with ε; the update's logarithm (1); exp2; M - u (1);
#: saturation (1); M + 128, whose bits are the new W and r (1).
ADAM_WU_LATENCY = (LOG2_LATENCY + 1 + LOGADD_LATENCY + 1 + LOGADD_LATENCY + 1 + EXP2_LATENCY
                   + 3)


def moment_format(num) -> FixedFormat:
    """The first moment's format: the weight gradient's (``num.wgrad_format``) with
    :data:`MOMENT_EXTRA` more bits, all of them fraction."""
    g = num.wgrad_format
    return FixedFormat(g.width + MOMENT_EXTRA, g.frac + MOMENT_EXTRA, True, g.rounding)


def residual_format(num) -> FixedFormat:
    """The master weights' residual ``r = M - W·2**8`` (region ``wl<l>``) in units of the
    weight's ulp: 8 bits signed, all fraction, ``[-0.5, 0.5)`` ulp."""
    return FixedFormat(MASTER_EXTRA, MASTER_EXTRA, True)


def log_format() -> FixedFormat:
    """The logarithms' format (the second moment ``v<l>`` and the ADAM_LOG_* registers)."""
    return FixedFormat(ADAM_POWER.log_width, ADAM_POWER.log_frac, True)


def _log_raw(x: float) -> int:
    """``round(log2 x · 2**F)`` clamped to the logarithm's range; ``log_min`` for x = 0."""
    cfg = ADAM_POWER
    if x <= 0:
        return cfg.log_min
    return int(min(max(round(math.log2(x) * (1 << cfg.log_frac)), cfg.log_min + 1), cfg.log_max))


class AdamHyper:
    """Adam's hyperparameters as torch takes them (``lr``, ``betas``, ``eps``), checked.

    ``ValueError`` naming the argument: lr > 0, 0 <= β1 < 1, 0 <= β2 < 1, eps >= 0, all
    finite; β1 must be representable (1 - β1 >= 2**-16)."""

    def __init__(self, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
        try:
            b1, b2 = betas
        except (TypeError, ValueError):
            raise ValueError(f"betas must be a pair (beta1, beta2), not {betas!r}") from None
        for name, v in (("lr", lr), ("beta1", b1), ("beta2", b2), ("eps", eps)):
            if (isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer))
                    or not math.isfinite(v)):
                raise ValueError(f"{name} must be a finite number, not {v!r}")
        if not lr > 0:
            raise ValueError(f"lr must be > 0, not {lr!r}")
        if not 0 <= b1 < 1 or round((1 - b1) * (1 << C1_FRAC)) < 1:
            raise ValueError(f"beta1 must be in [0, 1 - 2**-{C1_FRAC}], not {b1!r}")
        if not 0 <= b2 < 1:
            raise ValueError(f"beta2 must be in [0, 1), not {b2!r}")
        if eps < 0:
            raise ValueError(f"eps must be >= 0, not {eps!r}")
        self.lr, self.beta1, self.beta2, self.eps = float(lr), float(b1), float(b2), float(eps)

    def __repr__(self):
        return (f"AdamHyper(lr={self.lr!r}, betas=({self.beta1!r}, {self.beta2!r}), "
                f"eps={self.eps!r})")


def adam_registers(hyper: AdamHyper, step: int, batch: int) -> dict:
    """The raw ADAM_* register values of step ``step`` (1 for the first, as torch counts) of a
    batch of ``batch`` samples: ``{"ADAM_C1": ..., "ADAM_LOG_B2": ..., ...}``."""
    if not isinstance(hyper, AdamHyper):
        raise TypeError(f"hyper must be an AdamHyper, not {hyper!r}")
    if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step < 1:
        raise ValueError(f"step must be an integer >= 1, not {step!r}")
    if isinstance(batch, bool) or not isinstance(batch, (int, np.integer)) or batch < 1:
        raise ValueError(f"batch must be an integer >= 1, not {batch!r}")
    b1, b2 = hyper.beta1, hyper.beta2
    bc1 = 1.0 - b1 ** int(step)
    bc2 = 1.0 - b2 ** int(step)
    return {"ADAM_C1": int(round((1.0 - b1) * (1 << C1_FRAC))),
            "ADAM_LOG_B2": _log_raw(b2),
            "ADAM_LOG_C2": _log_raw(1.0 - b2),
            "ADAM_LOG_LR": _log_raw(hyper.lr * math.sqrt(bc2) / bc1),
            "ADAM_LOG_EPS": _log_raw(hyper.eps * math.sqrt(bc2) * batch / 2)}


def _clamp(x):
    cfg = ADAM_POWER
    return np.clip(x, cfg.log_min, cfg.log_max)


def logadd_raw(a, b):
    """``log2(2**a + 2**b)`` of raw logarithms (``log_min`` = 0): ``max(a, b) + log2(1 +
    2**-|a-b|)``, the power unit's exp2 (into :data:`SB_FRAC` fraction bits) and log2, the
    sum clamped to the logarithm's range; ``log_min`` if both are."""
    cfg = ADAM_POWER
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    hi = np.maximum(a, b)
    d = np.maximum(-np.abs(a - b), cfg.log_min)
    e, _ = exp2_raw(cfg, d, SB_FRAC, SB_FRAC + 1)
    s = log2_raw(cfg, e + (1 << SB_FRAC), SB_FRAC)
    return np.where(hi == cfg.log_min, cfg.log_min, _clamp(hi + s))


def adam_update_raw(num, weights, grad, moment, log_v, regs: dict, residual=None):
    """One Adam update of one weight tensor, bit for bit as the WU stage (module docstring).

    ``weights`` (weight format), ``grad`` (wgrad format), ``moment`` (:func:`moment_format`),
    ``log_v`` (:func:`log_format`), ``residual`` (:func:`residual_format`; None: 0) raw int
    arrays of one shape; ``regs`` the raw ADAM_* registers (:func:`adam_registers`). Returns
    ``(weights, moment, log_v, residual, overflow)``.
    """
    cfg = ADAM_POWER
    L0 = cfg.log_min
    w = np.asarray(weights, dtype=np.int64)
    g = np.asarray(grad, dtype=np.int64)
    m = np.asarray(moment, dtype=np.int64)
    lv = np.asarray(log_v, dtype=np.int64)
    r = np.zeros_like(w) if residual is None else np.asarray(residual, dtype=np.int64)
    if not (w.shape == g.shape == m.shape == lv.shape == r.shape):
        raise ValueError(f"weights, grad, moment, log_v and residual must have one shape, not "
                         f"{w.shape}, {g.shape}, {m.shape}, {lv.shape}, {r.shape}")
    gf = num.wgrad_format
    mfmt = moment_format(num)
    c1 = int(regs["ADAM_C1"])
    # First moment: m + round((G·2**8 - m)·c1 / 2**16), half up.
    x = (g << MOMENT_EXTRA) - m
    m_new = m + ((x * c1 + (1 << (C1_FRAC - 1))) >> C1_FRAC)
    # Second moment, as its logarithm.
    lg = log2_raw(cfg, np.abs(g), gf.frac)
    a = np.where(g == 0, L0, _clamp(2 * lg + int(regs["ADAM_LOG_C2"])))
    b = np.where(lv == L0, L0, _clamp(lv + int(regs["ADAM_LOG_B2"])))
    lv_new = logadd_raw(a, b)
    half = np.where(lv_new == L0, L0, lv_new >> 1)
    den = logadd_raw(half, int(regs["ADAM_LOG_EPS"]))
    lm = log2_raw(cfg, np.abs(m_new), mfmt.frac)
    y = np.where(m_new == 0, L0, _clamp(lm + int(regs["ADAM_LOG_LR"]) - den))
    wfmt = num.weight_format
    X = MASTER_EXTRA
    u, o_u = exp2_raw(cfg, y, wfmt.frac + X, wfmt.width + X)
    d = (w << X) + r - np.where(m_new < 0, -u, u)
    lo, hi = wfmt.min_raw << X, wfmt.max_raw << X
    o_w = (d < lo) | (d > hi)
    e = np.clip(d, lo, hi) + (1 << (X - 1))
    return (e >> X, m_new, lv_new, (e & ((1 << X) - 1)) - (1 << (X - 1)),
            bool(np.any(o_u) or np.any(o_w)))
