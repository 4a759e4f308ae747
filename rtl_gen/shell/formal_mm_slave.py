"""Formal harness of the AXI4 memory slave (:class:`~rtl_gen.shell.AxiMemorySlave`).

The AXI ports and the memory side's inputs (``mem_rdata``, ``mem_enable``) are free: the
solver is any AXI4 master that keeps the master's rules (assumed: VALID held until READY,
AW/W/AR payload stable meanwhile, VALID low in reset, WLAST on the last beat of each burst)
and any memory. Asserted, for every sequence of such inputs:

* AXI rules of the slave's channels: BVALID and RVALID held until BREADY/RREADY, BID/BRESP and
  RID/RDATA/RRESP/RLAST stable meanwhile, BVALID and RVALID low after a reset.
* Writes: a W beat only inside an accepted AW burst, exactly ``AWLEN + 1`` of them; one B per
  burst, after its last W beat and at most :attr:`~AxiMemorySlave.write_response_latency`
  cycles after it, with the burst's AWID.
* Reads: the R beats of the accepted AR bursts in order (a queue of their ARLEN and ARID in the
  harness), exactly ``ARLEN + 1`` each with RLAST on the last one alone and the burst's ARID;
  none without an AR; while one is owed, RVALID rises within
  :attr:`~AxiMemorySlave.read_latency` cycles.
* No response is ever EXOKAY (no exclusive access).

The fast proof bounds the master's bursts to 4 beats (``max_len``), the heavy ones take any.
Covered: a write burst and a read burst of several beats complete, single-beat ones back to
back, a read burst's R stalled by RREADY, a write and a read response together.
"""

from amaranth.hdl import Assert, Assume, Cover, Elaboratable, Module, Mux, ResetSignal, Signal

from .formal import Rules, counter, waiting
from .mm_slave import AxiMemorySlave, AxiResp

__all__ = ["MmSlaveHarness", "PROOFS"]


