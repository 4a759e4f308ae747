"""The prioritized replay blocks' specification: the K-ary sum tree's configuration and number
formats, the accelerator's operations, register map, batch-buffer layout, error codes and exact
cycle model, and the Vitis kernel's configuration. Plain Python, no Amaranth: the generators in
:mod:`rtl_gen.replay`, the golden models (:mod:`sw.replay.sumtree`, :mod:`sw.replay.model`), the
golden device and the driver all derive from this module.

Fixed-point scheme
------------------
Priorities are unsigned fixed-point numbers. A leaf holds ``priority_width`` bits with
``priority_frac`` fraction bits. Every level of the tree keeps the *same* number of fraction bits
and gains ``log2(fanout)`` integer bits per level towards the root (CF'22 Sec. 3.1: "integer
bit-width of a level = parent's - log2 K"). A node of level ``l`` (0 = root, ``levels`` = leaves)
is therefore ``priority_width + log2(fanout) * (levels - l)`` bits wide and can hold the sum of
``fanout ** (levels - l)`` leaves at the format maximum: no sum can overflow, and every sum is
exact, so the tree never drifts (each node equals the sum of its children, always).

The published HLS code of CF'22 keeps every level 32 bits wide and moves the binary point instead
(``ap_fixed<32,26>`` root ... ``ap_fixed<32,20>`` leaves for K=4), which drops two fraction bits
per level, so a parent is not the exact sum of its children. We keep the fraction constant and
widen the words instead; for K=4, ``priority_width=32, priority_frac=12`` gives the same integer
bits (26/24/22/20) with 38/36/34/32-bit words.

Sampling targets
----------------
A target fraction ``x`` in [0, 1) is a ``target_bits``-bit unsigned integer ``x_raw``
(``x = x_raw / 2**target_bits``). The target is the integer

    ``t = (x_raw * root) >> target_bits``        (floor; one root_width x target_bits multiply)

so ``0 <= t < root`` whenever ``root > 0``. The sampled leaf is the smallest index ``i`` whose
inclusive prefix sum is *strictly greater* than ``t``; its priority is never zero. During the
descent the remaining target is below the value of the current node, so at level ``l`` it fits
in ``level_widths[l - 1]`` bits. With every priority zero nothing is sampled (no PRNG word is
consumed) and a sticky ``empty`` flag is raised.

On-chip PRNG
------------
32-bit xorshift (Marsaglia 2003) with shifts :data:`XORSHIFT32_SHIFTS` = (13, 17, 5)::

    s ^= (s << 13) & 0xFFFFFFFF;  s ^= s >> 17;  s ^= (s << 5) & 0xFFFFFFFF

Each sample steps the state once and uses the *new* state ``w``: ``x_raw = w >> (32 -
target_bits)``. Loading seed 0 (a fixed point of xorshift) loads :data:`XORSHIFT32_ZERO_SEED`
instead. The period is 2**32 - 1; ``w`` is never 0.
"""

import enum
import functools
from dataclasses import dataclass

import numpy as np

from sw.config import Config, check_int
from sw.fixed import MAX_INTERMEDIATE_BITS, ROUNDING_MODES, FixedFormat
from sw.memmap import MemoryRegion, MemoryWindow
from sw.regmap import Field, Info, Register, RegisterMap
from sw.shell.spec import DmaParams, kernel_register_map

__all__ = ["SumTreeConfig", "XORSHIFT32_SHIFTS", "XORSHIFT32_ZERO_SEED", "PRNG_BITS", "FANOUTS",
           "LIMITS", "check_fanout", "tree_shape", "ReplayOp", "OP_BITS", "REPLAY_ERRORS",
           "ERRORS", "STATUS_FLAGS", "TREE_BUSY_BIT", "REGIONS", "WORD_BYTES", "REGION_DOCS",
           "memory_window", "region_words",
           "region_base", "region_bits", "field_bits", "mem_addr_bits", "responds",
           "replay_register_map", "hw_info_values", "config_from_hw", "TAIL", "run_cycles",
           "response_cycles", "ReplayKernelConfig", "replay_kernel_register_map", "PER_ALPHA",
           "PER_EPS", "td_priorities"]

#: Shift amounts (left, right, left) of the 32-bit xorshift PRNG.
XORSHIFT32_SHIFTS = (13, 17, 5)
#: State loaded when the host writes seed 0 (the all-zero state would never leave zero).
XORSHIFT32_ZERO_SEED = 0x9E3779B9
#: Bits of one PRNG word.
PRNG_BITS = 32

