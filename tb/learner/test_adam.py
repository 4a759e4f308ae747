"""Adam in the learner (sw/learner/adam.py, the driver's sw/learner/optim.py).

* the host's side: :class:`AdamHyper` and :func:`adam_registers` refuse bad arguments by
  name, and the driver writes the ADAM_* registers of every step on every path (train_step,
  prepare and run, start and wait), counting only the steps that ran;
* the state: the ``m<l>``/``v<l>`` regions after a step are the golden step's moments, a write
  of the online network or ``reset_optimizer`` starts a fresh optimizer, a raw checkpoint
  resumes training bit for bit;
* the accuracy: :func:`adam_update_raw` against float64 Adam on the same gradients within the
  bound of docs/fixed_point.md ("Adam"), per step and over 100 steps; the driver on the golden
  device against ``torch.optim.Adam`` over 100 steps of DQN and of MSE, within that bound plus
  the gradient-error term (float64 torch on the same quantized batches and weights);
* slow: DQN on CartPole, Adam on the golden learner against CPU torch with Adam.
"""

import math

import numpy as np
import pytest

from driver_util import record
from learner_session import init_net, random_batch

#: A small Adam learner: DQN 4-16-16-2 on 4 x 4 arrays.
ADAM = {"sizes": [4, 16, 16, 2], "array": 4, "max_batch": 64, "sub_batch": 8,
        "optimizer": "adam"}


def make(params=ADAM, **kw):
    from sw.driver import LearnerDriver, LearnerGoldenDevice
    from sw.learner.spec import LearnerConfig

    cfg = LearnerConfig.from_dict(dict(params))
    dev = LearnerGoldenDevice(cfg)
    return LearnerDriver(dev, **kw), dev


def signed_word(drv, name):
    """An ADAM_* register's value as written (two's complement for the logarithms)."""
    from sw.learner.adam import ADAM_ARGS

    word = drv.register_map.read_word(name)
    width = drv.register_map[name]._register.fields[0].width
    return word - (1 << width) if ADAM_ARGS[name][1] and word >> (width - 1) else word


def adam_words(drv):
    from sw.learner.adam import ADAM_ARGS

    return {name: signed_word(drv, name) for name in ADAM_ARGS}


# -- the error bound (docs/fixed_point.md, "Adam") --------------------------------------------
#: In ulps of a logarithm (2**-16): the power unit's log2 (truncated mantissas included) and a
#: register's rounding; exp2's relative error (docs/fixed_point.md, power unit).
E_LOG, E_REG, E_EXP = 0.8, 0.5, 1.28e-6
LOG_ULP = 2.0 ** -16
#: logadd: log2 of 1 + 2**-d (E_LOG) and exp2's error into SB_FRAC = 24 bits, in ulps.
E_ADD = E_LOG + (E_EXP + 2.0 ** -25) / math.log(2) / LOG_ULP


def log_v_error(t):
    """Bound of the error of log2 v after step t, in ulps: 2·E_LOG + E_REG for the first
    gradient, E_REG (log2 β2) + E_ADD more per step."""
    return 2 * E_LOG + E_REG + (t - 1) * (E_REG + E_ADD)


def rho(t):
    """Bound of the relative error of the update's magnitude at step t before its rounding:
    log2|m| (E_LOG), ADAM_LOG_LR (E_REG), floor(λ/2) (half of log_v_error, 0.5), ADAM_LOG_EPS
    and the logadd (E_ADD), then exp2 (E_EXP)."""
    err = E_LOG + E_REG + log_v_error(t) / 2 + 0.5 + E_ADD
    return 2.0 ** (err * LOG_ULP) * (1 + E_EXP) - 1


class FloatAdam:
    """float64 Adam on the learner's gradients G (wgrad units), with the per-step bound of the
    fixed-point update against it: ``2**-22 + (1 + ρ_t)·lr_t·E_t / (sqrt(v_t) + ε_t) +
    ρ_t·|u_t|``, E_t bounding the first moment's error (ADAM_C1's rounding, the moment's half
    ulp per step)."""

    def __init__(self, hyper, batch, shape, num):
        from sw.learner.adam import C1_FRAC, MASTER_EXTRA, moment_format

        self.h, self.B, self.t = hyper, batch, 0
        self.m, self.v, self.E = np.zeros(shape), np.zeros(shape), np.zeros(shape)
        c1 = round((1 - hyper.beta1) * 2 ** C1_FRAC) / 2 ** C1_FRAC
        self.c1, self.dc1 = c1, abs(c1 - (1 - hyper.beta1))
        self.half_m = 2.0 ** -(moment_format(num).frac + 1)
        # the update is rounded to the master weights' format (MASTER_EXTRA more bits)
        self.half_w = num.weight_format.ulp / 2 ** (MASTER_EXTRA + 1)

    def step(self, G):
        """Returns ``(u, bound)``: the float update and the bound of the fixed-point one's
        distance from it."""
        h = self.h
        self.t += 1
        t = self.t
        self.E = (1 - self.c1) * self.E + self.dc1 * np.abs(G - self.m) + self.half_m
        self.m = h.beta1 * self.m + (1 - h.beta1) * G
        self.v = h.beta2 * self.v + (1 - h.beta2) * G * G
        bc1, sbc2 = 1 - h.beta1 ** t, math.sqrt(1 - h.beta2 ** t)
        lr_t, eps_t = h.lr * sbc2 / bc1, h.eps * sbc2 * self.B / 2
        den = np.sqrt(self.v) + eps_t
        u = lr_t * self.m / den
        r = rho(t)
        return u, self.half_w + (1 + r) * lr_t * self.E / den + r * np.abs(u)


