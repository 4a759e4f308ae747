"""Prioritized replay end to end: sample a batch (indices and importance weights), update a batch
of priorities, and both as a DQN step does them (update the last batch, sample the next).

Accelerator: :class:`sw.replay.driver.ReplayDriver` ``sample(B, beta)`` (on-chip PRNG),
``update(indices, td_errors)`` and ``update_and_sample`` (one fused run) on the shipped
Alveo kernels ``replay_kernel_k16`` (K = 16, 2^16 leaves) and ``replay_kernel_k16_1m``
(K = 16, 2^20 leaves), host code timed against :class:`sw.driver.stub.InstantDevice`, the bytes through the PCIe model, the run's cycles
(:func:`sw.replay.spec.run_cycles`) plus the window shell's copies, at each module's clock.

CPU baselines on a float64 tree of the same fan-out and size (``bench.cpu_sumtree``, shared
with the CPU trainer and PAAL's fan-out sweep):

* ``numba``: a batched K-ary sum tree (levels in one array; sampling draws its own uniform
  targets and descends, scanning K children per level, then computes the weights; updates
  set the leaf and add the difference up the levels), the strongest straightforward code
  (PERF.md);
* ``numpy``: the same tree, the batch vectorized level by level (sampling: the K children of
  every sampled node, their running sums, the first child whose sum passes the target;
  updates: the leaves set, then the touched parents recomputed level by level), always there;
* ``cpprb``: ``PrioritizedReplayBuffer.sample`` / ``update_priorities`` (a C++ segment tree),
  if installed.
"""

import numpy as np

from bench.common import traffic_of
from bench.cpu_sumtree import make_numba_tree, make_numpy_tree, tree_layout

#: The shipped Alveo kernels by their leaves: 2^16, and the 2^20 of PERF.md and the goals.
MODULES = {1 << 16: "replay_kernel_k16", 1 << 20: "replay_kernel_k16_1m"}
CAPACITIES = tuple(MODULES)
BATCH = 256
BETA = 0.4


def _cpprb(capacity, prio):
    try:
        from cpprb import PrioritizedReplayBuffer
    except ImportError:
        return None
    rb = PrioritizedReplayBuffer(capacity, {"obs": {"shape": 1}}, alpha=1.0)
    rb.add(obs=np.zeros((capacity, 1)), priorities=prio)
    return rb


def _baselines(env, capacity, fanout, rng):
    """name -> callable for sample and for update at ``capacity`` leaves."""
    prio = rng.random(capacity) + 0.01
    idx_u = rng.integers(0, capacity, BATCH)
    prio_u = rng.random(BATCH) + 0.01
    sample, update = {}, {}
    nt = make_numba_tree(env.numba)
    if nt is not None:
        build, nsample, nupdate = nt
        offs, depth = tree_layout(capacity, fanout)
        offs = np.concatenate([offs, offs[-1:]])          # offs[depth + 2] for build
        tree = np.zeros(offs[-1])
        tree[offs[depth]:offs[depth] + capacity] = prio
        build(tree, offs, fanout, depth)
        assert abs(tree[0] - prio.sum()) < 1e-6 * prio.sum()
        idx, w = np.empty(BATCH, np.int64), np.empty(BATCH)
        sample["numba"] = lambda: nsample(tree, offs, fanout, depth, capacity, BETA, idx, w)
        update["numba"] = lambda: nupdate(tree, offs, fanout, depth, idx_u, prio_u)
        sample["numba"]()
        assert 0 <= idx.min() and idx.max() < capacity and w.max() == 1.0
    np_sample, np_update = make_numpy_tree(capacity, fanout, prio)
    np_rng = np.random.default_rng(1)
    sample["numpy"] = lambda: np_sample(np_rng, BATCH, BETA)
    update["numpy"] = lambda: np_update(idx_u, prio_u)
    i, w = sample["numpy"]()
    assert 0 <= i.min() and i.max() < capacity and w.max() == 1.0
    rb = _cpprb(capacity, prio)
    if rb is not None:
        sample["cpprb"] = lambda: rb.sample(BATCH, beta=BETA)
        update["cpprb"] = lambda: rb.update_priorities(idx_u, prio_u)
    return sample, update


