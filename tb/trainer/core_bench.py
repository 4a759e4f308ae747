"""Shared pieces of the trainer core's tests: a small configuration, random storage (ring
records and a load-region weight image), launch scenarios, and the golden core
(:class:`sw.trainer.golden.TrainerCore`) driven the way the RTL core runs a launch."""

from dataclasses import dataclass

import numpy as np

from sw.learner.mlp import init_weights, quantize_coef
from sw.learner.spec import LearnerConfig
from sw.replay.spec import SumTreeConfig
from sw.trainer.golden import LaunchArgs, TrainerCore
from sw.trainer.layout import pack_records, pack_weights, region_base, storage_bytes
from sw.trainer.schedule import sequential_launch_cycles
from sw.trainer.spec import TrainerCmd, TrainerConfig


def small_config(*, delay=1, **kw):
    learner = LearnerConfig(sizes=(4, 8, 2), array=2, max_batch=16, sub_batch=4, loss="dqn")
    return TrainerConfig(learner=learner,
                         tree=SumTreeConfig(fanout=4, capacity=256, max_batch=16),
                         append_window=16, delay=delay, trace_depth=8, **kw)


def random_storage(cfg, rng):
    """Storage bytes: every ring slot a random record, the load region random weights."""
    num = cfg.learner.numerics
    act = num.act_format
    n, n_in = cfg.capacity, cfg.learner.sizes[0]
    recs = pack_records(cfg, act.quantize(rng.normal(0, 1, (n, n_in))),
                        rng.integers(0, cfg.learner.n_out, n),
                        act.quantize(rng.normal(0.5, 0.5, n)),
                        act.quantize(rng.normal(0, 1, (n, n_in))), rng.random(n) < 0.2)
    st = np.zeros(storage_bytes(cfg), np.uint8)
    ring = region_base(cfg, "ring")
    st[ring:ring + recs.size] = recs.ravel()
    image = pack_weights(cfg, init_weights(num, rng, scale=1.0))
    load = region_base(cfg, "load")
    st[load:load + image.size] = image
    return st


@dataclass
class Launch:
    """One launch: the arguments, PRODUCER and STOP as the host leaves them; ``doorbells``:
    PRODUCER rung during the launch, the value the j-th boundary sees (the last one from
    then on; a non-INSERT launch)."""
    args: LaunchArgs
    producer: int
    stop: int = 0
    doorbells: tuple = ()

    def producer_at(self, j: int) -> int:
        """PRODUCER at the launch's boundary j."""
        if not self.doorbells:
            return self.producer
        return self.doorbells[min(j, len(self.doorbells) - 1)]


def launch_args(cfg, *, steps, batch, cmd=0, sync_period=3, snapshot_period=2,
                trace_period=2, seed=12345):
    num = cfg.learner.numerics
    coef = cfg.coef_format
    return LaunchArgs(steps=steps, batch=batch,
                      lr=quantize_coef(0.02 * 2 / batch, num.lr_format, "lr"),
                      gamma=quantize_coef(0.95, num.coef_format, "gamma"),
                      alpha=coef.quantize(np.array(0.6))[()].item(),
                      beta=coef.quantize(np.array(0.4))[()].item(),
                      eps=cfg.eps_format.quantize(np.array(0.01))[()].item(),
                      sync_period=sync_period, snapshot_period=snapshot_period,
                      trace_period=trace_period, seed=seed, cmd=int(cmd))


def scenario(cfg, batch=5, *, long=False):
    """Launches: CLEAR + LOAD + INSERT of 40 records, 6 steps with inserts, a launch that
    STOP ends at once, 5 more steps with a different B and doorbells during the launch
    (the last one more than the window ahead), (``long``: 20 steps of max_batch
    with 30 more records), an empty-tree error after CLEAR, a batch size error."""
    C = TrainerCmd
    more = [Launch(launch_args(cfg, steps=20, batch=cfg.max_batch, sync_period=5,
                               snapshot_period=4, trace_period=3), 100)] if long else []
    return [
        Launch(launch_args(cfg, steps=0, batch=batch, cmd=C.CLEAR | C.LOAD | C.INSERT), 40),
        Launch(launch_args(cfg, steps=6, batch=batch), 44),
        Launch(launch_args(cfg, steps=3, batch=batch), 50, stop=1),
        Launch(launch_args(cfg, steps=5, batch=batch + 3, snapshot_period=3,
                           trace_period=1), 70, doorbells=(70, 70, 73, 73, 80, 99)),
        *more,
        Launch(launch_args(cfg, steps=2, batch=batch, cmd=C.CLEAR), 0),
        Launch(launch_args(cfg, steps=2, batch=cfg.max_batch + 1), 0),
    ]


def golden_launch(core: TrainerCore, launch: Launch, history=None, **latencies) -> dict:
    """The golden core through one launch as the RTL runs it; returns the end state and
    ``cycles``, the sequential core's :func:`sequential_launch_cycles` of what it did
    (``history``: a dict the calls share, the previous SAMPLE's B)."""
    args = launch.args
    cfg = core.config
    history = {} if history is None else history
    if not 1 <= args.batch <= cfg.max_batch:
        return {"error": 1, "cycles": 1}
    core.begin(args)
    error, stopped, done = 0, False, 0
    slots, bounds = [], []
    while True:
        w = len(core.pending[0][0]) if len(core.pending) > cfg.delay else 0
        k = core.boundary(launch.producer_at(len(bounds)))
        bounds.append((w, k, None))
        if args.cmd & TrainerCmd.INSERT:
            if (launch.producer - core.consumed) & 0xFFFFFFFF == 0:
                break
            continue
        if launch.stop:
            stopped = True
            break
        if args.steps and done >= args.steps:
            break
        if not core.can_step():
            error = 2
            break
        seq, tc = core.snapshot_seq, core.trace_count
        rec = core.step(args)
        slots.append(rec.indices)
        bounds[-1] = (w, k, {"batch": args.batch, "divide": history.get("B") != args.batch,
                             "trace": core.trace_count != tc,
                             "snapshot": core.snapshot_seq != seq})
        history["B"] = args.batch
        done += 1
    final = bool(done) and core.final_snapshot()
    cycles = sequential_launch_cycles(cfg, bounds, clear=bool(args.cmd & TrainerCmd.CLEAR),
                                      load=bool(args.cmd & TrainerCmd.LOAD),
                                      insert=bool(args.cmd & TrainerCmd.INSERT),
                                      final_snapshot=final, **latencies)
    return {"error": error, "stopped": stopped, "steps_done": done, "cycles": cycles,
            "consumed": core.consumed, "steps_total": core.steps_total,
            "sampled": core.sampled, "snapshot_seq": core.snapshot_seq,
            "trace_count": core.trace_count, "slots": slots,
            "flags": dict(core.flags)}