# -- hyperparameters and registers -------------------------------------------------------------
@pytest.mark.parametrize("kw,message", [
    ({"lr": 0}, "lr must be > 0, not 0"),
    ({"lr": -1e-3}, "lr must be > 0"),
    ({"lr": float("nan")}, "lr must be a finite number, not nan"),
    ({"lr": "0.1"}, "lr must be a finite number, not '0.1'"),
    ({"lr": True}, "lr must be a finite number, not True"),
    ({"betas": 0.9}, r"betas must be a pair \(beta1, beta2\), not 0.9"),
    ({"betas": (0.9,)}, r"betas must be a pair"),
    ({"betas": (1.0, 0.999)}, r"beta1 must be in \[0, 1 - 2\*\*-16\], not 1.0"),
    ({"betas": (-0.1, 0.999)}, "beta1 must be in"),
    ({"betas": (1 - 2.0 ** -18, 0.999)}, "beta1 must be in"),
    ({"betas": (0.9, 1.0)}, r"beta2 must be in \[0, 1\), not 1.0"),
    ({"betas": (0.9, float("inf"))}, "beta2 must be a finite number"),
    ({"eps": -1e-8}, "eps must be >= 0, not -1e-08"),
    ({"eps": None}, "eps must be a finite number, not None"),
])
def test_hyperparameters_are_checked_by_name(kw, message):
    from sw.learner.adam import AdamHyper

    with pytest.raises(ValueError, match=message):
        AdamHyper(**kw)


def test_registers():
    """adam_registers: the formats of sw/learner/adam.py, bias corrections per step, ε scaled
    with B/2; bad step, batch or hyper named."""
    from sw.learner.adam import ADAM_POWER, AdamHyper, adam_registers

    F, L0 = ADAM_POWER.log_frac, ADAM_POWER.log_min
    h = AdamHyper(1e-3, (0.9, 0.999), 1e-8)
    r1 = adam_registers(h, 1, 32)
    assert r1["ADAM_C1"] == round(0.1 * 2 ** 16) == 6554
    assert r1["ADAM_LOG_B2"] == round(math.log2(0.999) * 2 ** F) == -95
    assert r1["ADAM_LOG_C2"] == round(math.log2(0.001) * 2 ** F)
    assert r1["ADAM_LOG_LR"] == round(math.log2(1e-3 * math.sqrt(0.001) / 0.1) * 2 ** F)
    assert r1["ADAM_LOG_EPS"] == round(math.log2(1e-8 * math.sqrt(0.001) * 16) * 2 ** F)
    late = adam_registers(h, 10 ** 6, 32)                  # the corrections have faded
    assert late["ADAM_LOG_LR"] == round(math.log2(1e-3) * 2 ** F)
    assert abs(adam_registers(h, 1, 64)["ADAM_LOG_EPS"] - r1["ADAM_LOG_EPS"] - 2 ** F) <= 1
    plain = adam_registers(AdamHyper(0.5, (0.0, 0.0), 0.0), 3, 8)
    assert plain == {"ADAM_C1": 1 << 16, "ADAM_LOG_B2": L0, "ADAM_LOG_C2": 0,
                     "ADAM_LOG_LR": -(1 << F), "ADAM_LOG_EPS": L0}
    for step in (0, -1, 1.0, True, None):
        with pytest.raises(ValueError, match=f"step must be an integer >= 1, not {step!r}"):
            adam_registers(h, step, 32)
    for batch in (0, 2.0, False):
        with pytest.raises(ValueError, match=f"batch must be an integer >= 1, not {batch!r}"):
            adam_registers(h, 1, batch)
    with pytest.raises(TypeError, match="hyper must be an AdamHyper"):
        adam_registers({"lr": 1e-3}, 1, 32)


# -- the driver's arguments ---------------------------------------------------------------------
@pytest.mark.parametrize("loss", ["mse", "dqn"])
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_configuration_read_back(loss, optimizer):
    """read_learner_config finds both optimizers' register maps (the ADAM_* registers move
    the HW_* words up) and reads nothing past a foreign map's end."""
    from sw.driver import GoldenDevice, LearnerConfigMismatchError, read_learner_config
    from sw.gae.spec import GaeCoreConfig
    from sw.learner.spec import LearnerConfig

    for sizes in ((4, 8, 2), (4, 16, 16, 2), (3, 8, 8, 8, 8, 8, 8, 5)):
        cfg = LearnerConfig.from_dict({**ADAM, "sizes": sizes, "loss": loss,
                                       "optimizer": optimizer})
        _, dev = make(cfg.to_dict())
        hw = read_learner_config(dev.control)
        assert (hw.sizes, hw.loss, hw.optimizer) == (cfg.sizes, loss, optimizer)
    gae = GoldenDevice(GaeCoreConfig(n_pe=4, max_trajectories=8, capacity=32))
    with pytest.raises(LearnerConfigMismatchError, match="do not describe a learner"):
        read_learner_config(gae.control)


