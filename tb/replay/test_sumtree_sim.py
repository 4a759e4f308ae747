"""Sum tree RTL in Amaranth's simulator (fast tier): tiny trees (K in {2, 4}, N in {1, 5, 16,
17}), every response and flag against :class:`sw.replay.sumtree.FixedSumTree`, exact cycle
counts, hazards of back-to-back operations, back-pressure, RESET, the PRNG."""

import gc
import random
import warnings

import numpy as np
import pytest
from amaranth.hdl import UnusedElaboratable
from amaranth.sim import Simulator

from rtl_gen.replay import SumTree, SumTreeLevel, Xorshift32
from sw.replay.spec import SumTreeConfig
from sw.replay.spec import XORSHIFT32_ZERO_SEED
from sw.replay.sumtree import xorshift32
from sumtree_ref import (OP, RESPONDING, Codec, Reference, check_tree_dump, debug, dump, insert,
                         random_ops, read, reset, sample, sample_prng, update)

SEED = 20261122


def tiny(fanout, capacity, **kw):
    params = dict(fanout=fanout, capacity=capacity, priority_width=10, priority_frac=3,
                  input_guard_bits=2, target_bits=12)
    params.update(kw)
    return SumTreeConfig(**params)


def simulate(cfg, batches, *, idle=0.0, stall=0.0, seed=0, prng_seed=None):
    """Run command batches through a fresh :class:`SumTree`.

    ``batches`` is a list of command lists; between two batches the bench waits until ``busy``
    is low and records flags and status (a list ``snapshots``, one per batch). Each batch may be
    preceded by a ``("clear",)`` entry instead, which pulses ``clear``. Returns a dict with
    ``responses``, ``cin``/``cout`` (cycles of command and response transfers, from the end of
    the clearing sweep), ``done`` (cycle at which ``busy`` fell after each batch), ``sweep``
    (cycles until ``cmd.ready`` rose) and ``snapshots``.
    """
    dut = SumTree(cfg)
    codec = Codec(cfg)
    rng = random.Random(seed)
    res = {"responses": [], "cin": [], "cout": [], "done": [], "snapshots": [],
           "latency": dut.latency}

    def snapshot(ctx):
        return {"flags": {f: ctx.get(getattr(dut, f)) for f in ("empty", "saturated", "invalid")},
                "status": {f: ctx.get(getattr(dut, f))
                           for f in ("total", "max_priority", "write_pointer", "size")}}

    async def bench(ctx):
        if prng_seed is not None:
            ctx.set(dut.seed, prng_seed)
            ctx.set(dut.seed_load, 1)
            await ctx.tick().repeat(3)              # the seed, stable for two cycles, loads
            ctx.set(dut.seed_load, 0)
        sweep = 3 if prng_seed is not None else 0     # (the seed loads during the sweep)
        while not ctx.get(dut.cmd.ready):
            await ctx.tick()
            sweep += 1
        res["sweep"] = sweep
        cycle = 0
        for batch in batches:
            if batch == ("clear",):
                ctx.set(dut.clear, 1)
                await ctx.tick()
                ctx.set(dut.clear, 0)
                cycle += 1
                continue
            words = [codec.encode(c) for c in batch]
            n_rsp = sum(c[0] in RESPONDING for c in batch)
            sent, got = 0, 0
            while sent < len(words) or got < n_rsp:
                offer = sent < len(words) and not (idle and rng.random() < idle)
                ready = not (stall and rng.random() < stall)
                ctx.set(dut.cmd.valid, offer)
                if offer:
                    ctx.set(dut.cmd.payload.as_value(), words[sent])
                ctx.set(dut.rsp.ready, ready)
                _, _, c_ready, r_valid, r_payload = await ctx.tick().sample(
                    dut.cmd.ready, dut.rsp.valid, dut.rsp.payload)
                if offer and c_ready:
                    res["cin"].append(cycle)
                    sent += 1
                if ready and r_valid:
                    res["responses"].append(codec.decode(r_payload.as_value().value))
                    res["cout"].append(cycle)
                    got += 1
                cycle += 1
                assert cycle < 50 * (len(words) + 50), "timeout"
            ctx.set(dut.cmd.valid, 0)
            ctx.set(dut.rsp.ready, 1)
            while ctx.get(dut.busy):
                await ctx.tick()
                cycle += 1
            res["done"].append(cycle)
            res["snapshots"].append(snapshot(ctx))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return res


