"""The sum tree's on-chip PRNG: 32-bit xorshift (Marsaglia 2003), seeded by the host."""

from amaranth.hdl import Module, Mux
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from sw.replay.spec import PRNG_BITS, XORSHIFT32_SHIFTS, XORSHIFT32_ZERO_SEED

__all__ = ["Xorshift32", "xorshift32_step"]


def xorshift32_step(state):
    """Combinational: one xorshift32 step of a 32-bit value (3 XOR layers, no carries).

    ``s ^= s << 13; s ^= s >> 17; s ^= s << 5`` on 32 bits, the definition of
    :func:`sw.golden.sumtree.xorshift32`.
    """
    a, b, c = XORSHIFT32_SHIFTS
    s = state[:PRNG_BITS]
    s = (s ^ (s << a))[:PRNG_BITS]
    s = s ^ (s >> b)
    s = (s ^ (s << c))[:PRNG_BITS]
    return s


class Xorshift32(wiring.Component):
    """32-bit xorshift generator with a seed load, one word per cycle.

    ``word`` is the *next* state, combinationally: the word a sample uses when it raises
    ``step`` in the same cycle (:class:`sw.golden.sumtree.Xorshift32` uses the state after each
    step). A seed of 0 (the fixed point of xorshift) loads
    :data:`~sw.replay.spec.XORSHIFT32_ZERO_SEED`, which is also the reset state, so reset
    equals loading seed 0.

    Members
    -------
    seed : ``In(32)``
        Seed to load.
    load : ``In(1)``
        Load ``seed`` at the next clock edge; takes priority over ``step`` (that step is lost).
    step : ``In(1)``
        Advance the state to ``word`` at the next clock edge.
    word : ``Out(32)``
        ``xorshift32(state)``, combinational; never 0.
    state : ``Out(32)``
        The state register.

    Latency: ``word`` is combinational (3 XOR levels); throughput one word per cycle.
    """

    seed: In(PRNG_BITS)
    load: In(1)
    step: In(1)
    word: Out(PRNG_BITS)
    state: Out(PRNG_BITS, init=XORSHIFT32_ZERO_SEED)

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.word.eq(xorshift32_step(self.state))
        with m.If(self.load):
            m.d.sync += self.state.eq(Mux(self.seed == 0, XORSHIFT32_ZERO_SEED, self.seed))
        with m.Elif(self.step):
            m.d.sync += self.state.eq(self.word)
        return m
