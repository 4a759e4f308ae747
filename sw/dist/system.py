"""The distributed DQN-with-PER system on Ray: PAAL's actors and learners, SPO's local SGD.

:class:`DistSystem` builds, from one :class:`~sw.dist.config.DistConfig`, the Ray actors of

* ``actors`` :class:`~sw.dist.actor.EnvActor` (gymnasium vector environments),
* ``learners`` replay banks (:class:`~sw.dist.replay.ReplayBank`, one per learner),
* ``learners`` :class:`~sw.dist.learner.LearnerWorker` (local SGD on their bank),
* one :class:`~sw.dist.weights.WeightServer`,

each placed by its role's Ray resources (:meth:`~sw.dist.config.DistConfig.placement`), and
runs them (:meth:`DistSystem.run`). A *round* is ``H`` local steps of every learner, then
their weights go to the weight server, the average comes back (:func:`sw.dist.weights.
mean_raw`: exact in the learners' fixed-point format) and, every ``target_every`` rounds,
also becomes the target network (thesis 5.2.1, Algorithm 7). The coordinator (this process)
only submits calls and passes object references: weights travel learner -> weight server ->
learner, batches actor -> bank, through Ray's object store.

Schedules (``mode``):

``lockstep``
    Each round the actors take ``steps_per_round`` vector steps, their batches enter the banks
    in actor order (bank ``(actor + round) % learners``), then the learners run the round. No
    two components race, so a run is reproducible for a seed, whatever the machine's load.
``async``
    Actors collect in chunks and push to the banks themselves while learners run rounds (PAAL:
    asynchronous insertion, sampling and updates; a CPU bank's lock-free lazy writing lets them
    overlap); ``lag`` bounds how far either side runs ahead of the ratio ``train_freq``.

Faults: actors and learners are created with ``max_restarts`` and as many task retries, so an
actor process that dies is restarted (fresh environments, weights pulled again, new
transition ids) and its call re-run; a restarted learner starts from the current averaged
weights. A component that cannot open its device spec, on the node Ray placed it on, raises
:class:`DeviceOpenError` naming the component, the spec and the node; a resource no node has
raises :class:`PlacementError` before anything is created.

Local and cluster runs are the same code: :func:`init_ray` starts a local Ray (``address``
None) or joins a cluster (``address="auto"`` or ``"ray://head:10001"``).
"""

import os
import time
from dataclasses import dataclass, field

import numpy as np

from .actor import EnvActor
from .config import DistConfig
from .learner import LearnerWorker
from .replay import ReplayBank
from .trainer import TrainerWorker
from .weights import WeightServer

__all__ = ["DistError", "DeviceOpenError", "PlacementError", "ComponentDiedError",
           "DistResult", "DistSystem", "init_ray", "train"]


class DistError(RuntimeError):
    """A distributed run failed for a reason a user can act on (the message says which)."""


class DeviceOpenError(DistError):
    """A replay bank or learner could not open its device spec on its node."""


class PlacementError(DistError):
    """A component asks for a resource the Ray cluster does not have."""


class ComponentDiedError(DistError):
    """A component died and was not (or no longer) restarted."""


def init_ray(address=None, *, num_cpus=2, resources=None, ship_code=False, quiet=True):
    """Start a local Ray (``address`` None) or join a cluster; no-op if Ray is running.

    Parameters
    ----------
    address : str or None
        None: a local instance with ``num_cpus`` CPUs and the custom ``resources`` (e.g.
        ``{"fpga": 1}`` on a machine with a card); ``"auto"`` or ``"ray://host:10001"``: an
        existing cluster, whose nodes declared their resources with ``ray start``.
    ship_code : bool
        On a cluster, upload this checkout's ``sw`` package to the workers (Ray ``py_modules``)
        instead of relying on the project being installed on every node.
    quiet : bool
        Keep workers' logs off this terminal.

    Locally the workers import the same ``sw`` as this process (its directory goes on their
    ``PYTHONPATH``).
    """
    import ray

    import sw
    if ray.is_initialized():
        return
    pkg = os.path.dirname(os.path.abspath(sw.__file__))
    kw = dict(include_dashboard=False, log_to_driver=not quiet, configure_logging=not quiet)
    if address is None:
        path = os.pathsep.join(filter(None, [os.path.dirname(pkg),
                                             os.environ.get("PYTHONPATH")]))
        ray.init(num_cpus=num_cpus, resources=resources,
                 runtime_env={"env_vars": {"PYTHONPATH": path}}, **kw)
    else:
        ray.init(address=address, runtime_env={"py_modules": [pkg]} if ship_code else None,
                 **kw)


