"""GAE processing element (HEPPO section III-B), one element per cycle."""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, Value, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from sw.gae.spec import GaePeConfig

from ..convert import shared_instance
from ..fixed import fixed_shape, rshift_round, saturate_fast

__all__ = ["GaeProcessingElement", "gae_input_layout", "gae_output_layout"]


def gae_input_layout(config: GaePeConfig) -> data.StructLayout:
    """Input payload: one element of a trajectory, in reverse time order."""
    d = fixed_shape(config.data_format)
    return data.StructLayout({
        "reward":     d,
        "value":      d,
        "bootstrap":  d,   # V(s_T): used only with ``first``
        "done":       1,   # the episode ended at this step
        "first":      1,   # first element of a trajectory (its last time step)
        "timestep":   unsigned(config.timestep_bits),
        "trajectory": unsigned(config.trajectory_bits),
    })


def gae_output_layout(config: GaePeConfig) -> data.StructLayout:
    """Output payload: advantage and reward-to-go of one element, with its tags."""
    d = fixed_shape(config.data_format)
    return data.StructLayout({
        "advantage":  d,
        "rtg":        d,
        "overflow":   1,   # a value of this element saturated
        "timestep":   unsigned(config.timestep_bits),
        "trajectory": unsigned(config.trajectory_bits),
    })


def _select(signals, index):
    """``signals[index]`` as a fully covered multiplexer (no incomplete case in the Verilog)."""
    if len(signals) == 1:
        return signals[0]
    size = 1 << len(index)
    return Array(list(signals) + [signals[-1]] * (size - len(signals)))[index]


#: Bits of the unsigned low part of a multiplier operand split for the DSP48E2 (18-bit signed B).
_PART = 17
#: The same on the 27-bit signed A port (the coefficient, up to 17 bits, on B).
_WIDE_PART = 26


class _Products:
    """``coef * x`` as partial products that each fit one DSP48E2 (27 x 18 signed): ``x``
    (signed, up to 35 bits) split into an unsigned low part of ``part`` bits and a signed high
    part. ``part`` 17 (:data:`_PART`, ``x`` on the 18-bit port): ``coef`` unsigned, up to 26
    bits; 26 (:data:`_WIDE_PART`, ``x`` on the 27-bit port, its high part up to 18 bits):
    ``coef`` up to 17 bits. ``terms`` are the products, combinational: register them and sum
    them with :func:`_shifted` (so every DSP has registers on both sides)."""

    def __init__(self, coef, x, part=_PART):
        x = Value.cast(x)
        if len(x) <= part + 1:
            self.terms = [coef * x]
        else:
            self.terms = [coef * x[:part], coef * x[part:].as_signed()]


def _signed(value):
    """``value`` as a signed value of the same number (zero-extended if unsigned)."""
    value = Value.cast(value)
    return value if value.shape().signed else Cat(value, Const(0, 1)).as_signed()


def _shifted(terms, part=_PART):
    """The partial products of :class:`_Products` at their weights, signed."""
    return [_signed(t) << (part * j) for j, t in enumerate(terms)]


def _sum_shifted(terms):
    out = None
    for t in _shifted(terms):
        out = t if out is None else out + t
    return out


def _add3(ops, shape, cin=0, low=0):
    """Combinational: the sum of up to three signed operands in ``shape`` (wide enough for it)
    with one carry chain: a carry-save layer, then one adder. ``cin`` (three operands only)
    adds one more, in the carry vector's free bit 0. ``low``: the third operand's bits below
    it are zero; the adder takes the first two's there directly (no carry-save layer)."""
    assert (cin == 0 and low == 0) or len(ops) == 3
    assert cin == 0 or low == 0
    if len(ops) == 1:
        return _signed(ops[0])
    if len(ops) == 2:
        return _signed(ops[0]) + _signed(ops[1])
    w = shape.width
    x, y, z = (_signed(o) for o in ops)
    # Sign-extend every operand to w bits; then s + c == x + y + z (mod 2^w).
    x, y, z = (Cat(o, o[-1].replicate(max(0, w - len(o))))[:w] for o in (x, y, z))
    s = x ^ y ^ z
    c = ((x & y) | (x & z) | (y & z))[low:w - 1]
    if low:
        s, c = Cat(x[:low], s[low:]), Cat(y[:low], Const(0, 1), c)
    else:
        c = Cat(Const(cin, 1), c)
    return (s + c)[:w].as_signed()


