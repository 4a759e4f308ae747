"""The power unit's gateware in Amaranth's simulator (fast tier): :class:`Log2Unit`,
:class:`Exp2Unit` and :class:`PowerUnit` bit for bit against :mod:`sw.powers` on
random inputs (every exponent, every table interval) and edge cases, one result per cycle at
the stated latency, back-pressure; the parameter checks; the Verilog lint-clean."""

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from amaranth.lib import data
from amaranth.sim import Simulator

from rtl_gen.emit import to_verilog
from rtl_gen.fixed import pack_array, unpack_array
from rtl_gen.trainer import Exp2Unit, Log2Unit, PowerUnit
from rtl_gen.powers import EXP2_LATENCY, LOG2_LATENCY, POWER_LATENCY
from sw.powers import PowerConfig, exp2_raw, log2_raw, power_raw

WAIVERS = Path(__file__).resolve().parents[1] / "scripts" / "verilator_waivers.vlt"
SEED = 20261207

#: Small tables (16 intervals): a few thousand inputs visit every entry many times.
SMALL = PowerConfig(table_bits=4, mant_bits=9, table_frac=12, log_frac=8, log_int=6)
DEFAULT = PowerConfig()
#: The trainer's formats: |delta| + eps (24 bits, 16 fraction), alpha and beta (17 bits, 16
#: fraction), priorities (40 bits, 16 fraction), IS weights (17 bits, 16 fraction).
EPS_W, EPS_F, COEF_W, COEF_F = 24, 16, 17, 16


def simulate(dut, rows, *, stall=0.0, idle=0.0, seed=0):
    """Stream ``rows`` (dict of equal-length integer columns of ``dut.i``'s payload) through
    ``dut``. Returns the output columns and the cycles of the input and output transfers."""
    words = pack_array(dut.i.payload.shape(), rows)
    n = len(words)
    rng = np.random.default_rng(seed)
    offers = (rng.random(40 * n + 100) >= idle).tolist()
    readies = (rng.random(40 * n + 100) >= stall).tolist()
    out, cin, cout = [], [], []

    async def bench(ctx):
        sent = 0
        for cycle in range(len(offers)):
            offer = sent < n and offers[cycle]
            ctx.set(dut.i.valid, offer)
            if offer:
                ctx.set(dut.i.payload.as_value(), words[sent])
            ctx.set(dut.o.ready, readies[cycle])
            _, _, i_ready, o_valid, o_payload = await ctx.tick().sample(
                dut.i.ready, dut.o.valid, dut.o.payload.as_value())
            if offer and i_ready:
                cin.append(cycle)
                sent += 1
            if readies[cycle] and o_valid:
                out.append(o_payload)
                cout.append(cycle)
                if len(out) == n:
                    return

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert len(out) == n, f"only {len(out)} of {n} results"
    return unpack_array(dut.o.payload.shape(), out), np.array(cin), np.array(cout)


def check_timing(dut, cin, cout):
    """With the output always ready and no idle input: one transfer per cycle each way, every
    result ``dut.latency`` cycles after its input."""
    n = len(cin)
    assert np.array_equal(cin, np.arange(n))
    assert np.array_equal(cout, cin + dut.latency)


def log_inputs(rng, width, n):
    """``n`` unsigned ``width``-bit inputs, log-uniform (every leading-one position), with the
    edges: 0, 1, 2, 3, every power of two and its predecessor, the largest."""
    bits = rng.integers(0, width + 1, n)
    x = rng.integers(0, 1 << 62, n, dtype=np.int64) & ((np.int64(1) << bits) - 1)
    p2 = [1 << k for k in range(width)]
    edges = [0, 1, 2, 3, (1 << width) - 1] + p2 + [v - 1 for v in p2[2:]] + \
        [v + 1 for v in p2[1:]]
    return np.concatenate([np.array(edges, dtype=np.int64), x])


