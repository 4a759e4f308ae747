"""GAE processing element in Amaranth's simulator (fast tier): tiny formats, every mode, k and
rounding mode, random idles and back-pressure, against the element-by-element golden model."""

import itertools
import random

import numpy as np
import pytest
from amaranth.sim import Simulator

from rtl_gen.fixed import pack_array
from sw.gae.spec import GaePeConfig
from rtl_gen.gae.pe import GaeProcessingElement, gae_input_layout
from sw.gae.golden import GaePeModel, make_stream, quantize_coefs


def simulate(cfg, stream, gamma, gl, *, idle=0.0, stall=0.0, seed=0):
    """Run ``stream`` through the PE. Returns (outputs dict, in_cycles, out_cycles, sticky)."""
    dut = GaeProcessingElement(cfg)
    words = pack_array(gae_input_layout(cfg), stream)
    n = len(words)
    rng = random.Random(seed)
    res = {"out": [], "cin": [], "cout": [], "sticky": None}

    async def bench(ctx):
        ctx.set(dut.gamma, gamma)
        ctx.set(dut.gamma_lambda, gl)
        await ctx.tick().repeat(cfg.coef_settle)  # let the power chain settle
        sent = 0
        for cycle in range(20 * n + 100):
            offer = sent < n and rng.random() >= idle
            ready = rng.random() >= stall
            ctx.set(dut.i.valid, offer)
            if offer:
                ctx.set(dut.i.payload.as_value(), words[sent])
            ctx.set(dut.o.ready, ready)
            _, _, i_ready, o_valid, o_payload = await ctx.tick().sample(
                dut.i.ready, dut.o.valid, dut.o.payload)
            if offer and i_ready:
                res["cin"].append(cycle)
                sent += 1
            if ready and o_valid:
                res["out"].append(o_payload)
                res["cout"].append(cycle)
                if len(res["out"]) == n:
                    break
        res["sticky"] = ctx.get(dut.overflow)

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert len(res["out"]) == n, f"only {len(res['out'])} of {n} outputs"
    fields = ("advantage", "rtg", "overflow", "timestep", "trajectory")
    out = {f: np.array([int(getattr(p, f)) for p in res["out"]]) for f in fields}
    return out, np.array(res["cin"]), np.array(res["cout"]), res["sticky"]


def random_stream(cfg, rng, shapes=((6, 2), (1, 3), (9, 1)), p_done=0.2):
    dfmt = cfg.data_format
    parts = []
    for T, N in shapes:
        batch = (dfmt.quantize(rng.normal(0, 2, (T, N))), dfmt.quantize(rng.normal(0, 4, (T, N))),
                 rng.random((T, N)) < p_done, dfmt.quantize(rng.normal(0, 4, N)))
        parts.append(make_stream(*batch, cfg)[0])
    return {f: np.concatenate([p[f] for p in parts]) for f in parts[0]}


CASES = list(itertools.product(("lookahead", "interleaved"), (1, 2, 3, 4),
                               ("half_up", "half_even", "floor")))


@pytest.mark.parametrize("mode,k,rounding", CASES)
def test_pe_matches_model_under_backpressure(mode, k, rounding):
    cfg = GaePeConfig(data_width=14, data_frac=6, coef_width=10, k=k, mode=mode,
                      rounding=rounding, timestep_bits=5, trajectory_bits=3)
    rng = np.random.default_rng(1000 + 10 * k + len(mode))
    stream = random_stream(cfg, rng)
    g, gl = quantize_coefs(0.95, 0.9, cfg)
    model = GaePeModel(cfg, g, gl)
    expect = model.run(stream)
    out, _, _, sticky = simulate(cfg, stream, g, gl, idle=0.3, stall=0.3, seed=k)
    for f in out:
        np.testing.assert_array_equal(out[f], expect[f], err_msg=f)
    assert sticky == int(model.sticky_overflow)


@pytest.mark.parametrize("mode,k", [("lookahead", 1), ("lookahead", 2), ("lookahead", 3),
                                    ("interleaved", 2), ("interleaved", 4)])