#: Default priority exponent of proportional prioritized replay (Schaul et al. 2016, Table 3).
PER_ALPHA = 0.6
#: Default constant added to ``|TD error|`` so that no transition gets priority 0 (cpprb's eps).
PER_EPS = 1e-4


def td_priorities(td_errors, alpha=PER_ALPHA, eps=PER_EPS):
    """Priorities ``(|delta| + eps) ** alpha`` of TD errors ``delta`` (float64 array); the
    replay driver, the CPU buffer's users and the DQN program share this one definition."""
    return (np.abs(np.asarray(td_errors, np.float64)) + eps) ** alpha


#: Accepted ranges, used for validation, the CLI help and the docs.
LIMITS = {
    "capacity": (1, 1 << 20),
    "priority_width": (2, 56),
    "input_guard_bits": (0, 16),
    "target_bits": (1, PRNG_BITS),
    "max_batch": (1, 1 << 16),
}
FANOUTS = (2, 4, 8, 16, 32, 64)


def check_fanout(fanout):
    """Raise ``ValueError`` unless ``fanout`` is one of :data:`FANOUTS`."""
    if not isinstance(fanout, int) or isinstance(fanout, bool) or fanout not in FANOUTS:
        raise ValueError(f"fanout must be a power of two in 2..64, not {fanout!r}")