# -- log2 ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("cfg,width,frac,n", [
    (SMALL, 12, 4, 4096),          # exhaustive: every 12-bit input
    (SMALL, 31, 24, 1500),
    (DEFAULT, 62, 20, 2500),       # the widest input, mantissas truncated
    (DEFAULT, EPS_W, EPS_F, 1500),
    (DEFAULT, 1, 0, 2),
], ids=["small-12-exhaustive", "small-31", "default-62", "default-eps", "one-bit"])
def test_log2_unit_matches_golden(cfg, width, frac, n):
    dut = Log2Unit(cfg, in_width=width, in_frac=frac, tag_shape=12)
    if n == 1 << width:
        x = np.arange(n, dtype=np.int64)
    else:
        x = log_inputs(np.random.default_rng(SEED + width), width, n)[:max(n, 2)]
    tag = np.arange(len(x)) & 0xFFF
    out, cin, cout = simulate(dut, {"x": x, "tag": tag})
    assert np.array_equal(out["log"], log2_raw(cfg, x, frac))
    assert np.array_equal(out["tag"], tag)
    check_timing(dut, cin, cout)
    assert dut.latency == LOG2_LATENCY == 6


# -- exp2 ---------------------------------------------------------------------------------------
def exp_inputs(rng, cfg, n, out_frac, out_width):
    """Raw logarithms: uniform over the format, dense around the output's range (saturation
    and rounding to 0), with the edges log_min, log_min + 1, log_max, 0, +-1."""
    lo, hi = cfg.log_min, cfg.log_max
    one = 1 << cfg.log_frac
    near = rng.integers(-(out_frac + cfg.table_frac + 4) * one,
                        (out_width - out_frac + 2) * one, n)
    wide = rng.integers(lo, hi + 1, n // 4)
    edges = [lo, lo + 1, hi, hi - 1, 0, 1, -1, (out_width - out_frac) * one,
             (out_width - out_frac) * one - 1, -(out_frac + 1) * one, -(out_frac + 2) * one]
    return np.clip(np.concatenate([np.array(edges), near, wide]), lo, hi).astype(np.int64)


@pytest.mark.parametrize("cfg,out_frac,out_width,n", [
    (SMALL, 6, 10, 3000),
    (DEFAULT, COEF_F, COEF_W, 2000),      # IS weights
    (DEFAULT, EPS_F, 40, 1500),            # priorities
    (DEFAULT, 0, 62, 1500),                # the widest output (int64 at its limit)
    (PowerConfig(table_bits=6, mant_bits=12, table_frac=10, log_frac=6, log_int=6), 3, 5, 1500),
], ids=["small", "weights", "priorities", "wide", "log_frac-equals-T"])
def test_exp2_unit_matches_golden(cfg, out_frac, out_width, n):
    dut = Exp2Unit(cfg, out_frac=out_frac, out_width=out_width, tag_shape=data.StructLayout(
        {"a": 3, "b": 5}))
    y = exp_inputs(np.random.default_rng(SEED + out_width), cfg, n, out_frac, out_width)
    tag = (np.arange(len(y)) * 7) & 0xFF
    tag_layout = dut.tag_shape
    out, cin, cout = simulate(dut, {"y": y, "tag": tag})
    v, over = exp2_raw(cfg, y, out_frac, out_width)
    assert np.array_equal(out["value"], v)
    assert np.array_equal(out["overflow"], over.astype(np.int64))
    assert np.array_equal(out["tag"], tag) and tag_layout.size == 8
    assert over.any() and (v == 0).any() and ((v > 0) & ~over).any()
    check_timing(dut, cin, cout)
    assert dut.latency == EXP2_LATENCY == 5


# -- x**p ---------------------------------------------------------------------------------------
def power_case(cfg, rng, n, in_width, in_frac, p_width, p_frac, p_values=()):
    x = log_inputs(rng, in_width, n)
    ps = rng.integers(0, 1 << p_width, len(x))
    for j, p in enumerate(p_values):          # the exponents in use (alpha, beta), many times
        ps[j::len(p_values) + 1] = p
    return x, ps


def power_golden(cfg, x, ps, in_frac, p_frac, out_frac, out_width):
    v, over = np.zeros(len(x), np.int64), np.zeros(len(x), bool)
    for p in np.unique(ps):
        sel = ps == p
        v[sel], over[sel] = power_raw(cfg, x[sel], in_frac, int(p), p_frac, out_frac,
                                      out_width)
    return v, over


@pytest.mark.parametrize("cfg,fmt,p_values,n", [
    # priorities (|delta| + eps)**alpha: alpha in {0, 0.4, 0.6, 1}
    (DEFAULT, (EPS_W, EPS_F, COEF_W, COEF_F, EPS_F, 40), (0, 26214, 39322, 1 << 16), 2500),
    # large exponents: saturation, the clamp of p·log2 x, underflow to 0
    (SMALL, (16, 6, 8, 3, 4, 12), (0, 1, 8, 255), 2500),
    (DEFAULT, (62, 30, 12, 10, 30, 62), (), 1500),
], ids=["priorities", "small-large-p", "wide"])
def test_power_unit_matches_golden(cfg, fmt, p_values, n):
    in_width, in_frac, p_width, p_frac, out_frac, out_width = fmt
    dut = PowerUnit(cfg, in_width=in_width, in_frac=in_frac, p_width=p_width, p_frac=p_frac,
                    out_frac=out_frac, out_width=out_width, tag_shape=10)
    x, ps = power_case(cfg, np.random.default_rng(SEED + in_width), n, in_width, in_frac,
                       p_width, p_frac, p_values)
    tag = np.arange(len(x)) & 0x3FF
    out, cin, cout = simulate(dut, {"x": x, "p": ps, "tag": tag})
    v, over = power_golden(cfg, x, ps, in_frac, p_frac, out_frac, out_width)
    assert np.array_equal(out["value"], v)
    assert np.array_equal(out["overflow"], over.astype(np.int64))
    assert np.array_equal(out["tag"], tag)
    check_timing(dut, cin, cout)
    assert dut.latency == POWER_LATENCY == 15


@pytest.mark.parametrize("stall,idle", [(0.0, 0.0), (0.4, 0.3)])
def test_block_tables(stall, idle):
    """``tables="block"``: both tables marked for block RAM (``rom_style``), one more register
    after each (latency 15 + 2), the same results, also under back-pressure."""
    fmt = dict(in_width=16, in_frac=6, p_width=8, p_frac=3, out_frac=4, out_width=12)
    dut = PowerUnit(SMALL, tag_shape=10, tables="block", **fmt)
    assert to_verilog(dut, "power_block").count('(* rom_style = "block" *)') == 2
    assert "rom_style" not in to_verilog(PowerUnit(SMALL, tag_shape=10, **fmt), "power_auto")
    dut = PowerUnit(SMALL, tag_shape=10, tables="block", **fmt)
    assert (dut.latency, dut.log2.latency, dut.exp2.latency) == (
        POWER_LATENCY + 2, LOG2_LATENCY + 1, EXP2_LATENCY + 1)
    rng = np.random.default_rng(SEED + 7)
    x, ps = power_case(SMALL, rng, 600, 16, 6, 8, 3)
    tag = np.arange(len(x)) & 0x3FF
    out, cin, cout = simulate(dut, {"x": x, "p": ps, "tag": tag}, stall=stall, idle=idle,
                              seed=int(rng.integers(1 << 31)))
    v, over = power_golden(SMALL, x, ps, 6, 3, 4, 12)
    assert np.array_equal(out["tag"], tag)
    assert np.array_equal(out["value"], v)
    assert np.array_equal(out["overflow"], over.astype(np.int64))
    if stall == idle == 0:
        check_timing(dut, cin, cout)
    else:
        assert np.all(cout >= cin + dut.latency)


@pytest.mark.parametrize("stall,idle", [(0.3, 0.0), (0.0, 0.4), (0.5, 0.3)])
def test_power_unit_under_backpressure(stall, idle):
    """Random idle inputs and stalled outputs: every result, in order, bit for bit."""
    fmt = dict(in_width=16, in_frac=6, p_width=8, p_frac=3, out_frac=4, out_width=12)
    dut = PowerUnit(SMALL, tag_shape=10, **fmt)
    rng = np.random.default_rng(SEED + int(100 * stall + 10 * idle))
    x, ps = power_case(SMALL, rng, 600, 16, 6, 8, 3)
    tag = np.arange(len(x)) & 0x3FF
    out, cin, cout = simulate(dut, {"x": x, "p": ps, "tag": tag}, stall=stall, idle=idle,
                              seed=int(rng.integers(1 << 31)))
    v, over = power_golden(SMALL, x, ps, 6, 3, 4, 12)
    assert np.array_equal(out["tag"], tag)
    assert np.array_equal(out["value"], v)
    assert np.array_equal(out["overflow"], over.astype(np.int64))
    assert np.all(cout >= cin + POWER_LATENCY)


# -- parameter checks -------------------------------------------------------------------------
@pytest.mark.parametrize("make,err,match", [
    (lambda: Log2Unit(DEFAULT, in_width=0, in_frac=0), ValueError,
     r"in_width must be an integer in 1\.\.62, not 0"),
    (lambda: Log2Unit(DEFAULT, in_width=63, in_frac=0), ValueError, "in_width must be"),
    (lambda: Log2Unit(DEFAULT, in_width=8, in_frac=-1), ValueError, "in_frac must be"),
    (lambda: Log2Unit(PowerConfig(log_int=6), in_width=8, in_frac=63), ValueError,
     r"in_frac must be an integer in 0\.\.62, not 63"),
    (lambda: Log2Unit(PowerConfig(log_int=7), in_width=8, in_frac=127), ValueError,
     r"in_frac must be an integer in 0\.\.126, not 127"),
    (lambda: Log2Unit({"table_bits": 8}, in_width=8, in_frac=0), TypeError,
     "config must be a PowerConfig, not"),
    (lambda: Log2Unit(DEFAULT, in_width=8, in_frac=0, tag_shape="x"), TypeError,
     "tag_shape must be a shape"),
    (lambda: Log2Unit(DEFAULT, in_width=8, in_frac=0, tag_shape=-1), TypeError,
     "tag_shape must be a shape"),
    (lambda: Exp2Unit(DEFAULT, out_frac=16, out_width=63), ValueError,
     r"out_width must be an integer in 1\.\.62, not 63"),
    (lambda: Exp2Unit(DEFAULT, out_frac=-1, out_width=8), ValueError, "out_frac must be"),
    (lambda: Exp2Unit(DEFAULT, out_frac=1.0, out_width=8), ValueError, "out_frac must be"),
    (lambda: PowerUnit(DEFAULT, in_width=8, in_frac=0, p_width=0, p_frac=0, out_frac=0,
                       out_width=8), ValueError, "p_width must be"),
    (lambda: PowerUnit(DEFAULT, in_width=8, in_frac=0, p_width=8, p_frac=33, out_frac=0,
                       out_width=8), ValueError, "p_frac must be"),
    (lambda: PowerUnit(DEFAULT, in_width=0, in_frac=0, p_width=8, p_frac=3, out_frac=0,
                       out_width=8), ValueError, "in_width must be"),
    (lambda: PowerUnit(DEFAULT, in_width=8, in_frac=0, p_width=8, p_frac=3, out_frac=0,
                       out_width=63), ValueError, r"out_width must be an integer in 1\.\.62"),
    (lambda: PowerUnit(DEFAULT, in_width=8, in_frac=0, p_width=8, p_frac=3, out_frac=0,
                       out_width=8, tag_shape=1.5), TypeError, "tag_shape must be a shape"),
    (lambda: Log2Unit(DEFAULT, in_width=8, in_frac=0, tables="bram"), ValueError,
     r"tables must be one of 'auto', 'block', not 'bram'"),
    (lambda: Exp2Unit(DEFAULT, out_frac=0, out_width=8, tables=None), ValueError,
     "tables must be one of"),
    (lambda: PowerUnit(DEFAULT, in_width=8, in_frac=0, p_width=8, p_frac=3, out_frac=0,
                       out_width=8, tables="lut"), ValueError, "tables must be one of"),
])
@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
@pytest.mark.usefixtures("collect_components")
def test_parameters_are_checked(make, err, match):
    with pytest.raises(err, match=match):
        make()


# -- Verilog ------------------------------------------------------------------------------------
@pytest.mark.skipif(shutil.which("verilator") is None, reason="verilator not on PATH")
@pytest.mark.parametrize("name,make", [
    ("power_unit", lambda: PowerUnit(DEFAULT, in_width=EPS_W, in_frac=EPS_F, p_width=COEF_W,
                                     p_frac=COEF_F, out_frac=EPS_F, out_width=40, tag_shape=8)),
    ("log2_unit", lambda: Log2Unit(DEFAULT, in_width=62, in_frac=20)),
    ("exp2_unit", lambda: Exp2Unit(SMALL, out_frac=6, out_width=10, tag_shape=4)),
])
def test_verilog_is_lint_clean(tmp_path, name, make):
    path = tmp_path / f"{name}.v"
    path.write_text(to_verilog(make(), name))
    res = subprocess.run(["verilator", "--lint-only", "-Wall", str(WAIVERS), str(path)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
