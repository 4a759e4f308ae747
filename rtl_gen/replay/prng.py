"""The sum tree's on-chip PRNG: 32-bit xorshift (Marsaglia 2003), seeded by the host."""

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from sw.replay.spec import PRNG_BITS, XORSHIFT32_SHIFTS, XORSHIFT32_ZERO_SEED
from sw.replay.sumtree import xorshift32

__all__ = ["Xorshift32", "xorshift32_step"]


def xorshift32_step(state):
    """Combinational: one xorshift32 step of a 32-bit value (3 XOR layers, no carries).

    ``s ^= s << 13; s ^= s >> 17; s ^= s << 5`` on 32 bits, the definition of
    :func:`sw.replay.sumtree.xorshift32`.
    """
    a, b, c = XORSHIFT32_SHIFTS
    s = state[:PRNG_BITS]
    s = (s ^ (s << a))[:PRNG_BITS]
    s = s ^ (s >> b)
    s = (s ^ (s << c))[:PRNG_BITS]
    return s


class Xorshift32(wiring.Component):
    """32-bit xorshift generator with a seed load, one word per cycle.

    ``word`` is the *next* state: the word a sample uses when it raises ``step`` in the same
    cycle (:class:`sw.replay.sumtree.Xorshift32` uses the state after each step). It is kept
    in a register of its own, one step ahead of ``state`` (a step moves it to ``state`` and
    steps it again; a load takes the seed's registered step), so that a user of ``word``
    starts at a flip-flop. A seed of 0 (the fixed point of xorshift) loads
    :data:`~sw.replay.spec.XORSHIFT32_ZERO_SEED`, which is also the reset state, so reset
    equals loading seed 0.

    Members
    -------
    seed : ``In(32)``
        Seed to load; it must have been stable for the two cycles before ``load`` (the load
        takes it from two registers: the seed with 0 replaced, and its first step).
    load : ``In(1)``
        Load ``seed`` at the next clock edge; takes priority over ``step`` (that step is lost).
    step : ``In(1)``
        Advance the state to ``word`` at the next clock edge.
    word : ``Out(32)``
        ``xorshift32(state)``, registered; never 0.
    state : ``Out(32)``
        The state register.

    Latency: ``word`` follows ``state`` in the same cycle (both registers); throughput one word
    per cycle.
    """

    seed: In(PRNG_BITS)
    load: In(1)
    step: In(1)
    word: Out(PRNG_BITS)
    state: Out(PRNG_BITS, init=XORSHIFT32_ZERO_SEED)

    def elaborate(self, platform):
        m = Module()
        word = Signal(PRNG_BITS, name="ahead", init=xorshift32(XORSHIFT32_ZERO_SEED))
        # The load's two values, registered from ``seed`` (which is stable by then): the
        # zero test and the step are not in the load's cycle.
        seed_q = Signal(PRNG_BITS, name="seed_q", init=XORSHIFT32_ZERO_SEED)
        seed_ahead = Signal(PRNG_BITS, name="seed_ahead",
                            init=xorshift32(XORSHIFT32_ZERO_SEED))
        m.d.sync += [
            seed_q.eq(Mux(self.seed == 0, XORSHIFT32_ZERO_SEED, self.seed)),
            seed_ahead.eq(xorshift32_step(seed_q)),
        ]
        m.d.comb += self.word.eq(word)
        with m.If(self.load):
            m.d.sync += [self.state.eq(seed_q), word.eq(seed_ahead)]
        with m.Elif(self.step):
            m.d.sync += [self.state.eq(word), word.eq(xorshift32_step(word))]
        return m
