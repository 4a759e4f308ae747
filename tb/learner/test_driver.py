"""LearnerDriver: validation, error paths and training on the golden device.

Fast tier: :class:`~sw.learner.driver.LearnerDriver` on
:class:`~sw.learner.device.LearnerGoldenDevice` -- every invalid argument is refused
before any bus access, STATUS.ERROR / busy / timeout / START_REFUSED / saturation surface as
the documented exceptions and warnings, a step equals :func:`sw.learner.mlp.train_step` on the
quantized batch, a float64 SGD step agrees within the fixed-point error, the loss falls over
several steps on CartPole-v1 transitions, and the target network follows the sync rule.

Slow tier (the same driver code on the RTL): tb/learner/test_driver_rtl.py.
"""

import numpy as np
import pytest

from driver_util import fake_pynq_overlay, record
from learner_session import SEED, init_net, random_batch
from sw.registry import shipped_modules

#: The learner of the fast tests: CartPole DQN 4-64-64-2 on 4 x 4 arrays (the shipped one).
CARTPOLE = {"sizes": [4, 64, 64, 2], "array": 4, "max_batch": 256, "sub_batch": 8,
            "axi_data_width": 128}


# -- helpers ---------------------------------------------------------------------------------
def make(params=CARTPOLE, **kw):
    from sw.learner.spec import LearnerConfig
    from sw.driver import LearnerDriver, LearnerGoldenDevice

    cfg = LearnerConfig.from_dict(dict(params))
    dev = LearnerGoldenDevice(cfg)
    return LearnerDriver(dev, **kw), dev


def cartpole_transitions(n, seed):
    """n CartPole-v1 transitions of a random policy; ``dones`` = terminated (truncation
    bootstraps, as in CleanRL's DQN)."""
    import gymnasium as gym

    env = gym.make("CartPole-v1")
    rng = np.random.default_rng(seed)
    env.action_space.seed(seed)
    o, _ = env.reset(seed=seed)
    out = {k: [] for k in ("obs", "actions", "rewards", "next_obs", "dones")}
    for _ in range(n):
        a = int(rng.integers(2))
        nxt, r, term, trunc, _ = env.step(a)
        for k, v in zip(out, (o, a, r, nxt, term)):
            out[k].append(v)
        o = env.reset()[0] if term or trunc else nxt
    env.close()
    return {k: np.array(v) for k, v in out.items()}


def forward(ws, bs, x):
    hs, zs, h = [x], [], x
    for l, (w, b) in enumerate(zip(ws, bs)):
        z = h @ w + b
        zs.append(z)
        h = np.maximum(z, 0) if l < len(ws) - 1 else z
        hs.append(h)
    return h, hs, zs


def float_step(ws, bs, lr, obs, actions=None, rewards=None, next_obs=None, dones=None,
               gamma=None, target=None, targets=None):
    """float64 SGD on (1/B) sum (Q - y)^2 (the driver's loss). Returns (loss, q, ws, bs)."""
    q, hs, zs = forward(ws, bs, obs)
    B = len(obs)
    if targets is None:
        qn = forward(*target, next_obs)[0]
        y = rewards + gamma * (1 - dones) * qn.max(axis=1)
        diff = np.zeros_like(q)
        diff[np.arange(B), actions] = q[np.arange(B), actions] - y
    else:
        diff = q - targets
    loss = float((diff ** 2).sum() / B)
    g = 2.0 / B * diff
    new_w, new_b = list(ws), list(bs)
    for l in range(len(ws) - 1, -1, -1):
        new_w[l] = ws[l] - lr * hs[l].T @ g
        new_b[l] = bs[l] - lr * g.sum(axis=0)
        if l:
            g = (g @ ws[l].T) * (zs[l - 1] > 0)
    return loss, q, new_w, new_b


