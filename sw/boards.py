"""The boards the project targets: one table of their parts, resources, clocks and host links.

Every place that needs a board fact reads it here: the Vivado/Vitis flows
(:data:`rtl_gen.vivado.BOARDS` is this :data:`BOARDS`), the learner's design space exploration
(``scripts/dse_learner.py``, :data:`DEVICES`), the resource estimates' fit check
(``scripts/estimate.py --device``), the block design's hardware handoff (the ZCU106's
``pl_clk0``) and the end-to-end benchmark (``scripts/bench/``: which bus model a board's
host talks through). Plain Python: it imports without Amaranth (a board's host has no
generator stack).

Sources are stated per entry: the resources from AMD's data sheets (whole device, the platform
shell not subtracted), the parts and platforms from the boards' Vivado board files and Vitis
platforms, the clock from :data:`sw.timing.TARGET_MHZ` (the one target of every flow).
"""

from dataclasses import dataclass

from sw.timing import TARGET_MHZ

__all__ = ["Device", "Board", "BOARDS", "DEVICES", "TARGET_MHZ"]


@dataclass(frozen=True)
class Device:
    """Resources of a target device (whole device; the platform shell is not subtracted).

    Parameters
    ----------
    name : str
        The board as reports print it (``"ZCU106"``, ``"Alveo U200"``).
    part : str
        The device as reports print it (``"XCZU7EV-2FFVC1156"``; for the Alveo cards the
        card's device and its Virtex UltraScale+ class).
    lut, ff, dsp, bram36, uram : int
        LUTs, flip-flops, DSP48E2 slices, 36 Kb block RAMs, 288 Kb UltraRAMs.
    source : str
        Where the numbers come from.
    """
    name: str
    part: str
    lut: int
    ff: int
    dsp: int
    bram36: int
    uram: int
    source: str


@dataclass(frozen=True)
class Board:
    """A target board.

    Parameters
    ----------
    name : str
        ``make vivado BOARD=`` value, and the key of :data:`BOARDS`.
    part : str
        FPGA part, as Vivado names it.
    flow : str
        ``"bd"`` (Vivado block design with a Zynq PS) or ``"vitis"`` (Alveo kernel).
    platform : str or None
        Vitis platform (``"vitis"`` flows).
    device : Device or None
        The part's resources (:data:`DEVICES`).
    clock_mhz : float
        The kernel clock the flow asks for: :data:`sw.timing.TARGET_MHZ` on every board
        (``pl_clk0`` of the PS on the ZCU106, ``v++ --kernel_frequency`` on Alveo).
    clock_divisors : tuple of int or None
        How the board makes that clock where the project sets it itself: the ZCU106's
        ``pl_clk0`` is IOPLL / divisor0 / divisor1 on the board preset.
    clock_actual_mhz : float or None
        The frequency those divisors give (what the hardware handoff reports).
    host_bus : str or None
        How the host reaches the accelerator, the key of the end-to-end benchmark's bus models
        (``scripts/bench/common.py``, ``BUSES``): ``"zcu106"`` (the A53s' programmed I/O over
        ``M_AXI_HPM0_FPD``) or ``"alveo"`` (PCIe Gen3 x16 through XRT).
    """
    name: str
    part: str
    flow: str
    platform: str | None = None
    device: Device | None = None
    clock_mhz: float = TARGET_MHZ
    clock_divisors: tuple | None = None
    clock_actual_mhz: float | None = None
    host_bus: str | None = None


#: The boards, by ``make vivado BOARD=`` name.
BOARDS = {
    "zcu106": Board(
        "zcu106", "xczu7ev-ffvc1156-2-e", "bd",
        device=Device(
            "ZCU106", "XCZU7EV-2FFVC1156", lut=230_400, ff=460_800, dsp=1_728, bram36=312,
            uram=96,
            source="AMD DS891 (Zynq UltraScale+ MPSoC Data Sheet: Overview), EV device table, "
                   "XCZU7EV: 230.4K LUTs, 460.8K FFs, 1,728 DSP, 11.0 Mb BRAM = 312 x 36 Kb, "
                   "27 Mb URAM = 96 x 288 Kb"),
        # pl_clk0 on the ZCU106 preset: IOPLL (1499.985 MHz) / 5 / 1 (the block design asks
        # for TARGET_MHZ; the PS picks the divisors).
        clock_divisors=(5, 1), clock_actual_mhz=299.997,
        host_bus="zcu106"),
    "u200": Board(
        "u200", "xcu200-fsgd2104-2-e", "vitis", "xilinx_u200_gen3x16_xdma_2_202110_1",
        device=Device(
            "Alveo U200", "XCU200 (VU9P class)", lut=1_182_000, ff=2_364_000, dsp=6_840,
            bram36=2_160, uram=960,
            source="AMD DS962 (Alveo U200 and U250 Data Center Accelerator Cards Data Sheet): "
                   "1,182K LUTs, 2,364K registers, 6,840 DSP, 75.9 Mb BRAM = 2,160 x 36 Kb, "
                   "270 Mb URAM = 960 x 288 Kb"),
        host_bus="alveo"),
    "u250": Board(
        "u250", "xcu250-figd2104-2L-e", "vitis", "xilinx_u250_gen3x16_xdma_4_1_202210_1",
        device=Device(
            "Alveo U250", "XCU250 (VU13P class)", lut=1_728_000, ff=3_456_000, dsp=12_288,
            bram36=2_688, uram=1_280,
            source="AMD DS962: 1,728K LUTs, 3,456K registers, 12,288 DSP, 94.5 Mb BRAM = "
                   "2,688 x 36 Kb, 360 Mb URAM = 1,280 x 288 Kb"),
        host_bus="alveo"),
}

#: Resource budgets by board name: the :attr:`Board.device` of each of :data:`BOARDS`.
DEVICES = {name: b.device for name, b in BOARDS.items() if b.device is not None}