def test_driver_adam_argument():
    import sw.driver
    from sw.learner.adam import AdamHyper
    from sw.learner.optim import AdamState

    assert sw.driver.AdamHyper is AdamHyper and sw.driver.AdamState is AdamState
    assert {"AdamHyper", "AdamState"} <= set(sw.driver.__all__)

    drv, dev = make()
    assert repr(drv.adam) == repr(AdamHyper()) and drv.optimizer_step == 0
    drv2, _ = make(adam={"lr": 3e-4, "betas": (0.8, 0.99)})
    assert (drv2.adam.lr, drv2.adam.beta1, drv2.adam.beta2, drv2.adam.eps) == \
        (3e-4, 0.8, 0.99, 1e-8)
    h = AdamHyper(lr=1e-2)
    assert make(adam=h)[0].adam is h
    for adam, message in [({"lr": -1}, "adam: lr must be > 0"),
                          ({"learning_rate": 1e-3}, "adam: unknown argument.*learning_rate"),
                          ({"betas": (0.9, 1.5)}, r"adam: beta2 must be in \[0, 1\)"),
                          (1e-3, "adam must be an AdamHyper, a dict of its arguments"),
                          ("adam", "adam must be an AdamHyper")]:
        with pytest.raises(ValueError, match=message):
            make(adam=adam)
    with pytest.raises(ValueError, match="adam is for a learner built with optimizer='adam'; "
                                         "this one's optimizer is 'sgd'"):
        make({**ADAM, "optimizer": "sgd"}, adam=AdamHyper())
    sgd, _ = make({**ADAM, "optimizer": "sgd"})
    assert sgd.adam is None and sgd.optimizer_step == 0
    with pytest.raises(ValueError, match="adam is for a learner built with optimizer='adam'"):
        sgd.adam = {"lr": 1e-3}
    with pytest.raises(ValueError, match="lr must be given for an SGD learner"):
        sgd.prepare(**random_batch(np.random.default_rng(0), 4))
    drv.adam = {"lr": 5e-4}                               # replaced, state kept
    assert drv.adam.lr == 5e-4
    with pytest.raises(ValueError, match="adam must be an AdamHyper or a dict"):
        drv.adam = None


def test_bad_adam_steps_touch_nothing():
    drv, dev = make()
    drv.init_weights(0)
    batch = random_batch(np.random.default_rng(1), 8)
    words = adam_words(drv)
    log = record(dev)
    for lr, message in [(-1e-3, r"lr must be a real number > 0 \(or None: adam.lr = 0.001\) "
                                r"for an Adam learner, not -0.001"),
                        (0, "lr must be a real number > 0"),
                        (float("nan"), "lr must be a real number > 0"),
                        ("1e-3", "lr must be a real number > 0"),
                        (1e60, r"lr = 1e\+60 gives lr \* sqrt\(1 - beta2\^t\) / \(1 - beta1\^t\)"
                               r" = .* at step t = 1, outside the ADAM_LOG_LR register's "
                               r"range"),
                        (1e-50, "outside the ADAM_LOG_LR register's range")]:
        with pytest.raises(ValueError, match=message):
            drv.train_step(**batch, lr=lr)
        with pytest.raises(ValueError, match=message):
            drv.prepare(**batch, lr=lr)
    big = make(adam={"eps": 1e40})[0]
    big.init_weights(0)
    with pytest.raises(ValueError, match="eps = 1e.40 gives eps .* above the ADAM_LOG_EPS"):
        big.train_step(**batch)
    for kw, message in [({"adam": {"ADAM_C1": 1}}, "adam must hold every ADAM_"),
                        ({"adam": {**words, "ADAM_C1": 1 << 17}},
                         r"adam\['ADAM_C1'\] must be in 0..131071"),
                        ({"adam": {**words, "ADAM_LOG_LR": 1 << 23}},
                         r"adam\['ADAM_LOG_LR'\] must be in -8388608..8388607"),
                        ({"adam": {**words, "ADAM_LOG_B2": 0.5}},
                         r"adam\['ADAM_LOG_B2'\] must be an integer")]:
        with pytest.raises(ValueError, match=message):
            drv.start(8, 0, **kw)
    with pytest.raises(ValueError, match="step must be an integer >= 0"):
        drv.load_raw_optimizer_state(*drv_state_zero(drv), step=-1)
    with pytest.raises(ValueError, match="moments must be a sequence of 3 matrices"):
        drv.load_raw_optimizer_state([], [], step=0)
    m, v = drv_state_zero(drv)
    with pytest.raises(ValueError, match=r"log_v\[1\] must be a \[17, 16\] array"):
        drv.load_raw_optimizer_state(m, [v[0], v[1][:3], v[2]], step=0)
    m[2][0, 0] = 1 << 39
    with pytest.raises(ValueError, match=r"moments\[2\] must be raw sQ11.29/half_up integers"):
        drv.load_raw_optimizer_state(m, v, step=0)
    with pytest.raises(ValueError, match=r"batch_size must be an integer in 1..64, not 0"):
        drv.optimizer_state(batch_size=0)
    assert log == []
    sgd, sdev = make({**ADAM, "optimizer": "sgd"})
    log = record(sdev)
    for call, args in [(sgd.optimizer_state, ()), (sgd.read_raw_optimizer_state, ()),
                       (sgd.load_raw_optimizer_state, ([], []))]:
        with pytest.raises(ValueError, match="optimizer is 'sgd', which keeps no state"):
            call(*args, **({"step": 0} if args else {}))
    with pytest.raises(ValueError, match="adam: only for a learner built with optimizer='adam'"):
        sgd.start(8, 0, adam={})
    sgd.reset_optimizer()                                  # nothing to reset
    assert log == []


