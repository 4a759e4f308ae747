"""The learner core (:class:`~rtl_gen.learner.core.LearnerCore`) in Amaranth's simulator:
:class:`CoreHost` does what a driver does through the core's host port, :func:`simulate` loads a
case, runs steps and reads the regions back, :func:`check_step` compares one step with the
golden model (regions, flags, loss sum, cycles). Used by tb/learner/test_core_sim.py and
test_dse.py."""

import numpy as np
from amaranth.sim import Simulator

from learner_cases import expected_regions, input_images, region_rows
from rtl_gen.learner.core import FLAG_FIELDS, LearnerCore
from sw.learner.layout import region_base, regions, unpack_matrix, word_bytes
from sw.learner.schedule import step_cycles
from sw.learner.spec import LEARNER_FLAGS


class CoreHost:
    """What a driver does, through the core's host port (one D-bit word per cycle)."""

    def __init__(self, cfg, dut, ctx):
        self.cfg, self.dut, self.ctx = cfg, dut, ctx
        self.DB = cfg.axi_data_width // 8

    async def write(self, name, image):
        dut, ctx, DB = self.dut, self.ctx, self.DB
        base = region_base(self.cfg, name) // DB
        for i in range(len(image) // DB):
            ctx.set(dut.host.addr, base + i)
            ctx.set(dut.host.we, (1 << DB) - 1)
            ctx.set(dut.host.wdata, int.from_bytes(image[i * DB:(i + 1) * DB], "little"))
            await ctx.tick()
        ctx.set(dut.host.we, 0)

    async def read(self, name, nbytes):
        dut, ctx, DB = self.dut, self.ctx, self.DB
        base = region_base(self.cfg, name) // DB
        return await self.read_words(base, nbytes // DB)

    async def read_words(self, base, n):
        """Words ``base .. base + n - 1``, one read per cycle (each on ``rdata`` the port's
        ``read_latency`` cycles after its read), as bytes."""
        dut, ctx, DB = self.dut, self.ctx, self.DB
        lat = dut.host.signature.read_latency
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

    async def read_matrix(self, name, rows):
        cfg = self.cfg
        nwords = cfg.groups(rows) * [r for r in regions(cfg) if r.name == name][0].col_groups(cfg)
        img = await self.read(name, nwords * word_bytes(cfg, name))
        return unpack_matrix(cfg, name, img, rows)

    async def step(self, case, *, timeout=100_000, period=0):
        dut, ctx = self.dut, self.ctx
        ctx.set(dut.args.batch_size, case.batch)
        ctx.set(dut.args.lr, case.lr)
        ctx.set(dut.args.gamma, case.gamma)
        dqn = self.cfg.loss == "dqn"
        if dqn:
            ctx.set(dut.args.sync_target, case.sync_target)
            ctx.set(dut.args.sync_period, period)
        await ctx.tick()                    # the arguments stable the cycle before start
        ctx.set(dut.ctrl.start, 1)
        await ctx.tick()
        ctx.set(dut.ctrl.start, 0)
        for n in range(timeout):
            if ctx.get(dut.ctrl.done):
                break
            await ctx.tick()
        else:
            raise AssertionError("timeout waiting for done")
        flags = {f: ctx.get(getattr(dut.status, FLAG_FIELDS[f])) for f in LEARNER_FLAGS}
        loss_sum = ctx.get(dut.status.loss_lo) | ctx.get(dut.status.loss_hi) << 32
        out = {"cycles": ctx.get(dut.ctrl.cycles), "error": ctx.get(dut.ctrl.error),
               "flags": flags, "loss_sum": loss_sum, "busy": ctx.get(dut.ctrl.busy)}
        if dqn:
            out.update(synced=ctx.get(dut.status.status_target_synced),
                       sync_count=ctx.get(dut.status.sync_count))
        return out


def simulate(cfg, case, *, steps=1, read=None, vcd=None):
    """Load the case, run ``steps`` steps (the weights stay on chip), read regions back.

    Returns a list of per-step status dicts and a dict of region -> matrix after the last step.
    """
    dut = LearnerCore(cfg)
    B = case.batch
    res = {"status": [], "regions": {}}
    names = read if read is not None else [r.name for r in regions(cfg)
                                           if r.name not in ("obs", "next_obs", "samples",
                                                             "targets")]

    async def bench(ctx):
        host = CoreHost(cfg, dut, ctx)
        for name, img in input_images(cfg, case).items():
            await host.write(name, img)
        for _ in range(steps):
            res["status"].append(await host.step(case))
        for name in names:
            res["regions"][name] = await host.read_matrix(name, region_rows(cfg, name, B))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    if vcd:
        with sim.write_vcd(vcd):
            sim.run()
    else:
        sim.run()
    return res["status"], res["regions"]


def check_step(cfg, case, status, got, step):
    assert status["error"] == 0 and not status["busy"]
    for name, want in expected_regions(cfg, step).items():
        if name in got:
            np.testing.assert_array_equal(got[name], want, err_msg=name)
    for f in LEARNER_FLAGS:
        assert bool(status["flags"][f]) == bool(step.overflow.get(f, False)), \
            (f, status["flags"], step.overflow)
    assert status["loss_sum"] == step.loss_sum
    assert status["cycles"] == step_cycles(cfg, case.batch), \
        (status["cycles"], step_cycles(cfg, case.batch))
    if cfg.loss == "dqn":
        assert bool(status["synced"]) == step.synced