def expect(cfg, batches, *, prng_seed=0):
    """The reference's responses and per-batch snapshots for :func:`simulate`'s batches."""
    ref = Reference(cfg, seed=prng_seed)
    responses, snapshots = [], []
    for batch in batches:
        if batch == ("clear",):
            ref.clear_flags()
            continue
        responses += ref.run(batch)
        snapshots.append({"flags": ref.flags, "status": ref.status})
    return responses, snapshots, ref


def check_run(cfg, batches, *, prng_seed=0, **kw):
    got = simulate(cfg, batches, prng_seed=prng_seed, **kw)
    assert got["latency"] == cfg.latency
    want, snaps, ref = expect(cfg, batches, prng_seed=prng_seed)
    assert len(got["responses"]) == len(want)
    for n, (g, w) in enumerate(zip(got["responses"], want)):
        assert g == w, f"response {n}: rtl {g} golden {w}"
    assert got["snapshots"] == snaps
    return got, ref


# -- every operation, random mixes --------------------------------------------------------------
SHAPES = [(k, n) for k in (2, 4) for n in (1, 5, 16, 17)]


@pytest.mark.parametrize("fanout,capacity", SHAPES, ids=[f"k{k}-n{n}" for k, n in SHAPES])
def test_random_ops_match_golden(fanout, capacity):
    """Random mixes of all operations with idles and back-pressure; the tree dumped at the end
    through DEBUG reads equals the golden tree and satisfies the invariant."""
    cfg = tiny(fanout, capacity)
    rng = np.random.default_rng(SEED + 10 * fanout + capacity)
    batches = [random_ops(cfg, rng, 250), random_ops(cfg, rng, 150, small=True),
               [reset()] + random_ops(cfg, rng, 100, mix={"insert": 4, "insert_max": 2}),
               dump(cfg)]
    got, ref = check_run(cfg, batches, prng_seed=int(rng.integers(1 << 32)), idle=0.2,
                         stall=0.2, seed=capacity)
    n_dump = len(dump(cfg))
    check_tree_dump(cfg, got["responses"][-n_dump:], ref)


CORNERS = [
    dict(fanout=2, capacity=5, priority_width=2, priority_frac=1, input_guard_bits=0,
         target_bits=1),                                  # 1-bit targets, 2-bit leaves
    dict(fanout=4, capacity=17, priority_width=30, priority_frac=0, input_guard_bits=16,
         target_bits=32),                                 # full PRNG word, 2 x 2 partial products
    dict(fanout=4, capacity=4, priority_width=5, priority_frac=2, input_guard_bits=1,
         target_bits=7, max_batch=3),                     # one level, all leaves in one group
]


@pytest.mark.parametrize("params", CORNERS, ids=["tiny-widths", "wide", "one-level"])
def test_width_corners(params):
    cfg = SumTreeConfig(**params)
    rng = np.random.default_rng(SEED + cfg.priority_width)
    batches = [random_ops(cfg, rng, 300), dump(cfg)]
    got, ref = check_run(cfg, batches, prng_seed=int(rng.integers(1 << 32)))
    check_tree_dump(cfg, got["responses"][-len(dump(cfg)):], ref)


def test_back_to_back_hazards():
    """The same leaf, siblings and a shared ancestor updated on consecutive cycles, each
    followed at once by reads and samples: forwarding of the old leaf value and of every
    level's read-modify-write."""
    cfg = tiny(2, 16)
    cmds = []
    for v in (5, 9, 0, 1023, 7, 7, 3):                 # same leaf back to back
        cmds.append(update(6, v))
    cmds += [read(6), sample(0), sample(4095)]
    for i, v in zip((0, 1, 2, 3, 0, 1), (4, 4, 4, 4, 1, 2)):   # siblings, shared ancestors
        cmds += [update(i, v), sample(2048)]
    cmds += [update(15, 11), read(15), update(15, 12), read(15), sample_prng(), update(15, 0),
             sample(4095), read(15)]
    cmds += [insert(3), insert(), insert(4095), insert(), read(0), read(1), read(2), read(3)]
    for i in range(16):
        cmds += [update(i, i), update(i, i + 1)]
    cmds += [sample(x) for x in range(0, 4096, 97)]
    check_run(cfg, [cmds, dump(cfg)])


@pytest.mark.parametrize("fanout, capacity", [(2, 16), (16, 200)])
def test_old_leaf_forwarded_at_every_distance(fanout, capacity):
    """An update, insert or read of a leaf written ``d`` operations earlier, for every ``d``
    up to past the tree's latency: the old leaf value comes from each stage in turn (stage
    A's hit registers, one per record in flight), then from the lookup port."""
    cfg = tiny(fanout, capacity)
    leaf, other = 5, capacity - 1
    cmds = [update(other, 1)]
    for d in range(1, cfg.latency + 3):
        cmds += [update(leaf, d % 50 + 1)] + [read(other)] * (d - 1)
        cmds += [update(leaf, d % 50 + 60), read(leaf), sample(d * 37 % 4096)]
    cmds += [insert() for _ in range(leaf + 1)]           # the write pointer reaches the leaf
    cmds += [update(leaf, 3), insert(7), read(leaf)]
    check_run(cfg, [cmds, dump(cfg)])


