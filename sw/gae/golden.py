"""Golden models of Generalized Advantage Estimation.

Shapes follow the rollout buffers of CleanRL and Stable-Baselines3: ``[T, N]`` arrays indexed by
time step then trajectory (environment), a ``[N]`` vector of bootstrap values ``V(s_T)``.

Done convention: ``dones[t, j]`` is true when the episode of trajectory j *ended* at step t
(terminated), so ``V(s_{t+1})`` and ``A_{t+1}`` are not used for step t. CleanRL and SB3 store
"episode started at t" flags instead; :func:`dones_from_episode_starts` converts.

* :func:`gae_reference` -- float64, the semantics PPO users know.
* :func:`gae_fixed` -- bit-exact with :class:`~rtl_gen.gae.pe.GaeProcessingElement`, vectorised
  over trajectories.
* :class:`GaePeModel` -- bit-exact element-by-element model of the PE's stream interface, an
  independent second implementation (it keeps the PE's lane registers and histories).
"""

import math

import numpy as np

from sw.gae.spec import GaePeConfig

__all__ = [
    "gae_reference", "dones_from_episode_starts", "coef_powers", "gae_fixed",
    "GaePeModel", "make_stream", "gather_stream", "gae_error_bound", "quantize_coefs",
]


def _check_batch(rewards, values, dones, last_values):
    rewards = np.asarray(rewards)
    values = np.asarray(values)
    dones = np.asarray(dones)
    last_values = np.asarray(last_values)
    if rewards.ndim != 2:
        raise ValueError(f"rewards must be a [T, N] array, not shape {rewards.shape}")
    if values.shape != rewards.shape or dones.shape != rewards.shape:
        raise ValueError(f"rewards, values and dones must have one shape; got {rewards.shape}, "
                         f"{values.shape}, {dones.shape}")
    if last_values.shape != rewards.shape[1:]:
        raise ValueError(f"last_values must have shape ({rewards.shape[1]},), "
                         f"not {last_values.shape}")
    return rewards, values, dones.astype(bool), last_values


def gae_reference(rewards, values, dones, last_values, gamma, lam):
    """Float64 GAE. Returns ``(advantages, returns)``, both ``[T, N]``."""
    rewards, values, dones, last_values = _check_batch(rewards, values, dones, last_values)
    rewards = rewards.astype(np.float64)
    values = values.astype(np.float64)
    T, N = rewards.shape
    adv = np.zeros((T, N))
    last = np.zeros(N)
    next_values = np.asarray(last_values, dtype=np.float64)
    for t in reversed(range(T)):
        nonterminal = 1.0 - dones[t]
        delta = rewards[t] + gamma * next_values * nonterminal - values[t]
        last = delta + gamma * lam * nonterminal * last
        adv[t] = last
        next_values = values[t]
    return adv, adv + values


def dones_from_episode_starts(episode_starts, next_done):
    """Convert CleanRL/SB3 flags ("obs t starts an episode", plus ``next_done``) to ours."""
    episode_starts = np.asarray(episode_starts, dtype=bool)
    return np.concatenate([episode_starts[1:], np.asarray(next_done, bool)[None]], axis=0)


def quantize_coefs(gamma, lam, config: GaePeConfig):
    """Raw ``(gamma, gamma*lambda)`` as the host writes them: gamma*lambda rounded once."""
    for name, v in (("gamma", gamma), ("lam", lam)):
        if not 0.0 <= v <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], not {v!r}")
    cfmt = config.coef_format
    return int(cfmt.quantize(gamma)), int(cfmt.quantize(gamma * lam))


def coef_powers(gamma_lambda: int, config: GaePeConfig):
    """``[None, C, C^2, ..., C^k]`` as the PE's power chain computes them (raw integers)."""
    cfmt, cf = config.coef_format, config.coef_frac
    pows = [None, int(gamma_lambda)]
    for _ in range(2, config.lookahead_steps + 1):
        p, _ = cfmt.saturate(cfmt.rshift_round(np.int64(pows[-1]) * gamma_lambda, cf))
        pows.append(int(p))
    return pows


def _check_coefs(gamma, gamma_lambda, config):
    config.coef_format.check_raw(np.array([gamma, gamma_lambda]), "gamma and gamma_lambda")
    return int(gamma), int(gamma_lambda)


