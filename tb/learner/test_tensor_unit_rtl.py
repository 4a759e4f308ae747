"""Tensor unit: RTL under Verilator vs the bit-exact golden model (thorough tier).

pytest builds one Verilator model per parameter set (``CONFIGS``, through ``sw.registry``)
and runs the cocotb tests below against it: random GEMMs smaller than, equal to, larger than
and not multiples of the array, bit-exact against :class:`sw.learner.gemm.TensorUnitModel` and
:func:`sw.learner.gemm.gemm_fixed`; transfer cycles equal to :func:`sw.learner.gemm.schedule`;
MAC utilisation of GEMMs four times the array size; idles and back-pressure; saturation and
the sticky flags.
"""

import random

import numpy as np
import pytest

from cocotb_util import StreamTB, load_manifest, run_block

CONFIGS = [
    # 8 × 8 with the defaults: 16-bit operands (Q7.8), 32-bit accumulators, Q7.8 output.
    {"rows": 8, "cols": 8},
    # 4 × 4: other widths, fractions and rounding, a short max_k.
    {"rows": 4, "cols": 4, "in_width": 12, "a_frac": 6, "b_frac": 9, "acc_width": 30,
     "out_width": 14, "out_frac": 7, "rounding": "half_even", "max_k": 64},
]


def _id(p):
    return f"{p['rows']}x{p['cols']}"


@pytest.mark.slow
@pytest.mark.parametrize("params", CONFIGS, ids=_id)
def test_tensor_unit_rtl(params):
    run_block("tensor-unit", params, __file__, seed=20260601)


# -- cocotb side ----------------------------------------------------------------------------------
class TensorUnitTB(StreamTB):
    """StreamTB's clock and reset with a driver loop for unequal input and output counts."""

    async def transfer(self, words, n_out, *, idle=0.0, stall=0.0, rng=None):
        """Send ``words``, collect ``n_out`` beats. Returns (beats, in_cycles, out_cycles)."""
        from cocotb.triggers import FallingEdge, ReadOnly

        rng = rng or random.Random(0)
        outs, cin, cout = [], [], []
        sent = 0
        limit = 20 * (len(words) + n_out) + 200
        for cycle in range(limit):
            await FallingEdge(self.dut.clk)
            offer = sent < len(words) and not (idle and rng.random() < idle)
            self.i_valid.value = int(offer)
            if offer:
                self.i_payload.value = words[sent]
            self.o_ready.value = int(not (stall and rng.random() < stall))
            await ReadOnly()
            if offer and self.i_ready.value:
                cin.append(cycle)
                sent += 1
            if self.o_valid.value and self.o_ready.value:
                outs.append(self.o_payload.value.to_unsigned())
                cout.append(cycle)
            if sent == len(words) and len(outs) == n_out:
                break
        await FallingEdge(self.dut.clk)
        self.i_valid.value = 0
        if len(outs) != n_out:
            raise AssertionError(f"timeout: {sent}/{len(words)} elements in, "
                                 f"{len(outs)}/{n_out} beats out after {limit} cycles")
        return outs, np.array(cin), np.array(cout)


async def _setup(dut):
    import cocotb

    from sw.learner.spec import TensorUnitConfig

    cfg = TensorUnitConfig.from_dict(load_manifest()["config"])
    seed = cocotb.RANDOM_SEED
    cocotb.log.info("config %s, seed %d", cfg, seed)
    assert len(dut.i__payload) == cfg.rows * cfg.in_width + cfg.cols * cfg.in_width + 1
    tb = TensorUnitTB(dut)
    dut.clear.value = 0
    await tb.start()
    return tb, cfg, np.random.default_rng(seed)


