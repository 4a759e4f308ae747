"""Learning curves of the RL programs (matplotlib, written to a PNG), and the file a
``--plot`` argument names (:func:`plot_path`)."""

import os
from pathlib import Path

import numpy as np

__all__ = ["plot_path", "plot_returns", "report"]


def _image_formats():
    try:
        from matplotlib.backend_bases import FigureCanvasBase
    except ImportError:
        return None
    return set(FigureCanvasBase.get_supported_filetypes())


def plot_path(path, default_name: str, *, option: str = "--plot") -> Path:
    """The file that ``option PATH`` writes, which the program then reports as written:
    ``PATH`` itself when its extension is an image format matplotlib writes (``.png``,
    ``.pdf``, ``.svg``, ...); ``PATH`` with ``.png`` appended otherwise (``run`` ->
    ``run.png``, ``run.v2`` -> ``run.v2.png``); ``PATH/default_name`` for a directory (one
    that exists, or a ``PATH`` ending in ``/``). ``ValueError`` naming ``option`` if no file
    can be written there (a part of the path is a file, or the file would be a directory) or
    matplotlib is not installed. Creates nothing."""
    text = os.fspath(path)
    if not text:
        raise ValueError(f"{option} must name a file or a directory, not {text!r}")
    formats = _image_formats()
    if formats is None:
        raise ValueError(f"{option}: writing a plot needs matplotlib (the 'rl' extra: "
                         f"pip install -e '.[rl]', or make)")
    p = Path(text)
    if text.endswith(("/", os.sep)) or p.is_dir():
        p = p / default_name
    elif p.suffix.lower().lstrip(".") not in formats:
        p = p.with_name(p.name + ".png")
    if p.is_dir():
        raise ValueError(f"{option} {text}: {p} is a directory, not a file")
    for parent in p.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ValueError(f"{option} {text}: {parent} is a file, not a directory")
            break
    return p


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


def report(finals: dict, results, path, plot):
    """End of a CLI run: each backend's final return (mean +- std over seeds, or the one
    seed's; ``finals`` maps a backend name to its seeds' returns), their ratio when two backends
    ran, and the learning curves written by ``plot(results, path)`` if ``path`` (the file,
    :func:`plot_path`) is given."""
    for name, f in finals.items():
        if len(f) == 1:
            print(f"{name}: final return {f[0]:.1f} (one seed)")
        else:
            print(f"{name}: final return {np.mean(f):.1f} +- {np.std(f):.1f} over {len(f)} "
                  f"seeds")
    if len(finals) == 2:
        (a, fa), (b, fb) = finals.items()
        print(f"ratio of mean final returns {a} / {b}: {np.mean(fa) / np.mean(fb):.2f}")
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        plot(results, path)
        print(f"wrote {path}")
