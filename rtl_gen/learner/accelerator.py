"""The MLP learner accelerator: :class:`~rtl_gen.learner.core.LearnerCore` in the accelerator
shell."""

from sw.learner.layout import mem_addr_bits
from sw.learner.spec import LearnerConfig, learner_register_map

from ..shell.accelerator import AcceleratorShell
from .core import LearnerCore

__all__ = ["LearnerAccelerator"]


class LearnerAccelerator(AcceleratorShell):
    """MLP learner with the ports a Vivado block design or a Vitis/XRT kernel expects.

    :class:`~rtl_gen.shell.accelerator.AcceleratorShell` around :class:`LearnerCore`. Ports:
    ``ap_clk``, ``ap_rst_n`` (active-low synchronous reset), ``s_axi_control_*`` (AXI4-Lite,
    the registers of :func:`~sw.learner.spec.learner_register_map` in the Vitis HLS
    ``ap_ctrl_hs`` layout), ``s_axi_mem_*`` (AXI4, the memory regions of
    :mod:`sw.learner.layout`, locked with SLVERR during a step) and ``interrupt``.

    A host writes the weights (once; they stay on chip and are updated in place), per step the
    batch and the arguments (BATCH_SIZE, LR, GAMMA), sets CTRL.AP_START, waits for AP_DONE (or
    the interrupt) and reads STATUS, LOSS and whatever results it wants (Q values, TD errors
    δ, gradients, weights). DQN: the target network is synced in hardware (no extra cycles)
    on steps started with SYNC_TARGET = 1 and every SYNC_PERIOD-th step (SYNC_COUNT counts the
    steps since the last sync, STATUS.TARGET_SYNCED reports the last step's); the host may
    also write ``tw<l>`` itself. A start with a bad batch size completes at once with STATUS.ERROR
    set and memory untouched; AP_START written during a step is dropped and sets
    STATUS.START_REFUSED. Cycles of a step: :func:`sw.learner.schedule.step_cycles`
    (also in CYCLES).

    Parameters
    ----------
    config : LearnerConfig
    host_port, regmap, control_addr_width, constants
        As :class:`~rtl_gen.shell.accelerator.AcceleratorShell` (``constants`` default: the
        ``HW_*`` words of ``config``) (``host_port="local"``: the
        memory on the word port ``host``, ``axi_data_width``-bit words, for
        :class:`~rtl_gen.learner.kernel.LearnerKernel`).

    Raises
    ------
    TypeError
        If ``config`` is not a :class:`LearnerConfig`.
    """

    def __init__(self, config: LearnerConfig, *, host_port="axi", regmap=None,
                 control_addr_width=None, constants=None):
        if not isinstance(config, LearnerConfig):
            raise TypeError(f"config must be a LearnerConfig, not {config!r}")
        self._config = config
        base = learner_register_map(config)
        if constants is None:
            constants = base.info_values(config)
        abits = mem_addr_bits(config)
        wbits = abits - (config.axi_data_width // 8 - 1).bit_length()
        super().__init__(LearnerCore(config), base,
                         constants=constants,
                         host_port=host_port, mem_addr_bits=abits, mem_words=1 << wbits,
                         regmap=regmap, control_addr_width=control_addr_width)

    @property
    def config(self) -> LearnerConfig:
        return self._config
