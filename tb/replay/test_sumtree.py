"""K-ary sum tree: config validation, golden models against the flat specification, PRNG, soak.

Everything here is numpy only (no RTL yet); the RTL tests will compare against
:class:`sw.replay.sumtree.FixedSumTree` directly.
"""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sw.replay.spec import XORSHIFT32_ZERO_SEED, SumTreeConfig
from sw.replay.spec import tree_shape
from sw.replay.sumtree import (FixedSumTree, SumTree, Xorshift32, aligned_zeros, fixed_targets,
                               prefix_sum_index, xorshift32)

SEED = 20261122
SMALL = dict(fanout=4, capacity=1000, priority_width=20, priority_frac=8, input_guard_bits=4)


# -- config ----------------------------------------------------------------------------------------
def test_config_defaults():
    c = SumTreeConfig()
    assert c.levels == 5 and c.fanout ** c.levels == c.capacity
    assert c.level_widths == (52, 48, 44, 40, 36, 32)
    assert c.level_depths == (1, 16, 256, 4096, 65536, 1 << 20)
    assert c.input_width == 40 and c.index_width == 20 and c.one_raw == 1 << 16
    assert all(f.frac == 16 and not f.signed for f in c.level_formats)
    assert SumTreeConfig.from_dict(c.to_dict()) == c


def test_config_matches_cf22_hls_integer_bits():
    # CF'22's HLS code, K=4 and three levels below the root: ap_fixed<32, 26/24/22/20>.
    c = SumTreeConfig(fanout=4, capacity=64, priority_width=32, priority_frac=12)
    assert c.level_int_bits == (26, 24, 22, 20)
    assert c.level_widths == (38, 36, 34, 32)     # same fraction on every level: exact sums


@pytest.mark.parametrize("fanout, capacity", [(2, 1), (4, 17), (16, 1000), (64, 1 << 20),
                                              (8, 4096), (2, 3)])
