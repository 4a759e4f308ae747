"""The trainer configurations the project defines: the shipped modules ``dqn_trainer_zcu106``
and ``dqn_trainer_u250`` (:data:`sw.registry.SHIPPED`: the 8 × 8 arrays of
``learner_kernel_s8``, the fastest synthesized learner; on the ZCU106 with batches up to 64,
so that the trainer fits the XCZU7EV's block RAM), one per board with
the learner the design space exploration picks for B <= 64 (``sw.registry.CANDIDATES``: fits
by the resource model, which matches Yosys on BRAM36 and DSP, but not generated and
synthesized yet), all with CartPole's 4-64-64-2 network; and CF'22's second network,
LunarLander's 8-256-256-4, on 16 × 16 arrays for the U250 (its fit is not checked).

All of them run on the golden device (:class:`~sw.trainer.device.TrainerGoldenDevice`) and
feed the cycle model of the benchmark; the shipped two are also in ``hdl/``.
"""

from sw.registry import candidate_config, shipped_config
from sw.replay.spec import SumTreeConfig

from .spec import TrainerConfig

__all__ = ["BOARDS", "TRAINERS", "trainer_config"]


def _learner(module="learner_kernel_s8", **changes):
    from dataclasses import replace
    _, kernel = shipped_config(module)
    return replace(kernel.accel, **changes)


#: board -> (ring capacity in records, storage port bits).
BOARDS = {"zcu106": (1 << 16, 128), "u250": (1 << 20, 512)}


def _on(board, learner):
    """A trainer on ``board`` (:data:`BOARDS`) around ``learner`` (a factory), the tree's
    batch limit the learner's."""
    capacity, width = BOARDS[board]

    def make():
        lc = learner()
        return TrainerConfig(learner=lc, tree=SumTreeConfig(fanout=16, capacity=capacity,
                                                            max_batch=lc.max_batch),
                             storage_width=width)
    return make


#: name -> (board, description, factory, module whose estimated clock applies or None: the
#: 300 MHz target, assumed).
TRAINERS = {
    "trainer_zcu106": ("zcu106", "dqn_trainer_zcu106: 2^16 records in PS DDR over a 128-bit "
                       "S_AXI_HP port", lambda: shipped_config("dqn_trainer_zcu106")[1],
                       "dqn_trainer_zcu106"),
    "trainer_u250": ("u250", "dqn_trainer_u250: 2^20 records in card DDR over a 512-bit AXI4 "
                     "master", lambda: shipped_config("dqn_trainer_u250")[1],
                     "dqn_trainer_u250"),
    "trainer_zcu106_dse": ("zcu106", "the DSE's ZCU106 learner for B <= 64 (two 8 x 8 "
                           "pipelines; modelled 70 % DSP, 50 % BRAM36, 68 % LUT; not generated "
                           "yet), 2^16 records, 128-bit S_AXI_HP",
                           _on("zcu106", lambda: candidate_config("learner_zcu106_b64")[1]),
                           None),
    "trainer_u250_dse": ("u250", "the DSE's U250 learner for B <= 64 (four 16 x 16 pipelines; "
                         "modelled 63 % DSP, 57 % LUT; not generated yet), 2^20 records, "
                         "512-bit AXI4 master",
                         _on("u250", lambda: candidate_config("learner_u250_b64")[1]), None),
    "trainer_lunarlander": ("u250", "LunarLander 8-256-256-4, 16 x 16 arrays, 2^20 records, "
                            "512-bit AXI4 master; fit not checked",
                            _on("u250", lambda: _learner(sizes=(8, 256, 256, 4), array=16,
                                                         sub_batch=16)), None),
}


def trainer_config(name: str) -> TrainerConfig:
    """The configuration ``name`` of :data:`TRAINERS` (ValueError naming the choices)."""
    if name not in TRAINERS:
        raise ValueError(f"trainer must be one of {', '.join(TRAINERS)}, not {name!r}")
    return TRAINERS[name][2]()
