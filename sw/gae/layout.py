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

import numpy as np

from sw.gae.spec import GaeCoreConfig

__all__ = ["lane_width", "word_bytes", "pack_rows", "unpack_rows", "region_base"]


def lane_width(config: GaeCoreConfig, region: str) -> int:
    return {"rewards": config.code_bits, "values": config.code_bits, "dones": 1,
            "adv": config.pe.data_width, "rtg": config.pe.data_width}[region]


def word_bytes(config: GaeCoreConfig, region: str) -> int:
    """Bytes one memory word takes in host address space (lanes plus padding)."""
    return config.region_sub_words(region) * config.axi_data_width // 8


def region_base(config: GaeCoreConfig, region: str) -> int:
    """Byte offset of a region in the AXI4 memory port's address space."""
    return config.regions.index(region) * config.region_bytes


def pack_rows(config: GaeCoreConfig, region: str, rows) -> bytes:
    """Pack ``rows[t, j]`` (integers; bools for dones) into the region's byte image.

    ``rows`` has one row per time step and M columns; columns are grouped by ``n_pe``, the
    last group padded with zeros.
    """
    rows = np.asarray(rows)
    if rows.ndim != 2:
        raise ValueError(f"rows must be a [T, M] array, not shape {rows.shape}")
    T, M = rows.shape
    n, w = config.n_pe, lane_width(config, region)
    G = -(-M // n)
    padded = np.zeros((T, G * n), np.int64)
    padded[:, :M] = rows
    lanes = padded.reshape(T * G, n) & ((1 << w) - 1)
    nbytes = word_bytes(config, region)
    out = bytearray(T * G * nbytes)
    for i, word_lanes in enumerate(lanes.tolist()):
        word = 0
        for p, v in enumerate(word_lanes):
            word |= v << (p * w)
        out[i * nbytes:(i + 1) * nbytes] = word.to_bytes(nbytes, "little")
    return bytes(out)


def unpack_rows(config: GaeCoreConfig, region: str, data: bytes, T: int, M: int, *,
                signed=True) -> np.ndarray:
    """Inverse of :func:`pack_rows`: the ``[T, M]`` array stored in a region's byte image."""
    n, w = config.n_pe, lane_width(config, region)
    G = -(-M // n)
    nbytes = word_bytes(config, region)
    if len(data) < T * G * nbytes:
        raise ValueError(f"need {T * G * nbytes} bytes for {T} x {M}, got {len(data)}")
    out = np.zeros((T * G, n), np.int64)
    mask = (1 << w) - 1
    for i in range(T * G):
        word = int.from_bytes(data[i * nbytes:(i + 1) * nbytes], "little")
        for p in range(n):
            v = (word >> (p * w)) & mask
            if signed and w > 1 and v >> (w - 1):
                v -= 1 << w
            out[i, p] = v
    return out.reshape(T, G * n)[:, :M]
