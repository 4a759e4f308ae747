"""DQN with prioritized replay, both on the accelerators: the CF'22 loop on a host.

Every environment step the host inserts the transition into the **replay accelerator** (at the
maximum priority, FIFO slots; the transitions themselves stay in host memory, indexed by slot),
then every ``train_freq`` steps it samples a batch there (the on-chip PRNG, priorities^alpha
proportional), runs one SGD step on the **learner accelerator** (DQN TD target from the on-chip
target network, mean-squared TD error weighted per sample by the replay's importance-sampling
weights) and reads the TD errors back; their
``(|delta| + eps)**alpha`` become the new priorities in the same replay run that samples the
next batch (``update_and_sample``: updates first, then the sampling behind them in the tree's
pipeline). ``priority_delay`` D > 0 relaxes that order as the thesis's Data Queue does (Zhang
2022, section 4.5.2): the new priorities of gradient step g wait in a queue and are written
back in the run that samples step g + 1 + D, so D batches are sampled ahead of them. This is
the data flow of CF'22's Fig. 2 with the host as the actor. The target
network is synchronised in hardware every ``target_period`` gradient steps
(``LearnerDriver(sync_period=...)``). The actor acts epsilon-greedily on a float copy of the
weights read back every ``actor_refresh`` gradient steps.

The same loop runs on the CPU for comparison (:class:`TorchLearner`, float32 torch with the
same plain SGD and loss, and the float64 K-ary sum tree of the CPU replay buffer
:class:`sw.replay.PrioritizedReplayBuffer`), so a learning curve
shows what the accelerators' fixed-point arithmetic costs.

Optimizer: plain SGD (the default), or with ``--optimizer adam`` Adam on both sides (torch's
defaults but the learning rate): the learner accelerator built with ``optimizer="adam"``
(``golden``: the shipped learner's configuration with Adam, :mod:`sw.learner.optim`) and
``torch.optim.Adam``. The fused trainer's learner has SGD only.

Scaling: the learner's activations are 16-bit with ``act_frac`` fraction bits (Q5.10 by default,
range +-32), so Q values must stay well inside that: rewards are multiplied by
``reward_scale`` (0.1 for CartPole: Q <= 0.1 / (1 - gamma) = 10).

Importance sampling (Schaul et al. 2016): the replay returns ``w_i = (N p_i)**-beta / max_j
w_j``; both learners descend ``(1/B) sum_i w_i (Q_i - y_i)**2`` (the accelerator multiplies each
sample's error by its weight in the LOSS stage, ``LearnerDriver.train_step(loss_weights=)``;
torch weights the squared errors), so ``beta = 0`` is the plain mean squared TD error.

Run ``python -m sw.rl.dqn --backend both --plot build/dqn_cartpole.png``.
"""

import argparse
import time
from collections import deque
from dataclasses import asdict

import numpy as np

from sw.replay.spec import td_priorities
from sw.timing import clock_mhz

from .dqn_common import ADAM_LR, OPTIMIZERS, DQNConfig, DQNResult, forward, init_weights
from .dqn_trainer import open_trainer, parse_trainer_spec, train_fused

# DQNConfig and DQNResult are re-exported: scripts, sw.dist and the tests import them from here.
__all__ = ["DQNConfig", "DQNResult", "AcceleratorLearner", "TorchLearner", "AcceleratorReplay",
           "CpuReplay", "accelerators", "cpu_baseline", "train", "plot_curves", "main"]


class AcceleratorLearner:
    """The learner accelerator through :class:`sw.learner.driver.LearnerDriver`."""

    def __init__(self, driver):
        self.driver = driver
        self.name = f"learner {type(driver.device).__name__}"
        self.cycles = 0
        self._ws = self._bs = None

    def load(self, ws, bs):
        self.driver.load_weights(ws, bs, target=True)
        self.refresh()

    def refresh(self):
        self._ws, self._bs = self.driver.read_weights()

    def q(self, obs):
        return forward(self._ws, self._bs, obs)

    def step(self, obs, actions, rewards, next_obs, dones, gamma, lr, weights=None):
        """One SGD step on ``mean(weights · (Q - y)²)`` (None: all 1); returns the loss (the
        weighted one) and the unweighted TD errors ``Q - y``."""
        d = self.driver.train_step(obs, actions, rewards, next_obs, dones, gamma=gamma, lr=lr,
                                   loss_weights=weights, details=True)
        self.cycles += int(d.cycles)
        return d.weighted_loss, np.asarray(d.td_errors, np.float64)


