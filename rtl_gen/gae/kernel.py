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

from amaranth.hdl import Cat, Const, Module, Signal, signed, unsigned
from amaranth.lib import wiring

from sw.gae.spec import (
    GAE_CORE_ARGS,
    MAX_RUN_TRAJECTORIES,
    STATUS_FLAGS,
    GaeKernelConfig,
    gae_kernel_register_map,
    hw_info_values,
)
from sw.regmap import RegisterMap
from sw.shell.spec import CONTROL_ADDR_WIDTH, GMEM, KERNEL_POINTER

from ..shell.accelerator import (
    ap_ctrl_hs,
    connect_bridges,
    drive_constants,
    shell_domain,
    shell_members,
)
from ..shell.dma import AxiDma
from ..shell.lite_csr import AxiLiteCsr
from .core import GaeCore

__all__ = ["GaeKernel"]


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
        Reads the memory image and writes the results (:class:`~rtl_gen.shell.dma.AxiDma`).
    interrupt : ``Out(1)``
        ``GIER & |IP_ISR``.

    A run, started by CTRL.AP_START while idle (AP_READY at once, the arguments and MEM_PTR are
    latched, so the host may write the next ones during the run):

    1. size check (``G = ceil(M / n_pe)`` cycles, fewer if the arguments are invalid): the
       core's argument checks, and ``G``;
    2. copy-in (arguments valid only): the blocks of :func:`~sw.gae.spec.copy_plan` ``["in"]`` from
       ``MEM_PTR + offset`` into the core's memory, one block after the other, one core
       memory word (``axi_data_width`` bits) per cycle;
    3. the core run (:func:`sw.gae.spec.run_cycles` cycles; refused at once with STATUS.ERROR set
       if the arguments are invalid);
    4. copy-out (only if STATUS.ERROR = 0): the blocks of :func:`~sw.gae.spec.copy_plan` ``["out"]`` back to
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
    words (bytes of :func:`~sw.gae.spec.copy_plan` / ``axi_data_width / 8``): :func:`~sw.gae.spec.kernel_run_cycles`, asserted
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
