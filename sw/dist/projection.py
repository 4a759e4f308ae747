"""Cost model of SPO-DQN on a cluster with one FPGA per node: a projection, not a measurement.

Thesis equation 5.5 adapted to this framework. Node ``i`` holds learner ``i`` and its replay
bank, both on the node's FPGA; the weight server is one CPU process elsewhere. One *local step*
of a learner (batch ``b``) costs

``T_step = T_learner + T_replay + T_insert + T_rpc``

* ``T_learner``: the learner accelerator's cycles (:func:`sw.learner.schedule.step_cycles`) at
  ``clock_hz``, plus the driver's host time (``host_learner_s``, measured against a device that
  answers at once), its register accesses and its bytes over the bus;
* ``T_replay``: the fused update + sample run (:func:`sw.replay.spec.run_cycles`,
  ``UPDATE_SAMPLE``) the same way;
* ``T_insert``: the insert runs of the transitions that reach the bank per local step
  (``inserts_per_step`` of them, ``push`` per run, each push one Ray call); the data per local
  step is held fixed as ``L`` grows (actors are added with the learners);
* ``T_rpc``: the learner's Ray call to its bank (this framework keeps the bank in its own
  process).

Every ``H`` steps a round ends with the weight exchange

``T_avg(L) = 4 T_rpc' + 2 t_net + 2 L S / B_net + L (t_mean + 3 t_submit) + 2 S / B_bus``

(four Ray calls on the critical path -- ``train``, ``weights``, ``average``, ``set_weights``
-- each ``rpc_remote_s``; the weights, ``S`` bytes, go to the server and back, both directions
serialised on the server's link; the server's exact integer mean, per learner; the
coordinator submits three calls per learner, one after the other; reading and writing the
weights over the bus). Throughput of ``L`` learners is ``L H / (H T_step + T_avg(L))`` local
steps per second and the **scaling factor** ``SF(L) = thr(L) / (L thr(1))`` (1 for ideal
scaling; thesis equation 5.6 with a fixed local batch).

The numbers every figure is made of are the fields of :class:`ClusterModel`; the ones this
machine can measure (host times, Ray call latency, the mean) are passed in by
``scripts/dist_scaling.py``, the rest are stated assumptions.
"""

import math
from dataclasses import asdict, dataclass, field

__all__ = ["ClusterModel", "StepCost", "step_cost", "round_cost", "throughput",
           "scaling_factor", "projection_table"]


def _learner_cycles() -> int:
    """A DQN step of 64 on the shipped ``learner_cartpole_s4`` (its cycle model)."""
    from sw.learner.schedule import step_cycles
    from sw.registry import shipped_config
    return step_cycles(shipped_config("learner_cartpole_s4")[1], 64)


def _replay_cycles(op: str, batch: int, update_size: int = 1) -> int:
    """A run of the shipped ``replay_accel_k16`` (its cycle model)."""
    from sw.registry import shipped_config
    from sw.replay.spec import ReplayOp, run_cycles
    return run_cycles(shipped_config("replay_accel_k16")[1], ReplayOp[op], batch, update_size)


