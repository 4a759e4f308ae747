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
import sys
import time
from dataclasses import asdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
for _p in (REPO, REPO / "scripts"):        # sw/, and dse_learner_model next to this file
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

from sw import timing  # noqa: E402
from sw.boards import DEVICES, Device  # noqa: E402,F401  (the device budgets: the board table's)
from sw.rl.plot import plot_path  # noqa: E402
from dse_learner_model import (  # noqa: E402,F401  (re-exported: the tests use them here)
    ARRAY_MENU, BRAM_BITS, DSP_PER_WU_LANE, ESTIMATE_COMMAND, ESTIMATES, F_VALUES,
    MICRO_BATCHES, OPERAND_BITS, SCRATCH_BITS, WU_LANES, Design, Stage, best, bram36,
    choose_array, critical_path, evaluate, explore, generator_name, item_cycles,
    learner_params, load_estimates, refresh_estimates, stage_gemm, stage_inputs, stage_ratio,
    stages_of)


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
