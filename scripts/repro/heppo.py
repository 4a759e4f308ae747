"""HEPPO Table III (Taha et al., section V-C): PPO under the paper's five ways of standardizing
and quantizing the rewards and values that GAE reads (``make repro-heppo``).

The experiments as the paper defines them (section V-C and Table III), each mapped onto the
project's PPO (:mod:`sw.rl.ppo`) and GAE driver (:class:`sw.gae.driver.GaeDriver`) options:

====  ========================================================  ===============================
exp.  HEPPO                                                     here
====  ========================================================  ===============================
1     baseline PPO, no standardization, no quantization         ``CpuAdvantages(None)``: float64
                                                                GAE of the raw rewards
2     dynamic standardization of rewards (no quantization)      ``CpuAdvantages(norm)``: float64
                                                                GAE, running reward statistics
3     rewards and values block-standardized, 8-bit, both        ``accelerator(units="caller")``:
      de-standardized                                           golden model, per-batch affine
                                                                8-bit codes, GAE in raw units
4     as 3, rewards kept standardized (no de-standardization)   ``accelerator(units=
                                                                "standardized", reward_
                                                                standardization="block")``
5     dynamic reward standardization, block values, 8-bit       ``accelerator(units=
      (HEPPO's choice)                                          "standardized")``
====  ========================================================  ===============================

Experiments 3-5 run on the golden model of ``gae_accel_n8`` (bit-exact with the RTL); the
critic learns the returns the advantage callable gives back (raw units in 1-3, standardized
units in 4-5). Experiment 3's per-batch quantization uses the driver's caller units
(mid-range and range of each stream as the dequantizer's offset and scale, docs/gae.md) rather
than mean and std: both are per-batch affine maps undone after dequantization. ``--reward-norm``
is how experiments 2, 4 and 5 standardize. HEPPO centres (``center``, section II-C1), the
default here, except on CartPole, whose constant +1 reward centring turns into 0 (no signal
left): there ``scale`` (divide by the RMS, the project's PPO default), which leaves +1 exactly
+1, so on CartPole experiments 1 and 2, and 4 and 5, are the same runs.
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

#: Experiment -> (label, what HEPPO reports about it: section V-C and Fig. 10).
EXPERIMENTS = {
    1: ("baseline, float, raw rewards", "baseline"),
    2: ("dynamic reward std., float", "above the baseline (Fig. 7: 1.5x on Humanoid)"),
    3: ("block std./de-std. both, 8-bit", "not stated individually"),
    4: ("block std. rewards kept std., 8-bit", "poor"),
    5: ("dynamic rewards + block values, 8-bit", "best"),
}
#: Full-size environments and environment steps per run (make repro-heppo).
ENVS = {"CartPole-v1": 100_000, "Acrobot-v1": 200_000, "LunarLander-v3": 1_000_000}
#: Reward normalization of experiments 2, 4 and 5 per environment (module docstring).
REWARD_NORMS = {"CartPole-v1": "scale"}
DEFAULT_NORM = "center"
SEEDS = 5
SUMMARY = ("env", "experiment", "seed", "reward_norm", "steps", "episodes", "final_return",
           "seconds", "gae_seconds")
CURVE = ("step", "return")


def advantages(exp, reward_norm, module):
    """The advantage callable of experiment ``exp`` (module docstring)."""
    from sw.rl.ppo import CpuAdvantages, accelerator

    if exp == 1:
        return CpuAdvantages(None)
    if exp == 2:
        return CpuAdvantages(reward_norm)
    if exp == 3:
        return accelerator("golden", module, units="caller", streaming=False)
    if exp == 4:
        return accelerator("golden", module, reward_norm=reward_norm,
                           reward_standardization="block", streaming=False)
    # One batch call per rollout, as the results in docs/results.md were measured (the streamed
    # path takes its scales from the previous batch: docs/gae.md#streaming).
    return accelerator("golden", module, reward_norm=reward_norm, streaming=False)


def run_one(args):
    """One PPO run: the episode curve as rows, plus its summary in the first row's extras."""
    from sw.gae.driver import ClippingWarning
    from sw.rl.ppo import PPOConfig, train

    env, exp, seed, steps, reward_norm, module = args
    cfg = PPOConfig(env_id=env, total_steps=steps, seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ClippingWarning)    # expected in standardized units
        res = train(cfg, advantages(exp, reward_norm, module))
    meta = {"steps": cfg.iterations * cfg.num_envs * cfg.num_steps,
            "final_return": res.mean_return(), "seconds": round(res.total_seconds, 2),
            "gae_seconds": round(res.gae_seconds, 3)}
    rows = [{"step": s, "return": r, **meta} for s, r in res.episodes]
    return rows, CURVE + tuple(meta)


def summarize(out, jobs):
    """Rebuild the summary CSV from the per-run files of ``jobs``; returns its rows and the
    curves by (env, experiment)."""
    summary, curves = [], {}
    for name, (env, exp, seed, _steps, norm, _module) in jobs:
        path = out / "runs" / f"{name}.csv"
        if not path.exists():
            continue
        rows = read_csv(path)
        first = rows[0] if rows else {}
        summary.append({"env": env, "experiment": exp, "seed": seed, "reward_norm": norm,
                        "steps": first.get("steps", 0), "episodes": len(rows),
                        "final_return": float(first.get("final_return", "nan")),
                        "seconds": first.get("seconds", 0),
                        "gae_seconds": first.get("gae_seconds", 0)})
        steps = np.array([int(r["step"]) for r in rows])
        rets = np.array([float(r["return"]) for r in rows])
        curves.setdefault((env, exp), []).append((steps, rets))
    write_csv(out / "heppo.csv", summary, SUMMARY)
    return summary, curves


