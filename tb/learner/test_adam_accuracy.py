"""Adam's accuracy in the learner (sw/learner/adam.py; the host side and the state:
tb/learner/test_adam.py).

* :func:`adam_update_raw` against float64 Adam on the same gradients within the bound of
  docs/fixed_point.md ("Adam"), per step and over 100 steps; the driver on the golden device
  against ``torch.optim.Adam`` over 100 steps of DQN and of MSE, within that bound plus the
  gradient-error term (float64 torch on the same quantized batches and weights);
* DQN with Adam (``sw.rl.dqn --optimizer adam``): one step of the golden learner and of CPU
  torch against each other; slow: DQN on CartPole, Adam on the golden learner against CPU
  torch with Adam.
"""

import math

import numpy as np
import pytest

from adam_session import ADAM, golden_learner
from learner_session import init_net, random_batch


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
    drv, dev = golden_learner(params, adam=h)
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
