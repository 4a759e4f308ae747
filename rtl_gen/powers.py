"""The power unit in gateware (the trainer's priorities and IS weights, the learner's Adam):
bit for bit as :mod:`sw.powers` (its golden model, which also holds the tables and
widths: :class:`~sw.powers.PowerConfig`).

* :class:`Log2Unit` -- :func:`~sw.powers.log2_raw`: leading-one detector, barrel
  shifter, table read, interpolation multiply, rounding; 5 cycles.
* :class:`Exp2Unit` -- :func:`~sw.powers.exp2_raw`: table read, interpolation
  multiply, interpolation add, barrel shifter, rounding and saturation; 5 cycles.
* :class:`LogScaleUnit` -- ``round(p·log2 x)`` as :func:`~sw.powers.power_raw` forms
  it, clamped to the logarithm's range; 4 cycles.
* :class:`PowerUnit` -- ``x**p``: the three above, connected stream to stream; 15 cycles.

Every unit is a pipeline with an ``amaranth.lib.stream`` input ``i`` and output ``o``, one
element per cycle. The whole pipeline advances while its output is empty or taken
(``i.ready = ~o.valid | o.ready``): a stalled output holds every stage, nothing is lost or
reordered. A ``tag`` of any shape (``tag_shape``) travels with each element; with a shape of no
bits (the default) the payloads have no ``tag`` field.

Every stage ends in a register. The tables are ``amaranth.lib.memory`` ROMs with a registered
read (LUTs at ``table_bits`` = 8); each multiplier has registers on both sides (one DSP48E2 at
the defaults). The longest paths are a table read or a barrel shifter (5 LUT levels), a
multiplier between registers and exp2's 41-bit rounding increment: about 340 MHz on an
UltraScale+ -2 by the project's Yosys delay model (docs/fixed_point.md gives the figures).
"""

from amaranth.hdl import Cat, Const, Module, Mux, Shape, ShapeCastable, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from sw.config import check_int
from sw.fixed import FixedFormat
from sw.powers import (EXP2_LATENCY, LOG2_LATENCY, POWER_LATENCY, SCALE_LATENCY, PowerConfig,
                       table_stages)

from .fixed import saturate_fast

__all__ = ["Log2Unit", "Exp2Unit", "LogScaleUnit", "PowerUnit", "LOG2_LATENCY",
           "EXP2_LATENCY", "SCALE_LATENCY", "POWER_LATENCY"]

# The latencies (LOG2_LATENCY, EXP2_LATENCY, SCALE_LATENCY, POWER_LATENCY) are the spec's
# (sw.powers): the trainer's cycle model counts them; the pipelines below build them.

#: Widest unsigned input and output (the golden model computes in int64).
MAX_WIDTH = 62


# -- checks -----------------------------------------------------------------------------------
def _check_config(config):
    if not isinstance(config, PowerConfig):
        raise TypeError(f"config must be a PowerConfig, not {config!r}")


def _check_tag(tag_shape):
    if isinstance(tag_shape, bool) or not isinstance(tag_shape, (int, Shape, ShapeCastable)):
        raise TypeError(f"tag_shape must be a shape (e.g. a width or a StructLayout), "
                        f"not {tag_shape!r}")
    try:
        Shape.cast(tag_shape)
    except (TypeError, ValueError):
        raise TypeError(f"tag_shape must be a shape (e.g. a width or a StructLayout), "
                        f"not {tag_shape!r}") from None


def _layout(fields, tag_shape) -> data.StructLayout:
    """A payload: ``fields``, and ``"tag"`` unless ``tag_shape`` has no bits."""
    if Shape.cast(tag_shape).width:
        fields = {**fields, "tag": tag_shape}
    return data.StructLayout(fields)


