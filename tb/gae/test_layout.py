"""sw.gae.layout: the vectorized memory images, bit for bit against the per-lane loops they
replaced (kept here as the slow reference), on random shapes and the edge cases: M not a
multiple of n_pe, T = 1, all-done, extreme codes, lane widths that are and are not whole bytes,
padding bytes; plus the ``out`` buffer and the errors."""

import numpy as np
import pytest

from sw.gae.layout import lane_width, pack_rows, unpack_rows, word_bytes
from sw.gae.spec import GaeCoreConfig


# -- the reference: one Python int per word ------------------------------------------------------
def ref_pack_rows(config, region, rows) -> bytes:
    rows = np.asarray(rows)
    T, M = rows.shape
    n, w = config.n_pe, lane_width(config, region)
    G = -(-M // n)
    padded = np.zeros((T, G * n), np.int64)
    padded[:, :M] = rows
    lanes = padded.reshape(T * G, n) & ((1 << w) - 1)
    nbytes = word_bytes(config, region)
    out = bytearray(T * G * nbytes)
    for i, word_lanes in enumerate(lanes.tolist()):
        word = 0
        for p, v in enumerate(word_lanes):
            word |= v << (p * w)
        out[i * nbytes:(i + 1) * nbytes] = word.to_bytes(nbytes, "little")
    return bytes(out)


def ref_unpack_rows(config, region, data, T, M, *, signed=True):
    n, w = config.n_pe, lane_width(config, region)
    G = -(-M // n)
    nbytes = word_bytes(config, region)
    out = np.zeros((T * G, n), np.int64)
    mask = (1 << w) - 1
    for i in range(T * G):
        word = int.from_bytes(data[i * nbytes:(i + 1) * nbytes], "little")
        for p in range(n):
            v = (word >> (p * w)) & mask
            if signed and w > 1 and v >> (w - 1):
                v -= 1 << w
            out[i, p] = v
    return out.reshape(T, G * n)[:, :M]


#: Configurations: the shipped ones, 8- and 16-bit codes, full results of 32, 24 and 18 bits
#: (lanes that are not whole bytes, as dones' 1 bit), narrow and wide AXI words.
CONFIGS = {
    "n8": {},
    "n64": {"n_pe": 64},
    "n5-axi32": {"n_pe": 5, "axi_data_width": 32, "max_trajectories": 20},
    "n3-b16": {"n_pe": 3, "code_bits": 16, "max_trajectories": 9},
    "n7-b16-axi64": {"n_pe": 7, "code_bits": 16, "axi_data_width": 64},
    "full32": {"n_pe": 4, "results": "full"},
    "full24-n3": {"n_pe": 3, "results": "full", "pe": {"data_width": 24, "data_frac": 10}},
    "full18-n5": {"n_pe": 5, "results": "full", "axi_data_width": 32,
                  "pe": {"data_width": 18, "data_frac": 8}},
}


def _config(name):
    return GaeCoreConfig.from_dict(CONFIGS[name])


def _rows(cfg, region, T, M, rng, kind):
    w = lane_width(cfg, region)
    if region == "dones":
        if kind == "extreme":
            return np.ones((T, M), bool)                      # all done
        return rng.random((T, M)) < 0.3
    lo, hi = -(1 << (w - 1)), (1 << (w - 1)) - 1
    if kind == "extreme":
        return rng.choice(np.array([lo, hi, -1, 0, 1], np.int64), size=(T, M))
    dtype = np.int8 if w <= 8 else np.int16 if w <= 16 else np.int64
    return rng.integers(lo, hi + 1, size=(T, M)).astype(dtype)


@pytest.mark.parametrize("name", CONFIGS)
def test_pack_unpack_bit_identical_to_the_reference(name):
    cfg = _config(name)
    rng = np.random.default_rng(12)
    regions = ["rewards", "values", "dones"] + (["adv", "rtg"] if cfg.results == "full" else [])
    shapes = [(1, 1), (1, cfg.n_pe), (3, cfg.n_pe + 1), (5, 2 * cfg.n_pe - 1),
              (int(rng.integers(1, 40)), int(rng.integers(1, cfg.max_trajectories + 1)))]
    for region in regions:
        for T, M in shapes:
            for kind in ("random", "extreme"):
                rows = _rows(cfg, region, T, M, rng, kind)
                img = pack_rows(cfg, region, rows)
                assert isinstance(img, bytes)
                assert img == ref_pack_rows(cfg, region, rows), (region, T, M, kind)
                for signed in (True, False):
                    got = unpack_rows(cfg, region, img, T, M, signed=signed)
                    want = ref_unpack_rows(cfg, region, img, T, M, signed=signed)
                    assert got.dtype == np.int64 and got.shape == (T, M)
                    np.testing.assert_array_equal(got, want)
                # garbage in the padding bytes and past the lanes is ignored alike
                junk = bytes(rng.integers(0, 256, len(img) + 7, dtype=np.uint8))
                np.testing.assert_array_equal(unpack_rows(cfg, region, junk, T, M),
                                              ref_unpack_rows(cfg, region, junk, T, M))


@pytest.mark.parametrize("name", ["n8", "n5-axi32", "full18-n5"])
def test_out_of_range_integers_keep_their_low_bits(name):
    cfg = _config(name)
    rng = np.random.default_rng(1)
    rows = rng.integers(-(1 << 40), 1 << 40, size=(4, 2 * cfg.n_pe + 1))
    for region in ("rewards", "dones") + (("adv",) if cfg.results == "full" else ()):
        assert pack_rows(cfg, region, rows) == ref_pack_rows(cfg, region, rows)
    floats = rows[:, :3].astype(np.float64) / 7.0
    assert pack_rows(cfg, "values", floats) == ref_pack_rows(cfg, "values", floats)


def test_pack_into_a_caller_buffer():
    cfg = _config("n8")
    rng = np.random.default_rng(2)
    rows = rng.integers(-127, 128, size=(6, 13)).astype(np.int8)
    n = 6 * 2 * word_bytes(cfg, "rewards")
    buf = bytearray(b"\xff" * (n + 5))
    got = pack_rows(cfg, "rewards", rows, out=buf)
    assert got.shape == (12, word_bytes(cfg, "rewards")) and np.shares_memory(
        got, np.frombuffer(buf, np.uint8))
    assert bytes(buf[:n]) == ref_pack_rows(cfg, "rewards", rows) and buf[n:] == b"\xff" * 5
    arr = np.full(n, 7, np.uint8)
    pack_rows(cfg, "rewards", rows, out=arr)
    assert arr.tobytes() == ref_pack_rows(cfg, "rewards", rows)
    with pytest.raises(ValueError, match=rf"out must be a writable buffer of at least {n} bytes"):
        pack_rows(cfg, "rewards", rows, out=bytearray(n - 1))
    with pytest.raises(ValueError, match="out must be a writable buffer"):
        pack_rows(cfg, "rewards", rows, out=bytes(n))


def test_errors():
    cfg = _config("n8")
    with pytest.raises(ValueError, match=r"rows must be a \[T, M\] array, not shape \(3,\)"):
        pack_rows(cfg, "rewards", np.zeros(3, np.int8))
    with pytest.raises(ValueError, match="need 32 bytes for 2 x 3, got 31"):
        unpack_rows(cfg, "rewards", bytes(31), 2, 3)