def _lut_product(m, a, b, name):
    """``a * b`` of two unsigned values without a multiplier (no DSP48E2): the partial products
    ``b[i] ? a << i : 0`` summed in two registered levels (:data:`LUT_PRODUCT_STAGES`), then
    one adder. The first level adds pairs (the partial products' AND gates share the adder's
    LUTs) when the rest still fits, else triples; the second adds triples (carry-save).
    Combinational after those two registers: register the result."""
    w = len(a) + len(b)
    shape = signed(w + 1)
    ops = [Mux(b[i], a, 0) << i for i in range(len(b))]
    groups = [2, 3] if -(-len(ops) // 6) <= 3 else [3, 3]
    for level, size in zip(range(LUT_PRODUCT_STAGES), groups):
        regs = []
        for j in range(0, len(ops), size):
            r = Signal(shape, name=f"{name}_l{level}_{j // size}")
            m.d.sync += r.eq(_add3(ops[j:j + size], shape))
            regs.append(r)
        ops = regs
    assert len(ops) <= 3, "too many partial products for LUT_PRODUCT_STAGES"
    return _add3(ops, shape)[:w]


#: Registered adder levels of :func:`_lut_product` (17 partial products -> 9 -> 3).
LUT_PRODUCT_STAGES = 2


def _round(value, shift, rounding):
    """Combinational: :func:`~rtl_gen.fixed.rshift_round` of an unsigned ``value`` with one adder
    (the half_even increment enters as a carry-in)."""
    if rounding == "floor":
        return value[shift:]
    half = 1 << (shift - 1)
    if rounding == "half_up":
        return (value + half)[shift:]
    c = value[shift]
    return (Cat(c, value) + Cat(c, Const(half - 1, shift)))[shift + 1:]


class _Pipeline:
    """The PE's pipeline: stages that carry an element's tags (``layout``) and advance
    together while ``en``; ``o_valid`` is the last stage's valid bit (driven by the outputs)."""

    def __init__(self, m, layout, en, o_valid):
        self.m, self.layout, self.en, self.o_valid = m, layout, en, o_valid

    def stage(self, name):
        """A stage register of the tags, not yet driven."""
        return Signal(self.layout, name=name)

    def follow(self, name, prev, **regs):
        """A pipeline stage: the element's tags from ``prev`` and ``regs`` registered. Returns
        the stage and the registers of ``regs`` (lists for lists), by name."""
        m = self.m
        st = self.stage(name)
        out = {}
        with m.If(self.en):
            m.d.sync += st.eq(prev)
            for rname, value in regs.items():
                values = value if isinstance(value, list) else [value]
                sigs = []
                for j, v in enumerate(values):
                    v = Value.cast(v)
                    suffix = f"{j}" if isinstance(value, list) else ""
                    sig = Signal(v.shape(), name=f"{name}_{rname}{suffix}")
                    m.d.sync += sig.eq(v)
                    sigs.append(sig)
                out[rname] = sigs if isinstance(value, list) else sigs[0]
        return st, out


class GaeProcessingElement(wiring.Component):
    """Generalized Advantage Estimation over a stream of trajectory elements.

    Elements arrive in reverse time order. For element t (reward r, value V, done d) and the
    value V' of the element before it in the stream (or ``bootstrap`` when ``first`` is set)::

        delta = r + gamma*(1-d)*V' - V
        A     = delta + gamma*lambda*(1-d)*(1-first)*A'       A' = advantage of the element before
        RTG   = A + V

    Two ways of giving the feedback loop of A the ``k`` registers it needs to be pipelined:

    ``mode="lookahead"``
        One trajectory after another. The recurrence is unrolled k steps (HEPPO eqs. 10, 11)::

            A_t = delta_t + sum_{i=1}^{k-1} P_i delta_{t+i} + P_k A_{t+k}

        with ``P_i = (gamma*lambda)^i`` when no done/first lies in the window, else 0. Cost:
        k-1 multipliers for the delta terms and k-1 for the coefficient powers, i.e. linear in k.
    ``mode="interleaved"``
        Element n belongs to lane ``n mod k``; the producer interleaves k trajectories
        round-robin (padding the last group with dummy trajectories). Each lane's recurrence has
        k cycles to close, so one multiplier serves any k. Numerically equal to ``k=1``.

    Arithmetic: products are kept at full precision and rounded once with the configured rounding
    mode; every value that reaches the data format saturates and sets the element's ``overflow``
    bit and the sticky ``overflow`` port. ``gamma`` and ``gamma_lambda`` are unsigned with
    ``coef_width - 1`` fraction bits; change them only while no element is in flight: they are
    registered, and the powers of gamma*lambda take k cycles in all to settle.

    Parameters
    ----------
    config : GaePeConfig

    Members
    -------
    i : ``In(stream.Signature(gae_input_layout(config)))``
    o : ``Out(stream.Signature(gae_output_layout(config)))``
    gamma, gamma_lambda : ``In(unsigned(coef_width))``
    overflow : ``Out(1)``
        Sticky: set when an element with its ``overflow`` bit leaves the PE.
    clear : ``In(1)``
        Clears ``overflow``.

    Latency is ``config.latency`` cycles (``k + 7`` interleaved or k = 1, ``k + 9 +
    config.lookahead_levels`` lookahead with k > 1, one more with k = 2: its loop keeps A
    before saturation, see :meth:`_loop2`); throughput one element per cycle. ``i.ready`` is
    ``~o.valid | o.ready``: the whole pipeline holds while the output is stalled, so no element
    is lost or reordered.

    Raises
    ------
    TypeError
        If ``config`` is not a :class:`GaePeConfig` (its own parameters are checked there).
    """

    def __init__(self, config: GaePeConfig):
        if not isinstance(config, GaePeConfig):
            raise TypeError(f"config must be a GaePeConfig, not {config!r}")
        self._config = config
        cw = config.coef_width
        super().__init__({
            "i":            In(stream.Signature(gae_input_layout(config))),
            "o":            Out(stream.Signature(gae_output_layout(config))),
            "gamma":        In(unsigned(cw)),
            "gamma_lambda": In(unsigned(cw)),
            "overflow":     Out(1),
            "clear":        In(1),
        })

    @property
    def config(self) -> GaePeConfig:
        return self._config

    @property
    def latency(self) -> int:
        return self._config.latency

    def _loop2(self, m, follow, pre_loop, before_loop, loop_in, g, p, acc_shape, en):
        """The feedback loop in two registers (k = 2), with no saturation between its adder and
        its registers: the loop keeps T, the rounded sum before saturation.

        MUL (``loop_in``): the parts of ``P * T[:W]``, one DSP48E2 each, fed straight from the
        flip-flops of ``a_early`` (T of the element's lane); in parallel, whether that T
        saturates (a few top bits) and the element's sums for a saturated A, ``G + P*max``
        and ``G + P*min`` (shifts, one adder each, rounded). ADD (``loop_mul``): G plus the
        parts (carry-save, one adder), rounded; if A saturated, the sum for the bound instead
        (one LUT after the adder, its select from flip-flops): T, into the lane's register and,
        forwarded, into ``a_early``. Returns the stage holding the element's T one register
        later, A (T saturated) and its overflow bit: one output stage more than k != 2.
        """
        cfg = self._config
        W, Wc, cf, rnd = cfg.data_width, cfg.coef_width, cfg.coef_frac, cfg.rounding
        dfmt = cfg.data_format
        assert dfmt.signed and dfmt.max_raw == (1 << (W - 1)) - 1

        def rounded(total):
            if rnd == "half_even":
                return rshift_round(total, cf, rnd)
            return total[cf:].as_signed()   # the rounding constant is folded into G

        tshape = signed(acc_shape.width - cf + (rnd == "half_even"))
        lane_t = [Signal(tshape, name=f"t_lane{j}") for j in range(2)]
        a_early = Signal(tshape, name="t_early")
        # MUL: flags of the lane's T (as rtl_gen.fixed.saturate_fast), sums at the bounds.
        sign, high = a_early[-1], a_early[W - 1:-1]
        not_p = Cat(~p, Const(1, 1)).as_signed()                          # -P - 1
        g_max = _add3([g, p << (W - 1), not_p], acc_shape, cin=1)        # G + P*(2^(W-1) - 1)
        g_min = _add3([g, not_p << (W - 1), Const(1 << (W - 1), W)], acc_shape)   # G - P*2^(W-1)
        hi, lo = ~sign & high.any(), sign & ~high.all()
        # (Yosys 0.70 does not pack an adder after a multiplier into the DSP48E2's post-adder
        # (P = A*B + C), so G stays a third operand of the loop's adder.) A split at 26 bits
        # (as many DSPs as at 17 when W > 27) moves the bits where the loop's adder sees three
        # operands up: a shorter carry chain after its carry-save layer.
        part = _WIDE_PART if W > _WIDE_PART + 1 and Wc <= _PART else _PART
        terms = _Products(p, a_early[:W].as_signed(), part).terms
        # The next value of ``a_early`` (see ADD), its select registered here: the element in
        # the loop forwards its T iff it has the lane of the element that will follow it in.
        fwd = loop_in.valid & (loop_in.lane == pre_loop.lane)
        last, rl = follow("loop_mul", loop_in, g=g, pp=terms, hi=hi, lo=lo,
                          sel0=~fwd | hi, sel1=~fwd | lo,
                          t_max=rounded(g_max), t_min=rounded(g_min))
        # ADD: T, the saturated cases selected after the adder (one LUT).
        pp = _shifted(rl["pp"], part)
        t_sum = rounded(_add3([rl["g"]] + pp, acc_shape, low=part if len(pp) == 2 else 0))
        t = Mux(rl["hi"], rl["t_max"], Mux(rl["lo"], rl["t_min"], t_sum))
        for j in range(2):
            with m.If(en & last.valid & (last.lane == j)):
                m.d.sync += lane_t[j].eq(t)
        with m.If(en):
            # T of the lane of the element entering the loop at the next edge: a 4:1
            # multiplexer (sel1, sel0) = forwarded T (0), T_max (1), T_min (2), the lane's (3).
            m.d.sync += a_early.eq(Mux(rl["sel1"],
                                       Mux(rl["sel0"], _select(lane_t, before_loop.lane),
                                           rl["t_min"]),
                                       Mux(rl["sel0"], rl["t_max"], t_sum)))
        out, ro = follow("loop_out", last, t=t)
        adv, adv_ovf = saturate_fast(m, ro["t"], dfmt, name="adv")
        return out, adv, adv_ovf

    def elaborate(self, platform):
        cfg = self._config
        # Converted by rtl_gen.convert inside an accelerator: one module per configuration,
        # instantiated per PE (o.ready -> i.ready is the only path through it; the core ties
        # o.ready high).
        shared = shared_instance(self, (GaeProcessingElement, cfg), "gae_pe",
                                 lambda: GaeProcessingElement(cfg))
        if shared is not None:
            return shared
        m = Module()
        pipe = self._pipeline(m)
        gamma, gamma_lambda = self._coefficients(m)
        s0, r0 = self._input_stage(m, pipe, gamma)
        s2, s3, s4, r4 = self._delta(m, pipe, s0, r0, gamma_lambda)
        if cfg.lookahead_steps == 1:
            pre_loop, before_loop = s2, s3
            loop_in, loop_g, loop_p = s4, self._g_of(r4["delta"]), r4["p"]
        else:
            pows = self._powers(m, gamma_lambda)
            pre_loop, before_loop, loop_in, loop_g, loop_p = self._lookahead(m, pipe, s4, r4,
                                                                             pows)
        if cfg.k == 2:
            last, adv, adv_ovf = self._loop2(m, pipe.follow, pre_loop, before_loop, loop_in,
                                             loop_g, loop_p, self._acc_shape(), pipe.en)
        else:
            last, adv, adv_ovf = self._loop(m, pipe, before_loop, loop_in, loop_g, loop_p)
        self._outputs(m, pipe, last, adv, adv_ovf)
        return m

    # Each step below adds its logic to ``m`` and returns what later steps use; the order of
    # the calls in :meth:`elaborate` is the order of the statements in the netlist.
    def _acc_shape(self):
        """The shape of the sums at coefficient scale (G, the loop's adder)."""
        cfg = self._config
        return signed(cfg.data_width + cfg.coef_width + 3 + cfg.k.bit_length())

    def _round_inc(self):
        """Rounding by ``coef_frac`` bits folded into an operand whose low ``coef_frac`` bits
        are zero: the constant (for half_even, with the product's bit ``coef_frac`` as carry-in
        bit)."""
        half = 1 << (self._config.coef_frac - 1)
        return {"half_up": half, "floor": 0, "half_even": half - 1}[self._config.rounding]

    def _g_of(self, d):
        """delta at coefficient scale, with the rounding constant of the loop folded in."""
        cfg = self._config
        return Cat(Const(self._round_inc() if cfg.rounding != "half_even" else 0, cfg.coef_frac),
                   d).as_signed()

    def _pipeline(self, m):
        """The pipeline's enable (the whole pipeline advances while the output is not stalled)
        and its stages (:class:`_Pipeline`)."""
        cfg = self._config
        carry_layout = data.StructLayout({
            "valid": 1, "value": fixed_shape(cfg.data_format), "overflow": 1,
            "timestep": unsigned(cfg.timestep_bits), "trajectory": unsigned(cfg.trajectory_bits),
            "lane": unsigned(max(1, (cfg.k - 1).bit_length())),
        })
        o_valid = Signal()
        en = Signal()     # the whole pipeline advances
        m.d.comb += [
            en.eq(~o_valid | self.o.ready),
            self.i.ready.eq(en),
        ]
        return _Pipeline(m, carry_layout, en, o_valid)

    def _coefficients(self, m):
        """``gamma`` and ``gamma_lambda`` registered once: quasi-static, they need no path from
        the ports."""
        Wc = self._config.coef_width
        gamma = Signal(unsigned(Wc), name="gamma_q")
        gamma_lambda = Signal(unsigned(Wc), name="gamma_lambda_q")
        m.d.sync += [gamma.eq(self.gamma), gamma_lambda.eq(self.gamma_lambda)]
        return gamma, gamma_lambda

    def _input_stage(self, m, pipe, gamma):
        """s0, the input stage: the lane counter, V' (the bootstrap or the lane's previous V),
        gamma*(1-d) and the break bit (done or first). Returns the stage and its registers."""
        cfg = self._config
        k = cfg.k
        dshape = fixed_shape(cfg.data_format)
        accept = self.i.valid & pipe.en
        lane_in = Signal(pipe.layout.members["lane"], name="lane_in")
        if k > 1:
            with m.If(accept):
                m.d.sync += lane_in.eq(Mux(lane_in == k - 1, 0, lane_in + 1))
        v_lanes = k if cfg.mode == "interleaved" else 1
        vprev = [Signal(dshape, name=f"vprev{j}") for j in range(v_lanes)]
        v_idx = lane_in if v_lanes > 1 else 0
        for j in range(v_lanes):
            with m.If(accept & (v_idx == j)):
                m.d.sync += vprev[j].eq(self.i.payload.value)

        s0 = pipe.stage("s0")
        s0_reward = Signal(dshape)
        s0_vnext = Signal(dshape)
        s0_gamma = Signal(unsigned(cfg.coef_width))
        s0_brk = Signal()   # recursion breaks here: done or first
        with m.If(pipe.en):
            m.d.sync += [
                s0.valid.eq(self.i.valid),
                s0.value.eq(self.i.payload.value),
                s0.overflow.eq(0),
                s0.timestep.eq(self.i.payload.timestep),
                s0.trajectory.eq(self.i.payload.trajectory),
                s0.lane.eq(lane_in),
                s0_reward.eq(self.i.payload.reward),
                s0_vnext.eq(Mux(self.i.payload.first, self.i.payload.bootstrap,
                                   _select(vprev, lane_in))),
                s0_gamma.eq(Mux(self.i.payload.done, 0, gamma)),
                s0_brk.eq(self.i.payload.done | self.i.payload.first),
            ]
        return s0, {"reward": s0_reward, "vnext": s0_vnext, "gamma": s0_gamma, "brk": s0_brk}

    def _delta(self, m, pipe, s0, r0, gamma_lambda):
        """s1 .. s4: delta = r + gamma*(1-d)*V' - V, saturated, and P = gamma*lambda or 0 at a
        break. Returns the stages s2, s3 and s4 and s4's registers (``delta``, ``brk``,
        ``p``)."""
        cfg = self._config
        cf = cfg.coef_frac
        follow = pipe.follow
        # -- s1: the partial products of gamma*(1-d)*V' (one DSP each); r - V ------------------
        s1, r1 = follow("s1", s0, pp=_Products(r0["gamma"], r0["vnext"]).terms,
                        rv=r0["reward"] - s0.value, brk=r0["brk"])
        # -- s2: the product --------------------------------------------------------------------
        s2, r2 = follow("s2", s1, prod=_sum_shifted(r1["pp"]), rv=r1["rv"], brk=r1["brk"])
        # -- s3: delta = r - V + round(gamma*V'), at scale 2^(cf+1) (one adder) ----------------
        prod = r2["prod"]
        cin = prod[cf] if cfg.rounding == "half_even" else Const(0, 1)
        dsum = (Cat(cin, Const(self._round_inc(), cf), r2["rv"]).as_signed()
                + Cat(cin, prod).as_signed())
        s3, r3 = follow("s3", s2, dsum=dsum, brk=r2["brk"])
        # -- s4: saturated delta ----------------------------------------------------------------
        delta, delta_ovf = saturate_fast(m, r3["dsum"][cf + 1:].as_signed(), cfg.data_format,
                                         name="delta")
        s4, r4 = follow("s4", s3, delta=delta, brk=r3["brk"],
                        p=Mux(r3["brk"], 0, gamma_lambda))
        with m.If(pipe.en):
            m.d.sync += s4.overflow.eq(delta_ovf)
        return s2, s3, s4, r4

    def _powers(self, m, gamma_lambda):
        """Powers of gamma*lambda (``[None, P_1, .., P_k]``): a free-running chain, five
        registers a power."""
        # The product in three: a shift-and-add tree in LUTs, no DSP48E2 -- the coefficients
        # are static during a run and every PE computes the same powers; rounded; saturated.
        # Settles ``config.coef_settle`` cycles after a change.
        cfg = self._config
        Wc, cf = cfg.coef_width, cfg.coef_frac
        pows = [None, gamma_lambda]
        for i in range(2, cfg.k + 1):
            pa = Signal(unsigned(2 * Wc), name=f"pow{i}_prod")
            pr = Signal(unsigned(2 * Wc - cf + 1), name=f"pow{i}_round")
            p = Signal(unsigned(Wc), name=f"pow{i}")
            nxt, _ = saturate_fast(m, pr, cfg.coef_format, name=f"pow{i}_next")
            m.d.sync += [pa.eq(_lut_product(m, pows[i - 1], gamma_lambda, f"pow{i}")),
                         pr.eq(_round(pa, cf, cfg.rounding)), p.eq(nxt)]
            pows.append(p)
        return pows

    def _lookahead(self, m, pipe, s4, r4, pows):
        """The look-ahead terms (k > 1 steps): the history of deltas and break bits, the masked
        powers times the history (h1, h2), then the adder tree. Returns the loop's input:
        ``(pre_loop, before_loop, loop_in, G, P)``."""
        cfg = self._config
        k = cfg.k
        follow = pipe.follow
        s4_delta, s4_brk = r4["delta"], r4["brk"]
        # History of the last k-1 deltas and break bits, shifted once per element.
        hist = [None] + [Signal(fixed_shape(cfg.data_format), name=f"hist{i}")
                         for i in range(1, k)]
        hbrk = [None] + [Signal(name=f"hbrk{i}") for i in range(1, k)]
        with m.If(pipe.en & s4.valid):
            m.d.sync += [hist[1].eq(s4_delta), hbrk[1].eq(s4_brk)]
            for i in range(2, k):
                m.d.sync += [hist[i].eq(hist[i - 1]), hbrk[i].eq(hbrk[i - 1])]
        # mask[i]: no break among elements n, n-1, ..., n-i+1.
        brks = [s4_brk] + hbrk[1:]
        mask = [None]
        for i in range(1, k + 1):
            any_brk = brks[0]
            for b in brks[1:i]:
                any_brk = any_brk | b
            mask.append(~any_brk)
        # h1: masked coefficients and the history registered; h2: the products.
        h1, rh1 = follow("h1", s4, delta=s4_delta,
                         **{f"p{i}": Mux(mask[i], pows[i], 0) for i in range(1, k + 1)},
                         **{f"h{i}": hist[i] for i in range(1, k)})
        terms = [self._g_of(rh1["delta"])]
        pp = {}
        for i in range(1, k):
            pp[f"t{i}"] = _Products(rh1[f"p{i}"], rh1[f"h{i}"]).terms
        h2, rh2 = follow("h2", h1, g=terms[0], p=rh1[f"p{k}"], **pp)
        # Adder tree: three operands an adder (carry-save), one level a stage.
        acc_shape = self._acc_shape()
        ops = [rh2["g"]] + [t for i in range(1, k) for t in _shifted(rh2[f"t{i}"])]
        last, level, p = h2, 0, rh2["p"]
        before_loop = h1
        while len(ops) > 1:
            level += 1
            sums = {f"g{j}": _add3(ops[j:j + 3], acc_shape)
                    for j in range(0, len(ops), 3)}
            pre_loop, before_loop = before_loop, last
            last, rt = follow(f"tree{level}", last, p=p, **sums)
            ops, p = [rt[f"g{j}"] for j in range(0, len(sums) * 3, 3)], rt["p"]
        assert level == cfg.lookahead_levels
        return pre_loop, before_loop, last, ops[0], p

    def _loop(self, m, pipe, before_loop, loop_in, loop_g, loop_p):
        """The feedback loop in k registers (k != 2; k = 2: :meth:`_loop2`). Returns the stage
        holding the element after it, A and its overflow bit."""
        # Stages of one element: SEL (its lane's A) if k >= 4, MUL (P * A, one DSP a part),
        # ADD (G + the parts, rounding), SAT (saturation, into the lane's A register). With
        # fewer than four registers the stages share cycles: k = 3 MUL, ADD, SAT (SEL is
        # done a cycle early, in parallel with SAT: ``a_early``, with the A being written
        # forwarded); k = 1 all in one.
        cfg = self._config
        k, cf, rnd = cfg.k, cfg.coef_frac, cfg.rounding
        dshape = fixed_shape(cfg.data_format)
        follow, en = pipe.follow, pipe.en
        lane_a = [Signal(dshape, name=f"a_lane{j}") for j in range(k)]
        a_sel = _select(lane_a, loop_in.lane)
        if k == 3:
            a_early = Signal(dshape, name="a_early")
            a_sel = a_early
        last, lg, lp = loop_in, loop_g, loop_p
        if k >= 4:
            last, rl = follow("loop_sel", last, g=lg, p=lp, a=a_sel)
            lg, lp, a_sel = rl["g"], rl["p"], rl["a"]
        terms = _Products(lp, a_sel).terms
        if k >= 2:
            last, rl = follow("loop_mul", last, g=lg, pp=terms)
            lg, terms = rl["g"], rl["pp"]
        for j in range(max(0, k - 4)):
            last, rl = follow(f"loop_dly{j}", last, g=lg, pp=terms)
            lg, terms = rl["g"], rl["pp"]
        total = _add3([lg] + _shifted(terms), self._acc_shape())
        if rnd == "half_even":
            total = rshift_round(total, cf, rnd)
        else:
            total = total[cf:].as_signed()
        if k >= 3:
            last, rl = follow("loop_add", last, total=total)
            total = rl["total"]
        adv, adv_ovf = saturate_fast(m, total, cfg.data_format, name="adv")
        for j in range(k):
            with m.If(en & last.valid & ((last.lane == j) if k > 1 else 1)):
                m.d.sync += lane_a[j].eq(adv)
        if k == 3:
            # The A of the lane of the element entering the loop at the next edge.
            with m.If(en):
                m.d.sync += a_early.eq(Mux(last.valid & (last.lane == before_loop.lane), adv,
                                           _select(lane_a, before_loop.lane)))
        return last, adv, adv_ovf

    def _outputs(self, m, pipe, last, adv, adv_ovf):
        """o1 .. o3: A, then RTG = A + V (sum, then saturation); the output stream and the
        sticky ``overflow``."""
        dfmt = self._config.data_format
        dshape = fixed_shape(dfmt)
        en = pipe.en
        o1 = pipe.stage("o1")
        o1_adv = Signal(dshape)
        with m.If(en):
            m.d.sync += [o1.eq(last), o1.overflow.eq(last.overflow | adv_ovf), o1_adv.eq(adv)]
        o2, ro2 = pipe.follow("o2", o1, adv=o1_adv, rtg=o1_adv + o1.value)
        o3 = pipe.stage("o3")
        o3_adv = Signal(dshape)
        o3_rtg = Signal(dshape)
        rtg, rtg_ovf = saturate_fast(m, ro2["rtg"], dfmt, name="rtg")
        with m.If(en):
            m.d.sync += [
                o3.eq(o2), o3.overflow.eq(o2.overflow | rtg_ovf),
                o3_adv.eq(ro2["adv"]), o3_rtg.eq(rtg),
            ]
        m.d.comb += [
            pipe.o_valid.eq(o3.valid),
            self.o.valid.eq(o3.valid),
            self.o.payload.advantage.eq(o3_adv),
            self.o.payload.rtg.eq(o3_rtg),
            self.o.payload.overflow.eq(o3.overflow),
            self.o.payload.timestep.eq(o3.timestep),
            self.o.payload.trajectory.eq(o3.trajectory),
        ]

        with m.If(self.clear):
            m.d.sync += self.overflow.eq(0)
        with m.If(self.o.valid & self.o.ready & o3.overflow):
            m.d.sync += self.overflow.eq(1)
