"""The trainer's cycle models (pure Python): the blocks' commands, the sequential core that is
built, and the overlapped design that is not.

*The blocks* (each asserted against its gateware in ``tb/trainer/``): the replay side's
commands (:func:`clear_cycles`, :func:`boundary_cycles`, :func:`sample_cycles`,
:func:`td_cycles`, :func:`read_cycles` of :class:`rtl_gen.trainer.replay.TrainerReplay`), the
gather engine (:func:`gather_cycles`) and the learner adapter (:func:`adapter_pack_cycles`,
:func:`adapter_readback_cycles`).

*The sequential core* (:class:`rtl_gen.trainer.core.TrainerCore`, what CYCLES reads and the
golden device counts): :func:`sequential_step_cycles` per step, the replay side then the
learner side, and :func:`sequential_launch_cycles` per launch with CLEAR, LOAD, snapshots and
trace entries.

*The overlapped design* (not built; the benchmark notes its figures): a step's replay side
(:func:`replay_cycles`: the boundary, B stratified samples with their IS weights, the gather)
runs during the previous step's learner side (:func:`learner_cycles`: the learner step and the
TD errors' priorities), so with ``delay`` >= 1 a step costs the longer of the two plus
:data:`HANDOFF` (:func:`step_cycles`; the first step of a launch, and every step at ``delay``
0, both), and :func:`launch_cycles` adds CLEAR, LOAD and one storage word per cycle for each
snapshot.

The memory's read latency is an argument (``read_latency``), not a property of the core: the
models assume the storage answers every read burst after that many cycles and never stalls a
beat, which is what the RTL's cycle counter matches when the memory keeps to it.
"""

from functools import lru_cache

from sw.learner.schedule import step_cycles as learner_step_cycles

from .layout import record_bytes, weight_bytes
from sw.powers import EXP2_LATENCY, LOG2_LATENCY, POWER_LATENCY, SCALE_LATENCY, table_stages
from .spec import TrainerConfig

__all__ = ["HANDOFF", "POWER_TABLES", "TD_POWER_LATENCY", "READ_LATENCY", "SETTLE", "FRACTION_LATENCY",
           "WEIGHTS_TAIL", "clear_cycles", "boundary_cycles", "sample_cycles", "td_cycles",
           "read_cycles", "gather_cycles", "replay_cycles", "learner_cycles",
           "step_cycles", "snapshot_cycles", "launch_cycles", "adapter_pack_cycles",
           "adapter_row_chunks", "adapter_row_cycles", "adapter_row_elements",
           "adapter_readback_reads", "adapter_max_levels",
           "HOST_OUT_STAGES", "ADAPTER_READBACK_STAGES", "IO_START", "adapter_readback_cycles",
           "adapter_cycles", "sequential_load_cycles", "sequential_snapshot_cycles",
           "sequential_trace_cycles", "sequential_step_cycles", "sequential_launch_cycles",
           "burst_split"]

#: Cycles between two steps in which the batch buffers change hands.
HANDOFF = 4
#: Default read latency of the storage (cycles from a read burst's address to its first beat):
#: a DDR4 controller behind an AXI interconnect at 300 MHz.
READ_LATENCY = 64