# -- configuration ---------------------------------------------------------------------------
def test_config_read_back_and_checked():
    from sw.learner.spec import LearnerConfig
    from sw.driver import LearnerConfigMismatchError, LearnerDriver

    drv, dev = make()
    assert drv.config == dev.config
    LearnerDriver(dev, dict(CARTPOLE))                     # the same, as a dict
    with pytest.raises(LearnerConfigMismatchError,
                       match=r"HW_ARRAY: ARRAY 4 \(config: 8\)"):
        LearnerDriver(dev, LearnerConfig.from_dict({**CARTPOLE, "array": 8}))
    with pytest.raises(LearnerConfigMismatchError,
                       match=r"sizes \(4, 64, 64, 2\) \(config: \(4, 32, 32, 2\)\)"):
        LearnerDriver(dev, LearnerConfig.from_dict({**CARTPOLE, "sizes": [4, 32, 32, 2]}))
    with pytest.raises(LearnerConfigMismatchError, match="LOSS 0 .config: 1"):
        LearnerDriver(dev, LearnerConfig.from_dict({**CARTPOLE, "loss": "mse"}))
    mse, _ = make({**CARTPOLE, "loss": "mse", "sizes": [3, 16, 5]})
    assert mse.config.loss == "mse" and mse.config.sizes == (3, 16, 5)


def test_not_a_learner():
    from sw.gae.spec import GaeCoreConfig
    from sw.driver import GoldenDevice, LearnerConfigMismatchError, LearnerDriver

    with pytest.raises(LearnerConfigMismatchError, match="do not describe a learner"):
        LearnerDriver(GoldenDevice(GaeCoreConfig(n_pe=4, max_trajectories=8, capacity=32)))


# -- validation before any bus access ----------------------------------------------------------
B8 = random_batch(np.random.default_rng(1), 8)


def _dqn(**change):
    kw = dict(B8, gamma=0.99, lr=0.01)
    kw.update(change)
    return kw


BAD_STEPS = [
    (_dqn(obs=np.zeros((8, 5))), r"obs must be a \[B, 4\] array, not shape \(8, 5\)"),
    (_dqn(obs=np.zeros((0, 4))), r"obs must hold 1..256 samples \(max_batch\), not 0"),
    (_dqn(obs=np.zeros((257, 4))), r"obs must hold 1..256 samples \(max_batch\), not 257"),
    (_dqn(obs=np.array([["a"] * 4] * 8)), "obs must be a numeric array"),
    (_dqn(rewards=np.r_[np.ones(7), np.nan]), r"rewards must be finite: 1 NaN .* at \(7,\)"),
    (_dqn(rewards=np.ones(7)), r"rewards must be a \[8\] array, not shape \(7,\)"),
    (_dqn(actions=np.full(8, 2)), r"actions must be integers in 0..1, not actions\[0\] = 2"),
    (_dqn(actions=np.zeros(8)), "actions must be an integer array, not dtype float64"),
    (_dqn(dones=np.full(8, 0.5)), "dones must be bool-like"),
    (_dqn(next_obs=np.zeros((7, 4))), r"next_obs must be a \[8, 4\] array"),
    (_dqn(next_obs=None), "next_obs must be given for a DQN learner"),
    (_dqn(gamma=1.5), r"gamma must be a real number in \[0, 1\], not 1.5"),
    (_dqn(gamma=True), "gamma must be a real number, not True"),
    (_dqn(lr=-0.1), r"lr must be a real number >= 0, not -0.1"),
    (_dqn(lr=4.0), r"eta = lr \* 2 / B = 1 outside the LR register"),
    (_dqn(lr=1e-9), "below the LR register's resolution"),
    (_dqn(targets=np.zeros((8, 2))), "targets: only for an MSE learner"),
    (_dqn(obs=np.full((8, 4), 40.0)), r"obs: 32 value\(s\) outside the sQ6.10/half_up range "
                                      r"\[-32, 31.999\], the first obs\[0, 0\] = 40"),
    (_dqn(rewards=np.r_[np.zeros(7), -33.0]), r"the first rewards\[7\] = -33"),
    (_dqn(loss_weights=np.ones(7)), r"loss_weights must be a \[8\] array, not shape \(7,\)"),
    (_dqn(loss_weights=np.r_[np.ones(7), 1.5]),
     r"loss_weights must be in \[0, 1\] \(normalize them .*loss_weights\[7\] = 1.5"),
    (_dqn(loss_weights=np.r_[-0.1, np.ones(7)]), r"not loss_weights\[0\] = -0.1"),
    (_dqn(loss_weights=np.r_[np.nan, np.ones(7)]), "loss_weights must be finite"),
]


@pytest.mark.parametrize("kw,message", BAD_STEPS, ids=range(len(BAD_STEPS)))
def test_bad_step_arguments_touch_nothing(kw, message):
    drv, dev = make()
    log = record(dev)
    with pytest.raises(ValueError, match=message):
        drv.train_step(**kw)
    assert log == []


