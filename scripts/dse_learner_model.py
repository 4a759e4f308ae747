"""The learner design space exploration's model (the library part of ``scripts/dse_learner.py``,
whose docstring describes the method): the tensor unit's Yosys estimates per array, the
training step's stages and their GEMMs, the design points (:class:`Design`) with their cycles
and resources, and the search (:func:`explore`, :func:`best`). ``dse_learner.py`` re-exports
these names and holds the command line, the torch CPU baseline and the plot.
"""

import json
import math
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from sw.boards import Device  # noqa: E402  (the device budgets: the board table's)
from sw.learner.resources import learner_resources  # noqa: E402
from sw.learner.schedule import step_cycles  # noqa: E402
from sw.learner.spec import DP_VALUES, LearnerConfig, TensorUnitConfig  # noqa: E402

ESTIMATES = REPO / "scripts" / "learner_tu_estimates.json"
ESTIMATE_COMMAND = ("python scripts/estimate.py --block tensor-unit --param rows={rows} "
                    "--param cols={cols} --quiet --json {json}")

#: Arrays synthesized for the DSE (rows, cols); each is also used transposed.
ARRAY_MENU = [(2, 2), (2, 4), (4, 4), (4, 8), (8, 8), (8, 16), (16, 16)]


F_VALUES = [2.0 ** e for e in range(-3, 8)]
WU_LANES = (4, 8, 16, 32, 64, 128)
MICRO_BATCHES = (1, 2, 4, 8, 16, 32, 64)
OPERAND_BITS = 16
SCRATCH_BITS = 32
BRAM_BITS = 36 * 1024
DSP_PER_WU_LANE = 2


# -- estimates ------------------------------------------------------------------------------------
def refresh_estimates(path=ESTIMATES, *, jobs=2):
    """Run ``scripts/estimate.py`` for every array of :data:`ARRAY_MENU`; write ``path``."""
    from sw.console import progress_bar

    arrays, tool, flow = [], None, None
    with tempfile.TemporaryDirectory() as tmp:
        for rows, cols in progress_bar(ARRAY_MENU, desc="yosys estimates", unit="array"):
            out = Path(tmp) / f"{rows}x{cols}.json"
            cmd = ESTIMATE_COMMAND.format(rows=rows, cols=cols, json=out).split()
            cmd[0] = sys.executable
            subprocess.run(cmd + ["-j", str(jobs)], cwd=REPO, check=True,
                           stdout=subprocess.DEVNULL)
            doc = json.loads(out.read_text())
            tool, flow = doc["tool"], doc["flow"]
            d = doc["designs"][0]
            arrays.append({"rows": rows, "cols": cols,
                           **{k: d[k] for k in ("lut", "lutram", "ff", "dsp", "bram36", "uram",
                                                "carry", "depth")}})
    defaults = TensorUnitConfig().to_dict()
    doc = {
        "description": "Yosys estimates of the tensor unit for scripts/dse_learner.py",
        "command": ESTIMATE_COMMAND.format(rows="R", cols="C", json="OUT.json"),
        "regenerate": "python scripts/dse_learner.py --refresh-estimates",
        "tool": tool, "flow": flow,
        "config": {k: v for k, v in defaults.items() if k not in ("rows", "cols")},
        "arrays": arrays,
    }
    Path(path).write_text(json.dumps(doc, indent=1) + "\n")
    return doc


def load_estimates(path=ESTIMATES) -> dict:
    """``{(rows, cols): {"lut": ..., "ff": ..., "dsp": ...}}``, transposes included."""
    doc = json.loads(Path(path).read_text())
    table = {}
    for a in doc["arrays"]:
        table[(a["rows"], a["cols"])] = a
        table.setdefault((a["cols"], a["rows"]), a)
    return table


# -- network and stages ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Stage:
    """One pipeline stage: ``kind`` is fw, tfw (target FW), loss, bw or wa; ``layer`` 0-based."""
    name: str
    kind: str
    layer: int


def stages_of(sizes, *, target=True) -> list:
    """FW_1..FW_L, LOSS, BW_L..BW_2, WA_1..WA_L (and TFW_1..TFW_L for DQN)."""
    L = len(sizes) - 1
    st = [Stage(f"FW{l + 1}", "fw", l) for l in range(L)]
    st.append(Stage("LOSS", "loss", L - 1))
    st += [Stage(f"BW{l + 1}", "bw", l) for l in range(L - 1, 0, -1)]
    st += [Stage(f"WA{l + 1}", "wa", l) for l in range(L)]
    if target:
        st += [Stage(f"TFW{l + 1}", "tfw", l) for l in range(L)]
    return st


def stage_gemm(stage: Stage, sizes, m: int):
    """(M, K, N) of a stage's GEMM for one micro-batch of m samples, or None for LOSS."""
    n_in, n_out = sizes[stage.layer], sizes[stage.layer + 1]
    if stage.kind in ("fw", "tfw"):
        return (m, n_in + 1, n_out)
    if stage.kind == "bw":
        return (m, n_out, n_in)
    if stage.kind == "wa":
        return (n_in + 1, m, n_out)
    return None


