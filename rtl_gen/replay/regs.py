"""The replay accelerator's register map and batch-buffer layout: one description for all.

The CSR hardware (:class:`~rtl_gen.axi.lite_csr.AxiLiteCsr`), the JSON map and C header written
next to the Verilog, the README table, the golden device and the host driver all come from
:func:`replay_register_map`, :class:`ReplayOp` and the buffer layout functions below.

Batch buffers (``s_axi_mem``, 64-bit AXI4)
------------------------------------------
Five regions of :func:`region_words` 64-bit words each (element ``i`` of region ``r`` at byte
``(r * region_words + i) * 8``, little endian), in the order of :data:`REGIONS`:

``IDX_IN``     leaf indices of UPDATE and READ (``index_width`` bits used)
``PRIO_IN``    raw priorities of UPDATE and INSERT (``input_width`` bits, ``input_format``)
``TARGET_IN``  target fractions ``x_raw`` of SAMPLE with host targets (``target_bits`` bits)
``IDX_OUT``    one entry per response: sampled leaf, inserted slot or read leaf
``PRIO_OUT``   its raw priority (``priority_width`` bits)

Each region keeps only the low :func:`field_bits` bits of a written word (the rest read 0), so
what the host reads back is what the tree sees: an index above ``capacity - 1`` that survives
the cut is flagged INVALID_INDEX, one that does not is the index it was cut to (the driver
refuses both before writing).
"""

from amaranth.lib import enum

from ..regmap import Field, Register, RegisterMap
from .config import SumTreeConfig

__all__ = ["ReplayOp", "REPLAY_ERRORS", "STATUS_FLAGS", "REGIONS", "WORD_BYTES", "region_words",
           "region_base", "region_bits", "field_bits", "mem_addr_bits", "replay_register_map",
           "hw_info_values", "responds"]


class ReplayOp(enum.Enum, shape=4):
    """Operation of one run (register OP.CODE).

    ===================  =  ==========================================================  ======
    name                 #  what one run does                                           output
    ===================  =  ==========================================================  ======
    ``SAMPLE``           0  BATCH_SIZE samples (targets from TARGET_IN, or the PRNG)    B
    ``UPDATE``           1  BATCH_SIZE updates ``IDX_IN[i] <- PRIO_IN[i]``              0
    ``INSERT``           2  BATCH_SIZE inserts of PRIO_IN[i] (FIFO slots)                B
    ``INSERT_MAX``       3  BATCH_SIZE inserts at the maximum priority                  B
    ``READ``             4  BATCH_SIZE reads of the leaves IDX_IN[i]                    B
    ``UPDATE_SAMPLE``    5  UPDATE_SIZE updates, then BATCH_SIZE samples (fused)        B
    ``RESET``            6  zero the tree, write pointer, size; maximum back to 1.0     0
    ``SEED``             7  load SEED into the on-chip xorshift32                       0
    ===================  =  ==========================================================  ======

    With OP.RELAXED, UPDATE_SAMPLE issues the samples first and the updates after them: the
    samples do not see this run's updates (one batch of priority-update delay, Zhang 2022
    Sec. 4.5), their outputs are complete U cycles earlier, and the run ends up to
    ``latency - 3`` cycles earlier (see
    :meth:`~rtl_gen.replay.accelerator.ReplayAccelerator.run_cycles`).
    """
    SAMPLE = 0
    UPDATE = 1
    INSERT = 2
    INSERT_MAX = 3
    READ = 4
    UPDATE_SAMPLE = 5
    RESET = 6
    SEED = 7


#: STATUS.ERROR codes; a refused run changes nothing (tree, buffers) and ends at once.
REPLAY_ERRORS = {"ok": 0, "op": 1, "batch_size": 2, "update_size": 3}

#: STATUS flag fields: name -> (bit, doc). EMPTY, SATURATED, INVALID_INDEX are cleared when a
#: run starts and sticky during it; START_REFUSED until the next accepted start.
STATUS_FLAGS = {
    "EMPTY": (8, "a sample found every priority zero (its output is index 0, priority 0)"),
    "SATURATED": (9, "an update or insert priority exceeded the leaf format; stored as its max"),
    "INVALID_INDEX": (10, "an update or read addressed a leaf >= capacity; it changed nothing"),
    "START_REFUSED": (11, "AP_START was written while a run was in progress; it was dropped"),
}
#: STATUS bit 12: the tree is busy (operations in its pipeline, or clearing after reset).
TREE_BUSY_BIT = 12

REGIONS = ("IDX_IN", "PRIO_IN", "TARGET_IN", "IDX_OUT", "PRIO_OUT")
#: Bytes per buffer element (the AXI4 data width).
WORD_BYTES = 8


def _check(config):
    if not isinstance(config, SumTreeConfig):
        raise TypeError(f"config must be a SumTreeConfig, not {config!r}")


def region_words(config: SumTreeConfig) -> int:
    """Words per region: ``max_batch`` rounded up to a power of two."""
    _check(config)
    return 1 << (config.max_batch - 1).bit_length()


def region_base(config: SumTreeConfig, name: str) -> int:
    """Byte offset of region ``name`` in ``s_axi_mem``."""
    if name not in REGIONS:
        raise ValueError(f"region must be one of {', '.join(REGIONS)}, not {name!r}")
    return REGIONS.index(name) * region_words(config) * WORD_BYTES


