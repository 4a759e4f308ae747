"""Block RAM, LUT RAM and DSP48E2s of a learner as Yosys maps it (plain Python, no Amaranth).

:func:`learner_memories` lists every memory :class:`~rtl_gen.learner.core.LearnerCore` builds
(:func:`buffer_specs`, which the generator's :class:`~rtl_gen.learner.stages.buffers.
LearnerBuffers` instantiates, with the read ports the stages and the host port open on each);
:func:`map_memory` maps one the way ``synth_xilinx -family xcup`` does (Yosys' ``memory_libmap``
with the UltraScale+ library: its cost of every geometry of every RAM, the cheapest kept);
:func:`learner_dsps` counts the DSP48E2s of the tensor units, LOSS and WU;
:func:`learner_resources` sums them. ``scripts/dse_learner.py`` takes its BRAM and DSP terms
from here; ``tb/learner/test_dse.py`` checks them against the generator's memories and the
Yosys counts of the shipped learners.

The mapping rule (Yosys 0.70 ``passes/memory/memory_libmap.cc``; libraries
``techlibs/xilinx/lutrams_xcu.txt`` and ``brams_xc4v.txt`` with ``HAS_SIZE_36``,
``HAS_MIXWIDTH_SDP``; URAM only with ``-uram``, which ``make estimate`` does not pass). Every
buffer has one write port and R synchronous read ports at other addresses, so each RAM cell
serves the write and one read (R copies; a RAMB36E2 in true dual-port mode has no second read
port left), and a geometry of the i-th width ``unit`` of a RAM (block RAM: 1, 2, 4, 9, 18, 36,
72, i.e. 2^i bits with parity) and ``words = 2^(abits - i)`` costs::

    cost = cell_cost · ceil(ceil(D / words) · padded / unit) · R   (block RAM)
         = 16 · ceil(D / words) · W / unit · R                     (LUT RAM, "widthscale")
         + (R · (ceil(D / words) - 1) · W + [D > words] · ceil(D / words) · E) / 2  (muxes)
         + 2 · R                                                   (the same for every RAM)

where W is the word, D the depth, E the write enables and ``padded`` the word with every
write-enable group rounded up to whole bytes of the cell (9 bits for block RAM of width 9 or
more, the width itself for LUT RAM): a host-written region's 8-bit byte enables take 9 bits
each, a GEMM stage's enable group of n lanes (a block row, or the granularity where a unit
writes C < S lanes or two stages write the port) ``ceil(16·n/9)·9``. RAMB18E2 costs 129, RAMB36E2
257, a LUT RAM cell 16 per unit of width; a memory in flip-flops costs ``W·D``. The cheapest
wins (ties to the first in the library's order). Shallow wide words go to LUT RAM (RAM64M8: 7
bits × 64 words, RAM32M16: 14 × 32, 8 LUTs each); 1,024-deep sample buffers of S²·16 bits to
RAMB36E2 36 bits wide, side by side. Other LUT RAM shapes (dual, quad, octal port) cost more
for every read-port count the generator builds (1, 2, dp, 2·dp).

DSPs (``mul2dsp`` with 27 × 18 signed DSP48E2 multipliers; an unsigned operand counts one bit
more): one per tensor-unit cell, three per pipeline in DQN's LOSS (γ·max Q', w·(Q[a] - y),
(Q[a] - y)²) or S squares in MSE's, two per WU lane (G's low 17 bits and its high bits × η),
S lanes per layer. Not counted: products by constants in the sequencers (none where the tile
counts are powers of two, as in every synthesized configuration).
"""

import functools
from dataclasses import dataclass

from .layout import regions
from .schedule import stages, wu_overlaps
from .spec import LearnerConfig

__all__ = ["LearnerMemory", "MemoryMap", "LearnerResources", "buffer_specs",
           "learner_memories", "map_memory", "dsp48e2_per_product", "learner_dsps",
           "learner_resources", "BRAM_BYTE_BITS"]

#: Bits per byte enable of a block RAM (UltraScale+ RAMB18E2/RAMB36E2: 8 data + 1 parity).
BRAM_BYTE_BITS = 9


