"""AXI4 master that copies blocks between device memory and a local word-addressed memory port."""

import re
from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module, Mux, Signal, Value, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .dma_write import DmaWrites
from .signatures import MemoryPortSignature

__all__ = ["AxiDma", "dma_command_layout"]

_PREFIX_RE = re.compile(r"[A-Za-z][A-Za-z0-9]*(_[A-Za-z0-9]+)*")

#: The AXI4 boundary no burst may cross (AMBA AXI specification, A3.4.1).
BOUNDARY_BYTES = 4096


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def dma_command_layout(*, addr_width, mem_addr_width):
    """Payload of :attr:`AxiDma.cmd`: one block copy.

    ``dev_addr`` (``addr_width`` bits): byte address in device memory, a multiple of the AXI
    data width in bytes (lower bits are ignored). ``mem_addr`` (``mem_addr_width``): first local
    word. ``words`` (``mem_addr_width + 1``): local words to copy, 0 allowed. ``to_device``:
    1 copies local memory to device memory (AXI writes), 0 device memory to local (AXI reads).
    """
    return data.StructLayout({
        "dev_addr": unsigned(addr_width),
        "mem_addr": unsigned(mem_addr_width),
        "words": unsigned(mem_addr_width + 1),
        "to_device": unsigned(1),
    })


