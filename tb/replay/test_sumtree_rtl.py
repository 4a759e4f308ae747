"""Sum tree RTL under Verilator against the bit-exact golden model (thorough tier).

pytest builds one Verilator model per parameter set (``CONFIGS``: K in {2, 4, 16, 64}, capacities
that are and are not powers of K) through the ``sumtree`` block and runs the cocotb tests below
against it: random mixes of every operation compared response by response and flag by flag with
:class:`sw.replay.sumtree.FixedSumTree` (10^5 operations over all configurations), the tree
invariant checked on the RTL's own node values read back through DEBUG, a chi-square test of
PRNG sampling, and exact cycle counts of sample and update batches.
"""

import math
import random

import numpy as np
import pytest

from cocotb_util import load_manifest, run_block
from fcov import blocks

OPS_PER_CONFIG = 25000

# Capacities that are not powers of K (partial groups, unused leaves) and one that is; the
# Verilator builds dominate the run time, so the trees are kept to 2..10 levels.
CONFIGS = [
    dict(fanout=2, capacity=1000, priority_width=20, priority_frac=8, input_guard_bits=4,
         target_bits=24),
    dict(fanout=4, capacity=2731, priority_width=16, priority_frac=4, input_guard_bits=3,
         target_bits=20),
    dict(fanout=16, capacity=4096, priority_width=32, priority_frac=16, input_guard_bits=8),
    dict(fanout=64, capacity=3000, priority_width=28, priority_frac=12, input_guard_bits=4),
]


def _id(p):
    return f"k{p['fanout']}-n{p['capacity']}"


@pytest.mark.slow
@pytest.mark.parametrize("params", CONFIGS, ids=_id)
def test_sumtree_rtl(params):
    run_block("sumtree", params, __file__, seed=20261122)


# -- cocotb side ----------------------------------------------------------------------------------
class TreeTB:
    """Clock, reset and one coroutine that drives ``cmd`` and takes ``rsp`` every cycle.

    Each cycle, at the falling edge, the next command is offered (or an idle cycle with
    probability ``idle``) and ``rsp.ready`` set (low with probability ``stall``); after
    ``ReadOnly`` the transfers of the coming rising edge are recorded with their cycle numbers.
    """

    def __init__(self, dut, cfg):
        from sumtree_ref import Codec

        self.dut = dut
        self.cfg = cfg
        self.codec = Codec(cfg)
        self.cycle = 0

    async def start(self, *, seed=0):
        import cocotb
        from cocotb.clock import Clock
        from cocotb.triggers import ClockCycles, FallingEdge

        dut = self.dut
        cocotb.start_soon(Clock(dut.clk, 4, unit="ns", impl="gpi").start())
        dut.cmd__valid.value = 0
        dut.rsp__ready.value = 1
        dut.clear.value = 0
        dut.seed.value = seed
        dut.seed_load.value = 1
        dut.rst.value = 1
        await ClockCycles(dut.clk, 2)
        dut.rst.value = 0
        await ClockCycles(dut.clk, 3)                 # the seed, stable for two cycles, loads
        dut.seed_load.value = 0
        while dut.busy.value:                         # the clearing sweep
            await FallingEdge(dut.busy)
        await FallingEdge(dut.clk)

    async def run(self, cmds, *, idle=0.0, stall=0.0, rng=None):
        """Issue ``cmds``; returns (responses, command cycles, response cycles, done cycle)."""
        from cocotb.triggers import FallingEdge, ReadOnly

        from sumtree_ref import RESPONDING

        dut, codec = self.dut, self.codec
        rng = rng or random.Random(0)
        words = [codec.encode(c) for c in cmds]
        n, n_rsp = len(words), sum(c[0] in RESPONDING for c in cmds)
        out, cin, cout = [], [], []
        sent = 0
        limit = self.cycle + 50 * (n + 100)
        c_valid, c_payload, c_ready = dut.cmd__valid, dut.cmd__payload, dut.cmd__ready
        r_valid, r_payload, r_ready = dut.rsp__valid, dut.rsp__payload, dut.rsp__ready
        while sent < n or len(out) < n_rsp:
            offer = sent < n and not (idle and rng.random() < idle)
            ready = not (stall and rng.random() < stall)
            c_valid.value = offer
            if offer:
                c_payload.value = words[sent]
            r_ready.value = ready
            await ReadOnly()
            if offer and c_ready.value:
                cin.append(self.cycle)
                sent += 1
            if ready and r_valid.value:
                out.append(codec.decode(r_payload.value.to_unsigned()))
                cout.append(self.cycle)
            await FallingEdge(dut.clk)
            self.cycle += 1
            assert self.cycle < limit, f"timeout: {sent}/{n} sent, {len(out)}/{n_rsp} received"
        c_valid.value = 0
        r_ready.value = 1
        await ReadOnly()
        while dut.busy.value:
            await FallingEdge(dut.clk)
            self.cycle += 1
            await ReadOnly()
        done = self.cycle
        await FallingEdge(dut.clk)
        self.cycle += 1
        blocks.tree_run(self.cfg, cmds, cin)
        return out, np.array(cin), np.array(cout), done

    def snapshot(self):
        dut = self.dut
        return {"flags": {f: int(getattr(dut, f).value) for f in ("empty", "saturated",
                                                                 "invalid")},
                "status": {f: int(getattr(dut, f).value)
                           for f in ("total", "max_priority", "write_pointer", "size")}}


