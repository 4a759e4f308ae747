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

The fields of a record, a snapshot header and a trace entry are :func:`record_fields`,
:func:`header_fields` and :func:`trace_fields` (lanes and bits, :class:`~sw.memmap.LaneField`):
the packing functions below place the values with them, and :func:`memory_window` describes
the storage with them for the register files (``<module>_regs.md``, ``.json``, the C header's
``<MODULE>_MEM_*`` macros), so that a C host lays out the same bytes.
"""

from functools import lru_cache

import numpy as np

from sw.memmap import LaneField, MemoryRegion, MemoryWindow

from .spec import COUNT_BITS, TRAINER_ARGS, TrainerConfig

__all__ = ["lane_bytes", "word_bytes", "record_fields", "record_lanes", "record_bytes",
           "weight_offsets", "weight_bytes", "regions", "region_base", "storage_bytes",
           "pack_records", "unpack_records", "pack_weights", "unpack_weights", "header_fields",
           "pack_header", "unpack_header", "trace_fields", "pack_trace", "unpack_trace",
           "memory_window", "SNAPSHOT_BUSY", "HEADER_BYTES", "TRACE_BYTES", "PAGE"]

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


def word_bytes(config: TrainerConfig) -> int:
    """Bytes of a storage word, the AXI4 master's ``storage_width`` bits (a weight layer
    starts on one)."""
    return config.storage_width // 8


@lru_cache(maxsize=64)
def record_fields(config: TrainerConfig) -> tuple:
    """The fields of a record in lane order (:class:`~sw.memmap.LaneField`, each in some
    lanes only, :func:`lane_bytes` lanes): ``obs`` in lanes ``0..n-1``, ``next_obs`` in
    ``n..2n-1``, ``reward`` in ``2n`` (act format, sign-extended to the lane), ``action`` in
    the low bits of lane ``2n+1`` and ``done`` in its top bit. What :func:`pack_records`
    writes and :func:`unpack_records` reads."""
    n = config.learner.sizes[0]
    L = 8 * lane_bytes(config)
    act = config.learner.numerics.act_format
    return (LaneField("obs", 0, L, True, act.frac, "observation s, element i in lane i "
                      "(act format)", lane=0, lanes=n),
            LaneField("next_obs", 0, L, True, act.frac, f"next observation s', element i in "
                      f"lane {n} + i (act format)", lane=n, lanes=n),
            LaneField("reward", 0, L, True, act.frac, "reward r (act format)", lane=2 * n),
            LaneField("action", 0, L - 1, doc=f"action a, 0..{config.learner.n_out - 1}",
                      lane=2 * n + 1),
            LaneField("done", L - 1, 1, doc="episode ended at s' (no bootstrap from it)",
                      lane=2 * n + 1))


def record_lanes(config: TrainerConfig) -> int:
    """Lanes of a record that hold its fields (the rest, up to :func:`record_bytes`, zero)."""
    return max(f.lane + f.lanes for f in record_fields(config))


@lru_cache(maxsize=64)
def record_bytes(config: TrainerConfig) -> int:
    """Bytes of one record: the lanes rounded up to a power of two (at least 8)."""
    n = record_lanes(config) * lane_bytes(config)
    return max(8, 1 << (n - 1).bit_length())


@lru_cache(maxsize=64)
def weight_offsets(config: TrainerConfig) -> tuple:
    """Byte offset of each layer inside a weight image."""
    word = word_bytes(config)
    out, at = [], 0
    for rows, cols in config.learner.numerics.weight_shapes():
        out.append(at)
        at += _align(rows * cols * lane_bytes(config), word)
    return tuple(out)


@lru_cache(maxsize=64)
def weight_bytes(config: TrainerConfig) -> int:
    """Bytes of a weight image (every layer)."""
    word = word_bytes(config)
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


def _pack_fields(fields, values, n, lanes, lane_bits) -> np.ndarray:
    """``n × lanes`` unsigned little-endian lanes of ``lane_bits`` with every field's values
    (``values[name]``: n values, or ``n × f.lanes``) in its lanes and bits, zero elsewhere."""
    out = np.zeros((n, lanes), np.int64)
    for f in fields:
        v = np.reshape(np.asarray(values[f.name], np.int64), (n, f.lanes))
        out[:, f.lane:f.lane + f.lanes] |= (v & ((1 << f.width) - 1)) << f.lsb
    return out.astype(f"<u{lane_bits // 8}")


def _unpack_fields(fields, raw, lane_bits) -> dict:
    """Name -> ``n × f.lanes`` int64 values of the fields of ``n × bytes`` uint8 ``raw``."""
    raw = np.ascontiguousarray(raw, np.uint8)
    lanes = raw.view(f"<u{lane_bits // 8}").reshape(raw.shape[0], -1).astype(np.int64)
    out = {}
    for f in fields:
        v = lanes[:, f.lane:f.lane + f.lanes] >> f.lsb & ((1 << f.width) - 1)
        out[f.name] = v - ((v >> (f.width - 1)) << f.width) if f.signed else v
    return out


def pack_records(config: TrainerConfig, obs, actions, rewards, next_obs, dones) -> np.ndarray:
    """Raw records (act-format integers, action codes, bools) as ``n × record_bytes`` uint8,
    each value where :func:`record_fields` puts it.

    The caller has checked the ranges (:class:`sw.trainer.driver.TrainerDriver` does)."""
    n = len(actions)
    values = {"obs": obs, "next_obs": next_obs, "reward": rewards, "action": actions,
              "done": dones}
    lanes = _pack_fields(record_fields(config), values, n,
                         record_bytes(config) // lane_bytes(config), 8 * lane_bytes(config))
    return lanes.view(np.uint8).reshape(n, record_bytes(config))


def unpack_records(config: TrainerConfig, raw) -> tuple:
    """``(obs, actions, rewards, next_obs, dones)`` of ``n × record_bytes`` uint8 records."""
    v = _unpack_fields(record_fields(config), raw, 8 * lane_bytes(config))
    return (v["obs"], v["action"][:, 0], v["reward"][:, 0], v["next_obs"],
            v["done"][:, 0].astype(bool))


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


# -- snapshot header and trace entry -------------------------------------------------------------
def header_fields() -> tuple:
    """The fields of a snapshot header (:class:`~sw.memmap.LaneField`, one
    :data:`~sw.trainer.spec.COUNT_BITS` lane each; the rest of its :data:`HEADER_BYTES` zero):
    ``seq`` in lane 0, ``steps_total`` in lane 1."""
    return (LaneField("seq", 0, COUNT_BITS, doc=f"sequence number s of the snapshot; "
                      f"0x{SNAPSHOT_BUSY:X} (SNAPSHOT_BUSY) while the core writes the slot",
                      lane=0),
            LaneField("steps_total", 0, COUNT_BITS, doc="STEPS_TOTAL at the snapshot", lane=1))


def pack_header(seq: int, steps_total: int) -> np.ndarray:
    """A snapshot header (:data:`HEADER_BYTES` uint8)."""
    lanes = _pack_fields(header_fields(), {"seq": seq, "steps_total": steps_total}, 1,
                         HEADER_BYTES * 8 // COUNT_BITS, COUNT_BITS)
    return lanes.view(np.uint8).ravel()


def unpack_header(raw) -> dict:
    """``{"seq": s, "steps_total": n}`` of a snapshot header's bytes (:data:`HEADER_BYTES`)."""
    raw = np.frombuffer(bytes(raw), np.uint8)[None, :HEADER_BYTES]
    return {k: int(v[0, 0]) for k, v in _unpack_fields(header_fields(), raw, COUNT_BITS).items()}