def test_tree_shape(fanout, capacity):
    levels, depths = tree_shape(fanout, capacity)
    assert fanout ** levels >= capacity and (levels == 1 or fanout ** (levels - 1) < capacity)
    assert depths[0] == 1 and depths[-1] >= capacity
    for l in range(1, levels + 1):
        used_parent = -(-capacity // fanout ** (levels - l + 1))
        assert depths[l] == fanout * used_parent
    c = SumTreeConfig(fanout=fanout, capacity=capacity, priority_width=16, priority_frac=4)
    assert (c.levels, c.level_depths) == (levels, depths)
    assert c.level_nodes[-1] == capacity and c.level_nodes[0] == 1


BAD_CONFIGS = [
    (dict(fanout=3), r"fanout must be a power of two in 2\.\.64, not 3"),
    (dict(fanout=128), r"fanout must be a power of two in 2\.\.64, not 128"),
    (dict(fanout=True), r"fanout must be a power of two in 2\.\.64, not True"),
    (dict(capacity=0), r"capacity must be an integer in 1\.\.1048576, not 0"),
    (dict(capacity=(1 << 20) + 1), r"capacity must be an integer in 1\.\.1048576, not 1048577"),
    (dict(capacity=10.0), r"capacity must be an integer in 1\.\.1048576, not 10\.0"),
    (dict(priority_width=1), r"priority_width must be an integer in 2\.\.56, not 1"),
    (dict(priority_frac=32), r"priority_frac must be an integer in 0\.\.31, not 32"),
    (dict(priority_frac=-1), r"priority_frac must be an integer in 0\.\.31, not -1"),
    (dict(input_guard_bits=17), r"input_guard_bits must be an integer in 0\.\.16, not 17"),
    (dict(target_bits=0), r"target_bits must be an integer in 1\.\.32, not 0"),
    (dict(target_bits=33), r"target_bits must be an integer in 1\.\.32, not 33"),
    (dict(max_batch=0), r"max_batch must be an integer in 1\.\.65536, not 0"),
    (dict(rounding="nearest"), r"rounding must be one of half_up, half_even, floor, "
                               r"not 'nearest'"),
    (dict(fanout=2, priority_width=48), r"root word of 68 bits \(priority_width 48 \+ "
                                        r"log2\(fanout\) 1 x 20 levels\) exceeds 62"),
]


@pytest.mark.parametrize("params, match", BAD_CONFIGS)
def test_config_rejects(params, match):
    with pytest.raises(ValueError, match=match):
        SumTreeConfig(**params)


def test_config_rejects_wide_input():
    with pytest.raises(ValueError, match=r"priority_width \+ input_guard_bits must be at most "
                                         r"62, not 64"):
        SumTreeConfig(fanout=2, capacity=2, priority_width=56, input_guard_bits=8)


def test_config_from_dict_unknown():
    with pytest.raises(ValueError, match=r"unknown sum tree parameter\(s\): depth, k"):
        SumTreeConfig.from_dict({"k": 4, "depth": 3})


# -- golden model: bad arguments -------------------------------------------------------------------
def test_golden_rejects():
    with pytest.raises(ValueError, match=r"fanout must be a power of two in 2\.\.64, not 5"):
        SumTree(fanout=5, capacity=10)
    with pytest.raises(ValueError, match=r"capacity must be a positive integer, not 0"):
        SumTree(fanout=4, capacity=0)
    with pytest.raises(TypeError, match=r"config must be a SumTreeConfig, not dict"):
        FixedSumTree({"fanout": 4})
    t = FixedSumTree(SumTreeConfig(**SMALL, max_batch=8))
    with pytest.raises(ValueError, match=r"indices must be in 0\.\.999"):
        t.update([1000], [1])
    with pytest.raises(ValueError, match=r"indices must be integers, not float64"):
        t.get([1.0])
    with pytest.raises(ValueError, match=r"indices and priorities must have one length, "
                                         r"not 2 and 1"):
        t.update([1, 2], [3])
    with pytest.raises(ValueError, match=r"priorities must be raw uQ16\.8/half_up integers "
                                         r"in 0\.\.16777215"):
        t.update([1], [1 << 24])
    with pytest.raises(ValueError, match=r"priorities must be raw uQ16\.8/half_up integers"):
        t.update([1], [-1])
    with pytest.raises(ValueError, match=r"priorities must be raw integers, not float64"):
        t.update([1], [0.5])
    with pytest.raises(ValueError, match=r"update batch of 9 exceeds max_batch 8"):
        t.update(np.arange(9), np.ones(9, dtype=np.int64))
    t.update([3], [5])
    with pytest.raises(ValueError, match=r"sample batch of 9 exceeds max_batch 8"):
        t.sample(9)
    with pytest.raises(ValueError, match=r"x_raw must be integers in 0\.\.4294967295"):
        t.sample_fractions([1 << 32])
    with pytest.raises(ValueError, match=r"targets must be in \[0, total\) = \[0, 5\)"):
        t.find([5])
    with pytest.raises(ValueError, match=r"give exactly one of count and priorities"):
        t.insert(3, priorities=[1, 2, 3])
    with pytest.raises(ValueError, match=r"seed must be an integer in 0\.\.4294967295, not -1"):
        t.prng.seed(-1)
    i = SumTree(fanout=4, capacity=10, dtype=np.int64)
    with pytest.raises(ValueError, match=r"priorities must be integers, not float64"):
        i.update([0], [1.5])
    i.update([0, 9], [(1 << 60) + 1, 3])                # integer trees are exact
    assert i.total == (1 << 60) + 4
    f = SumTree(fanout=4, capacity=10)
    with pytest.raises(ValueError, match=r"priorities must be finite and non-negative"):
        f.update([0], [np.nan])
    with pytest.raises(ValueError, match=r"priorities must be finite and non-negative"):
        f.update([0], [-1.0])
    with pytest.raises(ValueError, match=r"x must be in \[0, 1\)"):
        f.sample_fractions([1.0])


# -- layout ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("fanout", [2, 4, 8, 16, 32, 64])
def test_cache_aligned_layout(fanout):
    t = SumTree(fanout=fanout, capacity=3000)
    assert t.flat.ctypes.data % 64 == 0
    assert all(o % fanout == 0 for o in t.level_offsets)
    assert t.level_offsets[1] == fanout                  # root padded to a full group
    rng = np.random.default_rng(SEED)
    t.update(np.arange(3000), rng.random(3000))
    for l, (off, lvl) in enumerate(zip(t.level_offsets, t.levels)):
        assert np.array_equal(t.flat[off:off + len(lvl)], lvl)
        if l:                                            # each sibling group fills cache lines
            assert (t.flat[off:].ctypes.data - t.flat.ctypes.data) % (8 * fanout) == 0
    assert all(len(l) == d for l, d in zip(t.levels, tree_shape(fanout, 3000)[1]))
    assert aligned_zeros(5, np.int64, align=128).ctypes.data % 128 == 0


# -- PRNG ------------------------------------------------------------------------------------------
def test_xorshift32_known_answers():
    # Marsaglia's xorshift32 (13, 17, 5) from state 1.
    s, out = 1, []
    for _ in range(3):
        s = xorshift32(s)
        out.append(s)
    assert out == [270369, 67634689, 2647435461]
    assert Xorshift32(0).state == XORSHIFT32_ZERO_SEED
    assert xorshift32(0) == 0                             # why seed 0 is replaced


@pytest.mark.parametrize("n", [0, 1, 2, 3, 17, 192, 193, 1000, 4096])
def test_xorshift32_vectorised_matches_scalar(n):
    g = Xorshift32(SEED)
    g.words(5)
    s = g.state
    ref = []
    for _ in range(n):
        s = xorshift32(s)
        ref.append(s)
    assert g.words(n).tolist() == ref and g.state == s
    g2 = Xorshift32(7)
    x = g2.fractions(n, bits=12)
    s = 7
    for i in range(n):
        s = xorshift32(s)
        assert x[i] == s >> 20


# -- targets ---------------------------------------------------------------------------------------
@settings(max_examples=300, deadline=None)
@given(root=st.integers(0, (1 << 62) - 1), bits=st.integers(1, 32), data=st.data())
def test_fixed_targets_exact(root, bits, data):
    xs = data.draw(st.lists(st.integers(0, (1 << bits) - 1), min_size=1, max_size=8))
    t = fixed_targets(xs, root, target_bits=bits)
    assert t.tolist() == [(x * root) >> bits for x in xs]
    if root:
        assert (t < root).all()


# -- sampling semantics ----------------------------------------------------------------------------
def _fixed(**kw):
    return FixedSumTree(SumTreeConfig(**{**SMALL, **kw}), seed=SEED)


def test_all_zero_is_flagged_and_draws_nothing():
    t = _fixed()
    t.update([4, 7], [9, 0])
    t.update([4], [0])
    state = t.prng.state
    idx, pri = t.sample(16)
    assert idx.size == 0 and pri.size == 0 and t.empty
    assert t.prng.state == state                          # no PRNG word consumed
    t.clear_flags()
    assert not t.empty
    f = SumTree(fanout=4, capacity=10)
    assert f.sample(3)[0].size == 0 and f.empty


def test_float_sample_is_seeded():
    trees = [SumTree(fanout=8, capacity=100, seed=SEED) for _ in range(2)]
    for t in trees:
        t.update(np.arange(100), np.arange(100) % 7)
    a, b = (t.sample(500) for t in trees)
    assert np.array_equal(a[0], b[0]) and (a[1] > 0).all()
    assert np.array_equal(a[0], prefix_sum_index(np.arange(100) % 7, np.random.default_rng(
        SEED).random(500) * trees[0].total))


@pytest.mark.parametrize("capacity, leaf", [(1000, 0), (1000, 999), (1000, 517), (1, 0)])
def test_single_nonzero_leaf(capacity, leaf):
    t = _fixed(capacity=capacity)
    t.update([leaf], [1])                                 # smallest non-zero priority
    x = np.r_[0, 1, (1 << 32) - 1, t.prng.fractions(500)]
    idx, pri = t.sample_fractions(x)
    assert (idx == leaf).all() and (pri == 1).all()
    f = SumTree(fanout=4, capacity=capacity)
    f.update([leaf], [1e-300])
    idx, _ = f.sample_fractions(np.r_[0.0, 0.5, np.nextafter(1.0, 0)])
    assert (idx == leaf).all()


def test_capacity_one():
    for fanout in (2, 64):
        t = FixedSumTree(SumTreeConfig(fanout=fanout, capacity=1, priority_width=8,
                                       priority_frac=2))
        assert t.n_levels == 1 and t.levels[-1].size == fanout
        assert t.insert(3).tolist() == [0, 0, 0] and t.size == 1 and t.write_pointer == 0
        assert t.total == 4                               # 1.0 = 4 raw
        assert t.sample(5)[0].tolist() == [0] * 5
        t.check_invariants()


def test_zero_leaves_never_sampled_at_boundaries():
    t = _fixed()
    rng = np.random.default_rng(SEED)
    vals = rng.integers(0, 50, 1000) * (rng.random(1000) < 0.3)
    t.update(np.arange(1000), vals)
    cs = np.cumsum(vals)
    targets = np.unique(np.r_[0, cs[cs < cs[-1]], cs[cs < cs[-1]] - 1].clip(0))
    idx, pri = t.find(targets)
    assert (pri > 0).all() and (vals[idx] > 0).all()
    assert np.array_equal(idx, prefix_sum_index(vals, targets))
    # The exact boundary t = S(i) belongs to the next non-zero leaf after i.
    i = int(np.flatnonzero(vals)[0])
    assert t.find([cs[i]])[0][0] == np.flatnonzero(vals)[1]


def test_saturation_at_format_maximum():
    t = _fixed()
    top = t.config.priority_format.max_raw
    t.update([1, 2], [top, top])
    assert not t.saturated                                # the maximum itself is fine
    t.update([3], [top + 1])
    assert t.saturated and t.get([3])[0] == top
    t.clear_flags()
    in_top = t.config.input_format.max_raw
    t.update(np.arange(1000), np.full(1000, in_top))      # every leaf at the maximum
    assert t.saturated and (t.leaves == top).all() and t.max_priority == top
    t.check_invariants()                                  # every level fits its width
    assert t.total == 1000 * top < 1 << t.config.root_width
    idx, pri = t.sample(4096)
    assert (pri == top).all()
    t.clear_flags()
    t.quantize([1e9])
    assert t.saturated


def test_update_batch_with_duplicates_is_sequential():
    t = _fixed()
    t.update([5, 9, 5, 5], [1000, 20, 3000, 4])
    assert t.get([5, 9]).tolist() == [4, 20]
    assert t.max_priority == 3000                         # the overwritten 3000 was still seen
    t.check_invariants()
    assert t.insert(2).tolist() == [0, 1] and t.get([0, 1]).tolist() == [3000, 3000]


def test_insert_fifo_wraps():
    t = _fixed(capacity=10, fanout=2)
    assert t.max_priority == t.config.one_raw
    assert t.insert(4).tolist() == [0, 1, 2, 3]
    assert t.insert(priorities=[700, 800, 900]).tolist() == [4, 5, 6]
    assert t.size == 7 and t.max_priority == 900
    assert t.insert(5).tolist() == [7, 8, 9, 0, 1]
    assert t.size == 10 and t.write_pointer == 2
    assert t.get(np.arange(10)).tolist() == [900, 900, 256, 256, 700, 800, 900, 900, 900, 900]
    assert t.insert(23).tolist() == [(2 + i) % 10 for i in range(23)] and t.write_pointer == 5
    t.set_max_priority(3)
    assert t.insert(1).tolist() == [5] and t.get([5])[0] == 3
    t.check_invariants()


def test_float_overshoot_takes_last_nonzero_child():
    f = SumTree(fanout=4, capacity=16)
    f.update(np.arange(16), np.r_[0.1, 0.2, 0.3, 0.0, np.full(12, 1e-17)])
    idx, pri = f.find([f.total])                          # past every float prefix sum
    assert pri[0] > 0
    f.update(np.arange(4, 16), np.zeros(12))
    assert f.find([f.total])[0][0] == 2


@pytest.mark.parametrize("fanout", [2, 16, 64])
def test_result_does_not_depend_on_batch_size(fanout):
    """Large batches take a different (column-wise) code path with the same additions."""
    rng = np.random.default_rng(SEED)
    f = SumTree(fanout=fanout, capacity=5000)
    f.update(np.arange(5000), rng.exponential(1.0, 5000) * (rng.random(5000) < 0.5))
    f.update(np.arange(0, 5000, 7), rng.random(715) * 1e-12)       # mixed magnitudes
    t = np.r_[rng.random(1500) * f.total, f.total, np.nextafter(f.total, 0)]
    idx, pri = f.find(t)
    parts = [f.find(t[i:i + 100]) for i in range(0, t.size, 100)]
    assert np.array_equal(idx, np.concatenate([p[0] for p in parts]))
    assert np.array_equal(pri, np.concatenate([p[1] for p in parts])) and (pri > 0).all()
    g = SumTree(fanout=fanout, capacity=5000)
    for i in range(0, 5000, 100):                                   # small update batches
        g.update(np.arange(i, i + 100), f.leaves[i:i + 100])
    assert np.array_equal(g.flat, f.flat)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fanout=st.sampled_from([2, 4, 8, 16, 64]), capacity=st.integers(1, 300),
       width=st.integers(2, 24), bits=st.integers(1, 32), data=st.data())
