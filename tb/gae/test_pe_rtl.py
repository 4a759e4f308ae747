"""GAE processing element: RTL under Verilator vs the bit-exact golden model (thorough tier).

pytest builds one Verilator model per parameter set (``CONFIGS``) and runs the cocotb tests
below against it. Each cocotb test compares every output field (advantage, reward-to-go,
overflow, tags) with :class:`sw.gae.golden.GaePeModel`, and the model with the vectorised
:func:`sw.gae.golden.gae_fixed`.
"""

import random

import numpy as np
import pytest

from cocotb_util import StreamTB, load_manifest, run_block

# -- parameter sets -------------------------------------------------------------------------------
FMT_A = {"data_width": 32, "data_frac": 16, "coef_width": 17, "rounding": "half_up"}
FMT_B = {"data_width": 20, "data_frac": 10, "coef_width": 14, "rounding": "half_even"}
CONFIGS = (
    [dict(FMT_A, k=k, mode="lookahead") for k in (1, 2, 3, 4)]
    + [dict(FMT_A, k=k, mode="interleaved") for k in (2, 3, 4)]
    + [dict(FMT_B, k=2, mode="lookahead"), dict(FMT_B, k=3, mode="interleaved"),
       dict(FMT_B, k=4, mode="lookahead")]
)


def _id(p):
    return f"{p['mode'][:2]}{p['k']}-w{p['data_width']}"


#: In the heavy tier: every (mode, k) and each format and rounding runs in ``make test`` without
#: them (interleaved k = 3 at 20 bits, lookahead k = 4 at 32 bits, half-even rounding on
#: lo2-w20 and in3-w20); each costs about 20 s, mostly its C++ compile.
HEAVY = {"in3-w32", "lo4-w20"}


@pytest.mark.slow
@pytest.mark.parametrize("params", [
    pytest.param(p, id=_id(p), marks=[pytest.mark.heavy] if _id(p) in HEAVY else [])
    for p in CONFIGS])
def test_gae_pe_rtl(params):
    run_block("gae-pe", params, __file__, seed=20261122)


# -- cocotb side ----------------------------------------------------------------------------------
async def _setup(dut):
    import cocotb

    from sw.gae.spec import GaePeConfig
    from rtl_gen.gae.pe import gae_input_layout, gae_output_layout

    cfg = GaePeConfig.from_dict(load_manifest()["config"])
    seed = cocotb.RANDOM_SEED
    cocotb.log.info("config %s, seed %d", cfg, seed)
    tb = StreamTB(dut)
    await tb.start()
    return tb, cfg, gae_input_layout(cfg), gae_output_layout(cfg), np.random.default_rng(seed)


def _random_batch(rng, cfg, T, N, *, reward_scale=1.0, value_scale=3.0, p_done=0.1):
    dfmt = cfg.data_format
    return (dfmt.quantize(rng.normal(0, reward_scale, (T, N))),
            dfmt.quantize(rng.normal(0, value_scale, (T, N))),
            rng.random((T, N)) < p_done,
            dfmt.quantize(rng.normal(0, value_scale, N)))


def _concat_streams(batches, cfg):
    """One stream made of several batches of different shapes (variable trajectory lengths)."""
    from sw.gae.golden import make_stream

    parts = [make_stream(*b, cfg)[0] for b in batches]
    return {f: np.concatenate([p[f] for p in parts]) for f in parts[0]}


async def _run_and_check(tb, cfg, in_layout, out_layout, stream, gamma, gl, **kw):
    """Reset, set the coefficients, stream ``stream`` through, compare with the golden model."""
    from cocotb.triggers import ClockCycles

    from rtl_gen.fixed import pack_array, unpack_array
    from sw.gae.golden import GaePeModel

    dut = tb.dut
    model = GaePeModel(cfg, gamma, gl)
    expect = model.run(stream)
    dut.gamma.value = gamma
    dut.gamma_lambda.value = gl
    dut.clear.value = 0
    await tb.reset()
    await ClockCycles(dut.clk, cfg.coef_settle + 1)  # coefficient registers and powers settle
    outs, in_cycles, out_cycles = await tb.run(pack_array(in_layout, stream), **kw)
    got = unpack_array(out_layout, outs)
    for field in ("advantage", "rtg", "overflow", "timestep", "trajectory"):
        bad = np.flatnonzero(got[field] != expect[field])
        assert bad.size == 0, (f"{field} differs at {bad.size} elements, first at {bad[0]}: "
                               f"rtl {got[field][bad[0]]} golden {expect[field][bad[0]]}")
    assert int(dut.overflow.value) == int(model.sticky_overflow)
    return got, np.array(in_cycles), np.array(out_cycles)


def _check_matrix_model(cfg, batch, gamma, gl, got_stream):
    """The stream model and the vectorised model agree on a batch."""
    from sw.gae.golden import gae_fixed, gather_stream, make_stream

    T, N = batch[0].shape
    _, pos = make_stream(*batch, cfg)
    adv, rtg, ovf = gae_fixed(*batch, gamma, gl, cfg)
    a2, r2, o2 = gather_stream(got_stream, pos, T, N)
    assert (adv == a2).all() and (rtg == r2).all() and (ovf == o2).all()


try:
    import cocotb
except ImportError:  # pragma: no cover
    cocotb = None

