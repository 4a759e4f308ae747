"""DQN learner end to end: one SGD step of the 4-64-64-2 CartPole Q network on a batch of B
transitions (online forward, target-network forward on the next observations, TD targets,
backward, weight update).

Accelerator: :class:`sw.learner.driver.LearnerDriver` ``train_step`` on the shipped Alveo
kernels ``learner_kernel_s4`` (4 x 4 tensor units) and ``learner_kernel_s8`` (8 x 8)
(weights and target network stay on chip), host code timed
against :class:`sw.driver.stub.InstantDevice`, the bytes through the PCIe model, the step's
cycles (:func:`sw.learner.schedule.step_cycles`) plus the window shell's copies. B = 256 is
above the shipped ``max_batch`` of 64: the driver refuses it, and its row says so.

CPU baselines, float32, the same step (squared TD error on the taken action, gradient
``2/B * delta``, plain SGD):

* ``numba``: forward, backward and update as jitted loops over the batch (PERF.md);
* ``numpy``: the same with matrix products;
* ``torch``: eager ``nn.Sequential`` + ``torch.optim.SGD`` with one thread, if installed.
"""

import numpy as np

from bench.common import traffic_of

#: The shipped Alveo kernels of the rows.
MODULES = ("learner_kernel_s4", "learner_kernel_s8")
BATCHES = (32, 64, 256)
GAMMA, LR = 0.99, 1e-3


def init(sizes, rng):
    """Float32 weights ``[n_in + 1, n_out]`` per layer (bias in the last row)."""
    return [(rng.normal(size=(a + 1, b)) / np.sqrt(a)).astype(np.float32)
            for a, b in zip(sizes[:-1], sizes[1:])]


def numpy_step(W, tgt, obs, act, rew, nxt, done, gamma, lr, weights=None, td=None):
    """One DQN SGD step with numpy; updates ``W`` in place, returns the loss.

    ``weights`` (optional, float32 ``[B]``): per-sample loss weights, the loss
    ``mean_b weights_b * delta_b ** 2`` (prioritized replay's importance weights); ``td``
    (optional ``[B]``): receives the TD errors ``delta_b = Q(s_b, a_b) - y_b``.
    """
    def fwd(ws, x):
        hs = [x]
        for i, w in enumerate(ws):
            z = hs[-1] @ w[:-1] + w[-1]
            hs.append(np.maximum(z, 0) if i < len(ws) - 1 else z)
        return hs
    B = obs.shape[0]
    q_next = fwd(tgt, nxt)[-1]
    y = rew + gamma * (1 - done) * q_next.max(1)
    hs = fwd(W, obs)
    rows = np.arange(B)
    delta = np.zeros_like(hs[-1])
    d = hs[-1][rows, act] - y
    if td is not None:
        td[:] = d
    if weights is None:
        delta[rows, act] = d
        loss = float((d ** 2).mean())
        g = delta * np.float32(2.0 / B)
    else:
        delta[rows, act] = d * weights * np.float32(2.0 / B)
        loss = float((weights * d ** 2).mean())
        g = delta
    for i in range(len(W) - 1, -1, -1):
        gw = hs[i].T @ g
        gb = g.sum(0)
        if i:
            g = (g @ W[i][:-1].T) * (hs[i] > 0)
        W[i][:-1] -= lr * gw
        W[i][-1] -= lr * gb
    return loss


def make_numba_layers(numba):
    """``(dense, back)`` jitted, the layers of :func:`make_numba_step` (other jitted steps call
    them too), or None without numba.

    ``dense(x, w, relu, out)``: ``out = x @ w[:-1] + w[-1]``, ReLU'd if ``relu``.
    ``back(h, g, w, lr, g_prev, relu_of_h)``: ``g_prev = (g @ w[:-1].T) * (h > 0)`` if
    ``relu_of_h``, then ``w -= lr * [h, 1].T @ g``.
    """
    if numba is None:
        return None
    njit = numba.njit(cache=False, fastmath=True)

    @njit
    def dense(x, w, relu, out):
        B, n_in = x.shape
        n_out = w.shape[1]
        for b in range(B):
            for o in range(n_out):
                out[b, o] = w[n_in, o]
            for i in range(n_in):
                xi = x[b, i]
                for o in range(n_out):
                    out[b, o] += xi * w[i, o]
            if relu:
                for o in range(n_out):
                    out[b, o] = max(out[b, o], np.float32(0.0))

    @njit
    def back(h, g, w, lr, g_prev, relu_of_h):
        # g_prev = (g @ w[:-1].T) * (h > 0), then w -= lr * [h, 1].T @ g
        B, n_in = h.shape
        n_out = g.shape[1]
        if relu_of_h:
            for b in range(B):
                for i in range(n_in):
                    s = np.float32(0.0)
                    if h[b, i] > 0:
                        for o in range(n_out):
                            s += g[b, o] * w[i, o]
                    g_prev[b, i] = s
        for b in range(B):
            for i in range(n_in):
                a = lr * h[b, i]
                for o in range(n_out):
                    w[i, o] -= a * g[b, o]
            for o in range(n_out):
                w[n_in, o] -= lr * g[b, o]

    return dense, back


