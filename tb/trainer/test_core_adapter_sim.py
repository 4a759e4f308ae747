"""The trainer's learner adapter with a learner core in Amaranth's simulator (fast tier).

:class:`~rtl_gen.trainer.learner_adapter.LearnerAdapter` takes ring records
(:func:`sw.trainer.layout.pack_records`) and IS weights, writes them into the learner's input
regions, runs a step of :class:`~rtl_gen.learner.core.LearnerCore` and streams ``Q[a] - y``:
per step the TD errors equal the golden ``train_step``'s (``q[a] - target``), the weights
after a chain of steps (with target syncs) equal the golden's, and the cycles from the
command to ``done`` equal :func:`sw.trainer.schedule.adapter_cycles` without back-pressure.
"""

import numpy as np
import pytest
from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.sim import Simulator

from learner_cases import random_case
from learner_core_sim import CoreHost
from rtl_gen.learner.core import LearnerCore
from rtl_gen.trainer.learner_adapter import LearnerAdapter
from sw.learner.layout import pack_matrix
from sw.learner.mlp import TargetSync, train_step
from sw.learner.spec import LearnerConfig
from sw.replay.spec import SumTreeConfig
from sw.trainer.layout import pack_records
from sw.trainer.schedule import adapter_cycles
from sw.trainer.spec import TrainerConfig


def small_config(sizes=(4, 8, 2), **kw):
    learner = LearnerConfig(sizes=sizes, array=2, max_batch=kw.pop("max_batch", 8),
                            sub_batch=4, loss="dqn")
    return TrainerConfig(learner=learner,
                         tree=SumTreeConfig(fanout=4, capacity=256, max_batch=16),
                         append_window=16, delay=1, **kw)


class _Rig(wiring.Component):
    """The adapter on a learner core; ``ext`` lets the test reach the learner's memory."""

    def __init__(self, cfg):
        self.adapter = LearnerAdapter(cfg)
        self.learner = LearnerCore(cfg.learner)
        self.ext = self.adapter.host.signature.create(path=("ext",))
        self.ext_sel = Signal(name="ext_sel")
        super().__init__({})

    def elaborate(self, platform):
        m = Module()
        m.submodules.adapter = a = self.adapter
        m.submodules.learner = lrn = self.learner
        wiring.connect(m, a.learner_ctrl, lrn.ctrl)
        wiring.connect(m, a.learner_args, lrn.args)
        for name in ("addr", "re", "we", "wdata"):
            m.d.comb += getattr(lrn.host, name).eq(
                Mux(self.ext_sel, getattr(self.ext, name), getattr(a.host, name)))
        m.d.comb += [a.host.rdata.eq(lrn.host.rdata), self.ext.rdata.eq(lrn.host.rdata)]
        return m


class _ExtHost(CoreHost):
    """:class:`CoreHost` on the rig's ``ext`` port (``dut.host`` is what it drives)."""

    def __init__(self, cfg, rig, ctx):
        super().__init__(cfg, type("D", (), {"host": rig.ext})(), ctx)


