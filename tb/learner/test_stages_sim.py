"""Each stage of the learner pipeline alone in Amaranth's simulator (fast tier).

:class:`rtl_gen.learner.stages.harness.StageHarness` builds one stage block (FW, target FW,
LOSS, BW, WA, WU) with the pipeline's buffers and stub producers that have finished every item.
The test preloads the stage's input buffers with the intermediates of the golden
:func:`sw.learner.mlp.train_step` (with the pipeline's sub-batches), runs one step and compares
the buffers the stage writes with the golden's next intermediates bit for bit, its saturation
flags with the golden's, and its cycles with the schedule: the stage's item slots back to back
from cycle 1 plus its tail (:func:`sw.learner.schedule.item_slots`,
:func:`~sw.learner.schedule.stage_tail`).
"""

import functools

import numpy as np
import pytest
from amaranth.sim import Simulator

from learner_cases import golden, random_case
from rtl_gen.learner.stages import FwStage, StageContext
from rtl_gen.learner.stages.harness import StageHarness
from sw.learner.gemm import gemm_fixed
from sw.learner.layout import pack_matrix, pack_samples, unpack_matrix, word_bytes
from sw.learner.schedule import (WU_READY_LATENCY, item_slots, items, stage_tail, stages_by_name,
                                 wu_overlaps)
from sw.learner.spec import LEARNER_FLAGS, LearnerConfig

#: Tiny configurations: 2 × 2 blocks and units, and 4 × 4 blocks with per-stage R × C units.
CONFIGS = {
    "dqn": dict(sizes=(3, 4, 2), array=2, max_batch=8, sub_batch=2),
    "mse": dict(sizes=(3, 4, 2), array=2, max_batch=8, sub_batch=2, loss="mse"),
    "dqn3_rxc": dict(sizes=(3, 6, 5, 2), array=4, max_batch=12, sub_batch=4,
                     stage_arrays="fw:2x4,tfw:4x2,bw:2x2,wa:2x4"),
    "mse3_rxc": dict(sizes=(3, 6, 5, 2), array=4, max_batch=12, sub_batch=4, loss="mse",
                     stage_arrays="fw0:2x2,fw1:4x2,bw1:2x4,wa0:4x2,wa1:2x2"),
    "mse_dp2": dict(sizes=(3, 4, 2), array=2, max_batch=8, sub_batch=2, dp=2, loss="mse"),
    "dqn_dp2": dict(sizes=(3, 4, 2), array=2, max_batch=8, sub_batch=2, dp=2),
}
#: Batch per configuration: a partial last sub-batch everywhere.
BATCH = {"dqn": 5, "mse": 5, "dqn3_rxc": 11, "mse3_rxc": 10, "mse_dp2": 7, "dqn_dp2": 8}


@functools.lru_cache(maxsize=None)
def case_of(name, saturate=False, weighted=False):
    """``(config, case, golden step)``; ``saturate``: weights and inputs large enough to
    saturate FW, LOSS and WU (as the core's saturation test); ``weighted``: random per-sample
    loss weights (DQN)."""
    cfg = LearnerConfig(**CONFIGS[name])
    rng = np.random.default_rng(sum(map(ord, name)) + saturate)
    B = BATCH[name]
    if not saturate:
        case = random_case(cfg, B, rng, weighted=weighted)
        step = golden(cfg, case)
        assert not step.any_overflow, step.overflow
        return cfg, case, step
    case = random_case(cfg, B, rng, scale=8.0, lr=0.9, weighted=weighted)
    act = cfg.numerics.act_format
    case.obs = act.quantize(rng.uniform(-20, 20, case.obs.shape))
    if cfg.loss == "dqn":
        case.next_obs = act.quantize(rng.uniform(-20, 20, case.next_obs.shape))
        case.rewards = act.quantize(rng.uniform(-30, 30, B))
    else:
        case.targets = act.quantize(rng.uniform(-30, 30, case.targets.shape))
    return cfg, case, golden(cfg, case)


# -- buffer images ---------------------------------------------------------------------------------
def region_words(cfg, key, matrix):
    """Memory words of buffer ``key`` (``name`` or ``name@d``) holding ``matrix``."""
    name = key.split("@")[0]
    img, nb = pack_matrix(cfg, name, matrix), word_bytes(cfg, name)
    return [int.from_bytes(img[i:i + nb], "little") for i in range(0, len(img), nb)]


def region_matrix(cfg, key, words, rows):
    name = key.split("@")[0]
    nb = word_bytes(cfg, name)
    return unpack_matrix(cfg, name, b"".join(w.to_bytes(nb, "little") for w in words), rows)


