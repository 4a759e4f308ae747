"""Systolic tensor unit: an R × C output-stationary array of fixed-point MAC cells."""

import numpy as np
from amaranth.hdl import Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from sw.learner.numerics import TensorUnitConfig

from ..convert import shared_instance
from ..fixed import fixed_shape, rshift_round, saturate

__all__ = ["TensorUnit", "tu_input_layout", "tu_output_layout", "pack_elements", "unpack_beats"]


def tu_input_layout(config: TensorUnitConfig) -> data.StructLayout:
    """Input payload: one reduction step k of a tile.

    ``a[i]`` is A[i, k] (i < rows), ``b[j]`` is B[k, j] (j < cols), ``last`` ends the reduction.
    """
    w = config.in_width
    return data.StructLayout({
        "a":    data.ArrayLayout(signed(w), config.rows),
        "b":    data.ArrayLayout(signed(w), config.cols),
        "last": 1,
    })


def tu_output_layout(config: TensorUnitConfig) -> data.StructLayout:
    """Output payload: one row of a result tile.

    ``c[j]`` is C[i, j] in the output format; ``overflow`` is set if any of the row's values
    saturated (in the accumulator or in the output conversion); ``last`` marks row R-1.
    """
    return data.StructLayout({
        "c":        data.ArrayLayout(signed(config.out_width), config.cols),
        "overflow": 1,
        "last":     1,
    })


def pack_elements(config: TensorUnitConfig, a, b, last) -> list:
    """Pack input elements into payload words (Python ints).

    Parameters
    ----------
    a : array of shape (n, rows)
        Raw A operands, one row per element (column k of the A tile).
    b : array of shape (n, cols)
        Raw B operands (row k of the B tile).
    last : array of shape (n,)
        Reduction ends.

    Raises
    ------
    ValueError
        If the shapes disagree with ``config`` or a value does not fit ``in_width``.
    """
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    last = np.asarray(last).astype(bool)
    n = len(last)
    if a.shape != (n, config.rows) or b.shape != (n, config.cols):
        raise ValueError(f"a and b must have shapes ({n}, {config.rows}) and ({n}, "
                         f"{config.cols}), not {a.shape} and {b.shape}")
    config.a_format.check_raw(a, "a")
    config.b_format.check_raw(b, "b")
    layout = tu_input_layout(config)
    offs = {name: f.offset for name, f in layout}
    w = config.in_width
    mask = (1 << w) - 1
    words = []
    for k in range(n):
        word = int(last[k]) << offs["last"]
        for i, v in enumerate(a[k].tolist()):
            word |= (v & mask) << (offs["a"] + i * w)
        for j, v in enumerate(b[k].tolist()):
            word |= (v & mask) << (offs["b"] + j * w)
        words.append(word)
    return words


def unpack_beats(config: TensorUnitConfig, words):
    """Unpack output payload words. Returns ``(c, overflow, last)``: int64 ``(n, cols)``,
    bool ``(n,)``, bool ``(n,)``."""
    layout = tu_output_layout(config)
    offs = {name: f.offset for name, f in layout}
    w = config.out_width
    mask, sign = (1 << w) - 1, 1 << (w - 1)
    n = len(words)
    c = np.zeros((n, config.cols), dtype=np.int64)
    ovf = np.zeros(n, dtype=bool)
    last = np.zeros(n, dtype=bool)
    for r, word in enumerate(words):
        word = int(word)
        for j in range(config.cols):
            v = (word >> (offs["c"] + j * w)) & mask
            c[r, j] = v - (1 << w) if v & sign else v
        ovf[r] = (word >> offs["overflow"]) & 1
        last[r] = (word >> offs["last"]) & 1
    return c, ovf, last