def tree_shape(fanout: int, capacity: int):
    """Levels below the root and words per level (root first) of a tree with these parameters.

    ``levels`` is the smallest number >= 1 with ``fanout ** levels >= capacity``. Level ``l``
    uses ``ceil(capacity / fanout**(levels - l))`` nodes and stores ``fanout`` words per node in
    use of its parent level (a full group of children), the root level 1 word. Shared by the
    config (RAM depths) and the golden model (array layout), so the two cannot disagree.

    Returns
    -------
    (levels, depths) : (int, tuple of int)
    """
    levels = 1
    while fanout ** levels < capacity:
        levels += 1
    used = [-(-capacity // fanout ** (levels - l)) for l in range(levels + 1)]
    return levels, (1,) + tuple(fanout * used[l - 1] for l in range(1, levels + 1))


@dataclass(frozen=True)
class SumTreeConfig(Config):
    """Parameters of the K-ary sum tree (RTL ``SumTree*`` blocks, golden model, driver).

    Parameters
    ----------
    fanout : int
        Children per node, K: a power of two, 2..64.
    capacity : int
        Leaves in use, N: 1..2**20. The tree has ``levels`` levels below the root, the smallest
        number with ``fanout ** levels >= capacity`` (at least 1); leaves ``>= capacity`` are
        unused and stay zero.
    priority_width : int
        Bits of a leaf priority (unsigned), 2..56.
    priority_frac : int
        Fraction bits of every level, 0..priority_width-1 (at least one integer bit, so 1.0,
        the reset value of the maximum-priority register, is representable).
    input_guard_bits : int
        Extra integer bits of the priority input of update and insert, 0..16. Inputs are
        ``priority_width + input_guard_bits`` bits wide with ``priority_frac`` fraction bits;
        values above the leaf maximum saturate to it and raise the sticky ``saturated`` flag.
    target_bits : int
        Bits of a target fraction ``x_raw`` (``x = x_raw / 2**target_bits``), 1..32.
    max_batch : int
        Largest sample or update batch, 1..65536 (depth of the sampled-path memo).
    rounding : str
        Rounding used by the host when it converts real priorities to raw inputs (see
        :mod:`sw.fixed`). The tree itself never rounds: its sums are exact.

    Raises
    ------
    ValueError
        If a parameter is out of range or the root word would exceed 62 bits.
    """
    what = "sum tree"

    fanout: int = 16
    capacity: int = 1 << 20
    priority_width: int = 32
    priority_frac: int = 16
    input_guard_bits: int = 8
    target_bits: int = 32
    max_batch: int = 4096
    rounding: str = "half_up"

    def __post_init__(self):
        check_fanout(self.fanout)
        for name, (lo, hi) in LIMITS.items():
            check_int(name, getattr(self, name), lo, hi)
        check_int("priority_frac", self.priority_frac, 0, self.priority_width - 1)
        if self.rounding not in ROUNDING_MODES:
            raise ValueError(f"rounding must be one of {', '.join(ROUNDING_MODES)}, "
                             f"not {self.rounding!r}")
        if self.root_width > MAX_INTERMEDIATE_BITS:
            raise ValueError(
                f"root word of {self.root_width} bits (priority_width {self.priority_width} + "
                f"log2(fanout) {self.log2_fanout} x {self.levels} levels) exceeds "
                f"{MAX_INTERMEDIATE_BITS}; reduce priority_width or capacity")
        if self.input_width > MAX_INTERMEDIATE_BITS:
            raise ValueError(f"priority_width + input_guard_bits must be at most "
                             f"{MAX_INTERMEDIATE_BITS}, not {self.input_width}")

    # -- tree shape -------------------------------------------------------------------------------
    @property
    def log2_fanout(self) -> int:
        return self.fanout.bit_length() - 1

    @property
    def levels(self) -> int:
        """Levels below the root (the leaves are level ``levels``); at least 1."""
        return tree_shape(self.fanout, self.capacity)[0]

    @property
    def level_nodes(self) -> tuple:
        """Nodes in use per level, root first: ``ceil(capacity / fanout**(levels - l))``."""
        return tuple(-(-self.capacity // self.fanout ** (self.levels - l))
                     for l in range(self.levels + 1))

    @property
    def level_depths(self) -> tuple:
        """Words of storage per level, root first: 1 for the root, ``fanout`` times the nodes in
        use of the parent level otherwise, so that every node has a full group of children."""
        return tree_shape(self.fanout, self.capacity)[1]

    @property
    def leaf_slots(self) -> int:
        """Words of the leaf level (``>= capacity``)."""
        return self.level_depths[-1]

    @property
    def index_width(self) -> int:
        """Bits of a leaf index (0..capacity-1)."""
        return max(1, (self.capacity - 1).bit_length())

    @property
    def level_groups(self) -> tuple:
        """Sibling groups per level, root first (``level_depths[l] // fanout``; 1 for the root):
        the depth of level ``l``'s memory in the RTL, whose words are whole groups."""
        return (1,) + tuple(d // self.fanout for d in self.level_depths[1:])

    @property
    def node_index_width(self) -> int:
        """Bits of a node index on any level, padding words included (``0..leaf_slots-1``)."""
        return max(1, (self.leaf_slots - 1).bit_length())

    @property
    def level_select_width(self) -> int:
        """Bits of a level number (``0..levels``)."""
        return max(1, self.levels.bit_length())

    @property
    def batch_width(self) -> int:
        """Bits of a batch count (0..max_batch)."""
        return self.max_batch.bit_length()

    @property
    def prefix_stages(self) -> int:
        """Pipeline stages of a node's prefix sums: one adder level of the ``log2(fanout)``-deep
        parallel prefix network per stage (``max(1, log2(fanout))``: 4 at K = 16)."""
        return max(1, self.log2_fanout)

    @property
    def level_latency(self) -> int:
        """Cycles an operation spends in one level: ``prefix_stages + 5`` (the read, the
        registered group word, the forwarding and read-modify-write, the prefix sums, the
        compare, the selection; 9 at K = 16)."""
        return self.prefix_stages + 5

    @property
    def latency(self) -> int:
        """Cycles from a command's transfer into the tree to its response:
        ``level_latency * levels + 10`` (ten for the input buffer, command, old leaf value
        (three), root, target (two) and response registers; 46 at K = 16 with 4 levels)."""
        return self.level_latency * self.levels + 10

    # -- formats ----------------------------------------------------------------------------------
    @property
    def level_widths(self) -> tuple:
        """Word width per level, root first: ``priority_width + log2(fanout) * (levels - l)``."""
        return tuple(self.priority_width + self.log2_fanout * (self.levels - l)
                     for l in range(self.levels + 1))

    @property
    def level_int_bits(self) -> tuple:
        """Integer bits per level, root first (each is its parent's minus log2(fanout))."""
        return tuple(w - self.priority_frac for w in self.level_widths)

    @property
    def level_formats(self) -> tuple:
        """:class:`~sw.fixed.FixedFormat` of each level, root first (unsigned)."""
        return tuple(FixedFormat(w, self.priority_frac, False, self.rounding)
                     for w in self.level_widths)

    @property
    def root_width(self) -> int:
        return self.priority_width + self.log2_fanout * self.levels

    @property
    def priority_format(self) -> FixedFormat:
        """Format of a leaf (unsigned, ``priority_width`` bits)."""
        return FixedFormat(self.priority_width, self.priority_frac, False, self.rounding)

    @property
    def input_width(self) -> int:
        return self.priority_width + self.input_guard_bits

    @property
    def input_format(self) -> FixedFormat:
        """Format of the priority input of update and insert (saturates to the leaf format)."""
        return FixedFormat(self.input_width, self.priority_frac, False, self.rounding)

    @property
    def target_format(self) -> FixedFormat:
        """Format of a target fraction ``x_raw``: unsigned, all fraction bits, in [0, 1)."""
        return FixedFormat(self.target_bits, self.target_bits, False, "floor")

    @property
    def one_raw(self) -> int:
        """Raw 1.0: the reset value of the maximum-priority register."""
        return 1 << self.priority_frac


# -- the accelerator ------------------------------------------------------------------------------
class ReplayOp(enum.IntEnum):
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
    :func:`run_cycles`). The field OP.CODE is :data:`OP_BITS` wide.
    """
    SAMPLE = 0
    UPDATE = 1
    INSERT = 2
    INSERT_MAX = 3
    READ = 4
    UPDATE_SAMPLE = 5
    RESET = 6
    SEED = 7


#: Bits of OP.CODE (room for more operations than :class:`ReplayOp` has).
OP_BITS = 4

#: STATUS.ERROR codes; a refused run changes nothing (tree, buffers) and ends at once.
REPLAY_ERRORS = {"ok": 0, "op": 1, "batch_size": 2, "update_size": 3}
#: STATUS.ERROR code -> text (the driver's exception messages).
ERRORS = {0: "ok", 1: "unknown operation code", 2: "batch size 0 or above max_batch",
          3: "update size 0 or above max_batch"}
assert set(ERRORS) == set(REPLAY_ERRORS.values())

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
#: What each region holds, entry i for operation i of a run (:func:`memory_window`).
REGION_DOCS = {
    "IDX_IN": "leaf indices of UPDATE and READ (UPDATE_SAMPLE: of its updates)",
    "PRIO_IN": "priorities of UPDATE and INSERT (UPDATE_SAMPLE: of its updates), raw input format",
    "TARGET_IN": "sampling targets of SAMPLE and UPDATE_SAMPLE without OP.PRNG: x = raw / "
                 "2^target_bits in [0, 1)",
    "IDX_OUT": "leaf indices a SAMPLE found, an INSERT wrote or a READ read",
    "PRIO_OUT": "their priorities, raw leaf format",
}


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


def memory_window(config: SumTreeConfig) -> MemoryWindow:
    """The ``s_axi_mem`` window of ``config``: the five batch buffers at :func:`region_base`,
    one element per :data:`WORD_BYTES` word (:class:`~sw.memmap.MemoryWindow`, what the
    register files describe)."""
    _check(config)
    frac = {"IDX_IN": 0, "PRIO_IN": config.input_format.frac,
            "TARGET_IN": config.target_format.frac, "IDX_OUT": 0,
            "PRIO_OUT": config.priority_format.frac}
    regions = tuple(
        MemoryRegion(name, region_base(config, name), region_words(config) * WORD_BYTES,
                     region_words(config), WORD_BYTES, 1, field_bits(config, name), False,
                     frac[name], "rw" if name.endswith("_IN") else "ro", REGION_DOCS[name])
        for name in REGIONS)
    return MemoryWindow(regions, mem_addr_bits(config), doc=(
        f"Entry i of a run is word i of a region: one little-endian {8 * WORD_BYTES}-bit word "
        f"per element, its value in the low bits (a host write keeps those, the rest read 0)."))


def responds(op: ReplayOp) -> bool:
    """The operation writes one output entry per batch element."""
    return op in (ReplayOp.SAMPLE, ReplayOp.INSERT, ReplayOp.INSERT_MAX, ReplayOp.READ,
                  ReplayOp.UPDATE_SAMPLE)


def _info(name, lsb, width, param):
    return Field(name, lsb, width, "ro", info=Info(param))


def replay_register_map(config: SumTreeConfig) -> RegisterMap:
    """ap_ctrl_hs control registers, run arguments, status, results, hardware info."""
    ops = ", ".join(f"{o.value} {o.name}" for o in ReplayOp)
    errors = ", ".join(f"{v} {k}" for k, v in REPLAY_ERRORS.items())
    regs = [
        Register("OP", None, (
            Field("CODE", 0, OP_BITS, "rw", doc=f"operation of the run ({ops})"),
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
        Register.scalar("HW_CAPACITY", 32, "ro", doc=f"leaves N ({config.capacity})",
                        info=Info("capacity")),
        Register("HW_TREE", None, (
            _info("FANOUT", 0, 8, "fanout"), _info("LEVELS", 8, 8, "levels"),
            _info("LATENCY", 16, 8, "latency")), doc="fanout K, levels, tree latency in cycles"),
        Register("HW_FORMAT", None, (
            _info("PRIORITY_WIDTH", 0, 8, "priority_width"),
            _info("PRIORITY_FRAC", 8, 8, "priority_frac"),
            _info("INPUT_GUARD_BITS", 16, 8, "input_guard_bits"),
            _info("TARGET_BITS", 24, 8, "target_bits")),
            doc="number formats"),
        Register.scalar("HW_MAX_BATCH", 32, "ro", doc=f"largest batch ({config.max_batch})",
                        info=Info("max_batch")),
    ]
    return RegisterMap.with_ap_ctrl_hs("replay", regs,
                                       doc="Prioritized replay accelerator (K-ary sum tree)")


def hw_info_values(config: SumTreeConfig) -> dict:
    """The constant HW_* register words of ``config`` (what the hardware reports)."""
    _check(config)
    return replay_register_map(config).info_values(config)


def config_from_hw(params: dict) -> SumTreeConfig:
    """The configuration the HW_* registers describe (:meth:`~sw.regmap.RegisterMap.decode_info`
    output); ``ValueError`` if they describe none (levels and latency must be those of the
    fanout and capacity). The rounding mode is not in the registers (default)."""
    derived = ("levels", "latency")
    cfg = SumTreeConfig(**{k: v for k, v in params.items() if k not in derived})
    for k in derived:
        if k in params and params[k] != getattr(cfg, k):
            raise ValueError(f"{k} {params[k]} does not match fanout {cfg.fanout} and capacity "
                             f"{cfg.capacity} ({getattr(cfg, k)})")
    return cfg


# -- cycles --------------------------------------------------------------------------------------
#: Cycles the engine waits after the last command before it ends a run, so that everything
#: the host reads after AP_DONE (flags, TOTAL, MAX_PRIORITY, SIZE) includes that command.
TAIL = 3


@functools.lru_cache(maxsize=256)
def run_cycles(config: SumTreeConfig, op, batch: int = 1, update_size: int = 1,
               relaxed: bool = False) -> int:
    """Cycles of a run with valid arguments on an idle tree, from the edge that samples
    AP_START to the edge that raises done; the CYCLES register reads one less. Cached per
    arguments: the drivers and golden devices ask once per run.

    Exactly what the RTL takes (asserted by the tests), with ``L`` = :attr:`SumTreeConfig.latency`:
    B samples, inserts or reads ``B + L + 3``; B updates ``B + TAIL + 3`` (posted: the run does
    not wait for them to leave the tree); UPDATE_SAMPLE ``U + B + L + 3``, relaxed
    ``max(B + L + 3, B + U + TAIL + 3)``; RESET the clearing sweep of ``level_groups[-1]``
    cycles after the command; SEED 2.
    """
    op = ReplayOp(op)
    L = config.latency
    if op == ReplayOp.SEED:
        return 2
    if op == ReplayOp.RESET:
        return max(config.level_groups[-1] + 5, TAIL + 4)
    if op == ReplayOp.UPDATE:
        return batch + TAIL + 3
    if op == ReplayOp.UPDATE_SAMPLE:
        if relaxed:
            return max(batch + L + 3, batch + update_size + TAIL + 3)
        return update_size + batch + L + 3
    return batch + L + 3


def response_cycles(config: SumTreeConfig, op, batch: int = 1, update_size: int = 1,
                    relaxed: bool = False) -> int:
    """RESPONSE_CYCLES after a run (start to the last output entry written), 0 for runs
    without output."""
    op = ReplayOp(op)
    if not responds(op):
        return 0
    L = config.latency
    if op == ReplayOp.UPDATE_SAMPLE and not relaxed:
        return update_size + batch + L + 1
    return batch + L + 1


# -- Vitis kernel (DMA shell) --------------------------------------------------------------------
@dataclass(frozen=True)
class ReplayKernelConfig(DmaParams, SumTreeConfig):
    """:class:`SumTreeConfig` and the window shell's parameters (:class:`~sw.shell.spec.DmaParams`:
    ``gmem_data_width``, ``max_burst``, ``max_outstanding``), for the Vitis kernel.
    The window is the five batch buffers, 64-bit words.

    :attr:`accel` is the :class:`SumTreeConfig` part (what the accelerator and driver use).
    """
    what = "replay kernel"
    kernel_name = "replay_kernel"
    kernel_doc = "prioritized replay accelerator as a Vitis kernel (window DMA shell)"
    accel_register_map = staticmethod(replay_register_map)

    @property
    def window_word_bits(self) -> int:
        return 8 * WORD_BYTES

    @property
    def window_bytes(self) -> int:
        return len(REGIONS) * region_words(self) * WORD_BYTES


#: The kernel's control map (:func:`sw.shell.spec.kernel_register_map`).
replay_kernel_register_map = kernel_register_map