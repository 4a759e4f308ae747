"""The trainer core under Verilator (thorough tier): :class:`rtl_gen.trainer.core.TrainerCore`
of the small trainer (4-8-2 learner on 2 × 2 units, 16 samples, a 4-ary tree of 256 leaves,
a window of 16, delay 1) on cocotbext-axi's ``AxiRam`` holding the storage at a base above
4 GiB: the launches of :func:`trainer.core_bench.scenario` (CLEAR + LOAD + INSERT, steps
with inserts, STOP, another batch size with doorbells during the launch, 20 steps of 16
samples, an empty tree, a refused batch size: 31 steps) against the golden core driven the
same way. After each launch the storage (ring, load region, both snapshots and the trace),
the counters, the flags and ERROR must be the golden's; without pauses ``CYCLES`` must be
:func:`sw.trainer.schedule.sequential_launch_cycles` at ``AxiRam``'s latencies; a second
pass pauses every AXI channel at random. About 50 s to build, 15 s to run.
"""

import random

import numpy as np
import pytest

from cocotb_util import load_manifest, run_component
from fcov import blocks
from rtl_gen.trainer.core import TrainerCore as RtlCore
from sw.trainer.golden import TrainerCore
from sw.trainer.spec import TrainerCmd, TrainerConfig

from .core_bench import golden_launch, random_storage, scenario, small_config

SEED = 20261207
BASE = 0x1_2345_0000
#: cocotbext-axi AxiRam: cycles from an AR handshake to its first R beat, and from the last
#: W beat to the B handshake (what the core's state machine sees).
AXIRAM_READ_LATENCY = 2
AXIRAM_WRITE_LATENCY = 2


@pytest.mark.slow
def test_core_rtl():
    config = small_config()
    run_component(RtlCore(config), "trainer_core", __file__,
                  manifest={"config": config.to_dict()}, seed=SEED)


def random_pause(rng, p):
    while True:
        yield rng.random() < p


try:
    import cocotb
except ImportError:  # pragma: no cover
    cocotb = None

if cocotb is not None:
    @cocotb.test()
    @cocotb.parametrize(pause=[0.0, 0.3])
    async def core_matches_golden(dut, pause):
        from cocotb.clock import Clock
        from cocotb.triggers import FallingEdge, ReadOnly, RisingEdge
        from cocotbext.axi import AxiBus, AxiRam

        config = TrainerConfig.from_dict(load_manifest()["config"])
        rng = np.random.default_rng(cocotb.RANDOM_SEED)
        prng = random.Random(cocotb.RANDOM_SEED)
        dut._log.info("seed %d, pause %.1f", cocotb.RANDOM_SEED, pause)
        Clock(dut.clk, 10, unit="ns", impl="gpi").start()
        dut.ctrl__start.value = 0
        dut.rst.value = 1
        ram = AxiRam(AxiBus.from_prefix(dut, "m_axi_gmem"), dut.clk, dut.rst, size=1 << 48)
        if pause:
            for ch in (ram.write_if.aw_channel, ram.write_if.w_channel,
                       ram.write_if.b_channel, ram.read_if.ar_channel,
                       ram.read_if.r_channel):
                ch.set_pause_generator(random_pause(random.Random(prng.random()), pause))
        storage = random_storage(config, rng)
        ram.write(BASE, storage.tobytes())
        gold_st = storage.copy()
        gold = TrainerCore(config, gold_st)
        for _ in range(4):
            await RisingEdge(dut.clk)
        dut.rst.value = 0
        for _ in range(2 * config.tree.level_groups[-1] + 40):   # the tree's sweep
            await RisingEdge(dut.clk)
        history = {}
        bad_cycles = []
        for i, launch in enumerate(scenario(config, long=True)):
            a = launch.args
            for name, val in (("cmd", a.cmd), ("steps", a.steps), ("batch_size", a.batch),
                              ("lr", a.lr), ("gamma", a.gamma), ("alpha", a.alpha),
                              ("beta", a.beta), ("eps", a.eps),
                              ("sync_period", a.sync_period),
                              ("snapshot_period", a.snapshot_period),
                              ("trace_period", a.trace_period), ("seed", a.seed),
                              ("base_lo", BASE & 0xFFFFFFFF), ("base_hi", BASE >> 32),
                              ("producer", launch.producer)):
                getattr(dut, f"args__{name}").value = val
            dut.stop.value = launch.stop
            if a.cmd & TrainerCmd.CLEAR:
                # CLEAR waits for the tree's pipeline: leave it empty, as the formula assumes
                for _ in range(config.tree.latency):
                    await RisingEdge(dut.clk)
            await FallingEdge(dut.clk)
            dut.ctrl__start.value = 1
            await ReadOnly()
            assert int(dut.ctrl__ready.value), "the core is not idle"
            await RisingEdge(dut.clk)                  # takes START
            await ReadOnly()
            done = int(dut.ctrl__done.value)
            await FallingEdge(dut.clk)
            dut.ctrl__start.value = 0
            rung = 0
            for _ in range(200_000):
                if done:
                    break
                await RisingEdge(dut.clk)
                await ReadOnly()
                done = int(dut.ctrl__done.value)
                steps = int(dut.status__steps_done.value)
                if steps != rung and not done:
                    # a doorbell for the boundary after step `steps` (at least 2 cycles on)
                    rung = steps
                    await FallingEdge(dut.clk)
                    dut.args__producer.value = launch.producer_at(steps)
            else:
                raise AssertionError(f"launch {i} did not end")
            await RisingEdge(dut.clk)
            await ReadOnly()
            count = 0 if a.cmd & TrainerCmd.CLEAR else gold.sync.count
            want = golden_launch(gold, launch, history, read_latency=AXIRAM_READ_LATENCY,
                                 write_latency=AXIRAM_WRITE_LATENCY)
            if a.steps and want["error"] in (0, 1):          # (1: the batch size)
                blocks.learner_step(a.batch, config.learner.sub_batch, config.max_batch,
                                    sync_period=a.sync_period)
            if not want["error"]:
                blocks.learner_run(want["steps_done"], sync_period=a.sync_period,
                                   sync_count=count)
            got = {"error": int(dut.ctrl__error.value), "cycles": int(dut.ctrl__cycles.value),
                   "stopped": bool(int(dut.status__status_stopped.value))}
            for n in ("steps_done", "consumed", "steps_total", "sampled", "snapshot_seq",
                      "trace_count"):
                got[n] = int(getattr(dut, f"status__{n}").value)
            dut._log.info("launch %d: %s (golden cycles %d)", i, got, want["cycles"])
            await FallingEdge(dut.clk)
            dut.stop.value = 0
            assert got["error"] == want["error"], (i, got, want)
            if not pause and got["cycles"] != want["cycles"]:
                bad_cycles.append((i, got["cycles"], want["cycles"]))
            if want["error"] == 1:
                continue
            for n in ("stopped", "steps_done", "consumed", "steps_total", "sampled",
                      "snapshot_seq", "trace_count"):
                assert got[n] == want[n], (i, n, got[n], want[n])
            flags = {"learner": "learner_overflow", "saturated": "priority_saturated",
                     "underflow": "weight_underflow", "overrun": "overrun"}
            for f, port in flags.items():
                assert bool(int(getattr(dut, f"status__status_{port}").value)) \
                    == want["flags"][f], (i, f)
            mem = np.frombuffer(ram.read(BASE, storage.size), np.uint8)
            diff = np.flatnonzero(mem != gold_st)
            assert diff.size == 0, (i, diff[:16])
        assert not bad_cycles, bad_cycles
