"""Actors on Ray feeding one fused trainer (sw.dist.trainer): the trainer's golden model holds
the replay and the learner, a round is one launch, the actors pull the trainer's snapshots."""

import numpy as np
import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("gymnasium")

from sw.dist import DistConfig  # noqa: E402
from sw.dist.system import DistSystem, init_ray  # noqa: E402
from sw.rl.dqn import DQNConfig  # noqa: E402

pytestmark = pytest.mark.xdist_group("ray")


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    init_ray(num_cpus=2)
    yield
    ray.shutdown()


@pytest.mark.slow
def test_actors_feed_one_trainer():
    dqn = DQNConfig(total_steps=800, learning_starts=400, batch=32, target_period=40, seed=3)
    cfg = DistConfig(actors=2, learners=1, avg_every=10, learner_device="trainer:golden",
                     dqn=dqn)
    assert cfg.fused and cfg.placement("learner") == {"num_cpus": 0, "resources": {}}
    with DistSystem(cfg) as system:
        assert system.banks == system.learners and len(system.learners) == 1
        first = ray.get(system.server.get_raw.remote())[1]
        res = system.run(progress=False)
        trainer = system.learners[0]
        stats = ray.get(trainer.stats.remote())
        counters = ray.get(trainer.counters.remote())
        last = ray.get(system.server.get_raw.remote())[1]
    assert res.env_steps >= 800
    assert stats["inserted"] == res.env_steps               # every transition appended
    # one launch of H = 10 gradient steps per round, every step on the card
    assert counters["steps"] == res.grad_steps == res.policy_updates == 10 * res.rounds > 0
    assert stats["sampled"] == 32 * counters["steps"]
    assert counters["cycles"] == res.learner_cycles > 0
    assert all(np.isfinite(loss) and loss > 0 for _, loss in res.losses)
    assert any(not np.array_equal(a, b) for a, b in zip(first, last))   # snapshots moved


@pytest.mark.parametrize("kw,match", [
    (dict(learners=2), "learners must be 1 with the fused trainer"),
    (dict(learners=1, trace=True), "trace must be False with the fused trainer"),
    (dict(learners=1, learner_device="trainer:warp"), "learner_device must be 'cpu' or a "
                                                      "device spec"),
])
def test_trainer_configurations_are_checked(kw, match):
    with pytest.raises(ValueError, match=match):
        DistConfig(**{"learner_device": "trainer:golden", **kw})