def stage_inputs(stages) -> dict:
    """Predecessors of each stage in the dataflow graph (names)."""
    names = {st.name for st in stages}
    L = max(st.layer for st in stages) + 1
    deps = {}
    for st in stages:
        l = st.layer
        if st.kind in ("fw", "tfw"):
            prefix = "FW" if st.kind == "fw" else "TFW"
            deps[st.name] = [f"{prefix}{l}"] if l > 0 else []
        elif st.kind == "loss":
            deps[st.name] = [n for n in (f"FW{L}", f"TFW{L}") if n in names]
        else:
            # δ_l comes from LOSS (top layer) or from BW of the layer above; WA also reads
            # the layer's input, produced by FW of the layer below.
            src = "LOSS" if l == L - 1 else f"BW{l + 2}"
            if st.kind == "bw":
                deps[st.name] = [src]
            else:
                deps[st.name] = [src] + ([f"FW{l}"] if l > 0 else [])
    return deps


def critical_path(stages, first_item: dict) -> int:
    """Longest path through the stage graph, each stage weighted by ``first_item[name]``."""
    deps = stage_inputs(stages)
    finish = {}
    while len(finish) < len(stages):
        for st in stages:
            if st.name not in finish and all(d in finish for d in deps[st.name]):
                finish[st.name] = max((finish[d] for d in deps[st.name]), default=0) \
                    + first_item[st.name]
    return max(finish.values())


def item_cycles(gemm, rows: int, cols: int) -> int:
    """Steady-state cycles of one GEMM on an R × C unit fed back to back: ``T·max(K, R)``.

    This is :func:`sw.learner.gemm.gemm_cycles` without the one-off fill and drain (checked in
    ``tb/learner/test_dse.py``)."""
    M, K, N = gemm
    return math.ceil(M / rows) * math.ceil(N / cols) * max(K, rows)


def stage_ratio(stages, sizes) -> dict:
    """CF'22's r_i: multiply-accumulates per sample of each GEMM stage over the smallest."""
    macs = {s.name: math.prod(stage_gemm(s, sizes, 1)) for s in stages if s.kind != "loss"}
    least = min(macs.values())
    return {k: v / least for k, v in macs.items()}


def choose_array(gemm, budget: float, menu):
    """The array with the fewest item cycles among those with at most ``budget`` cells (the
    smallest array if none fits); ties go to fewer cells."""
    fitting = [a for a in menu if a[0] * a[1] <= max(budget, 4)]
    if not fitting:
        fitting = [min(menu, key=lambda a: a[0] * a[1])]
    return min(fitting, key=lambda a: (item_cycles(gemm, *a), a[0] * a[1], a[0]))


def bram36(bits: int, width: int) -> int:
    return max(math.ceil(bits / BRAM_BITS), math.ceil(width / 72))


@dataclass
class Design:
    """One design point: parameters, per-stage arrays, cycles and resources."""
    batch: int
    dp: int
    pi: int
    m: int
    f: float
    wu_lanes: int
    arrays: dict
    t_max: int
    t_pipeline: int
    t_wu: int
    dsp: int
    lut: int
    ff: int
    bram36: float
    params: dict = None
    exact_cycles: int = None

    @property
    def model_cycles(self) -> int:
        """The CF'22-style estimate ``T_pipeline + T_WU``."""
        return self.t_pipeline + self.t_wu

    @property
    def cycles(self) -> int:
        """Cycles per step: the generator's exact :func:`~sw.learner.schedule.step_cycles`
        for a generator design point, else :attr:`model_cycles`."""
        return self.model_cycles if self.exact_cycles is None else self.exact_cycles

    def steps_per_s(self, mhz: float) -> float:
        return mhz * 1e6 / self.cycles

    def fits(self, dev: Device, usable: float) -> bool:
        return (self.dsp <= usable * dev.dsp and self.lut <= usable * dev.lut
                and self.ff <= usable * dev.ff and self.bram36 <= usable * dev.bram36)


def generator_name(stage: Stage) -> str:
    """The generator's name of a DSE stage (``FW1`` -> ``fw0``: 0-based weight layers)."""
    return f"{stage.kind}{stage.layer}"


def learner_params(design: "Design", sizes, *, target=True, axi_data_width=128) -> dict:
    """Parameters of :class:`~sw.learner.spec.LearnerConfig` that realise a design point
    of :func:`explore` with ``generator=True``: block size S = the largest array dimension,
    per-stage arrays, sub-batch m, dp pipelines, max_batch = the batch. ``python -m rtl_gen
    learner --config FILE`` takes them as a JSON file."""
    by_name = {s.name: s for s in stages_of(sizes, target=target)}
    S = max(x for rc in design.arrays.values() for x in rc)
    arrays = ",".join(f"{generator_name(by_name[k])}:{r}x{c}"
                      for k, (r, c) in design.arrays.items())
    return {"sizes": list(sizes), "array": S, "stage_arrays": arrays, "max_batch": design.batch,
            "sub_batch": design.m, "dp": design.dp, "loss": "dqn" if target else "mse",
            "axi_data_width": axi_data_width}


