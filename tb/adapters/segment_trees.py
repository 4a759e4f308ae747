"""numpy stand-ins for TorchRL's C++ segment trees (``torchrl._torchrl``), whose extension does
not load with torch 2.13 (an undefined libtorch symbol in torchrl 0.14.1's wheel): with them
installed, TorchRL's own Python ``PrioritizedSampler`` runs unchanged and serves as the
reference for :class:`sw.adapters.torchrl.AcceleratedPrioritizedSampler`.

The interface and semantics are those of ``torchrl/csrc/segment_tree.h``: a fixed ``size``,
``tree[index] = value`` and ``tree[index]``, ``query(l, r)`` reducing ``[l, r)``, and for the
sum tree ``scan_lower_bound(mass)``: the first index whose prefix sum is not less than
``mass`` (``size`` if ``mass`` exceeds the total). O(size) per call, for small tests only.
"""

import numpy as np
import torch

__all__ = ["install"]


class _Tree:
    _identity = 0.0

    def __init__(self, size, dtype=np.float64):
        self._v = np.full(int(size), self._identity, dtype)

    @property
    def size(self):
        return self._v.size

    def __getitem__(self, index):
        return torch.as_tensor(self._v[np.asarray(index)])

    def __setitem__(self, index, value):
        self._v[np.asarray(index)] = np.asarray(value, self._v.dtype)

    def query(self, l, r):
        return float(self._reduce(self._v[int(l):int(r)]))


class SumTree(_Tree):
    _identity = 0.0

    @staticmethod
    def _reduce(a):
        return a.sum() if a.size else 0.0

    def scan_lower_bound(self, mass):
        cum = np.cumsum(self._v)
        m = np.asarray(mass, self._v.dtype)
        idx = np.searchsorted(cum, m, side="left")
        return torch.as_tensor(np.minimum(idx, self.size) if m.ndim else int(idx))


class MinTree(_Tree):
    _identity = np.inf

    @staticmethod
    def _reduce(a):
        return a.min() if a.size else np.inf


def install(monkeypatch):
    """Put the stand-ins where TorchRL's prioritized sampler looks for its trees."""
    from torchrl.data.replay_buffers.samplers import prioritized

    for bits, dt in ((32, np.float32), (64, np.float64)):
        monkeypatch.setattr(prioritized, f"SumSegmentTreeFp{bits}",
                            lambda n, dt=dt: SumTree(n, dt))
        monkeypatch.setattr(prioritized, f"MinSegmentTreeFp{bits}",
                            lambda n, dt=dt: MinTree(n, dt))