def drv_state_zero(drv):
    from sw.learner.adam import ADAM_POWER

    shapes = drv.config.numerics.weight_shapes()
    return ([np.zeros(s, np.int64) for s in shapes],
            [np.full(s, ADAM_POWER.log_min, np.int64) for s in shapes])


# -- registers per step and the state ----------------------------------------------------------
def test_registers_of_every_step_and_path():
    """train_step, prepare + run and start + wait write adam_registers(adam, t, B) with t the
    optimizer's step count + 1 and LR = 0; ``lr=`` overrides adam.lr for one step; a refused
    step does not count; writing the online network restarts the count."""
    from sw.driver import LearnerError
    from sw.learner.adam import AdamHyper, adam_registers

    h = AdamHyper(2e-3, (0.85, 0.995), 1e-6)
    drv, dev = make(adam=h)
    rng = np.random.default_rng(3)
    drv.init_weights(1)

    def expect(t, B, lr=None):
        hh = h if lr is None else AdamHyper(lr, (h.beta1, h.beta2), h.eps)
        assert adam_words(drv) == adam_registers(hh, t, B)
        assert drv.register_map.read_word("LR") == 0 and drv.optimizer_step == t

    drv.train_step(**random_batch(rng, 16), gamma=0.9)
    expect(1, 16)
    drv.train_step(**random_batch(rng, 5), gamma=0.9, lr=1e-4)
    expect(2, 5, 1e-4)
    batch = drv.prepare(**random_batch(rng, 33), gamma=0.9)
    assert batch.lr == 0 and batch.lr_value == h.lr
    drv.run(batch)
    expect(3, 33)
    drv.run(drv.prepare(**random_batch(rng, 7), lr=3e-3))
    expect(4, 7, 3e-3)
    drv.start(0, 0)                                        # refused by the hardware
    with pytest.raises(LearnerError, match="BATCH_SIZE is 0"):
        drv.wait()
    assert drv.optimizer_step == 4 and drv.optimizer_state().batch_size == 7
    drv.load_batch(drv.prepare(**random_batch(rng, 12)))
    drv.start(12, 0, int(0.9 * 2 ** 16))
    assert adam_words(drv) == adam_registers(h, 5, 12) and drv.optimizer_step == 4
    drv.wait()
    assert drv.optimizer_step == 5
    regs = adam_registers(AdamHyper(0.1), 1, 12)           # raw values of the caller's
    drv.start(12, 0, adam=regs)
    drv.wait()
    assert adam_words(drv) == regs and drv.optimizer_step == 6
    drv.load_weights(*drv.read_weights(), target="only")   # the target alone: state kept
    assert drv.optimizer_step == 6
    drv.load_raw_weights(drv.read_raw_weights(), target=False)
    assert drv.optimizer_step == 0
    drv.train_step(**random_batch(rng, 9))
    expect(1, 9)
    assert dev.runs == 8


def test_moments_in_memory_are_the_golden_steps():
    """The m<l> and v<l> regions after each step hold StepResult.moments and .log_v, and
    those are sw.learner.mlp.train_step's on the moments before the step; a write of the online
    network, init_weights and reset_optimizer give a fresh optimizer (m = 0, log v = log_min);
    optimizer_state reads 0 then."""
    from sw.learner.adam import ADAM_POWER, AdamHyper, adam_registers
    from sw.learner.mlp import train_step

    drv, dev = make(adam=AdamHyper(1e-2))
    num = drv.config.numerics
    rng = np.random.default_rng(4)
    ws, bs = init_net((4, 16, 16, 2), rng)
    drv.load_weights(ws, bs)
    zero_m, zero_v = drv_state_zero(drv)

    def check_fresh():
        m, v, _ = drv.read_raw_optimizer_state()
        assert all((a == b).all() for a, b in zip(m + v, zero_m + zero_v))
        st = drv.optimizer_state()
        assert st.step == 0 and st.batch_size is None
        assert all(not x.any() for part in st.exp_avg + st.exp_avg_sq for x in part)

    rows = [n + 1 for n in drv.config.sizes[:-1]]

    def residuals():
        return [drv.read_raw(f"wl{l}", r) for l, r in enumerate(rows)]

    check_fresh()
    assert not any(x.any() for x in residuals())
    m, v, res = zero_m, zero_v, residuals()
    for t, B in enumerate((16, 64, 3), 1):
        w0 = drv.read_raw_weights()
        tw = drv.read_raw_weights(target=True)
        drv.train_step(**random_batch(rng, B), gamma=0.95)
        nb = drv.last_batch
        ref = train_step(w0, nb.obs, num, lr=None, actions=nb.actions, rewards=nb.rewards,
                         dones=nb.dones, next_obs=nb.next_obs, target_weights=tw,
                         gamma=nb.gamma, sub_batch=8,
                         adam=(m, v, adam_registers(drv.adam, t, B), res))
        step = dev.last_step
        m, v, _ = drv.read_raw_optimizer_state()
        res = residuals()
        for got, a, b in zip(m + v + res + drv.read_raw_weights(),
                             step.moments + step.log_v + step.residuals + step.weights,
                             ref.moments + ref.log_v + ref.residuals + ref.weights):
            np.testing.assert_array_equal(got, a)
            np.testing.assert_array_equal(got, b)
        assert any((x != ADAM_POWER.log_min).any() for x in v) and any(x.any() for x in m)
        assert any(x.any() for x in res)
    st = drv.optimizer_state()
    assert st.step == 3 and st.batch_size == 3
    mfmt = num.moment_format
    np.testing.assert_array_equal(st.exp_avg[0][1], 2 / 3 * mfmt.to_float(m[1][:-1]))
    np.testing.assert_array_equal(st.exp_avg[1][2], 2 / 3 * mfmt.to_float(m[2][-1]))
    lv = v[0][-1].astype(float)
    np.testing.assert_allclose(st.exp_avg_sq[1][0], np.where(
        v[0][-1] == ADAM_POWER.log_min, 0, (2 / 3) ** 2 * 2 ** (lv / 2 ** 16)), rtol=1e-12)
    assert drv.optimizer_state(batch_size=2).exp_avg[0][0][0, 0] == \
        pytest.approx(1.5 * st.exp_avg[0][0][0, 0], rel=1e-12)
    drv.reset_optimizer()
    check_fresh()
    assert not any(x.any() for x in residuals())
    drv.train_step(**random_batch(rng, 8))
    drv.init_weights(2)
    check_fresh()
    drv.train_step(**random_batch(rng, 8))
    drv.load_weights(ws, bs)
    check_fresh()


