"""Configuration of the K-ary sum tree, shared by the RTL generator, golden model and driver.

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

from dataclasses import asdict, dataclass

from ..fixed import MAX_INTERMEDIATE_BITS, ROUNDING_MODES, FixedFormat

__all__ = ["SumTreeConfig", "XORSHIFT32_SHIFTS", "XORSHIFT32_ZERO_SEED", "PRNG_BITS", "FANOUTS",
           "tree_shape"]

#: Shift amounts (left, right, left) of the 32-bit xorshift PRNG.
XORSHIFT32_SHIFTS = (13, 17, 5)
#: State loaded when the host writes seed 0 (the all-zero state would never leave zero).
XORSHIFT32_ZERO_SEED = 0x9E3779B9
#: Bits of one PRNG word.
PRNG_BITS = 32

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


def _check_int(name, value, lo, hi):
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise ValueError(f"{name} must be an integer in {lo}..{hi}, not {value!r}")


@dataclass(frozen=True)
class SumTreeConfig:
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
        :mod:`rtl_gen.fixed`). The tree itself never rounds: its sums are exact.

    Raises
    ------
    ValueError
        If a parameter is out of range or the root word would exceed 62 bits.
    """
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
            _check_int(name, getattr(self, name), lo, hi)
        _check_int("priority_frac", self.priority_frac, 0, self.priority_width - 1)
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
        """:class:`~rtl_gen.fixed.FixedFormat` of each level, root first (unsigned)."""
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

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "SumTreeConfig":
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown sum tree parameter(s): {', '.join(sorted(unknown))}")
        return cls(**d)