# -- Ray actor classes: components that own a device keep their construction error ----------
class _Hosted:
    """Builds ``target(index, spec, **kwargs)``; a failure becomes :class:`DeviceOpenError`
    on every call (instead of an actor that died in its constructor)."""

    target = None
    role = ""

    def __init__(self, index, spec, kwargs):
        self._obj, self._error = None, None
        try:
            self._obj = self.target(index, spec, **kwargs)
        except Exception as e:  # noqa: BLE001 - reported to the coordinator, with the node
            import socket
            self._error = (f"{self.role} {index} could not open {spec!r} on node "
                           f"{socket.gethostname()}: {type(e).__name__}: {e}")

    def _o(self):
        if self._error:
            raise DeviceOpenError(self._error)
        return self._obj

    def ready(self) -> dict:
        return self._o().info()


class _BankHost(_Hosted):
    target, role = ReplayBank, "replay bank"

    def insert(self, batch):
        return self._o().insert(batch)

    def insert_many(self, batches):
        return self._o().insert_many(batches)

    def sample(self, n, beta=0.4):
        return self._o().sample(n, beta)

    def update(self, idx, td):
        return self._o().update(idx, td)

    def update_and_sample(self, idx, td, n, beta=0.4):
        return self._o().update_and_sample(idx, td, n, beta)

    def priorities(self, idx):
        return self._o().priorities(idx)

    def size(self):
        return self._o().size()

    def stats(self):
        return self._o().stats()

    def inserted_tids(self):
        return self._o().inserted_tids()


class _LearnerHost(_Hosted):
    target, role = LearnerWorker, "learner"

    def train(self, steps):
        return self._o().train(steps)

    def flush(self):
        return self._o().flush()

    def weights(self, target=False):
        return self._o().weights(target)

    def set_weights(self, net, sync_target=False):
        return self._o().set_weights(net, sync_target)

    def counters(self):
        return self._o().counters()


class _TrainerHost(_LearnerHost, _BankHost):
    """The fused trainer, which is the bank and the learner (:mod:`sw.dist.trainer`): the
    learner's calls and the bank's inserts, size and stats."""
    target, role = TrainerWorker, "trainer"


# -- results ---------------------------------------------------------------------------------
@dataclass
class DistResult:
    """What a run measured.

    Members
    -------
    name : str
        The configuration's label (one legend entry per name).
    episodes : list of (env step, return)
    losses : list of (policy update, mean loss of the round's local steps)
    env_steps, policy_updates, grad_steps, rounds : int
        Environment steps (all actors), local steps per learner, local steps of all
        learners, averaging rounds.
    seconds, actor_seconds, learner_seconds : float
        Wall time of the run, and of the spans in which actors and learners were busy.
    target_syncs : list of int
        Rounds after which learner 0 set its target network.
    restarts : dict
        Components that restarted, and how often.
    learner_cycles, replay_cycles : int
        Accelerator cycles (all learners, all banks; 0 on the CPU).
    """
    name: str
    config: dict
    episodes: list = field(default_factory=list)
    losses: list = field(default_factory=list)
    env_steps: int = 0
    policy_updates: int = 0
    grad_steps: int = 0
    rounds: int = 0
    seconds: float = 0.0
    actor_seconds: float = 0.0
    learner_seconds: float = 0.0
    target_syncs: list = field(default_factory=list)
    restarts: dict = field(default_factory=dict)
    learner_cycles: int = 0
    replay_cycles: int = 0
    banks: list = field(default_factory=list)
    placement: dict = field(default_factory=dict)

    def mean_return(self, last=20) -> float:
        if not self.episodes:
            return float("nan")
        return float(np.mean([r for _, r in self.episodes[-last:]]))

    @property
    def env_steps_per_s(self) -> float:
        return self.env_steps / max(self.actor_seconds, 1e-9)

    @property
    def grad_steps_per_s(self) -> float:
        return self.grad_steps / max(self.learner_seconds, 1e-9)


def _check_feasible(config: DistConfig, available: dict):
    need = {"actor": config.actors, "learner": config.learners, "replay": config.learners,
            "server": 1}
    for role, count in need.items():
        p = config.placement(role)
        for key, amount in dict(p["resources"], CPU=p["num_cpus"]).items():
            if amount <= 0:
                continue
            have = available.get(key, 0)
            if have < amount * count:
                raise PlacementError(
                    f"{role}_resources ask for {key}={amount:g} for each of {count} {role}(s) "
                    f"({amount * count:g} in all), but the Ray cluster has {key}={have:g}; "
                    f"declare it on the nodes that have it (ray start --resources="
                    f"'{{\"{key}\": 1}}'), or locally init_ray(resources={{\"{key}\": 1}})")