def test_fixed_tree_matches_specification(fanout, capacity, width, bits, data):
    cfg = SumTreeConfig(fanout=fanout, capacity=capacity, priority_width=width,
                        priority_frac=data.draw(st.integers(0, width - 1)), target_bits=bits,
                        input_guard_bits=2, max_batch=512)
    t = FixedSumTree(cfg, seed=data.draw(st.integers(0, 2**32 - 1)))
    seq = FixedSumTree(cfg)
    ops = data.draw(st.lists(st.tuples(
        st.lists(st.integers(0, capacity - 1), min_size=0, max_size=20),
        st.integers(0, cfg.input_format.max_raw)), min_size=1, max_size=6))
    for indices, base in ops:
        vals = [(base * (k + 3)) % (cfg.input_format.max_raw + 1) for k in range(len(indices))]
        t.update(indices, vals)
        for i, v in zip(indices, vals):
            seq.update_sequential(i, v)
        t.check_invariants()
        assert np.array_equal(t.flat, seq.flat)           # batch == sequential delta updates
        assert t.max_priority == seq.max_priority and t.saturated == seq.saturated
    x = t.prng.fractions(64, bits=bits)
    x = np.r_[x, 0, (1 << bits) - 1]
    idx, pri = t.sample_fractions(x)
    if t.total == 0:
        assert idx.size == 0 and t.empty
        return
    assert np.array_equal(idx, prefix_sum_index(t.leaves, t.targets(x)))
    assert (pri > 0).all() and np.array_equal(pri, t.leaves[idx])


