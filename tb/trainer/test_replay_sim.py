"""The trainer's replay side in Amaranth's simulator (fast tier): :class:`TrainerReplay` against
the golden core (:class:`sw.trainer.golden.TrainerCore`'s ``boundary``, ``sample`` and
``queue_priorities``) over random steps: producer advances with overruns, batch sizes that are
not powers of two, TD errors with zeros and both extremes, α, β and ε at their edges. After
every command the outputs (sampled slots and priorities, IS weights, new priorities), CONSUMED,
the queue, the tree's total and running maximum and the sticky flags equal the golden's, and
the command took exactly the cycles of the component's formulas; every few steps the tree's
leaves are read back (READ) and compared. A second run streams the TD errors with gaps while
the next BOUNDARY and SAMPLE run (delay >= 1)."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from rtl_gen.trainer.replay import (ReplayCmd, TrainerReplay, boundary_cycles, clear_cycles,
                                     read_cycles, sample_cycles, td_cycles)
from sw.learner.spec import LearnerConfig
from sw.replay.spec import SumTreeConfig
from sw.trainer.golden import LaunchArgs, TrainerCore
from sw.trainer.layout import storage_bytes
from sw.trainer.spec import TrainerCmd, TrainerConfig

pytestmark = [pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable"),
              pytest.mark.usefixtures("collect_components")]

SEED = 20261209
#: The outputs compared with the golden core's state after every command.
STATUS = ("consumed", "queued", "total", "max_priority", "saturated", "underflow", "overrun")


def small_config(delay=1, *, capacity=256, **tree):
    """The tests' trainer: a 4-16-2 learner (B up to 32), a 4-ary tree of 256 leaves."""
    return TrainerConfig(learner=LearnerConfig(sizes=(4, 16, 2), array=4, max_batch=32,
                                               sub_batch=8),
                         tree=SumTreeConfig(fanout=4, capacity=capacity, max_batch=32, **tree),
                         append_window=16, delay=delay)


class Bench:
    """Drives one :class:`TrainerReplay` in one testbench: commands one after another, TD
    errors fed from a queue in every cycle (with gaps at random when ``td_idle`` > 0), the
    outputs collected (``sample`` and ``weight`` stalled at random when ``stall`` > 0)."""

    def __init__(self, dut, rng, *, td_idle=0.0, stall=0.0):
        self.dut, self.rng, self.td_idle, self.stall = dut, rng, td_idle, stall
        self.cycle = 0
        self.td_queue = []
        self.samples, self.weights, self.priorities = [], [], []
        self.td_taken, self.td_done = [], []
        self.status = {}

    def _chance(self, p):
        return bool(p) and self.rng.random() < p

    async def tick(self, ctx):
        """One cycle; returns ``(cmd.ready, done)`` as sampled in it."""
        d = self.dut
        offer = bool(self.td_queue) and not self._chance(self.td_idle)
        ctx.set(d.td.valid, offer)
        if offer:
            ctx.set(d.td.payload, int(self.td_queue[0]))
        s_ready, w_ready = not self._chance(self.stall), not self._chance(self.stall)
        ctx.set(d.sample.ready, s_ready)
        ctx.set(d.weight.ready, w_ready)
        (_, _, c_ready, s_valid, s_pay, w_valid, w_pay, t_ready, done, td_done, p_valid,
         p_pay, *status) = await ctx.tick().sample(
            d.cmd.ready, d.sample.valid, d.sample.payload, d.weight.valid, d.weight.payload,
            d.td.ready, d.done, d.td_done, d.power.o.valid, d.power.o.payload,
            *(getattr(d, name) for name in STATUS))
        self.status = dict(zip(STATUS, status))
        if offer and t_ready:
            self.td_queue.pop(0)
            self.td_taken.append(self.cycle)
        if s_valid and s_ready:
            self.samples.append((s_pay.slot, s_pay.priority))
        if w_valid and w_ready:
            self.weights.append(w_pay)
        if p_valid:
            self.priorities.append(p_pay.value)
        if td_done:
            self.td_done.append(self.cycle)
        self.cycle += 1
        return c_ready, done

    async def command(self, ctx, op, *, word=0, count=0, coef=0, eps=0):
        """Send one command; returns its cycles (transfer to ``done``); ``start``: the
        transfer's cycle."""
        d = self.dut
        for name, v in (("op", op), ("word", word), ("count", count), ("coef", coef),
                        ("eps", eps)):
            ctx.set(getattr(d.cmd.payload, name), v)
        ctx.set(d.cmd.valid, 1)
        while True:
            ready, _ = await self.tick(ctx)
            if ready:
                break
        start = self.start = self.cycle - 1
        ctx.set(d.cmd.valid, 0)
        while True:
            _, done = await self.tick(ctx)
            if done:
                return self.cycle - 1 - start
            assert self.cycle - start < 20_000, f"{op} did not finish"

    async def wait_td(self, ctx, n):
        """Wait for the ``n``-th ``td_done`` since reset."""
        while len(self.td_done) < n:
            await self.tick(ctx)

    def quiet(self, ctx):
        """Whether the tree has no operation in flight and no TD batch is open."""
        return not (ctx.get(self.dut.tree.busy) or ctx.get(self.dut.td_busy))

    async def pulse_clear_flags(self, ctx):
        ctx.set(self.dut.clear_flags, 1)
        await self.tick(ctx)
        ctx.set(self.dut.clear_flags, 0)
        await self.tick(ctx)