def test_bad_mse_arguments():
    drv, dev = make({**CARTPOLE, "loss": "mse"})
    log = record(dev)
    obs = np.zeros((4, 4))
    with pytest.raises(ValueError, match="targets must be given for an MSE learner"):
        drv.train_step(obs, lr=0.1)
    with pytest.raises(ValueError, match="actions, rewards: only for a DQN learner"):
        drv.train_step(obs, np.zeros(4, int), np.zeros(4), targets=np.zeros((4, 2)), lr=0.1)
    with pytest.raises(ValueError, match="loss_weights: only for a DQN learner"):
        drv.train_step(obs, targets=np.zeros((4, 2)), lr=0.1, loss_weights=np.ones(4))
    with pytest.raises(ValueError, match=r"targets must be a \[4, 2\] array"):
        drv.train_step(obs, targets=np.zeros((4, 3)), lr=0.1)
    with pytest.raises(ValueError, match="sync_target needs a DQN learner"):
        drv.train_step(obs, targets=np.zeros((4, 2)), lr=0.1, sync_target=True)
    with pytest.raises(ValueError, match="target=True needs a DQN learner"):
        drv.read_weights(target=True)
    with pytest.raises(ValueError, match="target=True needs a DQN learner"):
        drv.sync_target()
    with pytest.raises(ValueError, match="sync_period needs a DQN learner"):
        drv.sync_period = 4
    assert log == []


def test_bad_weights_touch_nothing():
    drv, dev = make()
    ws, bs = init_net((4, 64, 64, 2), np.random.default_rng(2))
    log = record(dev)
    with pytest.raises(ValueError, match=r"weights\[0\] must have shape \(4, 64\) .*transpose "
                                         r"torch's nn.Linear.weight"):
        drv.load_weights([ws[0].T] + ws[1:], bs)
    with pytest.raises(ValueError, match=r"biases\[2\] must be a \[2\] array"):
        drv.load_weights(ws, bs[:2] + [np.zeros(3)])
    with pytest.raises(ValueError, match="weights must be a sequence of 3 arrays"):
        drv.load_weights(ws[:2], bs)
    big = [w.copy() for w in ws]
    big[1][3, 5] = 4.5
    with pytest.raises(ValueError, match=r"weights\[1\]: 1 value\(s\) outside the "
                                         r"sQ3.13/half_up range \[-4, 3.99988\], the first "
                                         r"weights\[1\]\[3, 5\] = 4.5"):
        drv.load_weights(big, bs)
    with pytest.raises(ValueError, match="sync_period must be an integer in 0..65535"):
        drv.sync_period = -1
    assert log == []


def test_on_range_clip_saturates_with_a_warning():
    from sw.driver import LearnerRangeWarning

    drv, _ = make(on_range="clip")
    ws, bs = init_net((4, 64, 64, 2), np.random.default_rng(3))
    ws[0][1, 2], bs[2][1] = 9.0, -7.0
    with pytest.warns(LearnerRangeWarning) as rec:
        drv.load_weights(ws, bs)
    assert [str(w.message).split(" = ")[0] for w in rec] == [
        "weights[0]: 1 value(s) outside the sQ3.13/half_up range [-4, 3.99988], the first "
        "weights[0][1, 2]", "biases[2]: 1 value(s) outside the sQ3.13/half_up range "
        "[-4, 3.99988], the first biases[2][1]"]
    assert all(str(w.message).endswith(": saturated") for w in rec)
    got_w, got_b = drv.read_weights()
    fmt = drv.config.numerics.weight_format
    assert got_w[0][1, 2] == fmt.max_value and got_b[2][1] == fmt.min_value
    tw, tb = drv.read_weights(target=True)                    # load_weights: both networks
    for a, b in zip(got_w + got_b, tw + tb):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="on_range must be 'error' or 'clip'"):
        make(on_range="wrap")


# -- the step --------------------------------------------------------------------------------
SHIPPED_LEARNERS = shipped_modules(family="learner", role="accelerator")