class MmSlaveHarness(Elaboratable):
    """:class:`AxiMemorySlave` of the keyword arguments against any AXI4 master.
    ``queue``: how many read bursts the harness can track at once (the slave's R queue holds
    ``mem_read_latency + 2`` beats, one more burst may wait to issue)."""

    def __init__(self, *, queue=None, max_len=255, **kwargs):
        self.dut = AxiMemorySlave(**kwargs)
        self.queue = queue or self.dut.mem_read_latency + 3
        self.max_len = max_len

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.dut
        a = dut.axi
        rules = Rules(m, ResetSignal())
        ids = dut.id_width

        aw, w, ar, b, r = rules.axi4_channels(a, master="partner")

        if self.max_len < 255:
            # Bursts of at most max_len + 1 beats (a bound on the master, for a short proof).
            m.d.comb += [Assume(~a("awvalid") | (a("awlen") <= self.max_len)),
                         Assume(~a("arvalid") | (a("arlen") <= self.max_len))]

        # -- writes: the open burst, its beats, the B owed -------------------------------------
        w_open = Signal(name="w_open")             # AW accepted, W beats to come
        w_len = Signal(8, name="w_len")
        w_cnt = Signal(8, name="w_cnt")            # W beats taken of the open burst
        w_id = Signal(ids, name="w_id")
        b_id = Signal(ids, name="b_id")            # AWID of the burst whose B is owed
        w_final = Signal(name="w_final")
        m.d.comb += w_final.eq(w & (w_cnt == w_len))
        b_owed = counter(m, "b_owed", 2, w_final, b)
        with m.If(aw):
            m.d.sync += [w_open.eq(1), w_len.eq(a("awlen")), w_cnt.eq(0), w_id.eq(a("awid"))]
        with m.If(w):
            m.d.sync += w_cnt.eq(w_cnt + 1)
            with m.If(w_cnt == w_len):
                m.d.sync += [w_open.eq(0), b_id.eq(w_id)]
        m.d.comb += [
            # The master's WLAST marks its burst's last beat (the slave counts AWLEN instead).
            Assume(~(a("wvalid") & w_open) | (a("wlast") == (w_cnt == w_len))),
            Assert(~aw | ~w_open, "AW accepted inside a burst"),
            Assert(~w | w_open, "W beat taken outside a burst"),
            Assert(~a("bvalid") | (b_owed != 0), "B without a finished write burst"),
            Assert(~a("bvalid") | (a("bid") == b_id), "BID is not the burst's AWID"),
            Assert(~a("bvalid") | (a("bresp") != AxiResp.EXOKAY), "BRESP EXOKAY"),
            Assert(b_owed <= 1, "more than one B owed"),
        ]
        b_pending = Signal(name="b_pending")
        m.d.comb += b_pending.eq((b_owed != 0) & ~a("bvalid"))
        b_wait = waiting(m, "b_wait", 3, b_pending)
        m.d.comb += Assert(~b_pending | (b_wait < dut.write_response_latency - 1),
                           "B later than write_response_latency")

        # -- reads: a queue of the accepted bursts (ARLEN, ARID), the head's beats -------------
        n = self.queue
        q_len = [Signal(8, name=f"q{i}_len") for i in range(n)]
        q_id = [Signal(ids, name=f"q{i}_id") for i in range(n)]
        q_n = Signal(range(n + 1), name="q_count")
        r_cnt = Signal(8, name="r_cnt")            # R beats taken of the head burst
        pop = Signal(name="r_final")
        m.d.comb += pop.eq(r & a("rlast"))
        slot = q_n - pop
        for i in range(n):
            keep_len = Mux(pop, q_len[i + 1], q_len[i]) if i + 1 < n else Mux(pop, 0, q_len[i])
            keep_id = Mux(pop, q_id[i + 1], q_id[i]) if i + 1 < n else Mux(pop, 0, q_id[i])
            here = ar & (slot == i)
            m.d.sync += [q_len[i].eq(Mux(here, a("arlen"), keep_len)),
                         q_id[i].eq(Mux(here, a("arid"), keep_id))]
        with m.If(ar & ~pop):
            m.d.sync += q_n.eq(q_n + 1)
        with m.Elif(pop & ~ar):
            m.d.sync += q_n.eq(q_n - 1)
        with m.If(r):
            m.d.sync += r_cnt.eq(Mux(a("rlast"), 0, r_cnt + 1))
        m.d.comb += [
            Assert(~ar | (q_n < n) | pop, "more read bursts outstanding than the harness tracks"),
            Assert(~a("rvalid") | (q_n != 0), "R without AR"),
            Assert(~a("rvalid") | (a("rlast") == (r_cnt == q_len[0])),
                   "RLAST not on the burst's last beat (ARLEN + 1)"),
            Assert(~a("rvalid") | (a("rid") == q_id[0]), "RID is not the burst's ARID"),
            Assert(~a("rvalid") | (a("rresp") != AxiResp.EXOKAY), "RRESP EXOKAY"),
        ]
        r_pending = Signal(name="r_pending")
        m.d.comb += r_pending.eq((q_n != 0) & ~a("rvalid"))
        r_wait = waiting(m, "r_wait", 3, r_pending)
        m.d.comb += Assert(~r_pending | (r_wait < dut.read_latency - 1),
                           "R later than read_latency")

        # -- reachability ----------------------------------------------------------------------
        b_done = Signal(2, name="b_done")
        r_done = Signal(2, name="r_done")
        r_stalled = Signal(name="r_stalled")
        with m.If(b & (b_done != 3)):
            m.d.sync += b_done.eq(b_done + 1)
        with m.If(pop & (r_done != 3)):
            m.d.sync += r_done.eq(r_done + 1)
        with m.If(a("rvalid") & ~a("rready")):
            m.d.sync += r_stalled.eq(1)
        m.d.comb += [
            Cover(b & (b_id == 0) & (w_len == 2) & (a("bresp") == AxiResp.OKAY),
                  "a 3-beat write burst completes"),
            Cover(pop & (q_len[0] == 3) & (a("rresp") == AxiResp.OKAY) & r_stalled,
                  "a 4-beat read burst completes, stalled by RREADY"),
            Cover(b & (b_done == 1) & (w_len == 0), "two single-beat writes"),
            Cover(pop & (r_done == 1) & (q_len[0] == 0), "two single-beat reads"),
            Cover(b & (a("bresp") == AxiResp.DECERR), "a write beyond depth: DECERR"),
            Cover(pop & (a("rresp") == AxiResp.SLVERR), "a read while disabled: SLVERR"),
            Cover(a("bvalid") & a("rvalid"), "a B and an R together"),
        ]
        return m


_SMALL = dict(data_width=32, addr_width=5, id_width=2, depth=6)

#: name -> (harness factory, ((mode, depth), ...), fast). BMC of this slave slows down about
#: twofold per cycle of depth (no induction: its R pipeline's state is not tied to the
#: harness's), so the fast proof bounds the bursts to 4 beats and 14 cycles (an AR, a stalled
#: 4-beat burst and the next request fit); the heavy ones take any burst length (17 cycles),
#: a read latency of 3 (16) or 20 cycles of 4-beat bursts (about 15 min on a loaded core).
PROOFS = {
    "mm_slave": (lambda: MmSlaveHarness(**_SMALL, max_len=3),
                 (("bmc", 14), ("cover", 14)), True),
    "mm_slave_long": (lambda: MmSlaveHarness(**_SMALL),
                      (("bmc", 17),), False),
    "mm_slave_lat3": (lambda: MmSlaveHarness(**_SMALL, max_len=3, mem_read_latency=3),
                      (("bmc", 16), ("cover", 16)), False),
    # bursts of up to 4 beats, as the fast proof, 20 cycles: several minutes
    "mm_slave_deep": (lambda: MmSlaveHarness(**_SMALL, max_len=3), (("bmc", 20),), False),
}
