"""The trainer's replay side under Verilator (thorough tier): :class:`TrainerReplay` of an
8-ary tree of 4096 leaves with a window of 100 and delay 0, and (``make test-heavy``: a C++
build of minutes, the same code paths) of the default trainer (a 16-ary tree of 2**16 leaves,
B up to 64, a window of 256, delay 1), against the golden core with
the fast tier's checker (:mod:`trainer.test_replay_sim`): the ring filled, then random steps
with exact cycles and every leaf read back every 8 steps (16 with 2**16 leaves); then steps
with the TD errors streaming (with gaps) during the next BOUNDARY and SAMPLE and stalls on
``sample`` and ``weight``. The new priorities are checked through the tree (its total after
every command, the samples, the leaves)."""

import numpy as np
import pytest
from amaranth.hdl import unsigned
from amaranth.lib import data

from cocotb_util import load_manifest, run_component
from rtl_gen.fixed import pack, unpack
from rtl_gen.trainer.replay import ReplayCmd, TrainerReplay, replay_command_layout
from sw.replay.spec import SumTreeConfig
from sw.trainer.spec import TrainerConfig

from .test_replay_sim import STATUS, Checker, random_steps

SEED = 20261210

CONFIGS = {
    "default": TrainerConfig,
    "k8-n4096-delay0": lambda: TrainerConfig(
        tree=SumTreeConfig(fanout=8, capacity=4096, max_batch=64), append_window=100, delay=0),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", [pytest.param("default", marks=pytest.mark.heavy),
                                  "k8-n4096-delay0"])
def test_replay_rtl(name):
    config = CONFIGS[name]()
    run_component(TrainerReplay(config), "trainer_replay", __file__,
                  manifest={"config": config.to_dict()}, seed=SEED)


# -- cocotb side ------------------------------------------------------------------------------
def _uint(value):
    """A port's value as an int (a one-bit port's value is a ``Logic``)."""
    return value.to_unsigned() if hasattr(value, "to_unsigned") else int(value)


class RtlBench:
    """The fast tier's ``Bench`` on the Verilator model's ports: drive at the falling edge,
    sample the transfers of the coming rising edge after ``ReadOnly``. ``ctx`` arguments are
    ignored (the checker passes them through)."""

    priorities = None               # the power unit's output is not a port: not watched

    def __init__(self, dut, config, rng, *, td_idle=0.0, stall=0.0):
        self.dut, self.config, self.rng = dut, config, rng
        self.td_idle, self.stall = td_idle, stall
        self.cmd_layout = replay_command_layout(config)
        self.sample_layout = data.StructLayout({
            "slot": unsigned(config.tree.index_width),
            "priority": unsigned(config.tree.priority_width)})
        self.td_mask = (1 << (config.learner.numerics.act_format.width + 1)) - 1
        self.cycle = 0
        self.td_queue = []
        self.samples, self.weights, self.td_taken, self.td_done = [], [], [], []
        self.status = {}
        self.td_busy = False
        self.boundary_end = -10 ** 9

    def _chance(self, p):
        return bool(p) and self.rng.random() < p

    async def boot(self):
        """Start the clock, reset, wait for the tree's sweep."""
        import cocotb
        from cocotb.clock import Clock
        from cocotb.triggers import ClockCycles, FallingEdge

        d = self.dut
        for name in ("cmd__valid", "td__valid", "clear_flags"):
            getattr(d, name).value = 0
        d.sample__ready.value = 1
        d.weight__ready.value = 1
        d.rst.value = 1
        cocotb.start_soon(Clock(d.clk, 4, unit="ns", impl="gpi").start())
        await ClockCycles(d.clk, 2)
        d.rst.value = 0
        await FallingEdge(d.clk)
        while d.busy.value:                     # the tree's sweep after reset
            await FallingEdge(d.clk)

    async def tick(self, ctx=None):
        from cocotb.triggers import FallingEdge, ReadOnly

        d = self.dut
        offer = bool(self.td_queue) and not self._chance(self.td_idle)
        d.td__valid.value = int(offer)
        if offer:
            d.td__payload.value = int(self.td_queue[0]) & self.td_mask
        s_ready, w_ready = not self._chance(self.stall), not self._chance(self.stall)
        d.sample__ready.value = int(s_ready)
        d.weight__ready.value = int(w_ready)
        await ReadOnly()
        c_ready, done = int(d.cmd__ready.value), int(d.done.value)
        if offer and d.td__ready.value:
            self.td_queue.pop(0)
            self.td_taken.append(self.cycle)
        if s_ready and d.sample__valid.value:
            s = unpack(self.sample_layout, d.sample__payload.value.to_unsigned())
            self.samples.append((s["slot"], s["priority"]))
        if w_ready and d.weight__valid.value:
            self.weights.append(d.weight__payload.value.to_unsigned())
        if d.td_done.value:
            self.td_done.append(self.cycle)
        self.td_busy = bool(d.td_busy.value)
        self.status = {n: _uint(getattr(d, n).value) for n in STATUS}
        await FallingEdge(d.clk)
        self.cycle += 1
        return c_ready, done

    async def command(self, ctx, op, *, word=0, count=0, coef=0, eps=0):
        d = self.dut
        d.cmd__payload.value = pack(self.cmd_layout, dict(op=op.value, word=word, count=count,
                                                          coef=coef, eps=eps))
        d.cmd__valid.value = 1
        while True:
            ready, _ = await self.tick()
            if ready:
                break
        start = self.start_cycle = self.cycle - 1
        d.cmd__valid.value = 0
        while True:
            _, done = await self.tick()
            if done:
                if op == ReplayCmd.BOUNDARY:
                    self.boundary_end = self.cycle
                return self.cycle - 1 - start
            assert self.cycle - start < 1_000_000, f"{op} did not finish"

    @property
    def start(self):
        return self.start_cycle

    async def wait_td(self, ctx, n):
        while len(self.td_done) < n:
            await self.tick()

    def quiet(self, ctx):
        """No TD batch open, and a BOUNDARY's tree writes have left the pipeline."""
        return not self.td_busy and self.cycle - self.boundary_end > self.config.tree.latency

    async def pulse_clear_flags(self, ctx):
        self.dut.clear_flags.value = 1
        await self.tick()
        self.dut.clear_flags.value = 0
        await self.tick()


try:
    import cocotb
except ImportError:  # pragma: no cover
    cocotb = None

if cocotb is not None:
    async def _run(dut, steps, **kw):
        config = TrainerConfig.from_dict(load_manifest()["config"])
        rng = np.random.default_rng(cocotb.RANDOM_SEED)
        dut._log.info("config %s, seed %d", config, cocotb.RANDOM_SEED)
        bench = RtlBench(dut, config, rng, **kw)
        await bench.boot()
        checker = Checker(config, bench, rng, exact=not kw)
        await random_steps(None, checker, steps, overlap=bool(kw),
                           leaves_every=max(8, config.capacity >> 12))
        dut._log.info("%d steps match, cycles per command: %s", steps,
                      {k: (min(v), max(v), len(v)) for k, v in checker.cycles.items()})
        return checker

    @cocotb.test()
    async def replay_steps_exact(dut):
        """Commands one after another: outputs, state and exact cycles as the golden's."""
        ch = await _run(dut, 48)
        assert ch.seen["overrun"] and ch.seen["empty"]

    @cocotb.test()
    async def replay_steps_overlapped_with_stalls(dut):
        """TD errors with gaps during the next BOUNDARY and SAMPLE; stalled outputs."""
        await _run(dut, 24, td_idle=0.5, stall=0.3)
