"""The trainer's stratified sample fractions: the replay tree's SAMPLE fraction of sample ``b`` of
a batch of B, ``b·F + ((x_b·F) >> target_bits)`` with ``F = 2**target_bits // B`` and ``x_b`` the
next word of the trainer's xorshift32 PRNG, bit for bit as
:func:`sw.trainer.golden.stratified_fractions` on :meth:`sw.replay.prng.Xorshift32.fractions`."""

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from sw.replay.spec import PRNG_BITS
from sw.trainer.schedule import FRACTION_LATENCY
from sw.trainer.spec import TrainerConfig

from ..replay.prng import Xorshift32

__all__ = ["StratifiedFractions", "FRACTION_LATENCY"]


#: Operand chunks of the multiplier ``x·F`` (unsigned 17 x 26 bits: one DSP48E2 each, as the
#: sum tree's target multiplier).
_X_CHUNK = 17
_F_CHUNK = 26


def _chunks(value, size):
    return [(value[lo:lo + size], lo) for lo in range(0, len(value), size)]


class StratifiedFractions(wiring.Component):
    """B stratified SAMPLE fractions per ``start``, one per cycle.

    Parameters
    ----------
    config : TrainerConfig
        ``tree.target_bits`` (X, the fraction's bits) and ``max_batch``.

    Members
    -------
    start : ``In(1)``
        Begin a batch of ``batch`` samples (taken while ``busy`` is low).
    batch : ``In(range(max_batch + 1))``
        B, 1..max_batch, read in the cycle of ``start``.
    seed : ``In(32)``, seed_load : ``In(1)``
        The PRNG's seed (:class:`~rtl_gen.replay.prng.Xorshift32`: a seed stable for the two
        cycles before ``seed_load``; 0 loads the default seed, as does reset).
    o : ``Out(stream.Signature(StructLayout({"fraction": unsigned(X), "last": 1})))``
        The fractions in sample order; ``last`` marks sample B - 1.
    busy : ``Out(1)``
        A batch is being divided, drawn or is in the pipeline.

    Notes
    -----
    The stratum width ``F = 2**X // B`` (X + 1 bits: B = 1 gives ``2**X``) comes from a
    restoring divider, one quotient bit per cycle, X cycles; it is kept with its B, so a
    batch of the same B as the previous one skips the division. Then one PRNG word per sample
    (``x = word >> (32 - X)``; the word is drawn when the sample enters the pipeline, so a
    stalled ``o`` draws none), ``x·F`` in partial products of 17 x 26 bits, their sum, and
    the base ``b·F`` (a running sum) added: :data:`FRACTION_LATENCY` = 4 cycles.

    From ``start`` in cycle 0, without back-pressure, fraction b is on ``o`` in cycle
    ``1 + D + 4 + b`` with D = X (a new B) or 0 (the previous B); ``busy`` falls after the
    last is taken. The pipeline holds while ``o`` is stalled.
    """

    def __init__(self, config):
        if not isinstance(config, TrainerConfig):
            raise TypeError(f"config must be a TrainerConfig, not {config!r}")
        self._config = config
        tb = config.tree.target_bits
        super().__init__({
            "start": In(1),
            "batch": In(range(config.max_batch + 1)),
            "seed": In(PRNG_BITS),
            "seed_load": In(1),
            "o": Out(stream.Signature(data.StructLayout({"fraction": unsigned(tb),
                                                         "last": 1}))),
            "busy": Out(1),
        })

    @property
    def config(self) -> TrainerConfig:
        return self._config

    def elaborate(self, platform):
        m = Module()
        tb, nmax = self._config.tree.target_bits, self._config.max_batch
        m.submodules.prng = prng = Xorshift32()
        m.d.comb += [prng.seed.eq(self.seed), prng.load.eq(self.seed_load)]

        n = Signal(range(nmax + 1), name="n")               # B of the batch
        cached = Signal(range(nmax + 1), name="cached_b")   # B whose F is held (0: none)
        f = Signal(tb + 1, name="f")                        # F = 2**X // B
        rem = Signal(range(2 * nmax + 1), name="rem")       # the divider's remainder
        cnt = Signal(range(tb + 1), name="div_cnt")
        dividing, emitting = Signal(), Signal()
        # the samples still to draw, a down-counter with its tests registered (no compare
        # of two counters in the draw's enable)
        togo = Signal(range(nmax + 1), name="togo")         # B - samples drawn
        more = Signal(name="more")                          # togo != 0
        at_last = Signal(name="at_last")                    # togo == 1
        base = Signal(tb + 1, name="base")                  # b·F (at most 2**X)

        # -- start and the divider: 2**X = a one followed by X zeros, one bit per cycle -------
        with m.If(self.start & ~self.busy):
            m.d.sync += [n.eq(self.batch), togo.eq(self.batch), more.eq(self.batch != 0),
                         at_last.eq(self.batch == 1), base.eq(0)]
            with m.If(self.batch == cached):
                m.d.sync += emitting.eq(1)
            with m.Else():
                # The leading one: quotient bit X is B == 1, the remainder 1 - that bit.
                m.d.sync += [dividing.eq(1), cnt.eq(tb), f.eq(self.batch == 1),
                             rem.eq(self.batch != 1)]
        # one subtraction per bit: its borrow is the quotient bit's complement
        r2 = Cat(0, rem)[:len(rem)]
        diff = Signal(len(rem) + 1, name="div_diff")
        m.d.comb += diff.eq(r2 - n)
        ge = ~diff[-1]
        with m.If(dividing):
            m.d.sync += [rem.eq(Mux(ge, diff[:len(rem)], r2)), f.eq(Cat(ge, f)[:tb + 1]),
                         cnt.eq(cnt - 1)]
            with m.If(cnt == 1):
                m.d.sync += [dividing.eq(0), emitting.eq(1), cached.eq(n)]

        # -- the draw and the pipeline (one clock enable: the output empty or taken) ----------
        v = [Signal(name=f"v{k}") for k in range(1, FRACTION_LATENCY + 1)]
        last = [Signal(name=f"last{k}") for k in range(1, FRACTION_LATENCY + 1)]
        en = Signal()
        issue = emitting & more
        m.d.comb += [en.eq(~v[-1] | self.o.ready), prng.step.eq(en & issue)]
        x1 = Signal(tb, name="x1")
        base1, base2, base3 = (Signal(tb + 1, name=f"base{k}") for k in (1, 2, 3))
        prod3 = Signal(2 * tb + 1, name="prod3")
        frac4 = Signal(tb, name="frac4")
        pps = []
        for xa, sx in _chunks(x1, _X_CHUNK):
            for fa, sf in _chunks(f, _F_CHUNK):
                pps.append((Signal(len(xa) + len(fa), name=f"pp_{sx}_{sf}"), sx + sf, xa, fa))
        with m.If(en):
            m.d.sync += [
                v[0].eq(issue), last[0].eq(at_last),
                x1.eq(prng.word[PRNG_BITS - tb:]), base1.eq(base),
                *(pp.eq(xa * fa) for pp, _, xa, fa in pps), base2.eq(base1),
                prod3.eq(sum(pp << s for pp, s, _, _ in pps)), base3.eq(base2),
                frac4.eq(base3 + prod3[tb:]),
                *(v[k].eq(v[k - 1]) for k in range(1, FRACTION_LATENCY)),
                *(last[k].eq(last[k - 1]) for k in range(1, FRACTION_LATENCY)),
            ]
            with m.If(issue):
                m.d.sync += [togo.eq(togo - 1), more.eq(~at_last), at_last.eq(togo == 2),
                             base.eq(base + f)]
                with m.If(at_last):
                    m.d.sync += emitting.eq(0)
        with m.If(emitting & ~more):                        # B = 0: nothing to draw
            m.d.sync += emitting.eq(0)
        m.d.comb += [
            self.o.valid.eq(v[-1]),
            self.o.payload.fraction.eq(frac4),
            self.o.payload.last.eq(last[-1]),
            self.busy.eq(dividing | emitting | Cat(*v).any()),
        ]
        return m
