"""Functional coverage of the blocks' stimulus: the replay's operation mixes, the learner's
batch shapes and target-sync periods, the GAE blocks' trajectory shapes.

Each point: bins (label -> predicate of the sampled value) and, for a bin no test can reach,
the reason. The tests that produce the stimulus call the samplers below (a few calls per run
of commands, per started run or step, never per cycle): :func:`tree_run` (the sum tree's
command stream, tb/replay/test_sumtree_rtl.py), :func:`replay_run` (a start of the replay
accelerator), :func:`learner_step` and :func:`learner_run` (the learner and the trainer),
:func:`gae_run` (a GAE run). :func:`observing` wraps a driver method for the length of an RTL
session, so that the driver tests sample what the unmodified driver starts.

A point over a stream of commands (``replay.tree.*``, ``gae.episode_ends``) is sampled once
per distinct value per run: its hits count the runs that contained the case."""

import contextlib
import functools

import numpy as np

from . import at_least, eq, point, sample

__all__ = ["TREE_OPS", "REPLAY_OPS", "tree_run", "replay_run", "learner_step", "learner_run",
           "gae_run", "observing", "replay_driver_run", "learner_driver_start",
           "gae_driver_run"]

# -- replay: the sum tree core --------------------------------------------------------------------
#: The sum tree's command codes (rtl_gen/replay/layouts.py, SumTreeOp), in code order.
TREE_OPS = ("SAMPLE", "SAMPLE_PRNG", "UPDATE", "INSERT", "INSERT_MAX", "READ", "DEBUG", "RESET")

point("replay.tree.op", {op: eq(op) for op in TREE_OPS},
      doc="sum tree core: command kinds issued (hits: runs of commands with one)")
point("replay.tree.pair", {f"{a}>{b}": eq((a, b)) for a in TREE_OPS for b in TREE_OPS},
      doc="sum tree core: two commands accepted (cmd.valid & cmd.ready) in consecutive "
          "cycles (hits: runs with the pair)")
point("replay.tree.same_leaf",
      {f"{a}>{b}": eq((a, b)) for a in ("UPDATE", "READ") for b in ("UPDATE", "READ")},
      doc="sum tree core: the same leaf (< capacity) addressed by commands accepted in "
          "consecutive cycles")
point("replay.tree.after_update",
      {**{f"same leaf +{d}": eq(("leaf", d)) for d in (1, 2, 3)},
       **{f"sibling +{d}": eq(("sibling", d)) for d in (1, 2)}},
      doc="sum tree core: an UPDATE or READ accepted d cycles after an UPDATE of the same leaf, "
          "or of another leaf of its group (one word of the leaf memory): the forwarding paths")


