"""Helpers of the learner's stage sequencers and buffers in Amaranth's simulator (fast tier):
the constant compares, the or of many words, the priority select of a shared port, the item
counter's lookahead and the registered dependency flags against the compare they replace."""

import itertools

import numpy as np
import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from rtl_gen.learner.stages.buffers import (OR_CHAIN_MAX, gt_const, lt_const_registered, or_all,
                                           select)
from rtl_gen.learner.stages.common import (ItemCounter, StageContext, StageStatus, deps_ready,
                                           lookahead_of)
from sw.learner.spec import LearnerConfig


def _run(m, bench, clock=True):
    sim = Simulator(m)
    if clock:
        sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("width", [1, 4, 9])
def test_gt_const_is_unsigned_greater_than(width):
    x = Signal(width)
    consts = sorted({-1, 0, 1, 2, (1 << width) - 2, (1 << width) - 1, 1 << width, 5, 200})
    m = Module()
    outs = {}
    for c in consts:
        outs[c] = Signal(name=f"gt_{c + 1}")
        m.d.comb += outs[c].eq(gt_const(x, c))

    async def bench(ctx):
        for v in range(1 << width):
            ctx.set(x, v)
            for c, o in outs.items():
                assert ctx.get(o) == int(v > c), (v, c)
    _run(m, bench, clock=False)


@pytest.mark.parametrize("width,chunk", [(1, 5), (4, 2), (10, 5), (11, 5), (9, 3)])
def test_lt_const_registered_is_unsigned_less_than_a_cycle_later(width, chunk):
    x = Signal(width)
    consts = sorted({-1, 0, 1, 2, 17, 32, 64, 272, (1 << width) - 1, 1 << width, 1 << (width + 1)})
    m = Module()
    outs = {}
    for c in consts:
        outs[c] = Signal(name=f"lt_{c + 1}")
        m.d.comb += outs[c].eq(lt_const_registered(m, x, c, name=f"lt_{c + 1}", chunk=chunk))
    rng = np.random.default_rng(width)
    values = range(1 << width) if width <= 11 else rng.integers(0, 1 << width, 4096)

    async def bench(ctx):
        for v in values:
            ctx.set(x, int(v))
            await ctx.tick()
            for c, o in outs.items():
                assert ctx.get(o) == int(v < c), (v, c)
    _run(m, bench)


@pytest.mark.parametrize("count", [0, 1, OR_CHAIN_MAX, OR_CHAIN_MAX + 1, 3000])
def test_or_all_is_the_or_of_any_number_of_words(count):
    # 3000 words: a chain that deep exceeds Python's recursion limit in Amaranth's checks (a
    # learner whose host port ors that many region pieces); beyond OR_CHAIN_MAX it is a tree.
    words = [Signal(6, name=f"w{i}") for i in range(count)]
    out = Signal(6)
    m = Module()
    m.d.comb += out.eq(or_all(words))
    rng = np.random.default_rng(count)

    async def bench(ctx):
        for _ in range(4):
            vals = [int(x) for x in rng.integers(0, 64, count) * (rng.random(count) < 0.01)]
            for w, v in zip(words, vals):
                ctx.set(w, v)
            want = 0
            for v in vals:
                want |= v
            assert ctx.get(out) == want

    _run(m, bench, clock=False)


def test_select_takes_the_first_user_by_default():
    sels = [Signal(name=f"sel{i}") for i in range(3)]
    out = Signal(4)
    m = Module()
    m.d.comb += out.eq(select([(sels[0], 1), (sels[1], 2), (sels[2], 3)]))

    async def bench(ctx):
        for bits in itertools.product((0, 1), repeat=3):
            if bits[1] and bits[2]:
                continue                    # the selects are never high together
            for s, b in zip(sels, bits):
                ctx.set(s, b)
            # The first user's select is not used: its value whenever no other select is high.
            assert ctx.get(out) == (3 if bits[2] else 2 if bits[1] else 1), bits
    _run(m, bench, clock=False)


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
@pytest.mark.usefixtures("collect_components")
def test_item_counter_checks_lookahead_and_lookahead_of():
    cfg = LearnerConfig(sizes=(3, 4, 2), array=2, max_batch=8, sub_batch=2)
    ctx = StageContext(config=cfg, buffers=None, busy=Signal(), clear=Signal(),
                       batch_size=Signal(13), eta=None, gamma=None, sync_now=None)
    m = Module()
    with pytest.raises(ValueError, match="lookahead must be 0, 1 or 2, not 3"):
        ItemCounter(m, ctx, "x", 0, lookahead=3)
    assert [lookahead_of(r) for r in (1, 2, 4, 8)] == [0, 1, 2, 2]