@pytest.mark.parametrize("module", SHIPPED_LEARNERS)
def test_step_equals_the_golden_model_on_the_quantized_batch(module):
    """Steps of B = max_batch (256), 64 and 13 on each shipped learner's golden device."""
    from sw.learner.mlp import train_step
    from sw.registry import SHIPPED

    params = next(p for m, _, p in SHIPPED if m == module)
    drv, dev = make(params)
    rng = np.random.default_rng(4)
    ws, bs = init_net((4, 64, 64, 2), rng)
    drv.load_weights(ws, bs)
    raw0 = drv.read_raw_weights()
    fmt = drv.config.numerics.weight_format
    for l in range(3):                                   # weights quantized, bias last row
        np.testing.assert_array_equal(raw0[l], fmt.quantize(np.vstack([ws[l], bs[l]])))
    for B in (drv.config.max_batch, 64, 13):
        batch = random_batch(rng, B)
        d = drv.train_step(**batch, gamma=0.97, lr=0.02, details=True)
        nb = drv.last_batch
        step = train_step(raw0, nb.obs, drv.config.numerics, lr=nb.lr, actions=nb.actions,
                          rewards=nb.rewards, dones=nb.dones, next_obs=nb.next_obs,
                          target_weights=drv.read_raw_weights(target=True), gamma=nb.gamma,
                          sub_batch=drv.config.sub_batch, dp=drv.config.dp)
        assert nb.lr == round(0.02 * 2 / B * 2 ** 24) and nb.gamma == round(0.97 * 2 ** 16)
        assert d.loss_sum == step.loss_sum and d.loss == pytest.approx(step.loss, rel=1e-12)
        np.testing.assert_array_equal(d.q, drv.config.numerics.act_format.to_float(step.q))
        np.testing.assert_array_equal(
            d.td_errors, drv.config.numerics.grad_format.to_float(
                step.deltas[-1][np.arange(B), nb.actions]))
        raw1 = drv.read_raw_weights()
        for a, b in zip(raw1, step.weights):
            np.testing.assert_array_equal(a, b)
        from sw.learner.schedule import step_cycles
        # The shipped configuration: stage_arrays is not in the HW_* registers (drv.config).
        assert d.cycles == step_cycles(dev.config, B) and not d.synced
        assert d.status["ERROR"] == 0 and not any(d.status[f] for f in
                                                  ("FW_OVERFLOW", "WU_OVERFLOW"))
        raw0 = raw1


def test_loss_weights_of_one_are_the_unweighted_step():
    """loss_weights = 1.0 everywhere: the same weights, loss, Q values, TD errors and cycles
    as no loss_weights (the existing results do not change)."""
    rng = np.random.default_rng(12)
    net = init_net((4, 64, 64, 2), rng)
    batch = random_batch(rng, 40)
    out = []
    for lw in (None, np.ones(40)):
        drv, _ = make()
        drv.load_weights(*net)
        d = drv.train_step(**batch, gamma=0.97, lr=0.05, loss_weights=lw, details=True)
        out.append((d, drv.read_raw_weights()))
    (a, wa), (b, wb) = out
    assert (a.loss, a.loss_sum, a.cycles) == (b.loss, b.loss_sum, b.cycles)
    assert a.weighted_loss == a.loss == b.weighted_loss
    np.testing.assert_array_equal(a.q, b.q)
    np.testing.assert_array_equal(a.td_errors, b.td_errors)
    for x, y in zip(wa, wb):
        np.testing.assert_array_equal(x, y)


