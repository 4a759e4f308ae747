"""rtl_gen.stream.RegisterSlice in Amaranth's simulator: every payload once and in order under
random valid and ready, one cycle of latency, one payload per cycle, and ``o.valid`` /
``i.ready`` that do not follow their inputs within a cycle (flip-flops)."""

import random

import pytest
from amaranth.sim import Simulator

from rtl_gen.stream import RegisterSlice


def _run(p_valid, p_ready, n=300, seed=1):
    dut = RegisterSlice(16)
    rng = random.Random(seed)
    got, sent, trace = [], [], []

    async def bench(ctx):
        nxt = 0
        for _ in range(4 * n + 50):
            v = nxt < n and rng.random() < p_valid
            r = rng.random() < p_ready
            ctx.set(dut.i.valid, v)
            ctx.set(dut.i.payload, nxt)
            ctx.set(dut.o.ready, r)
            i_ready, o_valid = ctx.get(dut.i.ready), ctx.get(dut.o.valid)
            o_payload = ctx.get(dut.o.payload)
            trace.append((v, r, i_ready, o_valid))
            await ctx.tick()
            if v and i_ready:
                sent.append(nxt)
                nxt += 1
            if o_valid and r:
                got.append(o_payload)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return sent, got, trace


@pytest.mark.parametrize("p_valid,p_ready", [(1.0, 1.0), (0.7, 0.5), (1.0, 0.3), (0.3, 1.0)])
def test_register_slice_order_and_rate(p_valid, p_ready):
    sent, got, trace = _run(p_valid, p_ready)
    assert sent == list(range(300)) and got == sent
    if p_valid == p_ready == 1.0:
        # latency 1, then one payload per cycle
        assert not trace[0][3] and all(t[3] for t in trace[1:301])


def test_register_slice_outputs_are_registers():
    """Changing the inputs within a cycle never changes ``i.ready`` or ``o.valid``."""
    dut = RegisterSlice(8)
    seen = []

    async def bench(ctx):
        rng = random.Random(3)
        for _ in range(200):
            ctx.set(dut.i.valid, rng.random() < 0.6)
            ctx.set(dut.o.ready, rng.random() < 0.6)
            before = (ctx.get(dut.i.ready), ctx.get(dut.o.valid))
            ctx.set(dut.i.valid, not ctx.get(dut.i.valid))
            ctx.set(dut.o.ready, not ctx.get(dut.o.ready))
            seen.append(before == (ctx.get(dut.i.ready), ctx.get(dut.o.valid)))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    assert all(seen)


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
@pytest.mark.usefixtures("collect_components")
def test_register_slice_refuses_a_bad_shape():
    with pytest.raises(TypeError):
        RegisterSlice("wide")