async def _setup(dut, *, prng_seed=None):
    import cocotb

    from sw.replay.spec import SumTreeConfig
    from sumtree_ref import Reference

    man = load_manifest()
    cfg = SumTreeConfig.from_dict(man["config"])
    rng = np.random.default_rng(cocotb.RANDOM_SEED)
    seed = int(rng.integers(1 << 32)) if prng_seed is None else prng_seed
    cocotb.log.info("config %s, cocotb seed %d, PRNG seed %d", cfg, cocotb.RANDOM_SEED, seed)
    tb = TreeTB(dut, cfg)
    await tb.start(seed=seed)
    assert man["latency"]["cycles"] == cfg.latency
    return tb, cfg, rng, Reference(cfg, seed=seed), man["latency"]["cycles"]


def _compare(got, want, what):
    assert len(got) == len(want), f"{what}: {len(got)} responses, golden {len(want)}"
    for n, (g, w) in enumerate(zip(got, want)):
        assert g == w, f"{what}: response {n}: rtl {g} golden {w}"


def _chi2_critical(df, z=3.09):
    """Wilson-Hilferty approximation of the chi-square quantile (z=3.09: p = 0.001)."""
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


try:
    import cocotb
except ImportError:  # pragma: no cover
    cocotb = None

if cocotb is not None:
    @cocotb.test()
    async def random_ops_match_golden(dut):
        """Random mixes of every operation (zero, saturating and out-of-range operands, repeated
        indices back to back, RESET), with and without idles and back-pressure; every response,
        flag and status output equals the golden model's; then every node is read back and the
        tree invariant checked."""
        from sumtree_ref import check_tree_dump, dump, random_ops, reset

        tb, cfg, rng, ref, _ = await _setup(dut)
        n = OPS_PER_CONFIG
        fill = [("insert", dict(mix={"insert": 20, "sample": 1}))]
        chunks = fill + [
            ("mixed", {}),
            ("small priorities", dict(small=True)),
            ("update-heavy", dict(mix={"update": 12, "sample_prng": 4})),
            ("reset+inserts", dict(mix={"insert": 6, "insert_max": 3})),
        ]
        sizes = [n // 5] * 5
        for (name, kw), size in zip(chunks, sizes):
            cmds = random_ops(cfg, rng, size, **kw)
            if name.startswith("reset"):
                cmds = [reset()] + cmds
            stall = 0.15 if name == "mixed" else 0.0
            got, cin, _, _ = await tb.run(cmds, idle=stall, stall=stall,
                                         rng=random.Random(int(rng.integers(1 << 30))))
            _compare(got, ref.run(cmds), name)
            assert tb.snapshot() == {"flags": ref.flags, "status": ref.status}, name
            if not stall:                             # (RESET waits for the sweep)
                skip = 2 if name.startswith("reset") else 0
                assert (np.diff(cin[skip:]) == 1).all(), f"{name}: a command waited"
            dut._log.info("%s: %d operations match", name, len(cmds))
        # RESET back to back after and before each kind (the second waits for the sweep)
        for c in [reset()] + random_ops(cfg, rng, 48, p_invalid=0):
            got, _, _, _ = await tb.run([c, reset(), c])
            _compare(got, ref.run([c, reset(), c]), f"{c} around RESET")
            assert tb.snapshot() == {"flags": ref.flags, "status": ref.status}, c
        got, _, _, _ = await tb.run(dump(cfg))
        check_tree_dump(cfg, got, ref)
        dut._log.info("tree of %d words read back, invariant holds", len(got))

    @cocotb.test()
    async def prng_sampling_chi_square(dut):
        """On-chip PRNG samples: bit-exact with the golden model, and their frequencies follow
        the priorities (chi-square, p = 0.001) over leaves spread across the tree."""
        from sumtree_ref import OP, reset, sample_prng, update

        tb, cfg, rng, ref, _ = await _setup(dut)
        m = min(cfg.capacity, 48)
        leaves = np.sort(rng.choice(cfg.capacity, m, replace=False))
        p = rng.integers(1, 1 << min(cfg.priority_width, 12), m) * (rng.random(m) < 0.85)
        cmds = [reset()] + [update(int(i), int(v)) for i, v in zip(leaves, p)]
        draws = 16000
        cmds += [sample_prng()] * draws
        got, _, _, _ = await tb.run(cmds)
        _compare(got, ref.run(cmds), "PRNG samples")
        idx = np.array([r[1] for r in got])
        assert all(r[0] == OP.SAMPLE_PRNG.value for r in got)
        counts = np.array([(idx == i).sum() for i in leaves])
        assert counts.sum() == draws and counts[p == 0].sum() == 0
        nz = p > 0
        expected = draws * p[nz] / p.sum()
        chi2 = float(((counts[nz] - expected) ** 2 / expected).sum())
        df = int(nz.sum()) - 1
        dut._log.info("chi-square %.1f, %d degrees of freedom (critical %.1f)", chi2, df,
                      _chi2_critical(df))
        assert chi2 < _chi2_critical(df), (chi2, df)

    @cocotb.test()
    async def batches_take_b_plus_latency_cycles(dut):
        """B samples, B updates and B mixed operations: one command per cycle, each response
        ``latency`` cycles after its command, the batch done in ``B + latency`` cycles (``B +
        latency - 1`` when it ends with an update, which has no response)."""
        from sumtree_ref import RESPONDING, random_ops, sample, sample_prng, update

        tb, cfg, rng, ref, latency = await _setup(dut)
        b = 512
        tmax = 1 << cfg.target_bits
        fill = [update(int(i), int(v)) for i, v in
                zip(rng.integers(0, cfg.capacity, b), rng.integers(0, 1 << 10, b))]
        batches = {
            "updates": fill,
            "samples": [sample(int(x)) for x in rng.integers(0, tmax, b)],
            "PRNG samples": [sample_prng()] * b,
            "mixed": random_ops(cfg, rng, b, p_invalid=0),
        }
        for name, cmds in batches.items():
            start = tb.cycle
            got, cin, cout, done = await tb.run(cmds)
            _compare(got, ref.run(cmds), name)
            assert cin[0] == start and (np.diff(cin) == 1).all(), f"{name}: a command waited"
            resp = cin[[i for i, c in enumerate(cmds) if c[0] in RESPONDING]]
            assert (cout == resp + latency).all(), f"{name}: a response was not on time"
            cycles = done - start
            want = b + latency - (cmds[-1][0] not in RESPONDING)   # an update has no response
            assert cycles == want, (name, cycles, b, latency)
            dut._log.info("%s: %d operations in %d cycles (B + %d)", name, b, cycles, cycles - b)
