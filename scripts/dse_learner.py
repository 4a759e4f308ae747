#!/usr/bin/env python3
"""Design space exploration of the learner (CF'22 section 3.2.3) on this project's tensor units.

Usage::

    python scripts/dse_learner.py                         # CartPole DQN 4-64-64-2, B = 32/64/256
    python scripts/dse_learner.py --device u200 --batch 64 --no-torch
    python scripts/dse_learner.py --refresh-estimates     # re-run Yosys for the array menu

The learner of an MLP with ``n_layers`` weight layers is a pipeline of ``3·n_layers`` stages
(CF'22's n = 3(L-1) with L neuron layers): FW of every layer, LOSS, BW of the layers above the
first, WA of every layer, plus a parallel chain of target-network FW stages for DQN (CF'22
section 3.2.4), each GEMM stage a :class:`~rtl_gen.learner.tensor_unit.TensorUnit` of its own
size. DP copies of the pipeline each train on PI = B/DP samples; then the weight update (WU)
reduces the DP gradient scratchpads and updates the weights.

Cycle model (from the tensor unit's exact formula, :func:`sw.learner.gemm.gemm_cycles`): a
pipeline item is a micro-batch of m samples (m divides PI). Per item a stage on an R × C array
runs ``T·max(K, R)`` cycles for its GEMM (T output tiles):

* FW_l: M = m, K = n_in + 1, N = n_out (bias row).   BW_l: M = m, K = n_out, N = n_in.
* WA_l: M = n_in + 1, K = m, N = n_out, partial gradients added into a scratchpad.
* LOSS: m cycles (one sample per cycle, element-wise).

Stages pass whole items on through FIFOs, so ``T_pipeline = P + (PI/m - 1)·T_max``: the first
item takes the critical path P of the stage graph (each stage's item cycles plus its fill and
drain, ``latency + R``), later items leave every ``T_max`` cycles. CF'22 writes
``(PI + n - 1)·T_max``; the two agree for balanced stages in a chain, but here the WA stages
are branches (WA_l needs only δ_l and the layer's input) and the target FW chain runs beside
the online FW, so the critical path is FW_1..FW_L, LOSS, BW_L..BW_2, WA_1.
``T_WU = Σ_l ceil(DP·size(W_l) / u)`` with u update lanes (CF'22's ``r_WU·f``).

The DSE searches DP (divisors of B), m, the allocation factor f and u, and gives
stage i the array from the menu (:data:`ARRAY_MENU`, both orientations) with the fewest cycles
among those with at most ``max(4, r_i·f)`` cells, ``r_i`` being the stage's multiply-accumulates
per sample over the smallest stage's (CF'22's proportional allocation). The design with the
smallest ``T_pipeline + T_WU`` that fits ``--usable`` of every budgeted resource wins.

By default only points the generator (:class:`~sw.learner.spec.LearnerConfig` with
``stage_arrays``) builds are searched: DP in 1, 2, 4, arrays no larger than m (the block size
S, the largest array dimension, must divide the sub-batch), WU as generated (S lanes per
layer); each point carries its generator parameters (:func:`learner_params`) and the
generated pipeline's exact cycles (:func:`sw.learner.schedule.step_cycles`), which rank
the points. The chosen designs are written as JSON for ``python -m rtl_gen learner --config``
(``--config-dir``). ``--any-point`` searches the unrestricted CF'22 space with the model's
cycles. The T_pipe and T_WU columns stay the CF'22 model's (the generated WU overlaps WA's last
sub-batch with one pipeline; the cycles column is exact).

Resources of generator points: block RAM and DSPs are what the generator builds, mapped as
Yosys maps it (:func:`sw.learner.resources.learner_resources`: every buffer of the core with its
width, depth, read ports and write-enable groups, placed by ``memory_libmap``'s cost rule for
``-family xcup``; one DSP48E2 per tensor-unit cell, LOSS's and WU's multipliers), checked
against the Yosys counts of the shipped learners and of the ZCU106 candidate
(``tb/learner/test_dse.py``). LUT and FF are the arrays' Yosys estimates (``scripts/estimate.py``,
cached in ``scripts/learner_tu_estimates.json`` with the command that produced them; transposed
shapes are taken to cost the same) times DP, plus the LUTs of the buffers Yosys puts in LUT
RAM, without the sequencers, LOSS, WU and the platform shell; ``--usable`` (default 75 %)
leaves room for them. URAM: none (Yosys maps none without ``-uram``; Vivado may put deep
buffers there).

``--any-point`` designs (CF'22's space, not buildable) keep CF'22's model: the arrays' DSPs plus
2 per WU lane, and per pipeline ``max(ceil(bits / 36 Kb), ceil(port width / 72))`` BRAM36 for
one weight copy per FW, target-FW and BW stage, the sub-batch's activations and δ for WA and a
32-bit gradient scratchpad per layer (not checked against synthesis).

The projected gradient steps per second (``--mhz``, default the clock :func:`sw.timing.clock_mhz`
quotes for the shipped ``learner_cartpole_s4``, ``min(300 MHz, estimated Fmax)``: other
configurations are assumed to close the same clock) are printed beside torch
on this machine's CPU, measured in the same run (float32, the same network and batch, one DQN
step: online and target FW, loss, backward, SGD; the best of 5 timed rounds, with one thread
and with torch's default, the faster kept: on a shared machine the best round is the least
disturbed), and a plot of the design space is written to ``build/dse_learner.png``. The
projection counts the learner's compute only: no host transfers, replay sampling or clock
closure (the clock is an estimate from ``make timing``, not a Vivado result).
"""