def sample_words(cfg, case):
    img = pack_samples(cfg, case.actions, case.rewards, case.dones, case.loss_weights)
    nb = word_bytes(cfg, "samples")
    return [int.from_bytes(img[i:i + nb], "little") for i in range(0, len(img), nb)]


def mask_words(cfg, mask):
    """ReLU mask buffer words (1-bit lanes, S × S blocks) of a boolean matrix."""
    S, G = cfg.array, cfg.groups_pow2(mask.shape[1])
    words = [0] * (cfg.groups(mask.shape[0]) * G)
    for r, c in zip(*map(np.ndarray.tolist, np.nonzero(mask))):
        words[(r // S) * G + c // S] |= 1 << ((r % S) * S + c % S)
    return words


def mask_matrix(cfg, words, rows, cols):
    S, G = cfg.array, cfg.groups_pow2(cols)
    return np.array([[words[(r // S) * G + c // S] >> ((r % S) * S + c % S) & 1
                      for c in range(cols)] for r in range(rows)], dtype=bool)


# -- simulation ------------------------------------------------------------------------------------
def run_stage(cfg, stage, batch, preload, *, lr=0, gamma=0, sync=False, timeout=20_000):
    """Preload buffers (key -> words), run one step of ``stage`` alone; returns the status
    (cycles, items, flags, loss_sum) and every buffer's words after the step."""
    dut = StageHarness(cfg, stage)
    data = dut.memory_data
    out = {}

    async def bench(ctx):
        for key, words in preload.items():
            for i, v in enumerate(words):
                ctx.set(data[key][i], v)
        ctx.set(dut.batch_size, batch)
        ctx.set(dut.lr, lr)
        ctx.set(dut.gamma, gamma)
        ctx.set(dut.sync, sync)
        await ctx.tick()                    # the arguments stable the cycle before start
        ctx.set(dut.start, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        for _ in range(timeout):
            if ctx.get(dut.done):
                break
            await ctx.tick()
        else:
            raise AssertionError(f"timeout waiting for {stage} to finish")
        out["cycles"] = ctx.get(dut.cycles)
        out["items"] = ctx.get(dut.items)
        out["loss_sum"] = ctx.get(dut.loss_sum)
        out["flags"] = {f for f in LEARNER_FLAGS if ctx.get(getattr(dut, f"flag_{f}"))}
        out["mem"] = {key: [ctx.get(d[i]) for i in range(d.depth)] for key, d in data.items()}

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return out


def check_cycles(cfg, stage, batch, res):
    """Items back to back from cycle 1 (an overlapped WU: cycle 2), done ``stage_tail`` cycles
    after the last slot."""
    st = stages_by_name(cfg)[stage]
    if st.kind == "wu":
        assert res["items"] == 1
        expect = item_slots(cfg, st, 0) + stage_tail(cfg, st)
        if wu_overlaps(cfg):            # whether a block may start is registered
            expect += WU_READY_LATENCY
    else:
        its = items(cfg, batch, st.pipe)
        assert res["items"] == len(its)
        expect = sum(item_slots(cfg, st, c) for c in its) + stage_tail(cfg, st)
    assert res["cycles"] == expect, (stage, res["cycles"], expect)


def fw_overflow(num, a, w):
    return bool(gemm_fixed(a, w, num.tensor_unit("fw"), return_overflow=True)[1].any())


# -- FW --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,stage,saturate", [
    ("dqn", "fw0", False), ("dqn", "fw1", False), ("dqn", "tfw0", False),
    ("dqn", "tfw1", False), ("mse", "fw0", True), ("dqn", "tfw0", True),
    ("dqn3_rxc", "fw1", False), ("dqn3_rxc", "tfw2", False), ("mse3_rxc", "fw1", False),
])
def test_fw_stage(name, stage, saturate):
    """FW of one layer (online or target network): activations, ReLU mask, Q values."""
    cfg, case, step = case_of(name, saturate)
    st = stages_by_name(cfg)[stage]
    l, L, B = st.layer, cfg.n_layers, case.batch
    target = st.kind == "tfw"
    if target:
        ins, pre = step.extra["next_inputs"][l], step.extra["next_pre"][l]
        weights, src = case.target_weights[l], ("next_obs" if l == 0 else f"th{l - 1}")
        wname, dst = f"tw{l}", ("tq" if l == L - 1 else f"th{l}")
    else:
        ins, pre = step.inputs[l], step.pre[l]
        weights, src = case.weights[l], ("obs" if l == 0 else f"h{l - 1}")
        wname, dst = f"w{l}", ("q" if l == L - 1 else f"h{l}")
    res = run_stage(cfg, stage, B, {src: region_words(cfg, src, ins[:, :-1]),
                                     wname: region_words(cfg, wname, weights)})
    check_cycles(cfg, stage, B, res)
    last = l == L - 1
    np.testing.assert_array_equal(region_matrix(cfg, dst, res["mem"][dst], B),
                                  pre if last else np.maximum(pre, 0))
    if not last and not target:
        np.testing.assert_array_equal(
            mask_matrix(cfg, res["mem"][f"mask{l}"], B, cfg.sizes[l + 1]), pre > 0)
    ovf = fw_overflow(cfg.numerics, ins, weights)
    assert res["flags"] == ({"target_fw" if target else "fw"} if ovf else set())
    assert ovf == saturate


# -- LOSS ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,saturate,weighted", [
    ("dqn", False, False), ("mse", False, False), ("dqn", True, False), ("mse", True, False),
    ("dqn3_rxc", False, False), ("dqn3_rxc", False, True), ("dqn", True, True)])
def test_loss_stage(name, saturate, weighted):
    """δ of the output layer (DQN: the TD target from the target network's Q values, times the
    sample's loss weight when ``weighted``) and the loss sum."""
    cfg, case, step = case_of(name, saturate, weighted)
    L, B = cfg.n_layers, case.batch
    pre = {"q": region_words(cfg, "q", step.q)}
    if cfg.loss == "dqn":
        pre["tq"] = region_words(cfg, "tq", step.extra["q_next"])
        pre["samples"] = sample_words(cfg, case)
    else:
        pre["targets"] = region_words(cfg, "targets", case.targets)
    res = run_stage(cfg, "loss", B, pre, gamma=case.gamma)
    check_cycles(cfg, "loss", B, res)
    dname = f"delta{L - 1}"
    np.testing.assert_array_equal(region_matrix(cfg, dname, res["mem"][dname], B),
                                  step.deltas[L - 1])
    assert res["loss_sum"] == step.loss_sum
    expect = {f for f in ("delta", "target") if step.overflow.get(f)}
    assert res["flags"] == expect
    assert bool(expect) == saturate


# -- BW --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,stage", [("dqn", "bw1"), ("dqn3_rxc", "bw1"),
                                        ("dqn3_rxc", "bw2"), ("mse3_rxc", "bw1")])
