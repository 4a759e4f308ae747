"""Golden GEMM model and tiler: against float, across array sizes, chunking, preloading, the
cycle model, and the parameter checks of the tensor unit configuration."""

import itertools

import numpy as np
import pytest

from sw.learner.spec import LearnerNumerics, TensorUnitConfig
from sw.learner.gemm import (TensorUnitModel, accumulate, chunk_lengths, gemm_cycles, gemm_fixed,
                             gemm_float, ideal_cycles, mac_utilisation, schedule, stream_cycles,
                             tile_stream, untile)


def operands(cfg, rng, M, K, N, scale=1.0):
    a = cfg.a_format.quantize(rng.normal(0, scale, (M, K)))
    b = cfg.b_format.quantize(rng.normal(0, scale, (K, N)))
    return a, b


def via_stream(a, b, cfg, c=None):
    stream, tiles = tile_stream(a, b, cfg, c=c)
    beats = TensorUnitModel(cfg).run(stream["a"], stream["b"], stream["last"])
    return untile(beats, tiles, a.shape[0], b.shape[1], cfg)[0]


@pytest.mark.parametrize("rounding", ["half_up", "half_even", "floor"])
def test_gemm_is_one_rounding_from_float(rounding):
    cfg = TensorUnitConfig(rows=4, cols=4, in_width=16, a_frac=10, b_frac=12, acc_width=48,
                           out_width=20, out_frac=12, rounding=rounding)
    rng = np.random.default_rng(1)
    a, b = operands(cfg, rng, 13, 300, 9)
    out, ovf = gemm_fixed(a, b, cfg, return_overflow=True)
    assert not ovf.any()
    err = np.abs(cfg.out_format.to_float(out) - gemm_float(a, b, cfg))
    assert err.max() <= cfg.out_format.ulp * (1.0 if rounding == "floor" else 0.5)


SHAPES = [(1, 1, 1), (3, 5, 2), (8, 8, 8), (9, 17, 7), (16, 3, 24), (20, 40, 11)]


@pytest.mark.parametrize("M,K,N", SHAPES)
def test_tiled_stream_equals_gemm_and_ignores_array_size(M, K, N):
    rng = np.random.default_rng(M * 1000 + K * 10 + N)
    ref = None
    for rows, cols in [(1, 1), (2, 3), (4, 4), (8, 8), (3, 16)]:
        cfg = TensorUnitConfig(rows=rows, cols=cols, in_width=12, a_frac=6, b_frac=8,
                               acc_width=28, out_width=12, out_frac=6)
        if ref is None:
            a, b = operands(cfg, rng, M, K, N, scale=2.0)
            ref = gemm_fixed(a, b, cfg)
        np.testing.assert_array_equal(via_stream(a, b, cfg), ref)
        np.testing.assert_array_equal(gemm_fixed(a, b, cfg), ref)


def test_chunked_k_and_preload():
    """K > max_k: chunk results added on the host, in the output format, with saturation."""
    cfg = TensorUnitConfig(rows=3, cols=2, in_width=10, a_frac=5, b_frac=5, acc_width=24,
                           out_width=14, out_frac=6, max_k=7)
    rng = np.random.default_rng(5)
    a, b = operands(cfg, rng, 5, 23, 4)
    assert chunk_lengths(23, cfg) == [7, 7, 7, 2]
    assert chunk_lengths(23, cfg, preload=True) == [4, 7, 7, 5]
    out = gemm_fixed(a, b, cfg)
    np.testing.assert_array_equal(via_stream(a, b, cfg), out)
    # Per chunk: one rounding each, so at most 4 half-ulps from the real value.
    err = np.abs(cfg.out_format.to_float(out) - gemm_float(a, b, cfg))
    assert err.max() <= 4 * cfg.out_format.ulp / 2
    c0 = rng.integers(-300, 300, (5, 4))
    outc = gemm_fixed(a, b, cfg, c=c0)
    np.testing.assert_array_equal(via_stream(a, b, cfg, c=c0), outc)
    err = np.abs(cfg.out_format.to_float(outc) - gemm_float(a, b, cfg, c=c0))
    assert err.max() <= 4 * cfg.out_format.ulp / 2


