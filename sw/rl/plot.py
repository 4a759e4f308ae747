"""Learning curves of the RL programs (matplotlib, written to a PNG)."""

import numpy as np

__all__ = ["plot_returns", "report"]


def plot_returns(results, path, *, title, window=20, legend="lower right"):
    """Episode return against environment steps: one line per result (``result.episodes`` is
    a list of ``(env step, return)``), a moving average over ``window`` episodes, one colour
    and one legend entry per ``result.name`` (several seeds of a backend share them)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    colours = {}
    for res in results:
        if not res.episodes:
            continue
        steps, rets = np.array(res.episodes).T
        k = min(window, len(rets))
        smooth = np.convolve(rets, np.ones(k) / k, mode="valid")
        first = res.name not in colours
        colours.setdefault(res.name, f"C{len(colours)}")
        ax.plot(steps[k - 1:], smooth, color=colours[res.name], alpha=0.8, lw=1.2,
                label=res.name if first else None)
    ax.set_xlabel("environment steps")
    ax.set_ylabel(f"episode return ({window}-episode mean)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc=legend, fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def report(finals: dict, results, plot_path, plot):
    """End of a CLI run: each backend's final return (mean +- std over seeds; ``finals`` maps
    a backend name to its seeds' returns), their ratio when two backends ran, and the learning
    curves written by ``plot(results, path)`` if ``plot_path`` is given."""
    for name, f in finals.items():
        print(f"{name}: final return {np.mean(f):.1f} +- {np.std(f):.1f} over {len(f)} seeds")
    if len(finals) == 2:
        (a, fa), (b, fb) = finals.items()
        print(f"ratio of mean final returns {a} / {b}: {np.mean(fa) / np.mean(fb):.2f}")
    if plot_path:
        from pathlib import Path
        Path(plot_path).parent.mkdir(parents=True, exist_ok=True)
        plot(results, plot_path)
        print(f"wrote {plot_path}")
