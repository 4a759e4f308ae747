"""The HEPPO GAE accelerator as a Vitis/XRT kernel: core + AXI4-Lite control + AXI4 DMA master.

Vitis links a kernel to device memory only through AXI4 *master* ports (UG1393, "Kernel
Interface Requirements"). :class:`GaeKernel` puts the GAE core behind one, ``m_axi_gmem``: the
host allocates one buffer holding the memory image of :mod:`sw.gae.layout` (the byte layout of
the :class:`~rtl_gen.gae.accelerator.GaeAccelerator`'s ``s_axi_mem`` window), writes its
device address into the 64-bit pointer register ``MEM_PTR`` and starts the kernel; the kernel
copies the rows the run reads into its on-chip memory, runs the core, copies the result rows
back into the buffer and only then signals AP_DONE. This is the *DMA shell contract* of
:mod:`sw.driver.xrt_device`.
"""

from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module, Signal, signed, unsigned
from amaranth.lib import wiring

from ..axi.dma import AxiDma
from ..axi.lite_csr import AxiLiteCsr
from ..axi.shell import ap_ctrl_hs, connect_bridges, drive_constants, shell_domain, shell_members
from ..axi.window_kernel import (CONTROL_ADDR_WIDTH, GMEM, GMEM_WIDTHS, KERNEL_POINTER,
                                 without_dma_params)
from ..regmap import Field, Register, RegisterMap
from .config import GaeCoreConfig
from .core import GAE_CORE_ARGS, MAX_RUN_TRAJECTORIES, GaeCore
from .regs import STATUS_FLAGS, gae_register_map, hw_info_values

__all__ = ["GaeKernelConfig", "GaeKernel", "gae_kernel_register_map", "copy_plan",
           "KERNEL_POINTER", "GMEM"]


def _check_int(name, value, lo, hi):
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise ValueError(f"{name} must be an integer in {lo}..{hi}, not {value!r}")


