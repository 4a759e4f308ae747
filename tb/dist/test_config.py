"""The one configuration of a distributed system (sw.dist.config): checked arguments named in
the messages, derived schedule numbers, placement by Ray resources."""

import pytest

from sw.dist.config import DistConfig, check_spec, parse_resources
from sw.rl.dqn import DQNConfig


@pytest.mark.parametrize("kw, msg", [
    (dict(actors=0), "actors must be a positive integer, not 0"),
    (dict(learners=1.5), "learners must be a positive integer, not 1.5"),
    (dict(avg_every=True), "avg_every must be a positive integer, not True"),
    (dict(envs_per_actor=-1), "envs_per_actor must be a positive integer, not -1"),
    (dict(lag=0), "lag must be a positive integer, not 0"),
    (dict(max_restarts=-1), "max_restarts must be a non-negative integer, not -1"),
    (dict(mode="sync"), "mode must be one of lockstep, async, not 'sync'"),
    (dict(replay_device="fpga"), "replay_device must be 'cpu' or a device spec: device spec "
                                 "must be 'golden', "),
    (dict(learner_device="xrt:"), "learner_device must be 'cpu' or a device spec: "),
    (dict(dqn={}), "dqn must be a sw.rl.dqn.DQNConfig"),
    (dict(learner_resources="fpga"), "learner_resources must read like 'fpga=1,CPU=0.5'"),
    (dict(actor_resources={"CPU": -1}), "actor_resources must map resource names to amounts"),
    (dict(trace=1), "trace must be a bool, not 1"),
])
def test_bad_arguments_are_named(kw, msg):
    with pytest.raises(ValueError, match=msg):
        DistConfig(**kw)


def test_derived_numbers():
    cfg = DistConfig(actors=3, envs_per_actor=2, avg_every=10,
                     dqn=DQNConfig(train_freq=1, target_period=250))
    assert cfg.steps_per_round == 2             # ceil(10 * 1 / 6)
    assert cfg.stride == 6
    assert cfg.target_rounds == 25
    assert DistConfig(avg_every=1).target_rounds == 250
    assert DistConfig(avg_every=40).target_rounds == 7           # ceil(250 / 40)
    assert DistConfig(target_every=3).target_rounds == 3
    assert "2 learners, H=10" in DistConfig().label()


def test_placement():
    cfg = DistConfig(learner_device="xrt:/opt/l.xclbin", replay_device="cpu",
                     actor_resources="CPU=0.5")
    assert cfg.placement("learner") == {"num_cpus": 0, "resources": {"fpga": 1}}
    assert cfg.placement("replay") == {"num_cpus": 0, "resources": {}}
    assert cfg.placement("actor") == {"num_cpus": 0.5, "resources": {}}
    shared = DistConfig(learner_device="pynq:/b.bit", replay_device="pynq:/b.bit",
                        learner_resources={"fpga": 0.5}, replay_resources={"fpga": 0.5})
    assert shared.placement("replay")["resources"] == {"fpga": 0.5}
    assert DistConfig().placement("learner") == {"num_cpus": 0, "resources": {}}   # golden
    with pytest.raises(ValueError, match="role must be one of"):
        cfg.placement("bank")


def test_helpers():
    assert check_spec("x", "cpu") == "cpu"
    assert check_spec("x", "pynq:/a.bit:accel") == "pynq:/a.bit:accel"
    assert parse_resources("r", "fpga=1, CPU=0.25") == {"fpga": 1.0, "CPU": 0.25}
    assert parse_resources("r", None) is None
    assert parse_resources("r", "") == {}