def test_a_raw_checkpoint_resumes_bit_for_bit():
    """Weights, moments and step count read from one accelerator and loaded into another:
    three more steps give the same weights as three more on the first."""
    rng = np.random.default_rng(5)
    a, _ = make()
    a.init_weights(3)
    for _ in range(4):
        a.train_step(**random_batch(rng, 32))
    b, _ = make()
    b.load_raw_weights(a.read_raw_weights(), target=False)
    b.load_raw_weights(a.read_raw_weights(target=True), target="only")
    assert b.optimizer_step == 0
    b.load_raw_optimizer_state(*a.read_raw_optimizer_state(), step=a.optimizer_step)
    assert b.optimizer_step == 4
    with pytest.raises(ValueError, match="batch_size must be given"):
        b.optimizer_state()                     # not made by b's steps: B unknown
    for _ in range(3):
        batch = random_batch(rng, 20)
        assert a.train_step(**batch) == b.train_step(**batch)
    for x, y in zip(a.read_raw_weights() + sum(a.read_raw_optimizer_state(), []),
                    b.read_raw_weights() + sum(b.read_raw_optimizer_state(), [])):
        np.testing.assert_array_equal(x, y)


# -- accuracy ------------------------------------------------------------------------------------
def test_update_against_float64_adam():
    """adam_update_raw alone against float64 Adam on the same gradients: 4,000 weights, each
    with gradients of its own scale (log-uniform in 1e-5..10, signs random, quantized to the
    wgrad format), 100 steps, four hyperparameter sets.

    Per step, with lr = 1 (the weights put back to 0 each step, so the update is read whole):
    ``|u - u_float| <= 2**-22 + (1 + ρ_t)·lr_t·E_t / (sqrt(v_t) + ε_t) + ρ_t·|u_float|`` (the
    rounding to the master weights' format, the first moment's error E_t, the power unit's
    relative error ρ_t; :class:`FloatAdam`, docs/fixed_point.md). Over 100 steps at lr = 1e-3
    the master weights stay within the sum of those bounds (at most 1.9·10⁻⁴), measured
    2.3·10⁻⁵ at most, and the weights the network uses are the master weights rounded (half
    an ulp, 6.1·10⁻⁵)."""
    from sw.learner.adam import (ADAM_POWER, MASTER_EXTRA, AdamHyper, adam_registers,
                                 adam_update_raw)
    from sw.learner.spec import LearnerConfig

    num = LearnerConfig.from_dict(ADAM).numerics
    gf, wf = num.wgrad_format, num.weight_format
    n, T, B = 4000, 100, 32
    worst = {}
    for betas, eps in (((0.9, 0.999), 1e-8), ((0.5, 0.99), 1e-8), ((0.9, 0.9999), 1e-8),
                       ((0.9, 0.999), 1e-3)):
        for lr in (1.0, 1e-3):
            rng = np.random.default_rng(7)
            scale = 10.0 ** rng.uniform(-5, 1, n)
            h = AdamHyper(lr, betas, eps)
            fa = FloatAdam(h, B, n, num)
            m = np.zeros(n, np.int64)
            lv = np.full(n, ADAM_POWER.log_min, np.int64)
            w = np.zeros(n, np.int64)
            res = np.zeros(n, np.int64)
            w_float, total = np.zeros(n), np.zeros(n)

            def master(w, r):                   # M = W·2**8 + r, real
                return (w * (1 << MASTER_EXTRA) + r) * wf.ulp / (1 << MASTER_EXTRA)

            for t in range(1, T + 1):
                G = gf.quantize(scale * rng.normal(0, 1, n))
                w_in = np.zeros(n, np.int64) if lr == 1.0 else w
                r_in = np.zeros(n, np.int64) if lr == 1.0 else res
                w, m, lv, res, over = adam_update_raw(num, w_in, G, m, lv,
                                                      adam_registers(h, t, B), r_in)
                assert not over
                u, bound = fa.step(gf.to_float(G))
                if lr == 1.0:
                    err = np.abs(-(master(w, res) - master(w_in, r_in)) - u)
                    assert (err <= bound).all(), (betas, eps, t, (err / bound).max())
                w_float -= u
                total += bound
            if lr != 1.0:
                # the weights the network uses: M rounded to the weight format
                assert (np.abs(wf.to_float(w) - master(w, res)) <= wf.ulp / 2).all()
                diff = np.abs(master(w, res) - w_float)
                assert (diff <= total).all(), (betas, eps, (diff / total).max())
                assert total.max() < 2e-4
                worst[betas, eps] = diff.max()
    assert max(worst.values()) < 3e-5, worst


