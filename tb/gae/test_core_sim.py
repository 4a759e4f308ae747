"""GAE accelerator core in Amaranth's simulator (fast tier): tiny memories, host port, golden model.

The host side loads the memory images of :mod:`sw.gae.layout` through the core's host port, sets
the arguments, starts, waits for ``done`` and reads the images back; results must equal
:func:`sw.gae.model.gae_core` bit for bit and the run must take the documented cycles.
"""

import numpy as np
import pytest
from amaranth.sim import Simulator

from sw.gae.spec import GaeCoreConfig, GaePeConfig
from rtl_gen.gae.core import GaeCore
from sw.gae.layout import pack_rows, region_base, unpack_rows, word_bytes
from sw.gae.golden import quantize_coefs
from sw.gae.spec import GaeCoreArgs, check_args
from sw.gae.model import gae_core
from sw.gae import spec as gae_spec


def random_case(cfg, T, M, rng, *, p_done=0.1, value_scale=0.1):
    qmax = cfg.code_max
    codes = {
        "rewards": rng.integers(-qmax, qmax + 1, (T, M)),
        "values": rng.integers(-qmax, qmax + 1, (T, M)),
        "bootstrap": rng.integers(-qmax, qmax + 1, M),
        "dones": rng.random((T, M)) < p_done,
    }
    rf = cfg.reg_format
    g, gl = quantize_coefs(0.99, 0.95, cfg.pe)
    q = lambda x: int(rf.quantize(x))  # noqa: E731
    s, rs = cfg.scale_format.quantize, cfg.result_scale_format.quantize
    args = GaeCoreArgs(T, M, g, gl, s(0.05), 0, s(value_scale), q(1.5),
                       rs(8.0), q(0.5), rs(4.0), q(-2.0))
    return codes, args


def images(cfg, codes):
    return {
        "rewards": pack_rows(cfg, "rewards", codes["rewards"]),
        "values": pack_rows(cfg, "values", np.vstack([codes["values"], codes["bootstrap"][None]])),
        "dones": pack_rows(cfg, "dones", codes["dones"]),
    }


