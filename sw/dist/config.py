"""One configuration for a distributed DQN-with-PER system (:mod:`sw.dist.system`).

:class:`DistConfig` names the components, how many of each, where each runs and the DQN
hyper-parameters (a :class:`sw.rl.dqn.DQNConfig`, whose step counts are read as follows):

===================  =========================================================================
``total_steps``      environment steps of all actors together
``learning_starts``  environment steps (all actors) before the learners start
``batch``            each learner's local batch ``b``
``train_freq``       environment steps (all actors) per *policy update*, one local step of
                     every learner: a round of ``H`` updates follows ``H * train_freq`` steps
``target_period``    local steps between target-network syncs; a sync happens only after an
                     averaging, every ``ceil(target_period / H)`` rounds (``target_every``)
===================  =========================================================================

Device specs: ``"cpu"`` (the CPU replay buffer with lazy writing; the float32 torch learner),
``"golden"`` (the golden model of the shipped configuration), ``"pynq:BITFILE[:NAME]"``,
``"xrt:XCLBIN[:KERNEL]"`` (:mod:`sw.rl.devices`); for the learner also the fused trainer,
``"trainer:golden"`` etc. (:mod:`sw.dist.trainer`: actors feed one trainer). Placement is by Ray resources per role
(:meth:`DistConfig.placement`): an actor on hardware asks for ``{"fpga": 1}`` unless told
otherwise, which a cluster declares per node (``ray start --resources='{"fpga": 1}'``).
"""

import math
from dataclasses import asdict, dataclass, field

from sw.rl.dqn import DQNConfig
from sw.rl.devices import parse_spec

__all__ = ["DistConfig", "MODES", "ROLES", "check_spec", "parse_resources"]

#: Schedules of :class:`~sw.dist.system.DistSystem`: ``lockstep`` (rounds with barriers;
#: reproducible for a seed) and ``async`` (actors and learners overlap, PAAL).
MODES = ("lockstep", "async")
#: Component roles whose placement a config sets.
ROLES = ("actor", "learner", "replay", "server")
#: The custom resource an actor owning an FPGA asks for by default.
FPGA_RESOURCE = "fpga"