def field_bits(config: SumTreeConfig, name: str) -> int:
    """Bits of the value an element of region ``name`` holds: ``node_index_width`` (indices),
    ``input_width`` (PRIO_IN), ``target_bits``, ``priority_width`` (PRIO_OUT). A host write
    keeps these low bits of the word (the rest read 0)."""
    _check(config)
    if name not in REGIONS:
        raise ValueError(f"region must be one of {', '.join(REGIONS)}, not {name!r}")
    return {"IDX_IN": config.node_index_width, "PRIO_IN": config.input_width,
            "TARGET_IN": config.target_bits, "IDX_OUT": config.node_index_width,
            "PRIO_OUT": config.priority_width}[name]


def region_bits(config: SumTreeConfig, name: str) -> int:
    """Bits of the memory of region ``name``: :func:`field_bits` rounded up to bytes."""
    return -(-field_bits(config, name) // 8) * 8


def mem_addr_bits(config: SumTreeConfig) -> int:
    """Byte address bits of ``s_axi_mem`` (five regions of :func:`region_words` words)."""
    return (len(REGIONS) * region_words(config) * WORD_BYTES - 1).bit_length()


def responds(op: ReplayOp) -> bool:
    """The operation writes one output entry per batch element."""
    return op in (ReplayOp.SAMPLE, ReplayOp.INSERT, ReplayOp.INSERT_MAX, ReplayOp.READ,
                  ReplayOp.UPDATE_SAMPLE)


def hw_info_values(config: SumTreeConfig) -> dict:
    """Constant read-only registers describing the hardware, for the driver to check."""
    _check(config)
    return {
        "HW_CAPACITY": config.capacity,
        "HW_TREE": config.fanout | config.levels << 8 | (3 * config.levels + 6) << 16,
        "HW_FORMAT": (config.priority_width | config.priority_frac << 8
                      | config.input_guard_bits << 16 | config.target_bits << 24),
        "HW_MAX_BATCH": config.max_batch,
    }


def replay_register_map(config: SumTreeConfig) -> RegisterMap:
    """ap_ctrl_hs control registers, run arguments, status, results, hardware info."""
    info = hw_info_values(config)
    ops = ", ".join(f"{o.value} {o.name}" for o in ReplayOp)
    errors = ", ".join(f"{v} {k}" for k, v in REPLAY_ERRORS.items())
    regs = [
        Register("OP", None, (
            Field("CODE", 0, 4, "rw", doc=f"operation of the run ({ops})"),
            Field("PRNG", 8, 1, "rw", doc="SAMPLE, UPDATE_SAMPLE: targets from the on-chip "
                                          "PRNG instead of TARGET_IN"),
            Field("RELAXED", 9, 1, "rw", doc="UPDATE_SAMPLE: sample before updating (the "
                                             "samples do not see this run's updates)"),
        ), doc="operation and mode of the next run"),
        Register.scalar("BATCH_SIZE", 32, "rw",
                        doc=f"B: operations of the run (samples of UPDATE_SAMPLE), "
                            f"1..{config.max_batch}"),
        Register.scalar("UPDATE_SIZE", 32, "rw",
                        doc=f"U: updates of UPDATE_SAMPLE, 1..{config.max_batch}"),
        Register.scalar("SEED", 32, "rw", doc="PRNG seed, loaded by a SEED run (0 loads "
                                              "0x9e3779b9, the reset state)"),
        Register("STATUS", None, (
            Field("ERROR", 0, 2, "ro", doc=f"error of the last start ({errors})"),
            *(Field(name, bit, 1, "ro", doc=doc) for name, (bit, doc) in STATUS_FLAGS.items()),
            Field("TREE_BUSY", TREE_BUSY_BIT, 1, "ro",
                  doc="live: operations in the tree's pipeline, or clearing after a reset"),
        ), doc="result of the last run; flags are sticky during a run, cleared at start"),
        Register.scalar("CYCLES", 32, "ro", doc="cycles of the last run (start to done)"),
        Register.scalar("RESPONSE_CYCLES", 32, "ro",
                        doc="cycles from the start to the last output entry written"),
        Register.scalar("TOTAL_LO", 32, "ro", doc="sum of all priorities (root), bits 31:0"),
        Register.scalar("TOTAL_HI", 32, "ro", doc="root, bits 63:32"),
        Register.scalar("MAX_PRIORITY_LO", 32, "ro",
                        doc="maximum-priority register (INSERT_MAX), bits 31:0"),
        Register.scalar("MAX_PRIORITY_HI", 32, "ro", doc="maximum-priority register, 63:32"),
        Register.scalar("SIZE", 32, "ro", doc="slots inserted, at most the capacity"),
        Register.scalar("WRITE_POINTER", 32, "ro", doc="slot the next insert writes"),
        Register.scalar("HW_CAPACITY", 32, "ro",
                        doc=f"leaves N ({info['HW_CAPACITY']})"),
        Register("HW_TREE", None, (
            Field("FANOUT", 0, 8, "ro"), Field("LEVELS", 8, 8, "ro"),
            Field("LATENCY", 16, 8, "ro")), doc="fanout K, levels, tree latency in cycles"),
        Register("HW_FORMAT", None, (
            Field("PRIORITY_WIDTH", 0, 8, "ro"), Field("PRIORITY_FRAC", 8, 8, "ro"),
            Field("INPUT_GUARD_BITS", 16, 8, "ro"), Field("TARGET_BITS", 24, 8, "ro")),
            doc="number formats"),
        Register.scalar("HW_MAX_BATCH", 32, "ro",
                        doc=f"largest batch ({info['HW_MAX_BATCH']})"),
    ]
    return RegisterMap.with_ap_ctrl_hs("replay", regs,
                                       doc="Prioritized replay accelerator (K-ary sum tree)")