def _accelerator(module, rng):
    """The driver's sample and update of ``module`` on an instant stub, with its traffic."""
    from sw.driver import InstantDevice, ReplayDriver
    from sw.registry import shipped_config
    from sw.replay.spec import region_base

    _, kcfg = shipped_config(module)
    acfg = kcfg.accel
    dev = InstantDevice.for_kernel(module, store=True)
    drv = ReplayDriver(dev)
    # What the stub answers: a full tree whose sampled leaves have priority 1 of a total
    # equal to the capacity (so the driver's weights are finite, as on a real tree).
    one = int(acfg.priority_format.quantize(1.0))
    dev.memory.write(region_base(acfg, "PRIO_OUT"),
                     np.full(BATCH, one, "<u8").tobytes())
    total = one * acfg.capacity
    dev.answer("TOTAL_LO", total & 0xFFFF_FFFF)
    dev.answer("TOTAL_HI", total >> 32)
    dev.answer("SIZE", acfg.capacity)
    idx_u = rng.integers(0, acfg.capacity, BATCH)
    prio_u = rng.random(BATCH) + 0.01
    accel = {"sample": lambda: drv.sample(BATCH, BETA),
             "update": lambda: drv.update(idx_u, prio_u),
             "update+sample": lambda: drv.update_and_sample(idx_u, prio_u, BATCH, BETA)}
    # what each call moves in a DQN loop, where sample and update alternate (so OP changes
    # every call; the other arguments stay)
    return acfg, accel, {"sample": traffic_of(dev, accel["sample"], before=accel["update"]),
                         "update": traffic_of(dev, accel["update"], before=accel["sample"]),
                         "update+sample": traffic_of(dev, accel["update+sample"])}


def rows(quick: bool, env, capacities=None) -> list:
    """Sample and update rows per capacity (the module docstring)."""
    from sw.replay.spec import ReplayOp, SumTreeConfig, run_cycles

    rng = np.random.default_rng(0)
    ops = {"sample": ReplayOp.SAMPLE, "update": ReplayOp.UPDATE,
           "update+sample": ReplayOp.UPDATE_SAMPLE}
    out = []
    for cap in capacities or CAPACITIES:
        # A capacity no module ships: the cycle model of that tree, the host and bus of the
        # 2^16 kernel (the driver's traffic depends on B only), labelled so.
        module = MODULES.get(cap, MODULES[1 << 16])
        acfg, accel, traffic = _accelerator(module, rng)
        sample, update = _baselines(env, cap, acfg.fanout, rng)
        tree = acfg if cap == acfg.capacity else SumTreeConfig(fanout=acfg.fanout, capacity=cap)
        config = (f"{module} (K={acfg.fanout}, 2^{cap.bit_length() - 1} leaves), Alveo"
                  if tree is acfg else
                  f"NOT SHIPPED, cycle model only: K={acfg.fanout}, "
                  f"2^{cap.bit_length() - 1} leaves; host and bus of {module}, Alveo")
        # a DQN step's replay work: update the last batch's priorities, sample the next;
        # on the CPU the two calls, on the kernel one fused run (no host round trip between)
        fused = {k: (lambda u=update[k], s=sample[k]: (u(), s())) for k in sample
                 if k in update}
        for op, fns in (("sample", sample), ("update", update), ("update+sample", fused)):
            if not fns:
                continue
            times = env.best_of({**fns, "host": accel[op]},
                                desc=f"replay {op} 2^{cap.bit_length() - 1}")
            host = times.pop("host")
            out.append(env.kernel_row(
                block="replay", module=module, config=config,
                shape=f"{op} B={BATCH}, N=2^{cap.bit_length() - 1}", baselines=times,
                host_us=host, traffic=traffic[op],
                run_cycles=run_cycles(tree, ops[op], BATCH,
                                      BATCH if op == "update+sample" else 1)))
    return out
