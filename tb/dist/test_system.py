"""The distributed system on a local Ray (sw.dist.system): learning, banked replay, target
syncs after averaging, restarts, errors a user can act on.

One Ray instance (2 CPUs, no dashboard) serves the module and is shut down at its end; every
system is small and bounded by a step count. The learning run (about a minute) and the test that
reads its traces are ``slow``. ``lockstep`` runs are reproducible for a seed, so
the counts asserted here do not depend on the machine's load.
"""

import numpy as np
import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("gymnasium")

from sw.dist import DistConfig  # noqa: E402
from sw.dist.system import (DeviceOpenError, DistSystem, PlacementError,  # noqa: E402
                            init_ray, train)
from sw.rl.dqn import DQNConfig  # noqa: E402

pytestmark = pytest.mark.xdist_group("ray")


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    init_ray(num_cpus=2)
    yield
    ray.shutdown()


#: The learning test: 2 actors, 2 learners, H = 10, golden models of both accelerators; the
#: target network is synchronised after every 10th averaging (100 local steps).
LEARN = dict(total_steps=5000, learning_starts=500, target_period=100, seed=0)
LEARN_MIN = 150


@pytest.fixture(scope="module")
def learned():
    """One traced lockstep run of the learning configuration, shared by the tests that read
    it: ``(result, tids inserted per bank, per-round samples)``."""
    cfg = DistConfig(actors=2, learners=2, avg_every=10, trace=True, dqn=DQNConfig(**LEARN))
    with DistSystem(cfg) as system:
        res = system.run(progress=False)
        inserted = [ray.get(b.inserted_tids.remote()) for b in system.banks]
        return res, inserted, system.traces()


@pytest.mark.slow
def test_learns_cartpole_with_two_learners_on_golden_accelerators(learned, tmp_path):
    """A random policy scores about 22 on CartPole; the system must pass LEARN_MIN (mean of
    the last 10 episodes) within LEARN["total_steps"] environment steps (docs/dist.md has the
    measured curve)."""
    res = learned[0]
    updates = LEARN["total_steps"] - LEARN["learning_starts"]
    assert res.env_steps == LEARN["total_steps"]
    assert res.policy_updates == updates and res.grad_steps == 2 * updates
    assert res.rounds == updates // 10
    assert res.target_syncs == list(range(10, res.rounds + 1, 10))
    assert res.learner_cycles > 0 and res.replay_cycles > 0
    assert res.mean_return(10) > LEARN_MIN, res.mean_return(10)
    from sw.rl.plot import plot_returns
    plot_returns([res], tmp_path / "curve.png", title="test")
    assert (tmp_path / "curve.png").stat().st_size > 10_000


def _actor_of(tids):
    return (np.asarray(tids) >> 44) - 1


def _check_banks(res, inserted, traces, batch, steps, lockstep):
    assert sum(len(t) for t in inserted) == res.env_steps
    assert not np.intersect1d(inserted[0], inserted[1]).size
    assert all(set(_actor_of(t)) == {0, 1} for t in inserted)
    assert len(traces) == res.rounds > 0
    for rnd in traces:
        for i, (tids, slots) in enumerate(rnd):
            assert len(tids) == steps * batch
            assert np.isin(tids, inserted[i]).all()
            if lockstep:
                np.testing.assert_array_equal(inserted[i][slots], tids)
    assert all(b["unwritten_samples"] == 0 for b in res.banks)
    assert sum(b["sampled"] for b in res.banks) == res.grad_steps * batch


@pytest.mark.slow
def test_each_learner_samples_its_own_bank(learned):
    """Banked replay in the running system (golden replay banks, lockstep): every transition
    is in exactly one bank, each bank holds both actors' transitions, learner i samples bank i
    only and never a slot before it was written, and the slot of a sample is where its
    transition was inserted."""
    _check_banks(*learned, batch=64, steps=10, lockstep=True)