@settings(max_examples=40, deadline=None)
@given(fanout=st.sampled_from([2, 4, 16]), capacity=st.integers(1, 200), data=st.data())
def test_float_tree_properties(fanout, capacity, data):
    f = SumTree(fanout=fanout, capacity=capacity)
    vals = data.draw(st.lists(st.floats(0, 1e6, allow_subnormal=True), min_size=capacity,
                              max_size=capacity))
    f.update(np.arange(capacity), vals)
    f.check_invariants()
    xs = data.draw(st.lists(st.floats(0, 1, exclude_max=True), min_size=1, max_size=16))
    idx, pri = f.sample_fractions(xs)
    if f.total == 0:
        assert idx.size == 0
        return
    assert (pri > 0).all()
    ref = prefix_sum_index(vals, np.asarray(xs) * f.total)
    # Away from boundaries the float tree agrees with the flat specification.
    cs = np.cumsum(vals)
    near = np.array([np.min(np.abs(cs - x * f.total)) <= 1e-9 * f.total for x in xs])
    assert np.array_equal(idx[~near], ref[~near])


# -- fixed point versus float ---------------------------------------------------------------------
def test_fixed_and_float_agree_except_near_boundaries():
    rng = np.random.default_rng(SEED)
    n = 3000
    cfg = SumTreeConfig(fanout=8, capacity=n, priority_width=24, priority_frac=12,
                        max_batch=1 << 16)
    p = rng.exponential(2.0, n) * (rng.random(n) < 0.8)
    fx = FixedSumTree(cfg, seed=SEED)
    fx.update(np.arange(n), fx.quantize(p))
    fl = SumTree(fanout=8, capacity=n)
    fl.update(np.arange(n), p)
    x_raw = fx.prng.fractions(1 << 16)
    i_fx, _ = fx.sample_fractions(x_raw)
    i_fl, _ = fl.sample_fractions(x_raw / 2.0 ** 32)
    diff = np.flatnonzero(i_fx != i_fl)
    assert diff.size < 1e-3 * x_raw.size
    # Quantisation moves each prefix sum by at most n/2 ulp, the target by that plus 1 ulp.
    tol = (n + 2) * 2.0 ** -12 + 1e-12 * fl.total
    cs = np.cumsum(p)
    t = x_raw[diff] / 2.0 ** 32 * fl.total
    lo = np.minimum(i_fx[diff], i_fl[diff])
    assert np.all(np.abs(cs[lo] - t) <= tol)


