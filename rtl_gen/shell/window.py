"""DMA shell: any accelerator with a memory window as a Vitis/XRT kernel (host-commanded copies).

Vitis links a kernel to device memory only through AXI4 *master* ports (UG1393, "Kernel
Interface Requirements"), but the GAE, replay and learner accelerators keep their data in
on-chip memory behind an AXI4 *slave* (``s_axi_mem``). :class:`WindowKernel` wraps such an
accelerator (built with ``host_port="local"``: its memory on the word port ``host``) with an
AXI4 master ``m_axi_gmem`` (:class:`~rtl_gen.shell.dma.AxiDma`) and a copy engine the
host commands through extra registers. The host allocates one buffer that mirrors the
accelerator's memory window byte for byte (window byte ``x`` is buffer byte ``x``), writes its
device address into ``MEM_PTR`` once, and moves blocks between the buffer and the accelerator
with DMA_OFFSET / DMA_BYTES / DMA_CTRL; the accelerator's own registers and runs are unchanged.
:class:`~sw.driver.xrt_device.XrtDevice` does this behind the ordinary
:class:`~sw.driver.mmio.MemoryPort` interface, so the accelerators' drivers run unchanged.
"""

from amaranth.hdl import Cat, Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from sw.regmap import RegisterMap
from sw.shell.spec import CONTROL_ADDR_WIDTH, GMEM, DmaParams, window_kernel_register_map

from .accelerator import (AcceleratorShell, connect_bridges, pass_ports, shell_domain,
                          shell_members)
from .dma import AxiDma

__all__ = ["WindowKernel"]


