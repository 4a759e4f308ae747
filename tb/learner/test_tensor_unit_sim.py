"""Tensor unit in Amaranth's simulator (fast tier): tiny arrays (1×1 to 3×2), every rounding
mode, random idles and back-pressure, against the bit-exact golden model; exact cycle counts."""

import numpy as np
import pytest

from rtl_gen.learner import TensorUnit
from sw.learner.spec import TensorUnitConfig
from sw.learner.gemm import TensorUnitModel, gemm_cycles, gemm_fixed, schedule, tile_stream, untile
from tensor_unit_sim import simulate


def random_operands(cfg, rng, M, K, N, scale=0.5):
    a = rng.integers(int(cfg.a_format.min_raw * scale), int(cfg.a_format.max_raw * scale) + 1,
                     (M, K))
    b = rng.integers(int(cfg.b_format.min_raw * scale), int(cfg.b_format.max_raw * scale) + 1,
                     (K, N))
    return a, b


def small_cfg(rows, cols, **kw):
    base = dict(rows=rows, cols=cols, in_width=8, a_frac=4, b_frac=5, acc_width=20,
                out_width=10, out_frac=5, max_k=64)
    return TensorUnitConfig(**(base | kw))


def check_beats(got, expect):
    for f in ("c", "overflow", "last"):
        np.testing.assert_array_equal(got[f], expect[f], err_msg=f)


# (rows, cols): 1×1, 2×2, 3×2, 2×3; shapes smaller than, equal to and larger than the array,
# non-multiples, K below and above R.
SHAPES = [(1, 1, 1), (2, 3, 2), (3, 1, 2), (5, 7, 3), (4, 2, 5), (7, 9, 4)]


@pytest.mark.parametrize("rows,cols", [(1, 1), (2, 2), (3, 2), (2, 3)])
@pytest.mark.parametrize("rounding", ["half_up", "half_even", "floor"])
def test_gemm_matches_golden_under_backpressure(rows, cols, rounding):
    cfg = small_cfg(rows, cols, rounding=rounding)
    rng = np.random.default_rng(100 * rows + 10 * cols + len(rounding))
    parts, cases = [], []
    for M, K, N in SHAPES:
        a, b = random_operands(cfg, rng, M, K, N)
        stream, tiles = tile_stream(a, b, cfg)
        parts.append(stream)
        cases.append((a, b, tiles))
    stream = {f: np.concatenate([p[f] for p in parts]) for f in parts[0]}
    model = TensorUnitModel(cfg)
    expect = model.run(stream["a"], stream["b"], stream["last"])
    got, _, _, sticky, k_sticky = simulate(cfg, stream, idle=0.3, stall=0.3, seed=rows + cols)
    check_beats(got, expect)
    assert (sticky, k_sticky) == (int(model.sticky_overflow), 0)
    # Reassembled per GEMM, the beats equal the vectorised golden GEMM.
    start = 0
    for a, b, tiles in cases:
        n = len(tiles) * rows
        part = {f: got[f][start:start + n] for f in got}
        out, _ = untile(part, tiles, a.shape[0], b.shape[1], cfg)
        np.testing.assert_array_equal(out, gemm_fixed(a, b, cfg))
        start += n


@pytest.mark.parametrize("rows,cols,M,K,N", [
    (2, 2, 4, 6, 4),      # K ≥ R: compute-bound, back to back
    (3, 2, 6, 1, 4),      # K = 1 < R: each tile waits for the drain
    (3, 2, 7, 5, 3),      # non-multiples
    (2, 3, 2, 2, 3),      # one tile, K = R
])
def test_cycles_match_the_model(rows, cols, M, K, N):
    cfg = small_cfg(rows, cols)
    a, b = random_operands(cfg, np.random.default_rng(M * K * N), M, K, N)
    stream, tiles = tile_stream(a, b, cfg)
    got, cin, cout, _, _ = simulate(cfg, stream)
    exp_in, exp_out = schedule(stream["last"], cfg)
    np.testing.assert_array_equal(cin - cin[0], exp_in)
    np.testing.assert_array_equal(cout - cin[0], exp_out)
    assert cout[-1] - cin[0] + 1 == gemm_cycles(M, K, N, cfg)
    out, _ = untile(got, tiles, M, N, cfg)
    np.testing.assert_array_equal(out, gemm_fixed(a, b, cfg))


@pytest.mark.parametrize("rows,cols", [(2, 2), (3, 2)])
def test_utilisation_at_four_times_the_array(rows, cols):
    """M, K, N ≥ 4× the array: at least 90 % of the MAC cycles are useful, counted in cycles."""
    cfg = small_cfg(rows, cols)
    M, K, N = 4 * rows, 4 * max(rows, cols), 4 * cols
    a, b = random_operands(cfg, np.random.default_rng(rows), M, K, N)
    stream, tiles = tile_stream(a, b, cfg)
    got, cin, cout, _, _ = simulate(cfg, stream)
    cycles = cout[-1] - cin[0] + 1
    assert cycles == gemm_cycles(M, K, N, cfg)
    assert M * K * N / (rows * cols * cycles) >= 0.90
    np.testing.assert_array_equal(untile(got, tiles, M, N, cfg)[0], gemm_fixed(a, b, cfg))


def test_preload_accumulates_into_c():
    cfg = small_cfg(3, 2)
    rng = np.random.default_rng(7)
    a, b = random_operands(cfg, rng, 5, 4, 3)
    c0 = rng.integers(-100, 101, (5, 3))
    stream, tiles = tile_stream(a, b, cfg, c=c0)
    got, cin, cout, _, _ = simulate(cfg, stream, idle=0.2, stall=0.2, seed=3)
    out, _ = untile(got, tiles, 5, 3, cfg)
    expect = gemm_fixed(a, b, cfg, c=c0)
    np.testing.assert_array_equal(out, expect)
    # Exactly one rounding away from the real value.
    real = cfg.out_format.to_float(c0) + cfg.a_format.to_float(a) @ cfg.b_format.to_float(b)
    assert np.abs(cfg.out_format.to_float(expect) - real).max() <= cfg.out_format.ulp / 2


def test_saturation_flags_and_k_overflow():
    cfg = small_cfg(2, 2, acc_width=16, max_k=3)
    top = cfg.a_format.max_raw
    a = np.full((2, 6), top)
    b = np.full((6, 2), top)
    b[:, 1] = -top
    # Tile 1: K = 6 > max_k in one reduction (no chunking: a raw stream) -> k_overflow and
    # accumulator saturation; tile 2: small values, no flags.
    stream = {"a": np.concatenate([a.T, np.ones((2, 2), np.int64)]),
              "b": np.concatenate([b, np.ones((2, 2), np.int64)]),
              "last": np.array([0, 0, 0, 0, 0, 1, 0, 1], bool)}
    model = TensorUnitModel(cfg)
    expect = model.run(stream["a"], stream["b"], stream["last"])
    got, _, _, sticky, k_sticky = simulate(cfg, stream)
    check_beats(got, expect)
    assert expect["overflow"][:2].all() and not expect["overflow"][2:].any()
    assert got["c"][0, 0] == cfg.out_format.max_raw and got["c"][0, 1] == cfg.out_format.min_raw
    assert sticky == 1 and k_sticky == 1 and model.sticky_k_overflow


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")  # refused, never elaborated
@pytest.mark.usefixtures("collect_components")
def test_rejects_bad_config():
    with pytest.raises(TypeError, match="config must be a TensorUnitConfig"):
        TensorUnit({"rows": 2})