def plot(curves, envs, steps, path, window=20):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, axes = plt.subplots(1, len(envs), figsize=(max(6.5, 5.2 * len(envs)), 4.2),
                             squeeze=False)
    for ax, env in zip(axes[0], envs):
        grid = np.linspace(0, steps[env], 101)[1:]
        for exp, (label, _) in EXPERIMENTS.items():
            if (env, exp) not in curves:
                continue
            c = smooth_curves(curves[(env, exp)], grid, window)
            with warnings.catch_warnings():             # all-nan columns before episode 1
                warnings.simplefilter("ignore", RuntimeWarning)
                m, s = np.nanmean(c, axis=0), np.nanstd(c, axis=0)
            ax.plot(grid, m, label=f"{exp}: {label}", lw=1.4)
            ax.fill_between(grid, m - s, m + s, alpha=0.18)
        ax.set_title(f"{env} ({len(curves.get((env, 1), []))} seeds)", fontsize=10)
        ax.set_xlabel("environment steps")
        ax.xaxis.set_major_formatter(matplotlib.ticker.EngFormatter(sep=""))   # 200k, 1M
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(f"return (last {window} episodes)")
    axes[0][-1].legend(fontsize=7, loc="best")
    fig.suptitle("HEPPO Table III experiments: PPO, GAE on the float CPU (1, 2) or the "
                 "golden model of gae_accel_n8 (3-5);\nmean ± std over seeds (identical runs "
                 "overlap)", fontsize=9)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    plt.close(fig)


def table(summary, envs, args):
    seeds = {e: len({r["seed"] for r in summary if r["env"] == e}) for e in envs}
    full = (set(envs) == set(ENVS) and min(seeds.values()) >= SEEDS
            and all(args.steps.get(e, ENVS[e]) >= ENVS[e] for e in envs))
    size = "full size" if full else "**reduced size**"
    seconds = sum(float(r["seconds"]) for r in summary)
    runs = ", ".join(f"{e} {args.steps[e]:,} steps, {seeds[e]} seeds (reward norm "
                     f"`{args.norms[e]}`)" for e in envs)
    lines = [f"{size}: {runs}; `{args.module}` golden model for 3-5; {seconds / 60:.0f} min "
             f"of training in all (sum over runs). {args.command}.", "",
             "| env | exp. | what | final return (mean ± std over seeds) | seeds | HEPPO |",
             "|---|---:|---|---:|---:|---|"]
    for env in envs:
        for exp, (label, claim) in EXPERIMENTS.items():
            xs = [r["final_return"] for r in summary
                  if r["env"] == env and r["experiment"] == exp]
            if xs:
                lines.append(f"| {env} | {exp} | {label} | {mean_std(xs)} | {len(xs)} | "
                             f"{claim} |")
    lines.append("")
    lines.append("Final return: mean of the last 20 episodes of a run.")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--envs", nargs="+", default=list(ENVS), metavar="ENV",
                    help="gymnasium environments with discrete actions")
    ap.add_argument("--experiments", nargs="+", type=int, default=list(EXPERIMENTS),
                    choices=list(EXPERIMENTS), metavar="N", help="HEPPO experiments 1-5")
    ap.add_argument("--seeds", type=int, default=SEEDS, help="seeds 0..N-1")
    ap.add_argument("--steps", nargs="+", default=[], metavar="ENV=N",
                    help=f"environment steps per run (defaults {ENVS})")
    ap.add_argument("--reward-norm", choices=("scale", "center"), default=None,
                    help=f"reward normalization of experiments 2, 4, 5 (default {DEFAULT_NORM}, "
                         f"on CartPole scale)")
    ap.add_argument("--module", default="gae_accel_n8", help="shipped GAE configuration")
    add_output_args(ap, "heppo")
    args = ap.parse_args(argv)
    if args.seeds < 1:
        ap.error(f"--seeds must be a positive integer, not {args.seeds}")
    steps = dict(ENVS)
    for item in args.steps:
        env, _, n = item.partition("=")
        if not n.isdigit() or int(n) < 1:
            ap.error(f"--steps must be ENV=N with N a positive integer, not {item!r}")
        steps[env] = int(n)
    from sw.rl.ppo import PPOConfig, _check_env
    for env in args.envs:
        why = _check_env(env)
        if why:
            ap.error(why.replace("--env", "--envs"))
        steps.setdefault(env, 100_000)
        try:
            PPOConfig(env_id=env, total_steps=steps[env])
        except ValueError as e:
            ap.error(f"--steps {env}: {e}")
    args.steps = steps
    args.norms = {e: args.reward_norm or REWARD_NORMS.get(e, DEFAULT_NORM) for e in args.envs}
    args.command = command("heppo", argv, args.summarize_only)
    out = Path(args.out)
    jobs = [(f"{env}_exp{exp}_s{seed}_{steps[env]}_{args.norms[env]}",
             (env, exp, seed, steps[env], args.norms[env], args.module))
            for env in args.envs for seed in range(args.seeds) for exp in args.experiments]
    run_jobs(jobs, run_one, out, desc="HEPPO Table III",
             summarize_only=args.summarize_only)
    summary, curves = summarize(out, jobs)
    fig = out / "heppo.png"
    plot(curves, args.envs, steps, fig)
    text = table(summary, args.envs, args)
    (out / "heppo.md").write_text(text + "\n")
    print(text)
    print(f"wrote {out / 'heppo.csv'}, {fig}, {out / 'heppo.md'}")
    if args.docs:
        write_section(args.docs, "heppo", text)
    if args.docs_figure:
        shutil.copyfile(fig, args.docs_figure)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
