"""Stage graph and exact cycle model of a learner training step (pure Python, no Amaranth).

:class:`~rtl_gen.learner.core.LearnerCore` builds one hardware stage per entry of
:func:`stages` and wires its start condition from the same dependencies; :func:`timeline` replays
the stages' control rules cycle-exactly, and :func:`step_cycles` is what the ``cycles`` counter
of the core reads after a step (asserted in the tests).

Stages (``l`` is the 0-based weight layer, L layers):

Each GEMM stage has its own R × C tensor unit (:meth:`LearnerConfig.stage_array`; S × S by
default, S = ``config.array`` the block size; below, ``⌈x/R⌉`` etc.).

``fw<l>``, ``tfw<l>``
    FW of the online and (DQN) target network: ``z = [h, 1]·W`` on an R × C tensor unit,
    ReLU on hidden layers. Items of ``ceil(cnt/R) · ceil(n_out/C)`` tiles of
    ``max(n_in + 1, R)`` cycles.
``loss``
    DQN: ``y = r + γ(1-d)·max_a Q'``, ``δ = Q[a] - y``; MSE: ``δ = Q - Y``. One sample
    and output group (S outputs) per cycle: ``cnt · ceil(n_out/S)`` cycles per item.
``bw<l>`` (l ≥ 1)
    ``δ_{l-1} = (δ_l · W_lᵀ) ⊙ [h_{l-1} > 0]``: ``ceil(cnt/R) · ceil(n_in/C)`` tiles of
    ``max(n_out, R)`` cycles.
``wa<l>``
    ``G_l += [h_{l-1}, 1]ᵀ · δ_l`` into the gradient scratchpad: ``ceil((n_in+1)/R) ·
    ceil(n_out/C)`` tiles of ``max(cnt, R)`` cycles.
``wu<l>``
    ``W_l -= round(η · G_l)``, S weights per cycle, block by block (S cycles each, row group
    by row group): ``ceil((n_in+1)/S) · ceil(n_out/S) · S`` slots, after ``bw<l>`` (the other
    reader of W_l) finished every item. With one pipeline WU overlaps WA's last sub-batch: a
    block starts once the WA tile that completes it has been written (:func:`wu_block_need`;
    WA writes tiles in the same order), so WU ends about one block after WA instead of a
    whole weight tensor after it. With dp > 1 it waits for every WA item.

With ``dp`` > 1 pipelines every stage but ``wu`` exists once per pipeline, named
``<stage>@<d>``; pipeline d takes sub-batches d, d + dp, ...; ``wu<l>`` waits for all of them
and first adds their scratchpads (one more cycle of tail per added pipeline).

DQN target-network sync (SYNC_TARGET / SYNC_PERIOD) adds no cycles: WU writes the updated rows
into the target weights in the same cycles as into the weights.

Control rules (the RTL's, cycle for cycle): the step's items are sub-batches of
``m = sub_batch`` samples, ``cnt = min(m, B - p·m)`` in item p. A stage issues one slot per cycle
(an operand read, or a bubble that keeps a tile at least S cycles long), item after item. It
starts item p in the first cycle in which its previous item has issued its last slot and every
producer's *done* count exceeds p (for ``wu``: every producer finished every item); the start
cycle is the item's first slot. An item is done ``tail`` cycles after its last slot (the
operand pipeline, the tensor unit, the write-back), and the count shows it from that cycle on.
Cycle 0 is the cycle in which the core samples ``start``; stages may start in cycle 1. The step
ends in the first cycle ``E`` in which every ``wu`` stage is done; ``cycles`` reads E and
``done`` pulses in cycle E + 1.
"""

import functools
from dataclasses import dataclass

from .adam import ADAM_WU_LATENCY
from .spec import LearnerConfig

__all__ = ["Stage", "stages", "item_slots", "stage_tail", "items", "timeline", "step_cycles",
           "GEMM_OPERAND_LATENCY", "GEMM_WRITE_LATENCY", "LOSS_TAIL", "WU_TAIL",
           "WU_READY_LATENCY", "WU_SGD_LATENCY", "wu_overlaps",
           "wu_block_need"]

