"""Memory layout of the learner: on-chip buffers in S × S blocks and their host address map.

Every matrix the learner keeps on chip (inputs, activations, Q values, errors δ, weights, weight
gradients) lives in one memory whose word is an S × S *block* of the matrix (S = the tensor
units' size). Block ``(rg, cg)`` holds rows ``rg·S .. rg·S+S-1`` and columns
``cg·S .. cg·S+S-1``; inside the word, element ``(i, j)`` of the block is lane ``i·S + j``
(``lane_bits`` each, little end first). The block address is ``rg · G + cg`` with ``G`` the
column groups rounded up to a power of two (:meth:`LearnerConfig.groups_pow2`), so addresses
are bit fields. One read gives a tensor unit S operands in either orientation: a column of
the block (FW and BW: feature k of S samples; BW: column k of W, i.e. a row of Wᵀ) or a row
(WA: S features of one sample; FW: row k of W). Transposes are read orders, not copies.

The per-sample DQN data (action, reward, done, loss weight) is one word per S samples
(``"samples"``, lane i = sample ``rg·S + i``: reward in bits ``0..width-1``, then the action,
then done, then the loss weight in :attr:`~sw.learner.numerics.LearnerNumerics.
loss_weight_format`, ``coef_width`` bits; :func:`pack_samples` writes 1.0 when no weights are
given).

Host address map (byte addresses on the AXI4 memory port, ``axi_data_width`` = D bits): region
r starts at ``r · region_bytes``; memory word a of a region is ``sub`` consecutive D-bit words
(``sub`` = the word's D-bit pieces rounded up to a power of two, little end first), so it is at
``region_base + a · sub · D/8``. The regions and this address map (:class:`Region`,
:func:`regions`, :func:`region_base`, :func:`region_bytes`, :func:`mem_addr_bits`, ...) are
defined in :mod:`sw.learner.spec`, whose kernel configuration sizes its window with them, and
re-exported here. :func:`pack_matrix`, :func:`unpack_matrix`, :func:`pack_samples` turn numpy
arrays into images of these bytes and back; the core
(:class:`~rtl_gen.learner.core.LearnerCore`) decodes the same fields.
"""

import numpy as np

from sw.memmap import LaneField, MemoryRegion, MemoryWindow
from sw.packing import pack_lanes, unpack_lanes

# Re-exported: the drivers, golden devices, generators and tests import them from here.
from .spec import (LearnerConfig, Region, mem_addr_bits, region, region_base, region_bytes,
                   region_index, regions, sub_words, word_bytes)

__all__ = ["Region", "regions", "region", "region_index", "sub_words", "region_bytes",
           "mem_addr_bits", "region_base", "word_bytes", "pack_matrix", "unpack_matrix",
           "sample_fields", "pack_samples", "unpack_samples", "memory_window"]


def _check_rows(config, r, n, what):
    if not 1 <= n <= r.rows:
        raise ValueError(f"{what} must have 1..{r.rows} rows for region {r.name!r}, not {n}")


def pack_matrix(config: LearnerConfig, name: str, matrix) -> bytes:
    """Host image of a matrix region, from word 0 up to the last row group of ``matrix``.

    ``matrix`` holds raw integers, ``n × cols`` with n ≤ rows; padding is zero.
    """
    r = region(config, name)
    if r.kind != "matrix":
        raise ValueError(f"region {name!r} is not a matrix region")
    x = np.asarray(matrix)
    if x.ndim != 2 or x.shape[1] != r.cols:
        raise ValueError(f"matrix must be n × {r.cols} for region {name!r}, not shape {x.shape}")
    _check_rows(config, r, x.shape[0], "matrix")
    S, lb = config.array, r.lane_bits
    lo, hi = r.lane_range
    if x.size and (x.min() < lo or x.max() > hi):
        raise ValueError(f"values of region {name!r} must be raw {lb}-bit integers in "
                         f"{lo}..{hi}")
    rg = config.groups(x.shape[0])
    G = r.col_groups(config)
    pad = np.zeros((rg * S, G * S), dtype=np.int64)
    pad[:x.shape[0], :x.shape[1]] = x
    lanes = pad.reshape(rg, S, G, S).transpose(0, 2, 1, 3).reshape(rg * G, S * S)
    words = np.zeros((rg * G, word_bytes(config, name)), dtype=np.uint8)
    return pack_lanes(lanes, lb, words).tobytes()


def unpack_matrix(config: LearnerConfig, name: str, image: bytes, n_rows: int):
    """Inverse of :func:`pack_matrix`: the first ``n_rows`` rows (int64) from a host image that
    starts at word 0 and covers their row groups."""
    r = region(config, name)
    _check_rows(config, r, n_rows, "n_rows")
    S, lb = config.array, r.lane_bits
    G = r.col_groups(config)
    nb = word_bytes(config, name)
    rg = config.groups(n_rows)
    if len(image) < rg * G * nb:
        raise ValueError(f"image of region {name!r} must hold {rg * G * nb} bytes for "
                         f"{n_rows} rows, not {len(image)}")
    words = np.frombuffer(image, np.uint8, count=rg * G * nb).reshape(rg * G, nb)
    v = unpack_lanes(words, S * S, lb, signed=r.signed)
    out = v.reshape(rg, G, S, S).transpose(0, 2, 1, 3).reshape(rg * S, G * S)
    return np.ascontiguousarray(out[:n_rows, :r.cols])


