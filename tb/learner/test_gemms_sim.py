"""The GEMMs of a real training step (FW X·W, BW δ·Wᵀ, WA Xᵀ·δ), streamed through the tensor
unit RTL in Amaranth's simulator, equal the intermediates of :func:`sw.learner.mlp.train_step`:
the transposes are only stream orders, and the RTL computes the step's numbers bit for bit."""

import numpy as np
import pytest

from sw.learner.spec import LearnerNumerics
from sw.learner.gemm import tile_stream, untile
from sw.learner.mlp import init_weights, quantize_coef, train_step
from tensor_unit_sim import simulate


@pytest.fixture(scope="module")
def step():
    num = LearnerNumerics(sizes=(4, 7, 5, 2))
    rng = np.random.default_rng(11)
    act = num.act_format
    B = 6
    w = init_weights(num, rng)
    wt = init_weights(num, rng)
    res = train_step(w, act.quantize(rng.normal(0, 1, (B, 4))), num,
                     lr=quantize_coef(0.05 * 2 / B, num.lr_format, "eta"),
                     actions=rng.integers(0, 2, B), rewards=act.quantize(np.ones(B)),
                     dones=rng.random(B) < 0.2, next_obs=act.quantize(rng.normal(0, 1, (B, 4))),
                     target_weights=wt, gamma=quantize_coef(0.99, num.coef_format, "gamma"))
    assert not res.any_overflow
    return num, w, res


def run_on_rtl(cfg, gemms):
    """Stream several GEMMs back to back through one unit; return the reassembled results."""
    parts, metas = [], []
    for a, b in gemms:
        stream, tiles = tile_stream(a, b, cfg)
        parts.append(stream)
        metas.append((tiles, a.shape[0], b.shape[1]))
    stream = {f: np.concatenate([p[f] for p in parts]) for f in parts[0]}
    beats, _, _, _, _ = simulate(cfg, stream)
    out, start = [], 0
    for tiles, M, N in metas:
        n = len(tiles) * cfg.rows
        out.append(untile({f: beats[f][start:start + n] for f in beats}, tiles, M, N, cfg)[0])
        start += n
    return out


@pytest.mark.parametrize("kind", ["fw", "bw", "wa"])
def test_training_step_gemms_on_rtl(step, kind):
    num, w, res = step
    cfg = num.tensor_unit(kind, rows=3, cols=2)
    L = num.n_layers
    if kind == "fw":
        gemms = [(res.inputs[l], w[l]) for l in range(L)]
        expect = res.pre
    elif kind == "bw":
        gemms = [(res.deltas[l], w[l][:-1].T) for l in range(L - 1, 0, -1)]
        expect = [res.bw[l - 1] for l in range(L - 1, 0, -1)]
    else:
        gemms = [(res.inputs[l].T, res.deltas[l]) for l in range(L)]
        expect = res.grads
    for got, exp in zip(run_on_rtl(cfg, gemms), expect):
        np.testing.assert_array_equal(got, exp)
