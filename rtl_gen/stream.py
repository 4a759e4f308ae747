"""Stream plumbing shared by the gateware: a register slice."""

from amaranth.hdl import Module, Shape, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["RegisterSlice"]


class RegisterSlice(wiring.Component):
    """A stream through registers in both directions (a skid buffer): ``o.valid``,
    ``o.payload`` and ``i.ready`` are flip-flops, so no combinational path crosses it.

    Latency 1 cycle (a payload taken on :attr:`i` in cycle t is on :attr:`o` in cycle t + 1),
    throughput one payload per cycle; a second payload waits in the skid register while
    ``o.ready`` is low.

    Parameters
    ----------
    shape : shape-like
        The payload.

    Members
    -------
    i : ``In(stream.Signature(shape))``
    o : ``Out(stream.Signature(shape))``
    """

    def __init__(self, shape):
        Shape.cast(shape)
        super().__init__({"i": In(stream.Signature(shape)), "o": Out(stream.Signature(shape))})

    def elaborate(self, platform):
        m = Module()
        i, o = self.i, self.o
        skid = Signal.like(i.payload, name="skid")
        skid_v = Signal()
        m.d.comb += i.ready.eq(~skid_v)
        with m.If(~o.valid | o.ready):
            with m.If(skid_v):
                m.d.sync += [o.valid.eq(1), o.payload.eq(skid), skid_v.eq(0)]
            with m.Else():
                m.d.sync += [o.valid.eq(i.valid), o.payload.eq(i.payload)]
        with m.Elif(i.valid & ~skid_v):
            m.d.sync += [skid.eq(i.payload), skid_v.eq(1)]
        return m
