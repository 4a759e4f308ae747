"""The learner accelerator through its AXI ports, as a host uses it (cocotb + Verilator).

The CartPole DQN network 4-64-64-2 on S × S tensor units: the host loads the weights, target
weights and a batch through the AXI4 memory port, writes BATCH_SIZE, LR and GAMMA through
AXI4-Lite, sets AP_START, waits for the interrupt and reads STATUS, LOSS, CYCLES and the
results back. Every step must equal :func:`sw.learner.mlp.train_step` (with the pipeline's
sub-batches) bit for bit -- Q values, TD errors, gradients, updated weights, saturation flags,
the loss sum -- and take exactly :func:`sw.learner.schedule.step_cycles` cycles.
"""

import os

import numpy as np
import pytest

from axi_host import AxiHost
from cocotb_util import load_manifest, run_block
from fcov import blocks

def _shipped(module):
    from sw.registry import SHIPPED
    return next(dict(p) for m, _, p in SHIPPED if m == module)


CONFIGS = {
    # CartPole DQN, 4 x 4 arrays (11 tensor units), batch up to 256 in sub-batches of 8.
    "cartpole-s4": _shipped("learner_cartpole_s4"),
}
# Longer Verilator builds (minutes), on request: the DSE's ZCU106 candidate (two pipelines of
# per-stage arrays on 8 x 8 blocks; sw.registry.CANDIDATES, not shipped, docs/learner.md);
# 8 x 8 arrays everywhere; two 4 x 4 pipelines.
if os.environ.get("LEARNER_S8"):
    from sw.registry import candidate_config
    CONFIGS["cartpole-s8"] = candidate_config("learner_zcu106_dp2")[1].to_dict()
if os.environ.get("LEARNER_STAGES"):          # per-stage arrays on 8 x 8 blocks (384 cells)
    CONFIGS["cartpole-stages"] = {
        "sizes": [4, 64, 64, 2], "array": 8, "max_batch": 64, "sub_batch": 8,
        "stage_arrays": "fw0:4x8,tfw0:4x8,wa0:4x8,fw1:8x8,tfw1:8x8,bw1:8x8,wa1:8x8,"
                        "fw2:4x2,tfw2:4x2,wa2:4x2,bw2:2x4",
        "axi_data_width": 128}
if os.environ.get("LEARNER_DP2"):
    CONFIGS["cartpole-s4-dp2"] = {"sizes": [4, 64, 64, 2], "array": 4, "max_batch": 64,
                                  "sub_batch": 8, "dp": 2, "axi_data_width": 128}


#: ``heavy`` (``make test-heavy``): the shipped 8 x 8 learner (``learner_kernel_s8``'s
#: accelerator), minutes of C++ compile for the generator's code paths at array = 4; and the
#: shape of the DSE's ZCU106 candidate (two pipelines, per-stage arrays, B up to 256; no
#: shipped module has it) on a 4-8-8-2 network with 4 x 4 blocks, 90 s of the suite's 20
#: minutes (its pipelines and stages are checked cycle by cycle in Amaranth's simulator in
#: tb/learner/test_stages_sim.py, ``dqn_dp2`` and ``dqn3_rxc``).
HEAVY = {
    "kernel-s8": _shipped("learner_kernel_s8"),
    "small-dp2-stages": {
        "sizes": [4, 8, 8, 2], "array": 4, "max_batch": 256, "sub_batch": 4, "dp": 2,
        "stage_arrays": "fw0:2x4,tfw0:2x4,wa0:2x4,fw2:2x2,tfw2:2x2,wa2:2x2,bw2:2x2",
        "axi_data_width": 32},
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CONFIGS) + [pytest.param(n, marks=pytest.mark.heavy)
                                                  for n in HEAVY])
def test_learner_accel_rtl(name):
    run_block("learner", {**CONFIGS, **HEAVY}[name], __file__, seed=20261123)


