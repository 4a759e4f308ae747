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


#: numpy dtypes of byte-aligned lanes (little-endian), by lane width: (unsigned, signed).
_LANE_DTYPES = {8: ("<u1", "<i1"), 16: ("<u2", "<i2"), 32: ("<u4", "<i4"), 64: ("<u8", "<i8")}


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
    complement). Vectorized: byte-aligned lanes are cast into a view of the image, other widths
    go through :func:`numpy.packbits`.

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
    if w in _LANE_DTYPES:
        # Casting to the unsigned lane type keeps the low w bits (modular), as the mask does.
        lanes = words[:, :n * w // 8].view(_LANE_DTYPES[w][0]).reshape(T, G, n)
        lanes[:, :full] = rows[:, :full * n].reshape(T, full, n)
        if rest:
            lanes[:, full, :rest] = rows[:, full * n:]
    else:
        padded = np.zeros((T, G * n), np.int64)
        padded[:, :M] = rows
        lanes = padded.reshape(T * G, n)
        if w == 1:
            bits = (lanes & 1).astype(np.uint8)
        else:
            bits = ((lanes[:, :, None] >> np.arange(w, dtype=np.int64)) & 1).astype(np.uint8)
        packed = np.packbits(bits.reshape(T * G, n * w), axis=1, bitorder="little")
        words[:, :packed.shape[1]] = packed
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
    if w in _LANE_DTYPES:
        lanes = words[:, :n * w // 8].view(_LANE_DTYPES[w][signed and w > 1])
        return lanes.reshape(T, G, n).astype(np.int64).reshape(T, G * n)[:, :M]
    bits = np.unpackbits(words[:, :-(-n * w // 8)], axis=1, count=n * w, bitorder="little")
    if w == 1:
        v = bits.astype(np.int64)
    else:
        v = bits.reshape(T * G, n, w).astype(np.int64) @ (np.int64(1) << np.arange(
            w, dtype=np.int64))
        if signed:
            v -= (v >> (w - 1)) << w
    return v.reshape(T, G * n)[:, :M]