def gae_fixed(rewards, values, dones, last_values, gamma, gamma_lambda, config: GaePeConfig):
    """Bit-exact GAE of the PE on raw integers.

    ``rewards``, ``values``, ``last_values`` are raw integers of ``config.data_format``;
    ``gamma``, ``gamma_lambda`` raw integers of ``config.coef_format``.
    Returns ``(advantages, rtg, overflow)``: int64, int64, bool arrays of shape ``[T, N]``.
    """
    rewards, values, dones, last_values = _check_batch(rewards, values, dones, last_values)
    dfmt, cf = config.data_format, config.coef_frac
    for name, a in (("rewards", rewards), ("values", values), ("last_values", last_values)):
        dfmt.check_raw(a, name)
    gamma, gamma_lambda = _check_coefs(gamma, gamma_lambda, config)
    r = rewards.astype(np.int64)
    v = values.astype(np.int64)
    T, N = r.shape
    steps = config.lookahead_steps

    vnext = np.concatenate([v[1:], last_values.astype(np.int64)[None]], axis=0)
    g = np.where(dones, 0, gamma).astype(np.int64)
    delta, ovf = dfmt.saturate(r + dfmt.rshift_round(vnext * g, cf) - v)

    brk = dones.copy()
    brk[T - 1] = True                       # the recursion starts at every trajectory's end
    brk_pad = np.concatenate([brk, np.ones((steps, N), bool)], axis=0)
    delta_pad = np.concatenate([delta, np.zeros((steps, N), np.int64)], axis=0)
    pows = coef_powers(gamma_lambda, config)

    acc0 = delta << cf
    broken = np.zeros((T, N), bool)
    for i in range(1, steps):
        broken |= brk_pad[i - 1:i - 1 + T]
        acc0 = acc0 + np.where(broken, 0, pows[i] * delta_pad[i:i + T])
    broken |= brk_pad[steps - 1:steps - 1 + T]
    coef = np.where(broken, 0, pows[steps]).astype(np.int64)

    adv = np.zeros((T + steps, N), np.int64)
    for t in reversed(range(T)):
        adv[t], o = dfmt.saturate(dfmt.rshift_round(acc0[t] + coef[t] * adv[t + steps], cf))
        ovf[t] |= o
    adv = adv[:T]
    rtg, o = dfmt.saturate(adv + v)
    return adv, rtg, ovf | o


class GaePeModel:
    """Element-by-element model of the PE's stream: what goes in, what comes out.

    Keeps the state the RTL keeps (lane counter, previous values, per-lane advantages, delta
    history), starting from reset. ``run`` takes a dict of equal-length integer arrays with the
    input payload's fields and returns a dict with the output payload's fields, in order.
    """

    def __init__(self, config: GaePeConfig, gamma: int, gamma_lambda: int):
        self.config = config
        self.gamma, self.gamma_lambda = _check_coefs(gamma, gamma_lambda, config)
        self.pows = coef_powers(self.gamma_lambda, config)
        self.reset()

    def reset(self):
        k = self.config.k
        self.lane = 0
        self.vprev = [0] * (k if self.config.mode == "interleaved" else 1)
        self.lane_adv = [0] * k
        self.hist = [0] * k          # hist[i] = delta of the i-th previous element
        self.hbrk = [False] * k
        self.sticky_overflow = False

    def _sat(self, x):
        y, o = self.config.data_format.saturate(x)
        return int(y), bool(o)

    def _rnd(self, x):
        return int(self.config.data_format.rshift_round(np.int64(x), self.config.coef_frac))

    def step(self, reward, value, bootstrap, done, first):
        cfg = self.config
        cf, k, steps = cfg.coef_frac, cfg.k, cfg.lookahead_steps
        vi = self.lane if cfg.mode == "interleaved" else 0
        vnext = bootstrap if first else self.vprev[vi]
        self.vprev[vi] = value
        delta, o_d = self._sat(reward + self._rnd(vnext * (0 if done else self.gamma)) - value)
        brk = bool(done or first)
        acc = delta << cf
        if steps == 1:
            coef = 0 if brk else self.gamma_lambda
        else:
            brks = [brk] + self.hbrk[1:]
            broken = False
            for i in range(1, steps):
                broken = broken or brks[i - 1]
                if not broken:
                    acc += self.pows[i] * self.hist[i]
            broken = broken or brks[steps - 1]
            coef = 0 if broken else self.pows[steps]
            self.hist = [0, delta] + self.hist[1:-1]
            self.hbrk = [False, brk] + self.hbrk[1:-1]
        adv, o_a = self._sat(self._rnd(acc + coef * self.lane_adv[self.lane]))
        self.lane_adv[self.lane] = adv
        self.lane = (self.lane + 1) % k
        rtg, o_r = self._sat(adv + value)
        overflow = o_d or o_a or o_r
        self.sticky_overflow |= overflow
        return adv, rtg, overflow

    def run(self, stream: dict) -> dict:
        n = len(stream["reward"])
        out = {"advantage": np.zeros(n, np.int64), "rtg": np.zeros(n, np.int64),
               "overflow": np.zeros(n, np.int64)}
        cols = [np.asarray(stream[f]).tolist()
                for f in ("reward", "value", "bootstrap", "done", "first")]
        for idx, (r, v, b, d, f) in enumerate(zip(*cols)):
            out["advantage"][idx], out["rtg"][idx], out["overflow"][idx] = self.step(r, v, b, d, f)
        out["timestep"] = np.asarray(stream["timestep"], np.int64).copy()
        out["trajectory"] = np.asarray(stream["trajectory"], np.int64).copy()
        return out


