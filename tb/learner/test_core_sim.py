"""Learner core in Amaranth's simulator (fast tier): tiny networks on 2 × 2 tensor units.

The host side writes the memory images of :mod:`sw.learner.layout` through the core's host
port, sets the arguments, starts a step, waits for ``done`` and reads every result region back:
activations, Q values, δ, weight gradients and updated weights must equal
:func:`sw.learner.mlp.train_step` (with the pipeline's sub-batches) bit for bit, the saturation
flags and the loss sum must match, and ``cycles`` must equal
:func:`sw.learner.schedule.step_cycles`.
"""

from dataclasses import replace

import numpy as np
import pytest
from amaranth.sim import Simulator

from learner_cases import golden, input_images, random_case, region_rows
from learner_core_sim import CoreHost, check_step, simulate
from sw.learner.spec import LearnerConfig
from rtl_gen.learner.core import LearnerCore
from sw.learner.layout import region_base
from sw.learner.schedule import step_cycles


TINY = dict(sizes=(3, 4, 2), array=2, max_batch=8)


@pytest.mark.parametrize("loss", ["dqn", "mse"])
@pytest.mark.parametrize("B,sub_batch", [(4, 2), (4, 4), (3, 2), (1, 2)])
def test_tiny_step_bit_exact(loss, B, sub_batch):
    cfg = LearnerConfig(**TINY, sub_batch=sub_batch, loss=loss)
    rng = np.random.default_rng(100 * B + sub_batch + (loss == "mse"))
    case = random_case(cfg, B, rng)
    step = golden(cfg, case)
    assert not step.any_overflow
    status, got = simulate(cfg, case)
    check_step(cfg, case, status[0], got, step)


@pytest.mark.parametrize("loss", ["dqn", "mse"])
def test_three_layers_multi_group_loss(loss):
    """5-6-4-3 on 2 × 2 units: two BW stages, layers whose bias row starts a row group
    (n_in = 6, 4), three outputs (the LOSS spans two groups), a partial last sub-batch."""
    cfg = LearnerConfig(sizes=(5, 6, 4, 3), array=2, max_batch=6, sub_batch=4, loss=loss)
    case = random_case(cfg, 6, np.random.default_rng(7 + (loss == "mse")))
    step = golden(cfg, case)
    assert not step.any_overflow
    status, got = simulate(cfg, case)
    check_step(cfg, case, status[0], got, step)


@pytest.mark.parametrize("rounding", ["half_even", "floor"])
def test_rounding_modes(rounding):
    cfg = LearnerConfig(**TINY, sub_batch=2, rounding=rounding)
    case = random_case(cfg, 5, np.random.default_rng(len(rounding)))
    step = golden(cfg, case)
    status, got = simulate(cfg, case)
    check_step(cfg, case, status[0], got, step)


@pytest.mark.parametrize("loss", ["dqn", "mse"])
def test_saturation_matches_and_flags(loss):
    """Weights at 8x PyTorch's range, inputs at ±20, a large learning rate: values saturate
    in FW, LOSS, BW, WA and WU; the RTL saturates the same values and raises the same flags."""
    cfg = LearnerConfig(**TINY, sub_batch=2, loss=loss, acc_width=32)
    rng = np.random.default_rng(5)
    case = random_case(cfg, 4, rng, scale=8.0, lr=0.9)
    act = cfg.numerics.act_format
    case.obs = act.quantize(rng.uniform(-20, 20, case.obs.shape))
    if loss == "dqn":
        case.next_obs = act.quantize(rng.uniform(-20, 20, case.next_obs.shape))
        case.rewards = act.quantize(rng.uniform(-30, 30, case.batch))
    else:
        case.targets = act.quantize(rng.uniform(-30, 30, case.targets.shape))
    step = golden(cfg, case)
    flagged = {k for k, v in step.overflow.items() if v}
    assert {"fw", "delta", "wu"} <= flagged, step.overflow
    status, got = simulate(cfg, case)
    check_step(cfg, case, status[0], got, step)


def test_steps_in_a_row_reduce_the_loss():
    """Three steps on one batch; the weights stay on chip between them."""
    cfg = LearnerConfig(sizes=(3, 6, 2), array=2, max_batch=8, sub_batch=4)
    case = random_case(cfg, 8, np.random.default_rng(3), lr=0.1)
    weights, losses = case.weights, []
    for _ in range(3):
        step = golden(cfg, case, weights)
        losses.append(step.loss_sum)
        weights = step.weights
    status, got = simulate(cfg, case, steps=3)
    assert [s["loss_sum"] for s in status] == losses
    assert losses[2] < losses[1] < losses[0]
    check_step(cfg, case, status[-1], got, step)