import argparse
import copy
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from sw import timing  # noqa: E402
from sw.boards import DEVICES, Device  # noqa: E402  (the device budgets: the board table's)
from sw.learner.resources import learner_resources  # noqa: E402
from sw.learner.schedule import step_cycles  # noqa: E402
from sw.learner.spec import DP_VALUES, LearnerConfig, TensorUnitConfig  # noqa: E402
from sw.rl.plot import plot_path  # noqa: E402

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


# -- CPU baseline ---------------------------------------------------------------------------------
def torch_steps_per_s(sizes, batch, *, iters=100, rounds=5, seed=0):
    """DQN gradient steps per second of torch on this CPU (float32, SGD).

    Runs ``rounds`` timed rounds of ``iters`` steps; returns ``(best, median)`` rates. On a
    shared machine the best round is the least disturbed one.
    """
    import torch

    from sw.console import progress_bar

    torch.manual_seed(seed)
    layers = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(torch.nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(torch.nn.ReLU())
    net = torch.nn.Sequential(*layers)
    target = copy.deepcopy(net)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    s = torch.randn(batch, sizes[0])
    s2 = torch.randn(batch, sizes[0])
    a = torch.randint(0, sizes[-1], (batch, 1))
    r = torch.ones(batch)
    d = torch.zeros(batch)

    def step():
        with torch.no_grad():
            y = r + 0.99 * (1 - d) * target(s2).max(1).values
        q = net(s).gather(1, a).squeeze(1)
        loss = ((q - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

    for _ in range(30):
        step()
    rates = []
    with progress_bar(total=iters * rounds, desc=f"torch CPU B={batch}", unit="step",
                      leave=False) as bar:
        for _ in range(rounds):
            start = time.perf_counter()
            for _ in range(iters):
                step()
            rates.append(iters / (time.perf_counter() - start))
            bar.update(iters)
    rates.sort()
    return rates[-1], rates[len(rates) // 2]


# -- output ---------------------------------------------------------------------------------------
def plot(results, path, mhz):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    batches = sorted({b for b, _ in results["points"]})
    fig, axes = plt.subplots(1, len(batches), figsize=(5.2 * len(batches), 4.4), squeeze=False)
    for ax, b in zip(axes[0], batches):
        pts = results["points"][(b, None)]
        dsp = [p.dsp for p in pts]
        us = [p.cycles / mhz for p in pts]
        dps = [p.dp for p in pts]
        sc = ax.scatter(dsp, us, c=[math.log2(x) for x in dps], s=6, cmap="viridis", alpha=0.5)
        for key, dev in DEVICES.items():
            ax.axvline(results["usable"] * dev.dsp, color="grey", lw=0.8, ls="--")
            ax.text(results["usable"] * dev.dsp, max(us), f" {dev.name}", rotation=90,
                    va="top", fontsize=7)
            chosen = results["best"].get((b, key))
            if chosen:
                ax.plot(chosen.dsp, chosen.cycles / mhz, "r*", ms=11)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("DSP48E2")
        ax.set_ylabel(f"T_learner per gradient step (µs at {mhz:g} MHz)")
        ax.set_title(f"batch {b}: {len(pts)} design points")
        cb = fig.colorbar(sc, ax=ax)
        cb.set_label("log2 DP")
    fig.suptitle("Learner DSE (CF'22 §3.2.3) on tensor units: red stars = chosen per device")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="4,64,64,2", help="layer sizes (default 4,64,64,2)")
    ap.add_argument("--batch", type=int, nargs="+", default=[32, 64, 256])
    ap.add_argument("--device", choices=list(DEVICES) + ["all"], default="all")
    ap.add_argument("--usable", type=float, default=0.75,
                    help="fraction of each device resource the learner may use (default 0.75)")
    ap.add_argument("--mhz", type=float, default=None,
                    help="clock (default: sw.timing.clock_mhz of learner_cartpole_s4)")
    ap.add_argument("--no-target", action="store_true", help="no target-network FW chain")
    ap.add_argument("--any-point", action="store_true",
                    help="search CF'22's whole space (any DP, m, WU lanes; cycles from the "
                         "model) instead of the points the generator builds (exact cycles)")
    ap.add_argument("--config-dir", type=Path, default=REPO / "build" / "dse_learner_configs",
                    help="where to write each chosen design as LearnerConfig JSON for "
                         "`python -m rtl_gen learner --config FILE`")
    ap.add_argument("--refresh-estimates", action="store_true",
                    help=f"re-run Yosys for {ARRAY_MENU} and rewrite {ESTIMATES.name}")
    ap.add_argument("--no-torch", action="store_true", help="skip the CPU measurement")
    ap.add_argument("--torch-iters", type=int, default=100, help="steps per timed round")
    ap.add_argument("--torch-rounds", type=int, default=5)
    ap.add_argument("--torch-threads", default="1,0",
                    help="thread counts to time torch with, best kept (0 = torch's default; "
                         "default 1,0: a tiny network often runs faster on one thread)")
    ap.add_argument("--plot", type=Path, default=REPO / "build" / "dse_learner.png",
                    help="the figure (.png appended unless PATH ends in an image format; a "
                         "directory: dse_learner.png in it)")
    ap.add_argument("--json", type=Path, default=REPO / "build" / "dse_learner.json")
    args = ap.parse_args(argv)
    try:
        sizes = tuple(int(x) for x in args.sizes.split(","))
        if len(sizes) < 2 or min(sizes) < 1:
            raise ValueError
    except ValueError:
        ap.error(f"--sizes must be comma-separated positive integers, not {args.sizes!r}")
    try:
        args.plot = plot_path(args.plot, "dse_learner.png")
    except ValueError as e:
        ap.error(str(e))
    if not 0 < args.usable <= 1:
        ap.error(f"--usable must be in (0, 1], not {args.usable}")
    clock_label = "given"
    if args.mhz is None:
        args.mhz, clock_label = timing.clock_mhz("learner_cartpole_s4")
    elif args.mhz <= 0:
        ap.error(f"--mhz must be positive, not {args.mhz}")
    for b in args.batch:
        if b < 1:
            ap.error(f"--batch must be positive, not {b}")

    if args.refresh_estimates or not ESTIMATES.exists():
        refresh_estimates()
    est = load_estimates()
    devices = DEVICES if args.device == "all" else {args.device: DEVICES[args.device]}
    target = not args.no_target

    print(f"Tensor-unit estimates ({ESTIMATES.relative_to(REPO)}; "
          f"{json.loads(ESTIMATES.read_text())['tool']}, synth_xilinx -family xcup):")
    print("  array    LUT      FF   DSP  depth")
    for (r, c) in ARRAY_MENU:
        e = est[(r, c)]
        print(f"  {r:>2}x{c:<3} {e['lut']:>6} {e['ff']:>7} {e['dsp']:>5} {e['depth']:>6}")
    print(f"\nDevices (the learner may use {args.usable:.0%} of each):")
    for key, d in devices.items():
        print(f"  {key:7} {d.name} {d.part}: {d.lut} LUT, {d.ff} FF, {d.dsp} DSP, "
              f"{d.bram36} BRAM36, {d.uram} URAM  [{d.source}]")

    stages = stages_of(sizes, target=target)
    print(f"\nNetwork {'-'.join(map(str, sizes))}: {len(stages)} stages "
          f"({', '.join(s.name for s in stages)}), r_i = "
          + ", ".join(f"{k} {v:g}" for k, v in stage_ratio(stages, sizes).items()))

    results = {"points": {}, "best": {}, "usable": args.usable}
    cpu = {}
    cpu_runs = {}                               # (batch, threads) -> (best, median)
    thread_counts = []
    if not args.no_torch:
        import torch
        default_threads = torch.get_num_threads()
        try:
            thread_counts = sorted({int(t) or default_threads
                                    for t in args.torch_threads.split(",")})
        except ValueError:
            ap.error(f"--torch-threads takes comma-separated integers, not "
                     f"{args.torch_threads!r}")
    for b in args.batch:
        results["points"][(b, None)] = explore(sizes, b, est, target=target,
                                               generator=not args.any_point)
        for t in thread_counts:
            torch.set_num_threads(t)
            cpu_runs[(b, t)] = torch_steps_per_s(sizes, b, iters=args.torch_iters,
                                                 rounds=args.torch_rounds)
    cpu, cpu_threads = {}, {}
    for b in args.batch:
        if thread_counts:
            t = max(thread_counts, key=lambda t: cpu_runs[(b, t)][0])
            cpu[b], cpu_threads[b] = cpu_runs[(b, t)][0], t

    head = (f"{'device':8} {'B':>4} {'DP':>3} {'PI':>4} {'m':>3} {'f':>6} {'u':>4} "
            f"{'DSP':>11} {'LUT':>13} {'FF':>13} {'BRAM36':>10} {'T_pipe':>7} {'T_WU':>6} "
            f"{'cycles':>7} {'steps/s':>9} {'CPU st/s':>9} {'ratio':>6}")
    if cpu:
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        print(f"\ntorch {torch.__version__} float32 on this CPU ({os.cpu_count()} cores, load "
              f"average {load:.1f}), DQN steps/s, best (median) of {args.torch_rounds} rounds "
              f"of {args.torch_iters}:")
        for t in thread_counts:
            print(f"  {t} thread{'s' if t > 1 else ' '}: "
                  + ", ".join(f"B={b} {cpu_runs[(b, t)][0]:.0f} ({cpu_runs[(b, t)][1]:.0f})"
                              for b in args.batch))
    print(f"\nChosen configurations at {args.mhz:g} MHz ({clock_label}) "
          f"(ratio = FPGA / best CPU round, "
          f"T_* in cycles; cycles = "
          + ("the model's T_pipe + T_WU" if args.any_point else
             "the generated pipeline's exact step_cycles") + "):")
    print(head)
    rows = []
    for key, dev in devices.items():
        for b in args.batch:
            p = best(results["points"][(b, None)], dev, args.usable)
            results["best"][(b, key)] = p
            if p is None:
                print(f"{key:8} {b:>4}  nothing fits")
                continue
            sps = p.steps_per_s(args.mhz)
            c = cpu.get(b)

            def pct(v, tot):
                return f"{v if v != int(v) else int(v)}({100 * v / tot:.0f}%)"
            print(f"{key:8} {b:>4} {p.dp:>3} {p.pi:>4} {p.m:>3} {p.f:>6g} {p.wu_lanes:>4} "
                  f"{pct(p.dsp, dev.dsp):>11} {pct(p.lut, dev.lut):>13} "
                  f"{pct(p.ff, dev.ff):>13} {pct(p.bram36, dev.bram36):>10} "
                  f"{p.t_pipeline:>7} {p.t_wu:>6} {p.cycles:>7} {sps:>9.0f} "
                  f"{(f'{c:.0f}' if c else '-'):>9} {(f'{sps / c:.1f}x' if c else '-'):>6}")
            rows.append({"device": key, "batch": b, **{k: v for k, v in asdict(p).items()
                                                        if k not in ("arrays", "params")},
                         "learner_params": p.params, "model_cycles": p.model_cycles,
                         "arrays": {k: f"{r}x{c_}" for k, (r, c_) in p.arrays.items()},
                         "cycles": p.cycles, "steps_per_s": sps, "cpu_steps_per_s": c,
                         "cpu_threads": cpu_threads.get(b)})
    print("\nPer-stage arrays (R x C) of the chosen configurations:")
    for r in rows:
        print(f"  {r['device']:7} B={r['batch']:<4} "
              + " ".join(f"{k}:{v}" for k, v in r["arrays"].items()))
    if not args.any_point and rows:
        args.config_dir.mkdir(parents=True, exist_ok=True)
        for r in rows:
            path = args.config_dir / f"{r['device']}_b{r['batch']}.json"
            path.write_text(json.dumps(r["learner_params"], indent=1) + "\n")
            r["config_file"] = str(path)
        print(f"\nGenerator configurations in {args.config_dir} (python -m rtl_gen learner "
              f"--config FILE --out DIR)")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"sizes": sizes, "mhz": args.mhz, "usable": args.usable,
                                     "cpu_runs": {f"B={b} threads={t}": v
                                                  for (b, t), v in cpu_runs.items()},
                                     "chosen": rows,
                                     "devices": {k: asdict(d) for k, d in devices.items()}},
                                    indent=1) + "\n")
    plot(results, args.plot, args.mhz)
    print(f"\nwrote {args.json.relative_to(REPO) if args.json.is_relative_to(REPO) else args.json}"
          f" and {args.plot.relative_to(REPO) if args.plot.is_relative_to(REPO) else args.plot}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", str(os.cpu_count() or 1))
    sys.exit(main())
