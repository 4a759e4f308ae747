"""A host for a window DMA shell kernel (:class:`~rtl_gen.shell.window.WindowKernel`) in
Amaranth's simulator: what a driver does through the kernel's ports, one cycle at a time.

:class:`WindowSimHost` is the AXI4-Lite master on ``s_axi_control`` and steps the
protocol-checking AXI4 slave :class:`axi_ram.SimAxiRam` (the device memory on ``m_axi_gmem``)
in every cycle it spends, so a testbench is one coroutine and every cycle count is
deterministic. It offers the same calls as the cocotb host of the thorough tier
(:class:`window_host.WindowHost`): register access by name, host-commanded copies
(:meth:`~WindowSimHost.copy`), the ``ap_ctrl_hs`` start and interrupt wait, the buffer
(:meth:`~WindowSimHost.load`, :meth:`~WindowSimHost.dump`) and the AXI bursts the kernel issued
(:attr:`~WindowSimHost.reads`, :attr:`~WindowSimHost.writes`), so a session written against
those calls (``gae_kernel_cases.gae_batch``) runs on both tiers. :func:`simulate_kernel` runs a
testbench on a kernel.
"""

from sw.shell.spec import DMA_FLAGS

__all__ = ["BUFFER", "WindowShellCommands", "WindowSimHost", "simulate_kernel"]

#: Device address of the buffer in both tiers' tests: 4 KiB aligned, above 4 GiB (so
#: MEM_PTR_HI matters).
BUFFER = 0x1_2340_0000

_DONE = 1 << DMA_FLAGS["DONE"]
_BUSY = 1 << DMA_FLAGS["BUSY"]


class WindowShellCommands:
    """The host's commands to the window shell, over a harness's register access: a mixin for
    :class:`WindowSimHost` (Amaranth's simulator) and ``window_host.WindowHost`` (cocotb).

    Needs ``async wr(reg, value)``, ``async rd(reg)``, ``regs`` (the kernel's RegisterMap) and
    ``ptr``; :attr:`COPY_POLLS` bounds the DMA_STATUS polls of one :meth:`copy`.
    """

    COPY_POLLS = 100_000

    async def set_pointer(self, ptr=None):
        """MEM_PTR = the buffer's device address (after every reset)."""
        if ptr is not None:
            self.ptr = ptr
        await self.wr("MEM_PTR_LO", self.ptr & 0xFFFF_FFFF)
        await self.wr("MEM_PTR_HI", self.ptr >> 32)

    async def copy(self, offset, nbytes, to_buffer, *, wait=True, max_polls=None):
        """Command a copy (DMA_OFFSET, DMA_BYTES, DMA_CTRL); with ``wait``, poll DMA_STATUS
        (at most ``max_polls`` times, default :attr:`COPY_POLLS`) until DONE and not BUSY and
        return ``(DMA_STATUS, DMA_CYCLES)``."""
        await self.wr("DMA_OFFSET", offset)
        await self.wr("DMA_BYTES", nbytes)
        await self.wr("DMA_CTRL", self.regs["DMA_CTRL"].pack({"START": 1,
                                                               "DIR": int(to_buffer)}))
        if not wait:
            return None
        for _ in range(self.COPY_POLLS if max_polls is None else max_polls):
            st = await self.rd("DMA_STATUS")
            if st & _DONE and not st & _BUSY:
                return st, await self.rd("DMA_CYCLES")
        raise AssertionError(f"copy of {nbytes} bytes at {offset:#x} never done")