# -- host side, inside cocotb ---------------------------------------------------------------------
class Host(AxiHost):
    """What a driver does, with cocotbext-axi masters on the two AXI ports."""

    def __init__(self, dut):
        from sw.learner.spec import LearnerConfig
        from sw.learner.spec import learner_register_map

        self.cfg = LearnerConfig.from_dict(load_manifest()["config"])
        self.written, self.run_steps, self.run_syncs = {}, 0, 0
        super().__init__(dut, learner_register_map(self.cfg))

    async def wr(self, reg, value):
        self.written[reg] = int(value)
        await super().wr(reg, value)

    def end_run(self):
        """The steps since the last call were a run on the weights kept on chip (coverage)."""
        blocks.learner_run(self.run_steps, self.run_syncs)
        self.run_steps = self.run_syncs = 0

    async def load(self, images):
        from sw.learner.layout import region_base
        for name, img in images.items():
            await self.mem.write(region_base(self.cfg, name), img)

    async def read_matrix(self, name, rows):
        from sw.learner.layout import region, region_base, unpack_matrix, word_bytes
        cfg = self.cfg
        n = cfg.groups(rows) * region(cfg, name).col_groups(cfg) * word_bytes(cfg, name)
        data = await self.mem.read(region_base(cfg, name), n)
        return unpack_matrix(cfg, name, bytes(data.data), rows)

    async def step(self, case, timeout_cycles=2_000_000):
        await self.wr("BATCH_SIZE", case.batch)
        await self.wr("LR", case.lr)
        await self.wr("GAMMA", case.gamma)
        await self.kick()
        await self.wait_done(timeout_cycles)
        status = await self.status()
        status["LOSS"] = await self.rd("LOSS_LO") | await self.rd("LOSS_HI") << 32
        status["CYCLES"] = await self.rd("CYCLES")
        dqn = self.cfg.loss == "dqn"
        blocks.learner_step(case.batch, self.cfg.sub_batch, self.cfg.max_batch,
                            sync_period=self.written.get("SYNC_PERIOD", 0) if dqn else None,
                            sync_target=self.written.get("SYNC_TARGET", 0))
        self.run_steps += 1
        self.run_syncs += int(status.get("TARGET_SYNCED", 0))
        return status


def check_status(cfg, case, status, step):
    from sw.learner.spec import STATUS_FLAGS
    from sw.learner.schedule import step_cycles

    assert status["ERROR"] == 0, status
    for name, (_, flag, _) in STATUS_FLAGS.items():
        if flag:
            assert bool(status[name]) == bool(step.overflow.get(flag, False)), (name, status)
    assert status["LOSS"] == step.loss_sum, (status["LOSS"], step.loss_sum)
    assert status["CYCLES"] == step_cycles(cfg, case.batch), \
        (status["CYCLES"], step_cycles(cfg, case.batch))


async def check_regions(host, case, step, names):
    from learner_cases import expected_regions, region_rows

    exp = expected_regions(host.cfg, step)
    for name in names:
        got = await host.read_matrix(name, region_rows(host.cfg, name, case.batch))
        bad = np.argwhere(got != exp[name])
        assert bad.size == 0, f"{name}: {len(bad)} differ, first at {bad[0]}: " \
                              f"{got[tuple(bad[0])]} vs {exp[name][tuple(bad[0])]}"


try:
    import cocotb
except ImportError:  # pragma: no cover
    cocotb = None

