"""The learner's tensor unit (:class:`~rtl_gen.learner.TensorUnit`) in Amaranth's simulator:
:func:`simulate` streams operands through it with random idles and back-pressure and returns
the output beats and handshake cycles. Used by tb/learner/test_tensor_unit_sim.py and
test_gemms_sim.py."""

import random

import numpy as np
from amaranth.sim import Simulator

from rtl_gen.learner import TensorUnit, pack_elements, unpack_beats


def simulate(cfg, stream, *, idle=0.0, stall=0.0, seed=0, clear_at=None):
    """Run an element stream through the unit.

    Returns (beats dict, in_cycles, out_cycles, sticky overflow, sticky k_overflow).
    """
    dut = TensorUnit(cfg)
    words = pack_elements(cfg, stream["a"], stream["b"], stream["last"])
    n_in = len(words)
    n_out = int(np.sum(stream["last"])) * cfg.rows
    rng = random.Random(seed)
    res = {"out": [], "cin": [], "cout": []}

    async def bench(ctx):
        sent = 0
        limit = 20 * (n_in + n_out) + 200
        for cycle in range(limit):
            offer = sent < n_in and rng.random() >= idle
            ready = rng.random() >= stall
            ctx.set(dut.i.valid, offer)
            if offer:
                ctx.set(dut.i.payload.as_value(), words[sent])
            ctx.set(dut.o.ready, ready)
            _, _, i_ready, o_valid, o_payload = await ctx.tick().sample(
                dut.i.ready, dut.o.valid, dut.o.payload.as_value())
            if offer and i_ready:
                res["cin"].append(cycle)
                sent += 1
            if ready and o_valid:
                res["out"].append(o_payload)
                res["cout"].append(cycle)
            if sent == n_in and len(res["out"]) == n_out:
                break
        res["sticky"] = (ctx.get(dut.overflow), ctx.get(dut.k_overflow))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert len(res["out"]) == n_out, f"only {len(res['out'])} of {n_out} beats"
    c, ovf, last = unpack_beats(cfg, res["out"])
    return ({"c": c, "overflow": ovf, "last": last}, np.array(res["cin"]),
            np.array(res["cout"]), *res["sticky"])
