"""The trainer core (:class:`rtl_gen.trainer.core.TrainerCore`) in Amaranth's simulator (fast
tier): a small trainer (4-8-2 learner on 2 × 2 units, a 4-ary tree of 256 leaves) on a
cycle-level AXI4 memory, launches of CLEAR + LOAD + INSERT, steps with inserts, STOP, another
batch size with doorbells during the launch, an empty tree and a refused batch size, at
storage widths 64, 128 and 512, delay 1 and 0, against the golden core driven the same way:
the whole storage (snapshots, trace) after every launch, the counters, the flags, ERROR, and
``CYCLES`` against :func:`sw.trainer.schedule.sequential_launch_cycles` when the memory
never stalls."""

import numpy as np
import pytest
from amaranth.sim import Simulator

from rtl_gen.trainer.core import TrainerCore as RtlCore
from rtl_gen.trainer.replay import ReplayCmd
from sw.trainer.golden import TrainerCore

from .core_bench import golden_launch, random_storage, scenario, small_config

LATENCY = 6


class AxiMemory:
    """AXI4 slave over ``storage`` (bytes at address 0): AR/AW always ready (or dropped with
    chance ``stall``), a burst's first R beat ``latency`` cycles after its AR, W beats
    written with their strobes, B the cycle after the last."""

    def __init__(self, dut, storage, *, latency, stall=0.0, rng=None):
        self.dut, self.st = dut, storage
        self.nb = dut.config.storage_width // 8
        self.latency, self.stall = latency, stall
        self.rng = rng or np.random.default_rng(0)
        self.reads, self.writes, self.b = [], [], 0
        self.cycle = 0

    def _go(self):
        return not (self.stall and self.rng.random() < self.stall)

    def drive(self, ctx):
        a = self.dut.axi
        ctx.set(a("arready"), self._go())
        ctx.set(a("awready"), self._go())
        ctx.set(a("wready"), self._go())
        beat = bool(self.reads) and self.reads[0][0] <= self.cycle and self._go()
        ctx.set(a("rvalid"), beat)
        if beat:
            _, addr, left = self.reads[0]
            ctx.set(a("rdata"), int.from_bytes(self.st[addr:addr + self.nb].tobytes(), "little"))
            ctx.set(a("rlast"), left == 1)
        ctx.set(a("bvalid"), self.b > 0)

    def sample(self, ctx, v):
        a, nb = self.dut.axi, self.nb
        if v["arvalid"] and v["arready"]:
            due = max(self.cycle + self.latency, self.reads[-1][0] if self.reads else 0)
            assert v["araddr"] % 4096 + (v["arlen"] + 1) * nb <= 4096
            self.reads.append([due, v["araddr"], v["arlen"] + 1])
        if v["rvalid"] and v["rready"]:
            self.reads[0][1] += nb
            self.reads[0][2] -= 1
            if not self.reads[0][2]:
                self.reads.pop(0)
        if v["awvalid"] and v["awready"]:
            assert v["awaddr"] % 4096 + (v["awlen"] + 1) * nb <= 4096
            self.writes.append([v["awaddr"], v["awlen"] + 1])
        if v["wvalid"] and v["wready"]:
            addr, left = self.writes[0]
            assert bool(v["wlast"]) == (left == 1)
            data = v["wdata"].to_bytes(nb, "little")
            for i in range(nb):
                if v["wstrb"] >> i & 1:
                    self.st[addr + i] = data[i]
            self.writes[0] = [addr + nb, left - 1]
            if left == 1:
                self.writes.pop(0)
                self.b += 1
        if v["bvalid"] and v["bready"]:
            self.b -= 1
        self.cycle += 1


NAMES = ("arvalid", "arready", "araddr", "arlen", "rvalid", "rready", "awvalid", "awready",
         "awaddr", "awlen", "wvalid", "wready", "wdata", "wstrb", "wlast", "bvalid", "bready")