def sample_fields(config: LearnerConfig) -> tuple:
    """The fields of a ``samples`` lane, low bits first (:class:`~sw.memmap.LaneField`):
    ``reward`` (act format), ``action``, ``done``, ``loss_weight``
    (:attr:`~sw.learner.numerics.LearnerNumerics.loss_weight_format`)."""
    num = config.numerics
    w, ab, wfmt = config.width, config.action_bits, num.loss_weight_format
    return (LaneField("reward", 0, w, True, num.act_format.frac, "reward (act format)"),
            LaneField("action", w, ab, doc=f"action, 0..{config.n_out - 1}"),
            LaneField("done", w + ab, 1, doc="episode ended: no bootstrap from s'"),
            LaneField("loss_weight", w + ab + 1, wfmt.width, wfmt.signed, wfmt.frac,
                      "loss weight (importance-sampling weight; 1.0 unweighted)"))


def pack_samples(config: LearnerConfig, actions, rewards, dones, weights=None) -> bytes:
    """Host image of the DQN ``samples`` region: B actions, raw rewards (act format), dones and
    raw loss weights (``loss_weight_format``; default None: all 1.0, the unweighted loss)."""
    r = region(config, "samples")
    a = np.asarray(actions, dtype=np.int64)
    rw = np.asarray(rewards, dtype=np.int64)
    d = np.asarray(dones).astype(bool)
    B = len(a)
    wfmt = config.numerics.loss_weight_format
    wt = (np.full(B, 1 << wfmt.frac, np.int64) if weights is None
          else np.asarray(weights, dtype=np.int64))
    if rw.shape != (B,) or d.shape != (B,) or wt.shape != (B,):
        raise ValueError(f"actions, rewards, dones and weights must have the same length, not "
                         f"{a.shape}, {rw.shape}, {d.shape}, {wt.shape}")
    _check_rows(config, r, B, "the batch")
    if B and (a.min() < 0 or a.max() >= config.n_out):
        raise ValueError(f"actions must be in 0..{config.n_out - 1}")
    config.numerics.act_format.check_raw(rw, "rewards")
    wfmt.check_raw(wt, "weights")
    S = config.array
    rf, af, df, wf = sample_fields(config)
    lanes = np.zeros(config.groups(B) * S, np.int64)
    lanes[:B] = ((rw & ((1 << rf.width) - 1)) | a << af.lsb | d.astype(np.int64) << df.lsb
                 | wt << wf.lsb)
    words = np.zeros((config.groups(B), word_bytes(config, "samples")), np.uint8)
    return pack_lanes(lanes.reshape(-1, S), r.lane_bits, words).tobytes()


def unpack_samples(config: LearnerConfig, image: bytes, n: int):
    """Inverse of :func:`pack_samples`: ``(actions, rewards, dones, weights)`` (weights raw)."""
    r = region(config, "samples")
    S, lb = config.array, r.lane_bits
    rf, af, df, wf = sample_fields(config)
    nb = word_bytes(config, "samples")
    groups = -(-n // S)
    if len(image) < groups * nb:
        raise ValueError(f"image of region 'samples' must hold {groups * nb} bytes for {n} "
                         f"samples, not {len(image)}")
    words = np.frombuffer(image, np.uint8, count=groups * nb).reshape(groups, nb)
    lane = unpack_lanes(words, S, lb, signed=False).reshape(-1)[:n]
    w = rf.width
    rv = lane & ((1 << w) - 1)
    rews = rv - ((rv >> (w - 1)) << w)
    acts = (lane >> af.lsb) & ((1 << af.width) - 1)
    return acts, rews, (lane >> df.lsb & 1).astype(bool), lane >> wf.lsb


def memory_window(config: LearnerConfig) -> MemoryWindow:
    """The ``s_axi_mem`` window of ``config``: every region of :func:`regions` at
    :func:`region_base`, its words :func:`word_bytes` apart (:class:`~sw.memmap.MemoryWindow`,
    what the register files describe)."""
    S, D, num = config.array, config.axi_data_width, config.numerics
    out = []
    for r in regions(config):
        if r.kind == "matrix":
            G = r.col_groups(config)
            doc = f"{r.doc}; block (rg, cg) is word rg*{G} + cg"
            lanes, fields = S * S, ()
        else:
            doc = f"{r.doc}; word g holds samples g*{S} .. g*{S}+{S - 1}, lane i sample g*{S} + i"
            lanes, fields = S, sample_fields(config)
        frac = getattr(num, f"{r.format}_format").frac if r.format else None
        out.append(MemoryRegion(r.name, region_base(config, r.name), region_bytes(config),
                                r.depth(config), word_bytes(config, r.name), lanes, r.lane_bits,
                                r.signed, frac, "rw" if r.host_write else "ro", doc, fields))
    return MemoryWindow(tuple(out), mem_addr_bits(config), doc=(
        f"A matrix region holds {S} x {S} blocks: element (i, j) of block (rg, cg), row "
        f"rg*{S} + i and column cg*{S} + j of the matrix, is lane i*{S} + j of the block's word "
        f"(zero past the matrix). A word is its lanes' bits in {D}-bit pieces, their number "
        f"rounded up to a power of two."))