class TensorUnit(wiring.Component):
    """R × C output-stationary systolic array computing one output tile ``C = A·B`` per reduction.

    Each input element k carries column k of an R × K tile of A (``a``) and row k of a K × C
    tile of B (``b``); the element with ``last`` ends the reduction. Cell (i, j) multiplies
    ``A[i, k]·B[k, j]`` and adds it to its own accumulator, so the tile
    ``C[i, j] = sum_k A[i, k]·B[k, j]`` builds up in place for any K. After ``last`` the R × C
    sums are rounded and saturated to the output format and leave as R beats, row 0 first, each
    carrying the C values of one row. Tiles stream back to back: the next reduction's elements
    may follow the ``last`` element on the next cycle. Elements of one reduction need not be
    contiguous: gaps (``valid`` low) insert zeros, so a host can send K in chunks, and the
    accumulation continues until ``last``.

    Accumulating into C: to compute ``C = A·B + C0`` send, before the K data elements, R
    preload elements in which ``a`` is ``2**shift`` times the i-th unit vector and ``b`` is row
    i of C0 (raw, output format; it must fit ``in_width``): cell (i, j) then starts from
    ``C0[i, j]`` at accumulator scale, exactly (``sw.learner.gemm`` does this for ``c=``).

    **Dataflow: output-stationary.** A moves right along the rows, B moves down the columns
    (skewed by one cycle per row and column), the sums stay in the cells. The alternative,
    weight-stationary (Gemmini offers both), pins an R × C block of B in the array and streams
    the rows of A through it, adding partial sums on the way down; K is then limited to R per
    pass and longer reductions need an accumulator memory outside the array. The three GEMMs of
    a training step (CF'22 section 3.2, Zhang's thesis section 4.2.2) are:

    * FW ``X·W`` (M = batch, K = inputs, N = outputs): element k is column k of X (feature k
      of R samples) and row k of W.
    * BW ``δ·Wᵀ`` (M = batch, K = outputs, N = inputs): element k is column k of δ and row k
      of Wᵀ, i.e. column k of W read from the same weight buffer with the other address
      order. Nothing is copied or transposed in memory.
    * WA ``Xᵀ·δ`` (M = inputs, K = batch, N = outputs): element k is row k of X and row k
      of δ, i.e. one *sample* of each, in the order FW and BW produce them. The reduction runs
      over the batch, which is exactly what output-stationary cells do for any K, and the
      weight gradient leaves the array once per batch. With weight-stationary cells this GEMM
      would pin δ (data that changes every batch) and accumulate over the batch outside.

    So one cell design serves all three with the transposes expressed as stream order, and the
    WA stage needs no gradient accumulator memory beside the array. The cost of output
    stationarity is the drain: a tile's R rows leave over R cycles through a chain of
    registers in each column, which overlaps the next tile's reduction when K ≥ R; shorter
    reductions (for example K = 5 for CartPole's first layer) are drain-bound at R cycles per
    tile.

    Arithmetic: products are exact (2·in_width bits, one register stage), the accumulator
    (``acc_width``, fraction ``a_frac + b_frac``) saturates at every step, and the output is
    ``saturate(rshift_round(acc, shift))`` from :mod:`rtl_gen.fixed`, computed once per column at
    the array's edge. ``sw.learner.gemm`` reproduces all of it bit for bit.

    Parameters
    ----------
    config : TensorUnitConfig

    Members
    -------
    i : ``In(stream.Signature(tu_input_layout(config)))``
    o : ``Out(stream.Signature(tu_output_layout(config)))``
    overflow : ``Out(1)``
        Sticky: set when an output beat with its ``overflow`` bit is transferred.
    k_overflow : ``Out(1)``
        Sticky: set when a reduction gets more than ``max_k`` elements.
    clear : ``In(1)``
        Clears both sticky flags.

    Raises
    ------
    TypeError
        If ``config`` is not a :class:`TensorUnitConfig`.

    Notes
    -----
    Timing, with the output always ready: an element is accepted every cycle, except that an
    element with ``last`` is held back until R cycles after the previous ``last`` (the column
    drain chains are busy until then); so a tile of K elements takes ``max(K, R)`` cycles. The
    first beat of a tile leaves ``config.latency = R + C + 3`` cycles after its ``last`` element
    was accepted (input skew, product register, accumulator, drain start, output register,
    rounding register, column de-skew) and the R beats follow back to back. A sequence of
    ``T`` tiles of K elements each therefore takes
    ``(K - 1) + (T - 1)·max(K, R) + (R + C + 3) + R`` cycles from the first input transfer to
    the last output beat inclusive (:func:`sw.learner.gemm.gemm_cycles` gives this for an
    M × K × N GEMM). Throughput is R·C multiply-accumulates per cycle while K ≥ R.

    Back-pressure: ``i.ready`` is low while ``o.valid & ~o.ready``; the whole array then holds
    (one clock enable), so nothing is lost or reordered. The enable fans out to every register:
    for large arrays keep ``o.ready`` high (put a FIFO of at least R beats behind ``o``).

    Registers per cell: A and B operands, product, accumulator and its saturation flag, drain
    register and flag, three control bits; per column a drain-start bit, the output and rounding
    registers and ``C - 1 - j`` de-skew stages; input skew ``R(R-1)/2`` and ``C(C-1)/2``
    operand registers. One multiplier per cell (one DSP48E2 for in_width ≤ 18).

    Verilog (:func:`rtl_gen.convert.convert`): the units of one configuration share a module,
    ``<top>.tensor_unit_<R>x<C>`` (``_1``, ``_2``, ... for further configurations), written
    once and instantiated per unit (:func:`rtl_gen.convert.shared_instance`).
    """

    def __init__(self, config: TensorUnitConfig):
        if not isinstance(config, TensorUnitConfig):
            raise TypeError(f"config must be a TensorUnitConfig, not {config!r}")
        self._config = config
        super().__init__({
            "i":          In(stream.Signature(tu_input_layout(config))),
            "o":          Out(stream.Signature(tu_output_layout(config))),
            "overflow":   Out(1),
            "k_overflow": Out(1),
            "clear":      In(1),
        })

    @property
    def config(self) -> TensorUnitConfig:
        return self._config

    @property
    def latency(self) -> int:
        return self._config.latency

    def elaborate(self, platform):
        cfg = self._config
        # Converted by rtl_gen.convert: one module per configuration, instantiated.
        shared = shared_instance(self, (TensorUnit, cfg), f"tensor_unit_{cfg.rows}x{cfg.cols}",
                                 lambda: TensorUnit(cfg))
        if shared is not None:
            return shared
        m = Module()
        R, C, w = cfg.rows, cfg.cols, cfg.in_width
        acc_fmt, out_fmt = cfg.acc_format, cfg.out_format
        acc_shape = fixed_shape(acc_fmt)

        o_valid = Signal()
        en = Signal()            # the whole array advances
        m.d.comb += en.eq(~o_valid | self.o.ready)

        # -- input control: spacing of `last` elements, reduction length ------------------------
        # gap = cycles since the last accepted `last` (saturating at R).
        too_soon = Const(0)
        if R > 1:
            gap = Signal(range(R + 1), init=R)
            too_soon = gap < R
        m.d.comb += self.i.ready.eq(en & ~(self.i.payload.last & too_soon))
        accept = Signal()
        m.d.comb += accept.eq(self.i.valid & self.i.ready)
        if R > 1:
            with m.If(en):
                with m.If(accept & self.i.payload.last):
                    m.d.sync += gap.eq(1)
                with m.Elif(gap < R):
                    m.d.sync += gap.eq(gap + 1)

        kcount = Signal(range(cfg.max_k + 1))   # elements of the current reduction so far
        with m.If(accept):
            with m.If(self.i.payload.last):
                m.d.sync += kcount.eq(0)
            with m.Elif(kcount < cfg.max_k):
                m.d.sync += kcount.eq(kcount + 1)

        with m.If(self.clear):
            m.d.sync += [self.overflow.eq(0), self.k_overflow.eq(0)]
        with m.If(accept & (kcount >= cfg.max_k)):
            m.d.sync += self.k_overflow.eq(1)
        with m.If(self.o.valid & self.o.ready & self.o.payload.overflow):
            m.d.sync += self.overflow.eq(1)

        # -- input skew ------------------------------------------------------------------------
        def delay(value, n, shape, name):
            for s in range(n):
                reg = Signal(shape, name=f"{name}_d{s}")
                with m.If(en):
                    m.d.sync += reg.eq(value)
                value = reg
            return value

        # Physical row p (B enters at p = 0 and moves towards p = R-1) computes output row
        # R-1-p: the last row to finish (p = R-1) is next to the drain output, so rows leave
        # in the order 0, 1, ..., R-1.
        a_in = [Mux(accept, self.i.payload.a[i], 0) for i in range(R)]
        b_in = [Mux(accept, self.i.payload.b[j], 0) for j in range(C)]
        last_in = Signal()
        m.d.comb += last_in.eq(accept & self.i.payload.last)
        a_skew = [delay(a_in[R - 1 - p], p, signed(w), f"a_skew{p}") for p in range(R)]
        b_skew = [delay(b_in[j], j, signed(w), f"b_skew{j}") for j in range(C)]
        last_skew = [last_in]
        for p in range(1, R):
            last_skew.append(delay(last_skew[-1], 1, 1, f"last_skew{p}"))

        # -- cells ------------------------------------------------------------------------------
        def grid(shape, name):
            return [[Signal(shape, name=f"{name}_{p}_{j}") for j in range(C)] for p in range(R)]

        a_reg, b_reg = grid(signed(w), "a"), grid(signed(w), "b")
        l_reg = grid(1, "l")                       # `last`, travelling with A
        prod, l_prod = grid(signed(2 * w), "prod"), grid(1, "lp")
        acc, acc_ovf = grid(acc_shape, "acc"), grid(1, "acc_ovf")
        drain, drain_ovf = grid(acc_shape, "drain"), grid(1, "drain_ovf")
        shift_en = grid(1, "shift_en")
        start = [Signal(name=f"drain_start{j}") for j in range(C)]

        for p in range(R):
            for j in range(C):
                with m.If(en):
                    m.d.sync += [
                        a_reg[p][j].eq(a_skew[p] if j == 0 else a_reg[p][j - 1]),
                        l_reg[p][j].eq(last_skew[p] if j == 0 else l_reg[p][j - 1]),
                        b_reg[p][j].eq(b_skew[j] if p == 0 else b_reg[p - 1][j]),
                        prod[p][j].eq(a_reg[p][j] * b_reg[p][j]),
                        l_prod[p][j].eq(l_reg[p][j]),
                    ]
                lm = l_prod[p][j]
                total, total_ovf = saturate(m, acc[p][j] + prod[p][j], acc_fmt,
                                            name=f"sum_{p}_{j}")
                with m.If(en):
                    m.d.sync += [
                        acc[p][j].eq(Mux(lm, 0, total)),
                        acc_ovf[p][j].eq(~lm & (acc_ovf[p][j] | total_ovf)),
                    ]

                # Drain chain: cell p captures its sum at the end of its reduction; from one
                # cycle after the last cell of the column captured, the chain shifts towards
                # p = R-1, cell p for p + 1 cycles (its own value and the p above it).
                if p == 0:
                    m.d.comb += shift_en[p][j].eq(start[j])
                else:
                    se = Signal(name=f"shift_reg_{p}_{j}")
                    with m.If(en):
                        m.d.sync += se.eq(shift_en[p - 1][j])
                    m.d.comb += shift_en[p][j].eq(start[j] | se)
                with m.If(en):
                    with m.If(lm):
                        m.d.sync += [drain[p][j].eq(total),
                                     drain_ovf[p][j].eq(acc_ovf[p][j] | total_ovf)]
                    if p > 0:
                        with m.Elif(shift_en[p][j]):
                            m.d.sync += [drain[p][j].eq(drain[p - 1][j]),
                                         drain_ovf[p][j].eq(drain_ovf[p - 1][j])]

        # -- column outputs: drain register, rounding, de-skew ------------------------------------
        out_shape = fixed_shape(out_fmt)
        out_vals, out_ovfs = [], []
        valid = None
        for j in range(C):
            o_val = Signal(acc_shape, name=f"col_acc{j}")
            o_ovf = Signal(name=f"col_acc_ovf{j}")
            with m.If(en):
                m.d.sync += [start[j].eq(l_prod[R - 1][j]),
                             o_val.eq(drain[R - 1][j]), o_ovf.eq(drain_ovf[R - 1][j])]
            rounded, r_ovf = saturate(m, rshift_round(o_val, cfg.shift, cfg.rounding), out_fmt,
                                      name=f"col_out{j}")
            r_val = Signal(out_shape, name=f"col_round{j}")
            r_flag = Signal(name=f"col_round_ovf{j}")
            with m.If(en):
                m.d.sync += [r_val.eq(rounded), r_flag.eq(o_ovf | r_ovf)]
            out_vals.append(delay(r_val, C - 1 - j, out_shape, f"col_deskew{j}"))
            out_ovfs.append(delay(r_flag, C - 1 - j, 1, f"col_deskew_ovf{j}"))
            if j == C - 1:
                o_vld = Signal(name="col_valid")
                valid = Signal(name="round_valid")
                with m.If(en):
                    m.d.sync += [o_vld.eq(shift_en[R - 1][j]), valid.eq(o_vld)]

        if R > 1:
            beat = Signal(range(R), name="beat")    # row of the beat on the output
            is_last = beat == R - 1
            with m.If(self.o.valid & self.o.ready):
                m.d.sync += beat.eq(Mux(is_last, 0, beat + 1))
        else:
            is_last = Const(1)
        any_ovf = out_ovfs[0]
        for f in out_ovfs[1:]:
            any_ovf = any_ovf | f
        m.d.comb += [
            o_valid.eq(valid),
            self.o.valid.eq(valid),
            self.o.payload.overflow.eq(any_ovf),
            self.o.payload.last.eq(is_last),
        ]
        for j in range(C):
            m.d.comb += self.o.payload.c[j].eq(out_vals[j])
        return m
