"""The cost model of a cluster with one FPGA per node (sw.dist.projection): its arithmetic,
its defaults against the cycle models, and the shape the thesis reports (Eq. 5.6: the scaling
factor falls with L and rises with H)."""

import pytest

from sw.dist.projection import (ClusterModel, projection_table, round_cost, scaling_factor,
                                step_cost, throughput)
from sw.learner.schedule import step_cycles
from sw.registry import shipped_config
from sw.replay.spec import ReplayOp, run_cycles


def test_defaults_are_the_cycle_models():
    _, lcfg = shipped_config("learner_cartpole_s4")
    _, rcfg = shipped_config("replay_accel_k16")
    m = ClusterModel()
    assert m.learner_cycles == step_cycles(lcfg, 64)
    assert m.replay_cycles == run_cycles(rcfg, ReplayOp.UPDATE_SAMPLE, 64, 64)
    assert m.insert_cycles == run_cycles(rcfg, ReplayOp.INSERT_MAX, 16)


def test_step_and_round_arithmetic():
    m = ClusterModel(clock_hz=1e8, bus_bytes_per_s=1e9, launch_s=1e-5, mmio_s=1e-6,
                     host_learner_s=0, host_replay_s=0, rpc_local_s=1e-4, learner_mmio=10,
                     replay_mmio=0, learner_bytes=1000, replay_bytes=0, learner_cycles=10_000,
                     replay_cycles=100, insert_cycles=100, inserts_per_step=16, push=16,
                     net_latency_s=1e-5, net_bytes_per_s=1e8, weight_bytes=10_000,
                     mean_s_per_learner=1e-6, submit_s=1e-6)
    c = step_cost(m)
    assert c.learner == pytest.approx(1e-4 + 1e-5 + 1e-5 + 1e-6)
    assert c.replay == pytest.approx(1e-6 + 1e-5)
    assert c.insert == pytest.approx(1e-6 + 1e-5 + 1e-4)      # one push per step
    assert c.rpc == 1e-4 and c.total == pytest.approx(c.learner + c.replay + c.insert + 1e-4)
    # 4 remote calls, 2 latencies, 2 L S over the network, L (mean + 3 submits), 2 S on the bus
    L = 4
    want = 4 * 1.1e-4 + 2e-5 + 2 * L * 1e-4 + L * 4e-6 + 2e-5
    assert round_cost(m, L) == pytest.approx(want)
    assert throughput(m, L, 10) == pytest.approx(L * 10 / (10 * c.total + want))


def test_scaling_factor_shape():
    m = ClusterModel(rpc_local_s=5e-4)
    for H in (1, 10):
        sfs = [scaling_factor(m, L, H) for L in (1, 2, 4, 8, 16, 32, 64)]
        assert sfs[0] == pytest.approx(1.0)
        assert all(a >= b for a, b in zip(sfs, sfs[1:])) and sfs[-1] < 1.0
    for L in (2, 8, 32):
        assert scaling_factor(m, L, 10) > scaling_factor(m, L, 1)
    rows = projection_table(m, learners=(1, 2), avg_every=(1, 10))
    assert [(L, H) for L, H, _, _ in rows] == [(1, 1), (2, 1), (1, 10), (2, 10)]


def test_bad_parameters_are_named():
    with pytest.raises(ValueError, match="clock_hz must be positive"):
        ClusterModel(clock_hz=0)
    with pytest.raises(ValueError, match="launch_s must be a finite number >= 0"):
        ClusterModel(launch_s=-1)
    with pytest.raises(ValueError, match="avg_every must be a positive integer, not 0"):
        throughput(ClusterModel(), 2, 0)
    with pytest.raises(ValueError, match="learners must be a positive integer, not 0"):
        scaling_factor(ClusterModel(), 0, 1)