class WindowSimHost(WindowShellCommands):
    """AXI4-Lite master, device memory and cycle counter on a window kernel in Amaranth's
    simulator.

    Parameters
    ----------
    ctx : the testbench's simulator context (``tick()`` must be the kernel's clock).
    dut : WindowKernel
    ram : SimAxiRam on ``dut``'s ``m_axi_gmem``.
    ptr : int
        Device address of the buffer (written into MEM_PTR by :meth:`set_pointer`).

    Members
    -------
    cycle : int
        Cycles simulated so far (the clock of ``ram``'s records).
    regs : RegisterMap
        The kernel's.
    """

    def __init__(self, ctx, dut, ram, *, ptr=BUFFER):
        self.ctx, self.dut, self.ram, self.regs = ctx, dut, ram, dut.regmap
        self.ptr = ptr
        self.cycle = 0

    # -- cycles --------------------------------------------------------------------------------
    def _s(self, name):
        return getattr(self.dut, f"s_axi_control_{name}")

    async def _cycle(self):
        """The device memory's part of this cycle, then the clock edge."""
        await self.ram.step(self.ctx, self.cycle)
        await self.ctx.tick()
        self.cycle += 1

    async def idle(self, n):
        for _ in range(n):
            await self._cycle()

    async def reset(self, cycles=2):
        """``ap_rst_n`` low for ``cycles`` cycles, then one to settle."""
        self.ctx.set(self.dut.ap_rst_n, 0)
        await self.idle(cycles)
        self.ctx.set(self.dut.ap_rst_n, 1)
        await self.idle(1)

    # -- registers -----------------------------------------------------------------------------
    def off(self, reg):
        return reg if isinstance(reg, int) else self.regs.offset(reg)

    async def wr(self, reg, value):
        """AXI4-Lite write (AW and W together); returns BRESP."""
        ctx, s = self.ctx, self._s
        for name, v in (("awaddr", self.off(reg)), ("awvalid", 1),
                        ("wdata", int(value) & 0xFFFF_FFFF), ("wstrb", 0xF), ("wvalid", 1),
                        ("bready", 1)):
            ctx.set(s(name), v)
        aw = w = False
        for _ in range(50):
            aw_hs = not aw and ctx.get(s("awready"))
            w_hs = not w and ctx.get(s("wready"))
            b, resp = ctx.get(s("bvalid")), ctx.get(s("bresp"))
            await self._cycle()
            aw, w = aw or aw_hs, w or w_hs
            ctx.set(s("awvalid"), not aw)
            ctx.set(s("wvalid"), not w)
            if b:
                ctx.set(s("bready"), 0)
                return resp
        raise AssertionError(f"AXI4-Lite write of {reg!r} timed out")

    async def rd(self, reg):
        """AXI4-Lite read; returns RDATA."""
        ctx, s = self.ctx, self._s
        ctx.set(s("araddr"), self.off(reg))
        ctx.set(s("arvalid"), 1)
        ctx.set(s("rready"), 1)
        for _ in range(50):
            ar_hs = ctx.get(s("arready"))
            r, data = ctx.get(s("rvalid")), ctx.get(s("rdata"))
            await self._cycle()
            if ar_hs:
                ctx.set(s("arvalid"), 0)
            if r:
                ctx.set(s("rready"), 0)
                return data
        raise AssertionError(f"AXI4-Lite read of {reg!r} timed out")

    async def fields(self, reg):
        word = await self.rd(reg)
        return {f.name: f.get(word) for f in self.regs[reg].fields}

    async def status(self):
        return await self.fields("STATUS")

    # -- ap_ctrl_hs ----------------------------------------------------------------------------
    async def kick(self):
        """Enable the done interrupt and set CTRL.AP_START."""
        await self.wr("GIER", 1)
        await self.wr("IP_IER", 1)
        await self.wr("CTRL", 1)

    async def wait_done(self, max_cycles=200_000):
        """Wait for the interrupt, check AP_DONE, clear IP_ISR."""
        for _ in range(max_cycles):
            irq = self.ctx.get(self.dut.interrupt)
            await self._cycle()
            if irq:
                break
        else:
            raise AssertionError(f"no interrupt in {max_cycles} cycles")
        ctrl = await self.rd("CTRL")
        assert ctrl & 0b10, f"interrupt without AP_DONE (CTRL={ctrl:#x})"
        await self.wr("IP_ISR", 1)

    # -- device memory -------------------------------------------------------------------------
    def load(self, addr, data):
        self.ram.load(addr, bytes(data))

    def dump(self, addr, n):
        return self.ram.dump(addr, n)

    @property
    def reads(self):
        """``(address, beats)`` of every read burst so far."""
        return [(a, n) for _, a, n in self.ram.ar]

    @property
    def writes(self):
        """``(address, beats)`` of every write burst so far."""
        return [(a, n) for _, a, n in self.ram.aw]


class _DomainContext:
    """A simulator context whose ``tick()`` is the ``sim`` domain's."""

    def __init__(self, ctx):
        self._ctx = ctx

    def get(self, x):
        return self._ctx.get(x)

    def set(self, x, v):
        self._ctx.set(x, v)

    async def tick(self):
        await self._ctx.tick("sim")


def simulate_kernel(dut, testbench, *, stall=0.0, latency=1, seed=0, bad=(), bad_writes=(),
                    ptr=BUFFER):
    """Run ``await testbench(host)`` on the kernel ``dut`` after a reset and MEM_PTR = ``ptr``;
    returns its result.

    Device memory: :class:`~axi_ram.SimAxiRam` with ``dut``'s bus parameters, READY/VALID
    dropped with probability ``stall``, ``latency`` cycles from an AR handshake to its first R
    beat and from the last W beat to B, SLVERR on the beats at ``bad`` (``bad_writes``: only
    when written)."""
    from amaranth.hdl import ClockDomain, Module
    from amaranth.sim import Simulator

    from axi_ram import SimAxiRam

    cfg = dut.config
    # ap_clk is a port: drive it from a clock domain of the simulator.
    top = Module()
    top.submodules.dut = dut
    top.domains.sim = cd = ClockDomain("sim")
    top.d.comb += dut.ap_clk.eq(cd.clk)
    sim = Simulator(top)
    sim.add_clock(1e-8, domain="sim")
    result = {}

    async def bench(ctx):
        ram = SimAxiRam(dut, width=cfg.gmem_data_width, max_burst=cfg.max_burst,
                        max_outstanding=cfg.max_outstanding, stall=stall, latency=latency,
                        seed=seed, bad=bad, bad_writes=bad_writes)
        host = WindowSimHost(_DomainContext(ctx), dut, ram, ptr=ptr)
        await host.reset()
        await host.set_pointer()
        result["value"] = await testbench(host)

    sim.add_testbench(bench)
    sim.run()
    return result["value"]