def torch_adam_run(loss, steps=100, seed=0, lr=1e-3, B=32):
    """The driver on the golden device and float64 torch.optim.Adam, ``steps`` steps on the
    same quantized batches from the same (quantized) weights; beside them float64 Adam on the
    device's own gradients (:class:`FloatAdam`). Returns the weights of the three, the two
    bounds summed over the steps and the device's optimizer state against the float one's."""
    torch = pytest.importorskip("torch")
    from sw.learner.adam import AdamHyper

    params = {**ADAM, "loss": loss}
    if loss == "mse":
        params["sizes"] = [4, 16, 16, 3]
    sizes = params["sizes"]
    h = AdamHyper(lr, (0.9, 0.999), 1e-8)
    drv, dev = make(params, adam=h)
    num = drv.config.numerics
    act, gf = num.act_format, num.wgrad_format
    rng = np.random.default_rng(seed)
    drv.load_weights(*init_net(sizes, rng))
    w0 = [np.vstack([w, b[None]]) for w, b in zip(*drv.read_weights())]
    L = len(w0)
    # torch: one tensor per layer, (n_in + 1) x n_out as the learner stores it (bias last)
    P = [torch.tensor(w, dtype=torch.float64, requires_grad=True) for w in w0]
    target = [w.clone() for w in P]
    opt = torch.optim.Adam(P, lr=lr, betas=(h.beta1, h.beta2), eps=h.eps)
    shadow = [FloatAdam(h, B, w.shape, num) for w in w0]
    w_shadow = [w.copy() for w in w0]
    b_opt = [np.zeros(w.shape) for w in w0]          # Σ_t bound of the device vs the shadow
    b_grad = [np.zeros(w.shape) for w in w0]         # Σ_t bound of the shadow vs torch
    e1 = [np.zeros(w.shape) for w in w0]             # EMAs of the gradient error |e|, e²
    e2 = [np.zeros(w.shape) for w in w0]
    gamma = float(num.coef_format.to_float(num.coef_format.quantize(0.99)))

    def net(ps, x):
        for l, p in enumerate(ps):
            x = torch.cat([x, torch.ones(x.shape[0], 1, dtype=x.dtype)], 1) @ p
            if l < L - 1:
                x = torch.relu(x)
        return x

    def q(x):
        return act.to_float(act.quantize(x))

    for t in range(1, steps + 1):
        if loss == "dqn":
            b = random_batch(rng, B)
            b.update(obs=q(b["obs"]), next_obs=q(b["next_obs"]), rewards=q(b["rewards"]))
            drv.train_step(**b, gamma=gamma)
            with torch.no_grad():
                y = torch.tensor(b["rewards"]) + gamma * torch.tensor(~b["dones"] * 1.0) \
                    * net(target, torch.tensor(b["next_obs"])).max(1).values
            qa = net(P, torch.tensor(b["obs"])).gather(
                1, torch.tensor(b["actions"])[:, None]).squeeze(1)
            f = ((qa - y) ** 2).mean()
        else:
            x, Y = q(rng.normal(0, 1, (B, 4))), q(rng.normal(0, 1, (B, 3)))
            drv.train_step(x, targets=Y)
            f = ((net(P, torch.tensor(x)) - torch.tensor(Y)) ** 2).sum(1).mean()
        opt.zero_grad()
        f.backward()
        g_torch = [p.grad.numpy().copy() for p in P]
        opt.step()
        bc1, sbc2 = 1 - h.beta1 ** t, math.sqrt(1 - h.beta2 ** t)
        for l in range(L):
            G = gf.to_float(drv.read_raw(f"grad{l}", sizes[l] + 1))
            u, bound = shadow[l].step(G)
            w_shadow[l] -= u
            b_opt[l] += bound
            # the gradient-error term: lr·min(|d| + |d'|, (Ē + |d'|·Ẽ) / (sqrt(v̂) + ε))
            e = 2 / B * G - g_torch[l]
            e1[l] = h.beta1 * e1[l] + (1 - h.beta1) * np.abs(e)
            e2[l] = h.beta2 * e2[l] + (1 - h.beta2) * e * e
            st = opt.state[P[l]]
            den = np.sqrt(st["exp_avg_sq"].numpy() / sbc2 ** 2) + h.eps
            d = st["exp_avg"].numpy() / bc1 / den
            d_dev = u / lr
            amp = (e1[l] / bc1 + np.abs(d_dev) * np.sqrt(e2[l]) / sbc2) / den
            b_grad[l] += lr * np.minimum(np.abs(d) + np.abs(d_dev), amp)
    w_dev = [np.vstack([w, b[None]]) for w, b in zip(*drv.read_weights())]
    w_torch = [p.detach().numpy() for p in P]
    state = drv.optimizer_state()
    m_dev = [np.vstack([a, b[None]]) for a, b in zip(*state.exp_avg)]
    v_dev = [np.vstack([a, b[None]]) for a, b in zip(*state.exp_avg_sq)]
    return dict(w0=w0, dev=w_dev, torch=w_torch, shadow=w_shadow, b_opt=b_opt, b_grad=b_grad,
                half_ulp=num.weight_format.ulp / 2,
                m=[(a, 2 / B * s.m, 2 / B * s.E) for a, s in zip(m_dev, shadow)],
                v=[(a, (2 / B) ** 2 * s.v) for a, s in zip(v_dev, shadow)], state=state)


