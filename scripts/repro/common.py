"""What the reproduction entries of ``scripts/repro/`` share (``make repro-<name>``).

Each entry runs a list of *jobs*, one per (configuration, seed), and keeps one small CSV file
per finished job under its output directory (``runs/``), written atomically: a second
invocation skips the jobs whose file exists (resumable), so an interrupted sweep continues
where it stopped. The summary CSV, the figure and the Markdown table are rebuilt from those
files at the end of every invocation. Seeds are fixed (0..N-1), every run shows a tqdm bar,
and the total wall time is printed.

``docs/results.md`` holds one generated section per entry between the markers
``<!-- repro:NAME -->`` and ``<!-- /repro:NAME -->``; :func:`write_section` replaces it (the
text around the markers, the discussion, is written by hand).
"""

import csv
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
for _p in (ROOT, ROOT / "scripts"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

__all__ = ["ROOT", "write_csv", "read_csv", "run_jobs", "write_section", "mean_std",
           "smooth_curves", "load_average", "add_output_args", "command"]


def write_csv(path, rows, columns):
    """Write ``rows`` (dicts) with ``columns`` to ``path`` atomically (a temporary file renamed
    over it, so a killed run never leaves a half-written file that would count as done)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(columns))
        w.writeheader()
        for r in rows:
            w.writerow({c: r[c] for c in columns})
    os.replace(tmp, path)


def read_csv(path):
    """Rows of a CSV file as dicts of strings."""
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def load_average() -> str:
    try:
        return "{:.1f}, {:.1f}, {:.1f}".format(*os.getloadavg())
    except OSError:                                  # pragma: no cover - not on Linux
        return "n/a"


def run_jobs(jobs, run, out_dir, *, desc, summarize_only=False):
    """Run every job of ``jobs`` (``(name, args)`` pairs; ``name`` unique, a file name) whose
    file ``out_dir/runs/<name>.csv`` does not exist yet: ``run(args)`` returns ``(rows,
    columns)`` for that file. ``summarize_only``: run none (the outputs are then rebuilt from
    the finished runs alone). Returns ``(ran, skipped)`` counts and prints the total time."""
    from sw.console import progress_bar

    runs = Path(out_dir) / "runs"
    todo = [(n, a) for n, a in jobs if not (runs / f"{n}.csv").exists()]
    skipped = len(jobs) - len(todo)
    if skipped:
        print(f"{desc}: {skipped} of {len(jobs)} runs already finished in {runs}, skipped",
              flush=True)
    if summarize_only:
        print(f"{desc}: --summarize-only, {len(todo)} unfinished runs left out", flush=True)
        todo = []
    t0 = time.perf_counter()
    for name, args in progress_bar(todo, desc=desc, unit="run", disable=not todo):
        rows, columns = run(args)
        write_csv(runs / f"{name}.csv", rows, columns)
    print(f"{desc}: {len(todo)} runs in {time.perf_counter() - t0:.1f} s "
          f"(load average {load_average()})", flush=True)
    return len(todo), skipped


def add_output_args(ap, name):
    """The output options every entry shares: ``--out``, ``--docs``, ``--docs-figure``,
    ``--summarize-only``."""
    ap.add_argument("--out", default=str(ROOT / "build" / "repro" / name),
                    help="output directory (runs/ holds one file per finished run)")
    ap.add_argument("--docs", default=None,
                    help=f"Markdown file whose repro:{name} section is replaced by the table")
    ap.add_argument("--docs-figure", default=None, help="copy the figure here too")
    ap.add_argument("--summarize-only", action="store_true",
                    help="run nothing: rebuild the CSV, figure and table from finished runs")


def command(script, argv, summarize_only=False) -> str:
    """How the table was made, for its header: the command line without the output options
    (``--docs``, ``--docs-figure``) and, after ``--summarize-only``, saying so."""
    argv = list(sys.argv[1:] if argv is None else argv)
    kept, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a in ("--docs", "--docs-figure"):
            skip = True
        elif a != "--summarize-only" and not a.startswith(("--docs=", "--docs-figure=")):
            kept.append(a)
    line = " ".join([f"python scripts/repro/{script}.py"] + kept)
    if summarize_only:
        return f"Rebuilt from the finished runs by `{line} --summarize-only`"
    return f"Command: `{line}`"


def write_section(path, name, text):
    """Replace the text between ``<!-- repro:name -->`` and ``<!-- /repro:name -->`` of the
    Markdown file ``path`` by ``text`` (ValueError if the markers are missing)."""
    path = Path(path)
    doc = path.read_text()
    start, end = f"<!-- repro:{name} -->", f"<!-- /repro:{name} -->"
    i, j = doc.find(start), doc.find(end)
    if i < 0 or j < i:
        raise ValueError(f"{path} must contain the markers {start} and {end}")
    path.write_text(doc[:i + len(start)] + "\n" + text.strip("\n") + "\n" + doc[j:])


def mean_std(xs) -> str:
    """``mean ± std`` (population std over seeds) of ``xs``, or ``n/a``."""
    xs = [x for x in xs if np.isfinite(x)]
    if not xs:
        return "n/a"
    return f"{np.mean(xs):.1f} ± {np.std(xs):.1f}"


def smooth_curves(curves, grid, window):
    """Per curve (``(steps, returns)`` arrays of finished episodes), the mean return of the
    last ``window`` episodes finished by each step of ``grid`` (nan before the first):
    ``[len(curves), len(grid)]``."""
    out = np.full((len(curves), len(grid)), np.nan)
    for i, (steps, rets) in enumerate(curves):
        if len(steps) == 0:
            continue
        csum = np.concatenate([[0.0], np.cumsum(rets)])
        n = np.searchsorted(steps, grid, side="right")          # episodes finished by then
        lo = np.maximum(n - window, 0)
        ok = n > 0
        out[i, ok] = (csum[n[ok]] - csum[lo[ok]]) / (n[ok] - lo[ok])
    return out
