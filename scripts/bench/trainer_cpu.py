"""Fused DQN trainer step on the CPU: the contenders a trainer accelerator is compared with.

A trainer step (``/work/shared/PERF.md``, "Training systems"): sample B indices from a
prioritized replay with importance-sampling (IS) weights, gather the B transitions (obs,
action, reward, next obs, done) from ring-buffer storage, one DQN learner step of an MLP
(ReLU hidden layers, linear output; TD target ``y = r + gamma (1 - done) max_a Q_tgt(s', a)``
from a target network; loss ``mean_b w_b (Q(s_b, a_b) - y_b) ** 2``; plain SGD), write the
new priorities ``(|delta| + eps) ** alpha`` back into the tree, insert ``inserts`` new
transitions into the ring (FIFO, over the oldest) at the running maximum priority, and copy
the online network to the target every ``target_every`` steps. IS weights are normalized by
the batch maximum as :func:`sw.replay.buffer.importance_weights` does:
``w_b = (min_j p_j / p_b) ** beta``.

Contenders (each fills its ring to ``capacity`` with the same random transitions first):

* :func:`make_numba_trainer`: the whole step in one jitted call: a level-synchronous batched
  descent of a float64 K-ary sum tree, the gather, :func:`bench.learner.make_numba_layers`'
  MLP with per-sample loss weights, :func:`bench.cpu_sumtree.make_numba_tree`'s update for the
  priorities and the inserts. ``mlp="numpy"``: the same, with the MLP step in numpy
  (:func:`bench.learner.numpy_step`) between two jitted calls (BLAS wins at large B);
* :func:`make_numpy_trainer`: numpy only (:func:`bench.cpu_sumtree.make_numpy_tree`,
  :func:`bench.learner.numpy_step`);
* :func:`make_torch_cpprb_trainer`: what users write: an eager float32 ``nn.Sequential`` with
  ``torch.optim.SGD`` and cpprb's ``PrioritizedReplayBuffer`` (its own sampling, IS weights,
  normalized by the minimum priority of the whole buffer, and priority updates).

:func:`time_trainers` times them interleaved in one process (:meth:`bench.common.Env.best_of`).
Run as a script it prints microseconds per step and gradient steps per second (GPS)::

    .venv/bin/python scripts/bench/trainer_cpu.py
"""

import os
import sys
from functools import lru_cache
from pathlib import Path
from types import SimpleNamespace

if __name__ == "__main__":
    # One BLAS/OpenMP thread, as scripts/bench_e2e.py: set before numpy is imported.
    for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))      # scripts/: bench.*

import numpy as np  # noqa: E402

from bench import cpu_sumtree, learner  # noqa: E402
from bench.common import Env, load_average  # noqa: E402

__all__ = ["SIZES", "make_numba_trainer", "make_numpy_trainer", "make_torch_cpprb_trainer",
           "time_trainers", "numba_kernels", "CpuTrainer"]

#: CartPole's Q network, the batch sizes and inserts per step of the table.
SIZES = (4, 64, 64, 2)
BATCHES = (64, 256)
INSERTS = (1, 4)
CAPACITY = 1 << 16
FANOUT = 16
GAMMA, LR, ALPHA, BETA, EPS, TARGET_EVERY = 0.99, 0.02, 0.6, 0.4, 1e-3, 250


def _initial(sizes, capacity, inserts, seed, eps, alpha):
    """The state every contender starts from (the same for the same ``seed``): a full ring of
    random CartPole-like transitions (reward 1, done 5 %), their raw priorities (``|delta|``
    in 0..1) and stored ones ``(raw + eps) ** alpha``, the online weights
    (:func:`bench.learner.init`), the target network equal to them, and ``inserts`` incoming
    transitions (what the actors deliver each step)."""
    rng = np.random.default_rng(seed)
    n_in, n_out = sizes[0], sizes[-1]

    def transitions(n):
        return {"obs": rng.uniform(-1, 1, (n, n_in)).astype(np.float32),
                "act": rng.integers(0, n_out, n).astype(np.int64),
                "rew": np.ones(n, np.float32),
                "next_obs": rng.uniform(-1, 1, (n, n_in)).astype(np.float32),
                "done": (rng.random(n) < 0.05).astype(np.float32)}
    ring = transitions(capacity)
    raw = rng.random(capacity)
    W = learner.init(list(sizes), rng)
    return {"ring": ring, "raw": raw, "prio": (raw + eps) ** alpha, "W": W,
            "new": transitions(inserts), "rng": rng}