def test_pe_latency_and_throughput(mode, k):
    cfg = GaePeConfig(data_width=12, data_frac=4, coef_width=8, k=k, mode=mode,
                      timestep_bits=5, trajectory_bits=3)
    stream = random_stream(cfg, np.random.default_rng(5))
    g, gl = quantize_coefs(0.9, 0.9, cfg)
    _, cin, cout, _ = simulate(cfg, stream, g, gl)
    n = len(stream["reward"])
    assert (np.diff(cin) == 1).all()
    assert (cout - cin == cfg.latency).all()
    assert cout[-1] - cin[0] + 1 == n + cfg.latency
    # 5 registers before the loop, k in it, 3 after (4 with k = 2: A saturates a register
    # after the loop); lookahead k > 1: masked powers, products and the adder tree (3 operands
    # an adder) before the loop.
    assert cfg.latency == (k + 7 if mode == "interleaved" or k == 1
                           else k + 9 + cfg.lookahead_levels) + (k == 2)


def test_pe_saturation_sets_sticky_flag():
    cfg = GaePeConfig(data_width=10, data_frac=2, coef_width=8, k=2,
                      timestep_bits=4, trajectory_bits=2)
    T, N = 6, 1
    m = cfg.data_format.max_raw
    batch = (np.full((T, N), m), np.full((T, N), -m), np.zeros((T, N), bool), np.full(N, m))
    stream, _ = make_stream(*batch, cfg)
    g, gl = quantize_coefs(1.0, 1.0, cfg)
    out, _, _, sticky = simulate(cfg, stream, g, gl)
    assert out["overflow"].all() and sticky == 1
    assert (out["advantage"] == m).all()


@pytest.mark.parametrize("mode,rounding", [("lookahead", "half_up"), ("lookahead", "half_even"),
                                           ("lookahead", "floor"), ("interleaved", "half_up")])
def test_pe_k2_loop_saturation_at_shipped_width(mode, rounding):
    """k = 2 keeps A unsaturated in its loop and selects the saturated sums after the adder;
    at 32-bit data the loop's product is split at 26 bits. Runs of large rewards of one sign
    drive A to both bounds, with idles and back-pressure: bit-exact with the model."""
    cfg = GaePeConfig(data_width=32, data_frac=16, coef_width=17, k=2, mode=mode,
                      rounding=rounding, timestep_bits=6, trajectory_bits=3)
    dfmt = cfg.data_format
    rng = np.random.default_rng(77)
    T, N = 24, 2
    big = dfmt.max_raw * dfmt.ulp / 6
    rewards = np.stack([rng.normal(big, big / 4, T), rng.normal(-big, big / 4, T)], axis=1)
    rewards[T // 2:, :] = -rewards[T // 2:, :]      # cross from one bound to the other
    values = rng.normal(0, big / 8, (T, N))
    dones = np.zeros((T, N), bool)
    dones[7, 0] = True
    batch = (dfmt.quantize(rewards), dfmt.quantize(values), dones,
             dfmt.quantize(rng.normal(0, big, N)))
    stream = make_stream(*batch, cfg)[0]
    small = random_stream(cfg, rng)
    stream = {f: np.concatenate([stream[f], small[f]]) for f in stream}
    g, gl = quantize_coefs(0.99, 0.97, cfg)
    model = GaePeModel(cfg, g, gl)
    expect = model.run(stream)
    adv = expect["advantage"]
    assert (adv == dfmt.max_raw).any() and (adv == dfmt.min_raw).any()
    assert not expect["overflow"].all()
    out, _, _, sticky = simulate(cfg, stream, g, gl, idle=0.3, stall=0.3, seed=3)
    for f in out:
        np.testing.assert_array_equal(out[f], expect[f], err_msg=f)
    assert sticky == 1


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")  # refused, never elaborated
@pytest.mark.usefixtures("collect_components")
def test_pe_rejects_bad_config():
    with pytest.raises(TypeError, match="config must be a GaePeConfig"):
        GaeProcessingElement({"k": 2})
