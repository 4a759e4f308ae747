"""scripts/bench/trainer_cpu.py: the CPU trainer contenders compute what a DQN trainer step with
prioritized replay must (tiny shapes). Correctness only, no wall-clock assertion.

The numba kernels compile once per process (``trainer_cpu.numba_kernels`` is cached; every
shape here has the same argument types), a few seconds; without numba those cases skip.
"""

import sys
from pathlib import Path

import numpy as np
import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
sys.path.insert(0, str(SCRIPTS))

from bench import common, trainer_cpu  # noqa: E402

from sw.replay.buffer import importance_weights  # noqa: E402

SIZES = (4, 8, 8, 2)
CAP, B, INSERTS = 256, 8, 2
KINDS = ("numpy", "numba", "numba+numpy")


def make(kind, capacity=CAP, fanout=4, inserts=INSERTS, **kw):
    """A trainer of ``kind`` on the tiny shapes (numba cases skip without numba)."""
    if kind == "numpy":
        return trainer_cpu.make_numpy_trainer(SIZES, capacity, B, inserts=inserts,
                                              fanout=fanout, **kw)
    numba = common.numba_or_none()
    if numba is None:
        pytest.skip("numba is not installed")
    return trainer_cpu.make_numba_trainer(numba, SIZES, capacity, B, inserts=inserts,
                                          fanout=fanout, mlp=kind.split("+")[-1], **kw)


def incoming(rng, n=INSERTS):
    """``n`` random transitions to insert."""
    return {"obs": rng.uniform(-1, 1, (n, SIZES[0])).astype(np.float32),
            "act": rng.integers(0, SIZES[-1], n), "rew": rng.random(n).astype(np.float32),
            "next_obs": rng.uniform(-1, 1, (n, SIZES[0])).astype(np.float32),
            "done": (rng.random(n) < 0.3).astype(np.float32)}


def ring(t):
    return {k: getattr(t, k).copy() for k in t.FIELDS}