if cocotb is not None:
    @cocotb.test()
    async def random_back_to_back(dut):
        """Random trajectories of several lengths, no gaps: bit-exact, n + latency cycles."""
        from sw.gae.golden import quantize_coefs

        tb, cfg, il, ol, rng = await _setup(dut)
        batches = [_random_batch(rng, cfg, T, N) for T, N in ((1, 3), (5, 2), (40, 5), (2, 4))]
        stream = _concat_streams(batches, cfg)
        g, gl = quantize_coefs(0.99, 0.95, cfg)
        got, cin, cout = await _run_and_check(tb, cfg, il, ol, stream, g, gl)
        n = len(stream["reward"])
        assert (np.diff(cin) == 1).all(), "input stalled although the output was always ready"
        assert (cout == cin + cfg.latency).all(), "an output was not exactly latency cycles late"
        total = int(cout[-1] - cin[0] + 1)
        assert total == n + cfg.latency, (total, n, cfg.latency)
        dut._log.info("%d elements in %d cycles (latency %d): %.3f elements/cycle",
                      n, total, cfg.latency, n / (cout[-1] - cout[0] + 1))

    @cocotb.test()
    async def gaps_and_backpressure(dut):
        """Random input idles and output stalls: still bit-exact, no loss, no reordering."""
        from sw.gae.golden import quantize_coefs

        tb, cfg, il, ol, rng = await _setup(dut)
        batches = [_random_batch(rng, cfg, 17, 3, p_done=0.2), _random_batch(rng, cfg, 9, 6)]
        stream = _concat_streams(batches, cfg)
        for p_idle, p_stall in ((0.3, 0.0), (0.0, 0.3), (0.5, 0.5)):
            g, gl = quantize_coefs(0.97, 0.9, cfg)
            await _run_and_check(tb, cfg, il, ol, stream, g, gl, idle=p_idle, stall=p_stall,
                                 rng=random.Random(int(rng.integers(1 << 30))))

    @cocotb.test()
    async def coefficient_corners(dut):
        """gamma = lambda = 1, lambda = 0, gamma = 0: the recursion's corner cases."""
        from sw.gae.golden import quantize_coefs

        tb, cfg, il, ol, rng = await _setup(dut)
        batch = _random_batch(rng, cfg, 23, 4)
        stream = _concat_streams([batch], cfg)
        for gamma, lam in ((1.0, 1.0), (0.99, 0.0), (0.0, 0.5)):
            g, gl = quantize_coefs(gamma, lam, cfg)
            got, _, _ = await _run_and_check(tb, cfg, il, ol, stream, g, gl)
            _check_matrix_model(cfg, batch, g, gl, got)

    @cocotb.test()
    async def cartpole_rollout(dut):
        """Real CartPole-v1 trajectories (random policy, linear critic): golden and float."""
        from sw.gae.golden import gae_error_bound, gae_reference, quantize_coefs
        from sw.rollouts import collect

        tb, cfg, il, ol, _ = await _setup(dut)
        ro = collect("CartPole-v1", num_envs=6, num_steps=96, seed=7)
        dfmt = cfg.data_format
        batch = (dfmt.quantize(ro.rewards), dfmt.quantize(ro.values), ro.dones,
                 dfmt.quantize(ro.last_values))
        g, gl = quantize_coefs(0.99, 0.95, cfg)
        got, _, _ = await _run_and_check(tb, cfg, il, ol, _concat_streams([batch], cfg), g, gl)
        _check_matrix_model(cfg, batch, g, gl, got)
        from sw.gae.golden import gather_stream, make_stream
        _, pos = make_stream(*batch, cfg)
        adv, rtg, _ = gather_stream(got, pos, *ro.rewards.shape)
        adv_f, ret_f = gae_reference(ro.rewards, ro.values, ro.dones, ro.last_values, 0.99, 0.95)
        bound_a, bound_r = gae_error_bound(ro.rewards, ro.values, ro.dones, ro.last_values,
                                           0.99, 0.95, cfg)
        err_a = np.abs(dfmt.to_float(adv) - adv_f).max()
        err_r = np.abs(dfmt.to_float(rtg) - ret_f).max()
        dut._log.info("CartPole: max |A err| %.3g (bound %.3g), max |RTG err| %.3g (bound %.3g)",
                      err_a, bound_a, err_r, bound_r)
        assert err_a <= bound_a and err_r <= bound_r

    @cocotb.test()
    async def overflow_saturates_and_sticks(dut):
        """Values near the format's limits saturate, flag the element, set the sticky bit."""
        from cocotb.triggers import RisingEdge

        from sw.gae.golden import quantize_coefs

        tb, cfg, il, ol, rng = await _setup(dut)
        dfmt = cfg.data_format
        T, N = 12, 2
        big = dfmt.max_raw
        batch = (np.full((T, N), big // 2), np.full((T, N), -(big // 2)),
                 np.zeros((T, N), bool), np.full(N, big))
        g, gl = quantize_coefs(1.0, 1.0, cfg)
        got, _, _ = await _run_and_check(tb, cfg, il, ol, _concat_streams([batch], cfg), g, gl)
        assert got["overflow"].any()
        assert (got["advantage"] == dfmt.max_raw).any()
        assert int(dut.overflow.value) == 1
        dut.clear.value = 1
        await RisingEdge(dut.clk)
        dut.clear.value = 0
        await RisingEdge(dut.clk)
        assert int(dut.overflow.value) == 0