class Checker:
    """The golden core beside the DUT, and the comparisons after each command. ``exact``: the
    cycles of every command equal the formulas (no stalls, commands one after another)."""

    def __init__(self, config, bench, rng, *, exact):
        self.cfg, self.bench, self.rng, self.exact = config, bench, rng, exact
        self.core = TrainerCore(config, np.zeros(storage_bytes(config), np.uint8))
        self.dut = bench.dut
        self.last_b = None              # B of the previous SAMPLE (the divider's cache)
        self.n_td = 0                   # TD commands sent
        self.want_prios = []            # every new priority, in order
        self.cycles = {}                # command -> cycles seen
        self.waited = {}                # command -> cycles beyond the formula
        self.seen = dict.fromkeys(("saturated", "underflow", "overrun", "skipped", "empty",
                                   "zero_weight_input"), 0)

    def _note(self, name, got, want):
        self.cycles.setdefault(name, []).append(got)
        self.waited.setdefault(name, []).append(got - want)
        if self.exact:
            assert got == want, f"{name}: {got} cycles, the formula says {want}"

    def state(self):
        """The status outputs in the last cycle simulated (a command's ``done`` cycle, in
        which the next command may be taken) against the golden core."""
        core = self.core
        want = dict(consumed=core.consumed, queued=len(core.pending), total=core.tree.total,
                    max_priority=core.tree.max_priority,
                    saturated=int(core.flags["saturated"]),
                    underflow=int(core.flags["underflow"]), overrun=int(core.flags["overrun"]))
        assert self.bench.status == want
        for f in ("saturated", "underflow", "overrun"):
            self.seen[f] += want[f]

    async def begin(self, ctx, *, clear=False, seed=0):
        """A launch's start: CLEAR (with ``seed``) if asked, the flags cleared."""
        b = self.bench
        self.core.begin(LaunchArgs(cmd=int(TrainerCmd.CLEAR) if clear else 0, seed=seed))
        if clear:
            idle = b.quiet(ctx)
            n = await b.command(ctx, ReplayCmd.CLEAR, word=seed)
            if idle:
                self._note("clear", n, clear_cycles(self.cfg))
        await b.pulse_clear_flags(ctx)
        self.state()

    async def boundary(self, ctx, producer):
        core, D = self.core, self.cfg.delay
        wb = 0
        if len(core.pending) > D:
            wb = len(core.pending[0][0])
            self.seen["skipped"] += int(core._host_window(core.pending[0][0]).sum())
        k = core.boundary(producer)
        n = await self.bench.command(ctx, ReplayCmd.BOUNDARY, word=producer)
        self._note("boundary", n, boundary_cycles(self.cfg, wb, k))
        self.state()
        return k

    async def sample(self, ctx, batch, beta):
        b = self.bench
        b.samples.clear()
        b.weights.clear()
        idx, prio, w = self.core.sample(batch, beta)
        n = await b.command(ctx, ReplayCmd.SAMPLE, count=batch, coef=beta)
        self._note("sample", n, sample_cycles(self.cfg, batch, batch != self.last_b,
                                                       empty=not idx.size))
        self.last_b = batch
        self.seen["empty"] += not idx.size
        assert b.samples == list(zip(idx.tolist(), prio.tolist()))
        assert b.weights == w.tolist()
        self.state()
        return idx

    async def td(self, ctx, idx, td, alpha, eps, *, wait=True):
        """TD errors of the last sample: the command, the errors queued for the feeder;
        ``wait``: until the priorities are in the queue (and the cycles)."""
        b = self.bench
        self.want_prios += self.core.queue_priorities(idx, td, alpha, eps).tolist()
        self.seen["zero_weight_input"] += int((td == 0).sum())
        b.td_taken.clear()
        b.td_queue.extend(int(v) for v in td)
        n = await b.command(ctx, ReplayCmd.TD, coef=alpha, eps=eps)
        self._note("td_handoff", n, 2)
        self.n_td += 1
        start = b.start
        if wait:
            await self.finish_td(ctx)
            if self.exact:
                assert b.td_taken == list(range(start + 2, start + 2 + len(td)))
            self._note("td", b.td_done[-1] - start, td_cycles(self.cfg, len(td)))
            self.state()

    async def finish_td(self, ctx):
        """Wait for the last TD's ``td_done``; every new priority so far equals the golden's
        (where the bench sees them)."""
        await self.bench.wait_td(ctx, self.n_td)
        if self.bench.priorities is not None:
            assert self.bench.priorities == self.want_prios

    async def leaves(self, ctx):
        """Read every leaf back (READ) and compare."""
        b, cap = self.bench, self.cfg.capacity
        b.samples.clear()
        n = await b.command(ctx, ReplayCmd.READ, word=0, count=cap)
        self._note("read", n, read_cycles(self.cfg, cap))
        assert [p for _, p in b.samples] == self.core.tree.leaves.tolist()
        assert [s for s, _ in b.samples] == list(range(cap))

    # -- random arguments --------------------------------------------------------------------
    def td_errors(self, batch):
        """Raw TD errors (the difference of two activations): zeros, both extremes, small and
        uniform values."""
        w = self.cfg.learner.numerics.act_format.width
        lo, hi = -(1 << w), (1 << w) - 1
        kind = self.rng.integers(0, 4, batch)
        v = np.where(kind == 0, 0, self.rng.integers(lo, hi + 1, batch))
        v = np.where(kind == 1, self.rng.integers(-8, 9, batch), v)
        v = np.where(kind == 2, self.rng.choice([lo, hi, lo + 1, -hi], batch), v)
        return v.astype(np.int64)

    def coef(self):
        one = 1 << self.cfg.coef_frac
        return int(self.rng.choice([0, round(0.4 * one), round(0.6 * one), one,
                                    int(self.rng.integers(0, one + 1))]))

    def eps(self):
        top = (1 << self.cfg.eps_format.width) - 1
        return int(self.rng.choice([0, 1, 7, int(self.rng.integers(0, 1 << 12)), top]))