def test_array_of_four():
    cfg = LearnerConfig(sizes=(3, 5, 2), array=4, max_batch=8, sub_batch=4)
    case = random_case(cfg, 7, np.random.default_rng(44))
    step = golden(cfg, case)
    status, got = simulate(cfg, case)
    check_step(cfg, case, status[0], got, step)


def test_bad_batch_size_touches_nothing():
    cfg = LearnerConfig(**TINY, sub_batch=2)
    case = random_case(cfg, 4, np.random.default_rng(1))
    dut = LearnerCore(cfg)
    out = {}

    async def bench(ctx):
        host = CoreHost(cfg, dut, ctx)
        for name, img in input_images(cfg, case).items():
            await host.write(name, img)
        for bad in (0, cfg.max_batch + 1):
            ctx.set(dut.args.batch_size, bad)
            await ctx.tick()                # the arguments stable the cycle before start
            ctx.set(dut.ctrl.start, 1)
            await ctx.tick()
            ctx.set(dut.ctrl.start, 0)
            assert ctx.get(dut.ctrl.done) and ctx.get(dut.ctrl.error) == 1
            assert not ctx.get(dut.ctrl.busy)
            await ctx.tick()
            assert not ctx.get(dut.ctrl.busy) and not ctx.get(dut.ctrl.done)
        out["w0"] = await host.read_matrix("w0", 4)
        out["q"] = await host.read_matrix("q", 4)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    np.testing.assert_array_equal(out["w0"], case.weights[0])
    assert not out["q"].any()


