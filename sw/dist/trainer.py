"""The fused trainer as the learner of a distributed run: actors on Ray feed one trainer.

With ``learner_device="trainer:..."`` (:class:`~sw.dist.config.DistConfig`) the system has
one :class:`TrainerWorker` in place of the replay bank and the learner: the actors' batches
are appended to the trainer's ring in device memory (:meth:`TrainerWorker.insert`), a round
of ``H`` local steps is one launch of ``H`` gradient steps on the card (sample, gather, IS
weights, learner step, priorities, target sync every ``target_period`` steps: all there), and
the weights the actors pull are the trainer's newest snapshot (:meth:`TrainerWorker.weights`,
through the weight server as a learner's). There is nothing to average with one trainer, so
:meth:`TrainerWorker.set_weights` loads nothing (a load would also overwrite the target
network the card keeps).

The loss a round reports is the trainer's trace: the mean ``|Q - y|`` of the launch (not the
squared error the other learners report). The trainer samples on chip, so there are no
sampled transition ids to trace (``trace=True`` is refused).
"""

import numpy as np

__all__ = ["TrainerWorker", "is_trainer_spec"]


def is_trainer_spec(spec) -> bool:
    """Whether ``spec`` names the fused trainer (``"trainer:..."``)."""
    return isinstance(spec, str) and spec.startswith("trainer:")


class TrainerWorker:
    """The one learner and replay of a distributed run (module docstring).

    Parameters
    ----------
    index : int
        Always 0 (one trainer).
    spec : str
        ``trainer:golden``, ``trainer:sim[:MODULE]``, ``trainer:pynq:...`` or
        ``trainer:xrt:...`` (:func:`sw.rl.dqn_trainer.open_trainer`).
    weight_server : WeightServer, Ray actor handle or None
        Registered with, as a learner.
    init_seed : int
        Seed of the initial float network (:func:`sw.rl.dqn_common.init_weights`) and of the
        trainer's PRNG.
    sizes : tuple
        Layer sizes the environment needs; the trainer's network must have them.
    batch, gamma, lr, alpha, beta, prio_eps, target_period : DQN hyper-parameters.
    config : str
        Trainer configuration (:data:`sw.trainer.configs.TRAINERS`).
    """

    def __init__(self, index, spec, *, weight_server=None, init_seed=0, sizes, batch=64,
                 gamma=0.99, lr=0.01, alpha=0.6, beta=0.4, prio_eps=1e-3, target_period=250,
                 config="trainer_zcu106"):
        from sw.rl.dqn_common import init_weights
        from sw.rl.dqn_trainer import open_trainer

        from .learner import call

        self.index = int(index)
        self.spec = spec
        self._drv = drv = open_trainer(spec, config, seed=int(init_seed) & 0xFFFF_FFFF)
        self.label = drv.name
        lc = drv.config.learner
        if tuple(lc.sizes) != tuple(sizes):
            raise ValueError(f"the trainer on {spec!r} has layer sizes {tuple(lc.sizes)}, the "
                             f"environment and hidden size need {tuple(sizes)}")
        self.sizes = tuple(lc.sizes)
        self.capacity = drv.config.capacity
        self._hyper = dict(batch=int(batch), lr=lr, gamma=gamma, alpha=alpha, beta=beta,
                           eps=prio_eps, sync_period=int(target_period), snapshot_period=0)
        drv.load_weights(*init_weights(list(sizes), np.random.default_rng(init_seed)))
        if weight_server is not None:
            call(weight_server, "register", "learner", self.index)
        self.steps = self.rounds = self.cycles = 0

    def info(self) -> dict:
        """Label, node, sizes, weight format and ring capacity."""
        import socket
        return {"learner": self.index, "bank": self.index, "spec": self.spec,
                "label": self.label, "node": socket.gethostname(), "sizes": self.sizes,
                "weight_format": self._drv.config.learner.numerics.weight_format,
                "capacity": self.capacity}

    # -- the replay side -----------------------------------------------------------------------
    def insert(self, batch: dict) -> int:
        """Append a batch of transitions (``obs``, ``action``, ``reward``, ``next_obs``,
        ``done``; :func:`sw.dist.replay.transition_fields`) to the trainer's ring."""
        if len(batch["action"]) == 0:
            return 0
        return self._drv.insert(batch["obs"], batch["action"], batch["reward"],
                                batch["next_obs"], batch["done"])

    def insert_many(self, batches) -> int:
        """Append batches in order (batches or Ray object references to them)."""
        from .replay import _resolve
        return sum(self.insert(b) for b in _resolve(batches))

    def size(self) -> int:
        """Transitions in the ring (at most its capacity)."""
        return min(self._drv.produced, self.capacity)

    def stats(self) -> dict:
        """Transitions appended and sampled (the trainer's counters); ``cycles`` 0: the
        replay's cycles are inside the launches (:meth:`counters`)."""
        st = self._drv.stats()
        return {"inserted": self._drv.produced, "sampled": st["sampled"], "updated":
                st["sampled"], "runs": 0, "cycles": 0, "unwritten_samples": 0}

    # -- the learner side ----------------------------------------------------------------------
    def train(self, steps: int) -> dict:
        """One launch of ``steps`` gradient steps; ``losses``: the launch's mean ``|Q - y|``."""
        status = self._drv.train(int(steps), **self._hyper, trace_period=int(steps))
        self.steps += int(status["STEPS_DONE"])
        self.cycles += int(status["CYCLES"])
        trace = self._drv.stats()["trace"]
        loss = float(trace[-1, 2]) if len(trace) else float("nan")
        return {"learner": self.index, "losses": [loss], "cycles": self.cycles,
                "steps": self.steps}

    def flush(self) -> None:
        """Nothing to flush: the card writes the priorities back itself."""

    def weights(self, target: bool = False) -> list:
        """The newest snapshot's raw matrices (the target network stays on the card)."""
        if target:
            raise ValueError("target must be False: the trainer's target network is not "
                             "read back")
        return self._drv.raw_weights()

    def set_weights(self, net, sync_target: bool = False) -> int:
        """The average of one trainer's weights is its own: nothing is loaded (module
        docstring). Returns the rounds seen."""
        self.rounds += 1
        return self.rounds

    def counters(self) -> dict:
        """Gradient steps, rounds, cycles of every launch."""
        return {"steps": self.steps, "rounds": self.rounds, "syncs": [],
                "cycles": self.cycles}