# -- statistics ------------------------------------------------------------------------------------
def _chi2_critical(df, z=3.09):
    """Wilson-Hilferty approximation of the chi-square quantile (z=3.09: p = 0.001)."""
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


def test_sampled_frequencies_follow_priorities():
    rng = np.random.default_rng(SEED)
    cfg = SumTreeConfig(fanout=4, capacity=64, priority_width=16, priority_frac=4)
    t = FixedSumTree(cfg, seed=SEED)
    p = rng.integers(0, 1000, 64) * (rng.random(64) < 0.85)
    t.update(np.arange(64), p)
    counts = np.zeros(64, dtype=np.int64)
    draws = 64 * 4096
    for _ in range(64):
        idx, _ = t.sample(4096)
        counts += np.bincount(idx, minlength=64)
    assert counts[p == 0].sum() == 0
    nz = p > 0
    expected = draws * p[nz] / p.sum()
    chi2 = float(((counts[nz] - expected) ** 2 / expected).sum())
    df = int(nz.sum()) - 1
    assert chi2 < _chi2_critical(df), (chi2, df)
    # And the test has power: frequencies of a uniform sampler would fail it.
    uniform = np.bincount(rng.integers(0, 64, draws), minlength=64)
    assert float(((uniform[nz] - expected) ** 2 / expected).sum()) > _chi2_critical(df)


