"""A host for a window DMA shell kernel (:class:`~rtl_gen.shell.window.WindowKernel`) inside a
cocotb test: cocotbext-axi's ``AxiLiteMaster`` on ``s_axi_control`` and ``AxiRam`` as the
device memory on ``m_axi_gmem`` (:class:`axi_host.AxiHost`), plus the host-commanded copies,
the buffer, a monitor of the AXI bursts and random back-pressure.

:class:`WindowHost` offers the calls of the fast tier's :class:`window_sim.WindowSimHost`, so a
session written against them (``gae_kernel_cases.gae_batch``) runs on both tiers.
"""

from axi_host import AxiHost
from sw.shell.spec import GMEM
from window_sim import BUFFER, WindowShellCommands

__all__ = ["WindowHost", "AXI_RAM_LATENCY"]

#: Latency ``L`` of cocotbext-axi's ``AxiRam`` in the sense of
#: :func:`sw.shell.spec.copy_cycles` (cycles from an AR handshake to its first R beat, from the
#: last W beat to B) when it never pauses, as the window shell's DMA_CYCLES show it: measured on
#: the RTL, the same for every copy in either direction (the RTL tests assert
#: ``DMA_CYCLES == copy_cycles(n, word_bytes, latency=AXI_RAM_LATENCY)``).
AXI_RAM_LATENCY = 2

class WindowHost(AxiHost, WindowShellCommands):
    """cocotbext-axi masters on a window kernel, and the host side of its copy engine.

    Parameters
    ----------
    dut : the cocotb handle of the kernel.
    regs : RegisterMap of the kernel.
    ptr : int
        Device address of the buffer (:meth:`set_pointer` writes it into MEM_PTR; written by
        :meth:`start`).

    Members
    -------
    reads, writes : list of ``(address, beats)``
        Every read and write burst the kernel has issued on ``m_axi_gmem`` (address
        handshakes, in order).
    """

    #: DMA_STATUS polls per copy under cocotb (the bound this harness has always had).
    COPY_POLLS = 1_000_000

    def __init__(self, dut, regs, *, ptr=BUFFER):
        super().__init__(dut, regs, mem=GMEM)
        self.ptr = ptr
        self.reads, self.writes = [], []

    async def start(self):
        """Clock, bus models, the burst monitor, reset, MEM_PTR."""
        import cocotb

        await super().start()
        cocotb.start_soon(self._monitor())
        await self.set_pointer()

    async def _monitor(self):
        from cocotb.triggers import RisingEdge

        dut = self.dut
        p = GMEM
        ar = [getattr(dut, f"{p}_ar{n}") for n in ("valid", "ready", "addr", "len")]
        aw = [getattr(dut, f"{p}_aw{n}") for n in ("valid", "ready", "addr", "len")]
        while True:
            await RisingEdge(dut.ap_clk)
            for (valid, ready, addr, ln), log in ((ar, self.reads), (aw, self.writes)):
                if valid.value == 1 and ready.value == 1:
                    log.append((int(addr.value), int(ln.value) + 1))

    async def idle(self, n):
        from cocotb.triggers import ClockCycles

        await ClockCycles(self.dut.ap_clk, n)

    # -- device memory -------------------------------------------------------------------------
    def load(self, addr, data):
        self.ram.write(addr, bytes(data))

    def dump(self, addr, n):
        return bytes(self.ram.read(addr, n))

    def stalls(self, p, seed):
        """Random pauses (probability ``p`` per cycle) on every channel of the device memory
        (``p = 0``: none)."""
        import random

        def gen(rng):
            while True:
                yield rng.random() < p

        rng = random.Random(seed)
        for ch in (self.ram.read_if.ar_channel, self.ram.read_if.r_channel,
                   self.ram.write_if.aw_channel, self.ram.write_if.w_channel,
                   self.ram.write_if.b_channel):
            ch.set_pause_generator(gen(random.Random(rng.getrandbits(32))) if p else None)
            if not p:
                ch.pause = False