# -- pipeline helpers -------------------------------------------------------------------------
class _Pipeline:
    """Valid bits of a ``stages``-register pipeline with one clock enable ``en``
    (``~o.valid | o.ready``), ``reg`` for its data registers (no reset: only the valid bits
    have one), and the tag ``tag`` (or None) delayed to ``o.payload.tag``."""

    def __init__(self, m, component, stages, tag=None):
        self.m = m
        self.en = Signal(name="en")
        self.valid = [Signal(name=f"valid{k}") for k in range(1, stages + 1)]
        m.d.comb += [
            self.en.eq(~self.valid[-1] | component.o.ready),
            component.i.ready.eq(self.en),
            component.o.valid.eq(self.valid[-1]),
        ]
        with m.If(self.en):
            m.d.sync += self.valid[0].eq(component.i.valid)
            m.d.sync += [b.eq(a) for a, b in zip(self.valid, self.valid[1:])]
        if tag is not None:
            shape = component.o.payload.tag.shape()
            for k in range(1, stages + 1):
                tag = self.reg(tag, shape, f"tag{k}")
            m.d.comb += component.o.payload.tag.eq(tag)

    def reg(self, value, shape, name, reset_less=True):
        """A data register loaded with ``value`` while ``en`` (``reset_less=False``: one that
        synthesis cannot merge into a shift register, SRL16E/SRL32E having no reset)."""
        r = Signal(shape, name=name, reset_less=reset_less)
        with self.m.If(self.en):
            self.m.d.sync += r.eq(value)
        return r


def _tag(payload):
    """The payload's ``tag`` field, or None."""
    return payload.tag if "tag" in payload.shape().members else None


def _leading_zeros(bits):
    """Combinational: leading zeros of ``bits`` (width a power of two, at least 2, not all
    zero), as a ``log2(len)``-bit value: a tree of 2:1 multiplexers, one level per bit of the
    count."""
    if len(bits) == 2:
        return ~bits[1]
    half = len(bits) // 2
    lo, hi = bits[:half], bits[half:]
    hi_zero = ~hi.any()
    return Cat(Mux(hi_zero, _leading_zeros(lo), _leading_zeros(hi)), hi_zero)


def _rom(m, name, table, a_offset=0, a_drop=0, tables="auto"):
    """A ROM of ``2**T`` words ``(a, d)``: ``a = table[i] + a_offset - a_drop`` (low field) and
    ``d = table[i+1] - table[i]``. Returns ``(memory, a_width, d_width)``. ``tables="block"``
    asks synthesis for block RAM (``rom_style``, which Yosys and Vivado honour): a hard read
    instead of a LUT tree whose depth the mapper chooses."""
    n = len(table) - 1
    a = [int(table[i]) + a_offset - a_drop for i in range(n)]
    d = [int(table[i + 1] - table[i]) for i in range(n)]
    assert min(a) >= 0 and min(d) >= 0
    aw, dw = max(max(a).bit_length(), 1), max(max(d).bit_length(), 1)
    mem = Memory(shape=unsigned(aw + dw), depth=n, init=[x | (y << aw) for x, y in zip(a, d)],
                 attrs={"rom_style": "block"} if tables == "block" else None)
    m.submodules[name] = mem
    return mem, aw, dw


