"""Compatibility path: the GAE golden models live in :mod:`sw.gae.golden`."""
from sw.gae.golden import *  # noqa: F401,F403
from sw.gae.golden import __all__  # noqa: F401