# -- soak ------------------------------------------------------------------------------------------
def test_soak_million_operations():
    """>= 10**6 random operations (updates with duplicates, inserts, samples, reads) on the fixed
    tree, with the float tree shadowing it, checked against a sequential reference after every
    step."""
    rng = np.random.default_rng(SEED)
    cfg = SumTreeConfig(**SMALL, max_batch=4096)
    t = FixedSumTree(cfg, seed=SEED)
    f = SumTree(fanout=cfg.fanout, capacity=cfg.capacity)
    ref = np.zeros(cfg.capacity, dtype=np.int64)
    top, in_top = cfg.priority_format.max_raw, cfg.input_format.max_raw
    ops = ptr = 0
    while ops < 1_000_000:
        n_upd = int(rng.integers(1, 2000))
        idx = rng.integers(0, cfg.capacity, n_upd)
        vals = rng.integers(0, 1 << int(rng.integers(1, cfg.input_width + 1)), n_upd)
        vals[rng.random(n_upd) < 0.2] = 0
        t.update(idx, vals)
        f.update(idx, t.to_float(np.minimum(vals, top)))
        for i, v in zip(idx.tolist(), np.minimum(vals, top).tolist()):
            ref[i] = v
        n_ins = int(rng.integers(0, 300))
        slots = t.insert(n_ins)
        f.insert(priorities=t.to_float(t.get(slots)))
        ref[(ptr + np.arange(n_ins)) % cfg.capacity] = t.max_priority
        ptr = (ptr + n_ins) % cfg.capacity
        assert np.array_equal(t.leaves, ref) and np.array_equal(f.leaves, t.to_float(ref))
        t.check_invariants()
        f.check_invariants()
        n_smp = int(rng.integers(1, 4096))
        if rng.random() < 0.5:                            # host-supplied targets
            x = rng.integers(0, 1 << 32, n_smp)
            idx_s, pri = t.sample_fractions(x)
        else:                                             # on-chip PRNG
            x = Xorshift32(t.prng.state).fractions(n_smp) if ref.sum() else np.zeros(0, int)
            idx_s, pri = t.sample(n_smp)
        if ref.sum() == 0:
            assert idx_s.size == 0
        else:
            assert np.array_equal(idx_s, prefix_sum_index(ref, fixed_targets(
                x, int(ref.sum()), target_bits=32)))
            assert (pri > 0).all()
            fi, fp = f.sample_fractions(x / 2.0 ** 32)
            assert (fp > 0).all()
        n_get = int(rng.integers(0, 600))
        gi = rng.integers(0, cfg.capacity, n_get)
        assert np.array_equal(t.get(gi), ref[gi])
        ops += n_upd + n_ins + n_smp + n_get
    assert t.saturated and ops >= 1_000_000