def test_empty_tree_flags_and_keeps_the_prng():
    """Samples of an all-zero tree respond ``empty``, raise the flag and draw no PRNG word."""
    cfg = tiny(4, 5)
    batches = [[sample(100), sample_prng(), sample_prng(), read(2)],
               ("clear",),
               [update(3, 8), sample_prng(), sample_prng(), update(3, 0), sample_prng(),
                sample(0)],
               ("clear",),
               [update(4, 1), sample_prng()]]
    got, _ = check_run(cfg, batches, prng_seed=12345)
    flags = [s["flags"]["empty"] for s in got["snapshots"]]
    assert flags == [1, 1, 0]
    assert got["responses"][0][3] == 1 and got["responses"][-1] == (OP.SAMPLE_PRNG.value, 4, 1,
                                                                    0, 0)


def test_saturation_and_invalid_flags():
    cfg = tiny(4, 17)
    top = cfg.input_format.max_raw
    batches = [[update(1, cfg.priority_format.max_raw), read(1)],
               [update(2, top), insert(top - 1), insert(), read(2)],
               ("clear",),
               [update(17, 5), read(3)],
               ("clear",),
               [read(17), debug(2, 20), debug(3, 0), debug(1, 7), debug(0, 1)],
               ("clear",), [debug(3, 19), debug(2, 7), debug(1, 3)]]     # padding words
    got, _ = check_run(cfg, batches)
    flags = [(s["flags"]["saturated"], s["flags"]["invalid"]) for s in got["snapshots"]]
    assert flags == [(0, 0), (1, 0), (0, 1), (0, 1), (0, 0)]


def test_capacity_one():
    for k in (2, 4):
        cfg = tiny(k, 1)
        cmds = [sample(7), insert(), sample(0), sample(4095), update(0, 0), sample_prng(),
                insert(9), insert(), read(0), update(1, 3), read(1), sample(1)]
        check_run(cfg, [cmds, dump(cfg)])


def test_reset_op_clears_the_tree():
    cfg = tiny(2, 5)
    cmds = [insert(4), insert(9), update(4, 7), reset(), read(0), read(4), sample(100),
            insert(), update(2, 3), sample(4000)]
    got, ref = check_run(cfg, [cmds, dump(cfg)])
    assert ref.status["write_pointer"] == 1


# -- cycles ---------------------------------------------------------------------------------------
def test_latency_model():
    """The cycle model's numbers (the RTL is measured against them below): one prefix adder
    level per stage, five more stages per level, ten around the levels."""
    per_level = [SumTreeConfig(fanout=k, capacity=4096).level_latency for k in (2, 4, 8, 16,
                                                                                32, 64)]
    assert per_level == [6, 7, 8, 9, 10, 11]
    assert SumTreeConfig(fanout=16, capacity=1 << 16).latency == 9 * 4 + 10 == 46
    assert SumTreeConfig(fanout=2, capacity=16).latency == 6 * 4 + 10


@pytest.mark.parametrize("fanout,capacity", [(2, 17), (4, 16)])
def test_batches_take_b_plus_latency_cycles(fanout, capacity):
    """B operations of any kind: one command per cycle, each response ``latency`` cycles after
    its command; the batch is done (last response taken, ``busy`` low) ``B + latency`` cycles
    after it started, or ``B + latency - 1`` if it ends with an update (no response)."""
    cfg = tiny(fanout, capacity)
    latency = cfg.latency
    rng = np.random.default_rng(SEED)
    b = 40
    fill = [update(i, int(rng.integers(1, 1000))) for i in range(capacity)]
    samples = [sample(int(x)) for x in rng.integers(0, 1 << 12, b)] + [sample_prng()] * b
    updates = [update(int(i), int(v)) for i, v in zip(rng.integers(0, capacity, b),
                                                      rng.integers(0, 1000, b))]
    mixed = random_ops(cfg, rng, b, p_invalid=0)
    batches = [fill, samples, updates, mixed]
    got, _ = check_run(cfg, batches)
    cin, cout, done = (np.array(got[k]) for k in ("cin", "cout", "done"))
    pos = np.cumsum([0] + [len(x) for x in batches])
    for batch, start, end, d in zip(batches, pos[:-1], pos[1:], done):
        c = cin[start:end]
        assert (np.diff(c) == 1).all(), "a command waited"
        assert d - c[0] == len(batch) + latency - (batch[-1][0] not in RESPONDING)
    assert (cout == cin[[i for i, c in enumerate(sum(batches, [])) if c[0] in RESPONDING]]
            + latency).all()