def test_bw_stage(name, stage):
    """δ of a hidden layer: δ_l·W_lᵀ masked by FW's ReLU mask."""
    cfg, case, step = case_of(name)
    l, B = stages_by_name(cfg)[stage].layer, case.batch
    res = run_stage(cfg, stage, B, {
        f"delta{l}": region_words(cfg, f"delta{l}", step.deltas[l]),
        f"w{l}": region_words(cfg, f"w{l}", case.weights[l]),
        f"mask{l - 1}": mask_words(cfg, step.pre[l - 1] > 0)})
    check_cycles(cfg, stage, B, res)
    got = region_matrix(cfg, f"delta{l - 1}", res["mem"][f"delta{l - 1}"], B)
    np.testing.assert_array_equal(got, step.deltas[l - 1])
    assert res["flags"] == set()


# -- WA --------------------------------------------------------------------------------------------
def wa_pads(cfg, step, l):
    """Per pipeline: its sub-batches' partial gradients added with saturation, in order."""
    num, m = cfg.numerics, cfg.sub_batch
    pads = [None] * cfg.dp
    for p, s0 in enumerate(range(0, len(step.q), m)):
        part = gemm_fixed(step.inputs[l][s0:s0 + m].T, step.deltas[l][s0:s0 + m],
                          num.tensor_unit("wa"))
        d = p % cfg.dp
        pads[d] = part if pads[d] is None else num.wgrad_format.saturate(pads[d] + part)[0]
    return pads


@pytest.mark.parametrize("name,stage", [("dqn", "wa0"), ("dqn", "wa1"), ("mse3_rxc", "wa0"),
                                        ("dqn3_rxc", "wa2"), ("mse_dp2", "wa1@1")])