def make_numba_step(numba):
    """The jitted step for three layers, or None without numba."""
    if numba is None:
        return None
    dense, back = make_numba_layers(numba)

    @numba.njit(cache=False, fastmath=True)
    def step(w1, w2, w3, t1, t2, t3, obs, act, rew, nxt, done, gamma, lr, h1, h2, q, g2, g1):
        B = obs.shape[0]
        dense(nxt, t1, True, h1)
        dense(h1, t2, True, h2)
        dense(h2, t3, False, q)
        y = np.empty(B, np.float32)
        for b in range(B):
            y[b] = rew[b] + gamma * (1 - done[b]) * q[b].max()
        dense(obs, w1, True, h1)
        dense(h1, w2, True, h2)
        dense(h2, w3, False, q)
        loss = 0.0
        for b in range(B):
            d = q[b, act[b]] - y[b]
            loss += d * d
            q[b, :] = 0
            q[b, act[b]] = d * np.float32(2.0 / B)
        back(h2, q, w3, lr, g2, True)
        back(h1, g2, w2, lr, g1, True)
        back(obs, g1, w1, lr, g1[:, :0], False)
        return loss / B

    return step


def torch_net(torch, ws):
    """A float32 ``torch.nn.Sequential`` (Linear, ReLU, ..., Linear) holding the weights ``ws``
    (:func:`init`'s layout: ``[n_in + 1, n_out]``, bias in the last row)."""
    layers = []
    for i, w in enumerate(ws):
        lin = torch.nn.Linear(w.shape[0] - 1, w.shape[1])
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(w[:-1].T.copy()))
            lin.bias.copy_(torch.from_numpy(w[-1].copy()))
        layers += [lin, torch.nn.ReLU()] if i < len(ws) - 1 else [lin]
    return torch.nn.Sequential(*layers)


def _torch_step(sizes, W, tgt, batch):
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(1)
    online, target = torch_net(torch, W), torch_net(torch, tgt)
    opt = torch.optim.SGD(online.parameters(), lr=LR)
    obs, act, rew, nxt, done = (torch.from_numpy(x) for x in batch)
    act = act.long()

    def step():
        with torch.no_grad():
            y = rew + GAMMA * (1 - done) * target(nxt).max(1).values
        q = online(obs).gather(1, act[:, None])[:, 0]
        loss = ((q - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return step


def rows(quick: bool, env, batches=None) -> list:
    """One row per batch size (the module docstring)."""
    from sw.driver import InstantDevice, LearnerDriver
    from sw.learner.schedule import step_cycles
    from sw.registry import shipped_config

    kernels = {}
    for module in MODULES:
        _, kcfg = shipped_config(module)
        acfg = kcfg.accel
        dev = InstantDevice.for_kernel(module)
        drv = LearnerDriver(dev)
        drv.init_weights()                   # a network to train (timing only)
        kernels[module] = (acfg, dev, drv, (
            f"{module} ({'-'.join(map(str, acfg.sizes))}, {acfg.array}x{acfg.array} arrays, "
            f"max_batch {acfg.max_batch}), Alveo"))
    sizes = list(kernels[MODULES[0]][0].sizes)
    assert all(list(k[0].sizes) == sizes for k in kernels.values())
    rng = np.random.default_rng(0)
    nstep = make_numba_step(env.numba)
    out = []
    for B in batches or BATCHES:
        obs = rng.uniform(-1, 1, (B, sizes[0])).astype(np.float32)
        nxt = rng.uniform(-1, 1, (B, sizes[0])).astype(np.float32)
        act = rng.integers(0, sizes[-1], B)
        rew = np.ones(B, np.float32)
        done = (rng.random(B) < 0.05).astype(np.float32)
        W, tgt = init(sizes, rng), init(sizes, rng)
        fns = {}
        Wn = [w.copy() for w in W]
        fns["numpy"] = lambda: numpy_step(Wn, tgt, obs, act, rew, nxt, done, GAMMA, LR)
        if nstep is not None:
            Wb = [w.copy() for w in W]
            bufs = [np.empty((B, n), np.float32) for n in (sizes[1], sizes[2], sizes[3],
                                                           sizes[2], sizes[1])]
            fns["numba"] = lambda: nstep(*Wb, *tgt, obs, act, rew, nxt, done, GAMMA, LR, *bufs)
            Wc = [w.copy() for w in W]
            ref = numpy_step(Wc, tgt, obs, act, rew, nxt, done, GAMMA, LR)
            got = fns["numba"]()
            assert abs(got - ref) <= 1e-3 * max(1.0, abs(ref)), (got, ref)
            for a, b in zip(Wb, Wc):
                np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-5)
        th = _torch_step(sizes, W, tgt, (obs, act, rew, nxt, done))
        if th is not None:
            fns["torch"] = th
        shape = f"DQN step B={B}"

        accels, traffic, refused = {}, {}, {}
        for module, (acfg, dev, drv, _) in kernels.items():
            def accel(drv=drv):
                return drv.train_step(obs, act, rew, nxt, done.astype(bool), gamma=GAMMA,
                                      lr=LR)
            try:
                drv.prepare(obs, act, rew, nxt, done.astype(bool), gamma=GAMMA, lr=LR)
            except ValueError as e:
                refused[module] = str(e)
                continue
            accels[module] = accel
            traffic[module] = traffic_of(dev, accel)
        times = env.best_of({**fns, **accels}, desc=f"learner B={B}")
        for module, (acfg, _, _, config) in kernels.items():
            if module in refused:
                base = {k: v for k, v in times.items() if k in fns}
                name = min(base, key=base.get)
                env.note(f"learner {module} {shape}", "baselines " + ", ".join(
                    f"{k} {v:,.1f} us" for k, v in base.items())
                    + f"; accelerator refused: {refused[module]}")
                out.append(env.refused(block="learner", config=config, shape=shape,
                                       baseline=name, baseline_us=times[name],
                                       why=refused[module]))
                continue
            out.append(env.kernel_row(
                block="learner", module=module, config=config, shape=shape,
                baselines={k: v for k, v in times.items() if k in fns},
                host_us=times[module], traffic=traffic[module],
                run_cycles=step_cycles(acfg, B)))
    return out