def test_accumulator_saturates_in_order():
    cfg = TensorUnitConfig(rows=2, cols=2, in_width=8, a_frac=0, b_frac=0, acc_width=16,
                           out_width=16, out_frac=0)
    top = cfg.acc_format.max_raw
    a = np.array([[127, 127, 127, -127]])
    b = np.array([[127], [127], [127], [127]])
    # 3 * 16129 = 48387 saturates at 32767, then -16129 -> 16638 (not 32258).
    acc, ovf = accumulate(a, b, cfg)
    assert acc[0, 0] == top - 127 * 127 and ovf[0, 0]
    out, o = gemm_fixed(a, b, cfg, return_overflow=True)
    assert out[0, 0] == top - 127 * 127 and o[0, 0]
    np.testing.assert_array_equal(via_stream(a, b, cfg), out)


@pytest.mark.parametrize("rows,cols", [(1, 1), (2, 2), (3, 2), (4, 4), (8, 8), (16, 16)])
def test_cycle_formula(rows, cols):
    cfg = TensorUnitConfig(rows=rows, cols=cols, max_k=50)
    for M, K, N in itertools.product((1, rows, 2 * rows + 1), (1, rows - 1 or 1, 3 * rows, 120),
                                     (1, cols, 3 * cols - 1)):
        a = np.zeros((M, K), np.int64)
        b = np.zeros((K, N), np.int64)
        stream, tiles = tile_stream(a, b, cfg)
        cin, cout = schedule(stream["last"], cfg)
        lengths = [int(n) for n in np.diff(np.flatnonzero(np.r_[True, stream["last"]]))]
        assert cout[-1] + 1 == stream_cycles(lengths, cfg) == gemm_cycles(M, K, N, cfg)
        if K <= cfg.max_k:
            T = -(-M // rows) * -(-N // cols)
            assert gemm_cycles(M, K, N, cfg) == \
                (K - 1) + (T - 1) * max(K, rows) + (rows + cols + 3) + rows
        assert len(cout) == rows * len(tiles)


@pytest.mark.parametrize("rows,cols", [(2, 2), (4, 4), (8, 8), (16, 16), (8, 16)])
def test_utilisation_at_four_times_the_array(rows, cols):
    cfg = TensorUnitConfig(rows=rows, cols=cols)
    for f in (4, 5, 8):
        M, K, N = f * rows, f * max(rows, cols), f * cols
        util = mac_utilisation(M, K, N, cfg)
        assert util >= 0.90, (M, K, N, util)
        # Ideal plus fill/drain, exactly.
        assert gemm_cycles(M, K, N, cfg) == ideal_cycles(M, K, N, cfg) + 2 * rows + cols + 2


def test_bad_shapes_raise():
    cfg = TensorUnitConfig(rows=2, cols=2)
    a = np.zeros((3, 4), np.int64)
    with pytest.raises(ValueError, match="inner dimensions differ: a is 3 × 4, b is 5 × 2"):
        gemm_fixed(a, np.zeros((5, 2), np.int64), cfg)
    with pytest.raises(ValueError, match="must be 2-D"):
        gemm_fixed(a[0], np.zeros((4, 2), np.int64), cfg)
    with pytest.raises(ValueError, match="M, K and N must be at least 1"):
        gemm_fixed(np.zeros((3, 0), np.int64), np.zeros((0, 2), np.int64), cfg)
    with pytest.raises(ValueError, match="raw integer arrays"):
        gemm_fixed(a.astype(float), np.zeros((4, 2)), cfg)
    with pytest.raises(ValueError, match=r"a must be raw sQ8.8/half_up integers"):
        gemm_fixed(a + 40000, np.zeros((4, 2), np.int64), cfg)
    with pytest.raises(ValueError, match=r"c must have shape \(3, 2\)"):
        gemm_fixed(a, np.zeros((4, 2), np.int64), cfg, c=np.zeros((2, 2), np.int64))
    with pytest.raises(ValueError, match="M must be a positive integer, not 0"):
        gemm_cycles(0, 1, 1, cfg)
    with pytest.raises(ValueError, match="lengths must be positive integers"):
        stream_cycles([3, 0], cfg)
    with pytest.raises(TypeError, match="config must be a TensorUnitConfig"):
        gemm_fixed(a, np.zeros((4, 2), np.int64), {"rows": 2})
    small = TensorUnitConfig(rows=4, cols=2, max_k=4)
    with pytest.raises(ValueError, match=r"max_k \(4\) must exceed rows \(4\) to preload c"):
        gemm_fixed(a, np.zeros((4, 2), np.int64), small, c=np.zeros((3, 2), np.int64))
    wide = TensorUnitConfig(rows=2, cols=2, out_width=20)
    with pytest.raises(ValueError, match="c must fit the 16-bit B operand"):
        gemm_fixed(a, np.zeros((4, 2), np.int64), wide, c=np.full((3, 2), 40000))


@pytest.mark.parametrize("params,message", [
    ({"rows": 0}, "rows must be an integer in 1..64, not 0"),
    ({"cols": 65}, "cols must be an integer in 1..64, not 65"),
    ({"rows": 2.0}, "rows must be an integer in 1..64, not 2.0"),
    ({"in_width": 25}, "in_width must be an integer in 2..24, not 25"),
    ({"a_frac": 16}, "a_frac must be an integer in 0..15, not 16"),
    ({"acc_width": 31}, "acc_width must be an integer in 32..56, not 31"),
    ({"out_width": 40}, "out_width must be an integer in 2..32, not 40"),
    ({"out_frac": 17}, "out_frac must be an integer in 0..16, not 17"),
    ({"rounding": "up"}, "rounding must be one of half_up, half_even, floor, not 'up'"),
    ({"max_k": 0}, "max_k must be an integer in 1..1048576, not 0"),
    ({"max_k": True}, "max_k must be an integer in 1..1048576, not True"),
])
def test_config_validation(params, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        TensorUnitConfig(**params)


def test_config_dict_round_trip_and_derived():
    cfg = TensorUnitConfig(rows=4, cols=3, a_frac=7, b_frac=9, out_frac=10)
    assert TensorUnitConfig.from_dict(cfg.to_dict()) == cfg
    assert cfg.shift == 6 and cfg.latency == 4 + 3 + 3 and cfg.macs == 12
    assert TensorUnitConfig(acc_width=32).exact_k == 1
    assert TensorUnitConfig(acc_width=40).exact_k == 511
    assert TensorUnitConfig(acc_width=48).exact_k == 131071
    with pytest.raises(ValueError, match="unknown tensor unit parameter"):
        TensorUnitConfig.from_dict({"rows": 2, "depth": 3})


def test_learner_numerics_validation():
    num = LearnerNumerics()
    assert num.n_layers == 3 and num.weight_shapes() == [(5, 64), (65, 64), (65, 2)]
    assert LearnerNumerics.from_dict(num.to_dict()) == num
    assert num.tensor_unit("wa").out_width == num.acc_width
    with pytest.raises(ValueError, match="kind must be one of fw, bw, wa, not 'xx'"):
        num.tensor_unit("xx")
    with pytest.raises(ValueError, match="sizes must be a tuple of 2..8 integers"):
        LearnerNumerics(sizes=(4,))
    with pytest.raises(ValueError, match="act_frac must be an integer in 0..14, not 15"):
        LearnerNumerics(act_frac=15)
    with pytest.raises(ValueError, match="lr_frac \\+ act_frac \\+ grad_frac must be at least"):
        LearnerNumerics(lr_frac=0, act_frac=2, grad_frac=2, weight_frac=13)