def check_sums(t):
    """Every internal node of ``t``'s tree is the sum of its children."""
    offs, K = t.offs, t.fanout
    for lvl in range(t.depth):
        below = t.tree[offs[lvl + 1]:offs[lvl + 2]]
        pad = np.zeros(-(-below.size // K) * K)
        pad[:below.size] = below
        np.testing.assert_allclose(t.tree[offs[lvl]:offs[lvl + 1]], pad.reshape(-1, K).sum(1),
                                   rtol=1e-12, atol=1e-12)
    assert t.tree[0] == pytest.approx(t.leaves.sum(), rel=1e-12)


@pytest.mark.parametrize("capacity,fanout", [(256, 4), (200, 16)])
def test_numba_and_numpy_trainers_agree(capacity, fanout):
    """Same seed, same uniforms, same inserts: the same indices each step, then the same
    weights, target network, tree and ring."""
    ts = [make(k, capacity, fanout, target_every=3) for k in KINDS]
    rng = np.random.default_rng(1)
    for _ in range(7):
        u, new = rng.random(B), incoming(rng)
        losses = [t.step(u, new) for t in ts]
        for t in ts[1:]:
            np.testing.assert_array_equal(t.idx, ts[0].idx)
            np.testing.assert_allclose(t.isw, ts[0].isw, rtol=1e-5)
        np.testing.assert_allclose(losses, losses[0], rtol=1e-4)
    for t in ts[1:]:
        for a, b in zip(t.W + t.T, ts[0].W + ts[0].T):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(t.tree, ts[0].tree, rtol=1e-5)
        for k, v in ring(t).items():
            np.testing.assert_array_equal(v, getattr(ts[0], k))
        assert (t.cursor, t.steps) == (ts[0].cursor, ts[0].steps) == (14 % capacity, 7)
        assert t.max_priority == pytest.approx(ts[0].max_priority, rel=1e-5)
    for t in ts:
        check_sums(t)


@pytest.mark.parametrize("kind", KINDS)
def test_one_step_is_sgd_on_the_weighted_td_loss(kind):
    """The update equals a float64 autograd gradient of ``mean_b w_b (Q(s_b, a_b) - y_b)^2``
    on the batch the step sampled, with the target network's ``y``; the TD errors too."""
    torch = pytest.importorskip("torch")
    t = make(kind, lr=0.05)
    rng = np.random.default_rng(2)
    for _ in range(2):                          # online and target differ from here on
        t.step(rng.random(B))
    W0 = [w.astype(np.float64) for w in t.W]
    T0 = [w.astype(np.float64) for w in t.T]
    before = ring(t)
    t.step(rng.random(B))
    i = t.idx
    x = {k: torch.from_numpy(np.asarray(v[i], np.float64)) for k, v in before.items()}
    Wt = [torch.tensor(w, requires_grad=True) for w in W0]

    def forward(ws, h):
        for n, w in enumerate(ws):
            h = h @ w[:-1] + w[-1]
            h = torch.relu(h) if n < len(ws) - 1 else h
        return h
    with torch.no_grad():
        y = x["rew"] + t.gamma * (1 - x["done"]) * forward(
            [torch.from_numpy(w) for w in T0], x["next_obs"]).max(1).values
    q = forward(Wt, x["obs"]).gather(1, x["act"].long()[:, None])[:, 0]
    delta = q - y
    w = torch.from_numpy(t.isw.astype(np.float64))
    (w * delta ** 2).mean().backward()
    np.testing.assert_allclose(t.td, delta.detach().numpy(), rtol=1e-4, atol=1e-5)
    for got, w0, wt in zip(t.W, W0, Wt):
        want = w0 - t.lr * wt.grad.numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        assert not np.allclose(got, w0, rtol=0, atol=1e-7)     # the step did move them


@pytest.mark.parametrize("kind", KINDS)
def test_sampling_and_importance_weights(kind):
    """Sample ``b`` is the leaf whose prefix sums bracket ``u_b * total`` (before the step's
    updates), and its IS weight ``(min_j p_j / p_b) ** beta`` over the batch, as
    sw.replay.buffer.importance_weights."""
    t = make(kind, capacity=200, fanout=16)
    rng = np.random.default_rng(3)
    for _ in range(3):
        leaves = t.leaves.copy()
        u = rng.random(B)
        t.step(u)
        want = np.searchsorted(np.cumsum(leaves), u * leaves.sum(), side="right")
        np.testing.assert_array_equal(t.idx, want)
        p = leaves[t.idx]
        np.testing.assert_allclose(t.isw, (p.min() / p) ** t.beta, rtol=1e-6)
        np.testing.assert_allclose(t.isw, importance_weights(p, beta=t.beta), rtol=1e-6)
        assert t.isw.max() == 1.0


@pytest.mark.parametrize("kind", KINDS)
def test_priorities_inserts_and_tree_sums(kind):
    """The batch's leaves get ``(|delta| + eps) ** alpha``; the inserts overwrite the oldest
    slots (wrapping around the ring) with the new transitions at the running maximum
    priority; every other slot is untouched; the tree's sums stay those of its leaves."""
    t = make(kind, inserts=3)
    rng = np.random.default_rng(4)
    t.step(rng.random(B))
    t.state[0] = CAP - 2                        # the next inserts wrap around
    for step in range(4):
        leaves, before, m = t.leaves.copy(), ring(t), t.max_priority
        cur = t.cursor
        new = incoming(rng, 3)
        t.step(rng.random(B), new)
        slots = (cur + np.arange(3)) % CAP
        p = (np.abs(t.td) + t.eps) ** t.alpha
        assert t.max_priority == pytest.approx(max(m, p.max()), rel=1e-12)
        np.testing.assert_allclose(t.leaves[slots], t.max_priority, rtol=1e-12)
        rest = np.setdiff1d(t.idx, slots)
        last = {i: pi for i, pi in zip(t.idx, p)}          # a repeated index: the last wins
        np.testing.assert_allclose(t.leaves[rest], [last[i] for i in rest], rtol=1e-5)
        keep = np.setdiff1d(np.arange(CAP), np.concatenate([slots, t.idx]))
        np.testing.assert_array_equal(t.leaves[keep], leaves[keep])
        for k, v in ring(t).items():
            np.testing.assert_array_equal(v[slots], np.asarray(new[k], v.dtype))
            others = np.setdiff1d(np.arange(CAP), slots)
            np.testing.assert_array_equal(v[others], before[k][others])
        assert t.cursor == (cur + 3) % CAP
        if step == 0:
            assert list(slots) == [CAP - 2, CAP - 1, 0]
        check_sums(t)


@pytest.mark.parametrize("kind", KINDS)
def test_target_copy_every_c_steps(kind):
    t = make(kind, target_every=3)
    assert all(np.array_equal(a, b) for a, b in zip(t.T, t.W))       # DQN starts so
    rng = np.random.default_rng(5)
    for k in range(1, 8):
        T = [w.copy() for w in t.T]
        t.step(rng.random(B))
        assert t.steps == k
        same = [np.array_equal(a, b) for a, b in zip(t.T, t.W)]
        if k % 3 == 0:
            assert all(same)
        else:
            assert not any(same)
            assert all(np.array_equal(a, b) for a, b in zip(t.T, T))


def test_torch_cpprb_trainer_steps():
    t = trainer_cpu.make_torch_cpprb_trainer(SIZES, CAP, B, inserts=INSERTS, target_every=2)
    if t is None:
        pytest.skip("torch or cpprb is not installed")
    for k in range(1, 5):
        assert np.isfinite(t())
        same = all(np.array_equal(a.detach(), b.detach())
                   for a, b in zip(t.online.parameters(), t.target.parameters()))
        assert same == (k % 2 == 0)
    assert t.rb.get_stored_size() == CAP


def test_time_trainers_without_numba(monkeypatch):
    """No numba: no numba contenders; the others are timed (no assertion on the times)."""
    monkeypatch.setattr(common, "numba_or_none", lambda: None)
    env = common.Env(rounds=5, progress=lambda it, **kw: it)
    assert env.numba is None
    assert trainer_cpu.make_numba_trainer(None, SIZES, CAP, B) is None
    times = trainer_cpu.time_trainers(env, SIZES, CAP, B, INSERTS)
    assert "numpy" in times and not any(k.startswith("numba") for k in times)
    assert all(v > 0 for v in times.values())


def test_bad_arguments():
    with pytest.raises(ValueError):
        trainer_cpu.make_numpy_trainer(SIZES, 4, 8)
    assert not callable(getattr(trainer_cpu, "rows", None))     # bench_e2e would run it