def test_backpressure_loses_nothing():
    cfg = tiny(4, 17)
    rng = np.random.default_rng(SEED + 1)
    batches = [random_ops(cfg, rng, 200), dump(cfg)]
    check_run(cfg, batches, stall=0.7, idle=0.1, seed=3)


def test_response_queue_credits():
    """With ``rsp.ready`` low, exactly ``response_depth`` responding commands go into the
    pipeline, an UPDATE still does, the next sample waits (and the input buffer fills);
    released, the responses come out in order."""
    cfg = tiny(4, 16)
    dut = SumTree(cfg)
    codec = Codec(cfg)
    depth = dut.response_depth
    cmds = ([update(i, i + 1) for i in range(16)] + [sample(x) for x in range(0, 4000, 97)][:depth]
            + [update(3, 50), sample(4000), read(3), read(4), sample(7)])
    words = [codec.encode(c) for c in cmds]
    log = {"accepted": [], "responses": []}

    async def bench(ctx):
        while not ctx.get(dut.cmd.ready):
            await ctx.tick()
        ctx.set(dut.rsp.ready, 0)
        sent = 0
        for cycle in range(3 * len(cmds) + 100):
            if cycle == 2 * len(cmds) + 50:
                ctx.set(dut.rsp.ready, 1)
            ctx.set(dut.cmd.valid, sent < len(words))
            if sent < len(words):
                ctx.set(dut.cmd.payload.as_value(), words[sent])
            _, _, ready, r_valid, r_ready, payload = await ctx.tick().sample(
                dut.cmd.ready, dut.rsp.valid, dut.rsp.ready, dut.rsp.payload)
            if sent < len(words) and ready:
                log["accepted"].append(cycle)
                sent += 1
            if r_valid and r_ready:
                log["responses"].append(codec.decode(payload.as_value().value))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    acc = log["accepted"]
    assert len(acc) == len(cmds)
    # fill, the queue's worth, the UPDATE, the two commands the input buffer holds
    n_before = 16 + depth + 1 + dut.input_depth
    assert acc[n_before - 1] < 2 * len(cmds) + 50 <= acc[n_before], "credit limit not exact"
    assert log["responses"] == Reference(cfg).run(cmds)


def test_sweep_length():
    cfg = tiny(2, 17)
    got = simulate(cfg, [[read(0)]])
    assert got["sweep"] == cfg.level_groups[-1]


# -- PRNG, parameters -----------------------------------------------------------------------------
def test_xorshift32_component():
    dut = Xorshift32()
    seen = []

    async def bench(ctx):
        assert ctx.get(dut.state) == XORSHIFT32_ZERO_SEED
        for seed, steps in ((0, 3), (1, 5), (0xDEADBEEF, 4)):
            ctx.set(dut.seed, seed)
            await ctx.tick().repeat(2)              # the seed is stable two cycles before
            ctx.set(dut.load, 1)
            await ctx.tick()
            ctx.set(dut.load, 0)
            ctx.set(dut.step, 1)
            for _ in range(steps):
                seen.append((seed, ctx.get(dut.word)))
                await ctx.tick()
            ctx.set(dut.step, 0)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    for seed in (0, 1, 0xDEADBEEF):
        s, want = seed or XORSHIFT32_ZERO_SEED, []
        for _ in range(len([w for sd, w in seen if sd == seed])):
            s = xorshift32(s)
            want.append(s)
        assert [w for sd, w in seen if sd == seed] == want


def test_rejects_bad_parameters():
    cfg = tiny(2, 5)
    cases = [(lambda: SumTree({"fanout": 2}), TypeError, "config must be a SumTreeConfig"),
             (lambda: SumTreeLevel(cfg, level=0), ValueError,
              r"level must be an integer in 1\.\.3, not 0"),
             (lambda: SumTreeLevel(cfg, level=4), ValueError,
              r"level must be an integer in 1\.\.3, not 4"),
             (lambda: SumTreeLevel(cfg, level=True), ValueError,
              r"level must be an integer in 1\.\.3, not True")]
    with warnings.catch_warnings():      # the half-built components are never elaborated
        warnings.simplefilter("ignore", UnusedElaboratable)
        for build, exc, match in cases:
            with pytest.raises(exc, match=match):
                build()
        gc.collect()
