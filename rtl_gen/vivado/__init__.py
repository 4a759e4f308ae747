"""Vivado and Vitis scripts generated from an accelerator's manifest and register map.

Everything board-facing about a shipped accelerator (``hdl/<module>/``) is derived here from the
two files :func:`rtl_gen.emit.emit` writes next to its Verilog: the manifest
``<module>.json`` (ports, widths, clock and reset) and the register map ``<module>_regs.json``
(:class:`~sw.regmap.RegisterMap`). Nothing is typed twice, so the IP metadata cannot
drift from the RTL: a register added to the map appears in the packaged IP, and therefore in
the ``.hwh`` PYNQ reads, at the next ``make vivado-scripts``.

Generated per accelerator, into ``build/vivado/<module>/`` (not committed: they are a pure
function of ``hdl/``, which is committed and checked for freshness by ``tb/test_hdl.py``):

``package_ip.tcl``
    Packages the Verilog as a Vivado IP (IP-XACT ``component.xml``), VLNV :func:`vlnv`, with
    explicit bus interfaces (``s_axi_control`` AXI4-Lite, ``s_axi_mem`` AXI4, ``ap_clk``,
    ``ap_rst_n``, ``interrupt``) and one memory map per AXI slave: every register and field of
    the register map (offset, size, access, description) in ``s_axi_control``, one memory block
    in ``s_axi_mem``.
``zcu106_bd.tcl``
    ZCU106 block design (Zynq UltraScale+ PS, 300 MHz ``pl_clk0``, SmartConnects on HPM0/HPM1,
    an AXI interrupt controller for PYNQ), bitstream, and ``<module>.bit`` + ``<module>.hwh``
    side by side for ``pynq.Overlay``. An accelerator that drives its own AXI master (the fused
    trainer, ``dqn_trainer_zcu106``) has it on S_AXI_HP0_FPD into PS DDR instead of a slave on
    HPM1 (:func:`zcu106_flow`).
``alveo_xo.tcl``, ``alveo_u200.cfg``, ``alveo_u250.cfg``, ``kernel.xml``
    Vitis RTL kernel packaging (``package_xo``, ``ap_ctrl_hs``) and ``v++ --link``
    configurations. A Vitis kernel moves buffers only through AXI4 *master* ports: for a
    kernel with one (a window kernel, :class:`~rtl_gen.shell.window.WindowKernel`:
    ``m_axi_gmem``) the pointer argument and the ``m_axi`` port go into the IP and into
    ``kernel.xml``
    (:func:`kernel_xml`), and the ``.cfg`` files connect the port to a DDR bank; for an
    accelerator whose memory is an AXI4 slave the scripts stop with an explanation (see
    :data:`DMA_GAP`). A window kernel gets no ZCU106 script: ZCU106 designs need ``s_axi_mem``
    or an AXI master of the accelerator's own of at most 128 bits (the trainer's).
``ooc_timing.tcl``
    Out-of-context synthesis and implementation of the accelerator alone at
    :data:`TARGET_FREQ_MHZ` on any part: the quickest timing answer.

The generated scripts source ``rlk_common.tcl`` (this package) and the XDC files of the
repository's ``constraints/``, both package data found by :mod:`.resources`, so the flow also
works from an installed wheel; ``python -m rtl_gen.vivado`` (``make vivado``, ``make
vivado-scripts``) writes them and runs Vivado / v++ when they are on ``PATH``.

Modules: :mod:`.model` (:class:`Accelerator`, :class:`AxiInterface`, :data:`BOARDS`),
:mod:`.resources` (the package data), :mod:`.tcl` (quoting and the common prologue), one
writer per flow (:mod:`.package_ip`, :mod:`.zcu106_bd`, :mod:`.alveo`, :mod:`.ooc_timing`),
:mod:`.flows` (:func:`write_scripts`, :func:`board_commands`) and :mod:`.cli` (:func:`main`,
run by ``__main__``). Every public name is importable from this package.
"""

from sw.registry import LIBRARY, VENDOR, VERSION, vlnv

from .alveo import ALVEO_MEMORY, DMA_GAP, alveo_xo_tcl, kernel_xml, vpp_link_cfg
from .cli import main
from .flows import board_commands, write_scripts
from .model import (BOARDS, CONTROL_BLOCK, MEMORY_BLOCK, TARGET_FREQ_MHZ, Accelerator,
                    AxiInterface, Board, find_accelerators, find_manifests)
from .ooc_timing import module_timing_tcl, ooc_timing_tcl
from .package_ip import IPXACT_ACCESS, package_ip_tcl
from .tcl import tcl_str
from .zcu106_bd import (CONTROL_RANGE, HP0_DDR_SEGMENTS, HP0_PORT, HP_MAX_WIDTH, HPM0_FPD_BASE,
                        HPM1_FPD_BASE, HPM_WINDOW, ZCU106_BOARD_PART, bd_instance, zcu106_bd_tcl,
                        zcu106_flow, zcu106_refusal)

__all__ = [
    "VENDOR", "LIBRARY", "VERSION", "vlnv", "bd_instance", "TARGET_FREQ_MHZ", "BOARDS", "Board",
    "IPXACT_ACCESS", "CONTROL_BLOCK", "MEMORY_BLOCK", "DMA_GAP", "Accelerator", "AxiInterface",
    "find_accelerators", "tcl_str", "package_ip_tcl", "zcu106_bd_tcl", "alveo_xo_tcl",
    "kernel_xml", "vpp_link_cfg", "ooc_timing_tcl", "module_timing_tcl",
    "write_scripts", "board_commands", "main",
    "ALVEO_MEMORY", "find_manifests", "zcu106_flow", "zcu106_refusal",
    # The ZCU106 address plan (zcu106_bd): block-design windows the tests check against.
    "ZCU106_BOARD_PART", "HPM0_FPD_BASE", "HPM1_FPD_BASE", "HPM_WINDOW", "CONTROL_RANGE",
    # ... and where an accelerator's own AXI master goes (the trainer): S_AXI_HP0_FPD, PS DDR.
    "HP_MAX_WIDTH", "HP0_PORT", "HP0_DDR_SEGMENTS",
]