def test_each_learner_samples_its_own_bank_async_on_cpu():
    """The same with asynchronous inserts into CPU banks (lazy writing, threaded banks)."""
    cfg = DistConfig(actors=2, learners=2, avg_every=5, replay_device="cpu", mode="async",
                     trace=True, dqn=DQNConfig(total_steps=1000, learning_starts=400, batch=32))
    with DistSystem(cfg) as system:
        res = system.run(progress=False)
        inserted = [ray.get(b.inserted_tids.remote()) for b in system.banks]
        traces = system.traces()
    assert res.env_steps >= 1000
    _check_banks(res, inserted, traces, batch=32, steps=5, lockstep=False)
    assert res.policy_updates == 600        # lag 2: learners owe (1000 - 400) // 5 * 5


def test_a_killed_actor_is_restarted_and_training_continues():
    killed = []

    def kill(system, rnd):
        if rnd == 20 and not killed:
            ray.kill(system.actors[0], no_restart=False)     # the process dies mid-call
            killed.append(rnd)

    cfg = DistConfig(actors=2, learners=1, avg_every=4, replay_device="cpu", trace=True,
                     dqn=DQNConfig(total_steps=800, learning_starts=300, batch=32))
    with DistSystem(cfg) as system:
        res = system.run(progress=False, on_round=kill)
        tids = ray.get(system.banks[0].inserted_tids.remote())
    assert killed == [20]
    assert res.restarts == {"actor 0": 1}
    assert res.env_steps == 800 and res.policy_updates == 500
    life = (tids >> 36) & 0xFF
    mine = _actor_of(tids) == 0
    assert set(life[mine]) == {0, 1} and set(life[~mine]) == {0}   # a second life, new ids
    assert len(np.unique(tids)) == len(tids)
    assert res.episodes[-1][0] > 600


def test_a_device_that_cannot_be_opened_is_named():
    cfg = DistConfig(actors=1, learners=1, learner_device="xrt:/nonexistent/learner.xclbin",
                     learner_resources={})
    with pytest.raises(DeviceOpenError, match=r"learner 0 could not open "
                                              r"'xrt:/nonexistent/learner.xclbin' on node \S+: "):
        train(cfg, progress=False)
    cfg = DistConfig(actors=1, learners=1, replay_device="pynq:/nonexistent.bit",
                     replay_resources={})
    with pytest.raises(DeviceOpenError, match=r"replay bank 0 could not open "
                                              r"'pynq:/nonexistent.bit' on node \S+: "):
        train(cfg, progress=False)


def test_a_resource_no_node_has_is_refused():
    cfg = DistConfig(learner_device="xrt:/opt/learner.xclbin")
    with pytest.raises(PlacementError, match=r"learner_resources ask for fpga=1 for each of 2 "
                                             r"learner\(s\) \(2 in all\), but the Ray cluster "
                                             r"has fpga=0"):
        DistSystem(cfg).build()


def test_cli_runs_and_reports(tmp_path, capsys):
    from sw.dist.dqn import main
    out = tmp_path / "curve.png"
    assert main(["--actors", "1", "--learners", "1", "--avg-every", "5", "--total-steps",
                 "1100", "--learning-starts", "1000", "--replay-device", "cpu", "--quiet",
                 "--plot", str(out), "--json", str(tmp_path / "r.json")]) == 0
    text = capsys.readouterr().out
    assert "100 policy updates" in text and "load average" in text
    assert "gradient steps/s" in text and out.stat().st_size > 5_000
    with pytest.raises(SystemExit) as e:        # a local Ray: the file is checked here
        main(["--learners", "1", "--learner-device", "xrt:/nonexistent.xclbin",
              "--learner-resources", "CPU=0", "--quiet"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert ("--learner-device: device spec 'xrt:/nonexistent.xclbin': the xclbin "
            "'/nonexistent.xclbin' does not exist") in err
    xclbin = tmp_path / "learner.xclbin"
    xclbin.write_bytes(b"")
    with pytest.raises(SystemExit) as e:        # the node cannot open it (no pyxrt): still 2
        main(["--learners", "1", "--learner-device", f"xrt:{xclbin}",
              "--learner-resources", "CPU=0", "--quiet"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert f"error: learner 0 could not open 'xrt:{xclbin}'" in err
    assert "Traceback" not in err