def test_host_port_edges():
    """Result regions ignore host writes; addresses past a region's words read 0 and ignore
    writes; the port is disabled during a step."""
    cfg = LearnerConfig(**TINY, sub_batch=2)
    dut = LearnerCore(cfg)
    DB = cfg.axi_data_width // 8
    from sw.learner.layout import region, region_bytes, sub_words

    async def bench(ctx):
        host = CoreHost(cfg, dut, ctx)
        ones = b"\xff" * DB
        await host.write("q", ones)                                 # result: ignored
        assert not (await host.read_matrix("q", 2)).any()
        r = region(cfg, "w1")
        past = region_base(cfg, "w1") + r.depth(cfg) * sub_words(cfg, r) * DB
        assert past < region_base(cfg, "w1") + region_bytes(cfg)
        ctx.set(dut.host.addr, past // DB)
        ctx.set(dut.host.we, (1 << DB) - 1)
        ctx.set(dut.host.wdata, (1 << cfg.axi_data_width) - 1)
        await ctx.tick()
        ctx.set(dut.host.we, 0)
        await host.write("w1", ones)                                # first word of w1: all 1s
        assert await host.read_words(past // DB, 1) == bytes(DB)
        w1 = await host.read_matrix("w1", 5)
        assert (w1[:2, :2] == -1).all() and not w1[2:].any()       # block (0, 0) only
        assert ctx.get(dut.host.enable)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("B", range(1, 9))
def test_cycle_model_every_batch_size(B):
    """The cycles of a step equal the model for every batch size of a configuration (full,
    partial and single-sample sub-batches), and the results stay bit-exact."""
    cfg = LearnerConfig(sizes=(2, 3, 2), array=2, max_batch=8, sub_batch=4)
    case = random_case(cfg, B, np.random.default_rng(B))
    status, got = simulate(cfg, case, read=["w0", "w1"])
    check_step(cfg, case, status[0], got, golden(cfg, case))


def test_batch_sizes_change_between_steps():
    """Steps of 8, 3 and 6 samples in a row (new batches, the weights stay on chip): rows left
    by a larger batch never leak into a smaller one. 32-bit host port (several words per
    block)."""
    cfg = LearnerConfig(sizes=(3, 5, 2), array=2, max_batch=8, sub_batch=4, axi_data_width=32)
    rng = np.random.default_rng(12)
    cases = [random_case(cfg, B, rng) for B in (8, 3, 6)]
    for case in cases[1:]:                     # one target network, loaded once
        case.target_weights = cases[0].target_weights
    dut = LearnerCore(cfg)
    got = []

    async def bench(ctx):
        host = CoreHost(cfg, dut, ctx)
        for i, case in enumerate(cases):
            for name, img in input_images(cfg, case, weights=i == 0).items():
                await host.write(name, img)
            status = await host.step(case)
            regs = {name: await host.read_matrix(name, region_rows(cfg, name, case.batch))
                    for name in ("q", "h0", "delta0", "delta1", "grad0", "grad1", "w0", "w1")}
            got.append((status, regs))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    weights = cases[0].weights
    for case, (status, regs) in zip(cases, got):
        step = golden(cfg, case, weights)
        check_step(cfg, case, status, regs, step)
        weights = step.weights


@pytest.mark.parametrize("dp,B,loss", [(2, 8, "dqn"), (2, 3, "mse"), (2, 2, "dqn"),
                                       (4, 7, "dqn"), (4, 8, "mse")])
def test_data_parallel_pipelines(dp, B, loss):
    """dp pipelines take sub-batches round robin (B = 2 leaves pipeline 1 idle, B = 7 gives
    pipeline 3 a partial one); WU adds their scratchpads; the host reads the batch's results
    sample-indexed as with one pipeline."""
    cfg = LearnerConfig(**TINY, sub_batch=2, dp=dp, loss=loss)
    case = random_case(cfg, B, np.random.default_rng(10 * dp + B))
    step = golden(cfg, case)
    status, got = simulate(cfg, case)
    check_step(cfg, case, status[0], got, step)


def test_data_parallel_three_layers():
    cfg = LearnerConfig(sizes=(5, 6, 4, 3), array=2, max_batch=12, sub_batch=2, dp=2)
    case = random_case(cfg, 11, np.random.default_rng(77))
    status, got = simulate(cfg, case)
    check_step(cfg, case, status[0], got, golden(cfg, case))


def test_data_parallel_reduction_saturates_like_the_golden():
    """8-bit operands, 16-bit scratchpads: a case whose per-pipeline gradients fit but whose
    sum does not. The reduction saturates in pipeline order and raises WA_OVERFLOW."""
    from sw.learner.gemm import gemm_fixed

    cfg = LearnerConfig(sizes=(3, 4, 2), array=2, max_batch=4, sub_batch=2, dp=2, loss="mse",
                        width=8, act_frac=4, weight_frac=5, grad_frac=4, acc_width=16,
                        lr_width=16, lr_frac=16)
    num = cfg.numerics
    act = num.act_format
    rng = np.random.default_rng(0)
    for _ in range(200):
        case = random_case(cfg, 4, rng, scale=2.0, lr=0.01)
        case.obs = act.quantize(rng.uniform(2, 7, case.obs.shape))
        case.targets = act.quantize(rng.uniform(-8, -6, case.targets.shape))
        step = golden(cfg, case)
        tu = num.tensor_unit("wa")
        fits, reduced = True, False
        for l in range(2):
            parts = [gemm_fixed(step.inputs[l][i:i + 2].T, step.deltas[l][i:i + 2], tu,
                                return_overflow=True) for i in (0, 2)]
            fits &= not any(o.any() for _, o in parts)
            total = parts[0][0] + parts[1][0]
            reduced |= bool((total != step.grads[l]).any())
        if fits and reduced:
            break
    else:
        raise AssertionError("no case found")
    assert step.overflow["wa"]
    status, got = simulate(cfg, case)
    check_step(cfg, case, status[0], got, step)


@pytest.mark.parametrize("dp", [1, 2])
def test_target_sync_period_and_forced(dp):
    """SYNC_PERIOD = 3 and a forced sync on step 5 over seven steps on one batch: tw<l> holds
    the updated weights exactly after the syncing steps (and is unchanged otherwise), every
    step bit-exact against the golden chain, the counter and ``synced`` as
    :class:`sw.learner.mlp.TargetSync` says, and a sync costs no cycles."""
    from sw.learner.mlp import TargetSync

    cfg = LearnerConfig(sizes=(3, 5, 2), array=2, max_batch=8, sub_batch=2, dp=dp)
    case = random_case(cfg, 6, np.random.default_rng(31 + dp), lr=0.1)
    forced = {4}
    dut = LearnerCore(cfg)
    got = []
    period = 3

    async def bench(ctx):
        host = CoreHost(cfg, dut, ctx)
        for name, img in input_images(cfg, case).items():
            await host.write(name, img)
        # A refused start (bad batch size) counts no step.
        ctx.set(dut.args.batch_size, 0)
        ctx.set(dut.args.sync_period, period)
        await ctx.tick()
        ctx.set(dut.ctrl.start, 1)
        await ctx.tick()
        ctx.set(dut.ctrl.start, 0)
        await ctx.tick()
        assert ctx.get(dut.status.sync_count) == 0 and not ctx.get(dut.status.status_target_synced)
        for i in range(7):
            case.sync_target = i in forced
            status = await host.step(case, period=period)
            regs = {n: await host.read_matrix(n, region_rows(cfg, n, case.batch))
                    for n in ("w0", "w1", "tw0", "tw1", "tq")}
            got.append((status, regs))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    rule = TargetSync(period)
    w, tw = case.weights, case.target_weights
    synced = []
    for i, (status, regs) in enumerate(got):
        due = rule.step(i in forced)
        step = golden(cfg, case, w, target_weights=tw, sync=due)
        case.sync_target = i in forced
        check_step(cfg, case, status, regs, step)
        assert status["sync_count"] == rule.count
        synced.append(due)
        if not due:
            for l in range(2):
                np.testing.assert_array_equal(regs[f"tw{l}"], tw[l])
        w, tw = step.weights, step.next_target_weights
    assert synced == [False, False, True, False, True, False, False]
    for l in range(2):
        np.testing.assert_array_equal(got[4][1][f"tw{l}"], got[4][1][f"w{l}"])


def test_target_sync_golden_rule():
    from sw.learner.mlp import TargetSync

    r = TargetSync(1)
    assert [r.step() for _ in range(3)] == [True] * 3 and r.count == 0
    r = TargetSync(0)
    assert [r.step() for _ in range(3)] == [False] * 3 and r.count == 3
    assert r.step(True) and r.count == 0
    r = TargetSync(2, count=5)                  # count already past a shortened period
    assert r.step() and r.count == 0
    r = TargetSync(0, count=0xFFFF)
    assert not r.step() and r.count == 0xFFFF   # saturates
    with pytest.raises(ValueError, match="period must be an integer in 0..65535"):
        TargetSync(1 << 16)


@pytest.mark.parametrize("loss,stage_arrays", [
    ("dqn", "fw:2x4,tfw:4x2,bw:2x2,wa:2x4"),
    ("mse", "fw0:2x2,fw1:4x2,bw1:2x4,wa0:4x2,wa1:2x2"),
    ("dqn", "fw:4x2,tfw1:2x2,wa:2x2"),
])
def test_per_stage_arrays(loss, stage_arrays):
    """Per-stage R × C tensor units on 4 × 4 blocks (tiles that take a chunk of a block's row
    or column, results written into lane groups of a block row): bit-exact, and the cycles
    are the per-stage model's (which differ from the all-4 × 4 pipeline's)."""
    cfg = LearnerConfig(sizes=(3, 6, 5, 2), array=4, max_batch=12, sub_batch=4, loss=loss,
                        stage_arrays=stage_arrays)
    case = random_case(cfg, 11, np.random.default_rng(len(stage_arrays)))
    step = golden(cfg, case)
    assert not step.any_overflow
    status, got = simulate(cfg, case)
    check_step(cfg, case, status[0], got, step)
    plain = LearnerConfig(sizes=(3, 6, 5, 2), array=4, max_batch=12, sub_batch=4, loss=loss)
    assert step_cycles(cfg, 11) != step_cycles(plain, 11)


def test_per_stage_arrays_data_parallel():
    cfg = LearnerConfig(sizes=(3, 5, 2), array=4, max_batch=16, sub_batch=4, dp=2,
                        stage_arrays="fw:2x4,bw:4x2,wa1:2x2")
    case = random_case(cfg, 14, np.random.default_rng(9))
    status, got = simulate(cfg, case)
    check_step(cfg, case, status[0], got, golden(cfg, case))


@pytest.mark.parametrize("B,sub_batch,dp", [(7, 2, 1), (8, 4, 2)])
def test_loss_weights_bit_exact(B, sub_batch, dp):
    """Random per-sample loss weights (a 0, the smallest, 1.0 among them) on 5-6-4-3 (LOSS
    over two groups): δ = round(w·(Q - y)) and everything after it bit-exact, the loss sum
    unweighted, the cycles those of the unweighted step."""
    cfg = LearnerConfig(sizes=(5, 6, 4, 3), array=2, max_batch=8, sub_batch=sub_batch, dp=dp)
    case = random_case(cfg, B, np.random.default_rng(B + dp), lr=0.1, weighted=True)
    step = golden(cfg, case)
    assert not step.any_overflow
    plain = golden(cfg, replace(case, loss_weights=None))
    assert step.loss_sum == plain.loss_sum
    assert not np.array_equal(step.deltas[-1], plain.deltas[-1])
    status, got = simulate(cfg, case)
    check_step(cfg, case, status[0], got, step)
