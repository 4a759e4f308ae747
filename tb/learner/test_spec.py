"""LearnerConfig validation, the block layout's packing, the register map and the stage graph
of the cycle model (pure Python)."""

import numpy as np
import pytest

from sw.learner.spec import LearnerConfig
from sw.learner.layout import (mem_addr_bits, pack_matrix, pack_samples, region, region_base,
                               region_bytes, regions, unpack_matrix, unpack_samples, word_bytes)
from sw.learner.spec import hw_info_values, learner_register_map
from sw.learner.schedule import item_slots, items, stages, step_cycles, timeline


@pytest.mark.parametrize("kw,msg", [
    ({"sizes": (4,)}, "sizes must be a tuple of 2..8 integers in 1..1024"),
    ({"sizes": "4,x"}, "sizes must be integers separated by commas"),
    ({"array": 3}, "array must be one of 2, 4, 8, 16, not 3"),
    ({"max_batch": 0}, "max_batch must be an integer in 1..4096, not 0"),
    ({"sub_batch": 12}, r"sub_batch must be a multiple of array \(8\) in 8..64, not 12"),
    ({"sub_batch": 72}, r"sub_batch must be a multiple of array \(8\) in 8..64, not 72"),
    ({"loss": "huber"}, "loss must be one of dqn, mse, not 'huber'"),
    ({"sizes": (4, 8, 1)}, "sizes must end in at least 2 actions for loss='dqn', not 1"),
    ({"axi_data_width": 48}, "axi_data_width must be one of 32, 64, 128, 256, 512, not 48"),
    ({"dp": 3}, "dp must be one of 1, 2, 4, not 3"),
    ({"dp": 2, "sub_batch": 24}, "sub_batch / array must be a power of two with dp > 1"),
    ({"act_frac": 15}, r"act_frac must be an integer in 0..14, not 15"),
    ({"array": 2, "width": 9, "weight_frac": 5, "act_frac": 4, "grad_frac": 5,
      "acc_width": 20, "sub_batch": 2}, "array \\* width must be a multiple of 8"),
])
def test_config_rejects(kw, msg):
    with pytest.raises(ValueError, match=msg):
        LearnerConfig(**kw)


def test_config_round_trip_and_strings():
    cfg = LearnerConfig(sizes="4-64-64-2", array=4, sub_batch=16, loss="mse")
    assert cfg.sizes == (4, 64, 64, 2)
    assert LearnerConfig.from_dict(cfg.to_dict()) == cfg
    with pytest.raises(ValueError, match="unknown learner parameter"):
        LearnerConfig.from_dict({"rows": 2})
    assert cfg.numerics.max_k == 65 and cfg.tensor_unit("wa").rows == 4
    assert cfg.groups_pow2(65) == 32 and cfg.groups(65) == 17


CFG = LearnerConfig(sizes=(5, 7, 3), array=4, max_batch=10, sub_batch=4, axi_data_width=32)


@pytest.mark.parametrize("name,rows", [("obs", 10), ("obs", 3), ("w0", 6), ("grad1", 8),
                                       ("delta1", 9), ("tw1", 8)])
def test_matrix_images_round_trip(name, rows):
    r = region(CFG, name)
    rng = np.random.default_rng(rows)
    lo, hi = -(1 << (r.lane_bits - 1)), (1 << (r.lane_bits - 1)) - 1
    x = rng.integers(lo, hi + 1, (rows, r.cols))
    img = pack_matrix(CFG, name, x)
    assert len(img) == CFG.groups(rows) * r.col_groups(CFG) * word_bytes(CFG, name)
    np.testing.assert_array_equal(unpack_matrix(CFG, name, img, rows), x)


def test_block_layout():
    """Element (i, j) of block (rg, cg) is lane i·S + j of word rg·G + cg (G a power of 2)."""
    x = np.arange(6 * 7).reshape(6, 7) - 20
    img = pack_matrix(CFG, "h0", x)
    nb = word_bytes(CFG, "h0")
    G = region(CFG, "h0").col_groups(CFG)
    assert G == 2
    word = int.from_bytes(img[(1 * G + 1) * nb:(1 * G + 2) * nb], "little")   # block (1, 1)

    def lane(i, j):
        return (word >> ((i * 4 + j) * 16)) & 0xFFFF

    assert lane(1, 1) == x[5, 5] & 0xFFFF
    assert lane(0, 2) == x[4, 6] & 0xFFFF
    assert lane(0, 3) == 0 and lane(2, 0) == 0                 # padding column and rows