@pytest.mark.parametrize("loss", ["dqn", "mse"])
def test_driver_against_torch_adam(loss):
    """100 Adam steps (lr = 1e-3, torch's other defaults, B = 32) of a 4-16-16-2 DQN (fixed
    target network) or a 4-16-16-3 MSE regression through the driver on the golden device and
    in float64 torch.optim.Adam, on the same quantized batches from the same weights.

    Every weight satisfies ``|W - W_torch| <= 2**-14 + Σ_t bound_t + Σ_t lr·min(|d_t| +
    |d'_t|, (Ē_t + |d'_t|·Ẽ_t) / (sqrt(v̂_t) + ε))``. 2**-14: the network's weights are the
    master weights rounded. The first sum is the optimizer's own error against float64 Adam
    on the device's gradients (:class:`FloatAdam`: 100·2**-22 of rounding, more for weights
    whose gradients stay within a few ulps of the wgrad format, where the first moment's
    resolution matters). The second is the effect of
    the fixed-point gradients' error e = g - g_torch (Ē_t, Ẽ_t: its moving averages as Adam
    forms m̂ and sqrt(v̂); d, d' torch's and the device's normalized steps): Adam divides e
    by sqrt(v̂), so a weight whose gradient is not much larger than the gradient's error (up
    to a few 10⁻³ here) steps up to 2·lr differently. Measured (the largest difference; the
    bound at that weight): DQN 3.1·10⁻³ (9.4·10⁻³), MSE 3.6·10⁻³ (2.1·10⁻²); device vs float
    Adam on its own gradients 6.2·10⁻⁵ and 6.2·10⁻⁵ (half a weight ulp: the master weights
    follow it to 10⁻⁵); the weights moved by up to 0.076 and
    0.043. optimizer_state agrees with the float moments of the device's gradients (m within
    E_T, v within the logarithm's error bound)."""
    r = torch_adam_run(loss)
    worst = 0.0
    for l in range(len(r["dev"])):
        diff = np.abs(r["dev"][l] - r["torch"][l])
        # + half a weight ulp: the network's weights are the master weights rounded
        half = r["half_ulp"]
        bound = r["b_opt"][l] + r["b_grad"][l] + half
        assert (diff <= bound).all(), (l, (diff / bound).max())
        assert (np.abs(r["dev"][l] - r["shadow"][l]) <= r["b_opt"][l] + half).all()
        worst = max(worst, diff.max())
        m, m_float, E = r["m"][l]
        assert (np.abs(m - m_float) <= E).all()
        v, v_float = r["v"][l]
        tol = 2.0 ** (log_v_error(100) * LOG_ULP) - 1
        assert (np.abs(v - v_float) <= tol * v_float).all()
    moved = max(np.abs(a - b).max() for a, b in zip(r["torch"], r["w0"]))
    assert r["state"].step == 100 and r["state"].batch_size == 32
    assert moved > 0.03 and worst < 0.01, (worst, moved)