def run_core(cfg, codes, args, *, runs=1):
    """Load, start, wait, read back. Returns (result dict, status dict) of the last run."""
    dut = GaeCore(cfg)
    DB = cfg.axi_data_width // 8
    T, M = codes["rewards"].shape
    imgs = images(cfg, codes)
    res = {}

    async def host_write(ctx, name, img):
        base = region_base(cfg, name) // DB
        for i in range(len(img) // DB):
            ctx.set(dut.host.addr, base + i)
            ctx.set(dut.host.we, (1 << DB) - 1)
            ctx.set(dut.host.wdata, int.from_bytes(img[i * DB:(i + 1) * DB], "little"))
            await ctx.tick()
        ctx.set(dut.host.we, 0)

    async def host_read(ctx, name, nbytes):
        # One read per cycle; each word on rdata read_latency cycles after its read.
        base = region_base(cfg, name) // DB
        n, lat = nbytes // DB, dut.host.signature.read_latency
        buf = bytearray()
        for c in range(n + lat - 1):
            if c < n:
                ctx.set(dut.host.addr, base + c)
            ctx.set(dut.host.re, int(c < n))
            await ctx.tick()
            if c + 1 >= lat:
                buf += ctx.get(dut.host.rdata).to_bytes(DB, "little")
        ctx.set(dut.host.re, 0)
        return bytes(buf)

    async def bench(ctx):
        for name, img in imgs.items():
            await host_write(ctx, name, img)
        for k, v in vars(args).items():
            if hasattr(dut.args, k):               # the registers' raw bits
                sig = getattr(dut.args, k)
                ctx.set(sig, v & ((1 << len(sig)) - 1))
        await ctx.tick()                           # arguments stable the cycle before start
        for _ in range(runs):
            ctx.set(dut.ctrl.start, 1)
            await ctx.tick()
            ctx.set(dut.ctrl.start, 0)
            cycles = 1
            while not ctx.get(dut.ctrl.done):
                assert cycles < 100_000
                await ctx.tick()
                cycles += 1
        res["cycles"] = cycles
        res["busy_cycles"] = ctx.get(dut.ctrl.cycles)
        res["error"] = ctx.get(dut.ctrl.error)
        for f in ("dequant_overflow", "pe_overflow", "requant_overflow"):
            res[f] = bool(ctx.get(getattr(dut.status, f"status_{f}")))
        G = -(-M // cfg.n_pe)
        res["images"] = {name: await host_read(ctx, name, (T + 1) * G * word_bytes(cfg, name))
                         for name in cfg.regions}

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    return res, dut


def results_of(cfg, res, T, M):
    img = res["images"]
    if cfg.results == "inplace":
        return (unpack_rows(cfg, "rewards", img["rewards"], T, M),
                unpack_rows(cfg, "values", img["values"], T, M))
    return unpack_rows(cfg, "adv", img["adv"], T, M), unpack_rows(cfg, "rtg", img["rtg"], T, M)


CASES = [
    # (n_pe, max_traj, capacity, axi, results, k, mode, T, M)
    (2, 6, 10, 32, "inplace", 2, "lookahead", 5, 3),
    (4, 8, 12, 32, "full", 3, "interleaved", 6, 7),
    (3, 7, 9, 64, "inplace", 1, "lookahead", 9, 7),
    (1, 2, 6, 32, "full", 4, "lookahead", 1, 1),
    (8, 8, 6, 32, "inplace", 2, "interleaved", 4, 5),
    (5, 5, 4, 128, "full", 2, "lookahead", 3, 5),
    (2, 4, 5, 32, "inplace", 9, "lookahead", 4, 3),     # waits for the power chain
    (2, 4, 5, 32, "full", 8, "interleaved", 2, 4),
]


@pytest.mark.parametrize("n_pe,maxt,cap,axi,results,k,mode,T,M", CASES)
def test_core_matches_golden(n_pe, maxt, cap, axi, results, k, mode, T, M):
    cfg = GaeCoreConfig(n_pe=n_pe, max_trajectories=maxt, capacity=cap, axi_data_width=axi,
                        results=results, pe=GaePeConfig(k=k, mode=mode))
    rng = np.random.default_rng(n_pe * 100 + T)
    codes, args = random_case(cfg, T, M, rng)
    exp = gae_core(codes["rewards"], codes["values"], codes["bootstrap"], codes["dones"],
                   args, cfg)
    res, dut = run_core(cfg, codes, args, runs=2)   # a second run on its own results
    assert res["error"] == 0
    # Two in-place runs: the second works on the first one's results.
    if results == "inplace":
        codes2 = dict(codes, rewards=exp["adv"], values=exp["rtg"])
        exp = gae_core(codes2["rewards"], codes2["values"], codes2["bootstrap"],
                       codes2["dones"], args, cfg)
    adv, rtg = results_of(cfg, res, T, M)
    np.testing.assert_array_equal(adv, exp["adv"])
    np.testing.assert_array_equal(rtg, exp["rtg"])
    for f in ("dequant_overflow", "pe_overflow", "requant_overflow"):
        assert res[f] == exp[f], f
    assert res["cycles"] == gae_spec.run_cycles(cfg, T, M)
    assert res["busy_cycles"] == res["cycles"] - 1


@pytest.mark.parametrize("results,bits,shift", [("inplace", 8, 0), ("inplace", 16, 31),
                                                ("inplace", 16, None), ("full", 16, None),
                                                ("full", 8, 31)])
def test_core_matches_golden_on_random_scale_words(results, bits, shift):
    """Scale words (mantissa and shift) at shifts 0, 31 or random, random offsets, 8- and
    16-bit codes: bit-exact, the same sticky flags, exact cycles."""
    from gae_cases import random_scale_args
    cfg = GaeCoreConfig(n_pe=3, max_trajectories=6, capacity=8, axi_data_width=64,
                        results=results, code_bits=bits)
    rng = np.random.default_rng(bits * 7 + (shift or 3))
    for _ in range(2):
        codes, _ = random_case(cfg, 5, 5, rng)
        args = random_scale_args(cfg, 5, 5, rng, shift)
        exp = gae_core(codes["rewards"], codes["values"], codes["bootstrap"], codes["dones"],
                       args, cfg)
        res, _ = run_core(cfg, codes, args)
        adv, rtg = results_of(cfg, res, 5, 5)
        np.testing.assert_array_equal(adv, exp["adv"])
        np.testing.assert_array_equal(rtg, exp["rtg"])
        for f in ("dequant_overflow", "pe_overflow", "requant_overflow"):
            assert res[f] == exp[f], f
        assert res["cycles"] == gae_spec.run_cycles(cfg, 5, 5)


def test_core_flags_saturation():
    cfg = GaeCoreConfig(n_pe=2, max_trajectories=4, capacity=8, axi_data_width=32)
    codes, args = random_case(cfg, 6, 4, np.random.default_rng(3))
    args.value_scale = cfg.scale_format.quantize(100.0)   # values up to 12700: RTG codes clip
    exp = gae_core(codes["rewards"], codes["values"], codes["bootstrap"], codes["dones"],
                   args, cfg)
    assert exp["requant_overflow"]
    res, _ = run_core(cfg, codes, args)
    assert res["requant_overflow"] and not res["dequant_overflow"]
    adv, rtg = results_of(cfg, res, 6, 4)
    np.testing.assert_array_equal(rtg, exp["rtg"])


@pytest.mark.parametrize("T,M,error", [(0, 3, 1), (3, 0, 2), (9, 4, 3), (4, 9, 3),
                                       (1, 5000, 3)])
def test_core_refuses_bad_arguments_without_touching_memory(T, M, error):
    cfg = GaeCoreConfig(n_pe=2, max_trajectories=4, capacity=8, axi_data_width=32)
    codes, args = random_case(cfg, 3, 3, np.random.default_rng(4))
    args.num_timesteps, args.num_trajectories = T, M
    res, _ = run_core(cfg, codes, args)
    assert res["error"] == error == check_args(args, cfg)
    img = images(cfg, codes)
    for name in ("rewards", "dones"):
        assert res["images"][name][:len(img[name])] == img[name]
    assert res["cycles"] <= 2 + -(-min(M, 4096) // cfg.n_pe)      # at most the setup loop


def test_core_refuses_coefficient_above_one():
    cfg = GaeCoreConfig(n_pe=2, max_trajectories=4, capacity=8, axi_data_width=32)
    codes, args = random_case(cfg, 3, 3, np.random.default_rng(5))
    args.gamma = (1 << cfg.pe.coef_frac) + 1
    res, _ = run_core(cfg, codes, args)
    assert res["error"] == 4


@pytest.mark.parametrize("params,match", [
    ({"n_pe": 0}, r"n_pe must be an integer in 1\.\.128, not 0"),
    ({"code_bits": 4}, "code_bits must be 8 or 16, not 4"),
    ({"results": "both"}, "results must be one of inplace, full, not 'both'"),
    ({"axi_data_width": 48}, "axi_data_width must be one of 32, 64, 128, 256, 512, not 48"),
    ({"capacity": 0}, r"capacity must be an integer in 1\.\.65536, not 0"),
    ({"pe": 3}, "pe must be a GaePeConfig"),
])
def test_core_config_rejects_bad_parameters(params, match):
    with pytest.raises(ValueError, match=match):
        GaeCoreConfig(**params)


def test_core_matches_golden_on_the_drivers_caller_units_registers():
    """The registers GaeDriver's default (caller's units) writes: a non-zero reward offset
    (mid-range) and scales rounded up to whole ulps, here for a constant +1 reward stream with
    a few -5s; the simulated core equals the bit-exact model."""
    from sw.driver import GaeDriver, GoldenDevice

    cfg = GaeCoreConfig(n_pe=2, max_trajectories=6, capacity=10, axi_data_width=32,
                        results="inplace", pe=GaePeConfig(k=2, mode="lookahead"))
    T, M = 6, 3
    rng = np.random.default_rng(31)
    r = np.ones((T, M))
    r[2, 1] = r[5, 0] = -5.0
    v = 10 + rng.normal(size=(T, M))
    d = np.zeros((T, M), bool)
    d[2, 1] = True
    b = GaeDriver(GoldenDevice(cfg), cfg).prepare(r, v, d, 10 + rng.normal(size=M), 0.99, 0.95)
    assert b.args.reward_offset != 0
    exp = gae_core(b.codes["rewards"], b.codes["values"], b.codes["bootstrap"], b.codes["dones"],
                   b.args, cfg)
    res, _ = run_core(cfg, b.codes, b.args)
    assert res["error"] == 0
    adv, rtg = results_of(cfg, res, T, M)
    np.testing.assert_array_equal(adv, exp["adv"])
    np.testing.assert_array_equal(rtg, exp["rtg"])


@pytest.mark.parametrize("n", [2, 8, 16, 17, 64])
def test_lane_mask_is_p_below_count(n):
    """The write-back's and dequantizer's lane masks (``_lane_mask``): bit p is p < count,
    one cycle after count, for every count in 0..n."""
    from amaranth.hdl import Cat, Module, Signal

    from rtl_gen.gae.core import _lane_mask

    m = Module()
    count = Signal(range(n + 1))
    mask = Signal(n)
    m.d.comb += mask.eq(Cat(*_lane_mask(m, count, n, name="t")))
    got = {}

    async def bench(ctx):
        for c in range(n + 1):
            ctx.set(count, c)
            await ctx.tick()
            got[c] = ctx.get(mask)

    sim = Simulator(m)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert got == {c: (1 << c) - 1 for c in range(n + 1)}