def tree_run(cfg, cmds, cycles):
    """Sample a run of sum tree commands: ``cmds`` (tuples ``(op, level, index, ...)``, see
    tb/sumtree_ref.py) accepted at ``cycles``."""
    ops = [TREE_OPS[c[0]] for c in cmds]
    cycles = [int(c) for c in cycles]
    for op in sorted(set(ops)):
        sample("replay.tree.op", op)
    pairs, same, near = set(), set(), set()
    last_update = {}                # leaf -> cycle of its newest UPDATE
    group_update = {}               # leaf group -> (cycle, leaf) of its newest UPDATE
    k = cfg.fanout
    for i, (op, c, cyc) in enumerate(zip(ops, cmds, cycles)):
        if i and cyc == cycles[i - 1] + 1:
            pairs.add((ops[i - 1], op))
            if op in ("UPDATE", "READ") and ops[i - 1] in ("UPDATE", "READ") \
                    and c[2] == cmds[i - 1][2] < cfg.capacity:
                same.add((ops[i - 1], op))
        if op not in ("UPDATE", "READ") or c[2] >= cfg.capacity:
            continue
        leaf = c[2]
        d = cyc - last_update.get(leaf, -10)
        if 1 <= d <= 3:
            near.add(("leaf", d))
        g = group_update.get(leaf // k)
        if g is not None and g[1] != leaf and 1 <= cyc - g[0] <= 2:
            near.add(("sibling", cyc - g[0]))
        if op == "UPDATE":
            last_update[leaf] = cyc
            group_update[leaf // k] = (cyc, leaf)
    for name, values in (("replay.tree.pair", pairs), ("replay.tree.same_leaf", same),
                         ("replay.tree.after_update", near)):
        for v in sorted(values):
            sample(name, v)


# -- replay: the accelerator ----------------------------------------------------------------------
#: ReplayOp names (sw/replay/spec.py), in code order.
REPLAY_OPS = ("SAMPLE", "UPDATE", "INSERT", "INSERT_MAX", "READ", "UPDATE_SAMPLE", "RESET",
              "SEED")


def _op(name, prng=None, relaxed=None):
    return lambda v: v[0] == name and (prng is None or v[1] == prng) and (
        relaxed is None or v[2] == relaxed)


point("replay.accel.op",
      {**{op: _op(op) for op in REPLAY_OPS},
       "SAMPLE (PRNG)": _op("SAMPLE", True), "SAMPLE (TARGET_IN)": _op("SAMPLE", False),
       "UPDATE_SAMPLE strict": _op("UPDATE_SAMPLE", relaxed=False),
       "UPDATE_SAMPLE relaxed": _op("UPDATE_SAMPLE", relaxed=True),
       "UPDATE_SAMPLE relaxed (PRNG)": _op("UPDATE_SAMPLE", True, True)},
      doc="replay accelerator: operations of the runs started (accepted starts)")


def _size(kind, pred):
    return lambda v: v[0] == kind and pred(v[1], v[2])


_SIZES = {"1": lambda n, top: n == 1, "mid": lambda n, top: 1 < n < top,
          "max_batch": lambda n, top: n == top}
point("replay.accel.batch",
      {**{f"B {k}": _size("B", f) for k, f in _SIZES.items()},
       **{f"U {k}": _size("U", f) for k, f in _SIZES.items()}},
      doc="replay accelerator: BATCH_SIZE B of accepted runs (but RESET, SEED), UPDATE_SIZE U "
          "of UPDATE_SAMPLE: 1, between, max_batch")
point("replay.accel.update_indices",
      {"UPDATE distinct": eq(("UPDATE", "distinct")),
       "UPDATE duplicates": lambda v: v == ("UPDATE", "duplicates") or v == ("UPDATE", "adjacent"),
       "UPDATE duplicates back to back": eq(("UPDATE", "adjacent")),
       "UPDATE_SAMPLE duplicates": lambda v: v[0] == "UPDATE_SAMPLE" and v[1] != "distinct"},
      doc="replay accelerator: leaf indices of an update batch (IDX_IN) repeated (the last "
          "write wins), next to each other (back to back in the tree)")
point("replay.accel.error", {"ok": eq(0), "op": eq(1), "batch_size": eq(2),
                             "update_size": eq(3)},
      doc="replay accelerator: STATUS.ERROR of a start (sw/replay/spec.py REPLAY_ERRORS)")


def replay_run(cfg, code, batch=1, update_size=1, *, prng=False, relaxed=False, indices=None):
    """Sample a start of the replay accelerator of ``cfg`` with these register values;
    ``indices``: IDX_IN as loaded (UPDATE, UPDATE_SAMPLE), None if not known."""
    from sw.replay.model import check_run_args

    error = check_run_args(cfg, code, batch, update_size)
    sample("replay.accel.error", error)
    if error:
        return
    op = REPLAY_OPS[code]
    sample("replay.accel.op", (op, bool(prng), bool(relaxed)))
    if op in ("RESET", "SEED"):
        return
    sample("replay.accel.batch", ("B", batch, cfg.max_batch))
    if op == "UPDATE_SAMPLE":
        sample("replay.accel.batch", ("U", update_size, cfg.max_batch))
    if indices is not None and op in ("UPDATE", "UPDATE_SAMPLE"):
        idx = np.asarray(indices[:update_size if op == "UPDATE_SAMPLE" else batch])
        kind = ("adjacent" if (idx[1:] == idx[:-1]).any() else
                "duplicates" if np.unique(idx).size < idx.size else "distinct")
        sample("replay.accel.update_indices", (op, kind))


# -- learner ---------------------------------------------------------------------------------------
def _b(pred):
    return lambda v: pred(*v)


point("learner.batch",
      {"1": _b(lambda B, sub, top: B == 1),
       "below sub_batch": _b(lambda B, sub, top: 1 < B < sub),
       "= sub_batch": _b(lambda B, sub, top: B == sub),
       "multiple of sub_batch": _b(lambda B, sub, top: B > sub and B % sub == 0),
       "not a multiple": _b(lambda B, sub, top: B > sub and B % sub != 0 and B <= top),
       "max_batch": _b(lambda B, sub, top: B == top),
       "0 (refused)": _b(lambda B, sub, top: B == 0),
       "above max_batch (refused)": _b(lambda B, sub, top: B > top)},
      doc="learner (accelerator, kernel, trainer): batch size B of a started step against "
          "sub_batch and max_batch")
point("learner.sync_period",
      {"off (0)": lambda v: v[0] == 0, "every step (1)": lambda v: v[0] == 1,
       "every N-th step (N > 1)": lambda v: v[0] > 1, "forced (SYNC_TARGET)": lambda v: v[1]},
      doc="learner (DQN): SYNC_PERIOD of a started step, and SYNC_TARGET")
point("learner.run_syncs", {"none in a run": eq(0), "one": eq(1), "several": at_least(2)},
      doc="learner (DQN): target syncs in a run of 2 or more steps on the weights kept on chip "
          "(a test's chain of steps, a trainer launch)")


def learner_step(batch, sub_batch, max_batch, *, sync_period=None, sync_target=False):
    """Sample a started learner step (or a trainer launch's steps) of ``batch`` samples;
    ``sync_period`` None: not a DQN step with target syncs."""
    sample("learner.batch", (int(batch), int(sub_batch), int(max_batch)))
    if sync_period is not None and 1 <= batch <= max_batch:
        sample("learner.sync_period", (int(sync_period), bool(sync_target)))


def learner_run(steps, syncs=None, *, sync_period=0, sync_count=0):
    """Sample a run of ``steps`` learner steps in a row that synced the target ``syncs``
    times (None: those of :class:`sw.learner.mlp.TargetSync` from ``sync_period`` and the
    count ``sync_count`` at the start); runs of fewer than 2 steps are not sampled."""
    if syncs is None:
        from sw.learner.mlp import TargetSync

        rule = TargetSync(sync_period, sync_count)
        syncs = sum(rule.step() for _ in range(steps))
    if steps >= 2:
        sample("learner.run_syncs", int(syncs))


# -- GAE -------------------------------------------------------------------------------------------
def _t(pred):
    return lambda v: pred(v["T"], v["G"], v["cfg"])


point("gae.timesteps",
      {"1": _t(lambda T, G, c: T == 1),
       "between": _t(lambda T, G, c: 1 < T < c.capacity),
       "= capacity": _t(lambda T, G, c: T == c.capacity),
       "above capacity (fewer groups)": _t(lambda T, G, c: T > c.capacity),
       "memory full": _t(lambda T, G, c: (T + 1) * G == c.depth)},
      doc="GAE: time steps T of a run against the capacity; memory full: (T + 1) * groups = "
          "depth")


def _m(pred):
    return lambda v: pred(v["M"], v["cfg"].n_pe, v["cfg"].max_trajectories)


point("gae.trajectories",
      {"1": _m(lambda M, n, top: M == 1),
       "below n_pe": _m(lambda M, n, top: M < n),
       "= n_pe": _m(lambda M, n, top: M == n),
       "multiple of n_pe": _m(lambda M, n, top: M > n and M % n == 0),
       "not a multiple": _m(lambda M, n, top: M > n and M % n != 0),
       "= max_trajectories": _m(lambda M, n, top: M == top),
       "above max_trajectories (fewer steps)": _m(lambda M, n, top: M > top)},
      doc="GAE: trajectories N of a run against the PEs (a last group partly idle) and "
          "max_trajectories")
point("gae.episode_ends",
      {"at t = 0": eq("first"), "at t = T-1": eq("last"), "inside": eq("inside"),
       "none in a trajectory": eq("none"), "at consecutive steps": eq("consecutive")},
      doc="GAE: where the episode ends (dones) of a run fall in its trajectories (hits: runs)")


def gae_run(cfg, args, dones):
    """Sample a GAE run of the accelerator ``cfg`` (a ``GaeCoreConfig``) with arguments
    ``args`` (``GaeCoreArgs``) on ``dones`` (T x N); refused runs are not sampled."""
    from sw.gae.spec import check_args

    if check_args(args, cfg):
        return
    T, M = args.num_timesteps, args.num_trajectories
    d = np.asarray(dones, bool)[:T, :M]
    sample("gae.timesteps", {"T": T, "G": -(-M // cfg.n_pe), "cfg": cfg})
    sample("gae.trajectories", {"M": M, "cfg": cfg})
    kinds = []
    if d[0].any():
        kinds.append("first")
    if d[-1].any():
        kinds.append("last")
    if T > 2 and d[1:-1].any():
        kinds.append("inside")
    if not d.any(axis=0).all():
        kinds.append("none")
    if T > 1 and (d[1:] & d[:-1]).any():
        kinds.append("consecutive")
    for k in kinds:
        sample("gae.episode_ends", k)


# -- driver sessions -------------------------------------------------------------------------------
def replay_driver_run(drv, op, batch=1, update_size=1, *, prng=False, relaxed=False, seed=None):
    """:func:`observing` hook of ``sw.replay.driver.ReplayDriver._run`` (every start)."""
    replay_run(drv.config, int(op), batch, update_size, prng=prng, relaxed=relaxed)


def gae_driver_run(drv, reward_codes, value_codes, bootstrap_codes, dones, args, *rest, **kw):
    """:func:`observing` hook of ``sw.gae.driver.GaeDriver._run`` (load, start, wait)."""
    gae_run(drv.config, args, dones)


def learner_driver_start(drv, words):
    """:func:`observing` hook of ``sw.learner.driver.LearnerDriver._write_and_start`` (every
    start, with the argument registers' words)."""
    cfg = drv.config
    learner_step(words["BATCH_SIZE"], cfg.sub_batch, cfg.max_batch,
                 sync_period=words.get("SYNC_PERIOD"), sync_target=words.get("SYNC_TARGET", 0))


@contextlib.contextmanager
def observing(cls, name, hook):
    """Within the block, ``cls.name(self, *args, **kwargs)`` first calls ``hook(self, *args,
    **kwargs)``: what a driver test's RTL session starts, sampled without changing the
    driver (the golden session after the block is not sampled)."""
    own = name in vars(cls)
    orig = getattr(cls, name)

    @functools.wraps(orig)
    def wrapper(self, *args, **kwargs):
        hook(self, *args, **kwargs)
        return orig(self, *args, **kwargs)

    setattr(cls, name, wrapper)
    try:
        yield
    finally:
        if own:
            setattr(cls, name, orig)
        else:
            delattr(cls, name)