def test_sample_images_round_trip():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 3, 9)
    r = rng.integers(-3000, 3000, 9)
    d = rng.random(9) < 0.5
    wt = rng.integers(0, CFG.numerics.loss_weight_format.max_raw + 1, 9)
    out = unpack_samples(CFG, pack_samples(CFG, a, r, d, wt), 9)
    assert len(out) == 4
    for got, want in zip(out, (a, r, d, wt)):
        np.testing.assert_array_equal(got, want)
    ones = unpack_samples(CFG, pack_samples(CFG, a, r, d), 9)[3]      # default: all 1.0
    assert (CFG.numerics.loss_weight_format.to_float(ones) == 1.0).all()
    with pytest.raises(ValueError, match="weights must be raw"):
        pack_samples(CFG, a, r, d, np.full(9, -1))
    with pytest.raises(ValueError, match="same length"):
        pack_samples(CFG, a, r, d, wt[:3])
    with pytest.raises(ValueError, match="actions must be in 0..2"):
        pack_samples(CFG, np.full(3, 3), np.zeros(3, int), np.zeros(3, bool))


def test_layout_rejects():
    with pytest.raises(ValueError, match="matrix must be n × 7 for region 'h0'"):
        pack_matrix(CFG, "h0", np.zeros((2, 6), int))
    with pytest.raises(ValueError, match="matrix must have 1..10 rows"):
        pack_matrix(CFG, "obs", np.zeros((11, 5), int))
    with pytest.raises(ValueError, match="raw 16-bit integers"):
        pack_matrix(CFG, "obs", np.full((1, 5), 1 << 15))
    with pytest.raises(ValueError, match="no region 'targets'"):
        region(CFG, "targets")


def test_address_map():
    rb = region_bytes(CFG)
    names = [r.name for r in regions(CFG)]
    assert names[:3] == ["obs", "next_obs", "samples"] and names[-1] == "grad1"
    assert [region_base(CFG, n) for n in names] == [i * rb for i in range(len(names))]
    for r in regions(CFG):
        assert r.depth(CFG) * word_bytes(CFG, r.name) <= rb
    assert (1 << mem_addr_bits(CFG)) >= len(names) * rb


def test_register_map():
    regs = learner_register_map(CFG)
    assert regs.offset("BATCH_SIZE") == 0x10
    info = hw_info_values(CFG)
    assert info["HW_ARRAY"] == 4 | 4 << 8 | 10 << 16
    assert [info[f"HW_SIZE{i}"] for i in range(3)] == [5, 7, 3]
    assert regs["STATUS"].field("WU_OVERFLOW").lsb == 14


def test_stage_graph():
    names = [s.name for s in stages(CFG)]
    assert names == ["fw0", "fw1", "tfw0", "tfw1", "loss", "bw1", "wa0", "wa1", "wu0", "wu1"]
    mse = LearnerConfig(sizes=(5, 7, 3), array=4, max_batch=10, sub_batch=4, loss="mse")
    assert "tfw0" not in [s.name for s in stages(mse)]
    assert items(CFG, 10) == [4, 4, 2]
    with pytest.raises(ValueError, match="batch must be an integer in 1..10, not 11"):
        items(CFG, 11)


def test_timeline_respects_dependencies():
    tl = timeline(CFG, 10)
    st = {s.name: s for s in stages(CFG)}
    for name, rows in tl.items():
        for p, (first, last, done) in enumerate(rows):
            assert first <= last < done
            if p:
                assert first > rows[p - 1][1]
            for d in st[name].deps:
                if name.startswith("wu") and d.startswith("wa"):   # WU overlaps WA's last item
                    assert first > tl[d][-1][0] and done > tl[d][-1][2]
                else:
                    assert first >= tl[d][-1 if name.startswith("wu") else p][2]
    assert step_cycles(CFG, 10) == max(tl[f"wu{l}"][0][2] for l in range(2))


def test_item_slots_are_tile_cycles():
    """GEMM items: tiles × max(K, S) slots (the tensor unit's drain bound for short K)."""
    s = {x.name: x for x in stages(CFG)}
    assert item_slots(CFG, s["fw0"], 4) == 1 * 2 * 6          # K = 6 ≥ S
    assert item_slots(CFG, s["bw1"], 2) == 1 * 2 * 4          # K = 3 < S: 4 slots per tile
    assert item_slots(CFG, s["wa1"], 2) == 2 * 1 * 4          # K = cnt = 2 < S
    assert item_slots(CFG, s["wu0"], 0) == 2 * 2 * 4
    assert item_slots(CFG, s["loss"], 3) == 3