# -- log2 -------------------------------------------------------------------------------------
class Log2Unit(wiring.Component):
    """``log2`` of unsigned fixed-point numbers, bit for bit as
    :func:`sw.powers.log2_raw`.

    Parameters
    ----------
    config : PowerConfig
        Tables and formats (T = ``table_bits``, M = ``mant_bits``, ``table_frac``,
        ``log_frac``, ``log_int``).
    in_width : int
        Bits of the unsigned input, 1..62.
    in_frac : int
        Its fraction bits, ``0..2**log_int - 2``: then every input's logarithm is
        representable (``config.input_width_ok(in_width, in_frac)``).
    tag_shape : shape
        What travels with each element (``0``: nothing, and no ``tag`` field).
    tables : ``"auto"`` or ``"block"``
        Where the table goes: synthesis chooses (LUTs at ``table_bits`` = 8), or block RAM
        followed by one more register stage (latency + 1, :func:`sw.powers.table_stages`).

    Members
    -------
    i : ``In(stream.Signature(StructLayout({"x": unsigned(in_width), "tag": tag_shape})))``
    o : ``Out(stream.Signature(StructLayout({"log": signed(log_width), "tag": tag_shape})))``
        ``log``: ``config.log_frac`` fraction bits, ``config.log_width`` bits; ``x = 0`` gives
        ``config.log_min``.

    Raises
    ------
    TypeError
        ``config`` not a :class:`PowerConfig`, ``tag_shape`` not a shape.
    ValueError
        A width out of range; the message names it.

    Notes
    -----
    Latency :data:`LOG2_LATENCY` = 6 cycles, throughput one result per cycle. Stages (each
    ends in a register): 0 the input; 1 the leading-one detector (a multiplexer tree over
    the input padded to a power of two); 2 the barrel shifter (the M bits below the leading one, truncated or
    zero-filled) and the exponent ``e - in_frac``; 3 the table read (a ``2**T``-word ROM of
    ``(a + half, b - a)``: the rounding constant of the last step sits in the table); 4 the
    interpolation multiply ``(b - a)·r`` (``(table_frac - T + 1) x (M - T)`` bits: one
    DSP48E2 at the defaults) beside ``(e - in_frac)·2**table_frac + a + half``; 5 their sum
    shifted to ``log_frac`` bits (``log_min`` for a zero input: one multiplexer after it).
    """

    def __init__(self, config, *, in_width, in_frac, tag_shape=0, tables="auto"):
        def checks():
            _check_config(config)
            check_int("in_width", in_width, 1, MAX_WIDTH)
            check_int("in_frac", in_frac, 0, (1 << config.log_int) - 2)
            _check_tag(tag_shape)
            table_stages(tables)
        checks()
        self._tables = tables
        # Every logarithm is representable (and none of x > 0 is log_min): no clamp needed.
        assert config.input_width_ok(in_width, in_frac)
        self._config, self._in_width, self._in_frac = config, in_width, in_frac
        self._tag_shape = tag_shape
        super().__init__({
            "i": In(stream.Signature(_layout({"x": unsigned(in_width)}, tag_shape))),
            "o": Out(stream.Signature(_layout({"log": signed(config.log_width)}, tag_shape))),
        })

    config = property(lambda self: self._config)
    in_width = property(lambda self: self._in_width)
    in_frac = property(lambda self: self._in_frac)
    tag_shape = property(lambda self: self._tag_shape)
    tables = property(lambda self: self._tables)
    latency = property(lambda self: LOG2_LATENCY + table_stages(self._tables))

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        W, T, M = self._in_width, cfg.table_bits, cfg.mant_bits
        Ft, F, R = cfg.table_frac, cfg.log_frac, cfg.mant_bits - cfg.table_bits
        pipe = _Pipeline(m, self, self.latency, _tag(self.i.payload))
        reg = pipe.reg

        # 0: the input registered (it may come from a memory or a multiplexer).
        x = reg(self.i.payload.x, W, "x0")

        # 1: leading-one detector (the input padded with ones to a power of two).
        pad = (1 << max(W - 1, 0).bit_length()) - W
        lz = _leading_zeros(Cat(Const((1 << pad) - 1, pad), x)) if W > 1 else Const(0, 1)
        x1, lz1 = reg(x, W, "x1"), reg(lz, len(lz), "lz1")
        zero1 = reg(x == 0, 1, "zero1")

        # 2: barrel shifter: the M bits below the leading one; the exponent e - in_frac.
        xn = (x1 << lz1)[:W]
        f = xn[W - 1 - M:W - 1] if W - 1 >= M else Cat(Const(0, M - (W - 1)), xn[:W - 1])
        e_shape = signed(max(W, self._in_frac + 1).bit_length() + 1)
        f2 = reg(f, M, "f2")
        e2 = reg(W - 1 - self._in_frac - lz1, e_shape, "e2")
        zero2 = reg(zero1, 1, "zero2")

        # 3: table read (a + the half of the final rounding, b - a).
        half = 1 << (Ft - F - 1) if Ft > F else 0
        rom, aw, dw = _rom(m, "log_table", cfg.log_table, a_offset=half, tables=self._tables)
        rd = rom.read_port()
        m.d.comb += [rd.addr.eq(f2[R:]), rd.en.eq(pipe.en)]
        a3, d3 = rd.data[:aw], rd.data[aw:]
        r3, e3 = reg(f2[:R], R, "r3"), reg(e2, e_shape, "e3")
        zero3 = reg(zero2, 1, "zero3")
        if self._tables == "block":     # 3b: the block RAM's word registered; the others
            a3, d3 = reg(a3, aw, "a3b"), reg(d3, dw, "d3b")    # with resets, no shift register
            r3 = reg(r3, R, "r3b", reset_less=False)
            e3 = reg(e3, e_shape, "e3b", reset_less=False)
            zero3 = reg(zero3, 1, "zero3b", reset_less=False)

        # 4: interpolation multiply; beside it, the exponent and the table entry.
        base_shape = signed(e_shape.width + Ft + 1)
        p4 = reg(d3 * r3, dw + R, "p4")
        base4 = reg((e3 << Ft) + a3, base_shape, "base4")
        zero4 = reg(zero3, 1, "zero4")

        # 5: the sum, rounded to log_frac bits (the half is in the table).
        total = base4 + p4[R:]
        lw = cfg.log_width
        log = Mux(zero4, cfg.log_min, total[Ft - F:].as_signed())     # fits: in_frac checked
        m.d.comb += self.o.payload.log.eq(reg(log, signed(lw), "log5"))
        return m


