"""Compatibility paths of the golden models, which now live with their blocks:
``sw.golden.gae`` is :mod:`sw.gae.golden`, ``sw.golden.sumtree`` is :mod:`sw.replay.sumtree`
(the other models: :mod:`sw.gae.model`, :mod:`sw.replay.model`, :mod:`sw.learner.gemm`,
:mod:`sw.learner.mlp`)."""