@dataclass(frozen=True)
class ClusterModel:
    """The model's parameters (seconds, bytes per second).

    Assumed: ``clock_hz`` (the flows' 300 MHz target, docs/boards.md; not yet met in Vivado),
    ``bus_bytes_per_s`` (PCIe Gen3 x16 effective, Alveo), ``launch_s`` (one accelerator run
    started and waited for through XRT), ``mmio_s`` (one register access over PCIe),
    ``net_latency_s`` and ``net_bytes_per_s`` (10 GbE between a node and the weight server),
    ``rpc_remote_s`` (a Ray call to another node: ``rpc_local_s`` plus the network latency).
    ``inserts_per_step`` (transitions reaching a bank per local step) and ``push``
    (transitions per insert call) are the workload.
    Measured here and passed in: ``rpc_local_s`` (a Ray actor call on one node),
    ``submit_s`` (the coordinator submitting one call without waiting),
    ``host_learner_s`` and ``host_replay_s`` (drivers' host code per run, device answering at
    once), ``mean_s_per_learner`` (the server's exact mean per learner network),
    ``learner_mmio``/``replay_mmio`` and ``learner_bytes``/``replay_bytes`` (register accesses
    and bus bytes per run, counted), ``weight_bytes`` (``S``).
    """
    clock_hz: float = 300e6
    bus_bytes_per_s: float = 12e9
    launch_s: float = 20e-6
    mmio_s: float = 1e-6
    net_latency_s: float = 50e-6
    net_bytes_per_s: float = 1.1e9
    rpc_local_s: float = 500e-6
    host_learner_s: float = 300e-6
    host_replay_s: float = 150e-6
    mean_s_per_learner: float = 20e-6
    submit_s: float = 50e-6
    learner_mmio: int = 40
    replay_mmio: int = 30
    learner_bytes: int = 4096
    replay_bytes: int = 2048
    weight_bytes: int = 9220
    # the shipped accelerators' cycle models (not restated here: they change with the RTL)
    learner_cycles: int = field(default_factory=_learner_cycles)
    replay_cycles: int = field(default_factory=lambda: _replay_cycles("UPDATE_SAMPLE", 64, 64))
    insert_cycles: int = field(default_factory=lambda: _replay_cycles("INSERT_MAX", 16))
    inserts_per_step: float = 1.0
    push: int = 16

    def __post_init__(self):
        for k, v in asdict(self).items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                    or v < 0:
                raise ValueError(f"{k} must be a finite number >= 0, not {v!r}")
        for k in ("clock_hz", "bus_bytes_per_s", "net_bytes_per_s", "push"):
            if getattr(self, k) <= 0:
                raise ValueError(f"{k} must be positive, not {getattr(self, k)!r}")

    @property
    def rpc_remote_s(self) -> float:
        return self.rpc_local_s + self.net_latency_s


@dataclass(frozen=True)
class StepCost:
    """The parts of one local step (seconds)."""
    learner: float
    replay: float
    insert: float
    rpc: float

    @property
    def total(self) -> float:
        return self.learner + self.replay + self.insert + self.rpc


def _run(m: ClusterModel, cycles, host, mmio, nbytes):
    return cycles / m.clock_hz + host + m.launch_s + mmio * m.mmio_s + nbytes / m.bus_bytes_per_s


def step_cost(m: ClusterModel) -> StepCost:
    """:class:`StepCost` of one local step (module docstring; the same for any ``L``)."""
    learner = _run(m, m.learner_cycles, m.host_learner_s, m.learner_mmio, m.learner_bytes)
    replay = _run(m, m.replay_cycles, m.host_replay_s, m.replay_mmio, m.replay_bytes)
    insert = m.inserts_per_step / m.push * (
        _run(m, m.insert_cycles, m.host_replay_s, m.replay_mmio, 0) + m.rpc_local_s)
    return StepCost(learner, replay, insert, m.rpc_local_s)


def round_cost(m: ClusterModel, learners: int) -> float:
    """``T_avg(L)``: the weight exchange that ends a round (module docstring)."""
    if isinstance(learners, bool) or not isinstance(learners, int) or learners < 1:
        raise ValueError(f"learners must be a positive integer, not {learners!r}")
    L = learners
    S = m.weight_bytes
    return (4 * m.rpc_remote_s + 2 * m.net_latency_s + 2 * L * S / m.net_bytes_per_s
            + L * (m.mean_s_per_learner + 3 * m.submit_s) + 2 * S / m.bus_bytes_per_s)


def throughput(m: ClusterModel, learners: int, avg_every: int) -> float:
    """Local steps per second of all ``learners`` together with averaging every ``H``."""
    if isinstance(avg_every, bool) or not isinstance(avg_every, int) or avg_every < 1:
        raise ValueError(f"avg_every must be a positive integer, not {avg_every!r}")
    H = avg_every
    return learners * H / (H * step_cost(m).total + round_cost(m, learners))


def scaling_factor(m: ClusterModel, learners: int, avg_every: int) -> float:
    """``thr(L) / (L thr(1))`` at the same ``H``."""
    return throughput(m, learners, avg_every) / (learners * throughput(m, 1, avg_every))


def projection_table(m: ClusterModel, learners=(1, 2, 4, 8, 16, 32), avg_every=(1, 10)):
    """Rows ``(L, H, local steps per second, SF)`` of the projection."""
    rows = []
    for H in avg_every:
        for L in learners:
            thr = throughput(m, L, H)
            rows.append((L, H, thr, scaling_factor(m, L, H)))
    return rows
