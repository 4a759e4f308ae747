"""The block catalogue of functional coverage (tb/fcov/blocks.py): the samplers classify
hand-made stimulus of the replay, the learner and the GAE into the right bins."""

import numpy as np
import pytest

import fcov
from fcov import blocks


class Recorder:
    """Replaces fcov.blocks.sample: the bins each sample hits, per point."""

    def __init__(self, monkeypatch):
        self.seen = []
        monkeypatch.setattr("fcov.blocks.sample", lambda n, v: self.seen.append((n, v)))

    def hits(self, name):
        """Bin labels hit, one per sample and bin, in order."""
        bins = fcov.POINTS[name].bins
        return [label for n, v in self.seen if n == name
                for label, pred in bins.items() if pred(v)]


def test_catalogue_names_the_designs_operations():
    from rtl_gen.replay import SumTreeOp
    from sw.replay.spec import ReplayOp

    assert blocks.TREE_OPS == tuple(o.name for o in SumTreeOp)
    assert blocks.REPLAY_OPS == tuple(o.name for o in ReplayOp)
    points = fcov.catalogue()
    for prefix in ("replay.tree.", "replay.accel.", "learner.", "gae."):
        assert any(n.startswith(prefix) for n in points), prefix
    assert len(points["replay.tree.pair"].bins) == 64


def test_tree_run_pairs_same_leaf_and_forwarding(monkeypatch):
    from sw.replay.spec import SumTreeConfig
    from sumtree_ref import insert, read, reset, sample, update

    rec = Recorder(monkeypatch)
    cfg = SumTreeConfig(fanout=4, capacity=100, priority_width=16, priority_frac=4,
                        input_guard_bits=2, target_bits=16, max_batch=8)
    cmds = [update(5, 1), update(5, 2), read(5), update(6, 3), sample(0), read(6),
            insert(7), reset(), update(200, 1), read(200)]
    cycles = [0, 1, 2, 3, 4, 5, 6, 7, 20, 21]           # RESET waited before the next
    blocks.tree_run(cfg, cmds, cycles)
    assert set(rec.hits("replay.tree.op")) == {"UPDATE", "READ", "SAMPLE", "INSERT", "RESET"}
    assert set(rec.hits("replay.tree.pair")) == {
        "UPDATE>UPDATE", "UPDATE>READ", "READ>UPDATE", "UPDATE>SAMPLE", "SAMPLE>READ",
        "READ>INSERT", "INSERT>RESET"}                  # not RESET>UPDATE (13 cycles later)
    # 200 >= capacity: no leaf, READ>READ never (no two reads in a row here)
    assert rec.hits("replay.tree.same_leaf") == ["UPDATE>READ", "UPDATE>UPDATE"]
    # 5 again at +1 (update, then read); 6 two cycles after 5 (its sibling); 6 read at +2
    assert set(rec.hits("replay.tree.after_update")) == {"same leaf +1", "same leaf +2",
                                                         "sibling +2"}


def test_replay_run_ops_sizes_errors_and_duplicates(monkeypatch):
    from sw.replay.spec import ReplayOp as Op, SumTreeConfig

    rec = Recorder(monkeypatch)
    cfg = SumTreeConfig(fanout=4, capacity=100, priority_width=16, priority_frac=4,
                        input_guard_bits=2, target_bits=16, max_batch=8)
    idx = np.array([3, 3, 4, 5, 6, 7, 8, 9])
    blocks.replay_run(cfg, Op.UPDATE.value, 8, indices=idx)
    blocks.replay_run(cfg, Op.UPDATE.value, 4, indices=np.array([1, 2, 1, 3]))
    blocks.replay_run(cfg, Op.UPDATE.value, 1, indices=idx[1:])
    blocks.replay_run(cfg, Op.UPDATE_SAMPLE.value, 3, 2, prng=True, relaxed=True, indices=idx)
    blocks.replay_run(cfg, Op.SAMPLE.value, 2)
    blocks.replay_run(cfg, Op.RESET.value, 0)
    for code, b, u in ((9, 1, 1), (Op.READ.value, 0, 1), (Op.UPDATE_SAMPLE.value, 1, 9)):
        blocks.replay_run(cfg, code, b, u)
    assert rec.hits("replay.accel.error") == ["ok"] * 6 + ["op", "batch_size", "update_size"]
    assert rec.hits("replay.accel.op") == [
        "UPDATE", "UPDATE", "UPDATE", "UPDATE_SAMPLE", "UPDATE_SAMPLE relaxed",
        "UPDATE_SAMPLE relaxed (PRNG)", "SAMPLE", "SAMPLE (TARGET_IN)", "RESET"]
    assert rec.hits("replay.accel.batch") == ["B max_batch", "B mid", "B 1", "B mid", "U mid",
                                              "B mid"]
    assert rec.hits("replay.accel.update_indices") == [
        "UPDATE duplicates", "UPDATE duplicates back to back", "UPDATE duplicates",
        "UPDATE distinct", "UPDATE_SAMPLE duplicates"]


