"""Adam in the WU stage: the per-lane pipeline from a reduced gradient row to the updated weight,
first moment and second-moment logarithm, bit for bit as
:func:`sw.learner.adam.adam_update_raw`."""

from amaranth.hdl import Const, Mux, Signal, signed, unsigned

from sw.learner.adam import (ADAM_POWER, ADAM_WU_LATENCY, C1_FRAC, C1_WIDTH, LOGADD_LATENCY,
                             MASTER_EXTRA, MOMENT_EXTRA, SB_FRAC, moment_format)
from sw.powers import EXP2_LATENCY, LOG2_LATENCY

from ...powers import Exp2Unit, Log2Unit

__all__ = ["AdamLanes", "ADAM_WU_LATENCY", "MOMENT_LATENCY"]

#: Cycles from a lane's inputs to its new first moment (a register).
MOMENT_LATENCY = 5


class AdamLanes:
    """The Adam update of S lanes, one row per cycle, never stalled.

    ``build(m, g, mo, lv, w, res)`` takes the lanes' reduced gradients ``g`` (wgrad format),
    first moments ``mo`` (moment format), second-moment logarithms ``lv``, weights ``w`` and
    master-weight residuals ``res``, all registers loaded in one cycle, and returns
    ``(w, mo, lv, res, overflow)`` of the same row
    :data:`~sw.learner.adam.ADAM_WU_LATENCY` cycles later (registers; ``overflow`` per lane:
    the update or the weight saturated). Per lane: four :class:`~rtl_gen.powers.Log2Unit` and
    three :class:`~rtl_gen.powers.Exp2Unit` (one DSP48E2 each) and the first moment's
    ``(G·2**8 - m)·c1`` (two DSP48E2, :data:`MOMENT_LATENCY` cycles, beside log2|G| and the
    sums of v); stages in the order of
    :data:`~sw.learner.adam.ADAM_WU_LATENCY`'s terms.

    ``regs``: the held ADAM_* arguments by core port name (``adam_c1``, ``adam_log_b2``, ...).
    """

    def __init__(self, config, regs, name):
        self.config, self.regs, self.name = config, regs, name
        self.num = config.numerics
        self.p = ADAM_POWER

    # -- helpers ------------------------------------------------------------------------------
    def _reg(self, m, value, shape, name):
        r = Signal(shape, name=f"{self.name}_{name}", reset_less=True)
        m.d.sync += r.eq(value)
        return r

    def _delay(self, m, value, n, name):
        """``value`` ``n`` cycles later (a chain of registers)."""
        shape = value.shape()
        for k in range(n):
            value = self._reg(m, value, shape, f"{name}_d{k}")
        return value

    def _clamp(self, x):
        """``x`` clamped to the logarithm's range (combinational)."""
        p = self.p
        return Mux(x < p.log_min, p.log_min, Mux(x > p.log_max, p.log_max, x))

    def _log2(self, m, x, in_width, in_frac, name):
        """log2 of unsigned ``x`` (combinational into the unit), LOG2_LATENCY cycles later."""
        u = Log2Unit(self.p, in_width=in_width, in_frac=in_frac)
        m.submodules[f"{self.name}_{name}"] = u
        m.d.comb += [u.i.valid.eq(1), u.i.payload.x.eq(x), u.o.ready.eq(1)]
        return u.o.payload.log

    def _exp2(self, m, y, out_frac, out_width, name):
        """exp2 of raw logarithm ``y``, EXP2_LATENCY cycles later: ``(value, overflow)``."""
        u = Exp2Unit(self.p, out_frac=out_frac, out_width=out_width)
        m.submodules[f"{self.name}_{name}"] = u
        m.d.comb += [u.i.valid.eq(1), u.i.payload.y.eq(y), u.o.ready.eq(1)]
        return u.o.payload.value, u.o.payload.overflow

    def _logadd(self, m, a, b, name):
        """:func:`sw.learner.adam.logadd_raw` of registers ``a``, ``b``: LOGADD_LATENCY cycles
        later, a register."""
        p, lw = self.p, self.p.log_width
        L0 = p.log_min
        diff = Signal(signed(lw + 1), name=f"{self.name}_{name}_diff")
        m.d.comb += diff.eq(a - b)
        hi = self._reg(m, Mux(diff < 0, b, a), signed(lw), f"{name}_hi")
        neg = Mux(diff < 0, diff, -diff)                    # -|a - b|
        nd = self._reg(m, Mux(neg < L0, L0, neg), signed(lw), f"{name}_nd")
        e, _ = self._exp2(m, nd, SB_FRAC, SB_FRAC + 1, f"{name}_exp")
        s = self._log2(m, e + (1 << SB_FRAC), SB_FRAC + 2, SB_FRAC, f"{name}_log")
        hi_d = self._delay(m, hi, EXP2_LATENCY + LOG2_LATENCY, f"{name}_hi")
        out = self._reg(m, Mux(hi_d == L0, L0, self._clamp(hi_d + s)), signed(lw), f"{name}_r")
        return out

    # -- the pipeline ---------------------------------------------------------------------------
    def lane(self, m, j, g, mo, lv, w, res):
        num, p, regs = self.num, self.p, self.regs
        lw, L0 = p.log_width, p.log_min
        gf, mf, wf = num.wgrad_format, moment_format(num), num.weight_format
        n = f"l{j}"
        t = 0                                       # cycles after the inputs
        # First moment: m + round((G·2**8 - m)·c1 / 2**16), half up, one carry chain or one
        # product per cycle: the difference (t = 1); its low 17 bits (unsigned) and its high
        # bits (signed) times c1, a DSP48E2 each (t = 2); their sum (t = 3); rounded (t = 4);
        # added to m (t = 5).
        x = self._reg(m, (g << MOMENT_EXTRA) - mo, signed(mf.width + 1), f"{n}_mx")
        c1 = regs["adam_c1"]
        LO = 17
        pl = self._reg(m, x[:LO] * c1, unsigned(LO + C1_WIDTH), f"{n}_mpl")
        ph = self._reg(m, x[LO:].as_signed() * c1, signed(mf.width + 1 - LO + C1_WIDTH + 1),
                       f"{n}_mph")
        pw = mf.width + 1 + C1_WIDTH + 1
        prod = self._reg(m, (ph << LO) + pl, signed(pw), f"{n}_mp")
        step = self._reg(m, (prod + (1 << (C1_FRAC - 1))) >> C1_FRAC, signed(pw - C1_FRAC),
                         f"{n}_ms")
        mo_t = self._delay(m, mo, MOMENT_LATENCY - 1, f"{n}_m")
        mnew = self._reg(m, mo_t + step, signed(mf.width), f"{n}_mn")   # t = MOMENT_LATENCY
        # log2|m'| (t = 2 .. 8), kept until the update's logarithm.
        mabs = Mux(mnew < 0, -mnew, mnew)
        lm = self._log2(m, mabs[:mf.width], mf.width, mf.frac, f"{n}_lm")
        t_lm = MOMENT_LATENCY + LOG2_LATENCY
        # log2|G| (t = 0 .. 6).
        gabs = Mux(g < 0, -g, g)
        lg = self._log2(m, gabs[:gf.width], gf.width, gf.frac, f"{n}_lg")
        t = LOG2_LATENCY
        gz = self._delay(m, g == 0, t, f"{n}_gz")
        lv_t = self._delay(m, lv, t, f"{n}_lv")
        # The two terms of v: 2·log2|G| + log2(1 - β2) and λ + log2 β2 (t = 7).
        a = self._reg(m, Mux(gz, L0, self._clamp(lg * 2 + regs["adam_log_c2"])), signed(lw),
                      f"{n}_a")
        b = self._reg(m, Mux(lv_t == L0, L0, self._clamp(lv_t + regs["adam_log_b2"])),
                      signed(lw), f"{n}_b")
        t += 1
        lv_new = self._logadd(m, a, b, f"{n}_v")                         # t = 20
        t += LOGADD_LATENCY
        half = self._reg(m, Mux(lv_new == L0, L0, lv_new >> 1), signed(lw), f"{n}_h")
        t += 1
        eps = self._reg(m, regs["adam_log_eps"], signed(lw), f"{n}_eps")  # beside half
        den = self._logadd(m, half, eps, f"{n}_d")                        # t = 34
        t += LOGADD_LATENCY
        # The update's logarithm (t = 35); exp2 into the weight format (t = 40).
        lm_t = self._delay(m, lm, t - t_lm, f"{n}_lmd")
        mz = self._delay(m, mnew == 0, t - MOMENT_LATENCY, f"{n}_mz")
        y = self._reg(m, Mux(mz, L0, self._clamp(lm_t + regs["adam_log_lr"] - den)),
                      signed(lw), f"{n}_y")
        t += 1
        X = MASTER_EXTRA
        u, uo = self._exp2(m, y, wf.frac + X, wf.width + X, f"{n}_u")
        t += EXP2_LATENCY
        # The master weight M = W·2**8 + r (registered at t = 1, kept), M - sign(m')·u
        # (t = 41), saturated to W's range (t = 42), M + 128: its bits are W and r + 128
        # (t = 43).
        mw = self._reg(m, (w << X) + res, signed(wf.width + X + 1), f"{n}_mw")
        neg_m = self._delay(m, mnew < 0, t - MOMENT_LATENCY, f"{n}_mneg")
        mw_t = self._delay(m, mw, t - 1, f"{n}_mwd")
        dw = self._reg(m, Mux(neg_m, mw_t + u, mw_t - u), signed(wf.width + X + 2), f"{n}_dw")
        uo1 = self._reg(m, uo, 1, f"{n}_uo")
        t += 1
        top, bot = ((1 << (wf.width - 1)) - 1) << X, -(1 << (wf.width - 1)) << X
        sat = Mux(dw > top, top, Mux(dw < bot, bot, dw))
        d = self._reg(m, sat, signed(wf.width + X), f"{n}_ds")
        ovf1 = self._reg(m, uo1 | (dw > top) | (dw < bot), 1, f"{n}_o1")
        t += 1
        e = self._reg(m, d + (1 << (X - 1)), signed(wf.width + X), f"{n}_e")
        ovf = self._reg(m, ovf1, 1, f"{n}_o")
        t += 1
        assert t == ADAM_WU_LATENCY, t
        w_new = e[X:].as_signed()
        r_new = Signal(signed(X), name=f"{self.name}_{n}_rn")
        m.d.comb += r_new.eq(e[:X] ^ (1 << (X - 1)))       # (e mod 2**8) - 128
        mo_out = self._delay(m, mnew, t - MOMENT_LATENCY, f"{n}_mo")
        lv_out = self._delay(m, lv_new, t - 20, f"{n}_lvo")
        return w_new, mo_out, lv_out, r_new, ovf

    def build(self, m, g, mo, lv, w, res):
        outs = [self.lane(m, j, *vals) for j, vals in enumerate(zip(g, mo, lv, w, res))]
        return tuple(list(x) for x in zip(*outs))