class _Uniforms:
    """A stand-in for a numpy ``Generator`` whose ``random(n)`` returns given uniforms."""

    def __init__(self, u):
        self.u = np.asarray(u, np.float64)

    def random(self, n):
        assert self.u.shape == (n,)
        return self.u


class CpuTrainer:
    """A trainer's state (ring, sum tree, networks) and its step; subclasses implement
    :meth:`step`. Calling the object runs one step with its own random draws.

    Members
    -------
    obs, act, rew, next_obs, done : ndarray
        The ring's storage, ``capacity`` rows each.
    tree : ndarray
        The float64 K-ary sum tree, levels root first (:func:`bench.cpu_sumtree.tree_layout`).
    offs, depth : ndarray, int
        Its level offsets and number of levels below the root.
    W, T : list of ndarray
        Online and target weights, ``[n_in + 1, n_out]`` per layer (bias in the last row).
    idx, isw, td : ndarray
        The last step's sampled indices, IS weights (float32) and TD errors.
    new : dict
        The ``inserts`` transitions each step inserts (keys as :attr:`FIELDS`).
    state, maxp : ndarray
        ``[cursor, steps]`` (int64; :attr:`cursor`, :attr:`steps`) and ``[max_priority]``,
        arrays the jitted step updates in place.
    """

    FIELDS = ("obs", "act", "rew", "next_obs", "done")

    def __init__(self, sizes, capacity, batch, *, inserts=1, fanout=FANOUT, seed=0,
                 gamma=GAMMA, lr=LR, alpha=ALPHA, beta=BETA, eps=EPS,
                 target_every=TARGET_EVERY):
        if not 1 <= batch <= capacity or not 0 <= inserts <= capacity:
            raise ValueError(f"need 1 <= batch, inserts <= capacity, not {batch}, {inserts}")
        self.sizes, self.capacity = tuple(sizes), capacity
        self.batch, self.inserts = batch, inserts
        self.fanout, self.gamma, self.lr, self.alpha, self.beta, self.eps = \
            fanout, gamma, lr, alpha, beta, eps
        self.target_every = target_every
        init = _initial(sizes, capacity, inserts, seed, eps, alpha)
        for k in self.FIELDS:
            setattr(self, k, init["ring"][k])
        self.new = init["new"]
        self.W = init["W"]
        self.T = [w.copy() for w in self.W]
        self.offs, self.depth = cpu_sumtree.tree_layout(capacity, fanout)
        self.tree = np.zeros(self.offs[-1])
        self._prio = init["prio"]
        self.rng = init["rng"]
        self.idx = np.zeros(batch, np.int64)
        self.isw = np.zeros(batch, np.float32)
        self.td = np.zeros(batch, np.float64)
        self.state = np.zeros(2, np.int64)      # the ring is full: slot 0 is the oldest
        self.maxp = np.array([self._prio.max()])

    @property
    def leaves(self):
        """The stored priorities ``(|delta| + eps) ** alpha`` (a view of the tree)."""
        return self.tree[self.offs[self.depth]:self.offs[self.depth] + self.capacity]

    @property
    def cursor(self):
        """The ring's oldest slot, the next an insert overwrites."""
        return int(self.state[0])

    @property
    def steps(self):
        """Steps taken."""
        return int(self.state[1])

    @property
    def max_priority(self):
        """The running maximum of the stored priorities, the inserts' priority."""
        return float(self.maxp[0])

    def _set_new(self, new):
        for k in self.FIELDS:
            self.new[k][...] = new[k]

    def step(self, u=None, new=None):
        """One trainer step; returns the (weighted) loss.

        Parameters
        ----------
        u : array of float, optional
            ``batch`` uniforms in [0, 1) to sample with (sample ``b`` descends to
            ``u[b] * total``); default: the trainer's own random draws.
        new : dict, optional
            The transitions to insert (``inserts`` rows per field; they replace :attr:`new`).
        """
        raise NotImplementedError

    def __call__(self):
        return self.step()


