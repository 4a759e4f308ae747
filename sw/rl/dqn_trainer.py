"""DQN with the fused trainer (:mod:`sw.trainer`): the host only acts and appends.

The host runs the environment and acts epsilon-greedily on a float copy of the trainer's newest
weight snapshot; every ``chunk`` environment steps it appends the new transitions to the ring
in device memory (:meth:`~sw.trainer.driver.TrainerDriver.insert`) and runs one launch of
``chunk / train_freq`` gradient steps, which samples, gathers, weights, steps, writes back the
priorities and syncs the target network on the card, then reads the snapshot the launch ends
with. With ``chunk = actor_refresh`` (the default) the actor sees weights as old as in
:func:`sw.rl.dqn.train`, which reads them back every ``actor_refresh`` gradient steps; the
priority write-back waits the trainer's ``delay`` steps (1 on the shipped configurations,
which the thesis's and :mod:`scripts.repro` delay study found costs nothing measurable).

``python -m sw.rl.dqn --device trainer:golden`` runs it (:func:`sw.rl.dqn.main`), and
``trainer:sim``, ``trainer:pynq:BITFILE`` or ``trainer:xrt:XCLBIN`` on the RTL or a board.
"""

import time
from dataclasses import asdict

import numpy as np

from .dqn_common import DQNConfig, DQNResult, forward, init_weights

__all__ = ["open_trainer", "parse_trainer_spec", "train_fused"]

#: Device kinds of ``--device trainer:KIND``.
TRAINER_DEVICES = ("golden", "sim", "pynq", "xrt")


def parse_trainer_spec(spec: str):
    """``(kind, path, name)`` of a ``trainer:...`` device spec (``trainer:golden``,
    ``trainer:sim[:MODULE]``, ``trainer:pynq:BITFILE[:NAME]``, ``trainer:xrt:XCLBIN[:KERNEL]``);
    ValueError naming the forms otherwise. Opens nothing."""
    from .devices import parse_spec

    forms = ("'trainer:golden', 'trainer:sim[:MODULE]', 'trainer:pynq:BITFILE[:NAME]' or "
             "'trainer:xrt:XCLBIN[:KERNEL]'")
    kind, _, rest = str(spec).partition(":")
    if kind != "trainer" or not rest:
        raise ValueError(f"device must be {forms}, not {spec!r}")
    try:
        kind, path, name = parse_spec(rest)
    except ValueError:
        raise ValueError(f"device must be {forms}, not {spec!r}") from None
    if kind == "sim" and name is not None:
        from sw.registry import shipped_modules
        modules = shipped_modules(family="trainer")
        if name not in modules:
            raise ValueError(f"module must be a shipped trainer ({', '.join(modules)}), "
                             f"not {name!r}")
    return kind, path, name


def open_trainer(spec: str, name: str = "trainer_zcu106", *, seed: int = 0):
    """A :class:`~sw.trainer.driver.TrainerDriver` on a ``trainer:...`` spec
    (:func:`parse_trainer_spec`): ``golden``, the golden device of configuration ``name``
    (:data:`sw.trainer.configs.TRAINERS`); ``sim[:MODULE]``, the Verilated RTL of a shipped
    trainer (default ``name``'s module; the first call builds it, minutes, and it runs slowly:
    short runs); ``pynq``, :class:`~sw.trainer.boards.PynqTrainerDevice` with ``name``'s
    configuration; ``xrt``, :class:`~sw.trainer.boards.XrtTrainerDevice` (the kernel's
    shipped configuration, default ``dqn_trainer_u250``). A spec that cannot be opened here
    raises :class:`~sw.rl.devices.DeviceSpecError` naming it and what is missing (the file,
    checked first, the package, the board)."""
    from sw.trainer.configs import TRAINERS, trainer_config
    from sw.trainer.driver import TrainerDriver

    from .devices import check_files, opening

    kind, path, module = parse_trainer_spec(spec)
    check_files(spec)
    config = trainer_config(name)
    if kind == "golden":
        from sw.trainer.device import TrainerGoldenDevice
        dev, label = TrainerGoldenDevice(config), f"{name} (golden)"
    elif kind == "sim":
        from sw.driver.sim_process import open_sim
        from sw.registry import shipped_config
        module = module or TRAINERS[name][3]
        if module is None:
            raise ValueError(f"trainer {name!r} is not a shipped module: no RTL to simulate")
        config = shipped_config(module)[1]
        with opening(spec, "sim"):
            dev = open_sim(module)
        label = f"{module} (Verilated RTL)"
    elif kind == "pynq":
        from sw.trainer.boards import PynqTrainerDevice
        with opening(spec, "pynq"):
            dev = PynqTrainerDevice(path, name=module, config=config)
        label = f"{name} on PYNQ ({dev.instance})"
    else:
        from sw.trainer.boards import XrtTrainerDevice
        kernel = module or "dqn_trainer_u250"
        with opening(spec, "xrt"):
            dev = XrtTrainerDevice(path, kernel=kernel)
        config, label = dev.config, f"trainer on XRT ({kernel})"
    drv = TrainerDriver(dev, config, seed=seed)
    drv.name = label
    return drv