def _env_sizes(config: DistConfig):
    import gymnasium as gym
    env = gym.make(config.dqn.env_id)
    try:
        return env.observation_space.shape[0], int(env.action_space.n)
    finally:
        env.close()


class DistSystem:
    """The components of one configuration, as Ray actors (module docstring).

    Use as a context manager (``with DistSystem(cfg) as s: res = s.run()``): the components
    are killed on exit. Ray must be initialised (:func:`init_ray`).

    Members
    -------
    actors, banks, learners : lists of Ray actor handles
    server : Ray actor handle
    info : dict
        What each component reported at start (label, node).
    """

    def __init__(self, config: DistConfig, *, ready_timeout=300.0):
        if not isinstance(config, DistConfig):
            raise TypeError(f"config must be a DistConfig, not {config!r}")
        self.config = config
        self._timeout = ready_timeout
        self.actors, self.banks, self.learners, self.server = [], [], [], None
        self.info = {}

    def __enter__(self):
        self.build()
        return self

    def __exit__(self, *exc):
        self.close()

    def _remote(self, cls, role, *, restart=False):
        import ray
        cfg = self.config
        opts = dict(cfg.placement(role))
        if restart:
            opts.update(max_restarts=cfg.max_restarts, max_task_retries=cfg.max_restarts)
        if role == "replay" and cfg.replay_device == "cpu":
            opts["max_concurrency"] = 4         # inserts, samples, updates overlap (PAAL)
        return ray.remote(cls).options(**opts)

    def _wait_ready(self, refs, what):
        import ray
        try:
            return ray.get(refs, timeout=self._timeout)
        except ray.exceptions.GetTimeoutError:
            raise DistError(f"the {what} were not placed within {self._timeout:g} s: "
                            f"check the cluster's resources") from None
        except DeviceOpenError as e:            # Ray's wrapper: keep the component's message
            raise DeviceOpenError(str(getattr(e, "cause", e))) from None

    def build(self):
        """Create and start every component; raises :class:`PlacementError` or
        :class:`DeviceOpenError` (nothing is left running then)."""
        import ray
        if not ray.is_initialized():
            raise DistError("Ray is not initialised: call sw.dist.init_ray() first")
        cfg, d = self.config, self.config.dqn
        _check_feasible(cfg, ray.cluster_resources())
        obs_dim, n_act = _env_sizes(cfg)
        sizes = (obs_dim, d.hidden, d.hidden, n_act)
        try:
            self.server = self._remote(WeightServer, "server").remote()
            if cfg.fused:
                self._build_trainer(sizes)
            else:
                self._build_banks_and_learners(sizes)
            net = ray.get(self.learners[0].weights.remote())
            ray.get(self.server.reset.remote(net, self.info["learners"][0]["weight_format"]))
            self.actors = [self._remote(EnvActor, "actor", restart=True).remote(
                a, dqn=d, num_envs=cfg.envs_per_actor, stride=cfg.stride, banks=self.banks,
                weight_server=self.server, pull_every=cfg.pull_every,
                push_every=cfg.push_every, seed=d.seed * 1000 + 100 + a)
                for a in range(cfg.actors)]
            self.info["actors"] = self._wait_ready([a.info.remote() for a in self.actors],
                                                   "actors")
        except BaseException:
            self.close()
            raise
        return self

    def _build_trainer(self, sizes):
        """One fused trainer as the bank and the learner (:mod:`sw.dist.trainer`)."""
        cfg, d = self.config, self.config.dqn
        trainer = self._remote(_TrainerHost, "learner").remote(
            0, cfg.learner_device,
            dict(weight_server=self.server, init_seed=d.seed, sizes=sizes, batch=d.batch,
                 gamma=d.gamma, lr=d.lr, alpha=d.alpha, beta=d.beta, prio_eps=d.prio_eps,
                 target_period=d.target_period))
        info = self._wait_ready([trainer.ready.remote()], "trainer")
        self.banks, self.learners = [trainer], [trainer]
        self.info["banks"] = self.info["learners"] = info

    def _build_banks_and_learners(self, sizes):
        """One replay bank per learner, the learners on them."""
        cfg, d = self.config, self.config.dqn
        obs_dim = sizes[0]
        self.banks = [self._remote(_BankHost, "replay").remote(
            b, cfg.replay_device,
            dict(obs_dim=obs_dim, capacity=cfg.bank_capacity, alpha=d.alpha,
                 prio_eps=d.prio_eps, seed=d.seed * 1000 + b, module=cfg.replay_module,
                 trace=cfg.trace))
            for b in range(cfg.learners)]
        self.info["banks"] = self._wait_ready([b.ready.remote() for b in self.banks],
                                              "replay banks")
        self.learners = [self._remote(_LearnerHost, "learner", restart=True).remote(
            i, cfg.learner_device,
            dict(bank=self.banks[i], weight_server=self.server, init_seed=d.seed,
                 sizes=sizes, batch=d.batch, gamma=d.gamma, lr=d.lr, beta=d.beta,
                 module=cfg.learner_module, trace=cfg.trace))
            for i in range(cfg.learners)]
        self.info["learners"] = self._wait_ready([l.ready.remote() for l in self.learners],
                                                 "learners")

    def close(self):
        """Kill every component (no restarts)."""
        import ray
        for h in self.actors + self.learners + self.banks + [self.server]:
            if h is not None:
                try:
                    ray.kill(h, no_restart=True)
                except Exception:  # noqa: BLE001 - already gone
                    pass
        self.actors, self.banks, self.learners, self.server = [], [], [], None

    # -- running ---------------------------------------------------------------------------
    def _get(self, refs):
        import ray
        try:
            return ray.get(refs)
        except ray.exceptions.RayActorError as e:
            raise ComponentDiedError(f"a component died and could not be restarted: "
                                     f"{str(e).splitlines()[0]}") from e

    def run(self, *, progress=True, on_round=None, max_rounds=None) -> DistResult:
        """Train until ``total_steps`` environment steps (module docstring for the schedules).

        ``on_round(system, round)`` is called once per round while the round's calls are in
        flight (tests use it to kill an actor). ``max_rounds`` ends the run after that many
        averaging rounds instead (throughput measurements: with ``mode="async"`` and
        ``lag=None`` the actors run until the learners are done).
        """
        if max_rounds is not None and (isinstance(max_rounds, bool) or not isinstance(
                max_rounds, int) or max_rounds < 1):
            raise ValueError(f"max_rounds must be a positive integer, not {max_rounds!r}")
        self._max_rounds = max_rounds
        from sw.console import progress_bar

        cfg = self.config
        if not self.learners:
            self.build()
        self._res = DistResult(cfg.label(), cfg.to_dict())
        self._res.placement = {k: [dict(x) for x in v] for k, v in self.info.items()}
        self._bar = progress_bar(total=cfg.dqn.total_steps, desc=f"DQN on Ray [{cfg.label()}]",
                                 unit="step", disable=not progress, leave=False,
                                 mininterval=0.5)
        t0 = time.perf_counter()
        try:
            if cfg.mode == "lockstep":
                self._lockstep(on_round)
            else:
                self._async(on_round)
            self._finish()
        finally:
            self._bar.close()
        self._res.seconds = time.perf_counter() - t0
        return self._res

    def _rounds_done(self):
        return self._max_rounds is not None and self._res.rounds >= self._max_rounds

    def _episodes(self, stats, base):
        for st in stats:
            for t, ret in st["episodes"]:
                self._res.episodes.append((base + (t + 1) * self.config.stride, ret))

    def _advance(self, steps):
        self._res.env_steps += steps
        self._bar.update(steps)
        if self._res.episodes:
            self._bar.set_postfix(ret=f"{self._res.mean_return():.1f}",
                                  updates=self._res.policy_updates, refresh=False)

    def _submit_round(self):
        """One round's calls: H local steps, weights, average, set (target every F)."""
        cfg = self.config
        H = cfg.avg_every
        trains = [l.train.remote(H) for l in self.learners]
        nets = [l.weights.remote() for l in self.learners]
        avg = self.server.average.remote(*nets)
        sync = (self._res.rounds + 1) % cfg.target_rounds == 0
        sets = [l.set_weights.remote(avg, sync) for l in self.learners]
        return trains, sets, sync

    def _round_done(self, outs, sync):
        res = self._res
        res.rounds += 1
        res.policy_updates += self.config.avg_every
        res.grad_steps += self.config.avg_every * len(outs)
        res.losses.append((res.policy_updates, float(np.mean([o["losses"] for o in outs]))))
        if sync:
            res.target_syncs.append(res.rounds)
        if self.config.trace:
            self._traces.append([(o["tids"], o["idx"]) for o in outs])

    def _lockstep(self, on_round):
        import ray
        cfg, res = self.config, self._res
        k, L = cfg.steps_per_round, cfg.learners
        self._traces = []
        r, started = 0, False
        while res.env_steps < cfg.dqn.total_steps and not self._rounds_done():
            base = res.env_steps
            a0 = time.perf_counter()
            outs = [a.collect.options(num_returns=2).remote(k, base, False)
                    for a in self.actors]
            if on_round is not None:
                on_round(self, r)
            inserts = [self.banks[b].insert_many.remote(
                [o[0] for a, o in enumerate(outs) if (a + r) % L == b]) for b in range(L)]
            stats = self._get([o[1] for o in outs])
            self._get(inserts)
            res.actor_seconds += time.perf_counter() - a0
            self._episodes(stats, base)
            self._advance(sum(s["env_steps"] for s in stats))
            r += 1
            if not started and res.env_steps > cfg.dqn.learning_starts:
                started = min(ray.get([b.size.remote() for b in self.banks])) >= cfg.dqn.batch
            if not started:
                continue
            l0 = time.perf_counter()
            trains, sets, sync = self._submit_round()
            outs = self._get(trains)
            self._get(sets)
            res.learner_seconds += time.perf_counter() - l0
            self._round_done(outs, sync)

    def _async(self, on_round):
        import ray
        cfg, res, d = self.config, self._res, self.config.dqn
        H, total, lag = cfg.avg_every, d.total_steps, cfg.lag
        self._traces = []
        owed = (total - d.learning_starts) // d.train_freq // H * H    # updates (lag set)
        running = {}            # stats ref -> (actor, environment step at submission)
        idle = list(range(cfg.actors))
        rnd = None              # (trains, sets, sync) of the round in flight
        submitted, started = 0, False
        a_first = a_last = l_first = None
        while True:
            learners_done = self._rounds_done() or (
                res.policy_updates >= owed if lag is not None else
                (submitted >= total and not running))
            if self._rounds_done() and self._max_rounds is not None:
                total = submitted                   # measured: the actors stop too
            cap = total
            if lag is not None and started and not learners_done:
                cap = min(total, d.learning_starts + d.train_freq * (res.policy_updates
                                                                      + lag * H))
            while idle and submitted < cap:
                a = idle.pop(0)
                _, ref = self.actors[a].collect.options(num_returns=2).remote(
                    cfg.actor_chunk, submitted, True)
                running[ref] = (a, submitted)
                submitted += cfg.actor_chunk * cfg.envs_per_actor
                a_first = a_first or time.perf_counter()
            if not started and res.env_steps > d.learning_starts:
                started = min(ray.get([b.size.remote() for b in self.banks])) >= d.batch
            if rnd is None and started and not learners_done:
                ahead = float("inf") if lag is None else \
                    (res.env_steps - d.learning_starts) / d.train_freq + lag * H
                if res.policy_updates + H <= ahead:
                    rnd = self._submit_round()
                    l_first = l_first or time.perf_counter()
                    if on_round is not None:
                        on_round(self, res.rounds)
            wait_on = list(running) + (rnd[1] if rnd else [])
            if not wait_on:
                break
            done, _ = ray.wait(wait_on, num_returns=1)
            if done[0] in running:
                a, base = running.pop(done[0])
                st = self._get(done[0])
                self._episodes([st], base)
                self._advance(st["env_steps"])
                idle.append(a)
                a_last = time.perf_counter()
            else:
                trains, sets, sync = rnd
                outs = self._get(trains)
                self._get(sets)
                rnd = None
                self._round_done(outs, sync)
                res.learner_seconds = time.perf_counter() - l_first
        res.actor_seconds = (a_last - a_first) if a_first and a_last else 0.0

    def _finish(self):
        import ray
        res = self._res
        self._get([l.flush.remote() for l in self.learners])
        counters = self._get([l.counters.remote() for l in self.learners])
        bank_stats = self._get([b.stats.remote() for b in self.banks])
        res.learner_cycles = sum(c["cycles"] for c in counters)
        res.replay_cycles = sum(s["cycles"] for s in bank_stats)
        res.banks = bank_stats
        res.restarts = ray.get(self.server.restarts.remote())

    def traces(self):
        """With ``trace``: per round, per learner, the ``(tids, slots)`` it sampled."""
        return list(self._traces)


def train(config: DistConfig, *, progress=True, on_round=None, max_rounds=None) -> DistResult:
    """Build the system of ``config`` on the running Ray, run it (:meth:`DistSystem.run`),
    tear it down."""
    with DistSystem(config) as system:
        return system.run(progress=progress, on_round=on_round, max_rounds=max_rounds)