def run(dut, script, *, seed, td_idle=0.0, stall=0.0):
    """Simulate ``script(ctx, checker)`` on ``dut``; returns the checker."""
    rng = np.random.default_rng(seed)
    bench = Bench(dut, rng, td_idle=td_idle, stall=stall)
    checker = Checker(dut.config, bench, rng, exact=not (td_idle or stall))

    async def testbench(ctx):
        while ctx.get(dut.busy):                # the tree's sweep after reset
            await bench.tick(ctx)
        await script(ctx, checker)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(testbench)
    try:
        sim.run()
    except AssertionError:
        print(f"seed {seed}, cycle {bench.cycle}")
        raise
    return checker


async def random_steps(ctx, ch, steps, *, overlap=False, leaves_every=8):
    """An empty tree's sample, the ring filled but for three windows, then ``steps`` trainer
    steps (boundary, sample, TD) in launches of 7 (a CLEAR and the fill again halfway), every
    leaf compared every ``leaves_every`` steps and at the end. ``overlap``: the TD errors
    stream while the next boundary and sample run."""
    cfg, rng = ch.cfg, ch.rng
    W, nmax = cfg.append_window, cfg.max_batch

    async def clear_and_fill():
        await ch.begin(ctx, clear=True, seed=int(rng.integers(0, 1 << 32)))
        await ch.boundary(ctx, ch.core.consumed)
        await ch.sample(ctx, 5, ch.coef())      # nothing to sample: the PRNG moves on
        for _ in range(cfg.capacity // W - 3):
            await ch.boundary(ctx, ch.core.consumed + W)

    await clear_and_fill()
    for step in range(steps):
        if step == steps // 2:
            await clear_and_fill()
        elif step and step % 7 == 0:
            await ch.begin(ctx, seed=int(rng.integers(0, 1 << 32)))
        pick = rng.random()
        ahead = (0 if pick < 0.1 else int(rng.integers(W + 1, 3 * W)) if pick < 0.25
                 else int(rng.integers(1, W + 1)))
        await ch.boundary(ctx, (ch.core.consumed + ahead) & 0xFFFFFFFF)
        batch = int(rng.choice([1, 2, 3, 5, 8, 13, 16, 31, nmax, ch.last_b or 7]))
        if batch == 1 and cfg.tree.target_bits == 32:
            batch = 2           # the golden's x·F overflows int64 at F = 2**32 (B = 1)
        idx = await ch.sample(ctx, batch, ch.coef())
        if idx.size:
            await ch.td(ctx, idx, ch.td_errors(batch), ch.coef(), ch.eps(), wait=not overlap)
        if step % leaves_every == leaves_every - 1:
            await ch.leaves(ctx)
    await ch.finish_td(ctx)
    await ch.leaves(ctx)


@pytest.mark.parametrize("delay", [1, 0])
def test_replay_matches_golden_steps_and_cycles(delay):
    """Commands one after another: every output and state as the golden's, exact cycles."""
    ch = run(TrainerReplay(small_config(delay)), lambda ctx, ch: random_steps(ctx, ch, 24),
             seed=SEED + delay)
    assert ch.seen["overrun"] and ch.seen["empty"] and (ch.seen["skipped"] or not delay)
    assert set(ch.cycles) == {"clear", "boundary", "sample", "td", "td_handoff", "read"}


def test_replay_narrow_priorities_and_coarse_fractions():
    """Leaves of 20 bits (priorities saturate), 8-bit fractions (B = 1 and the first stratum's
    target 0), 128 slots (the ring and the window wrap often), delay 2."""
    cfg = small_config(2, capacity=128, priority_width=20, target_bits=8)
    ch = run(TrainerReplay(cfg), lambda ctx, ch: random_steps(ctx, ch, 20), seed=SEED + 2)
    assert ch.seen["saturated"] and ch.seen["overrun"] and ch.seen["skipped"]


@pytest.mark.parametrize("delay", [1, 0])
def test_replay_overlapped_td_and_stalls(delay):
    """The TD errors stream with gaps while the next BOUNDARY (which waits for them when its
    write-back is that batch: delay 0) and SAMPLE run; ``sample`` and ``weight`` stall."""
    ch = run(TrainerReplay(small_config(delay)),
             lambda ctx, ch: random_steps(ctx, ch, 12, overlap=True), seed=SEED + 10 + delay,
             td_idle=0.5, stall=0.3)
    waited = ch.waited["boundary"]
    assert min(waited) == 0
    if delay:
        assert max(waited) == 0             # the write-back was never the open batch
    else:
        assert max(waited) > 0


def test_weight_underflow_and_edge_commands():
    """IS weights of 2**-22 (samples of about 64 beside a minimum of 2**-16, β = 1) are 0 and
    set ``underflow``: 8-bit fractions make the first stratum's target 0 now and then, which
    finds the smallest leaf. SAMPLE with B = 0 or above max_batch and READ of no leaf do
    nothing, in 2 cycles."""
    cfg = small_config(0, target_bits=8)
    hi = (1 << cfg.learner.numerics.act_format.width) - 1
    one = 1 << cfg.coef_frac

    async def script(ctx, ch):
        b = ch.bench
        await ch.begin(ctx, clear=True, seed=7)
        for count in (0, cfg.max_batch + 1):
            b.samples.clear()
            assert await b.command(ctx, ReplayCmd.SAMPLE, count=count, coef=one) == 2
            assert not b.samples and not b.weights
        assert await b.command(ctx, ReplayCmd.READ, count=0) == 2
        await ch.boundary(ctx, 2)
        idx = await ch.sample(ctx, 2, one)
        assert idx.tolist() == [0, 1]
        await ch.td(ctx, idx, np.array([0, hi]), one, 1)       # 2**-16 and about 64
        await ch.boundary(ctx, 2)
        for _ in range(40):
            await ch.sample(ctx, cfg.max_batch, one)
            if ch.seen["underflow"]:
                break
        assert ch.seen["underflow"]
        await ch.leaves(ctx)

    run(TrainerReplay(cfg), script, seed=SEED + 20)


def test_parameters_are_checked():
    with pytest.raises(TypeError, match="config must be a TrainerConfig, not"):
        TrainerReplay(SumTreeConfig())


def test_consumed_wraps_at_2_32():
    """CONSUMED wraps at 2**32, which the power-of-two capacity divides: the slots go on round
    the ring across the wrap. CONSUMED is set, in both, to 2**32 - capacity after a CLEAR."""
    cfg = small_config(1, capacity=256)
    start = (1 << 32) - cfg.capacity

    async def script(ctx, ch):
        await ch.begin(ctx, clear=True, seed=3)
        ctx.set(ch.dut.consumed, start)
        ch.core.consumed = start
        W = cfg.append_window
        for step in range(24):
            await ch.boundary(ctx, (ch.core.consumed + W - step % 3) & 0xFFFFFFFF)
            idx = await ch.sample(ctx, 13, ch.coef())
            await ch.td(ctx, idx, ch.td_errors(13), ch.coef(), ch.eps())
        assert ch.core.consumed < start
        await ch.leaves(ctx)

    run(TrainerReplay(cfg), script, seed=SEED + 30)