class TorchLearner:
    """The same network, loss (mean squared TD error weighted per sample, target network) and
    plain SGD (or ``torch.optim.Adam``, ``optimizer="adam"``) in float32 torch: the CPU
    baseline."""

    def __init__(self, sizes, sync_period, optimizer="sgd"):
        import torch

        if optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, not "
                             f"{optimizer!r}")

        layers = []
        for l, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
            layers.append(torch.nn.Linear(a, b))
            if l < len(sizes) - 2:
                layers.append(torch.nn.ReLU())
        self.net = torch.nn.Sequential(*layers)
        self.target = torch.nn.Sequential(*[type(m)(m.in_features, m.out_features)
                                            if isinstance(m, torch.nn.Linear) else m
                                            for m in layers])
        self.sync_period = sync_period
        self._steps = 0
        self.optimizer = optimizer
        self._adam = None
        self.name = "torch float32 (CPU)" if optimizer == "sgd" else "torch float32 Adam (CPU)"

    def load(self, ws, bs):
        import torch

        lin = [m for m in self.net if isinstance(m, torch.nn.Linear)]
        with torch.no_grad():
            for m, w, b in zip(lin, ws, bs):
                m.weight.copy_(torch.as_tensor(w.T, dtype=torch.float32))
                m.bias.copy_(torch.as_tensor(b, dtype=torch.float32))
        self.target.load_state_dict(self.net.state_dict())
        if self.optimizer == "adam":                  # a fresh optimizer, as the driver's
            self._adam = torch.optim.Adam(self.net.parameters())

    def refresh(self):
        pass

    def q(self, obs):
        import torch

        with torch.no_grad():
            return self.net(torch.as_tensor(obs, dtype=torch.float32)).numpy()

    def step(self, obs, actions, rewards, next_obs, dones, gamma, lr, weights=None):
        """As :meth:`AcceleratorLearner.step`."""
        import torch

        o = torch.as_tensor(obs, dtype=torch.float32)
        o2 = torch.as_tensor(next_obs, dtype=torch.float32)
        a = torch.as_tensor(actions, dtype=torch.int64)
        r = torch.as_tensor(rewards, dtype=torch.float32)
        d = torch.as_tensor(dones, dtype=torch.float32)
        with torch.no_grad():
            y = r + gamma * (1 - d) * self.target(o2).max(dim=1).values
        q = self.net(o).gather(1, a[:, None]).squeeze(1)
        delta = q - y
        sq = delta ** 2
        if weights is not None:
            sq = torch.as_tensor(weights, dtype=torch.float32) * sq
        loss = sq.mean()
        self.net.zero_grad()
        loss.backward()
        if self.optimizer == "adam":
            if self._adam is None:
                self._adam = torch.optim.Adam(self.net.parameters())
            for group in self._adam.param_groups:
                group["lr"] = lr
            self._adam.step()
        else:
            with torch.no_grad():
                for p in self.net.parameters():
                    p -= lr * p.grad
        self._steps += 1
        if self._steps % self.sync_period == 0:
            self.target.load_state_dict(self.net.state_dict())
        return float(loss.detach()), delta.detach().numpy().astype(np.float64)


class AcceleratorReplay:
    """Priorities on the replay accelerator (:class:`sw.replay.driver.ReplayDriver`).

    ``update_and_sample`` is one fused accelerator run (the updates of batch b, then the
    sampling of batch b + 1 behind them in the same pipeline: CF'22's overlap, strictly
    ordered). ``cycles`` adds up the CYCLES register of every run."""

    def __init__(self, driver):
        self.driver = driver
        self.name = f"replay {type(driver.device).__name__}"
        self.capacity = driver.config.capacity
        self.cycles = 0

    def _count(self):
        self.cycles += int(self.driver.last_status["CYCLES"])

    def insert(self):
        slot = int(self.driver.insert(count=1)[0])
        self._count()
        return slot

    def sample(self, batch, beta):
        idx, w, _ = self.driver.sample(batch, beta)
        self._count()
        return idx, w

    def update(self, idx, prio):
        self.driver.update(idx, priorities=prio)    # saturates at the format's maximum
        self._count()

    def update_and_sample(self, idx, prio, batch, beta):
        new, w, _ = self.driver.update_and_sample(idx, None, batch, beta, priorities=prio)
        self._count()
        return new, w


