"""Formal harness of the AXI4-Lite register slave (:class:`~rtl_gen.shell.AxiLiteCsr`).

The AXI ports and the core-side inputs are free: the solver is any AXI4-Lite master that keeps
the master's rules (assumed) and any core. Asserted, for every sequence of such inputs:

* AXI rules of the slave's channels: BVALID and RVALID held until BREADY/RREADY, BRESP and
  RDATA/RRESP stable meanwhile, BVALID and RVALID low after a reset.
* Exactly one B per accepted write and one R per accepted read: outstanding counters of AW, W
  and AR handshakes; no B unless an AW and a W are outstanding, no R unless an AR is; the B
  comes at most :attr:`~AxiLiteCsr.write_latency` cycles after the later of AW and W, the R
  :attr:`~AxiLiteCsr.read_latency` after AR (so none is lost).
* The response codes: BRESP (RRESP) is OKAY if the write's (read's) address maps a register,
  else SLVERR.
* The documented flow control (what makes the proof close by induction): one write and one
  read at a time; AWREADY (WREADY) is low exactly while an AW (W) is held or a B is pending,
  ARREADY exactly while an R is pending.

Covered: a write and a read complete, two writes and two reads back to back, a write and a
read in flight together.
"""

from amaranth.hdl import Assert, Cover, Elaboratable, Module, Mux, ResetSignal, Signal

from sw.regmap import Field, Register, RegisterMap

from .formal import Rules, counter, elaborate_with_state, waiting
from .lite_csr import OKAY, SLVERR, AxiLiteCsr

__all__ = ["LiteCsrHarness", "formal_map", "PROOFS"]


def formal_map(hs=True):
    """A small register map with every field access kind: ap_ctrl_hs's four control
    registers and three of its own (``hs``), or the three alone at 0x0, 0x4, 0x8."""
    regs = [
        Register.scalar("ARG", 8, doc="an argument"),
        Register("STAT", None, (Field("COUNT", 0, 4, "ro"), Field("FLAGS", 8, 2, "ro_cor"),
                                Field("EV", 16, 2, "rw_tow")), "status"),
        Register("CMD", None, (Field("GO", 0, 1, "rw_sc"), Field("KEY", 8, 4, "wo", 3)),
                 "command"),
    ]
    if hs:
        return RegisterMap.with_ap_ctrl_hs("formal", regs)
    return RegisterMap("formal_plain", [
        Register(r.name, 4 * i, r.fields, r.doc) for i, r in enumerate(regs)])


