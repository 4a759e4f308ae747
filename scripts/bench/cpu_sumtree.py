"""Float64 K-ary sum trees on the CPU: the baselines the replay benchmark
(``scripts/bench/replay.py``), the CPU trainer (``scripts/bench/trainer_cpu.py``) and PAAL's
fan-out sweep (``scripts/repro/paal.py``) time against the replay accelerator.

A library, not a benchmark block: the scripts share these trees through this module, none
imports another's.

* :func:`tree_layout`: the levels of a K-ary tree in one array, root first;
* :func:`make_numba_tree`: a batched tree, jitted (sampling draws its own uniform targets and
  descends, scanning K children per level, then computes the weights; updates set the leaf
  and add the difference up the levels), the strongest straightforward code (PERF.md);
* :func:`make_numpy_tree`: the same tree, the batch vectorized level by level (sampling: the
  K children of every sampled node, their running sums, the first child whose sum passes the
  target; updates: the leaves set, then the touched parents recomputed level by level).
"""

import numpy as np

__all__ = ["tree_layout", "make_numba_tree", "make_numpy_tree"]


def tree_layout(capacity, fanout):
    """Level offsets of a K-ary tree of ``capacity`` leaves in one array (root first)."""
    sizes = [capacity]
    while sizes[-1] > 1:
        sizes.append(-(-sizes[-1] // fanout))
    sizes = sizes[::-1]
    offs = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    return offs, len(sizes) - 1


def make_numba_tree(numba):
    """``(build, sample, update)`` jitted, or None without numba."""
    if numba is None:
        return None
    njit = numba.njit(cache=False)

    @njit
    def build(tree, offs, K, depth):
        for lvl in range(depth - 1, -1, -1):
            for i in range(offs[lvl + 1] - offs[lvl]):
                s = 0.0
                for j in range(K):
                    c = offs[lvl + 1] + i * K + j
                    if c < offs[lvl + 2]:
                        s += tree[c]
                tree[offs[lvl] + i] = s

    @njit
    def sample(tree, offs, K, depth, size, beta, idx, w):
        total = tree[0]
        wmax = 0.0
        for b in range(idx.size):
            x = np.random.random() * total
            node = 0
            for lvl in range(1, depth + 1):
                base = offs[lvl] + node * K
                j = 0
                while j < K - 1 and x >= tree[base + j]:
                    x -= tree[base + j]
                    j += 1
                node = node * K + j
            idx[b] = node
            p = tree[offs[depth] + node] / total
            w[b] = (size * p) ** -beta
            wmax = max(wmax, w[b])
        for b in range(idx.size):
            w[b] /= wmax

    @njit
    def update(tree, offs, K, depth, idx, prio):
        for b in range(idx.size):
            node = idx[b]
            leaf = offs[depth] + node
            delta = prio[b] - tree[leaf]
            tree[leaf] = prio[b]
            for lvl in range(depth - 1, -1, -1):
                node //= K
                tree[offs[lvl] + node] += delta

    return build, sample, update


def make_numpy_tree(capacity, fanout, prio, tree=None):
    """``(sample, update)`` of a float64 K-ary sum tree over ``prio``, vectorized over the
    batch with numpy (module docstring): ``sample(rng, B, beta) -> (idx, weights)``,
    ``update(idx, prio)`` (for a repeated index the last value wins). ``tree`` (optional):
    the float64 array of :func:`tree_layout`'s ``offs[-1]`` nodes to keep the tree in (a new
    one by default), for a caller that reads the sums."""
    offs, depth = tree_layout(capacity, fanout)
    if tree is None:
        tree = np.zeros(offs[-1])
    assert tree.shape == (offs[-1],) and tree.dtype == np.float64
    levels = [tree[offs[lvl]:offs[lvl + 1]] for lvl in range(depth + 1)]   # views
    levels[depth][:] = prio
    kids = np.arange(fanout)

    def children(lvl, nodes):
        """Sums of the children (level ``lvl + 1``) of ``nodes``, 0 past the level's end."""
        c = nodes[:, None] * fanout + kids
        below = levels[lvl + 1]
        return np.where(c < below.size, below[np.minimum(c, below.size - 1)], 0.0), c

    for lvl in range(depth - 1, -1, -1):
        levels[lvl][:] = children(lvl, np.arange(levels[lvl].size))[0].sum(axis=1)

    def sample(rng, batch, beta):
        total = levels[0][0]
        x = rng.random(batch) * total
        node = np.zeros(batch, np.int64)
        rows = np.arange(batch)
        for lvl in range(depth):
            vals, c = children(lvl, node)
            run = np.cumsum(vals, axis=1)
            j = np.minimum((run <= x[:, None]).sum(axis=1),
                           (c < levels[lvl + 1].size).sum(axis=1) - 1)
            x = x - np.where(j > 0, run[rows, np.maximum(j - 1, 0)], 0.0)
            node = node * fanout + j
        w = (capacity * levels[depth][node] / total) ** -beta
        return node, w / w.max()

    def update(idx, p):
        levels[depth][idx] = p
        node = np.unique(idx)
        for lvl in range(depth - 1, -1, -1):
            node = np.unique(node // fanout)
            levels[lvl][node] = children(lvl, node)[0].sum(axis=1)

    return sample, update