class CpuReplay:
    """Priorities in the float64 K-ary sum tree of the CPU replay buffer
    (:class:`sw.replay.sumtree.SumTree`, what :class:`sw.replay.PrioritizedReplayBuffer` uses)."""

    def __init__(self, capacity, seed):
        from sw.replay.sumtree import SumTree

        self.tree = SumTree(fanout=16, capacity=capacity, seed=seed)
        self.capacity = capacity
        self.name = "CPU sum tree"

    def insert(self):
        return int(self.tree.insert(1)[0])

    def sample(self, batch, beta):
        idx, p = self.tree.sample(batch)
        w = (self.tree.size * p / self.tree.total) ** (-beta)
        return idx, w / w.max()

    def update(self, idx, prio):
        self.tree.update(idx, prio)

    def update_and_sample(self, idx, prio, batch, beta):
        self.update(idx, prio)
        return self.sample(batch, beta)


def accelerators(learner_module="learner_cartpole_s4", replay_module="replay_accel_k16", *,
                 target_period=250, learner_device="golden", replay_device="golden",
                 optimizer="sgd"):
    """The learner and replay accelerators behind their drivers, each on a device spec
    (:mod:`sw.rl.devices`): ``golden`` (default) is the golden model of the shipped module,
    ``pynq:BITFILE`` a ZCU106 overlay, ``xrt:XCLBIN`` an Alveo kernel. ``optimizer="adam"``:
    on ``golden`` the shipped module's configuration with Adam; on hardware the bitstream's
    learner must have been built with it (``ValueError`` otherwise)."""
    from dataclasses import replace

    from sw.learner.device import LearnerGoldenDevice
    from sw.learner.driver import LearnerDriver
    from sw.replay.driver import ReplayDriver

    from .devices import open_device, parse_spec

    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, not {optimizer!r}")
    if optimizer != "sgd" and parse_spec(learner_device)[0] == "sim":
        raise ValueError(f"optimizer {optimizer!r}: the shipped learners' RTL has SGD only "
                         f"(learner device 'golden' models it with {optimizer}, or a board "
                         f"built with optimizer={optimizer!r})")
    ldev, lcfg, llabel = open_device(learner_device, "learner", learner_module)
    rdev, rcfg, rlabel = open_device(replay_device, "replay", replay_module)
    if lcfg is not None and lcfg.optimizer != optimizer:
        lcfg = replace(lcfg, optimizer=optimizer)
        ldev = LearnerGoldenDevice(lcfg)
        llabel = f"{learner_module} with {optimizer} (golden model)"
    driver = LearnerDriver(ldev, lcfg, sync_period=target_period, on_range="clip")
    if driver.config.optimizer != optimizer:
        raise ValueError(f"optimizer {optimizer!r}: the learner on {learner_device!r} was "
                         f"built with optimizer={driver.config.optimizer!r}")
    learner = AcceleratorLearner(driver)
    learner.name = llabel
    replay = AcceleratorReplay(ReplayDriver(rdev, rcfg))
    replay.name = rlabel
    return learner, replay


def cpu_baseline(sizes=(4, 64, 64, 2), capacity=1 << 16, *, target_period=250, seed=0,
                 optimizer="sgd"):
    return TorchLearner(list(sizes), target_period, optimizer), CpuReplay(capacity, seed)