def make_stream(rewards, values, dones, last_values, config: GaePeConfig):
    """Order a ``[T, N]`` batch as the PE consumes it.

    Lookahead mode: trajectory after trajectory, each in reverse time. Interleaved mode: groups of
    k trajectories, time step by time step, one element per lane; a last, incomplete group is
    padded with zero trajectories. Returns ``(stream, position)``: ``stream`` a dict of input
    payload fields, ``position`` an ``[n, 2]`` array of ``(t, j)`` per element (``j = -1`` for
    padding).
    """
    rewards, values, dones, last_values = _check_batch(rewards, values, dones, last_values)
    T, N = rewards.shape
    if T > 1 << config.timestep_bits:
        raise ValueError(f"T={T} does not fit timestep_bits={config.timestep_bits}")
    tmask = (1 << config.trajectory_bits) - 1
    ts = np.arange(T - 1, -1, -1)
    if config.mode == "lookahead":
        t_idx = np.tile(ts, N)
        j_idx = np.repeat(np.arange(N), T)
    else:
        k = config.k
        groups = -(-N // k)
        g, t, lane = np.meshgrid(np.arange(groups), ts, np.arange(k), indexing="ij")
        t_idx = t.ravel()
        j_idx = (g * k + lane).ravel()
        j_idx = np.where(j_idx < N, j_idx, -1)
    real = j_idx >= 0
    jj = np.where(real, j_idx, 0)

    def pick(a):
        return np.where(real, np.asarray(a)[t_idx, jj], 0).astype(np.int64)

    stream = {
        "reward": pick(rewards),
        "value": pick(values),
        "bootstrap": np.where(real, np.asarray(last_values)[jj], 0).astype(np.int64),
        "done": pick(dones),
        "first": (t_idx == T - 1).astype(np.int64),
        "timestep": t_idx.astype(np.int64),
        "trajectory": (np.where(real, j_idx, N) & tmask).astype(np.int64),
    }
    return stream, np.stack([t_idx, j_idx], axis=1)


def gather_stream(out: dict, position, T, N):
    """Inverse of :func:`make_stream` for the PE's outputs: ``(advantages, rtg, overflow)``."""
    position = np.asarray(position)
    real = position[:, 1] >= 0
    t, j = position[real, 0], position[real, 1]
    res = []
    for name in ("advantage", "rtg", "overflow"):
        a = np.zeros((T, N), np.int64)
        a[t, j] = np.asarray(out[name])[real]
        res.append(a)
    return res[0], res[1], res[2].astype(bool)


def gae_error_bound(rewards, values, dones, last_values, gamma, lam, config: GaePeConfig):
    """Worst-case |fixed - float| of advantages and returns, for inputs that do not saturate.

    Sources: quantising r, V, gamma and gamma*lambda (in the formats' rounding, like every
    other rounding: ``e_r`` = 1/2 ulp to nearest, 1 ulp for floor; ``e_rq`` likewise of a
    coefficient), the rounding of gamma*V, of each power of gamma*lambda and of each
    advantage. One look-ahead block of k steps adds at most::

        e_blk = sum_{i<k} C^i e_delta + sum_{0<i<k} e_pow(i) max|delta| + e_pow(k) max|A| + e_r

    with ``e_delta = e_r + e_r + (gamma + q) e_r + max|V| e_rq + e_r`` and
    ``e_pow(i) = i (e_rq + e_rq)`` (u, q: data and coefficient ulps); errors then decay by
    ``C^k`` per block, so::

        e_A <= e_blk * min(ceil(T / k), 1 / (1 - C^k))

    ``max|delta|`` and ``max|A|`` are those of the float reference on the same data (plus 1%),
    so the bound is first-order exact for the given inputs. Returns ``(bound_adv, bound_rtg)``.
    """
    rewards = np.asarray(rewards, np.float64)
    values = np.asarray(values, np.float64)
    T = rewards.shape[0]
    dfmt, cfmt = config.data_format, config.coef_format
    u, q = dfmt.ulp, cfmt.ulp
    ru = u if config.rounding == "floor" else u / 2
    rq = q if config.rounding == "floor" else q / 2
    k = config.lookahead_steps
    C = gamma * lam
    adv_ref, _ = gae_reference(rewards, values, dones, last_values, gamma, 0.0)
    delta_max = np.abs(adv_ref).max(initial=0) * 1.01 + u      # lambda = 0 gives A = delta
    adv_ref, _ = gae_reference(rewards, values, dones, last_values, gamma, lam)
    adv_max = np.abs(adv_ref).max(initial=0) * 1.01 + u
    vmax = max(np.abs(values).max(initial=0), np.abs(last_values).max(initial=0))
    e_delta = ru + ru + (gamma + q) * ru + vmax * rq + ru
    e_pow = [i * (rq + rq) for i in range(k + 1)]
    e_blk = (sum(C ** i for i in range(k)) * e_delta
             + sum(e_pow[i] * delta_max for i in range(1, k))
             + e_pow[k] * adv_max + ru)
    blocks = math.ceil(T / k)
    if C < 1:
        blocks = min(blocks, 1 / (1 - C ** k))
    bound_adv = 1.01 * e_blk * blocks
    return bound_adv, bound_adv + u / 2 + ru