def evaluate(sizes, batch, dp, m, f, lanes, est, *, target=True, generator=False) -> Design:
    """Cycle and resource model of one design point (see the module docstring).

    ``generator=True``: only arrays the generator can build for this point (dimensions at
    most m: the block size S divides the sub-batch), WU as generated (S lanes per layer,
    ``lanes`` ignored), the exact cycles of the generated pipeline
    (:attr:`Design.exact_cycles`, :attr:`Design.params`) and its block RAM, DSPs and LUT RAM
    (:func:`~sw.learner.resources.learner_resources`)."""
    stages = stages_of(sizes, target=target)
    ratio = stage_ratio(stages, sizes)
    menu = sorted(est)
    if generator:
        menu = [a for a in menu if max(a) <= m]
        if not menu:
            raise ValueError(f"no array of the menu fits a sub-batch of {m}")
    pi = batch // dp
    arrays, per_item, first = {}, [], {}
    dsp = lut = ff = mem = 0
    for s in stages:
        gemm = stage_gemm(s, sizes, m)
        if gemm is None:                       # LOSS: one sample per cycle
            per_item.append(m)
            first[s.name] = m
            continue
        r, c = choose_array(gemm, ratio[s.name] * f, menu)
        arrays[s.name] = (r, c)
        per_item.append(item_cycles(gemm, r, c))
        first[s.name] = per_item[-1] + TensorUnitConfig(rows=r, cols=c).latency + r
        e = est[(r, c)]
        dsp, lut, ff = dsp + e["dsp"], lut + e["lut"], ff + e["ff"]
        n_in, n_out = sizes[s.layer], sizes[s.layer + 1]
        if s.kind in ("fw", "tfw", "bw"):      # weight copy read C operands per cycle
            mem += bram36((n_in + 1) * n_out * OPERAND_BITS, c * OPERAND_BITS)
        else:                                  # WA: activations, δ, gradient scratchpad
            mem += bram36(pi * (n_in + 1) * OPERAND_BITS, r * OPERAND_BITS)
            mem += bram36(pi * n_out * OPERAND_BITS, c * OPERAND_BITS)
            mem += bram36((n_in + 1) * n_out * SCRATCH_BITS, c * SCRATCH_BITS)
    t_max = max(per_item)
    t_pipe = critical_path(stages, first) + (pi // m - 1) * t_max
    sizes_w = [(a + 1) * b for a, b in zip(sizes[:-1], sizes[1:])]
    if generator:                      # WU: S lanes per layer, the layers side by side
        S = max(x for rc in arrays.values() for x in rc)
        lanes = S * (len(sizes) - 1)
    t_wu = sum(math.ceil(dp * s / lanes) for s in sizes_w)
    d = Design(batch, dp, pi, m, f, lanes, arrays, t_max, t_pipe, t_wu,
               dp * dsp + DSP_PER_WU_LANE * lanes, dp * lut, dp * ff, dp * mem)
    if generator:
        d.params = learner_params(d, sizes, target=target)
        cfg = LearnerConfig.from_dict(d.params)
        d.exact_cycles = step_cycles(cfg, batch)
        # What the generator builds, mapped as Yosys maps it: every buffer, every multiplier.
        # Memories Yosys puts in LUT RAM take LUTs beside the arrays'.
        res = learner_resources(cfg)
        d.bram36, d.dsp, d.lut = res.bram36, res.dsp, d.lut + res.lutram
    return d


def explore(sizes, batch, est, *, target=True, generator=False):
    """Every design point of the search space (DP | B, m | PI, f, WU lanes).

    ``generator=True``: only points the learner generator builds (DP in 1, 2, 4; m at least
    2), with their exact cycles and generator parameters (see :func:`evaluate`)."""
    points, seen = [], set()
    for dp in [d for d in range(1, batch + 1) if batch % d == 0]:
        if generator and dp not in DP_VALUES:
            continue
        pi = batch // dp
        for m in [x for x in MICRO_BATCHES if x <= pi and pi % x == 0]:
            if generator and m < 2:
                continue
            for f in F_VALUES:
                for lanes in (WU_LANES[:1] if generator else WU_LANES):
                    p = evaluate(sizes, batch, dp, m, f, lanes, est, target=target,
                                 generator=generator)
                    if generator:      # f values that give the same arrays: one point
                        key = (dp, m, tuple(sorted(p.arrays.items())))
                        if key in seen:
                            continue
                        seen.add(key)
                    points.append(p)
    return points


def best(points, dev: Device, usable: float):
    fit = [p for p in points if p.fits(dev, usable)]
    if not fit:
        return None
    return min(fit, key=lambda p: (p.cycles, p.dsp, p.lut))
