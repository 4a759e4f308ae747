"""Compatibility path: the sum-tree golden models live in :mod:`sw.replay.sumtree`."""
from sw.replay.sumtree import *  # noqa: F401,F403
from sw.replay.sumtree import __all__  # noqa: F401
