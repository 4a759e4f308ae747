"""Memory images of the GAE accelerator's stack memory, as the host sees them over AXI.

Every region (``rewards``, ``values``, ``dones`` and, with full-precision results, ``adv`` and
``rtg``) is an array of memory words. Word ``t * G + g`` holds time step ``t`` of trajectories
``g * n_pe .. g * n_pe + n_pe - 1`` (``G = ceil(M / n_pe)`` for a run of M trajectories): the
[timestep][trajectory] layout of HEPPO §IV, rows pushed forward in time by the host and popped
backwards by the accelerator. Lane p of a word sits at bits ``p * w .. p * w + w - 1`` (w: code
bits, 1 for dones, data width for full results), little-endian. In host address space each word
takes ``region_sub_words * axi_data_width / 8`` bytes; the bytes past the lanes are padding.
The values region has one more row, ``t = T``: the bootstrap values V(s_T).
"""

from functools import lru_cache

import numpy as np

from sw.gae.spec import GaeCoreConfig
from sw.memmap import MemoryRegion, MemoryWindow
from sw.packing import LANE_DTYPES, pack_lanes, unpack_lanes

__all__ = ["lane_width", "word_bytes", "pack_rows", "unpack_rows", "region_base", "row_offset",
           "REGION_DOCS", "memory_window"]

#: What each region holds (the description in :func:`memory_window`).
REGION_DOCS = {
    "rewards": "reward codes of rows t = 0..T-1 (reward = code * REWARD_SCALE + REWARD_OFFSET); "
               "with in-place results, the advantage codes (ADV_SCALE, ADV_OFFSET) after a run",
    "values": "value codes of rows t = 0..T, row T the bootstrap values V(s_T) (VALUE_SCALE, "
              "VALUE_OFFSET); with in-place results, the return codes (RTG_SCALE, RTG_OFFSET) "
              "after a run",
    "dones": "episode ends of rows t = 0..T-1, one bit per trajectory",
    "adv": "advantages of rows t = 0..T-1, in the PE's data format",
    "rtg": "returns (rewards-to-go) of rows t = 0..T-1, in the PE's data format",
}


def lane_width(config: GaeCoreConfig, region: str) -> int:
    return {"rewards": config.code_bits, "values": config.code_bits, "dones": 1,
            "adv": config.pe.data_width, "rtg": config.pe.data_width}[region]


@lru_cache(maxsize=256)
def word_bytes(config: GaeCoreConfig, region: str) -> int:
    """Bytes one memory word takes in host address space (lanes plus padding)."""
    return config.region_sub_words(region) * config.axi_data_width // 8


@lru_cache(maxsize=256)
def region_base(config: GaeCoreConfig, region: str) -> int:
    """Byte offset of a region in the AXI4 memory port's address space."""
    return config.regions.index(region) * config.region_bytes


def row_offset(config: GaeCoreConfig, region: str, t: int, M: int) -> int:
    """Byte offset of row ``t`` (time step t of all M trajectories) of a region: where a
    :class:`~sw.gae.stream.GaeStream` writes that step's ``pack_rows`` image."""
    return region_base(config, region) + t * -(-M // config.n_pe) * word_bytes(config, region)


def _words(config: GaeCoreConfig, region: str, W: int, buf=None):
    """``(W, word_bytes)`` uint8 view of ``buf`` (zeroed), or a new zeroed array."""
    nbytes = word_bytes(config, region)
    if buf is None:
        return np.zeros((W, nbytes), np.uint8)
    out = np.frombuffer(buf, np.uint8) if not isinstance(buf, np.ndarray) else buf.view(np.uint8)
    if out.size < W * nbytes or not out.flags.writeable:
        raise ValueError(f"out must be a writable buffer of at least {W * nbytes} bytes")
    out = out.reshape(-1)[:W * nbytes].reshape(W, nbytes)
    out[...] = 0
    return out


def pack_rows(config: GaeCoreConfig, region: str, rows, *, out=None):
    """Pack ``rows[t, j]`` (integers; bools for dones) into the region's byte image.

    ``rows`` has one row per time step and M columns; columns are grouped by ``n_pe``, the
    last group padded with zeros. Each lane keeps the low ``w`` bits of its integer (two's
    complement). Vectorized (:mod:`sw.packing`).

    Parameters
    ----------
    out : writable buffer, optional
        Where to pack (e.g. a backend-allocated buffer): its first ``T * G * word_bytes`` bytes
        are overwritten and returned as a uint8 array. Without it, ``bytes`` are returned.
    """
    rows = np.asarray(rows)
    if rows.ndim != 2:
        raise ValueError(f"rows must be a [T, M] array, not shape {rows.shape}")
    if rows.dtype.kind not in "biu":
        rows = rows.astype(np.int64)
    T, M = rows.shape
    n, w = config.n_pe, lane_width(config, region)
    G = -(-M // n)
    full, rest = divmod(M, n)
    words = _words(config, region, T * G, out)
    if w in LANE_DTYPES:
        # the lanes of the full groups, then the last group's, cast into a view of the image
        lanes = words[:, :n * w // 8].view(LANE_DTYPES[w][0]).reshape(T, G, n)
        lanes[:, :full] = rows[:, :full * n].reshape(T, full, n)
        if rest:
            lanes[:, full, :rest] = rows[:, full * n:]
    else:
        padded = np.zeros((T, G * n), rows.dtype)
        padded[:, :M] = rows
        pack_lanes(padded.reshape(T * G, n), w, words)
    return words.tobytes() if out is None else words


def unpack_rows(config: GaeCoreConfig, region: str, data, T: int, M: int, *,
                signed=True) -> np.ndarray:
    """Inverse of :func:`pack_rows`: the ``[T, M]`` int64 array stored in a region's byte image
    (``data``: bytes or any buffer; read without a copy)."""
    n, w = config.n_pe, lane_width(config, region)
    G = -(-M // n)
    nbytes = word_bytes(config, region)
    if len(data) < T * G * nbytes:
        raise ValueError(f"need {T * G * nbytes} bytes for {T} x {M}, got {len(data)}")
    words = np.frombuffer(data, np.uint8, count=T * G * nbytes).reshape(T * G, nbytes)
    return unpack_lanes(words, n, w, signed=signed).reshape(T, G * n)[:, :M]


def memory_window(config: GaeCoreConfig) -> MemoryWindow:
    """The ``s_axi_mem`` window of ``config``: every region at :func:`region_base`, its words
    :func:`word_bytes` apart (:class:`~sw.memmap.MemoryWindow`, what the register files
    describe)."""
    if not isinstance(config, GaeCoreConfig):
        raise TypeError(f"config must be a GaeCoreConfig, not {config!r}")
    n = config.n_pe
    data = config.pe.data_format
    regions = tuple(
        MemoryRegion(name, region_base(config, name), config.region_bytes, config.depth,
                     word_bytes(config, name), n, lane_width(config, name),
                     signed=name != "dones",
                     frac=data.frac if name in ("adv", "rtg") else None,
                     access="ro" if name in ("adv", "rtg") else "rw", doc=REGION_DOCS[name])
        for name in config.regions)
    return MemoryWindow(regions, config.mem_addr_bits, doc=(
        f"Row t of a run of M trajectories is words t*G .. t*G+G-1 of a region, G = "
        f"ceil(M / {n}); lane p of word t*G + g is trajectory g*{n} + p (zero past M). A run "
        f"fits if (T + 1) * G <= {config.depth}."))
