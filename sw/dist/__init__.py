"""Distributed DQN with prioritized replay on Ray: PAAL's parallel actors and learners and SPO's
local-SGD learners, with the accelerators inside the Ray actors (docs/dist.md).

* :mod:`sw.dist.config` -- :class:`~sw.dist.config.DistConfig`, the one configuration;
* :mod:`sw.dist.actor`, :mod:`sw.dist.replay`, :mod:`sw.dist.learner`, :mod:`sw.dist.weights`
  -- the components as plain classes (usable and testable without Ray);
* :mod:`sw.dist.system` -- :class:`~sw.dist.system.DistSystem`: the components as Ray actors
  and the schedules that run them;
* :mod:`sw.dist.dqn` -- the command line (``python -m sw.dist.dqn``);
* :mod:`sw.dist.projection` -- the cost model of a cluster with one FPGA per node.

Ray is the optional extra ``dist`` (``pip install -e '.[dist]'``; ``make`` installs it). Only
:mod:`sw.dist.system` and the command line import it.
"""

from .config import DistConfig

__all__ = ["DistConfig", "init_ray", "train", "DistSystem"]


def __getattr__(name):
    if name in ("init_ray", "train", "DistSystem"):
        from . import system
        return getattr(system, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
