"""Formal harness of the AXI4 DMA master (:class:`~rtl_gen.shell.dma.AxiDma`).

The AXI slave side, the commands and the local memory's inputs are free: the solver is any
AXI4 slave that keeps the slave's rules (assumed: BVALID/RVALID held until BREADY/RREADY, their
payload stable meanwhile, VALID low in reset, a B only for a write burst whose AW and last W
were taken, R beats only for an accepted AR, in order, RLAST on each burst's last beat; W
bursts accepted ahead of their AW: at most ``max_outstanding + 1``) and any sequence of
commands. Asserted, for every sequence of such inputs:

* AXI rules of the master's channels: AWVALID, WVALID and ARVALID held until READY, the AW/AR
  payload (ID, address, length, size, burst) and the W payload (data, strobes, WLAST) stable
  meanwhile, every VALID low after a reset.
* Bursts: INCR, full-width beats (AxSIZE = log2 of the bus width in bytes), aligned addresses,
  at most ``max_burst`` (<= 256) beats, none crossing a 4 KiB boundary; at most
  ``max_outstanding`` bursts in flight per direction.
* W: the W bursts (W may run ahead of AW) pair with the AW bursts in order, each exactly
  ``AWLEN + 1`` beats with WLAST on the last one alone.

Covered: a write command and a read command of two bursts finish (``done``), a burst is cut
short at a 4 KiB boundary.
"""

from amaranth.hdl import Assert, Assume, Cover, Elaboratable, Module, Mux, ResetSignal, Signal

from .dma import BOUNDARY_BYTES, AxiDma
from .formal import Rules, counter
from .mm_slave import AxiBurst

__all__ = ["DmaHarness", "PROOFS"]


class _LenQueue:
    """A queue of burst lengths in registers: push at the handshake, pop at the last beat."""

    def __init__(self, m, name, n, push, push_len, pop):
        self.len = [Signal(8, name=f"{name}{i}_len") for i in range(n)]
        self.count = Signal(range(n + 1), name=f"{name}_count")
        slot = self.count - pop
        for i in range(n):
            keep = Mux(pop, self.len[i + 1], self.len[i]) if i + 1 < n else \
                Mux(pop, 0, self.len[i])
            m.d.sync += self.len[i].eq(Mux(push & (slot == i), push_len, keep))
        with m.If(push & ~pop):
            m.d.sync += self.count.eq(self.count + 1)
        with m.Elif(pop & ~push):
            m.d.sync += self.count.eq(self.count - 1)
        self.full = Signal(name=f"{name}_full")
        m.d.comb += self.full.eq(self.count == n)


