"""The golden trainer core (sw.trainer.golden) against independent references: one step against
torch autograd within the learner's error bound, the on-chip powers against float64, and a
10^6-operation soak of its tree and insert protocol against a flat model of the specification."""

import numpy as np
import pytest

from sw.learner.mlp import error_bounds, init_weights, quantize_coef
from sw.trainer.golden import LaunchArgs, TrainerCore, stratified_fractions
from sw.trainer.layout import pack_records, pack_weights, record_bytes, region_base, storage_bytes
from sw.trainer.spec import TrainerCmd, TrainerConfig
from sw.learner.spec import LearnerConfig
from sw.replay.spec import SumTreeConfig

SMALL = TrainerConfig(learner=LearnerConfig(sizes=(4, 16, 2), array=4, max_batch=32,
                                            sub_batch=8),
                      tree=SumTreeConfig(fanout=4, capacity=256, max_batch=32),
                      append_window=16, delay=1, trace_depth=8)


def _args(cfg, B, **kw):
    num = cfg.learner.numerics
    base = dict(steps=0, batch=B, lr=quantize_coef(0.02 * 2 / B, num.lr_format, "lr"),
                gamma=quantize_coef(0.99, num.coef_format, "gamma"),
                alpha=cfg.coef_format.quantize(0.6), beta=cfg.coef_format.quantize(0.4),
                eps=cfg.eps_format.quantize(1e-3), sync_period=5, seed=7,
                cmd=int(TrainerCmd.CLEAR | TrainerCmd.LOAD))
    base.update(kw)
    return LaunchArgs(**{k: int(v) for k, v in base.items()})


def _core(cfg, n, seed=0):
    """A core on storage with ``n`` random CartPole-like records and loaded weights."""
    rng = np.random.default_rng(seed)
    num = cfg.learner.numerics
    st = np.zeros(storage_bytes(cfg), np.uint8)
    ws = init_weights(num, rng)
    off = region_base(cfg, "load")
    img = pack_weights(cfg, ws)
    st[off:off + img.size] = img
    n_in, n_out = cfg.learner.sizes[0], cfg.learner.sizes[-1]
    act = num.act_format
    recs = pack_records(cfg, act.quantize(rng.normal(0, 0.5, (n, n_in))),
                        rng.integers(0, n_out, n), act.quantize(np.full(n, 0.1)),
                        act.quantize(rng.normal(0, 0.5, (n, n_in))), rng.random(n) < 0.05)
    ring = region_base(cfg, "ring")
    st[ring:ring + recs.size] = recs.ravel()
    return TrainerCore(cfg, st), ws


def test_step_matches_torch_autograd_within_the_learner_bound():
    from tb.learner.test_mlp import torch_step, within
    cfg = TrainerConfig()                      # CartPole 4-64-64-2, the default numerics
    core, _ = _core(cfg, 200)
    args = _args(cfg, 64)
    core.begin(args)
    core.boundary(200)
    for _ in range(3):                         # a few steps in: weights and priorities moved
        core.boundary(200)
        rec = core.step(args)
    num = cfg.learner.numerics
    step, inp = rec.learner, rec.args
    assert not step.any_overflow
    case = dict(obs=inp["obs"], actions=inp["actions"], rewards=inp["rewards"],
                dones=inp["dones"], next_obs=inp["next_obs"],
                target_weights=inp["target_weights"], gamma=args.gamma,
                loss_weights=rec.loss_weights)
    ref = torch_step(inp["weights"], case, args.lr)
    bound = error_bounds(inp["weights"], step, num, lr=args.lr)
    for l in range(num.n_layers):
        got = num.weight_format.to_float(step.weights[l])
        assert within(got, ref["weights"][l], bound["weights"][l])
    # The batch's IS weights and new priorities against float64, within the power unit's bounds.
    tc, lw = cfg.tree, num.loss_weight_format
    p = tc.priority_format.to_float(rec.priorities)
    beta = cfg.coef_format.to_float(args.beta)
    want = (p.min() / p) ** beta
    assert np.all(np.abs(lw.to_float(rec.loss_weights) - want) <= 2e-5 + lw.ulp)
    td = num.act_format.to_float(rec.td)
    alpha, eps = cfg.coef_format.to_float(args.alpha), cfg.eps_format.to_float(args.eps)
    np.testing.assert_allclose(tc.input_format.to_float(rec.new_priorities),
                               (np.abs(td) + eps) ** alpha, rtol=2e-5, atol=tc.priority_format.ulp)


