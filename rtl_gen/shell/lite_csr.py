"""AXI4-Lite control/status register slave generated from a :class:`~sw.regmap.RegisterMap`."""

import re

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from sw.regmap import RegisterMap

from .signatures import ArgsSignature, StatusSignature, arg_fields, field_port, status_fields

__all__ = ["AxiLiteCsr", "OKAY", "SLVERR"]

OKAY = 0b00
SLVERR = 0b10

_PREFIX_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")

# IEEE 1800-2017 keywords (a superset of Verilog-2005's): a port may not be named like one.
_SV_KEYWORDS = frozenset("""
    accept_on alias always always_comb always_ff always_latch and assert assign assume automatic
    before begin bind bins binsof bit break buf bufif0 bufif1 byte case casex casez cell chandle
    checker class clocking cmos config const constraint context continue cover covergroup
    coverpoint cross deassign default defparam design disable dist do edge else end endcase
    endchecker endclass endclocking endconfig endfunction endgenerate endgroup endinterface
    endmodule endpackage endprimitive endprogram endproperty endspecify endsequence endtable
    endtask enum event eventually expect export extends extern final first_match for force
    foreach forever fork forkjoin function generate genvar global highz0 highz1 if iff ifnone
    ignore_bins illegal_bins implements implies import incdir include initial inout input inside
    instance int integer interconnect interface intersect join join_any join_none large let
    liblist library local localparam logic longint macromodule matches medium modport module nand
    negedge nettype new nexttime nmos nor noshowcancelled not notif0 notif1 null or output package
    packed parameter pmos posedge primitive priority program property protected pull0 pull1
    pulldown pullup pulsestyle_ondetect pulsestyle_onevent pure rand randc randcase randsequence
    rcmos real realtime ref reg reject_on release repeat restrict return rnmos rpmos rtran
    rtranif0 rtranif1 s_always s_eventually s_nexttime s_until s_until_with scalared sequence
    shortint shortreal showcancelled signed small soft solve specify specparam static string
    strong strong0 strong1 struct super supply0 supply1 sync_accept_on sync_reject_on table tagged
    task this throughout time timeprecision timeunit tran tranif0 tranif1 tri tri0 tri1 triand
    trior trireg type typedef union unique unique0 unsigned until until_with untyped use uwire var
    vectored virtual void wait wait_order wand weak weak0 weak1 while wildcard wire with within
    wor xnor xor
""".split())

#: AXI4-Lite slave channels: (suffix, flow, width or None for the address width).
_AXI_LITE = (
    ("awaddr", In, None), ("awvalid", In, 1), ("awready", Out, 1),
    ("wdata", In, 32), ("wstrb", In, 4), ("wvalid", In, 1), ("wready", Out, 1),
    ("bresp", Out, 2), ("bvalid", Out, 1), ("bready", In, 1),
    ("araddr", In, None), ("arvalid", In, 1), ("arready", Out, 1),
    ("rdata", Out, 32), ("rresp", Out, 2), ("rvalid", Out, 1), ("rready", In, 1),
)

# The ap_ctrl_hs control registers: implemented inside the block, no generic ports.
_HS_CONTROL = ("CTRL", "GIER", "IP_IER", "IP_ISR")