#: Cycles from a GEMM stage's operand read (its slot) to the element entering the tensor unit:
#: memory read, operand register.
GEMM_OPERAND_LATENCY = 2
#: Cycles from an output beat of the tensor unit to its write: FW registers it (ReLU, mask),
#: BW reads the ReLU mask and registers its row, WA reads the scratchpad row, registers it,
#: adds, registers the sum.
GEMM_WRITE_LATENCY = {"fw": 1, "tfw": 1, "bw": 2, "wa": 3}
#: ``loss`` tail: (slot to done) = 8 + output groups for DQN (read, row select, max, γ product,
#: rounding, target, difference, δ, then one write per group); 4 for MSE (read, row select,
#: difference, δ write).
LOSS_TAIL = {"dqn": 8, "mse": 4}
#: ``wu`` tail: read address registered, read, row select, η partial products, their sum,
#: rounding, subtract, saturate (and write); done the next cycle.
WU_TAIL = 9
#: The part of :data:`WU_TAIL` from the reduced gradient row to the written row (η partial
#: products, their sum, rounding, subtract, saturate); Adam replaces it with
#: :data:`sw.learner.adam.ADAM_WU_LATENCY`.
WU_SGD_LATENCY = 5
#: Overlapped ``wu``: cycles from the first cycle its producers' status allows a block to
#: the first cycle it may start the block (whether it may is registered).
WU_READY_LATENCY = 1


@dataclass(frozen=True)
class Stage:
    """One pipeline stage: ``kind`` in fw, tfw, loss, bw, wa, wu; ``deps`` must have finished
    the same item (``wu``: every item) before this stage starts it; ``pipe`` is the pipeline
    (0 for ``wu``)."""
    name: str
    kind: str
    layer: int
    deps: tuple
    pipe: int = 0


def stages(config: LearnerConfig) -> list:
    """The stages of the pipeline in a fixed order (the RTL's order of construction)."""
    if not isinstance(config, LearnerConfig):
        raise TypeError(f"config must be a LearnerConfig, not {config!r}")
    L = config.n_layers
    dqn = config.loss == "dqn"
    out = []
    for d in range(config.dp):
        x = "" if config.dp == 1 else f"@{d}"
        out += [Stage(f"fw{l}{x}", "fw", l, (f"fw{l - 1}{x}",) if l else (), d)
                for l in range(L)]
        if dqn:
            out += [Stage(f"tfw{l}{x}", "tfw", l, (f"tfw{l - 1}{x}",) if l else (), d)
                    for l in range(L)]
        out.append(Stage(f"loss{x}", "loss", L - 1,
                         (f"fw{L - 1}{x}",) + ((f"tfw{L - 1}{x}",) if dqn else ()), d))

        def src(l):
            return f"loss{x}" if l == L - 1 else f"bw{l + 1}{x}"
        out += [Stage(f"bw{l}{x}", "bw", l, (src(l),), d) for l in range(L - 1, 0, -1)]
        out += [Stage(f"wa{l}{x}", "wa", l, (src(l),), d) for l in range(L)]
    xs = [""] if config.dp == 1 else [f"@{d}" for d in range(config.dp)]
    out += [Stage(f"wu{l}", "wu", l,
                  tuple(f"wa{l}{x}" for x in xs) + (tuple(f"bw{l}{x}" for x in xs) if l else ()))
            for l in range(L)]
    return out


def items(config: LearnerConfig, batch: int, pipe=None) -> list:
    """Samples of each item (sub-batch) of a step of ``batch`` samples; of one pipeline's items
    (sub-batches ``pipe``, ``pipe + dp``, ...) if ``pipe`` is given."""
    if not isinstance(batch, int) or not 1 <= batch <= config.max_batch:
        raise ValueError(f"batch must be an integer in 1..{config.max_batch}, not {batch!r}")
    m = config.sub_batch
    out = [min(m, batch - p) for p in range(0, batch, m)]
    return out if pipe is None else out[pipe::config.dp]


