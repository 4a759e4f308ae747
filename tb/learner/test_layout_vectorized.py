"""sw.learner.layout: the matrix and samples images built with numpy
(:mod:`sw.packing`), bit for bit against the per-lane loops they replaced (kept here as the
slow reference), on the shipped learner and on lanes that are not whole bytes (12-bit data,
24-bit gradients, 18/15-bit samples), partial row groups, one sample, extreme values."""

import numpy as np
import pytest

from sw.learner import layout
from sw.learner.spec import LearnerConfig
from sw.registry import shipped_config


# -- the reference: the per-lane implementation --------------------------------------------------
def _to_bytes(config, name, words):
    nb = layout.word_bytes(config, name)
    return b"".join(int(x).to_bytes(nb, "little") for x in words)


def ref_pack_matrix(config, name, x):
    r = layout.region(config, name)
    S, lb = config.array, r.lane_bits
    rg, G = config.groups(x.shape[0]), r.col_groups(config)
    pad = np.zeros((rg * S, G * S), dtype=object)
    pad[:x.shape[0], :x.shape[1]] = x.astype(np.int64)
    mask, words = (1 << lb) - 1, []
    for a in range(rg * G):
        blk = pad[(a // G) * S:(a // G + 1) * S, (a % G) * S:(a % G + 1) * S].ravel()
        word = 0
        for lane, v in enumerate(blk):
            word |= (int(v) & mask) << (lane * lb)
        words.append(word)
    return _to_bytes(config, name, words)


def ref_unpack_matrix(config, name, image, n_rows):
    r = layout.region(config, name)
    S, lb = config.array, r.lane_bits
    G, nb, rg = r.col_groups(config), layout.word_bytes(config, name), config.groups(n_rows)
    out = np.zeros((rg * S, G * S), dtype=np.int64)
    mask, sign = (1 << lb) - 1, 1 << (lb - 1)
    for a in range(rg * G):
        word = int.from_bytes(image[a * nb:(a + 1) * nb], "little")
        for lane in range(S * S):
            v = (word >> (lane * lb)) & mask
            if r.signed and v & sign:
                v -= 1 << lb
            out[(a // G) * S + lane // S, (a % G) * S + lane % S] = v
    return out[:n_rows, :r.cols]


def ref_pack_samples(config, a, rw, d, wt):
    r = layout.region(config, "samples")
    S, w, ab, B = config.array, config.width, config.action_bits, len(a)
    words = []
    for g in range(config.groups(B)):
        word = 0
        for i in range(S):
            s = g * S + i
            if s < B:
                lane = ((int(rw[s]) & ((1 << w) - 1)) | int(a[s]) << w | int(d[s]) << (w + ab)
                        | int(wt[s]) << (w + ab + 1))
                word |= lane << (i * r.lane_bits)
        words.append(word)
    return _to_bytes(config, "samples", words)


def ref_unpack_samples(config, image, n):
    r = layout.region(config, "samples")
    S, w, ab, lb = config.array, config.width, config.action_bits, r.lane_bits
    nb = layout.word_bytes(config, "samples")
    acts, rews, dones, wts = [], [], [], []
    for s in range(n):
        word = int.from_bytes(image[(s // S) * nb:(s // S + 1) * nb], "little")
        lane = (word >> ((s % S) * lb)) & ((1 << lb) - 1)
        rv = lane & ((1 << w) - 1)
        rews.append(rv - (1 << w) if rv >> (w - 1) else rv)
        acts.append((lane >> w) & ((1 << ab) - 1))
        dones.append(bool(lane >> (w + ab) & 1))
        wts.append(lane >> (w + ab + 1))
    return (np.array(acts, np.int64), np.array(rews, np.int64), np.array(dones, bool),
            np.array(wts, np.int64))


def _configs():
    out = {"shipped-s4": shipped_config("learner_cartpole_s4")[1]}
    out["w12-s2"] = LearnerConfig(sizes=(3, 6, 5), array=2, max_batch=12, sub_batch=4,
                                  width=12, act_frac=6, weight_frac=8, grad_frac=6,
                                  acc_width=24, lr_width=16, lr_frac=16)
    return out


CONFIGS = _configs()


@pytest.mark.parametrize("name", CONFIGS)
def test_matrices_bit_identical(name):
    cfg = CONFIGS[name]
    rng = np.random.default_rng(3)
    for r in layout.regions(cfg):
        if r.kind != "matrix":
            continue
        lb = r.lane_bits
        lo, hi = (-(1 << (lb - 1)), (1 << (lb - 1)) - 1) if r.signed else (0, (1 << lb) - 1)
        for n in sorted({1, cfg.array - 1 or 1, cfg.array + 1, r.rows}):
            if n > r.rows:
                continue
            x = rng.integers(lo, hi + 1, size=(n, r.cols))
            x.flat[::5] = hi
            x.flat[1::5] = lo
            img = layout.pack_matrix(cfg, r.name, x)
            assert img == ref_pack_matrix(cfg, r.name, x), (r.name, n)
            np.testing.assert_array_equal(layout.unpack_matrix(cfg, r.name, img, n),
                                          ref_unpack_matrix(cfg, r.name, img, n))
            junk = bytes(rng.integers(0, 256, len(img), dtype=np.uint8))
            np.testing.assert_array_equal(layout.unpack_matrix(cfg, r.name, junk, n),
                                          ref_unpack_matrix(cfg, r.name, junk, n))


@pytest.mark.parametrize("name", CONFIGS)
def test_samples_bit_identical(name):
    cfg = CONFIGS[name]
    rng = np.random.default_rng(4)
    fmt = cfg.numerics.act_format
    for B in sorted({1, cfg.array, cfg.array + 1, cfg.max_batch}):
        a = rng.integers(0, cfg.n_out, B)
        rw = rng.integers(fmt.min_raw, fmt.max_raw + 1, B)
        rw[::3] = fmt.min_raw
        d = rng.random(B) < 0.5
        wt = rng.integers(0, cfg.numerics.loss_weight_format.max_raw + 1, B)
        img = layout.pack_samples(cfg, a, rw, d, wt)
        assert img == ref_pack_samples(cfg, a, rw, d, wt)
        for got, want in zip(layout.unpack_samples(cfg, img, B),
                             ref_unpack_samples(cfg, img, B)):
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="image of region 'samples' must hold"):
        layout.unpack_samples(cfg, b"", 1)