# -- the generator's memories ----------------------------------------------------------------------
def buffer_specs(config: LearnerConfig) -> dict:
    """The buffers of a learner pipeline, in construction order: key -> (shared, parameters
    of :class:`~rtl_gen.learner.stages.buffers.Buffer` but ``data``).

    Inputs and weights (host-written regions) are shared by the pipelines: key = region name.
    Activations, errors, ReLU masks and gradient scratchpads exist once per pipeline (key
    ``name@d`` with dp > 1), the sample buffers holding the pipeline's share of the batch.
    Buffers written by GEMM stages take writes in groups of the narrowest C of their tensor
    units (a whole block row by default), host-written ones byte enables.
    """
    cfg = config
    S, dp = cfg.array, cfg.dp
    rows_pp = cfg.max_batch if dp == 1 else cfg.pipe_batch
    out = {}

    def add(name, d, **kw):
        key = name if dp == 1 else f"{name}@{d}"
        out[key] = (False, dict(name=key.replace("@", "_p"), **kw))

    cmin = _narrowest_c(cfg)
    for r in regions(cfg):
        row_lanes = S if r.kind == "matrix" else 1
        gran = 8 if r.host_write else min(row_lanes, cmin) * r.lane_bits
        kw = dict(word_bits=r.word_bits(cfg), lane_bits=r.lane_bits, row_lanes=row_lanes,
                  granularity=gran)
        if r.host_write:
            out[r.name] = (True, dict(name=r.name, depth=r.depth(cfg), **kw))
        elif r.name.startswith("grad"):
            for d in range(dp):
                add(r.name, d, depth=r.depth(cfg), **kw)
        else:
            depth = cfg.groups(rows_pp) * r.col_groups(cfg)
            for d in range(dp):
                add(r.name, d, depth=depth, **kw)
    for l in range(cfg.n_layers - 1):      # ReLU masks of the hidden layers (not mapped)
        depth = cfg.groups(rows_pp) * cfg.groups_pow2(cfg.sizes[l + 1])
        for d in range(dp):
            add(f"mask{l}", d, depth=depth, word_bits=S * S, lane_bits=1, row_lanes=S,
                granularity=cmin)
    return out


def _narrowest_c(cfg):
    """The narrowest lane group a stage writes: a tensor unit's C outputs (S by default)."""
    return min([cfg.array] + [x for st in stages(cfg) if st.kind in ("fw", "tfw", "bw", "wa")
                              for x in cfg.stage_array(st.name)])


@dataclass(frozen=True)
class LearnerMemory:
    """One memory of the learner core (a :class:`~rtl_gen.learner.stages.buffers.Buffer`).

    Attributes
    ----------
    key : str
        Buffer key: a region name (``"w0"``), ``"mask<l>"``, ``"<name>@<d>"`` per pipeline.
    name : str
        Hardware name: the core's submodule ``mem_<name>``.
    width, depth : int
        Bits of a word and words (at least 2, as built).
    read_ports, write_ports : int
        Synchronous read ports (the host's is port 0) and write ports (1).
    granularity : int
        Bits per write enable of the write port.
    enable_bits : int
        Bits that always share one write enable in what drives the port (the synthesis tool
        sees no finer groups): 8 for host-written regions, a block row (S lanes) where a single
        writer writes whole rows, else the granularity.
    shared : bool
        Read by every pipeline (inputs and weights).
    """
    key: str
    name: str
    width: int
    depth: int
    read_ports: int
    write_ports: int
    granularity: int
    enable_bits: int
    shared: bool

    @property
    def enable_groups(self) -> int:
        return self.width // self.enable_bits