class LiteCsrHarness(Elaboratable):
    """:class:`AxiLiteCsr` of ``regmap`` (``addr_width``) against any AXI4-Lite master."""

    def __init__(self, regmap, *, addr_width=None):
        self.dut = AxiLiteCsr(regmap, addr_width=addr_width)
        self.words = {r.offset >> 2 for r in regmap.registers}

    def _mapped(self, addr):
        word = addr[2:]
        hit = 0
        for w in sorted(self.words):
            hit = hit | (word == w)
        return hit

    def elaborate(self, platform):
        m = Module()
        dut = self.dut
        m.submodules.dut, q = elaborate_with_state(dut, platform)
        a = dut.axi
        rules = Rules(m, ResetSignal())

        aw = rules.channel("aw", a("awvalid"), a("awready"), [a("awaddr")], driver="partner")
        w = rules.channel("w", a("wvalid"), a("wready"), [a("wdata"), a("wstrb")],
                          driver="partner")
        ar = rules.channel("ar", a("arvalid"), a("arready"), [a("araddr")], driver="partner")
        b = rules.channel("b", a("bvalid"), a("bready"), [a("bresp")], driver="shell")
        r = rules.channel("r", a("rvalid"), a("rready"), [a("rdata"), a("rresp")],
                          driver="shell")

        # -- one response per request ----------------------------------------------------------
        aw_n = counter(m, "aw_outstanding", 2, aw, b)
        w_n = counter(m, "w_outstanding", 2, w, b)
        ar_n = counter(m, "ar_outstanding", 2, ar, r)
        m.d.comb += [
            Assert(~a("bvalid") | ((aw_n != 0) & (w_n != 0)), "B without AW and W"),
            Assert(~a("rvalid") | (ar_n != 0), "R without AR"),
        ]
        w_pending = Signal()
        r_pending = Signal()
        m.d.comb += [w_pending.eq((aw_n != 0) & (w_n != 0) & ~a("bvalid")),
                     r_pending.eq((ar_n != 0) & ~a("rvalid"))]
        w_wait = waiting(m, "w_wait", 3, w_pending)
        r_wait = waiting(m, "r_wait", 3, r_pending)
        m.d.comb += [
            Assert(~w_pending | (w_wait < dut.write_latency - 1), "B later than write_latency"),
            Assert(~r_pending | (r_wait < dut.read_latency - 1), "R later than read_latency"),
        ]

        # -- response codes: OKAY exactly for a mapped address --------------------------------
        aw_addr = Signal.like(a("awaddr"), name="aw_addr")
        ar_addr = Signal.like(a("araddr"), name="ar_addr")
        aw_valid_addr = Signal(name="aw_addr_valid")
        with m.If(aw):
            m.d.sync += [aw_addr.eq(a("awaddr")), aw_valid_addr.eq(1)]
        with m.If(b):
            m.d.sync += aw_valid_addr.eq(0)
        with m.If(ar):
            m.d.sync += ar_addr.eq(a("araddr"))
        b_code = Signal(2, name="b_expected")
        r_code = Signal(2, name="r_expected")
        m.d.comb += [
            b_code.eq(Mux(self._mapped(aw_addr), OKAY, SLVERR)),
            r_code.eq(Mux(self._mapped(ar_addr), OKAY, SLVERR)),
            Assert(~a("bvalid") | (a("bresp") == b_code), "BRESP: OKAY iff mapped"),
            Assert(~a("rvalid") | (a("rresp") == r_code), "RRESP: OKAY iff mapped"),
        ]

        # -- the documented flow control: one write and one read at a time ---------------------
        m.d.comb += [
            Assert((aw_n <= 1) & (w_n <= 1) & (ar_n <= 1), "more than one outstanding"),
            Assert(a("bvalid") | (a("awready") == (aw_n == 0)), "AWREADY while idle"),
            Assert(a("bvalid") | (a("wready") == (w_n == 0)), "WREADY while idle"),
            Assert(~a("bvalid") | (~a("awready") & ~a("wready")), "AW/W ready while B pending"),
            Assert(a("arready") == (ar_n == 0), "ARREADY while idle"),
            Assert(~a("bvalid") | aw_valid_addr, "B without a captured address"),
            Assert(aw_valid_addr == (aw_n != 0), "captured address"),
        ]

        # -- inductive invariants: the shell's registers agree with what the master did --------
        m.d.comb += [
            Assert(~q["bvalid"] | (~q["aw_got"] & ~q["w_got"]), "AW/W held with a B pending"),
            Assert(~q["aw_got"] | (q["aw_hit"] == self._mapped(aw_addr)), "aw_hit"),
        ]

        # -- reachability ----------------------------------------------------------------------
        b_done = Signal(2, name="b_done")
        r_done = Signal(2, name="r_done")
        with m.If(b & (b_done != 3)):
            m.d.sync += b_done.eq(b_done + 1)
        with m.If(r & (r_done != 3)):
            m.d.sync += r_done.eq(r_done + 1)
        m.d.comb += [
            Cover(b & (a("bresp") == OKAY), "a write completes (OKAY)"),
            Cover(b & (a("bresp") == SLVERR), "a write completes (SLVERR)"),
            Cover(r & (a("rresp") == OKAY), "a read completes (OKAY)"),
            Cover(r & (a("rresp") == SLVERR), "a read completes (SLVERR)"),
            Cover(b & (b_done == 1), "two writes back to back"),
            Cover(r & (r_done == 1), "two reads back to back"),
            Cover(a("bvalid") & a("rvalid"), "a write and a read in flight together"),
        ]
        return m


#: name -> (harness factory, ((mode, depth), ...), fast)
PROOFS = {
    "lite_csr_hs": (lambda: LiteCsrHarness(formal_map(True)),
                    (("bmc", 20), ("prove", 4), ("cover", 20)), True),
    "lite_csr_plain": (lambda: LiteCsrHarness(formal_map(False), addr_width=6),
                       (("bmc", 20), ("prove", 4), ("cover", 20)), True),
}