def test_loss_weights_reach_the_update():
    """A weighted step equals the golden model with the quantized weights; a sample of weight
    0 has no effect on the update (whatever it holds), and halving every weight is not the
    unweighted step; TD errors stay unweighted, the weighted loss is mean(w·td²)."""
    from sw.learner.mlp import train_step

    rng = np.random.default_rng(13)
    net = init_net((4, 64, 64, 2), rng)
    B = 24
    batch = random_batch(rng, B)
    lw = rng.uniform(0.05, 1.0, B)
    lw[5] = 0.0
    results = []
    for change in (False, True):
        b = {k: v.copy() for k, v in batch.items()}
        if change:                     # sample 5 is something else entirely
            b["obs"][5] = [2.0, -1.0, 0.3, 1.5]
            b["next_obs"][5] *= -1
            b["rewards"][5] = -3.0
            b["actions"][5] = 1 - b["actions"][5]
            b["dones"][5] = not b["dones"][5]
        drv, _ = make()
        drv.load_weights(*net)
        raw0 = drv.read_raw_weights()
        d = drv.train_step(**b, gamma=0.97, lr=0.05, loss_weights=lw, details=True)
        results.append((d, drv.read_raw_weights()))
    (d, w_a), (d_changed, w_b) = results
    for x, y in zip(w_a, w_b):
        np.testing.assert_array_equal(x, y)
    assert d.loss_sum != d_changed.loss_sum          # the unweighted loss sees sample 5
    nb = drv.last_batch
    num = drv.config.numerics
    assert nb.loss_weights[5] == 0 and nb.loss_weights.max() <= 1 << 16
    step = train_step(raw0, nb.obs, num, lr=nb.lr, actions=nb.actions, rewards=nb.rewards,
                      dones=nb.dones, next_obs=nb.next_obs, gamma=nb.gamma,
                      target_weights=drv.read_raw_weights(target=True),
                      loss_weights=nb.loss_weights, sub_batch=drv.config.sub_batch)
    for x, y in zip(w_b, step.weights):
        np.testing.assert_array_equal(x, y)
    td = num.act_format.to_float(step.q[np.arange(B), nb.actions] - step.target)
    np.testing.assert_array_equal(d_changed.td_errors, td)
    w = num.loss_weight_format.to_float(nb.loss_weights)
    assert d_changed.weighted_loss == pytest.approx(np.mean(w * td ** 2), rel=1e-12)
    plain = train_step(raw0, nb.obs, num, lr=nb.lr, actions=nb.actions, rewards=nb.rewards,
                       dones=nb.dones, next_obs=nb.next_obs, gamma=nb.gamma,
                       target_weights=drv.read_raw_weights(target=True),
                       sub_batch=drv.config.sub_batch)
    moved = [np.abs(p - r).sum() for p, r in zip(plain.weights, raw0)]
    diff = [np.abs(p - x).sum() for p, x in zip(plain.weights, step.weights)]
    assert sum(diff) > 0.2 * sum(moved)


def test_float_reference_within_tolerance():
    """One DQN and one MSE step against float64 SGD from the same float inputs."""
    rng = np.random.default_rng(5)
    drv, _ = make()
    ws, bs = init_net((4, 64, 64, 2), rng)
    drv.load_weights(ws, bs)
    start, _ = drv.read_weights()
    batch = random_batch(rng, 32)
    loss = drv.train_step(**batch, gamma=0.99, lr=0.05)
    ref_loss, _, ref_w, ref_b = float_step(ws, bs, 0.05, **batch, gamma=0.99, target=(ws, bs))
    assert loss == pytest.approx(ref_loss, rel=0.02)
    got_w, got_b = drv.read_weights()
    for a, b in zip(got_w + got_b, ref_w + ref_b):
        np.testing.assert_allclose(a, b, atol=2e-3)
    # The update itself (not just the weights, which barely move) is close.
    upd = np.concatenate([(g - w).ravel() for g, w in zip(got_w, start)])
    ref = np.concatenate([(r - w).ravel() for r, w in zip(ref_w, ws)])
    assert np.linalg.norm(upd - ref) < 0.05 * np.linalg.norm(ref)

    mse, _ = make({**CARTPOLE, "loss": "mse", "sizes": [4, 32, 3]})
    ws, bs = init_net((4, 32, 3), rng)
    mse.load_weights(ws, bs)
    obs, y = rng.normal(0, 1, (48, 4)), rng.normal(0, 1, (48, 3))
    d = mse.train_step(obs, targets=y, lr=0.05, details=True)
    ref_loss, ref_q, ref_w, ref_b = float_step(ws, bs, 0.05, obs, targets=y)
    assert d.loss == pytest.approx(ref_loss, rel=0.01)
    np.testing.assert_allclose(d.q, ref_q, atol=5e-3)
    np.testing.assert_allclose(d.td_errors, ref_q - y, atol=5e-3)
    got_w, got_b = mse.read_weights()
    for a, b in zip(got_w + got_b, ref_w + ref_b):
        np.testing.assert_allclose(a, b, atol=2e-3)