def test_learner_batches_and_target_syncs(monkeypatch):
    rec = Recorder(monkeypatch)
    for B in (1, 3, 4, 8, 9, 16, 0, 17):
        blocks.learner_step(B, 4, 16, sync_period=B % 3, sync_target=B == 8)
    assert rec.hits("learner.batch") == [
        "1", "below sub_batch", "= sub_batch", "multiple of sub_batch", "not a multiple",
        "multiple of sub_batch", "max_batch", "0 (refused)", "above max_batch (refused)"]
    assert rec.hits("learner.sync_period") == [
        "every step (1)", "off (0)", "every step (1)", "every N-th step (N > 1)",
        "forced (SYNC_TARGET)", "off (0)", "every step (1)"]
    blocks.learner_run(5, 0)
    blocks.learner_run(1, 1)                            # one step: not a run
    blocks.learner_run(5, sync_period=3, sync_count=0)  # the 3rd step
    blocks.learner_run(20, sync_period=5, sync_count=4)  # steps 1, 6, 11, 16
    assert rec.hits("learner.run_syncs") == ["none in a run", "one", "several"]


def test_gae_shapes_and_episode_ends(monkeypatch):
    from gae_cases import FULL, random_args
    from sw.gae.spec import GaeCoreConfig

    rec = Recorder(monkeypatch)
    cfg = GaeCoreConfig.from_dict(FULL)                 # 5 PEs, 20 trajectories, 40 steps
    assert cfg.depth == 41 * 4
    d = np.zeros((4, 7), bool)
    d[0, 0] = d[3, 1] = d[1, 2] = d[2, 2] = True
    for T, M, dones in ((4, 7, d), (1, 1, np.ones((1, 1), bool)), (40, 20, None),
                        (cfg.depth - 1, 1, None), (1, 80, None), (4, 5, None),
                        (0, 3, None), (4, 0, None), (200, 1, None)):
        dones = np.zeros((T, M), bool) if dones is None else dones
        blocks.gae_run(cfg, random_args(cfg, T, M), dones)
    assert rec.hits("gae.timesteps") == [
        "between", "1", "= capacity", "memory full", "above capacity (fewer groups)",
        "memory full", "1", "between"]
    assert rec.hits("gae.trajectories") == [
        "not a multiple", "1", "below n_pe", "multiple of n_pe", "= max_trajectories",
        "1", "below n_pe", "multiple of n_pe", "above max_trajectories (fewer steps)", "= n_pe"]
    assert rec.hits("gae.episode_ends") == [
        "at t = 0", "at t = T-1", "inside", "none in a trajectory", "at consecutive steps",
        "at t = 0", "at t = T-1"] + ["none in a trajectory"] * 4


def test_observing_wraps_and_restores():
    class Driver:
        def start(self, n):
            return n + 1

    calls = []
    with blocks.observing(Driver, "start", lambda self, n: calls.append(n)):
        assert Driver().start(2) == 3
    assert Driver().start(4) == 5 and calls == [2]
    with pytest.raises(RuntimeError):
        with blocks.observing(Driver, "start", lambda self, n: None):
            raise RuntimeError
    assert Driver.start.__name__ == "start" and Driver().start(1) == 2 and calls == [2]

    class Device(Driver):                          # an inherited method: removed again
        pass

    with blocks.observing(Device, "start", lambda self, n: calls.append(-n)):
        assert Device().start(1) == 2 and calls == [2, -1]
    assert "start" not in vars(Device)


def test_driver_hooks_sample_the_golden_sessions(monkeypatch):
    """The hooks the driver RTL tests install take the drivers' arguments (here on the golden
    devices of the same sessions)."""
    from gae_cases import FULL
    from gae_session import session as gae_session
    from learner_session import SIM_CONFIG, session as learner_session
    from replay_session import RTL, session as replay_session
    from sw.driver import GoldenDevice, LearnerGoldenDevice
    from sw.gae.driver import GaeDriver
    from sw.gae.spec import GaeCoreConfig
    from sw.learner.driver import LearnerDriver
    from sw.learner.spec import LearnerConfig
    from sw.replay.device import ReplayGoldenDevice
    from sw.replay.driver import ReplayDriver
    from sw.replay.spec import SumTreeConfig

    rec = Recorder(monkeypatch)
    with blocks.observing(ReplayDriver, "_run", blocks.replay_driver_run):
        replay_session(ReplayGoldenDevice(SumTreeConfig.from_dict(RTL)))
    assert set(rec.hits("replay.accel.op")) >= set(blocks.REPLAY_OPS)
    assert {"ok", "batch_size"} <= set(rec.hits("replay.accel.error"))
    with blocks.observing(LearnerDriver, "_write_and_start", blocks.learner_driver_start):
        learner_session(LearnerGoldenDevice(LearnerConfig.from_dict(SIM_CONFIG)))
    assert {"1", "not a multiple", "max_batch", "0 (refused)"} <= set(rec.hits("learner.batch"))
    assert "forced (SYNC_TARGET)" in rec.hits("learner.sync_period")
    cfg = GaeCoreConfig.from_dict(FULL)
    with blocks.observing(GaeDriver, "_run", blocks.gae_driver_run):
        gae_session(GoldenDevice(cfg), cfg)
    assert {"below n_pe", "not a multiple"} <= set(rec.hits("gae.trajectories"))