def run_rtl(cfg, storage, launches, *, stall=0.0, seed=0):
    dut = RtlCore(cfg)
    mem = AxiMemory(dut, storage, latency=LATENCY, stall=stall,
                    rng=np.random.default_rng(seed))
    out = []

    async def bench(ctx):
        a, c, s, rp = dut.args, dut.ctrl, dut.status, dut.replay
        sigs = [dut.axi(n) for n in NAMES]
        while not ctx.get(dut.replay.cmd.ready):       # the tree's sweep after reset
            mem.drive(ctx)
            _, _, *vals = await ctx.tick().sample(*sigs)
            mem.sample(ctx, dict(zip(NAMES, vals)))
        for launch in launches:
            args = launch.args
            for name, val in (("cmd", args.cmd), ("steps", args.steps),
                              ("batch_size", args.batch), ("lr", args.lr),
                              ("gamma", args.gamma), ("alpha", args.alpha),
                              ("beta", args.beta), ("eps", args.eps),
                              ("sync_period", args.sync_period),
                              ("snapshot_period", args.snapshot_period),
                              ("trace_period", args.trace_period), ("seed", args.seed),
                              ("producer", launch.producer)):
                ctx.set(getattr(a, name), val)
            ctx.set(dut.stop, launch.stop)
            ctx.set(c.start, 1)
            started, seen = False, 0
            while True:
                mem.drive(ctx)
                _, _, ready, done, stop_clear, bv, br, op, *vals = await ctx.tick().sample(
                    c.ready, c.done, dut.stop_clear, rp.cmd.valid, rp.cmd.ready,
                    rp.cmd.payload.op, *sigs)
                bnd = bv and br and op == ReplayCmd.BOUNDARY
                mem.sample(ctx, dict(zip(NAMES, vals)))
                if bnd:                               # the host rings for the next boundary
                    seen += 1
                    ctx.set(a.producer, launch.producer_at(seen))
                if ready:
                    ctx.set(c.start, 0)
                    started = True
                if stop_clear:
                    ctx.set(dut.stop, 0)
                if done and started:
                    break
            out.append({"error": ctx.get(c.error), "cycles": ctx.get(c.cycles),
                        "stopped": bool(ctx.get(s.status_stopped)),
                        **{n: ctx.get(getattr(s, n)) for n in (
                            "steps_done", "consumed", "steps_total", "sampled",
                            "snapshot_seq", "trace_count")},
                        "flags": {"learner": ctx.get(s.status_learner_overflow),
                                  "saturated": ctx.get(s.status_priority_saturated),
                                  "underflow": ctx.get(s.status_weight_underflow),
                                  "overrun": ctx.get(s.status_overrun)},
                        "storage": storage.copy()})

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return out


@pytest.mark.parametrize("width,stall,delay", [(128, 0.0, 1), (128, 0.25, 1), (64, 0.0, 1),
                                               (512, 0.0, 1), (128, 0.0, 0)])
def test_launches_against_golden(width, stall, delay):
    cfg = small_config(storage_width=width, delay=delay)
    rng = np.random.default_rng(7)
    storage = random_storage(cfg, rng)
    gold_st = storage.copy()
    gold = TrainerCore(cfg, gold_st)
    launches = scenario(cfg)
    got = run_rtl(cfg, storage, launches, stall=stall, seed=3)
    history = {}
    for i, (launch, g) in enumerate(zip(launches, got)):
        want = golden_launch(gold, launch, history, read_latency=LATENCY, write_latency=1)
        if not stall:
            assert g["cycles"] == want["cycles"], (i, g["cycles"], want["cycles"])
        if want["error"] == 1:
            assert g["error"] == 1 and not g["steps_done"]
            continue
        for key in ("error", "stopped", "steps_done", "consumed", "steps_total", "sampled",
                    "snapshot_seq", "trace_count"):
            assert g[key] == want[key], (i, key, g[key], want[key])
        assert {k: bool(v) for k, v in g["flags"].items()} == want["flags"], (i, g["flags"])
        diff = np.flatnonzero(g["storage"] != gold_st)
        assert diff.size == 0, (i, diff[:16])
