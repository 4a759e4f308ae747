"""The trainer's gather engine: the records of sampled slots, read from the ring in device memory
through an AXI4 read master, bit for bit the bytes :meth:`sw.trainer.golden.TrainerCore.gather`
unpacks (:mod:`sw.trainer.layout`)."""

import re

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from sw.trainer.layout import PAGE, record_bytes, region_base
from sw.trainer.schedule import gather_cycles
from sw.trainer.spec import TrainerConfig

__all__ = ["RecordGather"]

_PREFIX_RE = re.compile(r"[A-Za-z][A-Za-z0-9]*(_[A-Za-z0-9]+)*")

#: Most beats of an AXI4 INCR burst.
MAX_BURST = 256
#: Largest ``max_outstanding``.
MAX_OUTSTANDING = 256


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


class RecordGather(wiring.Component):
    """Reads the ring records of a stream of slot indices, one AXI4 INCR burst per record.

    Record ``slot`` lives at ``base + region_base(config, "ring") + slot * R`` with R =
    ``record_bytes(config)`` (:mod:`sw.trainer.layout`). Each index taken on :attr:`idx` becomes
    one read burst of :attr:`beats` beats of W = ``config.storage_width`` bits (a burst never
    crosses 4 KiB: R is a power of two and the record aligned to it); the records leave on
    :attr:`rec` in index order, one per index (duplicates included), while up to
    ``max_outstanding`` bursts are in flight.

    Timing (cycles of ``clk``; b = :attr:`beats` = ``ceil(R / (W / 8))``; a memory of read
    latency L: its first R beat L cycles after the AR handshake, the beats of a burst and of
    consecutive bursts back to back):

    * Latency: an index taken in cycle 0 is on ``ARADDR`` (registered) in cycle 1 and its record
      on :attr:`rec` (registered) in cycle ``L + b + 1``.
    * Throughput: one R beat per cycle (``rready`` is the inverse of a register: low only while
      a finished record waits behind a stalled :attr:`rec`) and at most one index per cycle; a
      record every b cycles once ``max_outstanding`` O covers the memory's round trip.
    * B indices sent back to back (the first taken in cycle 0), no back-pressure: the last
      record is taken in cycle (:meth:`cycles`)
      ``L + 1 + b + max((B - 1) b, floor((B - 1) / O) (L + b + 1) + ((B - 1) mod O) b)``,
      which is ``B b + L + 1`` when ``(O - 1) b >= L + 1``: the read bandwidth or O bursts per
      round trip of ``L + b + 1`` cycles, whichever is less, bounds it.
    * Registers: two records (the output and one finished record behind it; with b > 1 the
      latter is the shift register the beats arrive in), the AR payload, an outstanding count,
      and with R < W / 8 a ``max_outstanding``-entry LUT-RAM queue of ``log2(W / 8R)``-bit
      lanes. The longest paths are the 64-bit address sum of ``base`` and the slot, and
      ``idx.ready`` (combinational from ``ARREADY``).

    Parameters
    ----------
    config : TrainerConfig
        The trainer: ``storage_width`` W (the AXI data width), ``tree.index_width`` (slot bits),
        the record size R = :func:`~sw.trainer.layout.record_bytes` bytes (at most 4096 and at
        most 256 beats) and the ring's offset.
    max_outstanding : int
        Most bursts in flight (index taken, last R beat not yet received), 1 to 256; default
        ``config.gather_outstanding``.
        To read at the full bandwidth of one beat per cycle it must reach
        ``1 + ceil((L + 1) / beats)`` for a memory of read latency L (see *Timing*).
    id_width : int
        Width of ``ARID``/``RID``, 1 to 16; bursts use ID 0 (so R beats come back in order),
        ``RID`` is ignored.
    prefix : str
        Name prefix of the flat AXI ports (``"m_axi_gmem"`` gives ``m_axi_gmem_araddr``, the
        names Vivado and cocotbext-axi's ``AxiReadBus.from_prefix`` recognise).

    Members
    -------
    base : ``In(64)``
        The storage's byte address (``BASE_HI:BASE_LO``), a multiple of ``max(R, W / 8)`` (the
        driver's storage is page aligned); its lower bits are ignored. Read combinationally in
        the cycle an index is taken: hold it while indices are sent.
    idx : ``In(stream.Signature(tree.index_width))``
        Slot indices, below ``tree.capacity``, any count. ``ready`` is high while the AR register
        is empty or being taken and fewer than ``max_outstanding`` bursts are in flight.
    rec : ``Out(stream.Signature(8 * R))``
        The records, in index order: byte ``j`` of the record in memory is payload bits
        ``8j .. 8j + 7`` (little-endian, as :func:`~sw.trainer.layout.pack_records` writes it).
        ``valid`` never waits for ``ready``.
    <prefix>_ar{id,addr,len,size,burst,valid} : ``Out``; <prefix>_arready : ``In(1)``
    <prefix>_r{id,data,resp,last,valid} : ``In``; <prefix>_rready : ``Out(1)``
        AXI4 read master: ``ARADDR`` 64 bits, a multiple of ``W / 8``; ``ARLEN`` ``beats - 1``;
        ``ARSIZE`` ``log2(W / 8)``; ``ARBURST`` INCR; no ``ARLOCK``/``ARCACHE``/``ARPROT``/
        ``ARQOS`` (the interconnect ties them off). A record ends with the beat that has
        ``RLAST``. When R < W / 8 a beat holds ``W / (8 R)`` records and the record is the
        slot's lane of it.
    busy : ``Out(1)``
        An index was taken whose record has not left on :attr:`rec` yet (combinational from
        registers).
    error : ``Out(1)``
        Registered: an R beat with a SLVERR or DECERR response was taken in the previous cycle
        (its data goes into the record as received).

    Raises
    ------
    TypeError
        ``config`` is not a :class:`~sw.trainer.spec.TrainerConfig`.
    ValueError
        For a parameter out of range; the message names the parameter.
    """

    def __init__(self, config, *, max_outstanding=None, id_width=1, prefix="m_axi_gmem"):
        if max_outstanding is None and isinstance(config, TrainerConfig):
            max_outstanding = config.gather_outstanding
        self._check(config, max_outstanding, id_width, prefix)
        self._config = config
        self._max_outstanding = max_outstanding
        self._id_width = id_width
        self._prefix = prefix
        p, W = prefix, config.storage_width
        super().__init__({
            "base": In(64),
            "idx": In(stream.Signature(config.tree.index_width)),
            "rec": Out(stream.Signature(8 * self.record_bytes)),
            f"{p}_arid": Out(id_width), f"{p}_araddr": Out(64), f"{p}_arlen": Out(8),
            f"{p}_arsize": Out(3), f"{p}_arburst": Out(2), f"{p}_arvalid": Out(1),
            f"{p}_arready": In(1),
            f"{p}_rid": In(id_width), f"{p}_rdata": In(W), f"{p}_rresp": In(2),
            f"{p}_rlast": In(1), f"{p}_rvalid": In(1), f"{p}_rready": Out(1),
            "busy": Out(1), "error": Out(1),
        })

    @staticmethod
    def _check(config, max_outstanding, id_width, prefix):
        if not isinstance(config, TrainerConfig):
            raise TypeError(f"config must be a TrainerConfig, not {config!r}")
        rb, wb = record_bytes(config), config.storage_width // 8
        limit = min(PAGE, MAX_BURST * wb)
        if rb > limit:
            raise ValueError(f"record_bytes must be at most {limit} (one burst of at most "
                             f"{MAX_BURST} beats within a 4 KiB page), not {rb}")
        if not _is_int(max_outstanding) or not 1 <= max_outstanding <= MAX_OUTSTANDING:
            raise ValueError(f"max_outstanding must be an integer from 1 to {MAX_OUTSTANDING}, "
                             f"not {max_outstanding!r}")
        if not _is_int(id_width) or not 1 <= id_width <= 16:
            raise ValueError(f"id_width must be an integer from 1 to 16, not {id_width!r}")
        if not isinstance(prefix, str) or not _PREFIX_RE.fullmatch(prefix):
            raise ValueError(f"prefix must be letters and digits joined by single underscores, "
                             f"not {prefix!r}")

    # -- parameters ----------------------------------------------------------------------------
    @property
    def config(self) -> TrainerConfig:
        return self._config

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
    def record_bytes(self) -> int:
        return record_bytes(self._config)

    @property
    def beats(self) -> int:
        """Beats of a record's burst: ``ceil(record_bytes / (storage_width / 8))``."""
        wb = self._config.storage_width // 8
        return -(-self.record_bytes // wb)

    @property
    def lane_bits(self) -> int:
        """Bits of a record's lane in a beat: ``log2(W / 8R)`` when records are narrower than a
        beat, else 0."""
        wb = self._config.storage_width // 8
        return max(0, (wb // self.record_bytes).bit_length() - 1)

    def axi(self, name: str):
        """The AXI port ``<prefix>_<name>``, e.g. ``axi("araddr")``."""
        return getattr(self, f"{self._prefix}_{name}")

    def address(self, base: int, slot: int) -> int:
        """``(ARADDR, lane)`` of ``slot``'s burst (the reference of the RTL's address)."""
        rb, wb = self.record_bytes, self._config.storage_width // 8
        at = base + region_base(self._config, "ring") + slot * rb
        return at - at % wb, at % wb // rb

    def cycles(self, batch: int, read_latency: int) -> int:
        """Cycles from the first of ``batch`` indices sent back to back to the last record,
        with no back-pressure and a memory of ``read_latency`` cycles (class docstring,
        *Timing*): the last record's handshake cycle when the first index's is cycle 0."""
        if not _is_int(batch) or batch < 1:
            raise ValueError(f"batch must be a positive integer, not {batch!r}")
        if not _is_int(read_latency) or read_latency < 1:
            raise ValueError(f"read_latency must be a positive integer, not {read_latency!r}")
        return gather_cycles(self.beats, self._max_outstanding, batch, read_latency)

    # -- hardware -------------------------------------------------------------------------------
    def elaborate(self, platform):
        m = Module()
        taken = self.idx.valid & self.idx.ready
        done = Signal()                     # the last R beat of a record is taken
        count = self._address_channel(m, taken, done)
        lane = self._lane_queue(m, taken, done)
        self._records(m, done, lane)
        m.d.comb += self.busy.eq((count != 0) | self.rec.valid)
        return m

    def _address_channel(self, m, taken, done):
        """The AR register, loaded with an index's burst when taken, and the count of bursts in
        flight, which holds the indices back at ``max_outstanding``; returns the count."""
        a, O = self.axi, self._max_outstanding
        wb, rb = self._config.storage_width // 8, self.record_bytes
        k = max(rb, wb).bit_length() - 1    # address bits below one unit (a record or a beat)
        ring = region_base(self._config, "ring")
        unit = self.base[k:] + (self.idx.payload >> self.lane_bits)
        if ring >> k:
            unit = unit + (ring >> k)
        ar_valid = Signal()
        ar_addr = Signal(64)
        count = Signal(range(O + 1))        # bursts in flight, the AR register's included
        full = Signal()                     # count == O
        m.d.comb += self.idx.ready.eq((~ar_valid | a("arready")) & ~full)
        with m.If(taken):
            m.d.sync += [ar_valid.eq(1), ar_addr.eq(Cat(Const(0, k), unit[:64 - k]))]
        with m.Elif(a("arready")):
            m.d.sync += ar_valid.eq(0)
        with m.If(taken & ~done):
            m.d.sync += [count.eq(count + 1), full.eq(count == O - 1)]
        with m.Elif(done & ~taken):
            m.d.sync += [count.eq(count - 1), full.eq(0)]
        m.d.comb += [
            a("arid").eq(0), a("araddr").eq(ar_addr), a("arlen").eq(self.beats - 1),
            a("arsize").eq((wb - 1).bit_length()), a("arburst").eq(1),      # INCR
            a("arvalid").eq(ar_valid),
        ]
        return count

    def _lane_queue(self, m, taken, done):
        """With records narrower than a beat, the lane of each burst in flight: a queue written
        when an index is taken, read combinationally at its record's beat. Returns the head's
        lane (a constant 0 when a record fills its beats)."""
        if not self.lane_bits:
            return Const(0)
        O = self._max_outstanding
        if O == 1:
            head = Signal(self.lane_bits)
            with m.If(taken):
                m.d.sync += head.eq(self.idx.payload[:self.lane_bits])
            return head
        m.submodules.lanes = lanes = Memory(shape=self.lane_bits, depth=O, init=[])
        wp = lanes.write_port()
        rp = lanes.read_port(domain="comb")
        wr, rd = Signal(range(O)), Signal(range(O))
        m.d.comb += [wp.addr.eq(wr), wp.en.eq(taken), wp.data.eq(self.idx.payload[:self.lane_bits]),
                     rp.addr.eq(rd)]

        def advance(ptr):                   # the next entry, wrapping at O
            return ptr + 1 if O & (O - 1) == 0 else Mux(ptr == O - 1, 0, ptr + 1)

        with m.If(taken):
            m.d.sync += wr.eq(advance(wr))
        with m.If(done):
            m.d.sync += rd.eq(advance(rd))
        return rp.data

    def _records(self, m, done, lane):
        """R beats into records: the output register and, behind it, one finished record
        (``held``) while the output is stalled; ``rready`` is low only while one is held."""
        a, W, RB = self.axi, self._config.storage_width, 8 * self.record_bytes
        held = Signal()                     # a finished record waits in ``asm``
        asm = Signal(RB)                    # beats arrive here (b > 1), or a held record
        out_valid = Signal()
        out = Signal(RB)
        rready = ~held
        beat = a("rvalid") & rready
        m.d.comb += [a("rready").eq(rready), done.eq(beat & a("rlast"))]
        if self.beats > 1:
            record = Cat(asm[W:], a("rdata"))
            with m.If(beat):
                m.d.sync += asm.eq(record)
        elif self.lane_bits:
            record = a("rdata").word_select(lane, RB)
        else:
            record = a("rdata")[:RB]
        free = ~out_valid | self.rec.ready
        with m.If(held):
            with m.If(free):
                m.d.sync += [out.eq(asm), out_valid.eq(1), held.eq(0)]
        with m.Elif(done):
            with m.If(free):
                m.d.sync += [out.eq(record), out_valid.eq(1)]
            with m.Else():
                m.d.sync += held.eq(1)
                if self.beats == 1:
                    m.d.sync += asm.eq(record)
        with m.Elif(self.rec.ready):
            m.d.sync += out_valid.eq(0)
        m.d.sync += self.error.eq(beat & a("rresp")[1])
        m.d.comb += [self.rec.valid.eq(out_valid), self.rec.payload.eq(out)]