def test_stage_graph_with_pipelines():
    cfg = LearnerConfig(sizes=(5, 7, 3), array=4, max_batch=10, sub_batch=4, dp=2)
    st = {s.name: s for s in stages(cfg)}
    assert st["bw1@1"].deps == ("loss@1",) and st["bw1@1"].pipe == 1
    assert st["wu1"].deps == ("wa1@0", "wa1@1", "bw1@0", "bw1@1")
    assert items(cfg, 10, 0) == [4, 2] and items(cfg, 10, 1) == [4]
    assert cfg.pipe_batch == 8
    tl = timeline(cfg, 3)                    # one sub-batch: pipeline 1 has nothing to do
    assert tl["fw0@1"] == [] and tl["wu0"][0][0] == tl["wa0@0"][-1][2]
    one = LearnerConfig(sizes=(5, 7, 3), array=4, max_batch=10, sub_batch=4)
    assert step_cycles(cfg, 10) < step_cycles(one, 10)


def test_stage_arrays_parse_and_validate():
    cfg = LearnerConfig(sizes=(5, 7, 3), array=4, max_batch=10, sub_batch=4,
                        stage_arrays={"wa1": "2x4", "fw": 2, "tfw0": (4, 2)})
    assert cfg.stage_arrays == "fw:2x2,tfw0:4x2,wa1:2x4"          # canonical order
    assert cfg.stage_array("fw1@1") == (2, 2) and cfg.stage_array("tfw0") == (4, 2)
    assert cfg.stage_array("tfw1") == (4, 4) and cfg.stage_array("wa1") == (2, 4)
    assert cfg.stage_tensor_unit("wa1").cols == 4
    assert cfg.stage_tensor_unit("wa1").out_width == cfg.acc_width
    assert LearnerConfig.from_dict(cfg.to_dict()) == cfg
    assert LearnerConfig(sizes=(5, 7, 3), array=4, max_batch=10, sub_batch=4,
                         stage_arrays="fw:2x2, tfw0:4x2 ,wa1:2x4") == cfg
    base = dict(sizes=(5, 7, 3), array=4, max_batch=10, sub_batch=4)
    for spec, msg in [
        ("fw:8x8", r"stage_arrays\['fw'\] rows must be one of 2, 4 \(at most array = 4"),
        ("wa0:4x3", r"stage_arrays\['wa0'\] cols must be one of 2, 4"),
        ("bw0:2", r"stage_arrays key must be one of .*not 'bw0'"),
        ("fw2:2", r"not 'fw2'"),
        ("fw", r"entries must be key:RxC"),
        ("fw:2,fw:4", r"sets 'fw' twice"),
        ({"wa": "x"}, r"stage_arrays\['wa'\] must be 'RxC'"),
        (5, r"stage_arrays must be a dict or a string"),
    ]:
        with pytest.raises(ValueError, match=msg):
            LearnerConfig(**base, stage_arrays=spec)
    with pytest.raises(ValueError, match="not 'tfw0'"):
        LearnerConfig(**base, loss="mse", stage_arrays="tfw0:2")
    with pytest.raises(ValueError, match="stage must be one of"):
        cfg.stage_array("loss")


def test_stage_arrays_cycle_model():
    """Per-stage R × C: tiles over R samples (FW, BW) or R inputs (WA) and C outputs, at
    least R slots each; the tail follows the stage's own unit."""
    cfg = LearnerConfig(sizes=(5, 7, 3), array=4, max_batch=10, sub_batch=4,
                        stage_arrays="fw0:2x4,bw1:4x2,wa1:2x2")
    s = {x.name: x for x in stages(cfg)}
    assert item_slots(cfg, s["fw0"], 4) == 2 * 2 * 6             # 2 sample tiles, 2 col tiles
    assert item_slots(cfg, s["fw1"], 4) == 1 * 1 * 8
    assert item_slots(cfg, s["bw1"], 3) == 1 * 4 * 4             # n_in 7 over C = 2
    assert item_slots(cfg, s["wa1"], 3) == 4 * 2 * 3             # 8 inputs over R = 2, K = 3
    assert item_slots(cfg, s["wa1"], 1) == 4 * 2 * 2             # K = 1 < R: 2 slots
    from sw.learner.schedule import GEMM_OPERAND_LATENCY, GEMM_WRITE_LATENCY, stage_tail
    assert stage_tail(cfg, s["wa1"]) == GEMM_OPERAND_LATENCY + (2 + 2 + 3) + 1 \
        + GEMM_WRITE_LATENCY["wa"] + 1
    assert stage_tail(cfg, s["fw0"]) == GEMM_OPERAND_LATENCY + (2 + 4 + 3) + 1 + 1 + 1