@dataclass(frozen=True)
class GaeKernelConfig(GaeCoreConfig):
    """Parameters of :class:`GaeKernel`: those of :class:`GaeCoreConfig` and the DMA's.

    Parameters
    ----------
    gmem_data_width : int
        Data width W of ``m_axi_gmem`` in bits: 32, 64, 128, 256 or 512, at least
        ``axi_data_width`` (the core's memory word D) and at most 8 times the bytes of a memory
        region. 512 matches the Alveo DDR interfaces. The copy rate is one D-bit word per cycle
        whatever W is: a wider W only means fewer, fuller beats.
    max_burst : int
        Most beats per AXI burst, 1..256 (bursts never cross 4 KiB either).
    max_outstanding : int
        Most bursts in flight per direction, 1..32.

    The other parameters are :class:`GaeCoreConfig`'s; :attr:`core` is that part alone.
    """
    gmem_data_width: int = 512
    max_burst: int = 256
    max_outstanding: int = 4

    def __post_init__(self):
        super().__post_init__()
        if self.gmem_data_width not in GMEM_WIDTHS or isinstance(self.gmem_data_width, bool) \
                or self.gmem_data_width < self.axi_data_width:
            raise ValueError(f"gmem_data_width must be one of "
                             f"{', '.join(map(str, GMEM_WIDTHS))} and at least axi_data_width "
                             f"({self.axi_data_width}), not {self.gmem_data_width!r}")
        if self.region_bytes % (self.gmem_data_width // 8):
            raise ValueError(f"gmem_data_width must be at most 8 * region_bytes "
                             f"({8 * self.region_bytes}), not {self.gmem_data_width!r}")
        _check_int("max_burst", self.max_burst, 1, 256)
        _check_int("max_outstanding", self.max_outstanding, 1, 32)

    @property
    def core(self) -> GaeCoreConfig:
        """The :class:`GaeCoreConfig` part (what the core, its register map and driver use)."""
        return without_dma_params(self, GaeCoreConfig)

    @property
    def pointer_align(self) -> int:
        """Alignment of ``MEM_PTR`` in bytes (``gmem_data_width / 8``)."""
        return self.gmem_data_width // 8

    @classmethod
    def from_dict(cls, d: dict) -> "GaeKernelConfig":
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown GAE kernel parameter(s): {', '.join(sorted(unknown))}")
        return cls(**d)


def gae_kernel_register_map(config: GaeKernelConfig) -> RegisterMap:
    """:func:`~rtl_gen.gae.regs.gae_register_map` of the core, then the kernel's registers.

    At the GAE map's span (``gae_register_map(config.core).span``), in order: ``MEM_PTR_LO``
    and ``MEM_PTR_HI`` (the 64-bit buffer address, low word first, as XRT writes a pointer
    argument; the bits below ``log2(gmem_data_width / 8)`` are not stored and read 0),
    ``DMA_STATUS`` (error responses during the last run's copies) and ``DMA_CYCLES``.
    """
    if not isinstance(config, GaeKernelConfig):
        raise TypeError(f"config must be a GaeKernelConfig, not {config!r}")
    base = gae_register_map(config.core)
    lo = (config.pointer_align - 1).bit_length()
    extra = [
        Register("MEM_PTR_LO", None, (
            Field("MEM_PTR_LO", lo, 32 - lo, "rw",
                  doc=f"buffer address bits 31:{lo} (bits {lo - 1}:0 read 0: the buffer is "
                      f"{config.pointer_align}-byte aligned)"),),
            doc="device address of the memory image (low word)"),
        Register.scalar("MEM_PTR_HI", 32, "rw", doc="device address of the memory image (high "
                                                     "word)"),
        Register("DMA_STATUS", None, (
            Field("READ_ERROR", 0, 1, "ro", doc="a read of the image was not answered OKAY"),
            Field("WRITE_ERROR", 1, 1, "ro", doc="a write of the results was not answered "
                                                 "OKAY")),
            doc="device-memory errors of the last run's copies (cleared at start)"),
        Register.scalar("DMA_CYCLES", 32, "ro",
                        doc="cycles of the last kernel run: copy-in, core run, copy-out"),
    ]
    return RegisterMap.with_ap_ctrl_hs("gae_kernel", base.user_registers + tuple(extra),
                                       doc="HEPPO GAE accelerator as a Vitis kernel (DMA shell)")


def copy_plan(config: GaeCoreConfig, num_timesteps: int, num_trajectories: int) -> dict:
    """The blocks a valid run copies: ``{"in": [...], "out": [...]}`` of ``(region, byte
    offset in the image, bytes)``, in the order the kernel copies them.

    With ``G = ceil(M / n_pe)``: in, rows ``0..T-1`` of ``rewards`` and ``dones`` and rows
    ``0..T`` of ``values`` (the bootstrap row); out, rows ``0..T-1`` of the result regions
    (``rewards`` and ``values`` in place, ``adv`` and ``rtg`` at full precision). Row ``t`` of
    a region is words ``t*G .. t*G+G-1``, so every block starts at its region's base.
    """
    G = -(-num_trajectories // config.n_pe)
    T = num_timesteps

    def block(name, rows):
        base = config.regions.index(name) * config.region_bytes
        return (name, base, rows * config.region_sub_words(name) * config.axi_data_width // 8)

    outs = ("rewards", "values") if config.results == "inplace" else ("adv", "rtg")
    return {"in": [block("rewards", T * G), block("values", (T + 1) * G),
                   block("dones", T * G)],
            "out": [block(name, T * G) for name in outs]}


class GaeKernel(wiring.Component):
    """The GAE core behind an AXI4-Lite control port and an AXI4 DMA master: a Vitis kernel.

    Parameters
    ----------
    config : GaeKernelConfig

    Members
    -------
    ap_clk : ``In(1)``
        The clock of everything.
    ap_rst_n : ``In(1)``
        Active-low synchronous reset.
    s_axi_control_* : AXI4-Lite slave, 32-bit data, 12-bit address
        The registers of :func:`gae_kernel_register_map` (ap_ctrl_hs; unmapped addresses of
        the 4 KiB window answer SLVERR).
    m_axi_gmem_* : AXI4 master, 64-bit address, ``gmem_data_width`` data, 1-bit IDs (always 0)
        Reads the memory image and writes the results (:class:`~rtl_gen.axi.dma.AxiDma`).
    interrupt : ``Out(1)``
        ``GIER & |IP_ISR``.

    A run, started by CTRL.AP_START while idle (AP_READY at once, the arguments and MEM_PTR are
    latched, so the host may write the next ones during the run):

    1. size check (``G = ceil(M / n_pe)`` cycles, fewer if the arguments are invalid): the
       core's argument checks, and ``G``;
    2. copy-in (arguments valid only): the blocks of :func:`copy_plan` ``["in"]`` from
       ``MEM_PTR + offset`` into the core's memory, one block after the other, one core
       memory word (``axi_data_width`` bits) per cycle;
    3. the core run (:meth:`GaeCore.run_cycles` cycles; refused at once with STATUS.ERROR set
       if the arguments are invalid);
    4. copy-out (only if STATUS.ERROR = 0): the blocks of :func:`copy_plan` ``["out"]`` back to
       the buffer, completed when the last write response has arrived;
    5. AP_DONE and the interrupt.

    A refused run therefore reads and writes no device memory at all. AP_START written during
    a run is dropped and flagged in STATUS.START_REFUSED, as on the accelerator. STATUS and
    CYCLES describe the core's last run (they change when the core starts, after the copy-in);
    DMA_STATUS flags error responses of the last run's copies (the run goes on regardless);
    DMA_CYCLES counts the cycles the kernel is busy (steps 1-5).

    Cycles (DMA_CYCLES) of a valid run when device memory never stalls and answers with
    latency L (first R beat L cycles after its AR handshake, B L cycles after the last W beat):
    ``G + sum over the 5 blocks of (N_b + L + 5) + run_cycles + 2``, ``N_b`` the block's core
    words (bytes of :func:`copy_plan` / ``axi_data_width / 8``): :meth:`run_cycles`, asserted
    exactly by the fast tier. Copy rate: ``axi_data_width / 8`` bytes per cycle whatever
    ``gmem_data_width`` is (the core's memory port moves one word per cycle). HEPPO's 64 x 1024
    on 8 PEs (``gae_kernel_n8``, cocotbext-axi ``AxiRam``): 49 234 cycles = 8 221 core run
    + 41 013 copy (640 KiB at 15.98 bytes per cycle), 164 us at 300 MHz.
    """

    def __init__(self, config: GaeKernelConfig):
        if not isinstance(config, GaeKernelConfig):
            raise TypeError(f"config must be a GaeKernelConfig, not {config!r}")
        self._config = config
        core_cfg = config.core
        self._regmap = gae_kernel_register_map(config)
        D = config.axi_data_width
        self._csr = AxiLiteCsr(self._regmap, prefix="s_axi_control",
                               addr_width=CONTROL_ADDR_WIDTH)
        self._dma = AxiDma(
            data_width=config.gmem_data_width, mem_data_width=D,
            mem_addr_width=core_cfg.mem_addr_bits - (D // 8 - 1).bit_length(), addr_width=64,
            max_burst=config.max_burst, max_outstanding=config.max_outstanding, prefix=GMEM)
        super().__init__(shell_members(self._csr, self._dma))

    @property
    def config(self) -> GaeKernelConfig:
        return self._config

    @property
    def regmap(self) -> RegisterMap:
        return self._regmap

    @staticmethod
    def run_cycles(config: GaeKernelConfig, num_timesteps: int, num_trajectories: int, *,
                   latency: int) -> int:
        """DMA_CYCLES of a valid run when device memory never stalls and answers ``latency``
        cycles after a request (first R beat after its AR handshake, B after the last W beat).
        """
        G = -(-num_trajectories // config.n_pe)
        plan = copy_plan(config, num_timesteps, num_trajectories)
        words = [n // (config.axi_data_width // 8) for _, _, n in plan["in"] + plan["out"]]
        return (G + sum(n + latency + 5 for n in words)
                + GaeCore.run_cycles(config.core, num_timesteps, num_trajectories) + 2)

    @property
    def kernel_manifest(self) -> dict:
        """What a Vitis ``kernel.xml`` needs beyond the ports and the register map.

        ``m_axi``: per master port, the burst and outstanding limits (IP bus parameters);
        ``pointers``: per pointer argument, its name, the port it addresses and its two
        register words; ``scalars``: the registers that are kernel arguments.
        """
        cfg = self._config
        return {
            "m_axi": {GMEM: {"data_width": cfg.gmem_data_width, "max_burst": cfg.max_burst,
                             "outstanding": cfg.max_outstanding}},
            "pointers": [{"name": KERNEL_POINTER, "port": GMEM, "lo": f"{KERNEL_POINTER}_LO",
                          "hi": f"{KERNEL_POINTER}_HI",
                          "offset": self._regmap.offset(f"{KERNEL_POINTER}_LO")}],
            "scalars": [name.upper() for name in GAE_CORE_ARGS(cfg.core)],
        }

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        core_cfg = cfg.core
        shell_domain(m, self)

        csr, dma = self._csr, self._dma
        m.submodules.csr = csr
        m.submodules.dma = dma
        m.submodules.core = core = GaeCore(core_cfg)

        connect_bridges(m, self, csr, dma)

        # -- arguments, latched when a run is accepted --------------------------------------
        specs = GAE_CORE_ARGS(core_cfg)
        arg = {name: Signal(signed(w) if s else unsigned(w), name=f"arg_{name}")
               for name, (w, s) in specs.items()}
        for name in specs:
            m.d.comb += getattr(core, name).eq(arg[name])
        lo = (cfg.pointer_align - 1).bit_length()
        ptr = Signal(64)

        busy = Signal()
        done = Signal()
        skip = Signal()                   # arguments invalid: no copies
        read_error, write_error = Signal(), Signal()
        kcycles = Signal(32)
        accept = Signal()                 # a start is taken (IDLE, AP_START set)
        m.d.comb += accept.eq(~busy & csr.ap_start)
        start_refused, _ = ap_ctrl_hs(m, self, csr, busy=busy, done=done, clear=accept)
        m.d.sync += [csr.ap_ready.eq(0), done.eq(0)]
        with m.If(busy):
            m.d.sync += kcycles.eq(kcycles + 1)

        # -- sizes, as the core derives them (G groups, rows = (T + 1) * G) --------------------
        ab = core_cfg.addr_bits
        T = arg["num_timesteps"]
        G = Signal(13)
        rem = Signal(signed(14))
        rows = Signal(ab + 2)
        tg = Signal(ab + 2)               # T * G
        one = 1 << core_cfg.pe.coef_frac
        depth = core_cfg.depth

        # -- copy blocks: (region, rows signal) -> DMA commands --------------------------------
        D_bytes = core_cfg.axi_data_width // 8
        plan_rows = {"in": [("rewards", tg), ("values", rows), ("dones", tg)],
                     "out": [(name, tg) for name in (("rewards", "values")
                                                     if core_cfg.results == "inplace"
                                                     else ("adv", "rtg"))]}

        def command(region, n_rows, to_device):
            base = core_cfg.regions.index(region) * core_cfg.region_bytes
            sub_bits = (core_cfg.region_sub_words(region) - 1).bit_length()
            return [dma.cmd.payload.dev_addr.eq(ptr + base),
                    dma.cmd.payload.mem_addr.eq(base // D_bytes),
                    dma.cmd.payload.words.eq(n_rows << sub_bits),
                    dma.cmd.payload.to_device.eq(to_device)]

        with m.FSM(name="kernel"):
            with m.State("IDLE"):
                with m.If(csr.ap_start):
                    m.d.sync += [busy.eq(1), csr.ap_ready.eq(1), kcycles.eq(0),
                                 read_error.eq(0), write_error.eq(0),
                                 ptr.eq(Cat(Const(0, lo), csr.mem_ptr_lo, csr.mem_ptr_hi)),
                                 G.eq(0), rem.eq(csr.num_trajectories), rows.eq(0)]
                    for name in specs:
                        m.d.sync += arg[name].eq(getattr(csr, name))
                    bad = ((csr.num_timesteps == 0) | (csr.num_trajectories == 0)
                           | (csr.num_timesteps >= depth)
                           | (csr.num_trajectories > MAX_RUN_TRAJECTORIES)
                           | (csr.gamma > one) | (csr.gamma_lambda > one))
                    m.d.sync += skip.eq(bad)
                    with m.If(bad):
                        m.next = "START"
                    with m.Else():
                        m.next = "SIZE"
            with m.State("SIZE"):
                # One group per cycle, exactly as the core's SETUP state.
                nxt_rows = rows + T + 1
                with m.If(nxt_rows > depth):
                    m.d.sync += skip.eq(1)
                    m.next = "START"
                with m.Else():
                    m.d.sync += [G.eq(G + 1), rem.eq(rem - core_cfg.n_pe), rows.eq(nxt_rows),
                                 tg.eq(nxt_rows - G - 1)]
                    with m.If(rem <= core_cfg.n_pe):
                        m.next = "IN_0"
            for phase, after in (("IN", "START"), ("OUT", "FINISH")):
                blocks = plan_rows[phase.lower()]
                for i, (region, n_rows) in enumerate(blocks):
                    nxt = f"{phase}_{i + 1}" if i + 1 < len(blocks) else after
                    with m.State(f"{phase}_{i}"):
                        m.d.comb += [dma.cmd.valid.eq(1),
                                     *command(region, n_rows, int(phase == "OUT"))]
                        with m.If(dma.cmd.ready):
                            m.next = f"{phase}_{i}_WAIT"
                    with m.State(f"{phase}_{i}_WAIT"):
                        with m.If(dma.done):
                            flag = read_error if phase == "IN" else write_error
                            with m.If(dma.error):
                                m.d.sync += flag.eq(1)
                            m.next = nxt
            with m.State("START"):
                m.d.comb += core.start.eq(1)
                m.next = "RUN"
            with m.State("RUN"):
                with m.If(core.done):
                    with m.If(~skip & (core.error == 0)):
                        m.next = "OUT_0"
                    with m.Else():
                        m.next = "FINISH"
            with m.State("FINISH"):
                m.d.sync += [busy.eq(0), done.eq(1)]
                m.next = "IDLE"

        # -- status, hardware information, local memory port -----------------------------------
        m.d.comb += [
            csr.status_error.eq(core.error),
            csr.status_dequant_overflow.eq(core.dequant_overflow),
            csr.status_pe_overflow.eq(core.pe_overflow),
            csr.status_requant_overflow.eq(core.requant_overflow),
            csr.status_start_refused.eq(start_refused),
            csr.cycles.eq(core.cycles),
            csr.dma_status_read_error.eq(read_error),
            csr.dma_status_write_error.eq(write_error),
            csr.dma_cycles.eq(kcycles),
        ]
        assert set(STATUS_FLAGS) == {"DEQUANT_OVERFLOW", "PE_OVERFLOW", "REQUANT_OVERFLOW",
                                     "START_REFUSED"}
        drive_constants(m, csr, self._regmap, hw_info_values(core_cfg))
        m.d.comb += [
            core.host_addr.eq(dma.mem_addr),
            core.host_re.eq(dma.mem_re),
            core.host_we.eq(dma.mem_we),
            core.host_wdata.eq(dma.mem_wdata),
            dma.mem_rdata.eq(core.host_rdata),
        ]
        return m