def train_fused(config: DQNConfig, driver, *, chunk=None, progress=True) -> DQNResult:
    """Train DQN with the fused trainer behind ``driver`` (module docstring); deterministic for
    a seed. Returns a :class:`~sw.rl.dqn_common.DQNResult` whose ``learner_cycles`` are the
    launches' cycles (CYCLES) and ``losses`` the trace's mean ``|Q - y|`` per launch."""
    import gymnasium as gym

    from sw.console import progress_bar

    if not isinstance(config, DQNConfig):
        raise TypeError(f"config must be a DQNConfig, not {config!r}")
    cfg = config
    chunk = cfg.actor_refresh * cfg.train_freq if chunk is None else int(chunk)
    if chunk < cfg.train_freq or chunk % cfg.train_freq:
        raise ValueError(f"chunk must be a positive multiple of train_freq ({cfg.train_freq}), "
                         f"not {chunk}")
    rng = np.random.default_rng(cfg.seed)
    env = gym.make(cfg.env_id)
    obs_dim, n_act = env.observation_space.shape[0], env.action_space.n
    sizes = [obs_dim, cfg.hidden, cfg.hidden, n_act]
    if list(driver.config.learner.sizes) != sizes:
        raise ValueError(f"the trainer's network is {driver.config.learner.sizes}, the "
                         f"environment needs {tuple(sizes)}")
    ws, bs = init_weights(sizes, rng)
    driver.load_weights(ws, bs)
    actor = (ws, bs)
    res = DQNResult(getattr(driver, "name", "trainer"), asdict(cfg))
    hyper = dict(batch=cfg.batch, lr=cfg.lr, gamma=cfg.gamma, alpha=cfg.alpha, beta=cfg.beta,
                 eps=cfg.prio_eps, sync_period=cfg.target_period, trace_period=0)
    buf = {k: [] for k in ("obs", "actions", "rewards", "next_obs", "dones")}
    o, _ = env.reset(seed=cfg.seed)
    ret = 0.0
    t0 = time.perf_counter()
    bar = progress_bar(range(cfg.total_steps), desc=f"DQN {cfg.env_id} [{res.name}]",
                       unit="step", disable=not progress, leave=False, mininterval=0.5)
    for step in bar:
        if rng.random() < cfg.epsilon(step):
            a = int(rng.integers(n_act))
        else:
            a = int(np.argmax(forward(*actor, o[None].astype(np.float64))[0]))
        o2, r, term, trunc, _ = env.step(a)
        ret += r
        for k, v in zip(buf, (o, a, r * cfg.reward_scale, o2, term)):
            buf[k].append(v)
        o = o2
        if term or trunc:
            res.episodes.append((step + 1, ret))
            ret = 0.0
            o, _ = env.reset(seed=int(rng.integers(1 << 31)))
        if (step + 1) % chunk:
            continue
        g0 = time.perf_counter()
        driver.insert(*(np.asarray(v) for v in buf.values()))
        for v in buf.values():
            v.clear()
        res.replay_seconds += time.perf_counter() - g0
        steps = sum(1 for s in range(step + 1 - chunk, step + 1)
                    if s >= cfg.learning_starts and s % cfg.train_freq == 0)
        if steps:
            g0 = time.perf_counter()
            status = driver.train(steps, **hyper)
            actor = driver.weights()
            res.learner_seconds += time.perf_counter() - g0
            res.grad_steps += status["STEPS_DONE"]
            res.learner_cycles += status["CYCLES"]
            if step % 500 < chunk:
                bar.set_postfix(ret=f"{res.mean_return():.1f}")
    env.close()
    res.total_seconds = time.perf_counter() - t0
    return res