def _beats(nbytes, config):
    return -(-nbytes // (config.storage_width // 8))


#: Where the trainer's power units (the IS weights' log2 and exp2, the TD engine's
#: :class:`~rtl_gen.powers.PowerUnit`) keep their tables: block RAM, each followed by a
#: register (:func:`sw.powers.table_stages`), so no LUT table sets the clock.
POWER_TABLES = "block"
#: Cycles of the TD engine's power unit, from a ``u`` to its priority.
TD_POWER_LATENCY = POWER_LATENCY + 2 * table_stages(POWER_TABLES)

#: Cycles a BOUNDARY waits after its last tree write, so that the tree's ``total`` holds it:
#: the tree's input buffer, command register, the three old-value stages and the root stage.
SETTLE = 7
#: Cycles from a sample's PRNG draw to its stratified fraction: the word, the partial
#: products, their sum, the stratum's base added
#: (:class:`rtl_gen.trainer.strata.StratifiedFractions`).
FRACTION_LATENCY = 4
#: Cycles from a batch's last priority to its first IS weight: the logarithm, the memory
#: write, the read, the difference to the minimum, the scaling and exp2
#: (:class:`rtl_gen.trainer.weights.ISWeightUnit`).
WEIGHTS_TAIL = (LOG2_LATENCY + 3 + SCALE_LATENCY + EXP2_LATENCY
                + 2 * table_stages(POWER_TABLES))


# -- the replay side's commands (rtl_gen.trainer.replay.TrainerReplay), no back-pressure ----
def clear_cycles(config: TrainerConfig) -> int:
    """Cycles of CLEAR on an idle tree, no TD batch open: ``level_groups[-1] + 6``."""
    return config.tree.level_groups[-1] + 6


def boundary_cycles(config: TrainerConfig, writeback: int, inserts: int) -> int:
    """Cycles of BOUNDARY writing back a batch of ``writeback`` entries (0: none due) and
    taking ``inserts`` records: ``writeback + 2 (if any) + 2·inserts + SETTLE + 3`` (the
    queue's block RAM and one register stage after it)."""
    return (writeback + 2 if writeback else 0) + 2 * inserts + SETTLE + 3


def sample_cycles(config: TrainerConfig, batch: int, divide: bool = True,
                  empty: bool = False) -> int:
    """Cycles of SAMPLE of ``batch`` samples with their IS weights (``divide``: B differs
    from the previous SAMPLE's, so the stratum width is divided anew): ``2·B + X·divide + L +
    22`` (X target bits, L the tree's latency); from an empty tree ``B + X·divide + 7``."""
    t = config.tree
    d = t.target_bits if divide else 0
    if empty:
        return batch + d + FRACTION_LATENCY + 3
    return 2 * batch + d + t.latency + FRACTION_LATENCY + WEIGHTS_TAIL + 2


def td_cycles(config: TrainerConfig, batch: int) -> int:
    """Cycles from a TD command to its ``td_done``, the TD errors offered from the command on:
    ``B + TD_POWER_LATENCY + 4`` (|td| and u registered before the power unit)."""
    return batch + TD_POWER_LATENCY + 4


def read_cycles(config: TrainerConfig, count: int) -> int:
    """Cycles of READ of ``count`` leaves: ``count + L + 2`` (2 for none)."""
    return count + config.tree.latency + 2 if count else 2


def gather_cycles(beats: int, outstanding: int, batch: int, read_latency: int) -> int:
    """Cycles of the gather engine (:class:`rtl_gen.trainer.gather.RecordGather`) from the
    first of ``batch`` slots to the last record, ``beats`` storage words per record, at most
    ``outstanding`` bursts in flight, a memory answering after ``read_latency`` cycles and
    never stalling: one record takes ``L + b + 1`` cycles; with ``(O - 1)·b >= L + 1`` the
    bursts cover the round trip and ``B`` records take ``B·b + L + 1``."""
    b, L, O, n = beats, read_latency, outstanding, batch - 1
    return L + 1 + b + max(n * b, n // O * (L + b + 1) + n % O * b)


def replay_cycles(config: TrainerConfig, batch: int, inserts: int = 0, *, writeback=True,
                  read_latency: int = READ_LATENCY) -> int:
    """Cycles of a step's replay side (the module docstring)."""
    gather = gather_cycles(_beats(record_bytes(config), config), config.gather_outstanding,
                           batch, read_latency)
    return (boundary_cycles(config, batch if writeback else 0, inserts)
            + sample_cycles(config, batch, divide=False) + gather)


def learner_cycles(config: TrainerConfig, batch: int) -> int:
    """Cycles of a step's learner side: the learner step and the last priority."""
    return learner_step_cycles(config.learner, batch) + td_cycles(config, batch)


@lru_cache(maxsize=1024)
def step_cycles(config: TrainerConfig, batch: int, inserts: int = 0, *, first=False,
                writeback=True, read_latency: int = READ_LATENCY) -> int:
    """Cycles of one step in a launch (``first``: the launch's first step, nothing to overlap
    with; ``inserts``: records taken at its boundary)."""
    rep = replay_cycles(config, batch, inserts, writeback=writeback, read_latency=read_latency)
    lrn = learner_cycles(config, batch)
    if config.delay == 0 or first:
        return rep + lrn + HANDOFF
    return max(rep, lrn) + HANDOFF


def snapshot_cycles(config: TrainerConfig) -> int:
    """Cycles of a weight snapshot: the header twice and the weight image, one storage word
    per cycle."""
    return _beats(weight_bytes(config), config) + 2


@lru_cache(maxsize=1024)
def launch_cycles(config: TrainerConfig, steps: int, batch: int, *, inserts_per_step=0,
                  clear=False, load=False, snapshot_period=0,
                  read_latency: int = READ_LATENCY) -> int:
    """Cycles of a launch of ``steps`` steps with ``inserts_per_step`` records taken at each
    boundary (the steady state: every write-back due), its snapshots included (every
    ``snapshot_period`` steps, and at the end unless the last step wrote one)."""
    total = 1
    if clear:
        total += sum(config.tree.level_groups)
    if load:
        total += read_latency + _beats(weight_bytes(config), config)
    if not steps:
        return total
    kw = dict(read_latency=read_latency)
    total += step_cycles(config, batch, inserts_per_step, first=True, **kw)
    total += (steps - 1) * step_cycles(config, batch, inserts_per_step, **kw)
    snaps = steps // snapshot_period if snapshot_period else 0
    if not (snapshot_period and steps % snapshot_period == 0):
        snaps += 1                                  # the end of the launch
    return total + snaps * snapshot_cycles(config)


# -- the sequential core (rtl_gen.trainer.learner_adapter.LearnerAdapter), no back-pressure --
def adapter_row_chunks(config: TrainerConfig) -> int:
    """Host words an ``obs`` (or ``next_obs``) row of the learner takes: ``ceil(n_in / E)``
    (:func:`adapter_row_elements`: a block row of the region holds S lanes of w bits, a host
    word D bits)."""
    return -(-config.learner.sizes[0] // adapter_row_elements(config))


def adapter_row_cycles(config: TrainerConfig) -> int:
    """Cycles the adapter spends on a row: its ``obs`` and ``next_obs`` host words, one write
    per cycle (``2·c``, :func:`adapter_row_chunks`), at least the storage beats of a record
    (``b``: never faster than the gather delivers records; samples come every 2 cycles and
    ``2·c >= 2``)."""
    return max(2 * adapter_row_chunks(config), _beats(record_bytes(config), config))


def adapter_pack_cycles(config: TrainerConfig, batch: int) -> int:
    """Cycles of :class:`~rtl_gen.trainer.learner_adapter.LearnerAdapter` from a command's
    transfer to the learner's start, the records and weights offered from the transfer on:
    ``4 + HOST_OUT_STAGES + P·Bp + g·(S + sub)`` (a record into the adapter's record memory,
    its row loaded the cycle after; the last write out of the host port's output register
    before the start) with ``P`` = :func:`adapter_row_cycles`,
    ``g = ceil(B / S)`` row groups, ``Bp = g·S`` rows (padding rows as zeros) and ``sub``
    host words per ``samples`` word (S cycles to assemble its lanes)."""
    from sw.learner.layout import region, sub_words
    lc = config.learner
    S = lc.array
    g = -(-int(batch) // S)
    sub = sub_words(lc, region(lc, "samples"))
    return 4 + HOST_OUT_STAGES + adapter_row_cycles(config) * g * S + g * (S + sub)


#: Register stages on the learner host port outputs of the adapter and of the storage
#: traffic (:func:`rtl_gen.trainer.learner_adapter.registered_host`): their reads return
#: ``HOST_READ_LATENCY + HOST_OUT_STAGES`` cycles after they are issued.
HOST_OUT_STAGES = 1

#: Register stages of the adapter's read-back beyond the host port's read latency: the
#: element out of its word; max tq and r; γ·max tq; its rounding; + r; the saturation's
#: range checks (then ``Q[a] - y`` into the TD memory); the TD output register.
ADAPTER_READBACK_STAGES = 7


def adapter_row_elements(config: TrainerConfig) -> int:
    """Elements of a learner row in one host word: ``E = min(S, D / w)``."""
    lc = config.learner
    return min(lc.array, lc.axi_data_width // lc.numerics.width)


def adapter_readback_reads(config: TrainerConfig) -> int:
    """Host reads per sample of the read-back: ``ceil(n_out / E)`` words of its ``tq`` row
    (:func:`adapter_row_elements`), then the word of ``Q[a]``."""
    return -(-config.learner.n_out // adapter_row_elements(config)) + 1


def adapter_max_levels(config: TrainerConfig) -> int:
    """Register stages of the maximum over a ``tq`` word's lanes:
    ``ceil(log2(min(n_out, E)))``."""
    return (min(config.learner.n_out, adapter_row_elements(config)) - 1).bit_length()


def adapter_readback_cycles(config: TrainerConfig, batch: int) -> int:
    """Cycles of the adapter from the learner's ``done`` to its own ``done`` with ``td``
    always ready: ``B·r`` host reads (:func:`adapter_readback_reads`: the words of a sample's
    ``tq`` row and of its ``Q[a]``), the port's read latency, the lanes' maximum
    (:func:`adapter_max_levels`) and :data:`ADAPTER_READBACK_STAGES` to the last TD error,
    streamed as they are written, then its output register:
    ``B·r + HOST_READ_LATENCY + HOST_OUT_STAGES + levels + ADAPTER_READBACK_STAGES + 1``."""
    from sw.shell.spec import HOST_READ_LATENCY
    return (int(batch) * adapter_readback_reads(config) + HOST_READ_LATENCY + HOST_OUT_STAGES
            + adapter_max_levels(config) + ADAPTER_READBACK_STAGES + 1)


def adapter_cycles(config: TrainerConfig, batch: int) -> int:
    """Cycles of one adapter command (pack, learner step, read back) from its transfer to
    its ``done``, without back-pressure."""
    return (adapter_pack_cycles(config, batch) + learner_step_cycles(config.learner, batch)
            + ADAPTER_START + adapter_readback_cycles(config, batch))


#: Cycles of the adapter's learner start beyond the learner's ``step_cycles`` (the start
#: cycle: the learner's ``done`` comes ``step_cycles + 1`` cycles after it).
ADAPTER_START = 1


# -- the sequential core (rtl_gen.trainer.core.TrainerCore), no back-pressure ---------------
def burst_split(offset: int, beats: int, config: TrainerConfig) -> list:
    """Beats of the bursts the core splits ``beats`` storage words from byte ``offset`` into
    (at most 256 beats, never across 4 KiB)."""
    nb = config.storage_width // 8
    out = []
    while beats:
        n = min(beats, (4096 - offset % 4096) // nb, 256)
        out.append(n)
        offset += n * nb
        beats -= n
    return out


#: Cycles of StorageIO's registered job start (LOAD, snapshot, trace) before its first
#: address phase.
IO_START = 1


def sequential_load_cycles(config: TrainerConfig, read_latency: int = READ_LATENCY) -> int:
    """Cycles of LOAD in :class:`~rtl_gen.trainer.core.TrainerCore`, from its state to the
    next: per burst ``L + beats`` (AR, first beat after the read latency L, one cycle per
    later beat) and per storage word's lane 2 cycles (a weight into ``w<l>`` and ``tw<l>``)
    or 1 (padding), plus 2 and :data:`IO_START`:
    ``2 + IO_START + Σ (L + beats) + N_w + words·lanes``."""
    from .layout import lane_bytes, region_base
    nb = config.storage_width // 8
    words = weight_bytes(config) // nb
    lanes = nb // lane_bytes(config)
    n_w = sum(r * c for r, c in config.learner.numerics.weight_shapes())
    bursts = burst_split(region_base(config, "load"), words, config)
    return 2 + IO_START + sum(read_latency + n for n in bursts) + n_w + words * lanes


def _write_cycles(bursts_cost, write_latency):
    return sum(c + write_latency + 1 for c in bursts_cost)


def sequential_snapshot_cycles(config: TrainerConfig, write_latency: int = 1) -> int:
    """Cycles of a snapshot, from the core's SNAP (or FINAL) state to the next: the BUSY
    header, the weights, the header, each burst ``c + Wl + 1`` cycles (AW, c cycles of beats,
    the B response ``Wl`` cycles after the last beat; a header's c is its beats, a weight
    word's ``lanes + HOST_READ_LATENCY + HOST_OUT_STAGES + 2``: its lanes read from the
    learner, one per cycle), plus 2 and :data:`IO_START`."""
    from sw.shell.spec import HOST_READ_LATENCY
    from .layout import HEADER_BYTES, lane_bytes, region_base
    nb = config.storage_width // 8
    lanes = nb // lane_bytes(config)
    words = weight_bytes(config) // nb
    at = region_base(config, "snap0")
    hdr = [n for n in burst_split(at, HEADER_BYTES // nb, config)]
    per_word = lanes + HOST_READ_LATENCY + HOST_OUT_STAGES + 2
    wts = [n * per_word for n in burst_split(at + HEADER_BYTES, words, config)]
    return 2 + IO_START + _write_cycles(hdr + wts + hdr, write_latency)


def sequential_trace_cycles(config: TrainerConfig, write_latency: int = 1) -> int:
    """Cycles of a trace entry, from the core's TRACE state to the next:
    ``3 + IO_START + beats + Wl`` (one beat, two with a 64-bit storage port)."""
    from .layout import TRACE_BYTES
    return 3 + IO_START + max(1, TRACE_BYTES // (config.storage_width // 8)) + write_latency


def sequential_step_cycles(config: TrainerConfig, batch: int, writeback: int = 0,
                           inserts: int = 0, *, divide: bool = False, trace: bool = False,
                           snapshot: bool = False, read_latency: int = READ_LATENCY,
                           write_latency: int = 1) -> int:
    """Cycles of one step of the sequential core, from its BOUNDARY to the next one's:

    ``boundary_cycles(w, k) + 2`` (the boundary and the decision), then from SAMPLE's
    transfer ``max(S0 + G1 + P·Bp + 2, sample_cycles(B, divide))`` until the adapter's
    rows and weights are in (S0 = ``d + FRACTION_LATENCY + tree latency + 4``: the first
    sample, through the register slice before the gather; G1 = ``gather_cycles(b, O, 1, L)``: its record, into the adapter's record memory;
    the adapter then writes a row every P cycles (:func:`adapter_row_cycles`), Bp = B rounded up to S),
    ``1 + g·(S + sub) + HOST_OUT_STAGES`` for
    the samples words, the learner's ``step_cycles + 1`` (``ADAPTER_START``), the read-back
    (:func:`adapter_readback_cycles`), then 1 and a trace entry (or 1) and a snapshot
    (or 1); with ``delay`` 0 the next BOUNDARY's write-back waits for this step's last new
    priority, ``TD_POWER_LATENCY + 1`` cycles after the read-back minus those."""
    from sw.learner.layout import region, sub_words
    lc = config.learner
    S = lc.array
    g = -(-int(batch) // S)
    sub = sub_words(lc, region(lc, "samples"))
    b = _beats(record_bytes(config), config)
    d = config.tree.target_bits if divide else 0
    s0 = d + FRACTION_LATENCY + config.tree.latency + 4
    g1 = gather_cycles(b, config.gather_outstanding, 1, read_latency)
    pack = max(s0 + g1 + adapter_row_cycles(config) * g * S + 2,
               sample_cycles(config, batch, divide=divide))
    after = (1 + (sequential_trace_cycles(config, write_latency) if trace else 1)
             + (sequential_snapshot_cycles(config, write_latency) if snapshot else 1))
    # delay 0: the next BOUNDARY writes this step's batch back, after its last priority
    # (TD_POWER_LATENCY + 3 cycles after the last TD error), so it waits for what is left
    wait = max(0, TD_POWER_LATENCY + 1 - after) if config.delay == 0 else 0
    return (boundary_cycles(config, writeback, inserts) + 2 + pack + 1 + g * (S + sub)
            + HOST_OUT_STAGES
            + learner_step_cycles(lc, batch) + ADAPTER_START
            + adapter_readback_cycles(config, batch) + after + wait)


def sequential_launch_cycles(config: TrainerConfig, boundaries, *, clear=False, load=False,
                             insert=False, final_snapshot=False,
                             read_latency: int = READ_LATENCY,
                             write_latency: int = 1) -> int:
    """CYCLES of a launch of the sequential core whose tree is idle at the start (a CLEAR
    right after a launch that ended on a write-back waits for the tree's pipeline, up to
    its latency):
    ``boundaries`` lists each boundary as ``(writeback, inserts, step)``, ``step`` None for
    one that ends the launch or an INSERT launch's, else a dict of
    :func:`sequential_step_cycles`' keywords (``batch``, ``divide``, ``trace``,
    ``snapshot``). CLEAR adds ``1 + clear_cycles``, LOAD :func:`sequential_load_cycles`, a
    boundary without a step ``boundary_cycles + 2``, the end 1, a final snapshot
    :func:`sequential_snapshot_cycles` (else 1 after a non-INSERT launch's last boundary).
    A launch refused for its batch size takes 1."""
    total = 1
    if clear:
        total += 1 + clear_cycles(config)
    if load:
        total += sequential_load_cycles(config, read_latency)
    for w, k, st in boundaries:
        if st is None:
            total += boundary_cycles(config, w, k) + 2
        else:
            total += sequential_step_cycles(config, writeback=w, inserts=k,
                                            read_latency=read_latency,
                                            write_latency=write_latency, **st)
    if boundaries and not insert:
        total += (sequential_snapshot_cycles(config, write_latency) if final_snapshot
                  else 1)
    return total
