"""PPO with its advantages computed by the GAE accelerator (or by the CPU, to compare).

A CleanRL-style PPO (clipped objective, value loss, entropy bonus, minibatch epochs, annealed
learning rate, advantage normalisation per minibatch) for discrete-action gymnasium
environments, whose one difference from CleanRL is where GAE runs: ``advantages`` is any
callable with the signature of :func:`sw.gae.golden.gae_reference`, e.g.

* :class:`AcceleratorAdvantages` -- :meth:`sw.gae.driver.GaeDriver.compute` on any device: the
  golden model (:class:`~sw.gae.device.GoldenDevice`, no hardware), the Verilated RTL, a
  ZCU106 with PYNQ or an Alveo card: 8-bit codes in, 8-bit results written back in place.
  By default one call after the rollout; ``--stream-gae`` pushes each step into the
  accelerator as it is collected (:meth:`sw.gae.driver.GaeDriver.stream`, the critic evaluated
  per step), so that only the run and the read-back follow the last environment step, at the
  price of a driver call per step (docs/benchmarks.md, "The current table": a whole iteration
  then costs more than the batch call);
* :class:`CpuAdvantages` -- the float64 reference with the *same* reward normalisation, the
  baseline to compare learning curves against.

Both return advantages and returns in the same normalised-reward units (see
:mod:`sw.gae.quant`), and the critic learns those returns: the accelerator's driver runs in
HEPPO's training mode, ``GaeDriver(..., units="standardized")`` (its default, the caller's
raw-reward units, would change what the critic learns). CartPole's constant +1 reward needs
``reward_norm="scale"`` (HEPPO's centring would turn every reward into 0); it is the default.

Run ``python -m sw.rl.ppo --backend both --seeds 3 --plot build/ppo_cartpole.png`` for the
learning curves of both backends (progress bars while it runs; ~15 s per 100k-step run on one
CPU core).
"""

import argparse
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from sw.config import check_real
from sw.gae.golden import gae_reference
from sw.registry import shipped_modules

__all__ = ["PPOConfig", "TrainResult", "CpuAdvantages", "AcceleratorAdvantages",
           "accelerator", "golden_accelerator", "train", "plot_curves", "main"]


