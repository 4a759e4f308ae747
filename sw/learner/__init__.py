"""The learner (CF'22 section 3.2) on the host: specification (:mod:`.spec`, :mod:`.numerics`,
:mod:`.layout`, :mod:`.schedule`), golden models (:mod:`.gemm`, :mod:`.mlp`), golden device
(:mod:`.device`) and driver (:mod:`.driver`)."""