def _cdiv(a, b):
    return -(-a // b)


def item_slots(config: LearnerConfig, stage: Stage, cnt: int) -> int:
    """Slots (cycles of operand issue) of one item of ``cnt`` samples."""
    S, sizes = config.array, config.sizes
    g = config.groups
    n_in, n_out = sizes[stage.layer], sizes[stage.layer + 1]
    if stage.kind in ("fw", "tfw", "bw", "wa"):
        R, C = config.stage_array(stage.name)
    if stage.kind in ("fw", "tfw"):
        return _cdiv(cnt, R) * _cdiv(n_out, C) * max(n_in + 1, R)
    if stage.kind == "bw":
        return _cdiv(cnt, R) * _cdiv(n_in, C) * max(n_out, R)
    if stage.kind == "wa":
        return _cdiv(n_in + 1, R) * _cdiv(n_out, C) * max(cnt, R)
    if stage.kind == "loss":
        return cnt * g(n_out)
    if stage.kind == "wu":
        return g(n_in + 1) * g(n_out) * S
    raise ValueError(f"unknown stage kind {stage.kind!r}")


def stage_tail(config: LearnerConfig, stage: Stage) -> int:
    """Cycles from an item's last slot to the first cycle its done count shows it."""
    if stage.kind in ("fw", "tfw", "bw", "wa"):
        tu = config.stage_tensor_unit(stage.name)
        # operands -> TU; last tile's first beat after `latency`, its last beat R-1 later;
        # the write; the count the cycle after.
        return (GEMM_OPERAND_LATENCY + tu.latency + (tu.rows - 1)
                + GEMM_WRITE_LATENCY[stage.kind] + 1)
    if stage.kind == "loss":
        extra = config.groups(config.n_out) if config.loss == "dqn" else 0
        return LOSS_TAIL[config.loss] + extra
    if stage.kind == "wu":
        extra = ADAM_WU_LATENCY - WU_SGD_LATENCY if config.optimizer == "adam" else 0
        return WU_TAIL + config.dp - 1 + extra
    raise ValueError(f"unknown stage kind {stage.kind!r}")


def wu_overlaps(config: LearnerConfig) -> bool:
    """WU starts on the blocks WA's last sub-batch has finished (one pipeline only: with
    dp > 1 WU writes the reduced gradient back into a scratchpad WA@0 is still writing)."""
    return config.dp == 1


def wu_block_need(config: LearnerConfig, layer: int, rg: int, cg: int) -> int:
    """Index (o-major) of the last WA tile of layer ``layer`` that covers block (rg, cg) of its
    gradient: WU may update the block once WA's last item has finished more tiles than that."""
    S = config.array
    R, C = config.stage_array(f"wa{layer}")
    n_in, n_out = config.sizes[layer], config.sizes[layer + 1]
    mt, ngo = -(-(n_in + 1) // R), -(-n_out // C)
    o_end = min((rg + 1) * (S // R), mt) - 1
    n_end = min((cg + 1) * (S // C), ngo) - 1
    return o_end * ngo + n_end


def _wu_overlapped(config, st, batch, out):
    """``(first, last, done)`` of a WU stage that follows WA's last item block by block: block
    b (S slots, row-group-major) starts when the previous block has issued, BW of the layer
    has finished every item, and the WA tile that completes the block shows in WA's count of
    finished tiles (``tail`` cycles after the tile's last slot), each seen
    :data:`WU_READY_LATENCY` cycles later."""
    S, l = config.array, st.layer
    wa = stages_by_name(config)[f"wa{l}"]
    f_last, _, _ = out[wa.name][-1]
    cnt = items(config, batch)[-1]
    T = max(cnt, config.stage_array(wa.name)[0])
    tail = stage_tail(config, wa)
    ready = 1
    for d in st.deps:
        if d != wa.name and out[d]:
            ready = max(ready, out[d][-1][2])
    n_in, n_out = config.sizes[l], config.sizes[l + 1]
    t, first = ready + WU_READY_LATENCY, None
    for rg in range(config.groups(n_in + 1)):
        for cg in range(config.groups(n_out)):
            avail = (f_last + (wu_block_need(config, l, rg, cg) + 1) * T - 1 + tail
                     + WU_READY_LATENCY)
            start = max(t, avail)
            first = start if first is None else first
            t = start + S
    last = t - 1
    return (first, last, last + stage_tail(config, st))


def stages_by_name(config: LearnerConfig) -> dict:
    return {s.name: s for s in stages(config)}


def timeline(config: LearnerConfig, batch: int) -> dict:
    """Per stage, per item: ``(first slot, last slot, done)`` cycles of a step.

    ``wu`` stages have one item (the whole weight tensor); a pipeline without sub-batches
    (dp > number of sub-batches) has no rows.
    """
    out = {}
    for st in stages(config):
        is_wu = st.kind == "wu"
        its = [None] if is_wu else items(config, batch, st.pipe)
        rows, prev_last = [], 0
        if is_wu and wu_overlaps(config):
            out[st.name] = [_wu_overlapped(config, st, batch, out)]
            continue
        for p, cnt in enumerate(its):
            ready = 1
            for d in st.deps:
                if out[d]:
                    ready = max(ready, out[d][-1 if is_wu else p][2])
            first = max(prev_last + 1, ready)
            slots = item_slots(config, st, 0 if is_wu else cnt)
            last = first + slots - 1
            rows.append((first, last, last + stage_tail(config, st)))
            prev_last = last
        out[st.name] = rows
    return out


@functools.lru_cache(maxsize=256)
def step_cycles(config: LearnerConfig, batch: int) -> int:
    """Cycles of one training step: what the core's ``cycles`` counter reads when ``done``
    pulses (cycle 0 samples ``start``; ``done`` rises one cycle after the value returned).
    Cached per (configuration, batch): drivers and golden devices ask once per step."""
    tl = timeline(config, batch)
    return max(rows[-1][2] for name, rows in tl.items() if name.startswith("wu"))