def test_training_on_cartpole_reduces_the_loss():
    """40 DQN steps on minibatches of CartPole-v1 transitions (fixed target network): the
    loss on a held-out batch falls by more than half, as it does for float64 SGD, and the
    fixed-point weights stay close to the float ones."""
    data = cartpole_transitions(1024, SEED)
    rng = np.random.default_rng(SEED)
    drv, _ = make()
    ws, bs = init_net((4, 64, 64, 2), rng)
    drv.load_weights(ws, bs)
    target = ([w.copy() for w in ws], [b.copy() for b in bs])
    fw, fb = ws, bs
    held = {k: v[-64:] for k, v in data.items()}
    gamma, lr = 0.9, 0.05

    def held_loss(w, b):
        return float_step(w, b, 0.0, **held, gamma=gamma, target=target)[0]

    start = held_loss(*drv.read_weights())
    for _ in range(40):
        idx = rng.choice(960, 64, replace=False)
        batch = {k: v[idx] for k, v in data.items()}
        drv.train_step(**batch, gamma=gamma, lr=lr)
        fw, fb = float_step(fw, fb, lr, **batch, gamma=gamma, target=target)[2:]
    end, ref_end = held_loss(*drv.read_weights()), held_loss(fw, fb)
    assert end < 0.5 * start, (start, end)
    assert end == pytest.approx(ref_end, rel=0.05), (end, ref_end)
    got_w, _ = drv.read_weights()
    for a, b in zip(got_w, fw):
        np.testing.assert_allclose(a, b, atol=0.01)


def test_target_sync_by_hardware_and_by_host_copy():
    """sync_target(), train_step(sync_target=True) and sync_period give the same networks
    whether the accelerator syncs (SYNC_* registers) or the driver copies on the host."""
    rng = np.random.default_rng(6)
    ws, bs = init_net((4, 64, 64, 2), rng)
    batches = [random_batch(rng, 16) for _ in range(7)]
    runs = []
    for hardware in (True, False):
        drv, _ = make(sync_period=3)
        if not hardware:
            drv.hardware_sync = False
        elif not drv.hardware_sync:
            pytest.skip("the learner RTL has no target-sync registers")
        drv.load_weights(ws, bs)
        tw0 = drv.read_raw_weights(target=True)
        synced = []
        for i, b in enumerate(batches):
            d = drv.train_step(**b, gamma=0.9, lr=0.05, sync_target=(i == 4), details=True)
            synced.append(d.synced)
            w, t = drv.read_raw_weights(), drv.read_raw_weights(target=True)
            for x, y in zip(w, t):
                assert np.array_equal(x, y) == d.synced
        assert synced == [False, False, True, False, True, False, False]
        assert not any(np.array_equal(x, y) for x, y in zip(tw0, t))
        drv.sync_target()
        for x, y in zip(drv.read_raw_weights(), drv.read_raw_weights(target=True)):
            np.testing.assert_array_equal(x, y)
        runs.append((w, t))
    for x, y in zip(runs[0][0] + runs[0][1], runs[1][0] + runs[1][1]):
        np.testing.assert_array_equal(x, y)


def test_load_weights_target_only_and_online_only():
    drv, _ = make()
    rng = np.random.default_rng(7)
    a, b = init_net((4, 64, 64, 2), rng), init_net((4, 64, 64, 2), rng)
    drv.load_weights(*a)
    drv.load_weights(*b, target="only")
    w, _ = drv.read_weights()
    t, _ = drv.read_weights(target=True)
    fmt = drv.config.numerics.weight_format
    np.testing.assert_array_equal(w[1], fmt.to_float(fmt.quantize(a[0][1])))
    np.testing.assert_array_equal(t[1], fmt.to_float(fmt.quantize(b[0][1])))
    drv.load_weights(*b, target=False)
    np.testing.assert_array_equal(drv.read_weights()[0][2], t[2])


def test_a_step_before_any_weights_is_refused_before_any_bus_access():
    """A new accelerator's network is all zeros: every gradient 0, the loss the mean of the
    squared targets forever. train_step and run refuse it; loading the target alone does not
    count."""
    drv, dev = make()
    batch = random_batch(np.random.default_rng(3), 8)
    log = record(dev)
    with pytest.raises(RuntimeError, match=r"train_step before any weights: .* all zeros "
                                           r"until load_weights, load_raw_weights or "
                                           r"init_weights"):
        drv.train_step(**batch, lr=0.01)
    with pytest.raises(RuntimeError, match="run before any weights"):
        drv.run(drv.prepare(**batch, lr=0.01))
    assert log == []
    with pytest.raises(ValueError, match="lr must be a real number"):   # arguments first
        drv.train_step(**batch, lr=-1.0)
    drv.load_weights(*init_net((4, 64, 64, 2), np.random.default_rng(4)), target="only")
    with pytest.raises(RuntimeError, match="train_step before any weights"):
        drv.train_step(**batch, lr=0.01)
    drv.load_raw_weights(drv.read_raw_weights(target=True), target=False)
    assert drv.train_step(**batch, lr=0.01) > 0