class WindowKernel(wiring.Component):
    """An accelerator with a memory window, an AXI4 master and a copy engine: a Vitis kernel.

    Parameters
    ----------
    accelerator : type
        The accelerator class (an :class:`~rtl_gen.shell.accelerator.AcceleratorShell`:
        :class:`~rtl_gen.gae.accelerator.GaeAccelerator`,
        :class:`~rtl_gen.replay.accelerator.ReplayAccelerator`,
        :class:`~rtl_gen.learner.accelerator.LearnerAccelerator`); it is built from
        ``config.accel`` with ``host_port="local"``, the kernel's ``regmap``, its constants and
        a 12-bit control address.
    config : DmaParams
        The kernel configuration (:class:`~sw.shell.spec.DmaParams` and the accelerator's):
        ``gmem_data_width`` W (at least the memory word D), ``max_burst``, ``max_outstanding``
        (:class:`~rtl_gen.shell.dma.AxiDma`'s burst and in-flight limits), and the window.
    regmap : RegisterMap
        The kernel's register map: :func:`~sw.shell.spec.window_kernel_register_map` of the
        accelerator's (its registers, then the shell's); its constant registers read
        ``regmap.info_values(config)``.

    Members
    -------
    ap_clk, ap_rst_n : ``In(1)``
        Clock and active-low synchronous reset of everything (the accelerator included).
    s_axi_control_* : AXI4-Lite slave, 32-bit data, 12-bit address
        The accelerator's registers unchanged, then the shell's
        (:func:`~sw.shell.spec.window_kernel_register_map`).
    m_axi_gmem_* : AXI4 master, 64-bit address, W-bit data, 1-bit IDs
        Reads and writes the buffer.
    interrupt : ``Out(1)``
        The accelerator's.

    A copy: the host writes DMA_OFFSET (multiple of ``W / 8``), DMA_BYTES (multiple of
    ``D / 8``, 0 allowed) and DMA_CTRL (START = 1, DIR). It is accepted when no copy runs
    (START clears, DMA_STATUS = BUSY, the error flags clear) and then *refused*, ending at once
    with DONE and RANGE set, if the offset or length is misaligned or the block passes the
    window (DMA_WINDOW bytes), or with DONE and LOCKED set if the accelerator is running
    (``host_enable`` low). Otherwise the ``N = DMA_BYTES / (D / 8)`` words move, one per
    cycle, between buffer bytes ``MEM_PTR + DMA_OFFSET ...`` and window words
    ``DMA_OFFSET / (D / 8) ...``; an AXI error response sets READ_ERROR (DIR 0) or
    WRITE_ERROR (DIR 1), and a word due while the accelerator runs (the host started it
    during the copy) is dropped and sets LOCKED; the copy goes on regardless. BUSY falls and
    DONE rises when the last word is written (DIR 0) or the last B response has arrived
    (DIR 1).

    Cycles (DMA_CYCLES, from the acceptance to DONE) when device memory never stalls and
    answers with latency L (first R beat L cycles after its AR handshake, B L cycles after the
    last W beat): ``N + L + 7`` in either direction, 3 for 0 words, 0 for a refused copy
    (:func:`sw.shell.spec.copy_cycles`, asserted by the fast tier); the host adds three AXI4-Lite
    writes and its polling. Throughput: one D-bit word, ``D / 8`` bytes, per cycle whatever W is.
    """

    def __init__(self, accelerator, config, regmap):
        if not isinstance(config, DmaParams):
            raise TypeError(f"config must be a kernel configuration (DmaParams), not {config!r}")
        if not (isinstance(accelerator, type) and issubclass(accelerator, AcceleratorShell)):
            raise TypeError(f"accelerator must be an AcceleratorShell class, not {accelerator!r}")
        self._config = config
        self._regmap = regmap
        self._accel = accel = accelerator(config.accel, host_port="local", regmap=regmap,
                                          control_addr_width=CONTROL_ADDR_WIDTH,
                                          constants=regmap.info_values(config))
        want = window_kernel_register_map(regmap.name, accel.base,
                                          gmem_data_width=config.gmem_data_width,
                                          doc=regmap.doc)
        if regmap != want:
            raise ValueError(f"regmap must be window_kernel_register_map of the accelerator's "
                             f"map with gmem_data_width={config.gmem_data_width}, not {regmap!r}")
        host = accel.signature.members["host"].signature.flip()
        if host.data_width != config.window_word_bits \
                or accel.mem_words * host.data_width // 8 != config.window_bytes:
            raise ValueError(f"config's window ({config.window_bytes} bytes of "
                             f"{config.window_word_bits}-bit words) is not the accelerator's "
                             f"({accel.mem_words} words of {host.data_width} bits)")
        if config.window_bytes >= 1 << 32:
            raise ValueError("the accelerator's window must be below 4 GiB")
        self._dma = AxiDma(data_width=config.gmem_data_width, mem_data_width=host.data_width,
                           mem_addr_width=host.addr_width, addr_width=64,
                           max_burst=config.max_burst, max_outstanding=config.max_outstanding,
                           prefix=GMEM, mem_read_latency=host.read_latency)
        members = {"ap_clk": In(1), "ap_rst_n": In(1), "interrupt": Out(1)}
        members.update({n: m for n, m in accel.signature.members.items()
                        if n.startswith("s_axi_control_")})
        members.update({n: m for n, m in shell_members(self._dma).items() if n not in members})
        super().__init__(members)

    @property
    def config(self):
        return self._config

    @property
    def regmap(self) -> RegisterMap:
        return self._regmap

    @property
    def accelerator(self):
        return self._accel

    @property
    def window_bytes(self) -> int:
        """Bytes of the accelerator's memory window (DMA_WINDOW)."""
        return self._config.window_bytes

    @property
    def pointer_align(self) -> int:
        """Alignment of MEM_PTR and DMA_OFFSET in bytes (``gmem_data_width / 8``)."""
        return self._config.pointer_align

    @property
    def word_bytes(self) -> int:
        """Granularity of DMA_BYTES (the accelerator's memory word)."""
        return self._config.window_word_bits // 8

    def elaborate(self, platform):
        m = Module()
        shell_domain(m, self)
        accel, dma = self._accel, self._dma
        csr = accel.csr
        m.submodules.accel = accel
        m.submodules.dma = dma
        connect_bridges(m, self, dma)
        pass_ports(m, self, accel, "s_axi_control")
        m.d.comb += self.interrupt.eq(accel.interrupt)

        wb = (self.word_bytes - 1).bit_length()
        ab = (self.pointer_align - 1).bit_length()
        ptr = Cat(Const(0, ab), csr.mem_ptr_lo, csr.mem_ptr_hi) if ab else \
            Cat(csr.mem_ptr_lo, csr.mem_ptr_hi)

        busy, done = Signal(), Signal()
        flags = {name: Signal(name=f"flag_{name.lower()}")
                 for name in ("READ_ERROR", "WRITE_ERROR", "LOCKED", "RANGE")}
        cycles = Signal(32)
        offset = Signal(32)
        nbytes = Signal(32)
        to_buffer = Signal()
        with m.If(busy):
            m.d.sync += cycles.eq(cycles + 1)

        aligned = (csr.dma_offset[:ab] == 0 if ab else Const(1)) & \
            (csr.dma_bytes[:wb] == 0 if wb else Const(1))
        # The range check is registered every cycle from DMA_OFFSET and DMA_BYTES in two
        # stages (their 33-bit sum and the alignment, then the compare), so it is two cycles
        # old when DMA_CTRL.START is seen: it always holds the values of the last writes,
        # since a write to DMA_CTRL commits at least 3 cycles after the one before it
        # (AxiLiteCsr: one write every write_latency + 1 cycles) and START shows one cycle
        # after its commit.
        end = Signal(33)
        aligned_q = Signal()
        in_range = Signal()
        m.d.sync += [end.eq(csr.dma_offset + csr.dma_bytes), aligned_q.eq(aligned),
                     in_range.eq(aligned_q & (end <= self.window_bytes))]
        dev = Signal(64)                            # device address of the copy
        n_words = nbytes[wb:]

        with m.FSM(name="copy"):
            with m.State("IDLE"):
                with m.If(csr.dma_ctrl_start):
                    m.d.comb += csr.dma_ctrl_start_clear.eq(1)
                    m.d.sync += [cycles.eq(0), offset.eq(csr.dma_offset),
                                 nbytes.eq(csr.dma_bytes), to_buffer.eq(csr.dma_ctrl_dir),
                                 dev.eq(ptr + csr.dma_offset),
                                 done.eq(0)] + [f.eq(0) for f in flags.values()]
                    with m.If(~in_range):
                        m.d.sync += [flags["RANGE"].eq(1), done.eq(1)]
                    with m.Elif(~dma.mem.enable):
                        m.d.sync += [flags["LOCKED"].eq(1), done.eq(1)]
                    with m.Else():
                        m.d.sync += busy.eq(1)
                        m.next = "COMMAND"
            with m.State("COMMAND"):
                m.d.comb += dma.cmd.valid.eq(1)
                with m.If(dma.cmd.ready):
                    m.next = "COPY"
            with m.State("COPY"):
                with m.If(dma.done):
                    m.d.sync += [busy.eq(0), done.eq(1)]
                    m.next = "IDLE"
        # The command's payload comes straight from its registers in every state (the DMA
        # reads it only with ``valid``): gated by the state, the state's decode reached every
        # value the DMA derives from it at the handshake (the words' zero and one tests, the
        # beat count).
        m.d.comb += [dma.cmd.payload.dev_addr.eq(dev),
                     dma.cmd.payload.mem_addr.eq(offset[wb:]),
                     dma.cmd.payload.words.eq(n_words),
                     dma.cmd.payload.to_device.eq(to_buffer)]
        # Error responses of the copy, by direction.
        with m.If(dma.done & dma.error):
            with m.If(to_buffer):
                m.d.sync += flags["WRITE_ERROR"].eq(1)
            with m.Else():
                m.d.sync += flags["READ_ERROR"].eq(1)
        # A local access while the accelerator owns its memory is dropped: flag it.
        with m.If(busy & dma.dropped):
            m.d.sync += flags["LOCKED"].eq(1)

        wiring.connect(m, dma.mem, accel.host)
        m.d.comb += [
            csr.dma_status_busy.eq(busy),
            csr.dma_status_done.eq(done),
            csr.dma_status_read_error.eq(flags["READ_ERROR"]),
            csr.dma_status_write_error.eq(flags["WRITE_ERROR"]),
            csr.dma_status_locked.eq(flags["LOCKED"]),
            csr.dma_status_range.eq(flags["RANGE"]),
            csr.dma_cycles.eq(cycles),
        ]
        return m