@lru_cache(maxsize=None)
def numba_kernels(numba):
    """The trainer's jitted functions, compiled once per process, as attributes: ``build``
    and ``update`` (:func:`bench.cpu_sumtree.make_numba_tree`'s), ``seed`` (numba's generator),
    ``sample_gather``, ``learn``, ``write_back`` and ``step``.

    ``sample_gather``: a level-synchronous descent of B targets ``u_b * total`` (drawn with
    numba's ``np.random`` if ``draw``), the IS weights and the gather into the batch arrays.
    ``learn``: the DQN step of three layers with per-sample loss weights; TD errors into
    ``td``. ``write_back``: the new priorities, the running maximum, the inserts at it, and
    the target copy. ``step``: the three in one call.
    """
    build, _, update = cpu_sumtree.make_numba_tree(numba)
    dense, back = learner.make_numba_layers(numba)
    njit = numba.njit(cache=False)

    @njit
    def seed(s):
        np.random.seed(s)

    @njit
    def sample_gather(tree, offs, K, depth, u, draw, beta, x, idx, isw,
                      s_obs, s_act, s_rew, s_nxt, s_done, obs, act, rew, nxt, done):
        B = idx.size
        total = tree[0]
        for b in range(B):
            if draw:
                u[b] = np.random.random()
            x[b] = u[b] * total
            idx[b] = 0
        for lvl in range(1, depth + 1):          # every sample one level down at a time
            end = offs[lvl + 1]
            for b in range(B):
                base = offs[lvl] + idx[b] * K
                last = min(K - 1, end - 1 - base)
                xb = x[b]
                j = 0
                while j < last and xb >= tree[base + j]:
                    xb -= tree[base + j]
                    j += 1
                x[b] = xb
                idx[b] = idx[b] * K + j
        leaf = offs[depth]
        pmin = np.inf
        for b in range(B):
            pmin = min(pmin, tree[leaf + idx[b]])
        for b in range(B):
            i = idx[b]
            isw[b] = (pmin / tree[leaf + i]) ** beta
            obs[b, :] = s_obs[i]
            nxt[b, :] = s_nxt[i]
            act[b] = s_act[i]
            rew[b] = s_rew[i]
            done[b] = s_done[i]

    @numba.njit(cache=False, fastmath=True)
    def learn(w1, w2, w3, t1, t2, t3, obs, act, rew, nxt, done, isw, gamma, lr,
              h1, h2, q, g2, g1, td):
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
            td[b] = d
            loss += isw[b] * d * d
            q[b, :] = 0
            q[b, act[b]] = d * isw[b] * np.float32(2.0 / B)
        back(h2, q, w3, lr, g2, True)
        back(h1, g2, w2, lr, g1, True)
        back(obs, g1, w1, lr, g1[:, :0], False)
        return loss / B

    @njit
    def write_back(tree, offs, K, depth, idx, td, alpha, eps, prio, maxp, state,
                   s_obs, s_act, s_rew, s_nxt, s_done,
                   n_obs, n_act, n_rew, n_nxt, n_done, ins_idx, ins_p,
                   w1, w2, w3, t1, t2, t3, every):
        m = maxp[0]
        for b in range(idx.size):
            prio[b] = (abs(td[b]) + eps) ** alpha
            m = max(m, prio[b])
        maxp[0] = m
        update(tree, offs, K, depth, idx, prio)
        cap = s_act.size
        cur = state[0]
        for k in range(n_act.size):               # FIFO: over the oldest, at the maximum
            s_obs[cur, :] = n_obs[k]
            s_nxt[cur, :] = n_nxt[k]
            s_act[cur] = n_act[k]
            s_rew[cur] = n_rew[k]
            s_done[cur] = n_done[k]
            ins_idx[k] = cur
            ins_p[k] = m
            cur = cur + 1 if cur + 1 < cap else 0
        state[0] = cur
        update(tree, offs, K, depth, ins_idx, ins_p)
        state[1] += 1
        if state[1] % every == 0:
            t1[:] = w1
            t2[:] = w2
            t3[:] = w3

    @njit
    def step(tree, offs, K, depth, u, draw, beta, x, idx, isw,
             s_obs, s_act, s_rew, s_nxt, s_done, obs, act, rew, nxt, done,
             w1, w2, w3, t1, t2, t3, gamma, lr, h1, h2, q, g2, g1, td,
             alpha, eps, prio, maxp, state, n_obs, n_act, n_rew, n_nxt, n_done,
             ins_idx, ins_p, every):
        sample_gather(tree, offs, K, depth, u, draw, beta, x, idx, isw,
                      s_obs, s_act, s_rew, s_nxt, s_done, obs, act, rew, nxt, done)
        loss = learn(w1, w2, w3, t1, t2, t3, obs, act, rew, nxt, done, isw, gamma, lr,
                     h1, h2, q, g2, g1, td)
        write_back(tree, offs, K, depth, idx, td, alpha, eps, prio, maxp, state,
                   s_obs, s_act, s_rew, s_nxt, s_done, n_obs, n_act, n_rew, n_nxt, n_done,
                   ins_idx, ins_p, w1, w2, w3, t1, t2, t3, every)
        return loss

    return SimpleNamespace(build=build, update=update, seed=seed, sample_gather=sample_gather,
                           learn=learn, write_back=write_back, step=step)


