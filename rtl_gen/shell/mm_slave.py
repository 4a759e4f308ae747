"""AXI4 memory-mapped slave bridging a host bus to a synchronous on-chip memory port."""

import enum
import re

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from .signatures import MemoryPortSignature

__all__ = ["AxiBurst", "AxiMemorySlave", "AxiResp"]


class AxiResp(enum.IntEnum):
    """AXI response codes (``xRESP``)."""
    OKAY = 0
    EXOKAY = 1
    SLVERR = 2
    DECERR = 3


class AxiBurst(enum.IntEnum):
    """AXI burst types (``AxBURST``)."""
    FIXED = 0
    INCR = 1
    WRAP = 2


_PREFIX_RE = re.compile(r"[A-Za-z][A-Za-z0-9]*(_[A-Za-z0-9]+)*")


class AxiMemorySlave(wiring.Component):
    """AXI4 (full) slave that gives a host read and write access to one memory port.

    A host (the Zynq PS over an HP/HPM port, an XDMA/XRT shell) loads and reads an accelerator's
    on-chip memory through this bridge. One transaction is served at a time; reads and writes
    share the memory port.

    AXI side (all ports flat, ``<prefix>_awaddr`` etc., so Vivado and cocotbext-axi's
    ``AxiBus.from_prefix`` recognise them): AW, W, B, AR, R channels with ``id``, ``addr``,
    ``len``, ``size``, ``burst``, ``data``, ``strb``, ``last``, ``resp``. ``AxLOCK``, ``AxCACHE``,
    ``AxPROT``, ``AxQOS`` are not present (the interconnect ties them off): no exclusive access,
    ``EXOKAY`` is never returned. ``wlast`` is not checked: a burst is ``awlen + 1`` beats.

    * Bursts: INCR, FIXED and WRAP (``len + 1`` of 2, 4, 8, 16), up to 256 beats, unaligned start
      addresses (the first beat's ``wstrb`` selects the bytes).
    * Narrow transfers (``AxSIZE`` below the bus width) are supported: the address advances by
      ``2**AxSIZE``, writes use ``wstrb`` as given (it is trusted to match the narrow lanes), and
      reads return the whole memory word, from which the master takes its lanes.
    * Responses, per beat, in this order: ``SLVERR`` when ``enable`` is low in the cycle the
      memory would be accessed, or for an unsupported burst (reserved burst type 3, WRAP with
      another length, ``AxSIZE`` wider than the bus); ``DECERR`` when the beat's word address is
      ``depth`` or above; else ``OKAY``. A beat that is not ``OKAY`` does not touch the memory
      (read data is 0). ``bresp`` is the largest code among the burst's beats (DECERR > SLVERR).
    * Arbitration: when both AW and AR wait, they alternate (round robin), so neither starves.
      When only one kind waits, its transactions follow each other with one idle cycle at most.

    Memory side (word addressed, one word is ``data_width`` bits):

    * ``mem.addr`` ``Out(mem_addr_width)``: word address, ``mem_addr_width = max(1,
      ceil(log2(depth)))``; valid when ``mem.re`` or any ``mem.we`` bit is set.
    * ``mem_re`` ``Out(1)``: read; the word must appear on ``mem_rdata`` ``mem_read_latency``
      cycles later (1: a read port with one register, e.g. ``amaranth.lib.memory``
      ``read_port(domain="sync")``; more: registers after it). Reads are pipelined, one per
      cycle. ``mem_rdata`` is ignored in other cycles.
    * ``mem_we`` ``Out(data_width // 8)``: byte write enables, ``mem_wdata`` ``Out(data_width)``:
      the word, byte ``i`` in bits ``8*i .. 8*i+7``; written at the end of the cycle.
    * ``mem_re`` and ``mem_we`` are never set in the same cycle. Everything is driven from
      registers; ``mem_re`` and ``mem_we`` are gated by ``enable``. The R channel is read from
      a ``mem_read_latency + 2``-entry LUT-RAM queue (address and valid flag in registers):
      one entry more than a stream of reads keeps in flight, so a read is issued without
      looking at ``rready``.
    * ``enable`` ``In(1, init=1)``: when 0, no memory access happens and every beat answers
      ``SLVERR``. It is sampled in the cycle of the memory access, so a beat answers ``OKAY`` if
      and only if it accessed the memory. Hold it low while the accelerator owns the memory.

    Timing (cycle ``c`` is the handshake's rising edge; "n later" means valid in cycle ``c+n``):

    * Read: the first R beat is valid ``mem_read_latency + 2`` cycles after the AR handshake
      (:attr:`read_latency`). A burst of N beats uses the memory port N cycles, and streams one
      beat per cycle while ``rready`` stays high; an R-channel stall stops the reads (a read is
      issued only if the queue has room for it behind every read in flight), so no beat is
      lost. The next AR is accepted the cycle after the last beat is read from
      memory: back-to-back N-beat read bursts take N + 1 cycles each (single beats 2).
    * Write: ``wready`` rises the cycle after the AW handshake and stays high for the whole
      burst (one beat per cycle); the memory is written 1 cycle after each W handshake and
      ``bvalid`` rises 2 cycles after the last W handshake (``write_response_latency``). The
      next AW is accepted the cycle after the last W beat: back-to-back N-beat write bursts take
      N + 1 cycles each (single-beat writes 3 cycles, since the last beat waits for a free B
      register).

    Parameters
    ----------
    data_width : int
        Data bus width in bits: 32, 64, 128, 256 or 512; also the memory word width.
    addr_width : int
        Byte address width of ``AxADDR``, ``log2(data_width // 8) + 1`` to 64. Upper address
        bits are decoded: a word address at or above ``depth`` answers DECERR.
    id_width : int
        Width of ``AxID``/``xID``, 1 to 16 (cocotbext-axi and most interconnects need the ID
        signals; a master without IDs ties them to 0). Responses carry the request's ID.
    depth : int or None
        Number of memory words, 1 to ``2**(addr_width - log2(data_width // 8))``; the default
        (None) is the whole address space.
    prefix : str
        Name prefix of the AXI ports (``"s_axi_mem"`` gives ``s_axi_mem_awaddr``).
    mem_read_latency : int
        Cycles from ``mem_re`` to the word on ``mem_rdata``, 1 to 8 (the memory port
        signature's ``read_latency``).

    Members
    -------
    <prefix>_aw{id,addr,len,size,burst,valid} : ``In``; ``<prefix>_awready`` : ``Out(1)``
    <prefix>_w{data,strb,last,valid} : ``In``; ``<prefix>_wready`` : ``Out(1)``
    <prefix>_b{id,resp,valid} : ``Out``; ``<prefix>_bready`` : ``In(1)``
    <prefix>_ar{id,addr,len,size,burst,valid} : ``In``; ``<prefix>_arready`` : ``Out(1)``
    <prefix>_r{id,data,resp,last,valid} : ``Out``; ``<prefix>_rready`` : ``In(1)``
    mem : ``Out(MemoryPortSignature(data_width, mem_addr_width))``
        The memory side (signals ``mem_addr``, ``mem_re``, ``mem_we``, ``mem_wdata``,
        ``mem_rdata``, ``mem_enable``).

    Raises
    ------
    TypeError, ValueError
        For a parameter of the wrong type or out of range; the message names the parameter.

    Examples
    --------
    Attach a block RAM (what ``tb/shell/test_mm_slave_sim.py`` simulates)::

        m.submodules.axi = axi = AxiMemorySlave(data_width=128, addr_width=16, depth=4096)
        m.submodules.mem = mem = Memory(shape=128, depth=4096, init=[])
        wp = mem.write_port(granularity=8)
        rp = mem.read_port(domain="sync")
        m.d.comb += [wp.addr.eq(axi.mem.addr), wp.en.eq(axi.mem.we), wp.data.eq(axi.mem.wdata),
                     rp.addr.eq(axi.mem.addr), rp.en.eq(axi.mem.re), axi.mem.rdata.eq(rp.data),
                     axi.mem.enable.eq(~accelerator_busy)]
    """

    DATA_WIDTHS = (32, 64, 128, 256, 512)
    #: Cycles from the last W handshake to ``bvalid``.
    write_response_latency = 2

    def __init__(self, *, data_width, addr_width, id_width=1, depth=None, prefix="s_axi_mem",
                 mem_read_latency=1):
        if data_width not in self.DATA_WIDTHS or isinstance(data_width, bool):
            raise ValueError(f"data_width must be one of "
                             f"{', '.join(map(str, self.DATA_WIDTHS))}, not {data_width!r}")
        nbytes = data_width // 8
        wb = (nbytes - 1).bit_length()
        if (not isinstance(addr_width, int) or isinstance(addr_width, bool)
                or not wb < addr_width <= 64):
            raise ValueError(f"addr_width must be an integer from {wb + 1} to 64, "
                             f"not {addr_width!r}")
        if not isinstance(id_width, int) or isinstance(id_width, bool) or not 1 <= id_width <= 16:
            raise ValueError(f"id_width must be an integer from 1 to 16, not {id_width!r}")
        max_depth = 1 << (addr_width - wb)
        if depth is None:
            depth = max_depth
        if not isinstance(depth, int) or isinstance(depth, bool) or not 1 <= depth <= max_depth:
            raise ValueError(f"depth must be an integer from 1 to {max_depth} "
                             f"(2**(addr_width - {wb})), not {depth!r}")
        if not isinstance(prefix, str):
            raise TypeError(f"prefix must be a string, not {prefix!r}")
        if not _PREFIX_RE.fullmatch(prefix):
            raise ValueError(f"prefix must be letters and digits joined by single underscores, "
                             f"not {prefix!r}")
        if (not isinstance(mem_read_latency, int) or isinstance(mem_read_latency, bool)
                or not 1 <= mem_read_latency <= 8):
            raise ValueError(f"mem_read_latency must be an integer from 1 to 8, "
                             f"not {mem_read_latency!r}")
        self._mem_read_latency = mem_read_latency
        self._data_width = data_width
        self._addr_width = addr_width
        self._id_width = id_width
        self._depth = depth
        self._prefix = prefix
        self._wb = wb
        self._mem_addr_width = max(1, (depth - 1).bit_length())

        p = prefix
        members = {}
        for ax in ("aw", "ar"):
            members.update({
                f"{p}_{ax}id":    In(id_width),
                f"{p}_{ax}addr":  In(addr_width),
                f"{p}_{ax}len":   In(8),
                f"{p}_{ax}size":  In(3),
                f"{p}_{ax}burst": In(2),
                f"{p}_{ax}valid": In(1),
                f"{p}_{ax}ready": Out(1),
            })
            if ax == "aw":
                members.update({
                    f"{p}_wdata":  In(data_width),
                    f"{p}_wstrb":  In(nbytes),
                    f"{p}_wlast":  In(1),
                    f"{p}_wvalid": In(1),
                    f"{p}_wready": Out(1),
                    f"{p}_bid":    Out(id_width),
                    f"{p}_bresp":  Out(2),
                    f"{p}_bvalid": Out(1),
                    f"{p}_bready": In(1),
                })
        members.update({
            f"{p}_rid":    Out(id_width),
            f"{p}_rdata":  Out(data_width),
            f"{p}_rresp":  Out(2),
            f"{p}_rlast":  Out(1),
            f"{p}_rvalid": Out(1),
            f"{p}_rready": In(1),
            "mem":         Out(MemoryPortSignature(data_width=data_width,
                                               addr_width=self._mem_addr_width,
                                               read_latency=mem_read_latency)),
        })
        super().__init__(members)

    @property
    def data_width(self) -> int:
        return self._data_width

    @property
    def mem_read_latency(self) -> int:
        return self._mem_read_latency

    @property
    def read_latency(self) -> int:
        """Cycles from the AR handshake to the first valid R beat: ``mem_read_latency + 2``."""
        return self._mem_read_latency + 2

    @property
    def addr_width(self) -> int:
        return self._addr_width

    @property
    def id_width(self) -> int:
        return self._id_width

    @property
    def depth(self) -> int:
        return self._depth

    @property
    def prefix(self) -> str:
        return self._prefix

    @property
    def mem_addr_width(self) -> int:
        return self._mem_addr_width

    def axi(self, name: str):
        """The AXI port ``<prefix>_<name>``, e.g. ``axi("awaddr")``."""
        return getattr(self, f"{self._prefix}_{name}")

    def elaborate(self, platform):
        m = Module()
        a = self.axi
        wb, aw_bits, nbytes = self._wb, self._addr_width, self._data_width // 8
        OKAY, SLVERR, DECERR = AxiResp.OKAY, AxiResp.SLVERR, AxiResp.DECERR

        def worst(x, y):
            return Mux(x > y, x, y)

        # -- address channels: one transaction at a time, round-robin between AW and AR -------
        wr_act = Signal()     # a write burst is receiving W beats
        rd_act = Signal()     # a read burst is issuing memory reads
        turn_w = Signal(init=1)
        idle = ~wr_act & ~rd_act
        m.d.comb += [
            a("awready").eq(idle & turn_w),
            a("arready").eq(idle & ~turn_w),
        ]
        aw_hs = a("awvalid") & a("awready")
        ar_hs = a("arvalid") & a("arready")
        with m.If(idle & ~aw_hs & ~ar_hs):
            # The channel whose turn it is does not ask but the other does: hand over.
            with m.If(turn_w & ~a("awvalid") & a("arvalid")):
                m.d.sync += turn_w.eq(0)
            with m.If(~turn_w & ~a("arvalid") & a("awvalid")):
                m.d.sync += turn_w.eq(1)

        ax_id = Mux(turn_w, a("awid"), a("arid"))
        ax_addr = Mux(turn_w, a("awaddr"), a("araddr"))
        ax_len = Mux(turn_w, a("awlen"), a("arlen"))
        ax_size = Mux(turn_w, a("awsize"), a("arsize"))
        ax_burst = Mux(turn_w, a("awburst"), a("arburst"))

        # Burst decode. Next address = (addr & ~wmask) | (((addr & ~amask) + incr) & wmask):
        # INCR: wmask all ones, FIXED: incr = amask = 0, WRAP: wmask = (len+1) * 2**size - 1.
        ax_incr = Signal(wb + 1)               # 2**size (0 when size is too wide)
        m.d.comb += ax_incr.eq((Const(1, wb + 1) << ax_size)[:wb + 1])
        size_mask = (ax_incr - 1)[:wb]
        wrap_len_ok = (ax_len == 1) | (ax_len == 3) | (ax_len == 7) | (ax_len == 15)
        ax_bad = ((ax_size > wb) | (ax_burst == 3)
                  | ((ax_burst == AxiBurst.WRAP) & ~wrap_len_ok))

        tr_id = Signal(self._id_width)
        addr = Signal(aw_bits)                 # byte address of the current beat
        left = Signal(8)                       # beats after the current one
        last = Signal()                        # left == 0, a register: the handshakes and
                                               # the memory port decide from flags only
        bad = Signal()                         # unsupported burst: all beats SLVERR
        incr = Signal(wb + 1)
        amask = Signal(wb)
        wmask = Signal(aw_bits)
        with m.If(aw_hs | ar_hs):
            fixed = ax_burst == AxiBurst.FIXED
            m.d.sync += [
                tr_id.eq(ax_id),
                addr.eq(ax_addr),
                left.eq(ax_len),
                last.eq(ax_len == 0),
                bad.eq(ax_bad),
                incr.eq(Mux(fixed, 0, ax_incr)),
                amask.eq(Mux(fixed, 0, size_mask)),
                wmask.eq(Mux(ax_burst == AxiBurst.WRAP,
                             (ax_len << ax_size) | size_mask, (1 << aw_bits) - 1)),
            ]
        with m.If(aw_hs):
            m.d.sync += wr_act.eq(1)
        with m.If(ar_hs):
            m.d.sync += rd_act.eq(1)

        aligned = Cat(addr[:wb] & ~amask, addr[wb:])
        next_addr = (addr & ~wmask) | ((aligned + incr)[:aw_bits] & wmask)
        word = addr[wb:]
        in_range = (word < self._depth) if self._depth < (1 << (aw_bits - wb)) else Const(1)
        beat_resp = Mux(bad, SLVERR, Mux(in_range, OKAY, DECERR))   # before ``enable``

        def advance():
            m.d.sync += [addr.eq(next_addr), left.eq(left - 1), last.eq(left == 1)]

        # -- write: W beat -> write stage (memory write) -> B register ------------------------
        bvalid = Signal()
        ws_valid = Signal()
        ws_last = Signal()
        ws_addr = Signal(self._mem_addr_width)
        ws_data = Signal(self._data_width)
        ws_strb = Signal(nbytes)
        ws_resp = Signal(2)
        b_acc = Signal(2)                      # worst response of the burst's earlier beats

        # The last beat waits until the B register is free (bvalid is a register: no path
        # from bready to wready).
        m.d.comb += a("wready").eq(wr_act & (~last | ~bvalid))
        w_hs = a("wvalid") & a("wready")
        m.d.sync += [ws_valid.eq(w_hs), ws_last.eq(w_hs & last)]
        with m.If(w_hs):
            m.d.sync += [
                ws_addr.eq(word),
                ws_data.eq(a("wdata")),
                ws_strb.eq(a("wstrb")),
                ws_resp.eq(beat_resp),
            ]
            advance()
            with m.If(last):
                m.d.sync += [wr_act.eq(0), turn_w.eq(~a("arvalid"))]

        ws_ok = ws_valid & (ws_resp == OKAY) & self.mem.enable
        ws_final = Mux(self.mem.enable, ws_resp, SLVERR)
        with m.If(bvalid & a("bready")):
            m.d.sync += bvalid.eq(0)
        with m.If(ws_valid):
            with m.If(ws_last):
                m.d.sync += [
                    bvalid.eq(1),
                    a("bid").eq(tr_id),
                    a("bresp").eq(worst(b_acc, ws_final)),
                    b_acc.eq(OKAY),
                ]
            with m.Else():
                m.d.sync += b_acc.eq(worst(b_acc, ws_final))
        m.d.comb += a("bvalid").eq(bvalid)

        # -- read: issue -> L memory stages (mem_rdata in the last) -> (L+2)-entry R queue ------
        # A beat is owed from its issue to its pop L + 1 cycles later at the earliest: a
        # stream keeps L + 1 owed, so with L + 2 entries the issue need not wait for a pop in
        # the same cycle (no path from rready or the queue's level to the burst counters).
        L = self._mem_read_latency
        depth = L + 2
        stages = [{"valid": Signal(name=f"m{k}_valid"), "ok": Signal(name=f"m{k}_ok"),
                   "resp": Signal(2, name=f"m{k}_resp"), "last": Signal(name=f"m{k}_last"),
                   "id": Signal(self._id_width, name=f"m{k}_id")} for k in range(L)]
        m.submodules.rq = rq = SyncFIFO(width=self._data_width + 3 + self._id_width, depth=depth)
        pop = rq.r_rdy & a("rready")
        # Reads issued and not yet popped, at most ``depth``: a read is issued only if the
        # queue has room for its beat behind every beat in flight. A thermometer code (bit k:
        # more than k owed), so "full" is its top bit and no count is added or compared.
        owed = Signal(depth)
        full = owed[depth - 1]
        issue = rd_act & ~full
        rd_ok = ~bad & in_range & self.mem.enable
        with m.If(issue & ~pop):
            m.d.sync += owed.eq(Cat(Const(1, 1), owed[:-1]))
        with m.Elif(pop & ~issue):
            m.d.sync += owed.eq(owed[1:])
        m.d.sync += stages[0]["valid"].eq(issue)
        with m.If(issue):
            m.d.sync += [
                stages[0]["ok"].eq(rd_ok),
                stages[0]["resp"].eq(Mux(self.mem.enable, beat_resp, SLVERR)),
                stages[0]["last"].eq(last),
                stages[0]["id"].eq(tr_id),
            ]
            advance()
            with m.If(last):
                m.d.sync += [rd_act.eq(0), turn_w.eq(a("awvalid"))]
        for prev, nxt in zip(stages, stages[1:]):
            m.d.sync += [nxt[k].eq(prev[k]) for k in prev]
        out = stages[-1]
        m.d.comb += [
            rq.w_en.eq(out["valid"]),
            rq.w_data.eq(Cat(Mux(out["ok"], self.mem.rdata, 0), out["resp"], out["last"],
                             out["id"])),
            rq.r_en.eq(a("rready")),
        ]
        D = self._data_width
        m.d.comb += [
            a("rvalid").eq(rq.r_rdy),
            a("rdata").eq(rq.r_data[:D]),
            a("rresp").eq(rq.r_data[D:D + 2]),
            a("rlast").eq(rq.r_data[D + 2]),
            a("rid").eq(rq.r_data[D + 3:]),
        ]

        # -- memory port: the write stage and read issue never coincide -----------------------
        m.d.comb += [
            self.mem.addr.eq(Mux(ws_valid, ws_addr, word)),
            self.mem.re.eq(issue & rd_ok),
            self.mem.we.eq(Mux(ws_ok, ws_strb, 0)),
            self.mem.wdata.eq(ws_data),
        ]
        return m