def test_wa_stage(name, stage):
    """The weight gradient of one layer, sub-batch by sub-batch into the pipeline's
    scratchpad."""
    cfg, case, step = case_of(name)
    st = stages_by_name(cfg)[stage]
    l, d, B = st.layer, st.pipe, case.batch
    x = "" if cfg.dp == 1 else f"@{d}"
    src = "obs" if l == 0 else f"h{l - 1}{x}"
    # The pipeline's share of the batch: its sub-batches, in order, in its own buffers.
    m = cfg.sub_batch
    rows = np.concatenate([np.arange(s0, min(s0 + m, B))
                           for s0 in range(d * m, B, m * cfg.dp)])
    xs = step.inputs[l][:, :-1] if l == 0 else step.inputs[l][rows, :-1]
    res = run_stage(cfg, stage, B, {
        src: region_words(cfg, src, xs),
        f"delta{l}{x}": region_words(cfg, f"delta{l}", step.deltas[l][rows])})
    check_cycles(cfg, stage, B, res)
    got = region_matrix(cfg, f"grad{l}", res["mem"][f"grad{l}{x}"], cfg.sizes[l] + 1)
    np.testing.assert_array_equal(got, wa_pads(cfg, step, l)[d])
    if cfg.dp == 1:
        np.testing.assert_array_equal(got, step.grads[l])
    assert res["flags"] == set()


# -- WU --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,stage,sync,saturate", [
    ("dqn", "wu0", False, False), ("dqn", "wu1", True, False), ("mse", "wu1", False, True),
    ("dqn3_rxc", "wu1", True, False), ("mse_dp2", "wu0", False, False),
    ("dqn_dp2", "wu1", True, False),
])
def test_wu_stage(name, stage, sync, saturate):
    """W ← saturate(W - round(η·G)) (with dp > 1 after adding the pipelines' scratchpads, the
    sum written back for the host); DQN with a sync: the same rows into the target weights."""
    cfg, case, step = case_of(name, saturate)
    l = stages_by_name(cfg)[stage].layer
    num, B = cfg.numerics, case.batch
    pads = wa_pads(cfg, step, l)
    pre = {f"w{l}": region_words(cfg, f"w{l}", case.weights[l])}
    for d, pad in enumerate(pads):
        pre[f"grad{l}" + ("" if cfg.dp == 1 else f"@{d}")] = region_words(cfg, f"grad{l}", pad)
    if cfg.loss == "dqn":
        pre[f"tw{l}"] = region_words(cfg, f"tw{l}", case.target_weights[l])
    res = run_stage(cfg, stage, B, pre, lr=case.lr, sync=sync)
    check_cycles(cfg, stage, B, res)
    rows = cfg.sizes[l] + 1
    got = region_matrix(cfg, f"w{l}", res["mem"][f"w{l}"], rows)
    np.testing.assert_array_equal(got, step.weights[l])
    if cfg.loss == "dqn":
        tw = region_matrix(cfg, f"tw{l}", res["mem"][f"tw{l}"], rows)
        np.testing.assert_array_equal(tw, step.weights[l] if sync else case.target_weights[l])
    g0 = "grad" + str(l) + ("" if cfg.dp == 1 else "@0")
    np.testing.assert_array_equal(region_matrix(cfg, f"grad{l}", res["mem"][g0], rows),
                                  step.grads[l])
    wfmt = num.weight_format
    shift = num.lr_frac + num.act_frac + num.grad_frac - num.weight_frac
    _, ovf = wfmt.saturate(case.weights[l] - wfmt.rshift_round(int(case.lr) * step.grads[l],
                                                                 shift))
    assert res["flags"] == ({"wu"} if ovf.any() else set())
    assert ovf.any() == saturate


# -- construction ----------------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")  # refused, never elaborated
@pytest.mark.usefixtures("collect_components")
def test_stage_blocks_check_their_arguments():
    cfg = LearnerConfig(**CONFIGS["dqn"])
    st = stages_by_name(cfg)
    with pytest.raises(TypeError, match="config must be a LearnerConfig, not 'x'"):
        StageHarness("x", "fw0")
    with pytest.raises(ValueError, match="stage must be one of fw0, fw1, .*, not 'bw0'"):
        StageHarness(cfg, "bw0")
    with pytest.raises(TypeError, match="ctx must be a StageContext, not None"):
        FwStage(None, st["fw0"], {})
    ctx = StageContext(config=cfg, buffers=None, busy=None, clear=None, batch_size=None,
                       eta=None, gamma=None, sync_now=None)
    with pytest.raises(TypeError, match="stage must be a schedule.Stage, not 'fw0'"):
        FwStage(ctx, "fw0", {})
    with pytest.raises(ValueError, match="stage must be of kind fw or tfw, not 'loss'"):
        FwStage(ctx, st["loss"], {})
    with pytest.raises(ValueError, match="producers must hold the status of fw0"):
        FwStage(ctx, st["fw1"], {})
