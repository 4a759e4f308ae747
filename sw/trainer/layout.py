"""The trainer's storage in device memory: the record ring, the weight load region, the two
snapshot slots and the trace ring, at byte offsets from the base address (``BASE_HI:BASE_LO``),
each region starting on a 4 KiB boundary (AXI bursts never cross one). Plain numpy: the driver
packs with these functions what the golden trainer and the RTL unpack.

Record (one transition), ``lane_bytes`` lanes little-endian, two's complement:
    lanes ``0..n-1`` obs, ``n..2n-1`` next obs (learner act format), lane ``2n`` reward (act
    format), lane ``2n+1`` the action in its low bits and ``done`` in its top bit; padded with
    zeros to :func:`record_bytes`, a power of two.
Weights (load region and snapshot slots)
    each layer's raw ``(n_in + 1) × n_out`` matrix (bias last row) row-major in lanes, the
    layer starting on a storage word.
Snapshot slot ``s % 2`` of sequence number ``s``
    a 64-byte header (word 0: the sequence number, ``SNAPSHOT_BUSY`` while the core writes
    the slot; word 1: STEPS_TOTAL at the snapshot), then the weights. The core writes
    ``SNAPSHOT_BUSY``, the weights, the header, then SNAPSHOT_SEQ: a reader that sees the same
    sequence number in the header before and after reading the weights has a whole snapshot.
Trace entry ``i % trace_depth``, 16 bytes
    STEPS_TOTAL, CONSUMED, ``Σ|Q - y|`` over the period (raw act format, saturating at
    2**32-1) and the samples it sums.
"""

from functools import lru_cache

import numpy as np

from .spec import TrainerConfig

__all__ = ["lane_bytes", "record_lanes", "record_bytes", "weight_offsets", "weight_bytes",
           "regions", "region_base", "storage_bytes", "pack_records", "unpack_records",
           "pack_weights", "unpack_weights", "SNAPSHOT_BUSY", "HEADER_BYTES", "TRACE_BYTES",
           "PAGE"]

#: Region alignment (AXI4 bursts never cross 4 KiB).
PAGE = 4096
#: Snapshot header bytes.
HEADER_BYTES = 64
#: Header word 0 while the core writes the slot.
SNAPSHOT_BUSY = 0xFFFFFFFF
#: Bytes of a trace entry.
TRACE_BYTES = 16


def _align(n, a):
    return -(-n // a) * a


def lane_bytes(config: TrainerConfig) -> int:
    """Bytes of a lane: 2 for learner widths up to 16 bits, else 4."""
    return 2 if config.learner.width <= 16 else 4


def record_lanes(config: TrainerConfig) -> int:
    return 2 * config.learner.sizes[0] + 2


@lru_cache(maxsize=64)
def record_bytes(config: TrainerConfig) -> int:
    """Bytes of one record: the lanes rounded up to a power of two (at least 8)."""
    n = record_lanes(config) * lane_bytes(config)
    return max(8, 1 << (n - 1).bit_length())


@lru_cache(maxsize=64)
def weight_offsets(config: TrainerConfig) -> tuple:
    """Byte offset of each layer inside a weight image."""
    word = config.storage_width // 8
    out, at = [], 0
    for rows, cols in config.learner.numerics.weight_shapes():
        out.append(at)
        at += _align(rows * cols * lane_bytes(config), word)
    return tuple(out)


@lru_cache(maxsize=64)
def weight_bytes(config: TrainerConfig) -> int:
    """Bytes of a weight image (every layer)."""
    word = config.storage_width // 8
    rows, cols = config.learner.numerics.weight_shapes()[-1]
    return weight_offsets(config)[-1] + _align(rows * cols * lane_bytes(config), word)


@lru_cache(maxsize=64)
def regions(config: TrainerConfig) -> dict:
    """Region name -> ``(offset, bytes)``: ``ring``, ``load``, ``snap0``, ``snap1``,
    ``trace`` (a dict shared by the callers: do not change it)."""
    sizes = {"ring": config.capacity * record_bytes(config), "load": weight_bytes(config),
             "snap0": HEADER_BYTES + weight_bytes(config),
             "snap1": HEADER_BYTES + weight_bytes(config),
             "trace": config.trace_depth * TRACE_BYTES}
    out, at = {}, 0
    for name, n in sizes.items():
        out[name] = (at, n)
        at = _align(at + n, PAGE)
    return out


def region_base(config: TrainerConfig, name: str) -> int:
    return regions(config)[name][0]


def storage_bytes(config: TrainerConfig) -> int:
    """Bytes the host allocates for the storage."""
    off, n = regions(config)["trace"]
    return _align(off + n, PAGE)


def _lane_dtype(config):
    return np.dtype("<i2") if lane_bytes(config) == 2 else np.dtype("<i4")


def pack_records(config: TrainerConfig, obs, actions, rewards, next_obs, dones) -> np.ndarray:
    """Raw records (act-format integers, action codes, bools) as ``n × record_bytes`` uint8.

    The caller has checked the ranges (:class:`sw.trainer.driver.TrainerDriver` does)."""
    n_in = config.learner.sizes[0]
    n = len(actions)
    lanes = np.zeros((n, record_bytes(config) // lane_bytes(config)), _lane_dtype(config))
    top = 8 * lane_bytes(config) - 1
    lanes[:, :n_in] = obs
    lanes[:, n_in:2 * n_in] = next_obs
    lanes[:, 2 * n_in] = rewards
    code = np.asarray(actions, np.int64) | (np.asarray(dones, np.int64) << top)
    lanes[:, 2 * n_in + 1] = (code - ((code >> top) << (top + 1))).astype(lanes.dtype)
    return lanes.view(np.uint8).reshape(n, record_bytes(config))


def unpack_records(config: TrainerConfig, raw) -> tuple:
    """``(obs, actions, rewards, next_obs, dones)`` of ``n × record_bytes`` uint8 records."""
    n_in = config.learner.sizes[0]
    lanes = np.ascontiguousarray(raw).view(_lane_dtype(config)).astype(np.int64)
    top = 8 * lane_bytes(config) - 1
    code = lanes[:, 2 * n_in + 1] & ((1 << (top + 1)) - 1)
    return (lanes[:, :n_in], code & ((1 << top) - 1), lanes[:, 2 * n_in],
            lanes[:, n_in:2 * n_in], (code >> top).astype(bool))


def pack_weights(config: TrainerConfig, weights) -> np.ndarray:
    """Raw weight matrices as a weight image (uint8, :func:`weight_bytes`)."""
    out = np.zeros(weight_bytes(config), np.uint8)
    dt = _lane_dtype(config)
    for off, w in zip(weight_offsets(config), weights):
        b = np.ascontiguousarray(np.asarray(w, np.int64).astype(dt)).view(np.uint8).ravel()
        out[off:off + b.size] = b
    return out


def unpack_weights(config: TrainerConfig, image) -> list:
    """The raw weight matrices (int64) of a weight image."""
    image = np.asarray(image, np.uint8)
    dt = _lane_dtype(config)
    out = []
    for off, (rows, cols) in zip(weight_offsets(config),
                                 config.learner.numerics.weight_shapes()):
        n = rows * cols * dt.itemsize
        out.append(image[off:off + n].view(dt).astype(np.int64).reshape(rows, cols))
    return out