# -- exp2 -------------------------------------------------------------------------------------
class Exp2Unit(wiring.Component):
    """``2**y`` of logarithms into an unsigned fixed-point format, saturating, bit for bit as
    :func:`sw.powers.exp2_raw`.

    Parameters
    ----------
    config : PowerConfig
        Tables and formats.
    out_frac : int
        Fraction bits of the result, 0..62.
    out_width : int
        Bits of the result, 1..62; larger results saturate to ``2**out_width - 1``.
    tag_shape : shape
        What travels with each element (``0``: nothing, and no ``tag`` field).
    tables : ``"auto"`` or ``"block"``
        Where the table goes: synthesis chooses (LUTs at ``table_bits`` = 8), or block RAM
        followed by one more register stage (latency + 1, :func:`sw.powers.table_stages`).

    Members
    -------
    i : ``In(stream.Signature(StructLayout({"y": signed(log_width), "tag": tag_shape})))``
        ``y``: ``config.log_frac`` fraction bits; ``config.log_min`` gives 0.
    o : ``Out(stream.Signature(StructLayout({"value": unsigned(out_width), "overflow": 1,
        "tag": tag_shape})))``
        ``overflow``: the result saturated.

    Raises
    ------
    TypeError
        ``config`` not a :class:`PowerConfig`, ``tag_shape`` not a shape.
    ValueError
        A width out of range; the message names it.

    Notes
    -----
    Latency :data:`EXP2_LATENCY` = 5 cycles, throughput one result per cycle. Stages: 1 the
    table read (a ``2**T``-word ROM of ``(a - 2**table_frac, b - a)``, addressed by the top T
    bits of the fraction) beside the shift ``clip(n + out_frac + 2, 0, out_width + 1)`` and
    the flags (past the output, below half an ulp, ``log_min``) of the integer part n; 2 the
    interpolation multiply ``(b - a)·r`` (``(table_frac - T + 1) x (log_frac - T)`` bits, one
    DSP48E2 at the defaults); 3 the interpolation add, the mantissa ``m`` (``table_frac + 1``
    bits, in ``[2**table_frac, 2**(table_frac+1))``); 4 the barrel shifter, ``m`` shifted to
    keep ``out_width + 1`` bits and a rounding bit; 5 the rounding increment and the
    saturation.
    """

    def __init__(self, config, *, out_frac, out_width, tag_shape=0, tables="auto"):
        def checks():
            _check_config(config)
            check_int("out_frac", out_frac, 0, MAX_WIDTH)
            check_int("out_width", out_width, 1, MAX_WIDTH)
            _check_tag(tag_shape)
            table_stages(tables)
        checks()
        self._tables = tables
        self._config, self._out_frac, self._out_width = config, out_frac, out_width
        self._tag_shape = tag_shape
        super().__init__({
            "i": In(stream.Signature(_layout({"y": signed(config.log_width)}, tag_shape))),
            "o": Out(stream.Signature(_layout({"value": unsigned(out_width), "overflow": 1},
                                              tag_shape))),
        })

    config = property(lambda self: self._config)
    out_frac = property(lambda self: self._out_frac)
    out_width = property(lambda self: self._out_width)
    tag_shape = property(lambda self: self._tag_shape)
    tables = property(lambda self: self._tables)
    latency = property(lambda self: EXP2_LATENCY + table_stages(self._tables))

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        T, F, Ft = cfg.table_bits, cfg.log_frac, cfg.table_frac
        R, ow, of = cfg.log_frac - cfg.table_bits, self._out_width, self._out_frac
        pipe = _Pipeline(m, self, self.latency, _tag(self.i.payload))
        reg = pipe.reg
        y = self.i.payload.y

        # 1: table read; the shift and flags of the integer part n.
        rom, aw, dw = _rom(m, "exp_table", cfg.exp_table, a_drop=1 << Ft, tables=self._tables)
        assert aw <= Ft
        rd = rom.read_port()
        m.d.comb += [rd.addr.eq(y[F - T:F]), rd.en.eq(pipe.en)]
        a1, d1 = rd.data[:aw], rd.data[aw:]
        # The shift clip(n + out_frac + 2, 0, out_width + 1) (see 4): the comparisons of n
        # beside the adder, not after it.
        n = y[F:].as_signed()
        shift_range = range(ow + 2)
        low, high = n < -(of + 2), n > ow - of - 1
        k = (n + (of + 2))[:Shape.cast(shift_range).width]
        shift1 = reg(Mux(low, 0, Mux(high, ow + 1, k)), shift_range, "shift1")
        big1 = reg(n >= ow - of, 1, "big1")                     # >= 2**out_width
        is_min = y == cfg.log_min
        zero1 = reg(low | is_min, 1, "zero1")                   # below half an ulp, or log_min
        min1 = reg(is_min, 1, "min1")
        r1 = reg(y[:R], R, "r1") if R else None
        if self._tables == "block":     # 1b: the block RAM's word registered
            a1, d1 = reg(a1, aw, "a1b"), reg(d1, dw, "d1b")
            shift1, big1 = reg(shift1, shift_range, "shift1b"), reg(big1, 1, "big1b")
            zero1, min1 = reg(zero1, 1, "zero1b"), reg(min1, 1, "min1b")
            r1 = reg(r1, R, "r1b") if R else None

        # 2: interpolation multiply.
        a2 = reg(a1, aw, "a2")
        p2 = reg(d1 * r1, dw + R, "p2") if R else None
        shift2, big2 = reg(shift1, shift_range, "shift2"), reg(big1, 1, "big2")
        zero2, min2 = reg(zero1, 1, "zero2"), reg(min1, 1, "min2")

        # 3: interpolation add: the mantissa m (its bit Ft is always 1).
        frac = a2 if p2 is None else (a2 + p2[R:])[:Ft]
        m3 = reg(Cat(frac, Const(0, Ft - len(frac)) if len(frac) < Ft else Const(0, 0),
                     Const(1, 1)), Ft + 1, "m3")
        # with resets: not merged into a shift register with the stages before (an SRL's
        # output is slow into the barrel shifter)
        shift3 = reg(shift2, shift_range, "shift3", reset_less=False)
        big3 = reg(big2, 1, "big3", reset_less=False)
        zero3 = reg(zero2, 1, "zero3", reset_less=False)
        min3 = reg(min2, 1, "min3", reset_less=False)

        # 4: barrel shifter: m·2**(shift - Ft - 1), truncated, with one bit below the result
        # (the rounding bit): the golden's m·2**s rounded is (w4 + 1) >> 1.
        shifted = (m3 << shift3)[Ft + 1:Ft + 1 + ow + 1]
        w4 = reg(Mux(zero3, 0, shifted), ow + 1, "w4")
        big4, min4 = reg(big3, 1, "big4"), reg(min3, 1, "min4")

        # 5: rounding and saturation (every bit of the top value is 1).
        v = (w4 + 1)[1:]                                         # <= 2**out_width
        over = (big4 | v[ow]) & ~min4
        m.d.comb += [self.o.payload.value.eq(reg(v[:ow] | over.replicate(ow), ow, "value5")),
                     self.o.payload.overflow.eq(reg(over, 1, "over5"))]
        return m


