"""What a host does with an accelerator's AXI ports, inside a cocotb test (one copy for all).

Every accelerator has the shell of :mod:`rtl_gen.shell.accelerator`: ``ap_clk``, ``ap_rst_n``,
``interrupt``, AXI4-Lite ``s_axi_control`` with the ``ap_ctrl_hs`` registers and an AXI4 memory
port, either a slave ``s_axi_mem`` (the host writes and reads the core's memory) or a master
``m_axi_gmem`` (the kernel copies from device memory). :class:`AxiHost` drives the clock and
reset, puts a cocotbext-axi ``AxiLiteMaster`` on the control port and an ``AxiMaster`` (slave
port) or an ``AxiRam`` (master port) on the memory port, and offers register access by name and
the start / wait-for-interrupt handshake. Tests subclass it with their block's loading and
checking code. With ``RLK_COVERAGE=1`` it also samples the AXI ports into the functional
coverage points (:func:`fcov.cocotb_monitor.start_axi_monitor`): ``s_axi_control`` as ``lite``,
``s_axi_mem`` as ``mm_slave``, and a master port as ``dma`` where it is the window shell's
:class:`~rtl_gen.shell.dma.AxiDma` (a register map with ``DMA_CTRL``).
"""

__all__ = ["AxiHost", "CLOCK_NS", "hold_in_reset"]

#: Clock period of every accelerator test (250 MHz).
CLOCK_NS = 4


def hold_in_reset(dut):
    """Before the clock starts and before the bus models are built: ``ap_rst_n`` low. The
    cocotbext-axi models drive their valids to 0 when built and wait for the end of the reset,
    and the clock starts low (``start_high=False``), so no simulator sees a first edge, or the
    DUT's outputs, before its registers have their reset values (a 4-state simulator such as
    Icarus shows those as X). A plain write, not ``Immediate``: under Icarus an immediate
    write here leaves a later mid-run reset without effect on the shell's state."""
    dut.ap_rst_n.value = 0


class AxiHost:
    """cocotbext-axi masters on an accelerator's ports and the ``ap_ctrl_hs`` handshake.

    Parameters
    ----------
    dut : the cocotb handle of the top level.
    regs : RegisterMap of the accelerator.
    mem : str or None
        ``"s_axi_mem"`` (an ``AxiMaster`` as :attr:`mem`), a master prefix such as
        ``"m_axi_gmem"`` (an ``AxiRam`` of ``ram_size`` bytes as :attr:`ram`), or None.
    """

    def __init__(self, dut, regs, *, mem="s_axi_mem", ram_size=2 ** 48):
        self.dut = dut
        self.regs = regs
        self._mem_port = mem
        self._ram_size = ram_size

    async def start(self):
        """Start the clock, attach the bus models, reset."""
        import logging

        import cocotb
        from cocotb.clock import Clock
        from cocotbext.axi import AxiBus, AxiLiteBus, AxiLiteMaster, AxiMaster, AxiRam

        from cocotb_util import start_trace
        from fcov.cocotb_monitor import start_axi_monitor

        dut = self.dut
        hold_in_reset(dut)
        cocotb.start_soon(Clock(dut.ap_clk, CLOCK_NS, unit="ns", impl="gpi").start(
            start_high=False))
        start_trace(dut, dut.ap_clk)
        self.ctl = AxiLiteMaster(AxiLiteBus.from_prefix(dut, "s_axi_control"), dut.ap_clk,
                                 dut.ap_rst_n, reset_active_level=False)
        sides = [self.ctl.write_if, self.ctl.read_if]
        if self._mem_port == "s_axi_mem":
            self.mem = AxiMaster(AxiBus.from_prefix(dut, "s_axi_mem"), dut.ap_clk, dut.ap_rst_n,
                                 reset_active_level=False)
            sides += [self.mem.write_if, self.mem.read_if]
        elif self._mem_port is not None:
            self.ram = AxiRam(AxiBus.from_prefix(dut, self._mem_port), dut.ap_clk, dut.ap_rst_n,
                              reset_active_level=False, size=self._ram_size)
            sides += [self.ram.write_if, self.ram.read_if]
        for side in sides:
            side.log.setLevel(logging.WARNING)
        start_axi_monitor(dut, dut.ap_clk, dut.ap_rst_n, self.coverage_ports(),
                          reset_active_low=True)
        await self.reset()

    def coverage_ports(self):
        """The AXI ports sampled for functional coverage: port prefix -> role
        (:data:`fcov.axi.ROLES`). A master port counts as ``dma`` only where it is the window
        shell's DMA engine (its register map has ``DMA_CTRL``); another master (the trainer's
        record gather) has no role and is not sampled."""
        ports = {"s_axi_control": "lite"}
        if self._mem_port == "s_axi_mem":
            ports["s_axi_mem"] = "mm_slave"
        elif self._mem_port is not None and any(r.name == "DMA_CTRL" for r in self.regs):
            ports[self._mem_port] = "dma"
        return ports

    async def reset(self):
        """``ap_rst_n`` low for 3 cycles, then 2 cycles to settle."""
        from cocotb.triggers import ClockCycles

        self.dut.ap_rst_n.value = 0
        await ClockCycles(self.dut.ap_clk, 3)
        self.dut.ap_rst_n.value = 1
        await ClockCycles(self.dut.ap_clk, 2)

    def off(self, reg):
        """Byte offset of a register given by name (or already an offset)."""
        return reg if isinstance(reg, int) else self.regs.offset(reg)

    async def rd(self, reg):
        return await self.ctl.read_dword(self.off(reg))

    async def wr(self, reg, value):
        await self.ctl.write_dword(self.off(reg), int(value) & 0xFFFF_FFFF)

    async def fields(self, reg):
        """A register read as ``{field: value}``."""
        word = await self.rd(reg)
        return {f.name: f.get(word) for f in self.regs[reg].fields}

    async def status(self):
        return await self.fields("STATUS")

    async def kick(self):
        """Enable the done interrupt and set CTRL.AP_START."""
        await self.wr("GIER", 1)
        await self.wr("IP_IER", 1)
        await self.wr("CTRL", 1)

    async def wait_done(self, timeout_cycles=2_000_000, *, check_clear=True):
        """Wait for the interrupt, check AP_DONE, clear IP_ISR (and check the line falls)."""
        from cocotb.triggers import RisingEdge, Timer, with_timeout

        if not int(self.dut.interrupt.value):
            await with_timeout(RisingEdge(self.dut.interrupt), timeout_cycles * CLOCK_NS, "ns")
        ctrl = await self.rd("CTRL")
        assert ctrl & 0b10, f"interrupt without AP_DONE (CTRL={ctrl:#x})"
        await self.wr("IP_ISR", 1)                    # toggle-on-write: clear the done bit
        if check_clear:
            await Timer(2 * CLOCK_NS, "ns")
            assert not int(self.dut.interrupt.value)