class AxiLiteCsr(wiring.Component):
    """AXI4-Lite slave holding the registers of a :class:`~sw.regmap.RegisterMap`.

    Parameters
    ----------
    regmap : RegisterMap
        The registers. With ``regmap.protocol == "ap_ctrl_hs"`` the block also implements the
        Vitis HLS control logic of CTRL/GIER/IP_IER/IP_ISR (see :mod:`sw.regmap`).
    prefix : str
        Prefix of the flat AXI port names, default ``"s_axi_control"`` (Vivado and
        cocotbext-axi's ``AxiLiteBus.from_prefix`` recognise ``<prefix>_awaddr`` etc.).
    addr_width : int or None
        Width of ``awaddr``/``araddr``, ``regmap.min_addr_width``..32; default the minimum.
        Addresses are decoded on all bits but the two lowest (a byte address selects its word).
    base : RegisterMap or None
        The core's register map, whose argument and status fields form the :attr:`args` and
        :attr:`status` interfaces (default ``regmap``); ``regmap`` may add registers after it
        (a DMA shell's), whose fields are plain ports.
    constants : dict or None
        Register name -> word for read-only registers whose value is fixed (``HW_*``: the
        configuration, :meth:`sw.regmap.RegisterMap.info_values`): they read that word and
        have no core-side port.

    Members
    -------
    <prefix>_awaddr, <prefix>_araddr : ``In(addr_width)``
    <prefix>_awvalid, _wvalid, _bready, _arvalid, _rready : ``In(1)``
    <prefix>_awready, _wready, _bvalid, _arready, _rvalid : ``Out(1)``
    <prefix>_wdata : ``In(32)``; <prefix>_wstrb : ``In(4)``; <prefix>_rdata : ``Out(32)``
    <prefix>_bresp, <prefix>_rresp : ``Out(2)``
        OKAY (0) for a mapped register, SLVERR (2) for any other address.

    Core side, for an ``ap_ctrl_hs`` map:

    ap_start : ``Out(1)``
        Level: CTRL.AP_START.
    ap_done, ap_ready : ``In(1)``
        One-cycle pulses from the core (a level is counted once per cycle).
    ap_idle : ``In(1)``
        Level.
    interrupt : ``Out(1)``
        ``GIER.ENABLE & |IP_ISR``, a function of registers only (glitch-free).
    auto_restart : ``Out(1)``
        CTRL.AUTO_RESTART.
    ap_start_write : ``Out(1)``
        Pulse in the cycle the host's write of AP_START = 1 becomes visible on ``ap_start``.
    ap_start_refuse : ``In(1)``
        Clears AP_START without the ``ap_ready`` handshake (AP_READY and IP_ISR unaffected): a
        core that refuses a start while busy uses it instead of queueing the start.

    args : ``Out(ArgsSignature(base))``
        The run arguments (:func:`~rtl_gen.shell.signatures.arg_fields` of ``base``), one
        member per field, named like the ports below.
    status : ``In(StatusSignature(base))``
        What the core reports (:func:`~rtl_gen.shell.signatures.status_fields` of ``base``).

    and for every other field that is not a constant, with ``P`` = ``<reg>_<field>`` in lower
    case, or ``<reg>`` for a field named like its register:

    ``rw``, ``wo``: ``P`` ``Out(width)``
        The register bits.
    ``rw_sc``: ``P`` ``Out(width)``, ``P_clear`` ``In(width)``
        A written 1 sets a bit, ``P_clear`` clears it (a set in the same cycle wins).
    ``ro``: ``P`` ``In(width)``
        Sampled when the read address is accepted.
    ``ro_cor``: ``P`` ``In(width)``
        Set pulses; a bit stays set until the host reads the register (a set in the same cycle
        as the read wins).
    ``rw_tow``: ``P`` ``In(width)``
        Set pulses; a written 1 toggles a bit (a set in the same cycle wins).

    and per register of ``regmap.user_registers``:

    <reg>_wr_pulse : ``Out(1)``
        High for one cycle after every write to the register, even one that changes nothing
        (read-only register, WSTRB 0), in the first cycle that shows the new register value,
        so a core can give a register write-1-to-clear or write-triggered behaviour.
    wr_data : ``Out(32)``, wr_strb : ``Out(4)``
        WDATA and WSTRB of the last write to a mapped address; valid with any ``_wr_pulse``.

    :attr:`core_ports` lists the core-side ports with a description: the plain ports above by
    their names, then the members of :attr:`args` and :attr:`status` by the names Amaranth gives
    them when this block is the top level (``args__<P>``, ``status__<P>``: the Verilog ports a
    testbench drives); :meth:`port` gives any field's signal inside Amaranth.

    Timing (cycles of ``clk``; one write and one read may be in progress at the same time):

    * Write: AWREADY and WREADY are high while no write response is pending and that channel's
      beat has not been taken yet, so AW and W are accepted in either order or together. Each
      is captured in a register (the address decoded to one flag per register, the data masked
      by WSTRB); the write commits in the cycle after the later of the two handshakes, from
      those registers only: the register changes at the end of that cycle and BVALID rises in
      the next (:attr:`write_latency` = 2, from the later handshake to BVALID), together with
      the new values on the core ports and ``<reg>_wr_pulse``. AWREADY/WREADY return the cycle
      after the B handshake: at most one write every 3 cycles.
    * Read: ARREADY is high while no read response is pending. The register is sampled (and
      clear-on-read bits cleared) at the AR handshake; RVALID rises in the next cycle
      (:attr:`read_latency` = 1). At most one read every 2 cycles. A read in the same cycle as
      the write commit returns the value before the write.
    * An ``ap_done``/``ap_ready`` pulse shows in CTRL, IP_ISR and ``interrupt`` in the next
      cycle; ``ap_start`` falls in the cycle after the ``ap_ready`` pulse; ``ap_idle`` shows in
      CTRL one cycle late.
    * Reset (``rst``, synchronous, active high) aborts any transaction: all VALID/READY
      handshake state and all registers return to their reset values.
    * Every output is a register or a function of registers only: no combinational path from
      any input (AXI or core side) to any output.
    """

    write_latency = 2
    read_latency = 1

    def __init__(self, regmap, *, prefix="s_axi_control", addr_width=None, base=None,
                 constants=None):
        if not isinstance(regmap, RegisterMap):
            raise TypeError(f"regmap must be a RegisterMap, not {regmap!r}")
        base = regmap if base is None else base
        if not isinstance(base, RegisterMap) or tuple(regmap.registers[:len(base)]) \
                != tuple(base.registers):
            raise ValueError(f"base must be a RegisterMap that regmap starts with, not {base!r}")
        constants = dict(constants or {})
        for name, word in constants.items():
            reg = regmap[name]          # KeyError names a missing register
            if any(f.access != "ro" for f in reg.fields):
                raise ValueError(f"constants: register {name!r} is not read-only")
            reg.unpack(word)
        if not isinstance(prefix, str) or not _PREFIX_RE.match(prefix) \
                or prefix.lower() in _SV_KEYWORDS:
            raise ValueError(f"prefix must be a Verilog identifier, not {prefix!r}")
        lo = regmap.min_addr_width
        if addr_width is None:
            addr_width = lo
        if not isinstance(addr_width, int) or isinstance(addr_width, bool) \
                or not lo <= addr_width <= 32:
            raise ValueError(f"addr_width must be an integer in {lo}..32, not {addr_width!r}")
        self._regmap = regmap
        self._prefix = prefix
        self._addr_width = addr_width
        self._constants = constants
        grouped = {(r.name, f.name) for r, f in arg_fields(base) + status_fields(base)}

        members = {}
        for suffix, flow, width in _AXI_LITE:
            members[f"{prefix}_{suffix}"] = flow(addr_width if width is None else width)
        core = []
        hs = regmap.protocol == "ap_ctrl_hs"
        if hs:
            core += [("ap_start", Out, 1, "start the core (level, until ap_ready)"),
                     ("ap_done", In, 1, "the core finished (pulse)"),
                     ("ap_ready", In, 1, "the core took its arguments (pulse)"),
                     ("ap_idle", In, 1, "the core is idle (level)"),
                     ("interrupt", Out, 1, "GIER.ENABLE & |IP_ISR"),
                     ("auto_restart", Out, 1, "CTRL.AUTO_RESTART"),
                     ("ap_start_write", Out, 1,
                      "the host wrote CTRL with AP_START = 1 (pulse, with the new AP_START)"),
                     ("ap_start_refuse", In, 1,
                      "clear AP_START without an ap_ready handshake (a refused start)")]
        for r in regmap.user_registers:
            if r.name in constants:
                continue
            for f in r.fields:
                p = r.path(f).lower()
                if (r.name, f.name) in grouped:
                    continue
                if f.access in ("rw", "wo"):
                    core.append((p, Out, f.width, f"{r.name}.{f.name} ({f.access})"))
                elif f.access == "rw_sc":
                    core.append((p, Out, f.width, f"{r.name}.{f.name} (rw_sc)"))
                    core.append((f"{p}_clear", In, f.width, f"clear {r.name}.{f.name} bits"))
                elif f.access == "ro":
                    core.append((p, In, f.width, f"{r.name}.{f.name} (ro)"))
                else:
                    core.append((p, In, f.width, f"set {r.name}.{f.name} bits ({f.access})"))
        for r in regmap.user_registers:
            core.append((f"{r.name.lower()}_wr_pulse", Out, 1, f"{r.name} was written"))
        if regmap.user_registers:
            core += [("wr_data", Out, 32, "WDATA of the last write"),
                     ("wr_strb", Out, 4, "WSTRB of the last write")]
        seen = {"clk": "the clock", "rst": "the reset"}
        seen.update({name: "an AXI port" for name in members})
        for name, flow, width, doc in core:
            if name in seen:
                raise ValueError(f"core port {name!r} ({doc}) clashes with {seen[name]}")
            if name in _SV_KEYWORDS:
                raise ValueError(f"core port {name!r} ({doc}) is a Verilog keyword: "
                                 f"rename the register or field")
            seen[name] = f"core port {name!r} ({doc})"
            members[name] = flow(width)
        members["args"] = Out(ArgsSignature(base))
        members["status"] = In(StatusSignature(base))
        # The grouped fields by their top-level (path) names, after the plain ports.
        for group, fields, flow in (("args", arg_fields(base), Out),
                                    ("status", status_fields(base), In)):
            core += [(f"{group}__{field_port(r, f)}", flow, f.width,
                      f"{r.name}.{f.name} ({f.access}, {group})") for r, f in fields]
        self._core_ports = tuple((name, "in" if flow is In else "out", width, doc)
                                 for name, flow, width, doc in core)
        self._grouped = {(r.name, f.name): ("args" if f.access == "rw" else "status")
                         for r, f in arg_fields(base) + status_fields(base)}
        super().__init__(members)

    @property
    def regmap(self) -> RegisterMap:
        return self._regmap

    @property
    def prefix(self) -> str:
        return self._prefix

    @property
    def addr_width(self) -> int:
        return self._addr_width

    @property
    def core_ports(self) -> tuple:
        """``(name, "in" | "out", width, description)`` of every core-side port, in order: the
        plain ports, then the :attr:`args` and :attr:`status` members by their top-level names
        (``args__<P>``, ``status__<P>``)."""
        return self._core_ports

    def port(self, reg, f):
        """The core-side signal of field ``f`` of register ``reg`` (in :attr:`args`,
        :attr:`status` or a plain port), a ``Const`` for a constant register's field."""
        if reg.name in self._constants:
            return Const(f.get(self._constants[reg.name]), f.width)
        group = self._grouped.get((reg.name, f.name))
        owner = getattr(self, group) if group else self
        return getattr(owner, field_port(reg, f))

    def axi(self, suffix):
        """The AXI port ``<prefix>_<suffix>``."""
        return getattr(self, f"{self._prefix}_{suffix}")

    def elaborate(self, platform):
        m = Module()
        rm = self._regmap
        hs = rm.protocol == "ap_ctrl_hs"
        ax = self.axi

        # -- write channel ---------------------------------------------------------------------
        # AW and W are captured into registers (the address already decoded, one flag per
        # register, and the data already masked by WSTRB); the write commits in the next cycle
        # from registers only, so the decode and the byte masks are off the paths into the
        # registers and the core.
        words = [r.offset >> 2 for r in rm.registers]
        aw_got = Signal()
        w_got = Signal()
        bvalid = Signal()
        bresp = Signal(2)
        aw_dec = Signal(len(words))                 # one-hot: the captured address's register
        aw_hit = Signal()                           # the captured address is a register's
        w_bits = Signal(32)                         # WDATA & byte mask
        w_mask = Signal(32)
        w_data = Signal(32)
        w_strb = Signal(4)
        m.d.comb += [
            ax("awready").eq(~aw_got & ~bvalid),
            ax("wready").eq(~w_got & ~bvalid),
            ax("bvalid").eq(bvalid),
            ax("bresp").eq(bresp),
        ]
        aw_hs = ax("awvalid") & ~aw_got & ~bvalid
        w_hs = ax("wvalid") & ~w_got & ~bvalid
        commit = Signal()
        m.d.comb += commit.eq(aw_got & w_got)
        with m.If(commit):
            m.d.sync += [aw_got.eq(0), w_got.eq(0), bvalid.eq(1),
                         bresp.eq(Mux(aw_hit, OKAY, SLVERR))]
        with m.If(aw_hs):
            aw_word = ax("awaddr")[2:]
            dec = Cat(*(aw_word == w for w in words))
            m.d.sync += [aw_got.eq(1), aw_dec.eq(dec), aw_hit.eq(dec.any())]
        with m.If(w_hs):
            mask = Cat(*(ax("wstrb")[i].replicate(8) for i in range(4)))
            m.d.sync += [w_got.eq(1), w_data.eq(ax("wdata")), w_strb.eq(ax("wstrb")),
                         w_bits.eq(ax("wdata") & mask), w_mask.eq(mask)]
        with m.If(bvalid & ax("bready")):
            m.d.sync += bvalid.eq(0)

        # -- read channel ----------------------------------------------------------------------
        rvalid = Signal()
        rdata = Signal(32)
        rresp = Signal(2)
        m.d.comb += [
            ax("arready").eq(~rvalid),
            ax("rvalid").eq(rvalid),
            ax("rdata").eq(rdata),
            ax("rresp").eq(rresp),
        ]
        ar_hs = Signal()
        m.d.comb += ar_hs.eq(ax("arvalid") & ~rvalid)
        with m.If(rvalid & ax("rready")):
            m.d.sync += rvalid.eq(0)

        # -- address decode --------------------------------------------------------------------
        r_word = ax("araddr")[2:]
        r_hit = Signal()
        we, rd = {}, {}
        for i, r in enumerate(rm.registers):
            name = r.name.lower()
            we[r.name] = Signal(name=f"{name}_we")
            rd[r.name] = Signal(name=f"{name}_rd")
            m.d.comb += [we[r.name].eq(commit & aw_dec[i]),
                         rd[r.name].eq(ar_hs & (r_word == words[i]))]
        m.d.comb += r_hit.eq(Cat(*(r_word == w for w in words)).any())

        # -- storage: one register per field that keeps state -----------------------------------
        store = {}
        for r in rm.registers:
            for f in r.fields:
                if f.access != "ro" or (hs and (r.name, f.name) == ("CTRL", "AP_IDLE")):
                    store[r.name, f.name] = Signal(f.width, init=f.reset,
                                                   name=f"{r.path(f).lower()}_q")

        def wbits(f):
            return w_bits[f.lsb:f.lsb + f.width]

        def wmask(f):
            return w_mask[f.lsb:f.lsb + f.width]

        # ap_ctrl_hs control logic (Vitis HLS 2021.1+ control_s_axi semantics).
        if hs:
            start = store["CTRL", "AP_START"]
            done = store["CTRL", "AP_DONE"]
            idle = store["CTRL", "AP_IDLE"]
            ready = store["CTRL", "AP_READY"]
            auto = store["CTRL", "AUTO_RESTART"]
            gie = store["GIER", "ENABLE"]
            ier = Cat(store["IP_IER", "AP_DONE"], store["IP_IER", "AP_READY"])
            isr = [store["IP_ISR", "AP_DONE"], store["IP_ISR", "AP_READY"]]
            ctrl = rm["CTRL"]
            auto_status = Signal()     # auto-restart still active: no AP_DONE per run
            with m.If(auto):
                m.d.sync += auto_status.eq(1)
            with m.Elif(self.ap_idle):
                m.d.sync += auto_status.eq(0)
            task_done = (self.ap_done & ~auto_status) | (auto_status & self.ap_idle & ~idle)
            start_write = we["CTRL"] & wbits(ctrl.field("AP_START"))[0]
            with m.If(start_write):
                m.d.sync += start.eq(1)
            with m.Elif(self.ap_ready):
                m.d.sync += start.eq(auto)
            with m.Elif(self.ap_start_refuse):
                m.d.sync += start.eq(0)
            m.d.sync += self.ap_start_write.eq(start_write)
            m.d.sync += [
                idle.eq(self.ap_idle),
                done.eq(task_done | (done & ~rd["CTRL"])),
                ready.eq((self.ap_ready & ~auto) | (ready & ~rd["CTRL"])),
            ]
            for i, event in enumerate((self.ap_done, self.ap_ready)):
                tog = Mux(we["IP_ISR"], w_bits[i], 0)
                m.d.sync += isr[i].eq((ier[i] & event) | (isr[i] ^ tog))
            m.d.comb += [self.ap_start.eq(start), self.auto_restart.eq(auto),
                         self.interrupt.eq(gie & (isr[0] | isr[1]))]

        # Generic fields.
        value = {}
        for r in rm.registers:
            for f in r.fields:
                key = (r.name, f.name)
                internal = hs and r.name in _HS_CONTROL
                port = None if internal else self.port(r, f)
                q = store.get(key)
                value[key] = q if q is not None else port
                if internal and f.access != "rw":
                    continue        # the ap_ctrl_hs logic above
                if f.access in ("rw", "wo"):
                    with m.If(we[r.name]):
                        m.d.sync += q.eq((q & ~wmask(f)) | wbits(f))
                    if port is not None:
                        m.d.comb += port.eq(q)
                elif f.access == "rw_sc":
                    set_ = Mux(we[r.name], wbits(f), 0)
                    clear = getattr(self, f"{r.path(f).lower()}_clear")
                    m.d.sync += q.eq(set_ | (q & ~clear))
                    m.d.comb += port.eq(q)
                elif f.access == "ro_cor":
                    m.d.sync += q.eq(port | (q & ~rd[r.name].replicate(f.width)))
                elif f.access == "rw_tow":
                    m.d.sync += q.eq(port | (q ^ Mux(we[r.name], wbits(f), 0)))

        # -- read data -------------------------------------------------------------------------
        r_value = Signal(32)
        with m.Switch(r_word):
            for r in rm.registers:
                with m.Case(r.offset >> 2):
                    word = Const(0, 32)
                    for f in r.fields:
                        if f.readable:
                            word = word | (value[r.name, f.name].as_unsigned() << f.lsb)
                    m.d.comb += r_value.eq(word)
            with m.Default():
                m.d.comb += r_value.eq(0)
        with m.If(ar_hs):
            m.d.sync += [rvalid.eq(1), rdata.eq(r_value), rresp.eq(Mux(r_hit, OKAY, SLVERR))]

        # -- write notifications to the core ---------------------------------------------------
        for r in rm.user_registers:
            m.d.sync += getattr(self, f"{r.name.lower()}_wr_pulse").eq(we[r.name])
        if rm.user_registers:
            with m.If(commit & aw_hit):
                m.d.sync += [self.wr_data.eq(w_data), self.wr_strb.eq(w_strb)]
        return m