@dataclass(frozen=True)
class PPOConfig:
    """Hyper-parameters (CleanRL's ``ppo.py`` defaults for CartPole unless noted).

    ``num_envs`` environments step ``num_steps`` times per iteration: one ``[num_steps,
    num_envs]`` GAE batch per iteration (``num_envs`` trajectories on the accelerator).
    """
    env_id: str = "CartPole-v1"
    num_envs: int = 8
    num_steps: int = 128
    total_steps: int = 100_000
    gamma: float = 0.99
    lam: float = 0.95
    lr: float = 2.5e-4
    anneal_lr: bool = True
    epochs: int = 4
    minibatches: int = 4
    clip: float = 0.2
    vf_coef: float = 0.5
    ent_coef: float = 0.01
    max_grad_norm: float = 0.5
    hidden: int = 64
    seed: int = 0

    def __post_init__(self):
        for name in ("num_envs", "num_steps", "total_steps", "epochs", "minibatches", "hidden"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive integer, not {v!r}")
        for name in ("gamma", "lam"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], not {v!r}")
        if (self.num_envs * self.num_steps) % self.minibatches:
            raise ValueError(f"minibatches must divide num_envs * num_steps "
                             f"({self.num_envs * self.num_steps}), not {self.minibatches}")
        for name in ("lr", "clip", "vf_coef", "max_grad_norm"):
            check_real(name, getattr(self, name))
        check_real("ent_coef", self.ent_coef, positive=False)
        if self.total_steps < self.num_envs * self.num_steps:
            raise ValueError(f"total_steps must be at least num_envs * num_steps "
                             f"({self.num_envs * self.num_steps}), one iteration, not "
                             f"{self.total_steps}")

    @property
    def iterations(self) -> int:
        """Iterations of ``num_envs * num_steps`` steps: ``total_steps`` rounded down."""
        return self.total_steps // (self.num_envs * self.num_steps)


@dataclass
class TrainResult:
    """What :func:`train` returns.

    ``episodes``: ``(global_step, undiscounted return)`` of every finished episode;
    ``gae_seconds`` and ``total_seconds``: wall time in the advantage callable after the
    rollout (a stream's ``finish``) and overall; ``push_seconds``: wall time of a stream's
    pushes during the rollouts; ``gae_calls``: batches computed; ``name``: the advantage
    backend's name.
    """
    name: str
    config: dict
    episodes: list = field(default_factory=list)
    gae_seconds: float = 0.0
    push_seconds: float = 0.0
    total_seconds: float = 0.0
    gae_calls: int = 0

    def mean_return(self, last=20) -> float:
        """Mean return of the last ``last`` finished episodes (nan if none finished)."""
        if not self.episodes:
            return float("nan")
        return float(np.mean([r for _, r in self.episodes[-last:]]))


class CpuAdvantages:
    """Float64 GAE on the CPU after the accelerator pipeline's reward normalisation.

    Parameters
    ----------
    reward_norm : str or None
        ``"scale"`` or ``"center"`` (:data:`sw.gae.quant.REWARD_NORMS`), as the accelerator's
        dynamic standardization; None: the raw rewards (textbook PPO, HEPPO Table III's
        experiment 1).
    """

    def __init__(self, reward_norm="scale"):
        from sw.gae.quant import REWARD_NORMS, DynamicRewardStandardizer

        if reward_norm is not None and reward_norm not in REWARD_NORMS:
            raise ValueError(f"reward_norm must be one of {', '.join(REWARD_NORMS)} or None, "
                             f"not {reward_norm!r}")
        self._norm = None if reward_norm is None else DynamicRewardStandardizer(norm=reward_norm)
        self.name = "cpu-float64" if reward_norm else "cpu-float64 (raw rewards)"

    def __call__(self, rewards, values, dones, last_values, gamma, lam):
        if self._norm is not None:
            rewards, _, _ = self._norm(rewards)
        return gae_reference(rewards, values, dones, last_values, gamma, lam)


class AcceleratorAdvantages:
    """:meth:`GaeDriver.compute <sw.gae.driver.GaeDriver.compute>` as the advantage callable,
    or, with ``streaming`` (what :func:`train` then uses), :meth:`stream`: the rollout pushes
    each step into the accelerator's memory as it is collected
    (:meth:`GaeDriver.stream <sw.gae.driver.GaeDriver.stream>`) and only the run and the
    read-back follow the last environment step.

    ``runs`` counts accelerator runs (more than calls when the driver re-ran a batch whose
    in-place results saturated or refined them, :mod:`sw.gae.results`) and ``cycles`` sums the
    cycles of the (last) run of each call, start to done (the CYCLES register + 1,
    :meth:`sw.gae.spec.run_cycles`).
    """

    def __init__(self, driver, name=None, *, streaming=False):
        self.driver = driver
        self.name = name or f"accelerator ({type(driver.device).__name__})"
        self.streaming = bool(streaming)
        self.runs = 0
        self.cycles = 0

    def _count(self):
        batch = self.driver.last_batch
        self.runs += batch.total_runs
        self.cycles += int(batch.status.get("CYCLES", 0)) + 1

    def __call__(self, rewards, values, dones, last_values, gamma, lam):
        adv, ret = self.driver.compute(rewards, values, dones, last_values, gamma, lam)
        self._count()
        return adv, ret

    def stream(self, num_envs, num_steps, gamma, lam):
        """A stream of one rollout: ``push(rewards, values, dones)`` per step, then
        ``finish(last_values) -> (advantages, returns)``."""
        acc, s = self, self.driver.stream(num_envs, num_steps, gamma, lam)

        class _Stream:
            push = s.push

            @staticmethod
            def finish(last_values):
                out = s.finish(last_values)
                acc._count()
                return out
        return _Stream()


def accelerator(device="golden", module="gae_accel_n8", *, reward_norm="scale",
                units="standardized", reward_standardization="dynamic", streaming=False):
    """:class:`AcceleratorAdvantages` on a device spec (:mod:`sw.rl.devices`: ``golden``, the
    golden model of the shipped ``module``; ``sim``, its Verilated RTL; ``pynq:BITFILE``;
    ``xrt:XCLBIN``), with the quantization pipeline the configuration read from the device
    asks for.

    ``units``: the driver's (:class:`~sw.gae.driver.GaeDriver`); ``"standardized"`` (default,
    HEPPO's training mode) with rewards standardized by ``reward_norm`` and
    ``reward_standardization`` (``"dynamic"`` or ``"block"``,
    :data:`sw.gae.quant.REWARD_STANDARDIZATIONS`), or ``"caller"``: textbook GAE of the raw
    rewards, both streams quantized per batch and de-standardized (the pipeline unused).
    ``streaming``: the rollout pushes each step (default False: one batch call after the
    rollout, which costs less host time per iteration than a push per step; block-standardized
    rewards need the whole batch, so their streams only collect the steps and run the batch at
    ``finish``)."""
    from sw.driver import GaeDriver
    from sw.gae.driver import read_hw_config
    from sw.gae.pipeline import GaeQuantizationPipeline

    from .devices import open_device

    dev, cfg, label = open_device(device, "gae", module)
    cfg = cfg or read_hw_config(dev.control)
    pipe = GaeQuantizationPipeline(bits=cfg.code_bits, reg_format=cfg.reg_format,
                                   scale_format=cfg.scale_format, reward_norm=reward_norm,
                                   reward_standardization=reward_standardization)
    return AcceleratorAdvantages(GaeDriver(dev, cfg, pipeline=pipe, units=units), name=label,
                                 streaming=streaming)


def golden_accelerator(module="gae_accel_n8", *, reward_norm="scale", streaming=False):
    """:class:`AcceleratorAdvantages` on the golden model of a shipped GAE configuration."""
    return accelerator("golden", module, reward_norm=reward_norm, streaming=streaming)


def _agent(obs_dim, n_actions, hidden):
    import torch
    from torch import nn

    def layer(a, b, std=np.sqrt(2)):
        lin = nn.Linear(a, b)
        nn.init.orthogonal_(lin.weight, std)
        nn.init.constant_(lin.bias, 0.0)
        return lin

    critic = nn.Sequential(layer(obs_dim, hidden), nn.Tanh(), layer(hidden, hidden), nn.Tanh(),
                           layer(hidden, 1, 1.0))
    actor = nn.Sequential(layer(obs_dim, hidden), nn.Tanh(), layer(hidden, hidden), nn.Tanh(),
                          layer(hidden, n_actions, 0.01))
    return torch.nn.ModuleDict({"critic": critic, "actor": actor})


def train(config: PPOConfig, advantages, *, progress=True) -> TrainResult:
    """Train a PPO agent; GAE through ``advantages`` (module docstring). Deterministic for a
    given seed on a given machine (torch on one thread, seeded environments)."""
    import gymnasium as gym
    import torch

    from sw.console import progress_bar

    if not isinstance(config, PPOConfig):
        raise TypeError(f"config must be a PPOConfig, not {config!r}")
    if not callable(advantages):
        raise TypeError(f"advantages must be callable like gae_reference, not {advantages!r}")
    cfg = config
    torch.set_num_threads(1)
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    envs = [gym.make(cfg.env_id) for _ in range(cfg.num_envs)]
    if not isinstance(envs[0].action_space, gym.spaces.Discrete):
        raise ValueError(f"{cfg.env_id} must have a discrete action space")
    obs_dim = envs[0].observation_space.shape[0]
    n_act = envs[0].action_space.n
    agent = _agent(obs_dim, n_act, cfg.hidden)
    opt = torch.optim.Adam(agent.parameters(), lr=cfg.lr, eps=1e-5)
    result = TrainResult(getattr(advantages, "name", type(advantages).__name__), asdict(cfg))

    T, N = cfg.num_steps, cfg.num_envs
    streaming = bool(getattr(advantages, "streaming", False))
    obs = np.zeros((T + 1, N, obs_dim), np.float32)
    actions = np.zeros((T, N), np.int64)
    logps = np.zeros((T, N), np.float32)
    rewards = np.zeros((T, N))
    dones = np.zeros((T, N), bool)
    for j, env in enumerate(envs):
        obs[0, j], _ = env.reset(seed=cfg.seed * 1000 + j)
    running = np.zeros(N)
    step = 0
    t0 = time.perf_counter()
    bar = progress_bar(range(cfg.iterations), desc=f"PPO {cfg.env_id} [{result.name}]",
                       unit="it", disable=not progress, leave=False)
    for it in bar:
        if cfg.anneal_lr:
            opt.param_groups[0]["lr"] = cfg.lr * (1.0 - it / cfg.iterations)
        # -- rollout (a streaming accelerator takes each step as it comes) --------------------
        stream = advantages.stream(N, T, cfg.gamma, cfg.lam) if streaming else None
        with torch.no_grad():
            for t in range(T):
                if stream is not None:
                    v_t = agent["critic"](torch.from_numpy(obs[t])).numpy()[:, 0]
                logits = agent["actor"](torch.from_numpy(obs[t]))
                dist = torch.distributions.Categorical(logits=logits)
                a = dist.sample()
                actions[t] = a.numpy()
                logps[t] = dist.log_prob(a).numpy()
                for j, env in enumerate(envs):
                    o, r, term, trunc, _ = env.step(int(actions[t, j]))
                    rewards[t, j] = r
                    running[j] += r
                    dones[t, j] = term or trunc          # CleanRL: truncation ends it too
                    if dones[t, j]:
                        result.episodes.append((step + t * N + j + 1, float(running[j])))
                        running[j] = 0.0
                        o, _ = env.reset(seed=int(rng.integers(1 << 31)))
                    obs[t + 1, j] = o
                if stream is not None:
                    p0 = time.perf_counter()
                    stream.push(rewards[t], v_t.astype(np.float64), dones[t])
                    result.push_seconds += time.perf_counter() - p0
            step += T * N
            if stream is None:
                values = agent["critic"](torch.from_numpy(obs.reshape(-1, obs_dim)))
                values = values.numpy().reshape(T + 1, N).astype(np.float64)
            else:
                last = agent["critic"](torch.from_numpy(obs[T])).numpy()[:, 0]
        # -- advantages: the accelerator (or the CPU) -----------------------------------------
        g0 = time.perf_counter()
        if stream is None:
            adv, ret = advantages(rewards.copy(), values[:T], dones.copy(), values[T],
                                  cfg.gamma, cfg.lam)
        else:
            adv, ret = stream.finish(last.astype(np.float64))
        result.gae_seconds += time.perf_counter() - g0
        result.gae_calls += 1
        # -- update ---------------------------------------------------------------------------
        b_obs = torch.from_numpy(obs[:T].reshape(-1, obs_dim))
        b_act = torch.from_numpy(actions.reshape(-1))
        b_logp = torch.from_numpy(logps.reshape(-1))
        b_adv = torch.from_numpy(np.asarray(adv, np.float32).reshape(-1))
        b_ret = torch.from_numpy(np.asarray(ret, np.float32).reshape(-1))
        n = T * N
        mb = n // cfg.minibatches
        for _ in range(cfg.epochs):
            perm = torch.from_numpy(rng.permutation(n))
            for k in range(cfg.minibatches):
                idx = perm[k * mb:(k + 1) * mb]
                logits = agent["actor"](b_obs[idx])
                dist = torch.distributions.Categorical(logits=logits)
                ratio = (dist.log_prob(b_act[idx]) - b_logp[idx]).exp()
                a_mb = b_adv[idx]
                a_mb = (a_mb - a_mb.mean()) / (a_mb.std() + 1e-8)
                pg = torch.max(-a_mb * ratio,
                               -a_mb * ratio.clamp(1 - cfg.clip, 1 + cfg.clip)).mean()
                v = agent["critic"](b_obs[idx]).squeeze(-1)
                v_loss = 0.5 * ((v - b_ret[idx]) ** 2).mean()
                loss = pg + cfg.vf_coef * v_loss - cfg.ent_coef * dist.entropy().mean()
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(agent.parameters(), cfg.max_grad_norm)
                opt.step()
        bar.set_postfix(ret=f"{result.mean_return():.1f}", step=step)
    for env in envs:
        env.close()
    result.total_seconds = time.perf_counter() - t0
    return result


def plot_curves(results, path, *, window=20):
    """Episode return against environment steps (:func:`sw.rl.plot.plot_returns`), one
    colour per backend, the backends that ran in the title."""
    from .plot import plot_returns

    env = results[0].config["env_id"]
    names = " vs ".join(dict.fromkeys(r.name for r in results))
    plot_returns(results, path, title=f"PPO on {env}: GAE on {names}", window=window,
                 legend="lower right")


def _check_env(env_id):
    """``None`` if PPO here can train on ``env_id`` (discrete actions, a flat observation
    vector), else why not."""
    import gymnasium as gym

    try:
        env = gym.make(env_id)
    except gym.error.Error as e:
        return f"--env: {e}"
    try:
        obs, act = env.observation_space, env.action_space
    finally:
        env.close()
    if not isinstance(act, gym.spaces.Discrete) or not isinstance(obs, gym.spaces.Box) \
            or len(obs.shape) != 1:
        return (f"--env must be an environment with discrete actions and a flat observation "
                f"vector, not {env_id!r} (actions {act}, observations {obs})")
    return None


def main(argv=None):
    """The command line (``--help``); every argument is checked before anything trains."""
    ap = argparse.ArgumentParser(prog="python -m sw.rl.ppo", description=__doc__.split("\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--backend", choices=("golden", "accel", "cpu", "both"), default="both",
                    help="GAE on the accelerator (golden = accel: on --device), on the CPU, or "
                         "both")
    ap.add_argument("--device", default="golden",
                    help="the GAE accelerator: golden (model of --module), sim[:MODULE] (its "
                         "Verilated RTL; short runs), pynq:BITFILE[:NAME] or xrt:XCLBIN[:KERNEL]")
    ap.add_argument("--module", default="gae_accel_n8",
                    help="shipped GAE configuration of the golden model: "
                         + ", ".join(shipped_modules(family="gae", role="accelerator")))
    ap.add_argument("--env", default="CartPole-v1",
                    help="gymnasium environment with discrete actions")
    ap.add_argument("--total-steps", type=int, default=100_000, metavar="N",
                    help=f"environment steps, at least one iteration of num_envs * num_steps "
                         f"({PPOConfig.num_envs * PPOConfig.num_steps}); rounded down to "
                         f"whole iterations")
    ap.add_argument("--seeds", type=int, default=1, metavar="N",
                    help="train with seeds 0..N-1 per backend (N at least 1) and report mean "
                         "and spread")
    ap.add_argument("--stream-gae", action="store_true",
                    help="push each step into the accelerator as it is collected (GaeDriver."
                         "stream) instead of one call after the rollout's last step")
    ap.add_argument("--reward-norm", choices=("scale", "center"), default="scale",
                    help="reward normalisation before GAE (sw.gae.quant)")
    ap.add_argument("--plot", default=None, metavar="PATH",
                    help="write the learning curves to this image (.png appended unless it "
                         "ends in an image format such as .png, .pdf or .svg; a directory: "
                         "ppo.png in it)")
    args = ap.parse_args(argv)
    if args.seeds < 1:
        ap.error(f"--seeds must be a positive integer, not {args.seeds}")
    from .devices import DeviceSpecError, check_files, parse_spec
    try:
        kind, _, name = parse_spec(args.device)
        if args.backend != "cpu":
            check_files(args.device)            # before any backend is imported
    except ValueError as e:
        ap.error(f"--device: {e}")
    if args.plot is not None:
        from .plot import plot_path
        try:
            args.plot = plot_path(args.plot, "ppo.png")
        except ValueError as e:
            ap.error(str(e))
    try:
        configs = [PPOConfig(env_id=args.env, total_steps=args.total_steps, seed=s)
                   for s in range(args.seeds)]
    except ValueError as e:
        ap.error(str(e))
    modules = shipped_modules(family="gae", role="accelerator")
    if args.backend != "cpu" and kind in ("golden", "sim") and (name or args.module) \
            not in modules:
        ap.error(f"--{'device' if name else 'module'}: module must be a shipped GAE accelerator "
                 f"configuration ({', '.join(modules)}), not {name or args.module!r}")
    why = _check_env(args.env)
    if why:
        ap.error(why)
    steps = configs[0].iterations * configs[0].num_envs * configs[0].num_steps
    print(f"PPO on {args.env}: {configs[0].iterations} iterations of "
          f"{configs[0].num_envs} x {configs[0].num_steps} = {steps:,} environment steps "
          f"per run", flush=True)
    makers = []
    if args.backend in ("golden", "accel", "both"):
        makers.append(lambda: accelerator(args.device, args.module,
                                          reward_norm=args.reward_norm,
                                          streaming=args.stream_gae))
    if args.backend in ("cpu", "both"):
        makers.append(lambda: CpuAdvantages(args.reward_norm))
    from sw.console import warnings_summarized
    results, finals = [], {}
    for make in makers:
        for cfg in configs:
            seed = cfg.seed
            try:
                adv = make()                # fresh reward statistics per run
            except DeviceSpecError as e:
                ap.error(f"--device: {e}")
            with warnings_summarized(f"{adv.name} seed {seed}"):
                res = train(cfg, adv)
            results.append(res)
            finals.setdefault(res.name, []).append(res.mean_return())
            extra = ""
            if isinstance(adv, AcceleratorAdvantages):
                extra = (f", {adv.runs} accelerator runs for {res.gae_calls} batches, "
                         f"{adv.cycles / res.gae_calls:.0f} cycles per batch")
            print(f"{res.name} seed {seed}: mean return of the last 20 episodes "
                  f"{res.mean_return():.1f} after {cfg.iterations * cfg.num_envs * cfg.num_steps}"
                  f" steps, {len(res.episodes)} episodes, {res.total_seconds:.1f} s "
                  f"({res.gae_seconds:.2f} s in GAE after the rollouts, "
                  f"{res.push_seconds:.2f} s pushing during them){extra}")
    from .plot import report

    report(finals, results, args.plot, plot_curves)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