@pytest.mark.parametrize("lookahead,gap", [(0, 1), (1, 2), (2, 3)])
def test_item_counter_shadows_follow_rem(lookahead, gap):
    """Advancing every ``gap`` cycles (the least the lookahead allows), the derived registers
    always hold their value for the current item: ``cnt = min(m, rem)``, ``more = rem > 0``."""
    cfg = LearnerConfig(sizes=(3, 4, 2), array=2, max_batch=64, sub_batch=4, dp=2)
    busy, clear, bs, adv = Signal(), Signal(), Signal(13), Signal()
    ctx = StageContext(config=cfg, buffers=None, busy=busy, clear=clear, batch_size=bs,
                       eta=None, gamma=None, sync_now=None)
    m = Module()
    items = ItemCounter(m, ctx, "it", 1, lookahead=lookahead)
    with m.If(~clear & adv):
        m.d.sync += items.advance()

    async def bench(ctx_):
        for batch in (1, 4, 5, 9, 23, 64):
            ctx_.set(bs, batch)
            await ctx_.tick()               # B stable the cycle before clear
            ctx_.set(clear, 1)
            await ctx_.tick()
            ctx_.set(clear, 0)
            for _ in range(gap - 1):
                await ctx_.tick()
            for p in range(10):
                rem = batch - (1 + 2 * p) * 4
                assert ctx_.get(items.cnt) == max(0, min(4, rem)) or rem <= 0, (batch, p)
                assert ctx_.get(items.more) == int(rem > 0), (batch, p)
                assert ctx_.get(items.rem) == rem
                ctx_.set(adv, 1)
                await ctx_.tick()
                ctx_.set(adv, 0)
                for _ in range(gap - 1):
                    await ctx_.tick()
    _run(m, bench)


def test_deps_ready_is_done_not_equal_p():
    """The registered flags equal ``done != p`` in every cycle, for random producer events
    and consumer advances (an advance only while the flag is high)."""
    cfg = LearnerConfig(sizes=(3, 4, 2), array=2, max_batch=8, sub_batch=2)
    clear = Signal()
    ctx = StageContext(config=cfg, buffers=None, busy=Signal(), clear=clear,
                       batch_size=Signal(13), eta=None, gamma=None, sync_now=None)
    m = Module()
    done = [Signal(13, name=f"done{i}") for i in range(2)]
    ev = [Signal(name=f"ev{i}") for i in range(2)]
    p, adv = Signal(13), Signal()
    for d, e in zip(done, ev):
        with m.If(clear):
            m.d.sync += d.eq(0)
        with m.Elif(e):
            m.d.sync += d.eq(d + 1)
    with m.If(clear):
        m.d.sync += p.eq(0)
    with m.Elif(adv):
        m.d.sync += p.eq(p + 1)
    producers = {f"s{i}": StageStatus(done=d, all=Signal(), event=e)
                 for i, (d, e) in enumerate(zip(done, ev))}
    stub = StageStatus(done=Signal(13, init=(1 << 13) - 1), all=Signal())     # no event
    ready = Signal()
    m.d.comb += ready.eq(deps_ready(m, ctx, "c", {**producers, "stub": stub}, p, adv))
    rng = np.random.default_rng(7)

    async def bench(ctx_):
        ctx_.set(clear, 1)
        await ctx_.tick()
        ctx_.set(clear, 0)
        for _ in range(400):
            want = all(ctx_.get(d) != ctx_.get(p) for d in done)
            assert ctx_.get(ready) == int(want)
            for e in ev:
                ctx_.set(e, int(rng.random() < 0.3))
            ctx_.set(adv, int(want and rng.random() < 0.5))
            await ctx_.tick()
    _run(m, bench)