def train(config: DQNConfig, learner, replay, *, progress=True) -> DQNResult:
    """Train DQN (module docstring); deterministic for a seed on one machine."""
    import gymnasium as gym
    import torch

    from sw.console import progress_bar

    if not isinstance(config, DQNConfig):
        raise TypeError(f"config must be a DQNConfig, not {config!r}")
    cfg = config
    if cfg.total_steps > replay.capacity:
        raise ValueError(f"total_steps ({cfg.total_steps}) must not exceed the replay capacity "
                         f"({replay.capacity}): transitions are kept in host memory by slot")
    torch.set_num_threads(1)
    torch.manual_seed(cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    env = gym.make(cfg.env_id)
    obs_dim = env.observation_space.shape[0]
    n_act = env.action_space.n
    sizes = [obs_dim, cfg.hidden, cfg.hidden, n_act]
    learner.load(*init_weights(sizes, rng))
    res = DQNResult(f"{learner.name} + {replay.name}", asdict(cfg))
    S = np.zeros((replay.capacity, obs_dim), np.float32)
    S2 = np.zeros_like(S)
    A = np.zeros(replay.capacity, np.int64)
    R = np.zeros(replay.capacity)
    D = np.zeros(replay.capacity, bool)
    o, _ = env.reset(seed=cfg.seed)
    ret = 0.0
    # (indices, priorities) of the last gradient steps, oldest first: written back once more
    # than priority_delay wait (the delay's queue; D = 0: the last step's, before the sample).
    pending = deque()
    t0 = time.perf_counter()
    bar = progress_bar(range(cfg.total_steps), desc=f"DQN {cfg.env_id} [{learner.name}]",
                       unit="step", disable=not progress, leave=False, mininterval=0.5)
    for step in bar:
        if rng.random() < cfg.epsilon(step):
            a = int(rng.integers(n_act))
        else:
            a = int(np.argmax(learner.q(o[None].astype(np.float64))[0]))
        o2, r, term, trunc, _ = env.step(a)
        ret += r
        g0 = time.perf_counter()
        slot = replay.insert()
        res.replay_seconds += time.perf_counter() - g0
        S[slot], A[slot], R[slot], S2[slot], D[slot] = o, a, r * cfg.reward_scale, o2, term
        o = o2
        if term or trunc:
            res.episodes.append((step + 1, ret))
            ret = 0.0
            o, _ = env.reset(seed=int(rng.integers(1 << 31)))
        if step >= cfg.learning_starts and step % cfg.train_freq == 0:
            g0 = time.perf_counter()
            if len(pending) <= cfg.priority_delay:
                idx, w = replay.sample(cfg.batch, cfg.beta)
            else:                   # the oldest new priorities, then this step's batch
                idx, w = replay.update_and_sample(*pending.popleft(), cfg.batch, cfg.beta)
            res.replay_seconds += time.perf_counter() - g0
            g0 = time.perf_counter()
            loss, delta = learner.step(S[idx], A[idx], R[idx], S2[idx], D[idx], cfg.gamma,
                                       cfg.lr, w)
            res.learner_seconds += time.perf_counter() - g0
            res.grad_steps += 1
            res.losses.append((res.grad_steps, float(loss)))
            pending.append((idx, td_priorities(delta, cfg.alpha, cfg.prio_eps)))
            if res.grad_steps % cfg.actor_refresh == 0:
                learner.refresh()
            if step % 500 == 0:
                bar.set_postfix(ret=f"{res.mean_return():.1f}", loss=f"{loss:.4f}")
    g0 = time.perf_counter()
    while pending:
        replay.update(*pending.popleft())
    res.replay_seconds += time.perf_counter() - g0
    env.close()
    res.total_seconds = time.perf_counter() - t0
    res.learner_cycles = int(getattr(learner, "cycles", 0))
    res.replay_cycles = int(getattr(replay, "cycles", 0))
    return res


def plot_curves(results, path, *, window=20):
    """Episode return against environment steps (:func:`sw.rl.plot.plot_returns`), one
    colour per backend."""
    from .plot import plot_returns

    env = results[0].config["env_id"]
    plot_returns(results, path, title=f"DQN + prioritized replay on {env}", window=window,
                 legend="upper left")


def main(argv=None):
    """The command line (``--help``); every argument is checked before anything trains."""
    ap = argparse.ArgumentParser(prog="python -m sw.rl.dqn", description=__doc__.split("\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--backend", choices=("accel", "cpu", "both"), default="both",
                    help="the accelerators (on --learner-device, --replay-device), the CPU "
                         "baseline, or both")
    ap.add_argument("--learner-device", default="golden",
                    help="golden (model of learner_cartpole_s4), sim[:MODULE] (its Verilated "
                         "RTL; short runs), pynq:BITFILE[:NAME] or xrt:XCLBIN[:KERNEL]")
    ap.add_argument("--replay-device", default="golden",
                    help="golden (model of replay_accel_k16), sim[:MODULE] (its Verilated "
                         "RTL; short runs), pynq:BITFILE[:NAME] or xrt:XCLBIN[:KERNEL]")
    ap.add_argument("--device", default=None, metavar="trainer:KIND",
                    help="run the accelerator backend as the fused trainer instead: "
                         "trainer:golden (its golden model, configuration trainer_zcu106), "
                         "trainer:sim[:MODULE] (its Verilated RTL; slow), "
                         "trainer:pynq:BITFILE[:NAME] or trainer:xrt:XCLBIN[:KERNEL]")
    ap.add_argument("--total-steps", type=int, default=30_000, metavar="N",
                    help="environment steps: at least learning_starts + 1 "
                         f"({DQNConfig.learning_starts + 1}) and at most the replay capacity")
    ap.add_argument("--seeds", type=int, default=1, metavar="N",
                    help="train with seeds 0..N-1 per backend (N at least 1)")
    ap.add_argument("--optimizer", choices=OPTIMIZERS, default="sgd",
                    help="both learners' optimizer: plain SGD or Adam (torch's betas and eps)")
    ap.add_argument("--lr", type=float, default=argparse.SUPPRESS,
                    help=f"learning rate, a finite positive number: SGD's (default: "
                         f"{DQNConfig.lr}), Adam's with --optimizer adam (default: {ADAM_LR})")
    ap.add_argument("--priority-delay", type=int, default=0, metavar="D",
                    help="gradient steps the new priorities wait before they are written back "
                         "(0: before the next sample)")
    ap.add_argument("--plot", default=None, metavar="PATH",
                    help="write the learning curves to this image (.png appended unless it "
                         "ends in an image format such as .png, .pdf or .svg; a directory: "
                         "dqn.png in it)")
    args = ap.parse_args(argv)
    from .devices import DeviceSpecError, check_files, parse_spec
    specs = {"--learner-device": (args.learner_device, parse_spec),
             "--replay-device": (args.replay_device, parse_spec)}
    if args.device is not None:
        specs["--device"] = (args.device, parse_trainer_spec)
    for opt, (spec, parse) in specs.items():
        try:
            parse(spec)
        except ValueError as e:
            ap.error(f"{opt}: {e}")
    opened = {}                     # the specs the run opens: their files are checked first
    if args.backend != "cpu":
        opened = ({"--device": args.device} if args.device is not None else
                  {o: s for o, (s, _) in specs.items()})
    for opt, spec in opened.items():
        try:
            check_files(spec)
        except ValueError as e:
            ap.error(f"{opt}: {e}")
    if args.plot is not None:
        from .plot import plot_path
        try:
            args.plot = plot_path(args.plot, "dqn.png")
        except ValueError as e:
            ap.error(str(e))
    if args.seeds < 1:
        ap.error(f"--seeds must be a positive integer, not {args.seeds}")
    if args.optimizer != "sgd" and args.device is not None and args.backend != "cpu":
        ap.error(f"--optimizer {args.optimizer}: the fused trainer (--device) has SGD only")
    lr = getattr(args, "lr", DQNConfig.lr if args.optimizer == "sgd" else ADAM_LR)
    try:
        configs = [DQNConfig(total_steps=args.total_steps, seed=s, lr=lr,
                             priority_delay=args.priority_delay, optimizer=args.optimizer)
                   for s in range(args.seeds)]
    except ValueError as e:
        ap.error(str(e))

    def make(backend, cfg):
        if backend == "accel" and args.device is not None:
            return open_trainer(args.device, seed=cfg.seed), None
        if backend == "accel":
            return accelerators(target_period=cfg.target_period,
                                learner_device=args.learner_device,
                                replay_device=args.replay_device, optimizer=cfg.optimizer)
        return cpu_baseline(target_period=cfg.target_period, seed=cfg.seed,
                            optimizer=cfg.optimizer)

    backends = ("accel", "cpu") if args.backend == "both" else (args.backend,)
    first = {}                      # seed 0 of every backend, opened before anything trains
    for backend in backends:
        try:
            first[backend] = make(backend, configs[0])
        except DeviceSpecError as e:
            names = ", ".join(o for o, s in opened.items() if s == e.spec)
            ap.error(f"{names}: {e}" if names else str(e))
        except ValueError as e:
            ap.error(str(e))
        if first[backend][1] is None:            # the fused trainer keeps a ring on the card
            continue
        capacity = first[backend][1].capacity
        if args.total_steps > capacity:
            ap.error(f"total_steps ({args.total_steps}) must not exceed the replay capacity "
                     f"({capacity}) of {first[backend][1].name}")
    from sw.console import warnings_summarized
    results, finals = [], {}
    for backend in backends:
        for cfg in configs:
            seed = cfg.seed
            learner, replay = first.pop(backend, None) or make(backend, cfg)
            with warnings_summarized(f"{learner.name} seed {seed}"):
                if replay is None:
                    res = train_fused(cfg, learner)
                else:
                    res = train(cfg, learner, replay)
            results.append(res)
            finals.setdefault(res.name, []).append(res.mean_return())
            print(f"{res.name} seed {seed}: mean return of the last 20 episodes "
                  f"{res.mean_return():.1f}, {len(res.episodes)} episodes, {res.grad_steps} "
                  f"gradient steps, {res.total_seconds:.1f} s (learner {res.learner_seconds:.1f}"
                  f" s, replay {res.replay_seconds:.1f} s)")
            if res.learner_cycles:
                c = res.cycles_per_grad_step()
                mhz, label = clock_mhz("learner_kernel_s8" if replay is None
                                       else "learner_cartpole_s4")
                print(f"  accelerator cycles per gradient step: {c:,.0f} (learner "
                      f"{res.learner_cycles / res.grad_steps:,.0f}), i.e. "
                      f"{mhz * 1e6 / c:,.0f} gradient steps/s at {mhz:.0f} MHz ({label}) "
                      f"without host time")
    from .plot import report

    report(finals, results, args.plot, plot_curves)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