@lru_cache(maxsize=64)
def trace_fields(config: TrainerConfig) -> tuple:
    """The fields of a trace entry (:class:`~sw.memmap.LaneField`, one
    :data:`~sw.trainer.spec.COUNT_BITS` lane each, :data:`TRACE_BYTES` in all):
    ``steps_total``, ``consumed``, ``abs_td_sum`` (raw act format, unsigned), ``samples``."""
    act = config.learner.numerics.act_format
    return (LaneField("steps_total", 0, COUNT_BITS, doc="STEPS_TOTAL at the entry", lane=0),
            LaneField("consumed", 0, COUNT_BITS, doc="CONSUMED at the entry", lane=1),
            LaneField("abs_td_sum", 0, COUNT_BITS, False, act.frac,
                      f"sum of |Q - y| over the period (act format, saturating at "
                      f"2**{COUNT_BITS}-1)", lane=2),
            LaneField("samples", 0, COUNT_BITS, doc="samples abs_td_sum adds up", lane=3))


def pack_trace(config: TrainerConfig, steps_total, consumed, abs_td_sum, samples) -> np.ndarray:
    """Trace entries (``n × TRACE_BYTES`` uint8) of n values each (or one entry of ints)."""
    values = {"steps_total": steps_total, "consumed": consumed, "abs_td_sum": abs_td_sum,
              "samples": samples}
    n = np.size(steps_total)
    lanes = _pack_fields(trace_fields(config), values, n, TRACE_BYTES * 8 // COUNT_BITS,
                         COUNT_BITS)
    return lanes.view(np.uint8).reshape(n, TRACE_BYTES)