class NumbaTrainer(CpuTrainer):
    """:class:`CpuTrainer` with the step jitted (:func:`numba_kernels`); ``mlp="numpy"`` runs
    the MLP step with :func:`bench.learner.numpy_step` between the jitted sample-and-gather and
    write-back instead."""

    def __init__(self, numba, sizes, capacity, batch, *, mlp="numba", **kw):
        super().__init__(sizes, capacity, batch, **kw)
        if len(self.sizes) != 4:
            raise ValueError(f"the numba MLP has three layers, not {len(self.sizes) - 1}")
        if mlp not in ("numba", "numpy"):
            raise ValueError(f"mlp must be 'numba' or 'numpy', not {mlp!r}")
        self.mlp = mlp
        nk = numba_kernels(numba)
        self._sg, self._wb, self._step = nk.sample_gather, nk.write_back, nk.step
        nk.seed(kw.get("seed", 0))
        self.leaves[:] = self._prio
        nk.build(self.tree, self.offs, self.fanout, self.depth)
        B, n = batch, self.sizes
        self.u, self.x = np.zeros(B), np.zeros(B)
        self.b = {"obs": np.zeros((B, n[0]), np.float32), "act": np.zeros(B, np.int64),
                  "rew": np.zeros(B, np.float32), "next_obs": np.zeros((B, n[0]), np.float32),
                  "done": np.zeros(B, np.float32)}
        bufs = [np.zeros((B, k), np.float32) for k in (n[1], n[2], n[3], n[2], n[1])]
        self.prio = np.zeros(B)
        ins = (np.zeros(self.inserts, np.int64), np.zeros(self.inserts))
        tree = (self.tree, self.offs, self.fanout, self.depth)
        ring = tuple(getattr(self, k) for k in self.FIELDS)
        bat = tuple(self.b[k] for k in self.FIELDS)
        new = tuple(self.new[k] for k in self.FIELDS)
        self._sg_args = (*tree, self.u, True, self.beta, self.x, self.idx, self.isw, *ring, *bat)
        self._wb_args = (*tree, self.idx, self.td, self.alpha, self.eps, self.prio, self.maxp,
                         self.state, *ring, *new, *ins, *self.W, *self.T, self.target_every)
        # gamma and lr as float32: the MLP's loops stay in float32 (a float64 lr makes the
        # weight update float64, about 20 % slower per step)
        self._args = (*tree, self.u, True, self.beta, self.x, self.idx, self.isw, *ring, *bat,
                      *self.W, *self.T, np.float32(self.gamma), np.float32(self.lr), *bufs,
                      self.td, self.alpha, self.eps, self.prio, self.maxp, self.state, *new,
                      *ins, self.target_every)
        self._draw_at = 5                       # where ``draw`` is in both argument tuples

    def _sample_args(self, args, u):
        if u is None:
            return args
        self.u[:] = u
        return args[:self._draw_at] + (False,) + args[self._draw_at + 1:]

    def step(self, u=None, new=None):
        if new is not None:
            self._set_new(new)
        if self.mlp == "numba":
            return self._step(*self._sample_args(self._args, u))
        self._sg(*self._sample_args(self._sg_args, u))
        b = self.b
        loss = learner.numpy_step(self.W, self.T, b["obs"], b["act"], b["rew"], b["next_obs"],
                                  b["done"], self.gamma, self.lr, weights=self.isw, td=self.td)
        self._wb(*self._wb_args)
        return loss

    def __call__(self):
        if self.mlp == "numba":
            return self._step(*self._args)
        return self.step()