class AxiDma(DmaWrites, wiring.Component):
    """AXI4 master copying blocks of words between device memory and a local memory port.

    The window DMA shell (:class:`~rtl_gen.shell.window.WindowKernel`) uses it to copy between
    an accelerator's on-chip memory and the device memory a host (XRT) allocated: one command is
    one contiguous block, ``words`` local words of ``mem_data_width`` bits at consecutive local
    addresses, laid out in device memory at consecutive byte addresses from ``dev_addr``
    (little-endian, local word ``i`` at bytes ``dev_addr + i * mem_data_width / 8``).

    Parameters
    ----------
    data_width : int
        AXI data width W in bits: 32, 64, 128, 256 or 512; a multiple of ``mem_data_width``.
    mem_data_width : int
        Local word width D in bits: 32, 64, 128, 256 or 512, at most ``data_width``. An AXI
        beat carries ``r = W / D`` consecutive local words.
    mem_addr_width : int
        Width of the local word address, 1 to 32.
    addr_width : int
        AXI byte address width, 13 to 64 (Vitis kernels: 64).
    max_burst : int
        Most beats per burst, 1 to 256. Bursts are also split so that none crosses a 4 KiB
        boundary.
    max_outstanding : int
        Most bursts in flight per direction (address handshake done, last R beat or B response
        not yet received), 1 to 32. Two or more hide the device memory's latency between
        bursts.
    id_width : int
        Width of ``AxID``/``xID``, 1 to 16; requests use ID 0, response IDs are ignored.
    prefix : str
        Name prefix of the flat AXI ports (``"m_axi_gmem"`` gives ``m_axi_gmem_araddr``, the
        names Vivado and cocotbext-axi's ``AxiBus.from_prefix`` recognise).
    mem_read_latency : int
        Cycles from ``mem.re`` to the word on ``mem.rdata``, 1 to 8 (the memory port
        signature's ``read_latency``).

    Members
    -------
    <prefix>_aw{id,addr,len,size,burst,valid} : ``Out``; <prefix>_awready : ``In(1)``
    <prefix>_w{data,strb,last,valid} : ``Out``; <prefix>_wready : ``In(1)``
    <prefix>_b{id,resp,valid} : ``In``; <prefix>_bready : ``Out(1)``
    <prefix>_ar{id,addr,len,size,burst,valid} : ``Out``; <prefix>_arready : ``In(1)``
    <prefix>_r{id,data,resp,last,valid} : ``In``; <prefix>_rready : ``Out(1)``
        AXI4 master. INCR bursts of full-width beats (``AxSIZE = log2(W / 8)``) only; no
        ``AxLOCK``/``AxCACHE``/``AxPROT``/``AxQOS`` (the interconnect ties them off).
    cmd : ``In(stream.Signature(dma_command_layout(...)))``
        A block copy (see :func:`dma_command_layout`); ``ready`` is high while idle.
    busy : ``Out(1)``
        A command is in progress.
    done : ``Out(1)``
        One-cycle pulse: the command finished (reads: the last word is written to local memory;
        writes: the last B response arrived). ``busy`` falls in the same cycle.
    error : ``Out(1)``
        Valid with ``done``: some R beat or B response of the command was not OKAY (the copy
        went on; beats with error responses are written to local memory as received).
    dropped : ``Out(1)``
        A local access was due while ``mem.enable`` was 0 (it was dropped).
    mem : ``Out(MemoryPortSignature(D, mem_addr_width))``
        The local memory port (signals ``mem_addr``, ``mem_re``, ...). Reads: the word must be
        on ``mem.rdata`` ``mem_read_latency`` cycles after ``mem.re`` (1: a synchronous read
        port, e.g. a block RAM; reads are pipelined, one per cycle). Writes set all byte
        enables and take effect at the end of the cycle. ``mem.re``
        and ``mem.we`` are never set in the same cycle. While ``mem.enable`` is 0 (the
        memory's owner is busy) accesses are dropped (``re``/``we`` held low) and the copy goes
        on; ``dropped`` is high in each such cycle. All outputs come from registers except
        ``mem.addr``/``mem.re``/``mem.we``/``mem.wdata`` (one multiplexer or gate after
        registers) and the W channel, read combinationally from a
        (:attr:`write_buffer_depth`)-entry LUT-RAM buffer.

    Timing (cycles of ``clk``, no back-pressure, a memory with latency L: first R beat L
    cycles after the AR handshake, B L cycles after the last W beat):

    * Burst lengths come from two planners (address channel, W beats), each two registered
      stages ahead of their use: the first is known in the third cycle after the command
      handshake, each further one three cycles after the previous one is taken.
    * Address channels: a request is registered in the third cycle after the command
      handshake and three cycles after each previous request (so at most one every 3
      cycles), while fewer than ``max_outstanding`` bursts are in flight.
    * Reads: ``rready`` is high except while a beat's further words are being written; each
      R beat is written to local memory over the next ``min(r, words left)`` cycles, one word
      per cycle. A command of N words takes ``N + L + 6`` cycles from its handshake to
      ``done`` (bursts follow each other without gaps when ``max_outstanding`` >= 2 and
      bursts span at least 3 local words).
    * Writes: one local read per cycle from the third cycle after the command handshake; a
      beat's ``wvalid`` rises ``1 + mem_read_latency`` cycles after its last local read. N
      words take ``N + L + 5 + mem_read_latency`` cycles to ``done`` (after the last B
      response). 0 words take 2 cycles either way.
    * Throughput: one local word (``mem_data_width`` bits) per cycle in either direction.

    Raises
    ------
    ValueError
        For a parameter out of range; the message names the parameter.
    """

    DATA_WIDTHS = (32, 64, 128, 256, 512)

    def __init__(self, *, data_width, mem_data_width, mem_addr_width, addr_width=64,
                 max_burst=256, max_outstanding=4, id_width=1, prefix="m_axi_gmem",
                 mem_read_latency=1):
        widths = ", ".join(map(str, self.DATA_WIDTHS))
        if not _is_int(data_width) or data_width not in self.DATA_WIDTHS:
            raise ValueError(f"data_width must be one of {widths}, not {data_width!r}")
        if not _is_int(mem_data_width) or mem_data_width not in self.DATA_WIDTHS \
                or mem_data_width > data_width:
            raise ValueError(f"mem_data_width must be one of {widths} and at most data_width "
                             f"({data_width}), not {mem_data_width!r}")
        if not _is_int(mem_addr_width) or not 1 <= mem_addr_width <= 32:
            raise ValueError(f"mem_addr_width must be an integer from 1 to 32, "
                             f"not {mem_addr_width!r}")
        if not _is_int(addr_width) or not 13 <= addr_width <= 64:
            raise ValueError(f"addr_width must be an integer from 13 to 64, not {addr_width!r}")
        if not _is_int(max_burst) or not 1 <= max_burst <= 256:
            raise ValueError(f"max_burst must be an integer from 1 to 256, not {max_burst!r}")
        if not _is_int(max_outstanding) or not 1 <= max_outstanding <= 32:
            raise ValueError(f"max_outstanding must be an integer from 1 to 32, "
                             f"not {max_outstanding!r}")
        if not _is_int(id_width) or not 1 <= id_width <= 16:
            raise ValueError(f"id_width must be an integer from 1 to 16, not {id_width!r}")
        if not isinstance(prefix, str) or not _PREFIX_RE.fullmatch(prefix):
            raise ValueError(f"prefix must be letters and digits joined by single underscores, "
                             f"not {prefix!r}")
        if not _is_int(mem_read_latency) or not 1 <= mem_read_latency <= 8:
            raise ValueError(f"mem_read_latency must be an integer from 1 to 8, "
                             f"not {mem_read_latency!r}")
        self._mem_read_latency = mem_read_latency
        self._data_width = data_width
        self._mem_data_width = mem_data_width
        self._mem_addr_width = mem_addr_width
        self._addr_width = addr_width
        self._max_burst = max_burst
        self._max_outstanding = max_outstanding
        self._id_width = id_width
        self._prefix = prefix

        p, W = prefix, data_width
        members = {}
        for ax in ("aw", "ar"):
            members.update({
                f"{p}_{ax}id": Out(id_width), f"{p}_{ax}addr": Out(addr_width),
                f"{p}_{ax}len": Out(8), f"{p}_{ax}size": Out(3), f"{p}_{ax}burst": Out(2),
                f"{p}_{ax}valid": Out(1), f"{p}_{ax}ready": In(1),
            })
            if ax == "aw":
                members.update({
                    f"{p}_wdata": Out(W), f"{p}_wstrb": Out(W // 8), f"{p}_wlast": Out(1),
                    f"{p}_wvalid": Out(1), f"{p}_wready": In(1),
                    f"{p}_bid": In(id_width), f"{p}_bresp": In(2), f"{p}_bvalid": In(1),
                    f"{p}_bready": Out(1),
                })
        members.update({
            f"{p}_rid": In(id_width), f"{p}_rdata": In(W), f"{p}_rresp": In(2),
            f"{p}_rlast": In(1), f"{p}_rvalid": In(1), f"{p}_rready": Out(1),
            "cmd": In(stream.Signature(self.command_layout)),
            "busy": Out(1), "done": Out(1), "error": Out(1),
            "mem": Out(MemoryPortSignature(data_width=mem_data_width,
                                           addr_width=mem_addr_width,
                                           read_latency=mem_read_latency)),
            "dropped": Out(1),
        })
        super().__init__(members)

    # -- parameters ----------------------------------------------------------------------------
    @property
    def data_width(self) -> int:
        return self._data_width

    @property
    def mem_read_latency(self) -> int:
        return self._mem_read_latency

    @property
    def write_buffer_depth(self) -> int:
        """Entries of the W buffer: ``mem_read_latency + 3`` (a beat's slot is reserved from
        its first local read until its W handshake)."""
        return self._mem_read_latency + 3

    @property
    def mem_data_width(self) -> int:
        return self._mem_data_width

    @property
    def mem_addr_width(self) -> int:
        return self._mem_addr_width

    @property
    def addr_width(self) -> int:
        return self._addr_width

    @property
    def max_burst(self) -> int:
        return self._max_burst

    @property
    def max_outstanding(self) -> int:
        return self._max_outstanding

    @property
    def id_width(self) -> int:
        return self._id_width

    @property
    def prefix(self) -> str:
        return self._prefix

    @property
    def command_layout(self) -> data.StructLayout:
        return dma_command_layout(addr_width=self._addr_width,
                                  mem_addr_width=self._mem_addr_width)

    def axi(self, name: str):
        """The AXI port ``<prefix>_<name>``, e.g. ``axi("araddr")``."""
        return getattr(self, f"{self._prefix}_{name}")

    @staticmethod
    def bursts(dev_addr: int, beats: int, *, data_width: int, max_burst: int = 256) -> list:
        """``(address, beats)`` of the bursts a copy of ``beats`` beats from ``dev_addr`` uses.

        The reference for the RTL's burst splitting: as long as possible, at most
        ``max_burst`` beats, never across a 4 KiB boundary.
        """
        nbytes = data_width // 8
        addr = dev_addr - dev_addr % nbytes
        out = []
        while beats:
            n = min(max_burst, beats, (BOUNDARY_BYTES - addr % BOUNDARY_BYTES) // nbytes)
            out.append((addr, n))
            addr += n * nbytes
            beats -= n
        return out

    # -- hardware -------------------------------------------------------------------------------
    def _planner(self, m, name, *, page_bits, cw):
        """A burst planner: the next burst's length, precomputed over two registered stages
        from its page offset ``off`` (beats into the 4 KiB page) and the beats ``left``.

        Returns a namespace: ``off``, ``left`` (written by the caller, which sets ``chg`` in
        the same cycle), ``ready`` (the outputs below are valid: 3 cycles after a change),
        ``more`` (``left != 0``), ``n`` (beats of the next burst), ``nm1`` (``n - 1``), ``n1``
        (``n == 1``), ``n2`` (``n == 2``), ``last`` (``n == left``: the last burst).
        """
        P, MB = 1 << page_bits, self._max_burst
        ns = type("Planner", (), {})()
        ns.off = Signal(page_bits, name=f"{name}_off")
        ns.left = Signal(cw, name=f"{name}_left")
        ns.chg = Signal(name=f"{name}_chg")
        st_a, ns.ready = Signal(name=f"{name}_st_a"), Signal(name=f"{name}_ready")
        # stage A: the distance to the page end and the burst cap, each minus one
        tbm1 = Signal(page_bits, name=f"{name}_tbm1")       # P - 1 - off
        capm1 = Signal(8, name=f"{name}_capm1")             # min(left, MB) - 1 (left > 0)
        tb = Signal(range(P + 1), name=f"{name}_tb")
        cap = Signal(range(MB + 1), name=f"{name}_cap")
        more_a = Signal(name=f"{name}_more_a")
        le_a = Signal(name=f"{name}_le_a")                  # left <= MB: the cap is left
        t0, t1, c0, c1 = (Signal(name=f"{name}_{x}") for x in ("t0", "t1", "c0", "c1"))
        le = ns.left <= MB
        m.d.sync += [
            tbm1.eq(~ns.off), tb.eq(P - ns.off),
            cap.eq(Mux(le, ns.left, MB)),
            capm1.eq(Mux(le, ns.left[:9] - 1, MB - 1)),
            more_a.eq(ns.left != 0), le_a.eq(le),
            t0.eq(~ns.off == 0), t1.eq(~ns.off == 1),
            c0.eq(Mux(le, ns.left == 1, MB == 1)), c1.eq(Mux(le, ns.left == 2, MB == 2)),
        ]
        # stage B: the smaller of the two
        ns.n = Signal(range(min(P, MB) + 1), name=f"{name}_n")
        ns.nm1 = Signal(8, name=f"{name}_nm1")
        ns.n1, ns.n2, ns.more, ns.last = (Signal(name=f"{name}_{x}")
                                          for x in ("n1", "n2", "more", "last"))
        lt = tbm1 < capm1
        m.d.sync += [ns.n.eq(Mux(lt, tb, cap)), ns.nm1.eq(Mux(lt, tbm1, capm1)),
                     ns.n1.eq(t0 | c0), ns.n2.eq(Mux(lt, t1, c1)), ns.more.eq(more_a),
                     ns.last.eq(le_a & ~lt)]
        m.d.sync += [st_a.eq(~ns.chg), ns.ready.eq(st_a & ~ns.chg)]
        return ns

    def elaborate(self, platform):
        m = Module()
        # Every decision below reads registers and precomputed flags only: the burst lengths
        # come from two planners (one for the address channel, one for the W beats), each two
        # registered stages ahead; counts carry "is zero" / "is one" flags updated with them.
        cs = self._command_state(m)
        ac = self._address_channel(m, cs)
        rx = self._reads(m, cs)
        lr = self._local_reads(m, cs)
        b_hs = self._write_buffer(m, cs, lr)
        m.d.comb += ac.done.eq(Mux(cs.to_dev, b_hs, rx.r_hs & self.axi("rlast")) & cs.busy)
        self._local_port(m, cs, rx, lr)
        self._command(m, cs, ac, rx, lr)
        return m

    # Each step below (and the write direction's, :class:`~rtl_gen.shell.dma_write.DmaWrites`)
    # adds its logic to ``m`` and returns what later steps use; the order of the calls in
    # :meth:`elaborate` is the order of the statements in the netlist.
    def _widths(self):
        """The widths the steps share (:class:`_Widths`)."""
        W, D = self._data_width, self._mem_data_width
        r = W // D                                  # local words per beat
        rb = (r - 1).bit_length()                   # bits of a lane index
        bb = (W // 8 - 1).bit_length()              # byte-offset bits of a beat
        return _Widths(W=W, D=D, r=r, rb=rb, lw=max(rb, 1), bb=bb,
                       page_bits=12 - bb,           # beat-offset bits in a 4 KiB page
                       cw=self._mem_addr_width + 1)  # word and beat counts

    def _command_state(self, m):
        """The command's registers (busy, direction, error, next local word, last lane) and
        the ``cmd``/``busy``/``error``/``done`` ports (:class:`_CommandState`)."""
        lw = self._widths().lw
        busy = Signal()
        to_dev = Signal()
        err = Signal()
        l_addr = Signal(self._mem_addr_width)       # next local word to write (reads) / read
        tail = Signal(lw)                           # last lane of the copy's last beat

        m.d.comb += [self.cmd.ready.eq(~busy), self.busy.eq(busy), self.error.eq(err)]
        m.d.sync += self.done.eq(0)
        accept = self.cmd.valid & ~busy
        go_r = Signal()                             # busy & ~to_dev
        go_w = Signal()                             # busy & to_dev
        return _CommandState(busy=busy, to_dev=to_dev, err=err, l_addr=l_addr, tail=tail,
                             accept=accept, go_r=go_r, go_w=go_w)

    def _address_channel(self, m, cs):
        """The address channel (AR for reads, AW for writes: one direction per command): a
        burst requested whenever the planner is ready and fewer than ``max_outstanding`` are
        in flight (:class:`_AddressChannel`)."""
        a, wd = self.axi, self._widths()
        bb = wd.bb
        max_out = self._max_outstanding
        busy, to_dev = cs.busy, cs.to_dev
        ap = self._planner(m, "ap", page_bits=wd.page_bits, cw=wd.cw)
        a_addr = Signal(self._addr_width)           # next burst's address
        ax_valid = Signal()
        ax_addr = Signal(self._addr_width)
        ax_len = Signal(8)
        # bursts in flight, as a thermometer code (bit i: more than i), so that neither the
        # count nor its full/empty tests need a carry chain
        outstanding = Signal(max_out)
        out_full = outstanding[max_out - 1]
        out_zero = ~outstanding[0]
        a_zero = Signal(init=1)                     # every burst requested (ap.left == 0)
        ax_issue = Signal()
        ax_done = Signal()                          # a burst completed (last R / B)
        m.d.comb += ax_issue.eq(busy & ap.ready & ap.more & ~ax_valid & ~out_full)
        with m.If(ax_issue):
            m.d.sync += [ax_valid.eq(1), ax_addr.eq(a_addr), ax_len.eq(ap.nm1),
                         a_addr.eq(a_addr + (ap.n << bb)),
                         ap.off.eq(ap.off + ap.n), ap.left.eq(ap.left - ap.n),
                         a_zero.eq(ap.last)]
            m.d.comb += ap.chg.eq(1)
        ax_ready = Mux(to_dev, a("awready"), a("arready"))
        with m.If(ax_valid & ax_ready):
            m.d.sync += ax_valid.eq(0)
        with m.If(ax_issue & ~ax_done):
            m.d.sync += outstanding.eq(Cat(Const(1), outstanding[:-1]))
        with m.Elif(~ax_issue & ax_done):
            m.d.sync += outstanding.eq(outstanding[1:])
        for ax in ("aw", "ar"):
            m.d.comb += [
                a(f"{ax}id").eq(0), a(f"{ax}addr").eq(ax_addr), a(f"{ax}len").eq(ax_len),
                a(f"{ax}size").eq(bb), a(f"{ax}burst").eq(1),      # INCR
                a(f"{ax}valid").eq(ax_valid & (to_dev if ax == "aw" else ~to_dev)),
            ]
        return _AddressChannel(planner=ap, addr=a_addr, valid=ax_valid, zero=a_zero,
                               out_zero=out_zero, done=ax_done)

    def _reads(self, m, cs):
        """Reads: each R beat into the serializer, its words written to local memory one a
        cycle (:class:`_Reads`)."""
        a, wd = self.axi, self._widths()
        W, D, r, lw = wd.W, wd.D, wd.r, wd.lw
        rx_beats = Signal(wd.cw)                    # beats not yet received
        rx_last = Signal()                          # rx_beats == 1
        rx_zero = Signal(init=1)                    # rx_beats == 0
        s_valid = Signal()
        s_data = Signal(W)
        s_idx = Signal(lw)
        s_rem = Signal(lw)                          # words of the beat after the current one
        s_end = Signal()                            # s_rem == 0
        tail0 = Signal()                            # tail == 0
        rready = Signal()
        m.d.comb += [rready.eq(~s_valid | s_end), a("rready").eq(rready)]
        r_hs = a("rvalid") & rready
        with m.If(s_valid):
            m.d.sync += [cs.l_addr.eq(cs.l_addr + 1), s_idx.eq(s_idx + 1),
                         s_rem.eq(s_rem - 1), s_end.eq(s_rem == 1)]
            with m.If(s_end):
                m.d.sync += s_valid.eq(0)
        with m.If(r_hs & cs.go_r):
            m.d.sync += [s_valid.eq(1), s_data.eq(a("rdata")), s_idx.eq(0),
                         s_rem.eq(Mux(rx_last, cs.tail, r - 1) if r > 1 else 0),
                         s_end.eq(Mux(rx_last, tail0, r == 1) if r > 1 else 1),
                         rx_beats.eq(rx_beats - 1), rx_last.eq(rx_beats == 2),
                         rx_zero.eq(rx_last)]
            with m.If(a("rresp") != 0):
                m.d.sync += cs.err.eq(1)
        lanes = [s_data[j * D:(j + 1) * D] for j in range(r)]
        s_word = Signal(D)
        if r > 1:
            with m.Switch(s_idx):
                for j in range(r):
                    with m.Case(j):
                        m.d.comb += s_word.eq(lanes[j])
        else:
            m.d.comb += s_word.eq(lanes[0])
        return _Reads(beats=rx_beats, last=rx_last, zero=rx_zero, tail0=tail0, r_hs=r_hs,
                      s_valid=s_valid, s_word=s_word)

    def _local_port(self, m, cs, rx, lr):
        """The local memory port: the reads' writes and the writes' reads, dropped while
        ``mem.enable`` is low."""
        rd_issue, s_valid = lr.rd_issue, rx.s_valid
        m.d.comb += [
            self.mem.addr.eq(cs.l_addr),
            self.mem.re.eq(rd_issue & self.mem.enable),
            self.mem.we.eq(Mux(s_valid & self.mem.enable, (1 << (self._widths().D // 8)) - 1,
                               0)),
            self.mem.wdata.eq(rx.s_word),
            self.dropped.eq((rd_issue | s_valid) & ~self.mem.enable),
        ]

    def _command(self, m, cs, ac, rx, lr):
        """A command accepted: every counter and planner loaded from it; its completion: the
        last burst requested and answered (writes), the last word written (reads)."""
        a, wd = self.axi, self._widths()
        r, rb, bb = wd.r, wd.rb, wd.bb
        cmd = self.cmd.payload
        busy, to_dev, go_r, go_w = cs.busy, cs.to_dev, cs.go_r, cs.go_w
        ap, wp = ac.planner, lr.planner
        with m.If(cs.accept):
            words = cmd.words
            beats = Signal(wd.cw)
            m.d.comb += beats.eq((words + (r - 1)) >> rb if r > 1 else words)
            none = words == 0
            one = ~none & (((words >> rb) == 0) | (words == r) if r > 1 else words == 1)
            aligned = Cat(Const(0, bb), cmd.dev_addr[bb:])
            off = cmd.dev_addr[bb:12]
            rd, wr = ~cmd.to_device, cmd.to_device
            m.d.sync += [
                busy.eq(1), to_dev.eq(cmd.to_device), go_r.eq(rd), go_w.eq(wr), cs.err.eq(0),
                cs.l_addr.eq(cmd.mem_addr),
                ac.addr.eq(aligned), ap.off.eq(off), ap.left.eq(beats), ac.zero.eq(none),
                wp.off.eq(off), wp.left.eq(Mux(wr, beats, 0)),
                rx.beats.eq(Mux(rd, beats, 0)), rx.last.eq(rd & one), rx.zero.eq(wr | none),
                lr.beats.eq(Mux(wr, beats, 0)), lr.more.eq(wr & ~none),
                lr.lastbeat.eq(wr & one), lr.burst.eq(0), lr.b0.eq(1), lr.b1.eq(0),
            ]
            m.d.comb += [ap.chg.eq(1), wp.chg.eq(1)]
            if r > 1:
                m.d.sync += [lr.idx.eq(0), lr.mid_beat.eq(0),
                             cs.tail.eq((words[:rb] - 1)[:rb]), rx.tail0.eq(words[:rb] == 1)]
        finished = Mux(to_dev, ac.zero & ~ac.valid & ac.out_zero, rx.zero & ~rx.s_valid)
        with m.If(busy & finished):
            m.d.sync += [busy.eq(0), go_r.eq(0), go_w.eq(0), self.done.eq(1)]


@dataclass(frozen=True)
class _Widths:
    """AXI and local word widths (``W``, ``D``), local words per beat (``r``), bits of a lane
    index (``rb``; ``lw`` at least 1), byte-offset bits of a beat (``bb``), beat-offset bits
    in a 4 KiB page, bits of the word and beat counts (``cw``)."""
    W: int
    D: int
    r: int
    rb: int
    lw: int
    bb: int
    page_bits: int
    cw: int


@dataclass(frozen=True)
class _CommandState:
    """The command's registers: ``busy``, its direction (``to_dev``; ``go_r``/``go_w``:
    busy in that direction), the sticky error, the next local word, the last lane of the last
    beat; ``accept``: a command handshake this cycle."""
    busy: Signal
    to_dev: Signal
    err: Signal
    l_addr: Signal
    tail: Signal
    accept: Value
    go_r: Signal
    go_w: Signal


@dataclass(frozen=True)
class _AddressChannel:
    """The address channel: its planner, the next burst's address, the request register's
    valid bit, every burst requested (``zero``), none in flight (``out_zero``), a burst
    completed this cycle (``done``, driven by :meth:`AxiDma.elaborate`)."""
    planner: object
    addr: Signal
    valid: Signal
    zero: Signal
    out_zero: Value
    done: Signal


@dataclass(frozen=True)
class _Reads:
    """The reads: beats not yet received (and == 1, == 0 flags), ``tail == 0``, the R
    handshake, and the serializer's word to write (``s_valid``, ``s_word``)."""
    beats: Signal
    last: Signal
    zero: Signal
    tail0: Signal
    r_hs: Value
    s_valid: Signal
    s_word: Signal
