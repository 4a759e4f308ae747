"""Functional coverage of the blocks' stimulus: the replay's operation mixes, the learner's
batch shapes and target-sync periods, the GAE blocks' trajectory shapes.

Each point: bins (label -> predicate of the sampled value) and, for a bin no test can reach,
the reason. The tests that produce the stimulus sample these points (``fcov.sample``)."""

from . import eq, point

__all__ = []

# The points are defined here; see tb/fcov/__init__.py for the conventions.