class NumpyTrainer(CpuTrainer):
    """:class:`CpuTrainer` with numpy only: :func:`bench.cpu_sumtree.make_numpy_tree` (sampling
    and one update per step: the batch's priorities, then the inserts'), the gather with
    ``np.take``, :func:`bench.learner.numpy_step`."""

    def __init__(self, sizes, capacity, batch, **kw):
        super().__init__(sizes, capacity, batch, **kw)
        self._sample, self._update = cpu_sumtree.make_numpy_tree(capacity, self.fanout, self._prio,
                                                            tree=self.tree)
        B, n_in = batch, self.sizes[0]
        self.b = {"obs": np.zeros((B, n_in), np.float32), "act": np.zeros(B, np.int64),
                  "rew": np.zeros(B, np.float32), "next_obs": np.zeros((B, n_in), np.float32),
                  "done": np.zeros(B, np.float32)}
        self._upd_idx = np.zeros(B + self.inserts, np.int64)
        self._upd_p = np.zeros(B + self.inserts)
        self._ring_step = np.arange(self.inserts)

    def step(self, u=None, new=None):
        if new is not None:
            self._set_new(new)
        B, b = self.batch, self.b
        idx, w = self._sample(self.rng if u is None else _Uniforms(u), B, self.beta)
        self.idx[:] = idx
        self.isw[:] = w
        for k in self.FIELDS:
            np.take(getattr(self, k), idx, axis=0, out=b[k])
        loss = learner.numpy_step(self.W, self.T, b["obs"], b["act"], b["rew"], b["next_obs"],
                                  b["done"], self.gamma, self.lr, weights=self.isw, td=self.td)
        p = self._upd_p
        np.power(np.abs(self.td) + self.eps, self.alpha, out=p[:B])
        m = self.maxp[0] = max(self.maxp[0], p[:B].max())
        slots = (self.state[0] + self._ring_step) % self.capacity
        for k in self.FIELDS:
            getattr(self, k)[slots] = self.new[k]
        self._upd_idx[:B] = idx
        self._upd_idx[B:] = slots
        p[B:] = m
        self._update(self._upd_idx, p)          # the last value wins: inserts over the batch
        self.state[0] = (self.state[0] + self.inserts) % self.capacity
        self.state[1] += 1
        if self.state[1] % self.target_every == 0:
            for t, w in zip(self.T, self.W):
                t[...] = w
        return loss


