"""``train_step(sub_batch=m)``: WA as the learner pipeline computes it (one GEMM per sub-batch,
partial gradients added into an ``acc_width`` scratchpad with saturation), and the exact loss
sum."""

import numpy as np
import pytest

from sw.learner.spec import LearnerNumerics
from sw.learner.gemm import gemm_fixed
from sw.learner.mlp import init_weights, quantize_coef, train_step


def mse_case(num, B, seed):
    rng = np.random.default_rng(seed)
    act = num.act_format
    w = init_weights(num, rng)
    x = act.quantize(rng.normal(0, 1, (B, num.sizes[0])))
    y = act.quantize(rng.normal(0, 1, (B, num.sizes[-1])))
    return w, x, y, quantize_coef(0.05 * 2 / B, num.lr_format, "eta")


@pytest.mark.parametrize("m", [1, 3, 8, 13])
def test_sub_batches_equal_one_reduction_without_saturation(m):
    num = LearnerNumerics(sizes=(3, 9, 2))
    w, x, y, eta = mse_case(num, 13, m)
    one = train_step(w, x, num, lr=eta, targets=y)
    sub = train_step(w, x, num, lr=eta, targets=y, sub_batch=m)
    assert not one.any_overflow and not sub.any_overflow
    for a, b in zip(one.grads + one.weights, sub.grads + sub.weights):
        np.testing.assert_array_equal(a, b)
    assert one.loss_sum == sub.loss_sum


def test_loss_sum_is_the_raw_loss():
    num = LearnerNumerics(sizes=(3, 5, 4))
    w, x, y, eta = mse_case(num, 7, 1)
    step = train_step(w, x, num, lr=eta, targets=y)
    diff = step.q - y
    assert step.loss_sum == int(np.sum(diff.astype(object) ** 2))
    assert step.loss == pytest.approx(step.loss_sum * 2.0 ** (-2 * num.act_frac) / 7)


def test_scratchpad_adds_saturate_in_order():
    """A 20-bit accumulator: each sub-batch's partial sum fits, their total does not."""
    num = LearnerNumerics(sizes=(1, 1), width=8, act_frac=4, weight_frac=4, grad_frac=4,
                          acc_width=16, lr_width=8, lr_frac=8)
    B, m = 8, 2
    x = np.full((B, 1), 100)                       # 6.25
    w = [np.array([[16], [0]])]                    # z = x: Q = 100
    y = np.full((B, 1), -27)                       # δ = Q - y = 127 (the grad format's max)
    step = train_step(w, x, num, lr=1, targets=y, sub_batch=m)
    tu = num.tensor_unit("wa")
    part = gemm_fixed(step.inputs[0][:m].T, step.deltas[0][:m], tu)
    assert part[0, 0] == 2 * 100 * 127                  # 25400 fits 16 bits signed
    assert step.grads[0][0, 0] == num.wgrad_format.max_raw
    assert step.overflow["wa"]


def test_bad_sub_batch():
    num = LearnerNumerics(sizes=(3, 4, 2))
    w, x, y, eta = mse_case(num, 4, 0)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="sub_batch must be a positive integer"):
            train_step(w, x, num, lr=eta, targets=y, sub_batch=bad)


@pytest.mark.parametrize("m,dp", [(2, 2), (3, 4), (4, 3)])
def test_pipelines_equal_one_reduction_without_saturation(m, dp):
    num = LearnerNumerics(sizes=(3, 9, 2))
    w, x, y, eta = mse_case(num, 13, 10 * m + dp)
    one = train_step(w, x, num, lr=eta, targets=y)
    par = train_step(w, x, num, lr=eta, targets=y, sub_batch=m, dp=dp)
    for a, b in zip(one.grads + one.weights, par.grads + par.weights):
        np.testing.assert_array_equal(a, b)


def test_bad_dp():
    num = LearnerNumerics(sizes=(3, 4, 2))
    w, x, y, eta = mse_case(num, 4, 0)
    with pytest.raises(ValueError, match="dp must be a positive integer, not 0"):
        train_step(w, x, num, lr=eta, targets=y, sub_batch=2, dp=0)
