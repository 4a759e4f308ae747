"""The thesis's priority-update delay D (Zhang 2022, section 4.5.2, Fig. 4.8): DQN with
prioritized replay whose new priorities are written back D gradient steps late
(``make repro-delay``).

:func:`sw.rl.dqn.train` with ``DQNConfig(priority_delay=D)``: the priorities of gradient step
g wait in a queue and reach the replay accelerator in the run that samples step g + 1 + D (the
thesis's Data Queue of size D; D = 0 is the strict order). Priorities live on the golden model
of ``replay_accel_k16`` (bit-exact with the RTL); the learner is the golden model of
``learner_cartpole_s4`` (``--learner golden``, the default) or the same network in float32
torch (``--learner torch``, 3-4x faster, for reduced runs). The thesis trains with D = 1, 10,
50, 100, 200 (CartPole with DDPG, Hopper, Pong) and finds the degradation "almost negligible";
here D = 0, 1, 4, 16 on CartPole-v1 with DQN.
"""

import argparse
import shutil
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from repro.common import (add_output_args, command, mean_std, read_csv,  # noqa: E402
                          run_jobs, smooth_curves, write_csv, write_section)

DELAYS = (0, 1, 4, 16)
SEEDS = 5
STEPS = 20_000
#: The best return of CartPole-v1 (episodes are truncated at 500 steps): the thesis normalizes
#: by an expert's return.
EXPERT = 500.0
SUMMARY = ("delay", "seed", "learner", "steps", "episodes", "grad_steps", "final_return",
           "seconds")
CURVE = ("step", "return")


def run_one(args):
    """One DQN run: rows of its episode curve, its summary repeated in extra columns."""
    from sw.rl.dqn import DQNConfig, accelerators, cpu_baseline, train

    delay, seed, steps, learner_kind, env = args
    cfg = DQNConfig(env_id=env, total_steps=steps, seed=seed, priority_delay=delay)
    learner, replay = accelerators(target_period=cfg.target_period)
    if learner_kind == "torch":
        learner, _ = cpu_baseline(target_period=cfg.target_period, seed=seed)
    res = train(cfg, learner, replay)
    meta = {"grad_steps": res.grad_steps, "final_return": res.mean_return(),
            "seconds": round(res.total_seconds, 2)}
    rows = [{"step": s, "return": r, **meta} for s, r in res.episodes]
    return rows, CURVE + tuple(meta)


def summarize(out, jobs):
    summary, curves = [], {}
    for name, (delay, seed, steps, learner, _env) in jobs:
        path = out / "runs" / f"{name}.csv"
        if not path.exists():
            continue
        rows = read_csv(path)
        first = rows[0] if rows else {}
        summary.append({"delay": delay, "seed": seed, "learner": learner, "steps": steps,
                        "episodes": len(rows), "grad_steps": first.get("grad_steps", 0),
                        "final_return": float(first.get("final_return", "nan")),
                        "seconds": first.get("seconds", 0)})
        curves.setdefault(delay, []).append((np.array([int(r["step"]) for r in rows]),
                                             np.array([float(r["return"]) for r in rows])))
    write_csv(out / "delay.csv", summary, SUMMARY)
    return summary, curves


def plot(summary, curves, steps, path, window=20):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(10, 3.8))
    grid = np.linspace(0, steps, 101)[1:]
    delays = sorted(curves)
    for d in delays:
        c = smooth_curves(curves[d], grid, window)
        with warnings.catch_warnings():                 # all-nan columns before episode 1
            warnings.simplefilter("ignore", RuntimeWarning)
            m, s = np.nanmean(c, axis=0), np.nanstd(c, axis=0)
        ax0.plot(grid, m, label=f"D = {d}", lw=1.4)
        ax0.fill_between(grid, m - s, m + s, alpha=0.15)
    ax0.set_xlabel("environment steps")
    ax0.set_ylabel(f"return (last {window} episodes)")
    ax0.legend(fontsize=8)
    ax0.grid(alpha=0.3)
    x = np.arange(len(delays))
    finals = [[r["final_return"] / EXPERT for r in summary if r["delay"] == d] for d in delays]
    ax1.bar(x, [np.mean(f) for f in finals], yerr=[np.std(f) for f in finals], alpha=0.5,
            capsize=4)
    for i, f in enumerate(finals):
        ax1.plot(np.full(len(f), x[i]), f, "k.", ms=5)
    ax1.set_xticks(x, [str(d) for d in delays])
    ax1.set_xlabel("priority-update delay D (gradient steps)")
    ax1.set_ylabel(f"final return / {EXPERT:.0f}")
    ax1.set_ylim(0, 1.05)
    ax1.grid(alpha=0.3, axis="y")
    fig.suptitle("DQN + PER on CartPole-v1, priorities on the golden replay accelerator "
                 "written back D steps late: mean ± std over seeds, dots = seeds", fontsize=9)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    plt.close(fig)


def table(summary, args):
    seeds = len({r["seed"] for r in summary})
    full = seeds >= SEEDS and args.total_steps >= STEPS and args.learner == "golden"
    size = "full size" if full else "**reduced size**"
    minutes = sum(float(r["seconds"]) for r in summary) / 60
    lines = [f"{size}: {args.env}, {args.total_steps:,} environment steps per run, {seeds} seeds, "
             f"learner `{args.learner}`, replay `replay_accel_k16` golden "
             f"model; {minutes:.0f} min of training in all. {args.command}.", "",
             f"| D | final return (mean ± std over seeds) | / {EXPERT:.0f} | seeds |",
             "|---:|---:|---:|---:|"]
    for d in sorted({r["delay"] for r in summary}):
        xs = [r["final_return"] for r in summary if r["delay"] == d]
        lines.append(f"| {d} | {mean_std(xs)} | {np.mean(xs) / EXPERT:.2f} | {len(xs)} |")
    lines.append("")
    lines.append("Final return: mean of the last 20 episodes of a run.")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--delays", nargs="+", type=int, default=list(DELAYS), metavar="D")
    ap.add_argument("--seeds", type=int, default=SEEDS, help="seeds 0..N-1")
    ap.add_argument("--total-steps", type=int, default=STEPS, metavar="N")
    ap.add_argument("--learner", choices=("golden", "torch"), default="golden")
    ap.add_argument("--env", default="CartPole-v1")
    add_output_args(ap, "delay")
    args = ap.parse_args(argv)
    if args.seeds < 1:
        ap.error(f"--seeds must be a positive integer, not {args.seeds}")
    from sw.rl.dqn import DQNConfig
    try:
        for d in args.delays:
            DQNConfig(env_id=args.env, total_steps=args.total_steps, priority_delay=d)
    except ValueError as e:
        ap.error(str(e))
    args.command = command("delay", argv, args.summarize_only)
    out = Path(args.out)
    jobs = [(f"{args.env}_D{d}_s{seed}_{args.total_steps}_{args.learner}",
             (d, seed, args.total_steps, args.learner, args.env))
            for seed in range(args.seeds) for d in args.delays]
    run_jobs(jobs, run_one, out, desc="priority-update delay",
             summarize_only=args.summarize_only)
    summary, curves = summarize(out, jobs)
    fig = out / "delay.png"
    plot(summary, curves, args.total_steps, fig)
    text = table(summary, args)
    (out / "delay.md").write_text(text + "\n")
    print(text)
    print(f"wrote {out / 'delay.csv'}, {fig}, {out / 'delay.md'}")
    if args.docs:
        write_section(args.docs, "delay", text)
    if args.docs_figure:
        shutil.copyfile(fig, args.docs_figure)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