# -- p·log2 x ---------------------------------------------------------------------------------
def scale_tag_layout(p_width, tag_shape) -> data.StructLayout:
    """The tag a :class:`Log2Unit` carries for a :class:`LogScaleUnit`: the exponent ``p``
    travels with its logarithm (and the tag, if ``tag_shape`` has bits)."""
    return _layout({"p": unsigned(p_width)}, tag_shape)


class LogScaleUnit(wiring.Component):
    """``round(p·l)`` of a logarithm ``l`` and an unsigned exponent ``p``, as
    :func:`sw.powers.power_raw` forms it, clamped to the logarithm's range.

    ``round`` is half up to ``config.log_frac`` fraction bits; ``l = log_min`` (``log2 0``)
    gives ``log_min`` for ``p > 0`` and 0 for ``p = 0``. The clamp changes no power: below
    ``log_min`` :class:`Exp2Unit` gives 0 either way, and above ``log_max`` every result
    overflows: ``out_width - out_frac <= 62 < 2**log_int - 1``.

    Parameters
    ----------
    config : PowerConfig
    p_width : int
        Bits of the unsigned exponent, 1..32.
    p_frac : int
        Its fraction bits, 0..32.
    tag_shape : shape
        What travels with each element (``0``: nothing, and no ``tag`` field).

    Members
    -------
    i : ``In(stream.Signature(StructLayout({"log": signed(log_width),
        "tag": scale_tag_layout(p_width, tag_shape)})))``
        ``p`` rides in the tag, so a :class:`Log2Unit` with that ``tag_shape`` feeds ``i``
        directly.
    o : ``Out(stream.Signature(StructLayout({"y": signed(log_width), "tag": tag_shape})))``

    Notes
    -----
    Latency :data:`SCALE_LATENCY` = 4 cycles: the operands, the product, the rounding add and
    the clamp, each registered (the first three are a DSP48E2's A/B, M and P registers and its
    post-adder in Vivado: one DSP for ``log_width <= 27`` and ``p_width <= 17``); throughput
    one result per cycle.
    """

    def __init__(self, config, *, p_width, p_frac, tag_shape=0):
        def checks():
            _check_config(config)
            check_int("p_width", p_width, 1, 32)
            check_int("p_frac", p_frac, 0, 32)
            _check_tag(tag_shape)
        checks()
        self._config, self._p_width, self._p_frac = config, p_width, p_frac
        self._tag_shape = tag_shape
        lw = signed(config.log_width)
        super().__init__({
            "i": In(stream.Signature(data.StructLayout({
                "log": lw, "tag": scale_tag_layout(p_width, tag_shape)}))),
            "o": Out(stream.Signature(_layout({"y": lw}, tag_shape))),
        })

    config = property(lambda self: self._config)
    p_width = property(lambda self: self._p_width)
    p_frac = property(lambda self: self._p_frac)
    tag_shape = property(lambda self: self._tag_shape)
    latency = property(lambda self: SCALE_LATENCY)

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        lw, pf = cfg.log_width, self._p_frac
        pipe = _Pipeline(m, self, SCALE_LATENCY, _tag(self.i.payload.tag))
        reg = pipe.reg
        log, p = self.i.payload.log, self.i.payload.tag.p
        prod_shape = signed(lw + self._p_width + 1)

        # 1: the operands (the DSP48E2's A and B registers); whether this is log2 0.
        # p1 with a reset: p comes down the log2 unit's tag pipeline, and without one
        # synthesis merges p1 into that shift register, whose output is slow into the DSP
        log1 = reg(log, signed(lw), "log1")
        p1 = reg(p, self._p_width, "p1", reset_less=False)
        zero1 = reg(log == cfg.log_min, 1, "zero1")

        # 2: the product (its M register); whether p > 0 (from p's register: p may come
        # from a shift register, slow to its output).
        prod2 = reg(log1 * p1, prod_shape, "prod2")
        zero2, pos2 = reg(zero1, 1, "zero2"), reg(p1 != 0, 1, "pos2")

        # 3: rounded half up to log_frac bits (its post-adder and P register).
        rnd3 = reg(prod2 + (1 << (pf - 1)) if pf else prod2, signed(prod_shape.width + 1),
                   "rnd3")
        zero3, pos3 = reg(zero2, 1, "zero3"), reg(pos2, 1, "pos3")

        # 4: clamped to the logarithm's range; log2 0 to log_min (p > 0) or 0 (p = 0).
        fmt = FixedFormat(lw, cfg.log_frac, True)
        y, _ = saturate_fast(m, rnd3[pf:].as_signed(), fmt, name="y_sat")
        m.d.comb += self.o.payload.y.eq(reg(Mux(zero3, Mux(pos3, cfg.log_min, 0), y),
                                            signed(lw), "y4"))
        return m