def _positive(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, not {value!r}")


def check_spec(name: str, spec, *, trainer=False) -> str:
    """``spec`` if it is ``"cpu"`` or a device spec (with ``trainer``, also a fused-trainer
    spec ``"trainer:..."``); ``ValueError`` naming ``name``."""
    if spec == "cpu":
        return spec
    try:
        if trainer and isinstance(spec, str) and spec.startswith("trainer:"):
            from sw.rl.dqn_trainer import parse_trainer_spec
            parse_trainer_spec(spec)
        else:
            parse_spec(spec)
    except ValueError as e:
        raise ValueError(f"{name} must be 'cpu' or a device spec: {e}") from None
    return spec


def parse_resources(name: str, value) -> dict:
    """A resource request: a dict ``{resource: amount}``, or the text ``"fpga=1,CPU=0.5"``.
    Amounts are non-negative numbers; ``ValueError`` naming ``name``."""
    if value is None:
        return None
    if isinstance(value, str):
        out = {}
        for item in filter(None, (p.strip() for p in value.split(","))):
            key, eq, amount = item.partition("=")
            try:
                out[key.strip()] = float(amount)
            except ValueError:
                eq = ""
            if not eq or not key.strip():
                raise ValueError(f"{name} must read like 'fpga=1,CPU=0.5', not {value!r}")
        value = out
    if not isinstance(value, dict):
        raise ValueError(f"{name} must be a dict of resource amounts, not {value!r}")
    for k, v in value.items():
        if not isinstance(k, str) or not k or isinstance(v, bool) \
                or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise ValueError(f"{name} must map resource names to amounts >= 0, not "
                             f"{k!r}: {v!r}")
    return dict(value)


@dataclass(frozen=True)
class DistConfig:
    """The system (module docstring).

    Parameters
    ----------
    actors : int
        Actors (each a gymnasium vector environment of ``envs_per_actor`` environments).
    learners : int
        Local learners; the replay has as many banks (one per learner).
    avg_every : int
        ``H``: local SGD steps between weight averagings (1: synchronous data parallelism).
    replay_device, learner_device : str
        Where the replay banks and the learners run (module docstring). ``learner_device``
        ``"trainer:..."``: one fused trainer, which holds the replay too (``learners`` 1,
        ``replay_device`` unused; :mod:`sw.dist.trainer`).
    mode : str
        ``"lockstep"`` or ``"async"`` (:data:`MODES`).
    dqn : DQNConfig
        Hyper-parameters (module docstring for the step counts).
    target_every : int or None
        Averaging rounds between target syncs; None: ``ceil(target_period / H)``.
    pull_every : int
        Vector steps between an actor's weight pulls.
    push_every : int
        Vector steps between an actor's pushes to the replay (asynchronous mode; in lockstep
        an actor pushes once per round).
    actor_chunk : int
        Vector steps of one actor call in asynchronous mode.
    lag : int or None
        Asynchronous mode: how many rounds actors and learners may run ahead of the ratio
        ``train_freq``; None lets both run free (throughput measurements).
    bank_capacity : int
        Transitions per CPU bank (an accelerator bank has its hardware's capacity).
    learner_module, replay_module : str
        Shipped configurations the ``golden`` specs model.
    actor_resources, learner_resources, replay_resources, server_resources : dict or None
        Ray resources per component (``"CPU"`` is Ray's ``num_cpus``; default 0 so that a
        2-core machine runs any system); None: ``{"fpga": 1}`` for a hardware spec, else {}.
    max_restarts : int
        Ray restarts of a failed actor or learner (its calls are retried as often).
    trace : bool
        Banks and learners record transition ids (tests).
    """
    actors: int = 2
    learners: int = 2
    avg_every: int = 10
    replay_device: str = "golden"
    learner_device: str = "golden"
    mode: str = "lockstep"
    dqn: DQNConfig = field(default_factory=DQNConfig)
    envs_per_actor: int = 1
    target_every: int | None = None
    pull_every: int = 10
    push_every: int = 16
    actor_chunk: int = 64
    lag: int | None = 2
    bank_capacity: int = 1 << 16
    learner_module: str = "learner_cartpole_s4"
    replay_module: str = "replay_accel_k16"
    actor_resources: dict | None = None
    learner_resources: dict | None = None
    replay_resources: dict | None = None
    server_resources: dict | None = None
    max_restarts: int = 3
    trace: bool = False

    def __post_init__(self):
        for name in ("actors", "learners", "avg_every", "envs_per_actor", "pull_every",
                     "push_every", "actor_chunk", "bank_capacity"):
            _positive(name, getattr(self, name))
        for name in ("target_every", "lag"):
            if getattr(self, name) is not None:
                _positive(name, getattr(self, name))
        if isinstance(self.max_restarts, bool) or not isinstance(self.max_restarts, int) \
                or self.max_restarts < 0:
            raise ValueError(f"max_restarts must be a non-negative integer, not "
                             f"{self.max_restarts!r}")
        check_spec("replay_device", self.replay_device)
        check_spec("learner_device", self.learner_device, trainer=True)
        if self.fused:
            if self.learners != 1:
                raise ValueError(f"learners must be 1 with the fused trainer (actors feed one "
                                 f"trainer; its target network stays on the card, so local "
                                 f"SGD averaging is not possible), not {self.learners}")
            if self.trace:
                raise ValueError("trace must be False with the fused trainer: it samples on "
                                 "chip, there are no sampled transition ids to record")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {self.mode!r}")
        if not isinstance(self.dqn, DQNConfig):
            raise ValueError(f"dqn must be a sw.rl.dqn.DQNConfig, not {self.dqn!r}")
        # DQNConfig itself refuses total_steps <= learning_starts (nothing would train).
        if not isinstance(self.trace, bool):
            raise ValueError(f"trace must be a bool, not {self.trace!r}")
        for role in ROLES:
            name = f"{role}_resources"
            object.__setattr__(self, name, parse_resources(name, getattr(self, name)))

    # -- derived -----------------------------------------------------------------------------
    @property
    def fused(self) -> bool:
        """The learner is the fused trainer (``learner_device="trainer:..."``): it holds the
        replay too (:mod:`sw.dist.trainer`)."""
        return self.learner_device.startswith("trainer:")

    @property
    def target_rounds(self) -> int:
        """Averaging rounds between target-network syncs."""
        if self.target_every is not None:
            return self.target_every
        return max(1, math.ceil(self.dqn.target_period / self.avg_every))

    @property
    def steps_per_round(self) -> int:
        """Vector steps each actor takes per lockstep round:
        ``ceil(H * train_freq / (actors * envs_per_actor))``."""
        return max(1, math.ceil(self.avg_every * self.dqn.train_freq
                                / (self.actors * self.envs_per_actor)))

    @property
    def stride(self) -> int:
        """Environment steps of all actors per vector step of one."""
        return self.actors * self.envs_per_actor

    def placement(self, role: str) -> dict:
        """Ray options of a component of ``role``: ``num_cpus`` and ``resources``."""
        if role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
        given = getattr(self, f"{role}_resources")
        if given is None:
            spec = {"learner": self.learner_device, "replay": self.replay_device}.get(role)
            hardware = spec not in (None, "cpu", "golden", "trainer:golden")
            given = {FPGA_RESOURCE: 1} if hardware else {}
        res = dict(given)
        cpus = res.pop("CPU", 0)
        return {"num_cpus": cpus, "resources": res}

    def label(self) -> str:
        """Short name for reports and legends."""
        if self.fused:
            return f"one fused trainer, H={self.avg_every}, {self.learner_device}"
        return (f"{self.learners} learner{'s' * (self.learners > 1)}, H={self.avg_every}, "
                f"learner {self.learner_device}, replay {self.replay_device}")

    def to_dict(self) -> dict:
        return asdict(self)
