"""Adam in the learner (sw/learner/adam.py, the driver's sw/learner/optim.py): the host side and
the state (the accuracy: tb/learner/test_adam_accuracy.py).

* the host's side: :class:`AdamHyper` and :func:`adam_registers` refuse bad arguments by
  name, and the driver writes the ADAM_* registers of every step on every path (train_step,
  prepare and run, start and wait), counting only the steps that ran;
* the state: the ``m<l>``/``v<l>`` regions after a step are the golden step's moments, a write
  of the online network or ``reset_optimizer`` starts a fresh optimizer, a raw checkpoint
  resumes training bit for bit.
"""

import math

import numpy as np
import pytest

from adam_session import ADAM, golden_learner
from driver_util import record
from learner_session import init_net, random_batch


def signed_word(drv, name):
    """An ADAM_* register's value as written (two's complement for the logarithms)."""
    from sw.learner.adam import ADAM_ARGS

    word = drv.register_map.read_word(name)
    width = drv.register_map[name]._register.fields[0].width
    return word - (1 << width) if ADAM_ARGS[name][1] and word >> (width - 1) else word


def adam_words(drv):
    from sw.learner.adam import ADAM_ARGS

    return {name: signed_word(drv, name) for name in ADAM_ARGS}


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
        _, dev = golden_learner(cfg.to_dict())
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

    drv, dev = golden_learner()
    assert repr(drv.adam) == repr(AdamHyper()) and drv.optimizer_step == 0
    drv2, _ = golden_learner(adam={"lr": 3e-4, "betas": (0.8, 0.99)})
    assert (drv2.adam.lr, drv2.adam.beta1, drv2.adam.beta2, drv2.adam.eps) == \
        (3e-4, 0.8, 0.99, 1e-8)
    h = AdamHyper(lr=1e-2)
    assert golden_learner(adam=h)[0].adam is h
    for adam, message in [({"lr": -1}, "adam: lr must be > 0"),
                          ({"learning_rate": 1e-3}, "adam: unknown argument.*learning_rate"),
                          ({"betas": (0.9, 1.5)}, r"adam: beta2 must be in \[0, 1\)"),
                          (1e-3, "adam must be an AdamHyper, a dict of its arguments"),
                          ("adam", "adam must be an AdamHyper")]:
        with pytest.raises(ValueError, match=message):
            golden_learner(adam=adam)
    with pytest.raises(ValueError, match="adam is for a learner built with optimizer='adam'; "
                                         "this one's optimizer is 'sgd'"):
        golden_learner({**ADAM, "optimizer": "sgd"}, adam=AdamHyper())
    sgd, _ = golden_learner({**ADAM, "optimizer": "sgd"})
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
    drv, dev = golden_learner()
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
    big = golden_learner(adam={"eps": 1e40})[0]
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
    sgd, sdev = golden_learner({**ADAM, "optimizer": "sgd"})
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
    drv, dev = golden_learner(adam=h)
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

    drv, dev = golden_learner(adam=AdamHyper(1e-2))
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
    a, _ = golden_learner()
    a.init_weights(3)
    for _ in range(4):
        a.train_step(**random_batch(rng, 32))
    b, _ = golden_learner()
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