if cocotb is not None:
    @cocotb.test()
    async def cartpole_steps_bit_exact(dut):
        """B = 1, 5, 8, 13, 32, 64 and 256 (those up to max_batch; partial and whole
        sub-batches), B = 64 with random per-sample loss weights: every result region
        bit-exact, flags, loss, cycles."""
        from learner_cases import golden, input_images, random_case
        from sw.learner.layout import regions

        host = Host(dut)
        await host.start()
        cfg = host.cfg
        rng = np.random.default_rng(cocotb.RANDOM_SEED)
        results = [r.name for r in regions(cfg) if not r.host_write] + \
            [f"w{l}" for l in range(cfg.n_layers)]
        for B in (b for b in (1, 5, 8, 13, 32, 64, 256) if b <= cfg.max_batch):
            case = random_case(cfg, B, rng, lr=0.01, weighted=B == 64)
            step = golden(cfg, case)
            assert not step.any_overflow
            await host.load(input_images(cfg, case))
            status = await host.step(case)
            check_status(cfg, case, status, step)
            await check_regions(host, case, step, results)
            dut._log.info("B=%d%s: %d cycles per step (%.0f steps/s at 300 MHz), loss %.4f",
                          B, " weighted" if case.loss_weights is not None else "",
                          status["CYCLES"], 300e6 / status["CYCLES"], step.loss)

    @cocotb.test()
    async def cartpole_steps_reduce_the_loss(dut):
        """Five steps in a row on one batch (weights stay on chip): each step bit-exact, the
        loss falls every step."""
        from learner_cases import golden, input_images, random_case

        host = Host(dut)
        await host.start()
        cfg = host.cfg
        rng = np.random.default_rng(cocotb.RANDOM_SEED + 1)
        case = random_case(cfg, 32, rng, lr=0.05)
        await host.load(input_images(cfg, case))
        weights, losses = case.weights, []
        for _ in range(5):
            step = golden(cfg, case, weights)
            status = await host.step(case)
            check_status(cfg, case, status, step)
            losses.append(step.loss)
            weights = step.weights
        host.end_run()
        await check_regions(host, case, step, [f"w{l}" for l in range(cfg.n_layers)])
        dut._log.info("losses over 5 steps: %s", ", ".join(f"{x:.4f}" for x in losses))
        assert all(b < a for a, b in zip(losses, losses[1:])), losses

    @cocotb.test()
    async def target_sync_through_registers(dut):
        """SYNC_PERIOD = 2 and a forced SYNC_TARGET over four steps of B = 16, then
        SYNC_PERIOD = 1 over two: STATUS.TARGET_SYNCED, SYNC_COUNT and the target weights tw<l>
        follow :class:`sw.learner.mlp.TargetSync`; every step bit-exact, cycles as without a
        sync."""
        from learner_cases import golden, input_images, random_case
        from sw.learner.mlp import TargetSync

        host = Host(dut)
        await host.start()
        cfg = host.cfg
        L = cfg.n_layers
        rng = np.random.default_rng(cocotb.RANDOM_SEED + 3)
        case = random_case(cfg, 16, rng, lr=0.02)
        await host.load(input_images(cfg, case))
        await host.wr("SYNC_PERIOD", 2)
        rule = TargetSync(2)
        w, tw = case.weights, case.target_weights
        seen = []
        for i in range(4):
            force = i == 0
            await host.wr("SYNC_TARGET", int(force))
            due = rule.step(force)
            step = golden(cfg, case, w, target_weights=tw, sync=due)
            status = await host.step(case)
            check_status(cfg, case, status, step)
            assert status["TARGET_SYNCED"] == due, (i, status)
            assert await host.rd("SYNC_COUNT") == rule.count
            await check_regions(host, case, step, [f"tw{l}" for l in range(L)]
                                + [f"w{l}" for l in range(L)] + ["tq"])
            seen.append(due)
            w, tw = step.weights, step.next_target_weights
        assert seen == [True, False, True, False], seen
        host.end_run()
        # SYNC_PERIOD = 1: every step syncs.
        await host.wr("SYNC_PERIOD", 1)
        rule.period = 1
        for i in range(2):
            due = rule.step()
            step = golden(cfg, case, w, target_weights=tw, sync=due)
            status = await host.step(case)
            check_status(cfg, case, status, step)
            assert due and status["TARGET_SYNCED"] == 1, (i, status)
            assert await host.rd("SYNC_COUNT") == rule.count
            await check_regions(host, case, step, [f"tw{l}" for l in range(L)])
            w, tw = step.weights, step.next_target_weights
        host.end_run()

    @cocotb.test()
    async def bad_batch_size_and_refused_start(dut):
        """B = 0 and B > max_batch end at once with ERROR = 1; a start during a step is
        dropped and reported."""
        from learner_cases import golden, input_images, random_case
        from cocotb.triggers import ClockCycles

        host = Host(dut)
        await host.start()
        cfg = host.cfg
        for bad in (0, cfg.max_batch + 1):
            blocks.learner_step(bad, cfg.sub_batch, cfg.max_batch)
            await host.wr("BATCH_SIZE", bad)
            await host.wr("CTRL", 1)
            await ClockCycles(dut.ap_clk, 10)
            st = await host.rd("STATUS")
            assert st & 3 == 1, hex(st)
            assert (await host.rd("CTRL")) & 0b110 == 0b110      # done, idle
        rng = np.random.default_rng(cocotb.RANDOM_SEED + 2)
        case = random_case(cfg, 8, rng)
        await host.load(input_images(cfg, case))
        await host.wr("BATCH_SIZE", case.batch)
        await host.wr("LR", case.lr)
        await host.wr("GAMMA", case.gamma)
        await host.wr("CTRL", 1)
        await ClockCycles(dut.ap_clk, 20)
        await host.wr("CTRL", 1)                  # during the step: refused
        while not (await host.rd("CTRL")) & 0b100:
            await ClockCycles(dut.ap_clk, 200)
        word = await host.rd("STATUS")
        assert word >> 15 & 1, hex(word)
        await check_regions(host, case, golden(cfg, case), ["q", "w0"])