def make_numba_trainer(numba, sizes, capacity, batch, *, inserts=1, fanout=FANOUT, seed=0,
                       gamma=GAMMA, lr=LR, alpha=ALPHA, beta=BETA, eps=EPS,
                       target_every=TARGET_EVERY, mlp="numba"):
    """The numba trainer: one call runs one whole step (module docstring).

    Parameters
    ----------
    numba : module or None
        :func:`bench.common.numba_or_none`'s answer.
    sizes : sequence of int
        Layer widths, input to output (three layers: four widths).
    capacity, batch, inserts : int
        Ring size (filled at construction), batch size, transitions inserted per step.
    fanout : int
        Children per node of the sum tree.
    seed : int
        Seeds the initial state (the same as the other contenders') and numba's generator.
    gamma, lr, alpha, beta, eps : float
        Discount, SGD learning rate, priority exponent, IS exponent, priority offset.
    target_every : int
        Steps between copies of the online network to the target network.
    mlp : {"numba", "numpy"}
        Where the MLP step runs (``"numpy"``: BLAS, between two jitted calls).

    Returns
    -------
    NumbaTrainer or None
        None without numba.
    """
    if numba is None:
        return None
    return NumbaTrainer(numba, sizes, capacity, batch, inserts=inserts, fanout=fanout,
                        seed=seed, gamma=gamma, lr=lr, alpha=alpha, beta=beta, eps=eps,
                        target_every=target_every, mlp=mlp)


def make_numpy_trainer(sizes, capacity, batch, *, inserts=1, fanout=FANOUT, seed=0,
                       gamma=GAMMA, lr=LR, alpha=ALPHA, beta=BETA, eps=EPS,
                       target_every=TARGET_EVERY):
    """The numpy trainer (:class:`NumpyTrainer`); parameters as :func:`make_numba_trainer`.
    From the same ``seed`` it starts from the same state as the numba trainer; given the same
    uniforms (``step(u)``) both sample the same indices."""
    return NumpyTrainer(sizes, capacity, batch, inserts=inserts, fanout=fanout, seed=seed,
                        gamma=gamma, lr=lr, alpha=alpha, beta=beta, eps=eps,
                        target_every=target_every)


class TorchCpprbTrainer:
    """What users write: an eager float32 ``torch.nn.Sequential`` trained with
    ``torch.optim.SGD`` on batches of a cpprb ``PrioritizedReplayBuffer``. Calling it runs one
    step; ``online``, ``target``, ``rb`` (the buffer) and ``steps`` are its state."""

    def __init__(self, torch, cpprb, sizes, capacity, batch, *, inserts=1, seed=0,
                 gamma=GAMMA, lr=LR, alpha=ALPHA, beta=BETA, eps=EPS,
                 target_every=TARGET_EVERY):
        init = _initial(sizes, capacity, inserts, seed, eps, alpha)
        np.random.seed(seed)                          # cpprb samples with numpy's global RNG
        torch.manual_seed(seed)
        torch.set_num_threads(1)                      # one host core, as every contender
        self.torch, self.batch, self.gamma, self.beta = torch, batch, gamma, beta
        self.target_every, self.steps = target_every, 0
        n_in = sizes[0]
        self.rb = cpprb.PrioritizedReplayBuffer(
            capacity, {"obs": {"shape": n_in}, "act": {"dtype": np.int64}, "rew": {},
                       "next_obs": {"shape": n_in}, "done": {}}, alpha=alpha, eps=eps)
        self.rb.add(**init["ring"], priorities=init["raw"])
        self.new = init["new"]
        self.online = learner.torch_net(torch, init["W"])
        self.target = learner.torch_net(torch, init["W"])
        self.opt = torch.optim.SGD(self.online.parameters(), lr=lr)

    def __call__(self):
        torch = self.torch
        s = self.rb.sample(self.batch, beta=self.beta)
        obs = torch.from_numpy(s["obs"])
        act = torch.from_numpy(s["act"])
        rew = torch.from_numpy(s["rew"][:, 0])
        nxt = torch.from_numpy(s["next_obs"])
        done = torch.from_numpy(s["done"][:, 0])
        w = torch.from_numpy(s["weights"])
        with torch.no_grad():
            y = rew + self.gamma * (1 - done) * self.target(nxt).max(1).values
        q = self.online(obs).gather(1, act)[:, 0]
        td = q - y
        loss = (w * td ** 2).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        self.rb.update_priorities(s["indexes"], td.detach().abs().numpy())
        self.rb.add(**self.new)                       # at the maximum priority
        self.steps += 1
        if self.steps % self.target_every == 0:
            self.target.load_state_dict(self.online.state_dict())
        return loss.item()


