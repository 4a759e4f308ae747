"""Prioritized replay accelerator: :class:`~rtl_gen.replay.core.ReplayCore` (the K-ary sum
tree, batch buffers and engine) in the accelerator shell."""

from sw.replay.spec import REGIONS, SumTreeConfig, mem_addr_bits, region_words, replay_register_map

from ..shell.accelerator import AcceleratorShell
from .core import ReplayCore

__all__ = ["ReplayAccelerator"]


class ReplayAccelerator(AcceleratorShell):
    """Prioritized replay with the ports a Vivado block design or a Vitis/XRT kernel expects.

    :class:`~rtl_gen.shell.accelerator.AcceleratorShell` around
    :class:`~rtl_gen.replay.core.ReplayCore`: a :class:`~rtl_gen.replay.sumtree.SumTree`
    (one operation per cycle, latency ``L = level_latency * levels + 10``,
    :attr:`~sw.replay.spec.SumTreeConfig.latency`), five batch buffers
    (:data:`~sw.replay.spec.REGIONS`, one
    memory each, ``region_words`` deep, only their used bits wide) and a batch engine. Ports:
    ``ap_clk``, ``ap_rst_n`` (active-low synchronous reset), ``s_axi_control_*`` (AXI4-Lite,
    :func:`~sw.replay.spec.replay_register_map`, ``ap_ctrl_hs``), ``s_axi_mem_*`` (AXI4,
    64-bit, the buffers; SLVERR while a run is in progress) and ``interrupt``.

    A run (OP, BATCH_SIZE, UPDATE_SIZE latched at AP_START): the engine reads one command per
    cycle from the input buffers into the tree (a one-cycle buffer read, then the command
    register) and writes every response into IDX_OUT/PRIO_OUT at the next free entry in the
    cycle it leaves the tree. It ends when every command has been taken, every response is
    written and :data:`~sw.replay.spec.TAIL` cycles have passed since the last command.
    Updates are *posted*: the run does not wait for them to leave the tree, because the tree
    is sequentially consistent: every later operation, of this run or the next, sees them.
    Hence

    * B samples, inserts or reads: ``B + L + 3`` cycles (:func:`sw.replay.spec.run_cycles`);
    * B updates: ``B + 6``;
    * UPDATE_SAMPLE, U updates then B samples: ``U + B + L + 3``; RELAXED (samples first,
      updates after them: the samples see the tree before this run's updates):
      ``B + max(L, U + 3) + 3``: the samples' trip through the tree overlaps the issue of
      the updates, which saves ``L - 3`` cycles once ``U >= L - 3``. One operation per cycle
      either way: relaxing the order adds no throughput to a pipeline that never stalls.

    A start with invalid arguments (OP.CODE > 7, BATCH_SIZE or UPDATE_SIZE 0 or above
    ``max_batch``) ends at once with STATUS.ERROR set, tree and buffers untouched; AP_START
    written during a run is dropped and flagged STATUS.START_REFUSED. The tree's sticky flags
    (STATUS.EMPTY, SATURATED, INVALID_INDEX) are cleared at each accepted start.

    After ``ap_rst_n`` (and a RESET run) the tree zeroes its memories in ``level_groups[-1]``
    cycles (STATUS.TREE_BUSY); a run started meanwhile waits for it, and a RESET run ends after
    it. SEED waits until no operation is in the tree, then loads the PRNG.

    Parameters
    ----------
    config : SumTreeConfig
        The tree; ``max_batch`` sizes the buffers.
    host_port : str
        ``"axi"`` (default): the buffers behind ``s_axi_mem``, clocked by ``ap_clk``.
        ``"local"``: no ``s_axi_mem``, ``ap_clk``, ``ap_rst_n``; the buffers on the word port
        ``host`` (:class:`~rtl_gen.shell.signatures.MemoryPortSignature`, 64-bit words, the
        same word addresses, ``host.enable = ~busy``), in the parent's ``sync`` domain: for a
        DMA shell (:class:`~rtl_gen.shell.window.WindowKernel`).
    regmap : RegisterMap or None
        The control map: :func:`~sw.replay.spec.replay_register_map` (default) or one
        that adds registers after it (a DMA shell drives them through :attr:`csr`).
    control_addr_width : int or None
        Address bits of ``s_axi_control`` (default the map's minimum).

    Members
    -------
    ap_clk, ap_rst_n : ``In(1)``
        Clock (rising edge) and synchronous active-low reset.
    s_axi_control_* : AXI4-Lite slave, 32-bit data, ``regmap.min_addr_width`` address bits
        The registers of :func:`~sw.replay.spec.replay_register_map`.
    s_axi_mem_* : AXI4 slave, 64-bit data, ``mem_addr_bits(config)`` address bits, 1-bit IDs
        The batch buffers (:mod:`sw.replay.spec`).
    interrupt : ``Out(1)``
        ``GIER & |IP_ISR``.

    Raises
    ------
    TypeError
        If ``config`` is not a :class:`SumTreeConfig` (its own parameters are checked there).
    """

    def __init__(self, config: SumTreeConfig, *, host_port="axi", regmap=None,
                 control_addr_width=None, constants=None):
        if not isinstance(config, SumTreeConfig):
            raise TypeError(f"config must be a SumTreeConfig, not {config!r}")
        self._config = config
        base = replay_register_map(config)
        if constants is None:
            constants = base.info_values(config)
        super().__init__(ReplayCore(config), base,
                         constants=constants,
                         host_port=host_port, mem_addr_bits=mem_addr_bits(config),
                         mem_words=len(REGIONS) * region_words(config), regmap=regmap,
                         control_addr_width=control_addr_width)

    @property
    def config(self) -> SumTreeConfig:
        return self._config

    @property
    def latency(self) -> int:
        """Latency of the tree (:attr:`~sw.replay.spec.SumTreeConfig.latency`): a response
        leaves the tree that many cycles after its command entered it."""
        return self._config.latency
