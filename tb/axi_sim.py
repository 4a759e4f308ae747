"""AXI masters for Amaranth's simulator on the flat AXI ports of a component.

:class:`LiteBus`: an AXI4-Lite master on ``s_axi_control_*`` with register access by name (the
control port of an accelerator or a kernel). :class:`SimMaster`: a cycle-level AXI4 master on
``s_axi_mem_*`` (or another prefix) that records every handshake with its cycle number (the
memory port of :class:`~rtl_gen.shell.mm_slave.AxiMemorySlave` and of an accelerator).

Both advance with :func:`clock_edge`: the rising edge of ``ap_clk`` when the component has one
(a shell with its own clock domain: the testbench toggles ``ap_clk``), else a tick of the
``sync`` domain (a component clocked by its parent's ``sync``: ``sim.add_clock``).
"""

import random

from rtl_gen.shell.lite_csr import OKAY

__all__ = ["clock_edge", "LiteBus", "SimMaster"]


async def clock_edge(ctx, dut):
    """Wait for the next rising clock edge of ``dut`` (``ap_clk``, else ``sync``)."""
    if hasattr(dut, "ap_clk"):
        await ctx.posedge(dut.ap_clk)
    else:
        await ctx.tick()


class LiteBus:
    """AXI4-Lite master in Amaranth's simulator, register access by name.

    ``rm``: the register map of the port; ``prefix``: the AXI port prefix. A write offers AW
    and W together and keeps BREADY high; a read keeps RREADY high. Each call returns in the
    cycle after its response handshake.
    """

    def __init__(self, dut, rm, *, prefix="s_axi_control"):
        self.dut, self.rm, self.prefix = dut, rm, prefix

    def c(self, name):
        return getattr(self.dut, f"{self.prefix}_{name}")

    async def edge(self, ctx):
        await clock_edge(ctx, self.dut)

    def _addr(self, reg):
        return reg if isinstance(reg, int) else self.rm.offset(reg)

    async def write(self, ctx, reg, value, strb=0xF):
        """Write ``value`` to a register (a name or a byte address); returns BRESP."""
        c = self.c
        ctx.set(c("awaddr"), self._addr(reg))
        ctx.set(c("wdata"), value)
        ctx.set(c("wstrb"), strb)
        ctx.set(c("awvalid"), 1)
        ctx.set(c("wvalid"), 1)
        ctx.set(c("bready"), 1)
        aw = w = False
        while not (aw and w):
            a_r, w_r = ctx.get(c("awready")), ctx.get(c("wready"))
            await self.edge(ctx)
            aw, w = aw or a_r, w or w_r
            ctx.set(c("awvalid"), not aw)
            ctx.set(c("wvalid"), not w)
        while True:
            v, resp = ctx.get(c("bvalid")), ctx.get(c("bresp"))
            await self.edge(ctx)
            if v:
                return resp

    async def read(self, ctx, reg):
        """Read a register (a name or a byte address); returns ``(RRESP, RDATA)``."""
        c = self.c
        ctx.set(c("araddr"), self._addr(reg))
        ctx.set(c("rready"), 1)
        ctx.set(c("arvalid"), 1)
        while True:
            r = ctx.get(c("arready"))
            await self.edge(ctx)
            if r:
                break
        ctx.set(c("arvalid"), 0)
        while True:
            v, resp, data = ctx.get(c("rvalid")), ctx.get(c("rresp")), ctx.get(c("rdata"))
            await self.edge(ctx)
            if v:
                return resp, data

    async def wr(self, ctx, reg, value):
        """:meth:`write`, which must answer OKAY."""
        resp = await self.write(ctx, reg, value)
        assert resp == OKAY, (reg, resp)

    async def rd(self, ctx, reg):
        """:meth:`read`'s data."""
        return (await self.read(ctx, reg))[1]


