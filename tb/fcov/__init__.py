"""Functional coverage of the tests' stimulus (cocotb-coverage): what AXI traffic the shells see,
which operation mixes the replay runs, which batch shapes the learner and which trajectory
shapes the GAE blocks are given.

The *catalogue* (:data:`POINTS`: ``fcov.axi`` for the shells' interfaces, ``fcov.blocks`` for
the replay, learner and GAE stimulus; :func:`catalogue` loads both) names every coverage point
with its labelled bins and, for a bin that no test can reach, the reason
(``Point.unreachable``). Each point is a ``cocotb_coverage`` ``CoverPoint``
of the same name; tests sample it with ``fcov.sample(name, value)`` (a bin is hit when its
predicate holds; several bins of one point may be hit by one sample).

Sampling costs a few microseconds, but the per-cycle monitors (``fcov.axi.AxiMonitor``) cost more:
tests start them only when :func:`enabled` (``RLK_COVERAGE=1``, ``make coverage``). Then each
process writes its counts (``coverage_db.export_to_yaml``) to
``build/coverage/functional/<pid>-<n>.yml`` when it exits (and whenever :func:`export` is
called), and ``scripts/functional_coverage.py`` merges the files into
``build/coverage/functional.md`` and ``.json``: each bin's hits, and every bin not hit either
with the reason it cannot be or as ``MISSED``.
"""

import atexit
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "build" / "coverage" / "functional"
COVERAGE_ENV = "RLK_COVERAGE"


def enabled() -> bool:
    """``RLK_COVERAGE=1`` (``make coverage``): start the monitors and export the counts."""
    return os.environ.get(COVERAGE_ENV, "") not in ("", "0")


# -- bin predicates -------------------------------------------------------------------------------
def eq(v):
    return lambda x: x == v


def between(lo, hi):
    """``lo <= x <= hi``."""
    return lambda x: lo <= x <= hi


def at_least(lo):
    return lambda x: x >= lo


def count_bins(*edges, top=None):
    """Bins of a count: ``edges`` 1, 2, 3, 5 give "1", "2", "3-4", "5+" (or "5-top")."""
    bins = {}
    for lo, hi in zip(edges, edges[1:]):
        bins[str(lo) if hi == lo + 1 else f"{lo}-{hi - 1}"] = between(lo, hi - 1)
    last = edges[-1]
    bins[f"{last}+" if top is None else (str(last) if top == last else f"{last}-{top}")] = (
        at_least(last) if top is None else between(last, top))
    return bins


# -- the catalogue --------------------------------------------------------------------------------
@dataclass
class Point:
    """A coverage point: ``bins`` (label -> predicate of the sampled value) and, for the bins no
    test can reach, ``unreachable`` (label -> reason)."""
    name: str
    bins: dict
    unreachable: dict = field(default_factory=dict)
    doc: str = ""

    def __post_init__(self):
        unknown = set(self.unreachable) - set(self.bins)
        if unknown:
            raise ValueError(f"{self.name}: unreachable bins {sorted(unknown)} are not bins")


POINTS: dict = {}


def point(name, bins, *, unreachable=None, doc=""):
    p = Point(name, dict(bins), dict(unreachable or {}), doc)
    if name in POINTS:
        raise ValueError(f"coverage point {name!r} defined twice")
    POINTS[name] = p
    return p


def catalogue() -> dict:
    """Every point of the project (imports ``fcov.axi`` and ``fcov.blocks``, which define them):
    name -> :class:`Point`."""
    import importlib

    for mod in ("axi", "blocks"):
        importlib.import_module(f"{__name__}.{mod}")
    return POINTS


def sample(name, value):
    """Sample ``value`` on point ``name``: every bin whose predicate holds is hit once."""
    if _FILE is None and enabled():
        _register_export()
    _cover_point(name)(value)


_SAMPLERS = {}


def _cover_point(name):
    """The ``cocotb_coverage`` ``CoverPoint`` of point ``name``, made on first use: its bins are
    the point's labels, a bin matches when its predicate holds (``inj=False``: every matching
    bin is hit)."""
    f = _SAMPLERS.get(name)
    if f is None:
        from cocotb_coverage.coverage import CoverPoint

        p = POINTS[name]
        preds = p.bins

        @CoverPoint(name, bins=list(preds), rel=lambda x, label: bool(preds[label](x)),
                    inj=False)
        def f(value):
            pass

        _SAMPLERS[name] = f
    return f


# -- export ---------------------------------------------------------------------------------------
_FILE = None


def _register_export():
    global _FILE
    if _FILE is None:
        _FILE = OUT / f"{os.getpid()}-{time.monotonic_ns()}.yml"
        atexit.register(export)


def export():
    """Write this process's counts (all points sampled so far) to its file in :data:`OUT`."""
    if _FILE is None:
        return None
    from cocotb_coverage.coverage import coverage_db

    OUT.mkdir(parents=True, exist_ok=True)
    coverage_db.export_to_yaml(str(_FILE))
    return _FILE