def test_init_weights_is_pytorchs_default_and_starts_training():
    from sw.learner.mlp import init_weights

    drv, _ = make()
    drv.init_weights(seed=5)
    want = init_weights(drv.config.numerics, np.random.default_rng(5))
    for got in (drv.read_raw_weights(), drv.read_raw_weights(target=True)):
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
    batch = random_batch(np.random.default_rng(6), 16)
    losses = [drv.train_step(**batch, gamma=0.0, lr=0.05) for _ in range(5)]
    assert losses[-1] < losses[0]
    with pytest.raises(ValueError, match=r"seed must be an integer in 0..2\*\*63 - 1, not -1"):
        drv.init_weights(seed=-1)
    with pytest.raises(ValueError, match="scale must be a positive number, not 0"):
        drv.init_weights(scale=0)


def test_another_drivers_weights_are_taken_over_explicitly():
    """Weights left in the accelerator by another driver: read back and written again, they
    train as they would have on the first driver."""
    from sw.driver import LearnerDriver

    first, dev = make()
    first.load_weights(*init_net((4, 64, 64, 2), np.random.default_rng(8)))
    batch = random_batch(np.random.default_rng(9), 8)
    ref, _ = make()
    ref.load_raw_weights(first.read_raw_weights())
    second = LearnerDriver(dev)
    with pytest.raises(RuntimeError, match="load_raw_weights\\(read_raw_weights\\(\\), "
                                           "target=False\\)"):
        second.train_step(**batch, lr=0.02)
    second.load_raw_weights(second.read_raw_weights(), target=False)
    assert second.train_step(**batch, lr=0.02) == ref.train_step(**batch, lr=0.02)


# -- errors, warnings, timing ------------------------------------------------------------------
def test_status_error_busy_refused_and_timeout():
    from sw.driver import (LearnerBusyError, LearnerError, LearnerTimeoutError,
                           StartRefusedWarning)

    drv, dev = make()
    rng = np.random.default_rng(8)
    drv.load_weights(*init_net((4, 64, 64, 2), rng))
    before = dev.image.copy()
    for bad in (0, 257):                             # the hardware refuses: memory untouched
        drv.start(bad, 100, 0)
        with pytest.raises(LearnerError, match="learner error 1: BATCH_SIZE is 0 or above "
                                               "max_batch") as e:
            drv.wait()
        assert e.value.code == 1 and drv.last_status["CYCLES"] == 0
    assert np.array_equal(dev.image, before)
    with pytest.raises(ValueError, match=r"batch_size must be in 0..8191"):
        drv.start(8192, 0)
    with pytest.raises(ValueError, match=r"lr must be in 0..16777215"):
        drv.start(8, -1)
    batch = drv.prepare(**random_batch(rng, 64), lr=0.01)
    drv.load_batch(batch)
    drv.start(batch.batch_size, batch.lr, batch.gamma)
    log = record(dev)
    with pytest.raises(LearnerBusyError, match="AP_IDLE = 0"):
        drv.load_weights(*init_net((4, 64, 64, 2), rng))
    with pytest.raises(LearnerBusyError):
        drv.train_step(**random_batch(rng, 4), lr=0.01)
    assert [e[0] for e in log] == ["r", "r"]              # one CTRL read each, nothing else
    drv.register_map.CTRL.AP_START = 1                   # during the step: dropped
    with pytest.warns(StartRefusedWarning, match="was dropped"):
        drv.wait()
    drv.start(batch.batch_size, batch.lr, batch.gamma)
    with pytest.raises(LearnerTimeoutError, match="no interrupt within 1e-06 s"):
        drv.wait(timeout=1e-6)
    drv.wait()                                           # the step still finishes
    poll, _ = make(use_interrupt=False, poll_interval=1e-6)
    poll.load_batch(batch)
    poll.start(batch.batch_size, batch.lr, batch.gamma)
    with pytest.raises(LearnerTimeoutError, match="CTRL.AP_DONE not set within 1e-05 s"):
        poll.wait(timeout=1e-5)