class SimMaster:
    """Cycle-level AXI4 master for Amaranth's simulator, one coroutine, exact cycle numbers.

    ``writes``: list of ``(id, addr, len, size, burst, [(data, strb), ...])``; ``reads``: list of
    ``(id, addr, len, size, burst)``. Address and W channels run independently (W beats may be
    offered before their AW); ``idle`` is the probability of not raising a valid, ``stall`` of
    dropping ``bready``/``rready``. :meth:`run` returns a record of every handshake with its
    cycle number: ``aw``, ``w``, ``ar`` (cycles), ``b`` (``(cycle, bid, bresp)``), ``r``
    (``(cycle, rid, rdata, rresp, rlast)``), and, when the component mirrors its memory port
    on ``dbg_mem_re``/``dbg_mem_we``/``dbg_mem_addr`` (:class:`axi_ram.AxiRamHarness`), the
    memory accesses ``re`` (``(cycle, addr)``) and ``we`` (``(cycle, addr, we)``).
    """

    def __init__(self, dut, *, idle=0.0, stall=0.0, seed=0, prefix="s_axi_mem"):
        self.dut, self.prefix = dut, prefix
        self.idle, self.stall = idle, stall
        self.rng = random.Random(seed)
        self.watch = hasattr(dut, "dbg_mem_re")

    def sig(self, name):
        return getattr(self.dut, f"{self.prefix}_{name}")

    async def run(self, ctx, writes=(), reads=(), max_cycles=20000, on_cycle=None):
        s = self.sig
        rng = self.rng
        beats = [(d, st, i == len(w[5]) - 1) for w in writes for i, (d, st) in enumerate(w[5])]
        n_r = sum(r[2] + 1 for r in reads)
        rec = {k: [] for k in ("aw", "w", "b", "ar", "r", "re", "we")}
        ia = iw = ir = 0
        on = {"aw": False, "w": False, "ar": False}
        for cycle in range(max_cycles):
            if len(rec["b"]) == len(writes) and len(rec["r"]) == n_r:
                return rec
            if on_cycle is not None:
                on_cycle(ctx, self.dut, cycle)
            for ch, i, n in (("aw", ia, len(writes)), ("w", iw, len(beats)),
                             ("ar", ir, len(reads))):
                if not on[ch]:
                    on[ch] = i < n and not (self.idle and rng.random() < self.idle)
            if on["aw"]:
                tid, addr, ln, size, burst, _ = writes[ia]
                for f, v in (("id", tid), ("addr", addr), ("len", ln), ("size", size),
                             ("burst", burst)):
                    ctx.set(s(f"aw{f}"), v)
            if on["w"]:
                d, st, lst = beats[iw]
                ctx.set(s("wdata"), d)
                ctx.set(s("wstrb"), st)
                ctx.set(s("wlast"), lst)
            if on["ar"]:
                tid, addr, ln, size, burst = reads[ir]
                for f, v in (("id", tid), ("addr", addr), ("len", ln), ("size", size),
                             ("burst", burst)):
                    ctx.set(s(f"ar{f}"), v)
            ctx.set(s("awvalid"), on["aw"])
            ctx.set(s("wvalid"), on["w"])
            ctx.set(s("arvalid"), on["ar"])
            ctx.set(s("bready"), not (self.stall and rng.random() < self.stall))
            ctx.set(s("rready"), not (self.stall and rng.random() < self.stall))
            if on["aw"] and ctx.get(s("awready")):
                rec["aw"].append(cycle)
                ia += 1
                on["aw"] = False
            if on["w"] and ctx.get(s("wready")):
                rec["w"].append(cycle)
                iw += 1
                on["w"] = False
            if on["ar"] and ctx.get(s("arready")):
                rec["ar"].append(cycle)
                ir += 1
                on["ar"] = False
            if ctx.get(s("bvalid")) and ctx.get(s("bready")):
                rec["b"].append((cycle, ctx.get(s("bid")), ctx.get(s("bresp"))))
            if ctx.get(s("rvalid")) and ctx.get(s("rready")):
                rec["r"].append((cycle, ctx.get(s("rid")), ctx.get(s("rdata")),
                                 ctx.get(s("rresp")), ctx.get(s("rlast"))))
            if self.watch:
                re, we = ctx.get(self.dut.dbg_mem_re), ctx.get(self.dut.dbg_mem_we)
                assert not (re and we), f"read and write in the same cycle {cycle}"
                if re:
                    rec["re"].append((cycle, ctx.get(self.dut.dbg_mem_addr)))
                if we:
                    rec["we"].append((cycle, ctx.get(self.dut.dbg_mem_addr), we))
            await clock_edge(ctx, self.dut)
        raise AssertionError(f"timeout after {max_cycles} cycles: {len(rec['b'])} of "
                             f"{len(writes)} B, {len(rec['r'])} of {n_r} R beats")