def test_stratified_fractions_one_per_stratum():
    x = np.array([0, (1 << 32) - 1, 1 << 31, 12345])
    f = stratified_fractions(x, 4, 32)
    F = 1 << 30
    assert list(f // F) == [0, 1, 2, 3] and f[0] == 0 and f[1] == 2 * F - 1
    f = stratified_fractions(np.full(3, (1 << 8) - 1), 3, 8)      # B not a power of two
    assert list(f) == [84, 169, 254] and f.max() < 256
    x = np.array([(1 << 32) - 1, 1 << 31, 0])
    assert list(stratified_fractions(x, 1, 32)) == list(x)        # B = 1: F = 2**32, exact


class FlatSpec:
    """The insert protocol and the delayed write-back of sw.trainer.spec on a flat leaf array,
    written independently of the core (no tree)."""

    def __init__(self, cfg):
        self.cfg, self.leaves = cfg, np.zeros(cfg.capacity, np.int64)
        self.consumed, self.maxp, self.pending = 0, cfg.tree.one_raw, []

    def boundary(self, producer):
        c = self.cfg
        if len(self.pending) > c.delay:
            idx, prio = self.pending.pop(0)
            for i, p in zip(idx, prio):
                if (i - self.consumed) % c.capacity >= c.append_window:
                    self.leaves[i] = min(p, c.tree.priority_format.max_raw)
                    self.maxp = max(self.maxp, self.leaves[i])
        k = min((producer - self.consumed) & 0xFFFFFFFF, c.append_window)
        for j in range(k):
            s = (self.consumed + j) % c.capacity
            self.leaves[s] = self.maxp
            self.leaves[(s + c.append_window) % c.capacity] = 0
        self.consumed += k

    def find(self, targets):
        return np.searchsorted(np.cumsum(self.leaves), targets, side="right")


def test_soak_tree_and_insert_protocol_against_the_flat_spec():
    """10^6 tree operations (samples, write-backs, inserts, evictions) through the core's own
    boundary and sampling, checked against :class:`FlatSpec` step by step."""
    cfg = SMALL
    core, _ = _core(cfg, 0)
    core.begin(_args(cfg, 32, cmd=int(TrainerCmd.CLEAR)))
    flat = FlatSpec(cfg)
    rng = np.random.default_rng(1)
    ops = producer = 0
    B, tc = 32, cfg.tree
    while ops < 1_000_000:
        producer += int(rng.integers(0, 2 * cfg.append_window))   # overruns included
        k = core.boundary(producer)
        flat.boundary(producer)
        producer = flat.consumed                          # the host sees CONSUMED
        assert core.consumed == flat.consumed
        ops += 2 * k + (B if len(core.pending) else 0)
        if core.tree.total == 0:
            continue
        np.testing.assert_array_equal(core.tree.leaves, flat.leaves)
        x = core.tree.prng.fractions(B, bits=tc.target_bits)
        f = stratified_fractions(x, B, tc.target_bits)
        idx, prio = core.tree.sample_fractions(f)
        np.testing.assert_array_equal(idx, flat.find((f * int(flat.leaves.sum())) >> 32))
        new = rng.integers(0, 1 << 20, B) * (rng.random(B) < 0.95)   # zeros and saturation too
        core.pending.append((idx, new))
        flat.pending.append((idx, new))
        ops += B
    core.tree.check_invariants()
    assert core.tree.total == flat.leaves.sum()
    live = np.count_nonzero(flat.leaves)
    assert live <= cfg.capacity - cfg.append_window


def test_overrun_takes_only_the_window_and_is_flagged():
    cfg = SMALL
    core, _ = _core(cfg, 0)
    core.begin(_args(cfg, 8, cmd=int(TrainerCmd.CLEAR)))
    assert core.boundary(cfg.append_window + 5) == cfg.append_window
    assert core.flags["overrun"]
    assert core.consumed == cfg.append_window


def test_clear_and_load():
    cfg = SMALL
    core, ws = _core(cfg, 64)
    core.begin(_args(cfg, 8))
    for a, b in zip(core.weights, ws):
        np.testing.assert_array_equal(a, b)
    core.boundary(64)
    core.step(_args(cfg, 8))
    assert core.steps_total == 1 and core.sampled == 8
    assert core.consumed == cfg.append_window and core.flags["overrun"]     # one window
    core.begin(_args(cfg, 8, cmd=int(TrainerCmd.CLEAR)))
    assert core.tree.total == 0 and core.consumed == core.steps_total == 0
    assert any((a != b).any() for a, b in zip(core.weights, ws))     # CLEAR keeps weights


def test_records_round_trip():
    from sw.trainer.layout import unpack_records
    cfg = SMALL
    rng = np.random.default_rng(3)
    act = cfg.learner.numerics.act_format
    obs = rng.integers(act.min_raw, act.max_raw + 1, (50, 4))
    nxt = rng.integers(act.min_raw, act.max_raw + 1, (50, 4))
    rew = rng.integers(act.min_raw, act.max_raw + 1, 50)
    a, d = rng.integers(0, 2, 50), rng.random(50) < 0.5
    recs = pack_records(cfg, obs, a, rew, nxt, d)
    assert recs.shape == (50, record_bytes(cfg))
    for got, want in zip(unpack_records(cfg, recs), (obs, a, rew, nxt, d)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kw,match", [
    (dict(append_window=0), "append_window"), (dict(delay=5), "delay"),
    (dict(storage_width=96), "storage_width"), (dict(trace_depth=3), "trace_depth"),
    (dict(learner=LearnerConfig(loss="mse")), "learner.loss"),
    (dict(learner=LearnerConfig(optimizer="adam")), "learner.optimizer"),
    (dict(tree=SumTreeConfig(capacity=1024, max_batch=8)), "tree.max_batch"),
    (dict(eps_frac=4), "eps_frac"), (dict(learner="x"), "learner must be"),
    (dict(tree=SumTreeConfig(capacity=3000, max_batch=64)), "power of two"),
])
def test_config_errors_name_the_parameter(kw, match):
    with pytest.raises(ValueError, match=match):
        TrainerConfig(**kw)


def test_config_round_trip():
    cfg = SMALL
    assert TrainerConfig.from_dict(cfg.to_dict()) == cfg