def _port_users(cfg) -> dict:
    """Buffer key -> [(user, read port index)]: the host on port 0 of every buffer, then each
    stage's reads as :meth:`~rtl_gen.learner.stages.buffers.LearnerBuffers.port` numbers
    them (a shared buffer gives pipeline d role r port ``r·dp + d``)."""
    dp = cfg.dp
    specs = buffer_specs(cfg)
    shared = {k for k, (s, _) in specs.items() if s}
    users = {k: [("host", 0)] for k in specs}

    def key(name, d):
        return name if name in shared or dp == 1 else f"{name}@{d}"

    def role(user, name, d, r):
        users[key(name, d)].append((user, r * dp + d if name in shared else r))

    for st in stages(cfg):
        l, d, k = st.layer, st.pipe, st.kind
        if k in ("fw", "tfw"):
            t = k == "tfw"
            src = ("next_obs" if t else "obs") if l == 0 else (f"th{l - 1}" if t else f"h{l - 1}")
            role(st.name, src, d, 0)
            role(st.name, f"tw{l}" if t else f"w{l}", d, 0)
        elif k == "bw":
            role(st.name, f"delta{l}", d, 0)
            role(st.name, f"w{l}", d, 1)
            role(st.name, f"mask{l - 1}", d, 0)
        elif k == "wa":
            role(st.name, "obs" if l == 0 else f"h{l - 1}", d, 1)
            role(st.name, f"delta{l}", d, 1 if l >= 1 else 0)
            users[key(f"grad{l}", d)].append((st.name, 0))      # read-modify-write
        elif k == "loss":
            for name in (("q", "tq", "samples") if cfg.loss == "dqn" else ("q", "targets")):
                role(st.name, name, d, 0)
        elif k == "wu":
            users[f"w{l}"].append((st.name, 0))
            for p in range(dp):
                users[key(f"grad{l}", p)].append((st.name, 1 if wu_overlaps(cfg) else 0))
    return users


def _enable_lanes(cfg) -> dict:
    """Buffer key -> lanes per write-enable group as synthesis sees them: S (a block row) where
    one writer writes whole rows (its enables are one bit per row, repeated); the port's
    granularity where a writer writes C < S lanes (a lane mask per group) or where several
    writers share the port (the or of their enables is a distinct bit per group: pipeline 0's
    gradient scratchpad, which WA and, with dp > 1, WU's reduction write)."""
    S, dp, L = cfg.array, cfg.dp, cfg.n_layers
    gran = min(S, _narrowest_c(cfg))
    writers = {}

    def write(name, d, c):
        writers.setdefault(name if dp == 1 else f"{name}@{d}", []).append(c)

    for st in stages(cfg):
        l, d, k = st.layer, st.pipe, st.kind
        c = cfg.stage_array(st.name)[1] if k in ("fw", "tfw", "bw", "wa") else S
        if k in ("fw", "tfw"):
            t = k == "tfw"
            last = l == L - 1
            write(("tq" if t else "q") if last else (f"th{l}" if t else f"h{l}"), d, c)
            if not last and not t:
                write(f"mask{l}", d, c)
        elif k == "bw":
            write(f"delta{l - 1}", d, c)
        elif k == "loss":
            write(f"delta{L - 1}", d, S)
        elif k == "wa":
            write(f"grad{l}", d, c)
        elif k == "wu" and dp > 1:                     # the reduced gradient, whole rows
            write(f"grad{l}", 0, S)
    return {key: S if len(cs) == 1 and cs[0] >= S else gran for key, cs in writers.items()}


def _check(config):
    if not isinstance(config, LearnerConfig):
        raise TypeError(f"config must be a LearnerConfig, not {config!r}")


def learner_memories(config: LearnerConfig) -> tuple:
    """Every memory of the learner core for ``config`` (:class:`LearnerMemory`), in the
    generator's order of construction."""
    _check(config)
    return _memories(config)


@functools.lru_cache(maxsize=256)
def _memories(config):
    users = _port_users(config)
    lanes = _enable_lanes(config)
    out = []
    for key, (shared, kw) in buffer_specs(config).items():
        lb = kw["lane_bits"]
        group = 8 if shared else lanes[key] * lb
        out.append(LearnerMemory(
            key=key, name=kw["name"], width=kw["word_bits"], depth=max(kw["depth"], 2),
            read_ports=max(i for _, i in users[key]) + 1, write_ports=1,
            granularity=kw["granularity"], enable_bits=group, shared=shared))
    return tuple(out)