def make_torch_cpprb_trainer(sizes, capacity, batch, *, inserts=1, seed=0, gamma=GAMMA, lr=LR,
                             alpha=ALPHA, beta=BETA, eps=EPS, target_every=TARGET_EVERY):
    """The torch + cpprb trainer (:class:`TorchCpprbTrainer`; parameters as
    :func:`make_numba_trainer`, cpprb's tree is binary), or None if torch or cpprb is
    missing."""
    try:
        import cpprb
        import torch
    except ImportError:
        return None
    return TorchCpprbTrainer(torch, cpprb, sizes, capacity, batch, inserts=inserts, seed=seed,
                             gamma=gamma, lr=lr, alpha=alpha, beta=beta, eps=eps,
                             target_every=target_every)


def trainers(numba, sizes, capacity, batch, inserts, **kw) -> dict:
    """Name -> trainer of every contender available: ``numba``, ``numba+numpy`` (numba with
    the MLP in numpy), ``numpy``, ``torch+cpprb``."""
    out = {}
    if numba is not None:
        out["numba"] = make_numba_trainer(numba, sizes, capacity, batch, inserts=inserts, **kw)
        out["numba+numpy"] = make_numba_trainer(numba, sizes, capacity, batch, inserts=inserts,
                                                mlp="numpy", **kw)
    out["numpy"] = make_numpy_trainer(sizes, capacity, batch, inserts=inserts, **kw)
    kw.pop("fanout", None)
    tc = make_torch_cpprb_trainer(sizes, capacity, batch, inserts=inserts, **kw)
    if tc is not None:
        out["torch+cpprb"] = tc
    return out


def time_trainers(env, sizes=SIZES, capacity=CAPACITY, batch=64, inserts=1, **kw) -> dict:
    """Microseconds per trainer step of each contender (:func:`trainers`, with ``env.numba``),
    timed interleaved in this process (:meth:`bench.common.Env.best_of`), after a warm-up step
    each (the JIT compile). Every contender's loss must still be finite afterwards (weights
    gone to NaN would time another computation)."""
    fns = trainers(env.numba, sizes, capacity, batch, inserts, **kw)
    for fn in fns.values():
        fn()
    times = env.best_of(fns, desc=f"trainer B={batch} inserts={inserts}")
    for name, fn in fns.items():
        loss = fn()
        if not np.isfinite(loss):
            raise FloatingPointError(f"{name}: the loss is {loss} after timing")
    return times


def main():
    """Print the table (module docstring)."""
    env = Env(rounds=15)
    print(f"CPU trainer step, {'-'.join(map(str, SIZES))} MLP, capacity 2^"
          f"{CAPACITY.bit_length() - 1}, K={FANOUT}, gamma {GAMMA}, lr {LR}, alpha {ALPHA}, "
          f"beta {BETA}, eps {EPS}, target copy every {TARGET_EVERY}; best of {env.rounds} "
          f"interleaved rounds")
    print(f"load average before: {load_average()}")
    print("| B | inserts | contender | us/step | GPS |")
    print("|---|---|---|---|---|")
    for B in BATCHES:
        for n in INSERTS:
            times = time_trainers(env, SIZES, CAPACITY, B, n)
            for name, us in sorted(times.items(), key=lambda kv: kv[1]):
                print(f"| {B} | {n} | {name} | {us:,.1f} | {1e6 / us:,.0f} |")
    print(f"load average after: {load_average()}")


if __name__ == "__main__":
    main()