def test_wu_overlaps_the_last_wa_item():
    """One pipeline: WU starts on the first gradient block while WA is still on its last
    item (unless BW, the other reader of W, finishes later), and each block waits for the WA
    tile that completes it; dp > 1: WU waits for WA."""
    from sw.learner.schedule import WU_READY_LATENCY, wu_block_need, wu_overlaps

    cfg = LearnerConfig(sizes=(5, 7, 3), array=4, max_batch=10, sub_batch=4)
    tl = timeline(cfg, 10)
    assert wu_overlaps(cfg)
    for l in range(2):
        first, last, done = tl[f"wu{l}"][0]
        wa_first, wa_last, wa_done = tl[f"wa{l}"][-1]
        assert wa_first < first <= wa_done and done > wa_done
    # wu0 (no BW reads W0) starts while WA0's last item runs; wu1 waits for BW1 as well,
    # which here finishes one cycle before WA1.
    assert tl["wu0"][0][0] < tl["wa0"][-1][2]
    assert tl["wu1"][0][0] == tl["bw1"][-1][2] + WU_READY_LATENCY == tl["wa1"][-1][2]
    assert [wu_block_need(cfg, 1, rg, cg) for rg in range(2) for cg in range(1)] == [0, 1]
    mixed = LearnerConfig(sizes=(5, 7, 3), array=4, max_batch=10, sub_batch=4,
                          stage_arrays="wa1:2x2")
    # wa1 tiles: 4 input groups of 2 x 2 output groups; block (rg, 0) ends at tile
    # (2·rg + 1, 1), block (rg, 0) of a 4-wide block at output group 1 too.
    assert [wu_block_need(mixed, 1, rg, 0) for rg in range(2)] == [3, 7]
    two = LearnerConfig(sizes=(5, 7, 3), array=4, max_batch=10, sub_batch=4, dp=2)
    assert not wu_overlaps(two)
    tl2 = timeline(two, 10)
    assert tl2["wu1"][0][0] == max(tl2[f"{s}1@{d}"][-1][2] for s in ("wa", "bw") for d in (0, 1))


def _reference_words(config, name, x):
    """Bit-by-bit packing: lane i*S + j of word rg*G + cg holds element (rg*S + i, cg*S + j)."""
    r = region(config, name)
    S, lb, G = config.array, r.lane_bits, r.col_groups(config)
    words = []
    for rg in range(config.groups(x.shape[0])):
        for cg in range(G):
            word = 0
            for i in range(S):
                for j in range(S):
                    a, b = rg * S + i, cg * S + j
                    v = int(x[a, b]) if a < x.shape[0] and b < x.shape[1] else 0
                    word |= (v & ((1 << lb) - 1)) << ((i * S + j) * lb)
            words.append(word)
    nb = word_bytes(config, name)
    return b"".join(w.to_bytes(nb, "little") for w in words)


@pytest.mark.parametrize("cfg", [CFG,
                                 LearnerConfig(sizes=(3, 9, 2), array=2, max_batch=6, sub_batch=2),
                                 LearnerConfig(sizes=(5, 17, 3), array=8, max_batch=16, sub_batch=8,
                                               loss="mse")],
                         ids=["s4", "s2", "s8-mse"])
def test_packing_matches_bit_reference(cfg):
    """The vectorised packers (byte-aligned lanes) equal the bit-level layout, extremes included."""
    rng = np.random.default_rng(7)
    for r in regions(cfg):
        if r.kind != "matrix":
            continue
        lo, hi = -(1 << (r.lane_bits - 1)), (1 << (r.lane_bits - 1)) - 1
        for rows in sorted({1, r.rows // 2 or 1, r.rows}):
            x = rng.integers(lo, hi + 1, (rows, r.cols))
            x.flat[0], x.flat[-1] = lo, hi
            img = pack_matrix(cfg, r.name, x)
            assert img == _reference_words(cfg, r.name, x), r.name
            np.testing.assert_array_equal(unpack_matrix(cfg, r.name, img, rows), x)
