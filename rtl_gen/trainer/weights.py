"""The trainer's importance-sampling weights ``(p_min / p_i)**β`` of a sampled batch, as
``exp2(round(β·(log2 p_min - log2 p_i)))`` in the learner's loss-weight format, bit for bit as
:func:`sw.powers.is_weights_raw`."""

from amaranth.hdl import Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from sw.powers import EXP2_LATENCY, LOG2_LATENCY, SCALE_LATENCY
from sw.trainer.schedule import POWER_TABLES, WEIGHTS_TAIL
from sw.trainer.spec import TrainerConfig

from ..powers import Exp2Unit, Log2Unit, LogScaleUnit

__all__ = ["ISWeightUnit", "WEIGHTS_TAIL"]



class ISWeightUnit(wiring.Component):
    """IS weights of a batch of sampled priorities: all B logarithms first, then B weights.

    Parameters
    ----------
    config : TrainerConfig
        The leaf format (``tree.priority_width``, ``tree.priority_frac``), β's format
        (``coef_frac``), the loss-weight format (``learner.numerics.loss_weight_format``), the
        power unit (``power``) and ``max_batch``.

    Members
    -------
    i : ``In(stream.Signature(StructLayout({"priority": unsigned(priority_width),
        "last": 1})))``
        The batch's sampled priorities (raw leaf values, all > 0), ``last`` on the B-th.
        ``ready`` is high from reset and after a batch's last weight left, until its last
        priority was taken.
    beta : ``In(coef_frac + 1)``
        β (``coef_frac`` fraction bits, 0..1), held while a batch is computed.
    o : ``Out(stream.Signature(StructLayout({"weight": unsigned(w), "last": 1})))``
        The weights in sample order, the loss-weight format (w bits); ``last`` on the B-th.
    busy : ``Out(1)``
        A batch's first priority was taken and its last weight has not left.

    Notes
    -----
    A :class:`~rtl_gen.powers.Log2Unit` writes each logarithm into a ``max_batch``-word
    memory and keeps their minimum; after the last, the memory is read in order,
    ``log2 p_min - log2 p_i`` (which lies in ``(-priority_width, 0]``: no clamp acts) goes
    through a :class:`~rtl_gen.powers.LogScaleUnit` with β and an
    :class:`~rtl_gen.powers.Exp2Unit`. Without back-pressure, priorities taken one per
    cycle with the last in cycle t give weight j in cycle ``t + WEIGHTS_TAIL + j``
    (:data:`WEIGHTS_TAIL` = 20); a stalled ``o`` holds the read and both pipelines.
    """

    def __init__(self, config):
        if not isinstance(config, TrainerConfig):
            raise TypeError(f"config must be a TrainerConfig, not {config!r}")
        self._config = config
        tc, lw = config.tree, config.learner.numerics.loss_weight_format
        cw = config.coef_frac + 1
        self.log2 = Log2Unit(config.power, in_width=tc.priority_width,
                             in_frac=tc.priority_frac, tag_shape=1, tables=POWER_TABLES)
        self.scale = LogScaleUnit(config.power, p_width=cw, p_frac=config.coef_frac,
                                  tag_shape=1)
        self.exp2 = Exp2Unit(config.power, out_frac=lw.frac, out_width=lw.width, tag_shape=1,
                             tables=POWER_TABLES)
        super().__init__({
            "i": In(stream.Signature(data.StructLayout({
                "priority": unsigned(tc.priority_width), "last": 1}))),
            "beta": In(cw),
            "o": Out(stream.Signature(data.StructLayout({"weight": unsigned(lw.width),
                                                         "last": 1}))),
            "busy": Out(1),
        })

    @property
    def config(self) -> TrainerConfig:
        return self._config

    def elaborate(self, platform):
        m = Module()
        m.submodules.log2, m.submodules.scale, m.submodules.exp2 = \
            log2, scale, exp2 = self.log2, self.scale, self.exp2
        nmax, lw = self._config.max_batch, self._config.power.log_width
        m.submodules.logs = logs = Memory(shape=signed(lw), depth=nmax, init=[])
        wr, rd = logs.write_port(), logs.read_port()

        accepting = Signal(init=1)      # i.ready: before the batch's last priority
        computing = Signal()            # the logarithms are read out
        active = Signal()
        nw = Signal(range(nmax + 1), name="n_written")
        nr = Signal(range(nmax + 1), name="n_read")
        # the logarithms left to read after the next, a down-counter with its tests
        # registered (no compare of two counters in the read's enable)
        r_left = Signal(range(nmax + 1), name="read_left")
        r_more = Signal(name="read_more")               # nr != n
        r_last = Signal(name="read_at_last")            # nr == n - 1
        lmin = Signal(signed(lw), name="log_min")

        # -- logarithms into the memory, their minimum ----------------------------------------
        took = self.i.valid & self.i.ready
        m.d.comb += [
            self.i.ready.eq(accepting & log2.i.ready),
            log2.i.valid.eq(self.i.valid & accepting),
            log2.i.payload.x.eq(self.i.payload.priority),
            log2.i.payload.tag.eq(self.i.payload.last),
            log2.o.ready.eq(1),
            wr.addr.eq(nw), wr.data.eq(log2.o.payload.log), wr.en.eq(log2.o.valid),
        ]
        with m.If(took):
            m.d.sync += active.eq(1)
            with m.If(self.i.payload.last):
                m.d.sync += accepting.eq(0)
        log = log2.o.payload.log
        with m.If(log2.o.valid):
            m.d.sync += [nw.eq(nw + 1),
                         lmin.eq(Mux((nw == 0) | (log < lmin), log, lmin))]
            with m.If(log2.o.payload.tag):
                m.d.sync += [nw.eq(0), computing.eq(1), nr.eq(0), r_left.eq(nw),
                             r_more.eq(1), r_last.eq(nw == 0)]

        # -- read out: log2 p_min - log2 p_i, scaled by beta, exp2 ----------------------------
        # the read (block RAM), then the difference registered: two stages, one enable
        rv, rlast = Signal(name="read_valid"), Signal(name="read_last")
        dv, dlast = Signal(name="diff_valid"), Signal(name="diff_last")
        diff = Signal(signed(lw + 1), name="log_diff")
        en = Signal()
        issue = computing & r_more
        m.d.comb += [en.eq(~dv | scale.i.ready), rd.addr.eq(nr), rd.en.eq(en)]
        with m.If(en):
            m.d.sync += [rv.eq(issue), rlast.eq(r_last), dv.eq(rv), dlast.eq(rlast),
                         diff.eq(lmin - rd.data)]
            with m.If(issue):
                m.d.sync += [nr.eq(nr + 1), r_left.eq(r_left - 1), r_last.eq(r_left == 1),
                             r_more.eq(~r_last)]
                with m.If(r_last):
                    m.d.sync += computing.eq(0)
        m.d.comb += [
            scale.i.valid.eq(dv),
            scale.i.payload.log.eq(diff),
            scale.i.payload.tag.p.eq(self.beta),
            scale.i.payload.tag.tag.eq(dlast),
        ]
        wiring.connect(m, scale.o, exp2.i)
        m.d.comb += [
            self.o.valid.eq(exp2.o.valid),
            self.o.payload.weight.eq(exp2.o.payload.value),
            self.o.payload.last.eq(exp2.o.payload.tag),
            exp2.o.ready.eq(self.o.ready),
            self.busy.eq(active),
        ]
        with m.If(self.o.valid & self.o.ready & self.o.payload.last):
            m.d.sync += [accepting.eq(1), active.eq(0)]
        return m