# -- Yosys' memory mapping -------------------------------------------------------------------------
@dataclass(frozen=True)
class _Ram:
    """A RAM of the library: ``cell`` primitive, ``abits`` address bits at width 1 (words at
    width ``widths[i]``: ``2^(abits - i)``), ``cost`` per cell (``widthscale``: per width unit,
    LUT RAM), ``byte`` bits per write enable (0: one enable per cell), read ports per cell."""
    cell: str
    kind: str
    abits: int
    widths: tuple
    cost: int
    widthscale: bool
    byte: int
    reads: int
    bram36: float = 0.0
    luts: int = 0


#: The RAMs ``synth_xilinx -family xcup`` offers a memory with one write port and reads at other
#: addresses, in the library's order (LUT RAM: only the simple dual-port shapes, which cost
#: least for every read-port count the generator builds).
XCUP_RAMS = (
    _Ram("RAM32M16", "lutram", 5, (14,), 16, True, 0, 1, luts=8),
    _Ram("RAM64M8", "lutram", 6, (7,), 16, True, 0, 1, luts=8),
    _Ram("RAMB18E2", "bram", 14, (1, 2, 4, 9, 18), 129, False, BRAM_BYTE_BITS, 1, bram36=0.5),
    _Ram("RAMB36E2", "bram", 15, (1, 2, 4, 9, 18, 36), 257, False, BRAM_BYTE_BITS, 1,
         bram36=1.0),
    _Ram("RAMB18E2", "bram", 14, (1, 2, 4, 9, 18, 36), 129, False, BRAM_BYTE_BITS, 1,
         bram36=0.5),
    _Ram("RAMB36E2", "bram", 15, (1, 2, 4, 9, 18, 36, 72), 257, False, BRAM_BYTE_BITS, 1,
         bram36=1.0),
)
_MODES = ("SDP", "SDP", "TDP", "TDP", "SDP", "SDP")


@dataclass(frozen=True)
class MemoryMap:
    """How Yosys maps one memory: ``cells`` of primitive ``cell`` (``"FF"``: flip-flops, one
    per bit), ``width`` bits wide each, in ``mode`` (SDP/TDP), and the cost that chose it.
    ``bram36``: RAMB36E2 + RAMB18E2 / 2; ``lutram``: LUTs used as memory."""
    cell: str
    mode: str
    width: int
    cells: int
    cost: float
    bram36: float
    lutram: int