def _run(cfg, steps, rng, *, stall=False, weighted=True):
    lc = cfg.learner
    B = steps[0].batch
    case0 = steps[0]
    rig = _Rig(cfg)
    a = rig.adapter
    got = {"td": [], "cycles": [], "w": None}
    sync = TargetSync(3, 0)
    syncs = [sync.step() for _ in steps]

    async def feeder(ctx):
        for case, synced in zip(steps, syncs):
            recs = pack_records(cfg, case.obs, case.actions, case.rewards, case.next_obs,
                                case.dones)
            while not ctx.get(a.busy):
                await ctx.tick()
            for r in recs:
                while stall and rng.random() < 0.3:
                    ctx.set(a.rec.valid, 0)
                    await ctx.tick()
                ctx.set(a.rec.payload, int.from_bytes(r.tobytes(), "little"))
                ctx.set(a.rec.valid, 1)
                await ctx.tick().until(a.rec.ready)
            ctx.set(a.rec.valid, 0)
            while ctx.get(a.busy):
                await ctx.tick()

    async def weigher(ctx):
        for case in steps:
            while not ctx.get(a.busy):
                await ctx.tick()
            for wt in case.loss_weights:
                while stall and rng.random() < 0.3:
                    ctx.set(a.weight.valid, 0)
                    await ctx.tick()
                ctx.set(a.weight.payload, int(wt))
                ctx.set(a.weight.valid, 1)
                await ctx.tick().until(a.weight.ready)
            ctx.set(a.weight.valid, 0)
            while ctx.get(a.busy):
                await ctx.tick()

    async def bench(ctx):
        ext = _ExtHost(lc, rig, ctx)
        ctx.set(rig.ext_sel, 1)
        for l, (w, tw) in enumerate(zip(case0.weights, case0.target_weights)):
            await ext.write(f"w{l}", pack_matrix(lc, f"w{l}", w))
            await ext.write(f"tw{l}", pack_matrix(lc, f"tw{l}", tw))
        ctx.set(rig.ext_sel, 0)
        for case, synced in zip(steps, syncs):
            ctx.set(a.cmd.payload.batch, case.batch)
            ctx.set(a.cmd.payload.lr, case.lr)
            ctx.set(a.cmd.payload.gamma, case.gamma)
            ctx.set(a.cmd.payload.sync, synced)
            ctx.set(a.cmd.valid, 1)
            await ctx.tick().until(a.cmd.ready)
            ctx.set(a.cmd.valid, 0)
            n, tds = 0, []
            while True:
                ctx.set(a.td.ready, 0 if stall and rng.random() < 0.3 else 1)
                _, _, done, tv, tr, tp = await ctx.tick().sample(
                    a.done, a.td.valid, a.td.ready, a.td.payload)
                n += 1
                if tv and tr:
                    tds.append(tp)
                if done:
                    break
            got["td"].append(np.array(tds))
            got["cycles"].append(n)
        ctx.set(rig.ext_sel, 1)
        got["w"] = [await ext.read_matrix(f"w{l}", lc.sizes[l] + 1) for l in range(lc.n_layers)]
        got["tw"] = [await ext.read_matrix(f"tw{l}", lc.sizes[l] + 1)
                     for l in range(lc.n_layers)]

    sim = Simulator(rig)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.add_testbench(feeder, background=True)
    sim.add_testbench(weigher, background=True)
    sim.run()
    return got, syncs


def _golden(cfg, steps, syncs):
    lc = cfg.learner
    w, tw = steps[0].weights, steps[0].target_weights
    tds = []
    for case, synced in zip(steps, syncs):
        r = train_step(w, case.obs, lc.numerics, lr=case.lr, actions=case.actions,
                       rewards=case.rewards, dones=case.dones, next_obs=case.next_obs,
                       target_weights=tw, gamma=case.gamma, loss_weights=case.loss_weights,
                       sub_batch=lc.sub_batch, dp=lc.dp, sync_target=synced)
        tds.append(r.q[np.arange(case.batch), case.actions] - r.target)
        w, tw = r.weights, r.next_target_weights
    return tds, w, tw


@pytest.mark.parametrize("B,stall,sizes", [(8, False, (4, 8, 2)), (5, False, (4, 8, 2)),
                                           (7, True, (4, 8, 2)), (6, False, (3, 8, 5))])
def test_adapter_steps_bit_exact(B, stall, sizes):
    """(3, 8, 5) on 2 x 2 units: rows of two host words per region (a half-empty one), three
    tq words per sample (the last with one lane beside a padding lane), the target network's
    output bias lowered so that every tq is negative until the first sync (a padding lane in
    the maximum would show)."""
    cfg = small_config(sizes)
    rng = np.random.default_rng(B + 10 * stall)
    steps = [random_case(cfg.learner, B, rng, weighted=True) for _ in range(4)]
    if sizes[-1] % cfg.learner.array:
        wf = cfg.learner.numerics.weight_format
        bias = steps[0].target_weights[-1][-1]
        bias[:] = wf.quantize(wf.to_float(bias) - 3.0)
    got, syncs = _run(cfg, steps, rng, stall=stall)
    want_td, want_w, want_tw = _golden(cfg, steps, syncs)
    for s, (g, wnt) in enumerate(zip(got["td"], want_td)):
        np.testing.assert_array_equal(g, wnt, err_msg=f"td of step {s}")
    for l in range(cfg.learner.n_layers):
        np.testing.assert_array_equal(got["w"][l], want_w[l], err_msg=f"w{l}")
        np.testing.assert_array_equal(got["tw"][l], want_tw[l], err_msg=f"tw{l}")
    if not stall:
        assert got["cycles"] == [adapter_cycles(cfg, B)] * len(steps), \
            (got["cycles"], adapter_cycles(cfg, B))
