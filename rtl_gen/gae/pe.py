"""GAE processing element (HEPPO section III-B), one element per cycle."""

from amaranth.hdl import Array, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from sw.gae.spec import GaePeConfig

from ..fixed import fixed_shape, rshift_round, saturate

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

    Latency is ``config.latency`` cycles (``k + 4`` interleaved or k = 1, ``k + 6`` lookahead
    with k > 1); throughput one element per cycle. ``i.ready`` is ``~o.valid | o.ready``: the
    whole pipeline holds while the output is stalled, so no element is lost or reordered.
    """

    def __init__(self, config: GaePeConfig):
        if not isinstance(config, GaePeConfig):
            self._MustUse__silence = True    # no "created but never used" warning for this
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

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        dfmt, cfmt = cfg.data_format, cfg.coef_format
        W, Wc, cf, k = cfg.data_width, cfg.coef_width, cfg.coef_frac, cfg.k
        steps = cfg.lookahead_steps
        rnd = cfg.rounding
        dshape = fixed_shape(dfmt)
        prod_shape = signed(W + Wc + 1)
        acc_shape = signed(W + Wc + 2 + k.bit_length())

        carry_layout = data.StructLayout({
            "valid": 1, "value": dshape, "overflow": 1,
            "timestep": unsigned(cfg.timestep_bits), "trajectory": unsigned(cfg.trajectory_bits),
            "lane": unsigned(max(1, (k - 1).bit_length())),
        })

        def stage(name):
            return Signal(carry_layout, name=name)

        o_valid = Signal()
        en = Signal()     # the whole pipeline advances
        m.d.comb += [
            en.eq(~o_valid | self.o.ready),
            self.i.ready.eq(en),
        ]
        accept = self.i.valid & en

        # Coefficients are registered once: quasi-static, they need no path from the ports.
        gamma = Signal(unsigned(Wc), name="gamma_q")
        gamma_lambda = Signal(unsigned(Wc), name="gamma_lambda_q")
        m.d.sync += [gamma.eq(self.gamma), gamma_lambda.eq(self.gamma_lambda)]

        # -- input stage: lane counter, V' selection ----------------------------------------------
        lane_in = Signal(carry_layout.members["lane"], name="lane_in")
        if k > 1:
            with m.If(accept):
                m.d.sync += lane_in.eq(Mux(lane_in == k - 1, 0, lane_in + 1))
        v_lanes = k if cfg.mode == "interleaved" else 1
        vprev = [Signal(dshape, name=f"vprev{j}") for j in range(v_lanes)]
        v_idx = lane_in if v_lanes > 1 else 0
        for j in range(v_lanes):
            with m.If(accept & (v_idx == j)):
                m.d.sync += vprev[j].eq(self.i.payload.value)

        s0 = stage("s0")
        s0_reward = Signal(dshape)
        s0_vnext = Signal(dshape)
        s0_done = Signal()
        s0_first = Signal()
        with m.If(en):
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
                s0_done.eq(self.i.payload.done),
                s0_first.eq(self.i.payload.first),
            ]

        # -- gamma * (1 - d) * V' ---------------------------------------------------------------
        s1 = stage("s1")
        s1_prod = Signal(prod_shape)
        s1_reward = Signal(dshape)
        s1_brk = Signal()   # recursion breaks here: done or first
        with m.If(en):
            m.d.sync += [
                s1.eq(s0),
                s1_prod.eq(s0_vnext * Mux(s0_done, 0, gamma)),
                s1_reward.eq(s0_reward),
                s1_brk.eq(s0_done | s0_first),
            ]

        # -- delta = r + gamma*V' - V -----------------------------------------------------------
        s2 = stage("s2")
        s2_delta = Signal(dshape)
        s2_brk = Signal()
        delta, delta_ovf = saturate(
            m, s1_reward + rshift_round(s1_prod, cf, rnd) - s1.value, dfmt, name="delta")
        with m.If(en):
            m.d.sync += [
                s2.eq(s1),
                s2.overflow.eq(delta_ovf),
                s2_delta.eq(delta),
                s2_brk.eq(s1_brk),
            ]

        # -- loop input: G (delta and the look-ahead terms, at coefficient scale), P -------------
        if steps == 1:
            loop_in = s2
            loop_g = Signal(acc_shape)
            loop_p = Signal(unsigned(Wc))
            m.d.comb += [
                loop_g.eq(s2_delta << cf),
                loop_p.eq(Mux(s2_brk, 0, gamma_lambda)),
            ]
        else:
            # Powers of gamma*lambda: a free-running chain, settles k-1 cycles after a change.
            pows = [None, gamma_lambda]
            for i in range(2, k + 1):
                p = Signal(unsigned(Wc), name=f"pow{i}")
                nxt, _ = saturate(m, rshift_round(pows[i - 1] * gamma_lambda, cf, rnd),
                                  cfmt, name=f"pow{i}_next")
                m.d.sync += p.eq(nxt)
                pows.append(p)
            # History of the last k-1 deltas and break bits, shifted once per element.
            hist = [None] + [Signal(dshape, name=f"hist{i}") for i in range(1, k)]
            hbrk = [None] + [Signal(name=f"hbrk{i}") for i in range(1, k)]
            with m.If(en & s2.valid):
                m.d.sync += [hist[1].eq(s2_delta), hbrk[1].eq(s2_brk)]
                for i in range(2, k):
                    m.d.sync += [hist[i].eq(hist[i - 1]), hbrk[i].eq(hbrk[i - 1])]
            # mask[i]: no break among elements n, n-1, ..., n-i+1.
            brks = [s2_brk] + hbrk[1:]
            mask = [None]
            for i in range(1, k + 1):
                any_brk = brks[0]
                for b in brks[1:i]:
                    any_brk = any_brk | b
                mask.append(~any_brk)

            s3 = stage("s3")
            s3_delta = Signal(dshape)
            s3_terms = [Signal(prod_shape, name=f"s3_term{i}") for i in range(1, k)]
            s3_p = Signal(unsigned(Wc))
            with m.If(en):
                m.d.sync += [
                    s3.eq(s2),
                    s3_delta.eq(s2_delta),
                    s3_p.eq(Mux(mask[k], pows[k], 0)),
                ]
                for i in range(1, k):
                    m.d.sync += s3_terms[i - 1].eq(Mux(mask[i], pows[i], 0) * hist[i])

            s4 = stage("s4")
            s4_g = Signal(acc_shape)
            s4_p = Signal(unsigned(Wc))
            g = s3_delta << cf
            for t in s3_terms:
                g = g + t
            with m.If(en):
                m.d.sync += [s4.eq(s3), s4_g.eq(g), s4_p.eq(s3_p)]
            loop_in, loop_g, loop_p = s4, s4_g, s4_p

        # -- the feedback loop: k registers (k-1 pipeline stages + the lane's A register) --------
        lane_a = [Signal(dshape, name=f"a_lane{j}") for j in range(k)]
        prod = Signal(prod_shape)
        m.d.comb += prod.eq(loop_p * _select(lane_a, loop_in.lane))
        last, last_g, last_prod = loop_in, loop_g, prod
        for j in range(1, k):
            st = stage(f"loop{j}")
            st_g = Signal(acc_shape, name=f"loop{j}_g")
            st_prod = Signal(prod_shape, name=f"loop{j}_prod")
            with m.If(en):
                m.d.sync += [st.eq(last), st_g.eq(last_g), st_prod.eq(last_prod)]
            last, last_g, last_prod = st, st_g, st_prod
        adv, adv_ovf = saturate(m, rshift_round(last_g + last_prod, cf, rnd), dfmt, name="adv")
        for j in range(k):
            with m.If(en & last.valid & ((last.lane == j) if k > 1 else 1)):
                m.d.sync += lane_a[j].eq(adv)

        # -- outputs: A, then RTG = A + V ------------------------------------------------------
        o1 = stage("o1")
        o1_adv = Signal(dshape)
        with m.If(en):
            m.d.sync += [o1.eq(last), o1.overflow.eq(last.overflow | adv_ovf), o1_adv.eq(adv)]

        o2 = stage("o2")
        o2_adv = Signal(dshape)
        o2_rtg = Signal(dshape)
        rtg, rtg_ovf = saturate(m, o1_adv + o1.value, dfmt, name="rtg")
        with m.If(en):
            m.d.sync += [
                o2.eq(o1), o2.overflow.eq(o1.overflow | rtg_ovf),
                o2_adv.eq(o1_adv), o2_rtg.eq(rtg),
            ]
        m.d.comb += [
            o_valid.eq(o2.valid),
            self.o.valid.eq(o2.valid),
            self.o.payload.advantage.eq(o2_adv),
            self.o.payload.rtg.eq(o2_rtg),
            self.o.payload.overflow.eq(o2.overflow),
            self.o.payload.timestep.eq(o2.timestep),
            self.o.payload.trajectory.eq(o2.trajectory),
        ]

        with m.If(self.clear):
            m.d.sync += self.overflow.eq(0)
        with m.If(self.o.valid & self.o.ready & o2.overflow):
            m.d.sync += self.overflow.eq(1)
        return m