def _operands(cfg, rng, M, K, N):
    a = rng.integers(cfg.a_format.min_raw // 2, cfg.a_format.max_raw // 2 + 1, (M, K))
    b = rng.integers(cfg.b_format.min_raw // 2, cfg.b_format.max_raw // 2 + 1, (K, N))
    return a, b


async def _run_gemms(tb, cfg, cases, **kw):
    """Stream the GEMMs of ``cases`` back to back; check every beat against the element model
    and every GEMM against gemm_fixed. Returns (stream, in_cycles, out_cycles)."""
    from cocotb.triggers import FallingEdge

    from rtl_gen.learner import pack_elements, unpack_beats
    from sw.learner.gemm import TensorUnitModel, gemm_fixed, tile_stream, untile

    await FallingEdge(tb.dut.clk)          # a fresh model: clear the sticky flags
    tb.dut.clear.value = 1
    await FallingEdge(tb.dut.clk)
    tb.dut.clear.value = 0
    parts, tiles_of = [], []
    for a, b in cases:
        stream, tiles = tile_stream(a, b, cfg)
        parts.append(stream)
        tiles_of.append(tiles)
    stream = {f: np.concatenate([p[f] for p in parts]) for f in parts[0]}
    model = TensorUnitModel(cfg)
    expect = model.run(stream["a"], stream["b"], stream["last"])
    words = pack_elements(cfg, stream["a"], stream["b"], stream["last"])
    outs, cin, cout = await tb.transfer(words, len(expect["c"]), **kw)
    c, ovf, last = unpack_beats(cfg, outs)
    for name, got, exp in (("c", c, expect["c"]), ("overflow", ovf, expect["overflow"]),
                           ("last", last, expect["last"])):
        bad = np.flatnonzero((got != exp).reshape(len(got), -1).any(axis=1))
        assert bad.size == 0, (f"{name} differs in {bad.size} beats, first beat {bad[0]}: "
                               f"rtl {got[bad[0]]} golden {exp[bad[0]]}")
    start = 0
    for (a, b), tiles in zip(cases, tiles_of):
        n = len(tiles) * cfg.rows
        out, _ = untile({"c": c[start:start + n], "overflow": ovf[start:start + n]}, tiles,
                        a.shape[0], b.shape[1], cfg)
        np.testing.assert_array_equal(out, gemm_fixed(a, b, cfg))
        start += n
    assert int(tb.dut.overflow.value) == int(model.sticky_overflow)
    return stream, cin, cout


try:
    import cocotb
except ImportError:  # pragma: no cover
    cocotb = None

if cocotb is not None:
    @cocotb.test()
    async def random_gemms_back_to_back(dut):
        """GEMMs smaller, equal, larger, non-multiples; no gaps: bit-exact, cycles as modelled."""
        from sw.learner.gemm import gemm_cycles, schedule

        tb, cfg, rng = await _setup(dut)
        R, C = cfg.rows, cfg.cols
        shapes = [(1, 1, 1), (R - 1, 3, C - 1), (R, R, C), (R + 1, 2 * R + 3, C + 2),
                  (3 * R - 1, 5, 2 * C + 1), (2 * R, R - 1, C)]
        cases = [_operands(cfg, rng, *s) for s in shapes]
        stream, cin, cout = await _run_gemms(tb, cfg, cases)
        exp_in, exp_out = schedule(stream["last"], cfg)
        assert (cin - cin[0] == exp_in).all(), "input transfers differ from the model"
        assert (cout - cin[0] == exp_out).all(), "output beats differ from the model"
        # Each GEMM alone, as the closed form: run the largest one by itself.
        a, b = cases[3]
        _, cin, cout = await _run_gemms(tb, cfg, [(a, b)])
        assert cout[-1] - cin[0] + 1 == gemm_cycles(*a.shape, b.shape[1], cfg)

    @cocotb.test()
    async def utilisation_at_four_times_the_array(dut):
        """M = K = N = 4·max(R, C): ≥ 90 % of the MAC cycles do useful work (in cycles)."""
        from sw.learner.gemm import gemm_cycles, ideal_cycles

        tb, cfg, rng = await _setup(dut)
        n = 4 * max(cfg.rows, cfg.cols)
        _, cin, cout = await _run_gemms(tb, cfg, [_operands(cfg, rng, n, n, n)])
        cycles = int(cout[-1] - cin[0] + 1)
        assert cycles == gemm_cycles(n, n, n, cfg)
        util = ideal_cycles(n, n, n, cfg) / cycles
        dut._log.info("%d×%d×%d on %d×%d: %d cycles, ideal %d, utilisation %.1f %%",
                      n, n, n, cfg.rows, cfg.cols, cycles, ideal_cycles(n, n, n, cfg),
                      100 * util)
        assert util >= 0.90

    @cocotb.test()
    async def idles_and_backpressure(dut):
        """Random input idles and output stalls: still bit-exact, nothing lost or reordered."""
        tb, cfg, rng = await _setup(dut)
        R, C = cfg.rows, cfg.cols
        cases = [_operands(cfg, rng, *s) for s in [(R + 2, 7, C + 3), (R, 2, 2 * C)]]
        for p_idle, p_stall in ((0.3, 0.0), (0.0, 0.4), (0.5, 0.5)):
            await _run_gemms(tb, cfg, cases, idle=p_idle, stall=p_stall,
                             rng=random.Random(int(rng.integers(1 << 30))))

    @cocotb.test()
    async def saturation_and_sticky_flags(dut):
        """Extreme operands saturate the accumulator and the output, a reduction longer than
        max_k sets k_overflow; both flags stick until clear."""
        from cocotb.triggers import RisingEdge

        from rtl_gen.learner import pack_elements, unpack_beats
        from sw.learner.gemm import TensorUnitModel

        tb, cfg, rng = await _setup(dut)
        R, C = cfg.rows, cfg.cols
        K = min(cfg.max_k + 3, 80)
        a = np.full((K, R), cfg.a_format.min_raw)
        b = np.where(rng.random((K, C)) < 0.5, cfg.b_format.min_raw, cfg.b_format.max_raw)
        last = np.zeros(K, bool)
        last[-1] = True
        model = TensorUnitModel(cfg)
        expect = model.run(a, b, last)
        outs, _, _ = await tb.transfer(pack_elements(cfg, a, b, last), R)
        c, ovf, _ = unpack_beats(cfg, outs)
        assert (c == expect["c"]).all() and (ovf == expect["overflow"]).all()
        assert ovf.all()
        assert int(dut.overflow.value) == 1
        assert int(dut.k_overflow.value) == int(model.sticky_k_overflow) == int(K > cfg.max_k)
        dut.clear.value = 1
        await RisingEdge(dut.clk)
        dut.clear.value = 0
        await RisingEdge(dut.clk)
        assert int(dut.overflow.value) == 0 and int(dut.k_overflow.value) == 0
