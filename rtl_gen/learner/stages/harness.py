"""One stage of the learner pipeline alone, with its buffers: a component to simulate (or emit)
a stage block without the rest of the core."""

from amaranth.hdl import Const, MemoryData, Module, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from sw.learner.schedule import stages
from sw.learner.spec import LEARNER_FLAGS, LearnerConfig

from . import STAGE_BLOCKS
from .buffers import LearnerBuffers, buffer_specs, or_all, widen
from .common import StageContext, StageStatus

__all__ = ["StageHarness"]


class StageHarness(wiring.Component):
    """Stage ``stage`` of :func:`sw.learner.schedule.stages` built alone into its own Module,
    with every buffer of the pipeline and the core's run control, for simulation.

    The stage's producers are stubs that have finished every item (done counts all ones,
    ``all`` high; for WU, WA's last item has written every tile), so the stage runs its
    items back to back from cycle 1. The buffers' contents are :attr:`memory_data`, which a
    testbench preloads before ``start`` and reads after ``done``.

    Run control as in :class:`~rtl_gen.learner.core.LearnerCore`: ``start`` while idle
    samples the arguments (cycle 0), the stage runs, and ``done`` pulses in cycle E + 1, E
    the first cycle in which the stage has finished every item; ``cycles`` then reads E, which
    is the sum of the stage's item slots and its tail (:func:`~sw.learner.schedule.item_slots`,
    :func:`~sw.learner.schedule.stage_tail`). The batch size is not checked.

    Parameters
    ----------
    config : LearnerConfig
    stage : str
        A stage name of ``stages(config)``, e.g. ``"fw0"``, ``"tfw1"``, ``"loss"``,
        ``"wa1@0"``.

    Members
    -------
    start : ``In(1)``; busy, done : ``Out(1)``
        ``done`` is a one-cycle pulse.
    batch_size : ``In(13)``; lr : ``In(lr_width)``; gamma : ``In(coef_width)``; sync : ``In(1)``
        Sampled with ``start``; ``sync``: WU (DQN) also writes the updated rows into
        ``tw<l>``.
    cycles : ``Out(32)``
    items : ``Out(13)``
        The stage's ``done`` count (WU: 1 once the weights are updated).
    flag_<name> : ``Out(1)`` for each of :data:`~sw.learner.spec.LEARNER_FLAGS`
        Sticky (cleared at ``start``): the stage saturated a value.
    loss_sum : ``Out(64)``
        LOSS: ``Σ (Q - y)²`` over the batch, as the core's.

    Raises
    ------
    TypeError
        If ``config`` is not a :class:`LearnerConfig`.
    ValueError
        If ``stage`` is not a stage of ``config``.
    """

    def __init__(self, config: LearnerConfig, stage: str):
        if not isinstance(config, LearnerConfig):
            raise TypeError(f"config must be a LearnerConfig, not {config!r}")
        names = {st.name: st for st in stages(config)}
        if stage not in names:
            raise ValueError(f"stage must be one of {', '.join(names)}, not {stage!r}")
        self._config = config
        self._stage = names[stage]
        self._memory_data = {key: MemoryData(shape=unsigned(kw["word_bits"]),
                                             depth=max(kw["depth"], 2), init=[])
                             for key, (_, kw) in buffer_specs(config).items()}
        num = config.numerics
        ports = {
            "start": In(1), "busy": Out(1), "done": Out(1), "cycles": Out(32),
            "batch_size": In(13), "lr": In(num.lr_width), "gamma": In(num.coef_width),
            "sync": In(1), "items": Out(13), "loss_sum": Out(64),
        }
        for f in LEARNER_FLAGS:
            ports[f"flag_{f}"] = Out(1)
        super().__init__(ports)

    @property
    def config(self) -> LearnerConfig:
        return self._config

    @property
    def stage(self):
        """The :class:`~sw.learner.schedule.Stage` built."""
        return self._stage

    @property
    def memory_data(self) -> dict:
        """Buffer key (``"w0"``, ``"h0"``, ``"grad1@1"``, ``"mask0"``...) -> its MemoryData."""
        return dict(self._memory_data)

    def elaborate(self, platform):
        m = Module()
        cfg, st = self._config, self._stage
        num = cfg.numerics
        busy, clear = Signal(), Signal()
        eta, gamma = Signal(num.lr_width), Signal(num.coef_width)
        sync_now = Signal()
        cycles = Signal(32)
        with m.If(busy):
            m.d.sync += cycles.eq(cycles + 1)
        bufs = LearnerBuffers(m, cfg, data=self._memory_data)
        ctx = StageContext(config=cfg, buffers=bufs, busy=busy, clear=clear,
                           batch_size=self.batch_size, eta=eta, gamma=gamma, sync_now=sync_now)
        finished = StageStatus(done=Const((1 << 13) - 1, 13), all=Const(1, 1),
                               tiles=Const(0, 1), in_last=Const(1, 1))
        status = STAGE_BLOCKS[st.kind](ctx, st, {d: finished for d in st.deps}).build(m)

        m.d.comb += [clear.eq(self.start & ~busy), self.busy.eq(busy), self.cycles.eq(cycles),
                     self.items.eq(widen(status.done, 13))]
        m.d.sync += self.done.eq(0)
        with m.If(clear):
            m.d.sync += [busy.eq(1), cycles.eq(0), eta.eq(self.lr), gamma.eq(self.gamma),
                         sync_now.eq(self.sync)]
        with m.Elif(busy & status.all):
            m.d.sync += [busy.eq(0), self.done.eq(1)]
        for name in LEARNER_FLAGS:
            reg = Signal(name=f"flag_{name}_reg")
            with m.If(clear):
                m.d.sync += reg.eq(0)
            with m.Elif(or_all(v for f, v in status.flags if f == name)):
                m.d.sync += reg.eq(1)
            m.d.comb += getattr(self, f"flag_{name}").eq(reg)
        loss = Signal(64)
        with m.If(clear):
            m.d.sync += loss.eq(0)
        with m.Else():
            m.d.sync += loss.eq(loss + sum(status.loss_terms, 0))
        m.d.comb += self.loss_sum.eq(loss)
        bufs.connect(m)
        return m