def _geometry(ram, mem):
    """The cheapest geometry of ``ram`` for ``mem`` as memory_libmap computes it:
    ``(cost, cells, width)`` (costs truncated where memory_libmap keeps them as integers)."""
    W, D, R, E = mem.width, mem.depth, mem.read_ports, mem.enable_groups
    repl_port = -(-R // ram.reads)
    best = None
    for i, unit in enumerate(ram.widths):
        byte = unit if ram.byte == 0 or ram.byte > unit else ram.byte
        padded = E * (-(-mem.enable_bits // byte) * byte)
        mult_a = -(-D // (1 << (ram.abits - i)))
        repl = -(-(mult_a * padded) // unit)
        cost = (0 if ram.widthscale else ram.cost) * repl * repl_port
        if ram.widthscale:
            cost += ram.cost * mult_a * W / unit * repl_port
        cost += 0.5 * R * (mult_a - 1) * W + 0.5 * (mult_a * E if mult_a != 1 else 0)
        cost += 2 * R                      # one point per read port (every RAM alike)
        if best is None or cost < best[0]:
            best = (int(cost), repl * repl_port, unit, cost)
    return best[3], best[1], best[2]


def map_memory(mem: LearnerMemory) -> MemoryMap:
    """The cells ``synth_xilinx -family xcup`` maps ``mem`` to (module docstring)."""
    logic = mem.width * mem.depth
    kept = {}                                   # kind -> (cost, index, cells, width)
    for idx, ram in enumerate(XCUP_RAMS):
        cost, cells, width = _geometry(ram, mem)
        if ram.kind not in kept or cost < kept[ram.kind][0]:
            kept[ram.kind] = (cost, idx, cells, width)
    best, choice = int(logic), None
    for kind in ("lutram", "bram"):
        cost, idx, cells, width = kept[kind]
        if cost < best:
            best, choice = int(cost), (cost, idx, cells, width)
    if choice is None:
        return MemoryMap("FF", "-", 1, logic, float(logic), 0.0, 0)
    cost, idx, cells, width = choice
    ram = XCUP_RAMS[idx]
    return MemoryMap(ram.cell, _MODES[idx], width, cells, cost, ram.bram36 * cells,
                     ram.luts * cells)


# -- DSP48E2 ---------------------------------------------------------------------------------------
def dsp48e2_per_product(a_bits: int, b_bits: int) -> int:
    """DSP48E2s of a product of two signed operands (an unsigned operand counts one bit more)
    under Yosys' ``mul2dsp`` for xcup: none below 2 bits an operand or 9 bits of product (left
    to LUTs), one up to 27 × 18, else 17-bit pieces of each operand over 27 (resp. 18) bits."""
    a, b = max(a_bits, b_bits), min(a_bits, b_bits)
    if b < 2 or a + b < 9:
        return 0
    if a <= 27 and b <= 18:
        return 1
    na = 1 if a <= 27 else -(-(a - 1) // 17)
    nb = 1 if b <= 18 else -(-(b - 1) // 17)
    return na * nb


def learner_dsps(config: LearnerConfig) -> dict:
    """DSP48E2s by part: ``tensor_units`` (one per cell of every GEMM stage's R × C unit),
    ``loss`` and ``wu`` (see the module docstring), and ``total``."""
    _check(config)
    cfg = config
    num = cfg.numerics
    S, w, aw = cfg.array, num.width, num.acc_width
    tu = loss = 0
    for st in stages(cfg):
        if st.kind in ("fw", "tfw", "bw", "wa"):
            unit = cfg.stage_tensor_unit(st.name)
            tu += unit.rows * unit.cols * dsp48e2_per_product(unit.in_width, unit.in_width)
        elif st.kind == "loss" and cfg.loss == "dqn":
            loss += (dsp48e2_per_product(w, num.coef_width + 1)                 # γ·max Q'
                     + dsp48e2_per_product(w + 1, num.loss_weight_format.width + 1)  # w·diff
                     + dsp48e2_per_product(w + 1, w + 1))                       # diff²
        elif st.kind == "loss":
            loss += S * dsp48e2_per_product(w + 2, w + 2)                       # (Q - Y)²
    lo = min(17, aw - 1)
    wu = cfg.n_layers * S * (dsp48e2_per_product(lo + 1, num.lr_width + 1)
                             + dsp48e2_per_product(aw - lo, num.lr_width + 1))
    return {"tensor_units": tu, "loss": loss, "wu": wu, "total": tu + loss + wu}


# -- totals ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LearnerResources:
    """Modelled resources of a learner core: ``memories`` as ``(LearnerMemory, MemoryMap)``,
    ``bram36`` (RAMB36E2 + RAMB18E2 / 2), ``ramb36``, ``ramb18``, ``lutram`` (LUTs as memory),
    ``dsp`` and ``dsps`` (by part, :func:`learner_dsps`). URAM: 0 (Yosys maps none without
    ``-uram``)."""
    memories: tuple
    bram36: float
    ramb36: int
    ramb18: int
    lutram: int
    dsp: int
    dsps: dict


def learner_resources(config: LearnerConfig) -> LearnerResources:
    """Block RAM, LUT RAM and DSPs of the learner core for ``config``, as Yosys maps them.

    Raises
    ------
    TypeError
        If ``config`` is not a :class:`~sw.learner.spec.LearnerConfig`.
    """
    _check(config)
    return _resources(config)


@functools.lru_cache(maxsize=256)
def _resources(config):
    mems = tuple((m, map_memory(m)) for m in learner_memories(config))
    dsps = learner_dsps(config)
    return LearnerResources(
        memories=mems, bram36=sum(mp.bram36 for _, mp in mems),
        ramb36=sum(mp.cells for _, mp in mems if mp.cell == "RAMB36E2"),
        ramb18=sum(mp.cells for _, mp in mems if mp.cell == "RAMB18E2"),
        lutram=sum(mp.lutram for _, mp in mems), dsp=dsps["total"], dsps=dsps)