def unpack_trace(config: TrainerConfig, raw) -> dict:
    """Name of a :func:`trace_fields` field -> int64 values of ``raw``, whole trace entries
    (``TRACE_BYTES`` each)."""
    raw = np.frombuffer(bytes(raw), np.uint8).reshape(-1, TRACE_BYTES)
    return {k: v[:, 0] for k, v in _unpack_fields(trace_fields(config), raw, COUNT_BITS).items()}


# -- the storage as the register files describe it ------------------------------------------------
def memory_window(config: TrainerConfig) -> MemoryWindow:
    """The storage at ``BASE_HI:BASE_LO`` (:class:`~sw.memmap.MemoryWindow`, port ``"BASE"``,
    :func:`storage_bytes` long): the regions of :func:`regions` at :func:`region_base`, a
    weight image's layers (:func:`weight_offsets`) and a snapshot's header as regions of their
    own, the fields of :func:`record_fields`, :func:`header_fields` and :func:`trace_fields`.
    What the register files of a trainer describe."""
    L, word = 8 * lane_bytes(config), word_bytes(config)
    num = config.learner.numerics
    shapes = num.weight_shapes()
    ring, trace = regions(config)["ring"], regions(config)["trace"]
    out = [MemoryRegion("ring", ring[0], ring[1], config.capacity, record_bytes(config),
                        record_lanes(config), L, True, None, "rw",
                        f"record of slot s (transition count mod {config.capacity}): the host "
                        f"writes the append window's slots from CONSUMED on, then PRODUCER",
                        record_fields(config))]

    def weights(prefix, base, access, what):
        ends = weight_offsets(config)[1:] + (weight_bytes(config),)
        for l, (off, end, (rows, cols)) in enumerate(zip(weight_offsets(config), ends, shapes)):
            out.append(MemoryRegion(
                f"{prefix}_w{l}", base + off, end - off, (end - off) // word, word, word * 8 // L,
                L, True, num.weight_format.frac, access,
                f"{what} layer {l}, {rows} x {cols} (bias in the last row) row-major: element "
                f"(i, j) is lane k mod {word * 8 // L} of word k div {word * 8 // L}, "
                f"k = i*{cols} + j"))

    weights("load", region_base(config, "load"), "rw", "weights LOAD copies into the network "
            "and its target:")
    for slot in ("snap0", "snap1"):
        base = region_base(config, slot)
        out.append(MemoryRegion(
            f"{slot}_header", base, HEADER_BYTES, 1, HEADER_BYTES, len(header_fields()),
            COUNT_BITS, False, None, "ro",
            f"header of snapshot slot {slot[-1]} (sequence numbers s with s mod 2 = "
            f"{slot[-1]}): the core writes seq = SNAPSHOT_BUSY, the weights, the header, then "
            f"SNAPSHOT_SEQ; the same seq before and after reading the weights is a whole "
            f"snapshot", header_fields()))
        weights(slot, base + HEADER_BYTES, "ro", f"snapshot slot {slot[-1]}:")
    out.append(MemoryRegion("trace", trace[0], trace[1], config.trace_depth, TRACE_BYTES,
                            len(trace_fields(config)), COUNT_BITS, False, None, "ro",
                            f"trace entry i mod {config.trace_depth} (TRACE_COUNT entries "
                            f"written), one every TRACE_PERIOD steps", trace_fields(config)))
    base_bits = TRAINER_ARGS["BASE_LO"][0] + TRAINER_ARGS["BASE_HI"][0]
    return MemoryWindow(tuple(out), base_bits, port="BASE", span=storage_bytes(config), doc=(
        f"Byte offsets from the {base_bits}-bit address in BASE_HI:BASE_LO ({PAGE}-byte "
        f"aligned, or a start ends with STATUS.ERROR base), MEM_BYTES of host memory: the ring, "
        f"the load region, each snapshot slot and the trace start on a {PAGE}-byte page, a "
        f"layer of a weight image on a {word}-byte storage word. A word is its lanes little end "
        f"first (lane p at bits p*LANE_BITS, two's complement where signed), then zeros up to "
        f"WORD_BYTES."))