# -- x**p -------------------------------------------------------------------------------------
class PowerUnit(wiring.Component):
    """``x**p`` of unsigned fixed-point ``x`` and ``p``: ``exp2(round(p·log2 x))``, bit for bit
    as :func:`sw.powers.power_raw` (``0**p`` is 0 for p > 0, 1 for p = 0).

    A :class:`Log2Unit` (``p`` and the tag in its tag), a :class:`LogScaleUnit` and an
    :class:`Exp2Unit`, connected with :func:`amaranth.lib.wiring.connect`.

    Parameters
    ----------
    config : PowerConfig
    in_width, in_frac : int
        The unsigned input ``x`` (see :class:`Log2Unit`).
    p_width, p_frac : int
        The unsigned exponent (see :class:`LogScaleUnit`).
    out_frac, out_width : int
        The unsigned result, saturating (see :class:`Exp2Unit`).
    tag_shape : shape
        What travels with each element (``0``: nothing, and no ``tag`` field).
    tables : ``"auto"`` or ``"block"``
        Where the two tables go (see :class:`Log2Unit`; ``"block"``: latency + 2).

    Members
    -------
    i : ``In(stream.Signature(StructLayout({"x": unsigned(in_width), "p": unsigned(p_width),
        "tag": tag_shape})))``
    o : ``Out(stream.Signature(StructLayout({"value": unsigned(out_width), "overflow": 1,
        "tag": tag_shape})))``

    Raises
    ------
    TypeError
        ``config`` not a :class:`PowerConfig`, ``tag_shape`` not a shape.
    ValueError
        A width out of range; the message names it.

    Notes
    -----
    Latency :data:`POWER_LATENCY` = 15 cycles (6 + 4 + 5), throughput one result per cycle.
    Two tables (LUTs, or block RAM with ``tables="block"``), three multipliers (one DSP48E2
    each at the defaults).
    ``p`` may change from one element to the next.
    """

    def __init__(self, config, *, in_width, in_frac, p_width, p_frac, out_frac, out_width,
                 tag_shape=0, tables="auto"):
        def checks():
            _check_config(config)
            check_int("out_width", out_width, 1, MAX_WIDTH)
            check_int("out_frac", out_frac, 0, MAX_WIDTH)
            _check_tag(tag_shape)
        checks()
        # LogScaleUnit's clamp changes no result: exp2(log_max) already saturates.
        assert out_width - out_frac <= MAX_WIDTH < (1 << config.log_int) - 1
        table_stages(tables)
        self.log2 = Log2Unit(config, in_width=in_width, in_frac=in_frac,
                             tag_shape=scale_tag_layout(p_width, tag_shape), tables=tables)
        self.scale = LogScaleUnit(config, p_width=p_width, p_frac=p_frac,
                                  tag_shape=tag_shape)
        self.exp2 = Exp2Unit(config, out_frac=out_frac, out_width=out_width,
                             tag_shape=tag_shape, tables=tables)
        self._config, self._tag_shape = config, tag_shape
        super().__init__({
            "i": In(stream.Signature(_layout({"x": unsigned(in_width),
                                              "p": unsigned(p_width)}, tag_shape))),
            "o": Out(self.exp2.o.signature),
        })

    config = property(lambda self: self._config)
    in_width = property(lambda self: self.log2.in_width)
    in_frac = property(lambda self: self.log2.in_frac)
    p_width = property(lambda self: self.scale.p_width)
    p_frac = property(lambda self: self.scale.p_frac)
    out_frac = property(lambda self: self.exp2.out_frac)
    out_width = property(lambda self: self.exp2.out_width)
    tag_shape = property(lambda self: self._tag_shape)
    tables = property(lambda self: self.log2.tables)
    latency = property(lambda self: POWER_LATENCY + 2 * table_stages(self.log2.tables))

    def elaborate(self, platform):
        m = Module()
        m.submodules.log2, m.submodules.scale, m.submodules.exp2 = \
            self.log2, self.scale, self.exp2
        m.d.comb += [
            self.log2.i.valid.eq(self.i.valid),
            self.log2.i.payload.x.eq(self.i.payload.x),
            self.log2.i.payload.tag.p.eq(self.i.payload.p),
            self.i.ready.eq(self.log2.i.ready),
        ]
        if _tag(self.i.payload) is not None:
            m.d.comb += self.log2.i.payload.tag.tag.eq(self.i.payload.tag)
        wiring.connect(m, self.log2.o, self.scale.i)
        wiring.connect(m, self.scale.o, self.exp2.i)
        wiring.connect(m, wiring.flipped(self.o), self.exp2.o)
        return m