def test_saturation_warns_naming_the_flags():
    from sw.driver import LearnerOverflowWarning

    drv, _ = make()
    rng = np.random.default_rng(9)
    ws, bs = init_net((4, 64, 64, 2), rng)
    ws[0][:] = 3.9                                        # every hidden unit far out of range
    drv.load_weights(ws, bs)
    batch = random_batch(rng, 16)
    batch["obs"] = np.abs(batch["obs"]) + 1.0
    with pytest.warns(LearnerOverflowWarning, match=r"learner STATUS FW_OVERFLOW.*: an "
                                                    r"activation or Q value saturated") as w:
        drv.train_step(**batch, lr=0.01)
    assert w[0].filename == __file__                     # attributed to the caller
    assert drv.last_status["FW_OVERFLOW"] == 1


def test_interrupt_and_polling_agree():
    rng = np.random.default_rng(10)
    net = init_net((4, 64, 64, 2), rng)
    batches = [random_batch(rng, B) for B in (64, 7, 33)]
    out = []
    for irq in (True, False):
        drv, _ = make(use_interrupt=irq, poll_interval=1e-6)
        drv.load_weights(*net)
        out.append([drv.train_step(**b, lr=0.02, details=True) for b in batches])
    for a, b in zip(*out):
        assert a.loss_sum == b.loss_sum and a.cycles == b.cycles
        np.testing.assert_array_equal(a.q, b.q)


def test_pynq_learner_ip_runs_the_driver(monkeypatch):
    """LearnerIP (bound to the shipped learners' VLNVs) and PynqDevice(vlnv=LEARNER_VLNV) on a
    fake pynq whose MMIO windows are a golden device: the same results as the driver on a
    golden device of its own."""
    from sw.registry import SHIPPED
    from sw.driver import GAE_VLNV, LEARNER_VLNV, LEARNER_VLNVS, LearnerDriver
    from sw.driver import pynq_device as pb

    drv, dev = make()
    module = next(m for m, block, _ in SHIPPED if block == "learner")
    ip_dict, vl = fake_pynq_overlay(monkeypatch, dev, "learner_0", module)
    LearnerIP = pb.learner_ip_class()
    assert pb.learner_ip_class() is LearnerIP and pb.LearnerIP is LearnerIP
    assert vl in LEARNER_VLNVS and LearnerIP.bindto == list(LEARNER_VLNVS)
    ip = LearnerIP(ip_dict["learner_0/s_axi_control"])
    assert ip.register_map.HW_SIZE1 == 64
    with pytest.raises(AttributeError, match="s_axi_mem window"):
        LearnerIP(ip_dict["learner_0/s_axi_mem"]).register_map
    rng = np.random.default_rng(11)
    net, batch = init_net((4, 64, 64, 2), rng), random_batch(rng, 24)
    ip.load_weights(*net)
    got = ip.train_step(**batch, lr=0.02, sync_target=True)
    assert ip.driver() is ip.driver() and not ip.driver()._use_irq
    ref, _ = make()
    ref.load_weights(*net)
    assert got == ref.train_step(**batch, lr=0.02, sync_target=True)
    for a, b in zip(ip.read_weights(target=True)[0], ref.read_weights(target=True)[0]):
        np.testing.assert_array_equal(a, b)
    board = pb.PynqDevice("learner.bit", vlnv=LEARNER_VLNV)
    assert board.instance == "learner_0" and not board.has_interrupt
    assert LearnerDriver(board).config == dev.config
    assert pb.PynqDevice("learner.bit").instance == "learner_0"    # default: any of ours
    with pytest.raises(ValueError, match="expected one accelerator with VLNV .*gae_accel"):
        pb.PynqDevice("learner.bit", vlnv=GAE_VLNV)


def test_exports():
    import sw.driver as d

    for name in ("LearnerDriver", "LearnerGoldenDevice", "LearnerError", "LearnerBusyError",
                 "LearnerTimeoutError", "LearnerConfigMismatchError", "LearnerOverflowWarning",
                 "LearnerRangeWarning", "read_learner_config", "LEARNER_VLNV"):
        assert name in d.__all__ and hasattr(d, name)
    assert d.LEARNER_VLNV == "rlk:accel:learner:1.0"