# -- DQN with Adam (sw.rl.dqn --optimizer adam) ---------------------------------------------------
def test_dqn_program_runs_adam_on_both_learners(capsys, monkeypatch):
    """accelerators(optimizer="adam") is the shipped learner's golden model with Adam and
    cpu_baseline(optimizer="adam") torch.optim.Adam: one step from the same weights agrees
    (loss, TD errors, the Q values after the update). The command line passes the optimizer
    and Adam's default learning rate, and refuses what cannot run Adam, naming it."""
    pytest.importorskip("torch")
    pytest.importorskip("gymnasium")
    from sw.rl import dqn
    from sw.rl.dqn_common import ADAM_LR, init_weights

    rng = np.random.default_rng(11)
    ws, bs = init_weights([4, 64, 64, 2], rng)
    hw, _ = dqn.accelerators(target_period=1000, optimizer="adam")
    cpu, _ = dqn.cpu_baseline(target_period=1000, optimizer="adam")
    assert hw.driver.config.optimizer == "adam" and "adam" in hw.name
    assert cpu.name == "torch float32 Adam (CPU)"
    hw.load(ws, bs)
    cpu.load(ws, bs)
    B = 64
    obs = rng.normal(0, 0.8, (B, 4))
    batch = (obs, rng.integers(0, 2, B), np.full(B, 0.1), obs + rng.normal(0, 0.05, (B, 4)),
             rng.random(B) < 0.1)
    w = rng.uniform(0.2, 1.0, B)
    for _ in range(2):
        l_hw, d_hw = hw.step(*batch, 0.99, 1e-3, w)
        l_cpu, d_cpu = cpu.step(*batch, 0.99, 1e-3, w)
        assert abs(l_hw - l_cpu) < 0.02 * l_cpu + 1e-4, (l_hw, l_cpu)
        np.testing.assert_allclose(d_hw, d_cpu, atol=5e-3)
    assert hw.driver.optimizer_step == 2 and cpu._adam.state_dict()["state"][0]["step"] == 2
    hw.refresh()
    np.testing.assert_allclose(hw.q(obs), cpu.q(obs), atol=1e-2)

    with pytest.raises(ValueError, match="optimizer 'adam': the shipped learners' RTL has SGD"):
        dqn.accelerators(optimizer="adam", learner_device="sim")
    with pytest.raises(ValueError, match="optimizer must be one of sgd, adam, not 'rmsprop'"):
        dqn.accelerators(optimizer="rmsprop")
    with pytest.raises(ValueError, match="optimizer must be one of sgd, adam, not 'adamw'"):
        dqn.cpu_baseline(optimizer="adamw")
    with pytest.raises(ValueError, match="optimizer must be one of sgd, adam, not 'x'"):
        dqn.DQNConfig(optimizer="x")

    seen = []

    def captured(cfg, learner, replay, **kw):
        seen.append((cfg, learner.name))
        raise KeyboardInterrupt

    monkeypatch.setattr(dqn, "train", captured)
    for argv, lr in ((["--optimizer", "adam"], ADAM_LR),
                     (["--optimizer", "adam", "--lr", "1e-3"], 1e-3), ([], dqn.DQNConfig.lr)):
        with pytest.raises(KeyboardInterrupt):
            dqn.main(["--backend", "cpu", "--total-steps", "1100"] + argv)
        cfg, name = seen.pop()
        assert cfg.lr == lr and cfg.optimizer == (argv[1] if argv else "sgd")
        assert ("Adam" in name) == bool(argv)
    monkeypatch.undo()
    with pytest.raises(SystemExit) as e:
        dqn.main(["--optimizer", "adam", "--device", "trainer:golden"])
    assert e.value.code == 2
    assert "--optimizer adam: the fused trainer (--device) has SGD only" in capsys.readouterr().err


#: The learning check: sw.rl.dqn's defaults (20k steps, 19k gradient steps) with Adam at
#: ADAM_LR on both learners, three seeds.
LEARN_SEEDS, LEARN_STEPS = (0, 1, 2), 20_000


@pytest.mark.slow
@pytest.mark.heavy
@pytest.mark.xfail(reason="measured 264.7 against torch's 349.0 (0.76) with the master "
                          "weights (0.69 without); the rest of the gap is not identified yet "
                          "(docs/rl.md)")
def test_dqn_with_adam_learns_cartpole_as_torch_does():
    """DQN with prioritized replay on CartPole-v1, Adam (lr = ADAM_LR) on the golden learner
    (the shipped learner_cartpole_s4 with optimizer="adam") and on CPU torch, seeds 0-2, 20k
    steps (what ``python -m sw.rl.dqn --backend both --optimizer adam --seeds 3 --total-steps
    20000`` runs): the accelerator's mean final return (20-episode mean) should be at least
    0.9 of torch's; it is not yet (the xfail's reason). About 25 minutes on two cores (the
    golden Adam step is the cost): in ``make test-heavy``, not in ``make test``."""
    pytest.importorskip("torch")
    pytest.importorskip("gymnasium")
    from sw.rl import dqn

    finals = {"accel": [], "cpu": []}
    for seed in LEARN_SEEDS:
        cfg = dqn.DQNConfig(total_steps=LEARN_STEPS, seed=seed, lr=dqn.ADAM_LR,
                            optimizer="adam")
        for backend, make in (("accel", lambda: dqn.accelerators(
                target_period=cfg.target_period, optimizer="adam")),
                              ("cpu", lambda: dqn.cpu_baseline(
                target_period=cfg.target_period, seed=seed, optimizer="adam"))):
            learner, replay = make()
            res = dqn.train(cfg, learner, replay, progress=False)
            finals[backend].append(res.mean_return(20))
    assert np.mean(finals["accel"]) >= 0.9 * np.mean(finals["cpu"]), finals


@pytest.mark.slow
@pytest.mark.heavy
def test_dqn_with_adam_learns_cartpole_on_the_golden_learner():
    """10k environment steps (9k gradient steps, about 75 s: ``make test-heavy``; one step of
    both learners against each other runs in ``make test``) of DQN with Adam (lr =
    ADAM_LR) on the golden learner and replay accelerators, seed 0: a random policy scores
    about 22, this must pass 150 (measured 333 with the master weights, 212 without; CPU torch
    with Adam 203)."""
    pytest.importorskip("torch")
    pytest.importorskip("gymnasium")
    from sw.rl import dqn

    cfg = dqn.DQNConfig(total_steps=10_000, seed=0, lr=dqn.ADAM_LR, optimizer="adam")
    learner, replay = dqn.accelerators(target_period=cfg.target_period, optimizer="adam")
    res = dqn.train(cfg, learner, replay, progress=False)
    assert res.mean_return(20) > 150, res.mean_return(20)