class DmaHarness(Elaboratable):
    """:class:`AxiDma` of the keyword arguments against any AXI4 slave."""

    def __init__(self, **kwargs):
        self.dut = AxiDma(**kwargs)

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.dut
        a = dut.axi
        rules = Rules(m, ResetSignal())
        nbytes = dut.data_width // 8
        size = (nbytes - 1).bit_length()
        n = dut._max_outstanding + 1

        aw, w, ar, b, r = rules.axi4_channels(a, master="shell")
        # The command stream: payload stable while valid and not ready (a stream's rule).
        rules.channel("cmd", dut.cmd.valid, dut.cmd.ready, [dut.cmd.payload.as_value()],
                      driver="partner")

        # -- the bursts requested ---------------------------------------------------------------
        for ax in ("aw", "ar"):
            valid, addr, length = a(f"{ax}valid"), a(f"{ax}addr"), a(f"{ax}len")
            offset = addr[:12]
            m.d.comb += [
                Assert(~valid | (a(f"{ax}burst") == AxiBurst.INCR), f"{ax}: not INCR"),
                Assert(~valid | (a(f"{ax}size") == size), f"{ax}: not full width"),
                Assert(~valid | (addr[:size] == 0) if size else 1, f"{ax}: unaligned"),
                Assert(~valid | (length < dut._max_burst), f"{ax}: longer than max_burst"),
                Assert(~valid | (offset + ((length + 1) << size) <= BOUNDARY_BYTES),
                       f"{ax}: crosses 4 KiB"),
            ]

        # -- writes: W bursts against the AW bursts --------------------------------------------
        # W may run ahead of AW (AXI allows it): the harness queues the AWLEN of the accepted
        # AWs and the length of each finished W burst (its WLAST beat) and compares them in
        # pairs, in order; a W beat that the AW of its burst already announced is checked at
        # once.
        w_cnt = Signal(8, name="w_cnt")            # W beats of the unfinished W burst
        w_final = Signal(name="w_final")
        m.d.comb += w_final.eq(w & a("wlast"))
        pair = Signal(name="w_pair")
        awq = _LenQueue(m, "awq", n, aw, a("awlen"), pair)
        wq = _LenQueue(m, "wq", n, w_final, w_cnt, pair)
        m.d.comb += pair.eq((awq.count != 0) & (wq.count != 0))
        with m.If(w):
            m.d.sync += w_cnt.eq(Mux(a("wlast"), 0, w_cnt + 1))
        announced = Signal(name="w_announced")     # the AW of the W beat now valid is known
        m.d.comb += announced.eq((wq.count == 0) & (awq.count != 0))
        b_owed = counter(m, "b_owed", 3, pair, b)
        m.d.comb += [
            Assert(~pair | (awq.len[0] == wq.len[0]), "W beats != AWLEN + 1"),
            Assert(~(a("wvalid") & announced) | (a("wlast") == (w_cnt == awq.len[0])),
                   "WLAST not on the burst's last beat (AWLEN + 1)"),
            Assert(~aw | ~awq.full | pair, "more AW bursts queued than tracked"),
            # A slave that buffers W bursts ahead of their AW holds at most n of them (it
            # holds WREADY low while it has n): any real slave holds a bounded number.
            Assume(~a("wready") | ~wq.full | pair),
            # The slave answers only a burst whose AW and last W it took.
            Assume(~a("bvalid") | (b_owed != 0) | pair),
        ]
        aw_flight = counter(m, "aw_in_flight", 6, aw, b)
        m.d.comb += Assert(aw_flight <= dut._max_outstanding, "write bursts > max_outstanding")

        # -- reads: R beats only for accepted ARs, RLAST on each burst's last -------------------
        r_cnt = Signal(8, name="r_cnt")
        r_last = Signal(name="r_final")
        m.d.comb += r_last.eq(r & a("rlast"))
        arq = _LenQueue(m, "arq", n, ar, a("arlen"), r_last)
        with m.If(r):
            m.d.sync += r_cnt.eq(Mux(a("rlast"), 0, r_cnt + 1))
        m.d.comb += [
            Assume(~a("rvalid") | (arq.count != 0)),
            Assume(~a("rvalid") | (a("rlast") == (r_cnt == arq.len[0]))),
            Assert(~ar | ~arq.full, "more AR bursts outstanding than tracked"),
            Assert(arq.count <= dut._max_outstanding, "read bursts > max_outstanding"),
        ]

        # -- reachability ----------------------------------------------------------------------
        bursts_w = Signal(2, name="bursts_w")
        bursts_r = Signal(2, name="bursts_r")
        with m.If(b & (bursts_w != 3)):
            m.d.sync += bursts_w.eq(bursts_w + 1)
        with m.If(r_last & (bursts_r != 3)):
            m.d.sync += bursts_r.eq(bursts_r + 1)
        m.d.comb += [
            Cover(dut.done & (bursts_w >= 2) & (bursts_r == 0) & ~dut.error,
                  "a write of 2 bursts is done"),
            Cover(dut.done & (bursts_r >= 2) & (bursts_w == 0) & ~dut.error,
                  "a read of 2 bursts is done"),
            Cover(ar & (a("araddr")[:12] == BOUNDARY_BYTES - nbytes) & (a("arlen") == 0)
                  & (arq.count != 0), "a burst cut short at 4 KiB behind another"),
        ]
        return m


_SMALL = dict(data_width=32, mem_data_width=32, mem_addr_width=4, addr_width=13, max_burst=2,
              max_outstanding=2)

#: name -> (harness factory, ((mode, depth), ...), fast). BMC slows down about twofold per
#: cycle from 14 cycles on: 16 in make test (seconds), 20 heavy (minutes).
PROOFS = {
    "dma": (lambda: DmaHarness(**_SMALL), (("bmc", 16), ("cover", 16)), True),
    "dma_deep": (lambda: DmaHarness(**_SMALL), (("bmc", 20),), False),
}
