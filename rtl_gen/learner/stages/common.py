"""What the stages of the learner pipeline share: the context they are built in (configuration,
buffers, run control), their status (done counts for their consumers), item bookkeeping and
dependencies, and the GEMM stages' issue loop, writer loop and operand feed.

Every function here adds its logic to the Module ``m`` it is given, in a fixed order: the
emitted Verilog of the core depends on that order.
"""

from dataclasses import dataclass, field

from amaranth.hdl import Const, Mux, Signal, Value, signed

from sw.learner.schedule import Stage
from sw.learner.spec import LearnerConfig

from ..tensor_unit import TensorUnit
from .buffers import LearnerBuffers

__all__ = ["StageContext", "StageStatus", "StageBlock", "hw_name", "tensor_unit",
           "ItemCounter", "lookahead_of", "deps_ready", "deps_all", "done_counter", "gemm_loop",
           "writer_loop", "feed"]


@dataclass(frozen=True)
class StageContext:
    """What every stage of one learner pipeline reads.

    Attributes
    ----------
    config : LearnerConfig
    buffers : LearnerBuffers
        The on-chip buffers; stages add their readers and writers to them.
    busy : Value(1)
        A step is running.
    clear : Value(1)
        The cycle a step starts: every stage resets its counters.
    batch_size : Value(13)
        B, stable from the cycle before ``clear`` (what the counters load at ``clear`` is
        computed from it into registers every cycle).
    eta : Value(lr_width)
        η raw (WU), held during the step.
    gamma : Value(coef_width)
        γ raw (DQN LOSS), held during the step.
    sync_now : Value(1)
        DQN: this step copies the updated weights into the target weights (WU).
    adam : dict or None
        Adam (``config.optimizer == "adam"``): the ADAM_* arguments by core port name
        (:data:`sw.learner.adam.ADAM_ARGS`), raw, held during the step; None for SGD.
    """
    config: LearnerConfig
    buffers: LearnerBuffers
    busy: Value
    clear: Value
    batch_size: Value
    eta: Value
    gamma: Value
    sync_now: Value
    adam: dict = None


@dataclass
class StageStatus:
    """What a built stage shows its consumers and the run control.

    Attributes
    ----------
    done : Value(13)
        Items (sub-batches of the stage's pipeline) finished, visible the cycle after the
        write of an item's last result (WU: 1 once the weight tensor is updated).
    all : Value(1)
        Every item of the step is finished.
    flags : list of (str, Value(1))
        Saturation events per :data:`~sw.learner.spec.LEARNER_FLAGS` name, in build order.
    loss_terms : list of Value
        LOSS: squared differences to add into the loss sum each cycle (0 when idle).
    tiles, in_last : Value or None
        WA: tiles finished in the item being written, and whether it is the step's last (WU
        follows them block by block, :func:`sw.learner.schedule.wu_block_need`).
    event : Value(1) or None
        The cycle ``done`` counts up (it shows the next cycle), for :func:`deps_ready`.
    """
    done: Value
    all: Value
    flags: list = field(default_factory=list)
    loss_terms: list = field(default_factory=list)
    tiles: Value = None
    in_last: Value = None
    event: Value = None


def hw_name(name):
    """Signal-name form of a stage name (``fw0@1`` -> ``fw0_p1``)."""
    return name.replace("@", "_p")


class StageBlock:
    """Base of the stage blocks: one stage of :func:`sw.learner.schedule.stages`, built into
    the core's Module by :meth:`build` (no Verilog module boundary of its own).

    Parameters
    ----------
    ctx : StageContext
    stage : Stage
        Of a kind in ``KINDS``.
    producers : dict of str to StageStatus
        The built status of every stage in ``stage.deps`` (others are ignored).

    Raises
    ------
    TypeError
        If ``ctx`` is not a :class:`StageContext` or ``stage`` not a :class:`Stage`.
    ValueError
        If ``stage`` is not of a kind this block builds or a producer is missing.
    """

    #: Stage kinds this block builds.
    KINDS = ()

    def __init__(self, ctx: StageContext, stage: Stage, producers: dict):
        if not isinstance(ctx, StageContext):
            raise TypeError(f"ctx must be a StageContext, not {ctx!r}")
        if not isinstance(stage, Stage):
            raise TypeError(f"stage must be a schedule.Stage, not {stage!r}")
        if stage.kind not in self.KINDS:
            raise ValueError(f"stage must be of kind {' or '.join(self.KINDS)}, not "
                             f"{stage.kind!r}")
        missing = [d for d in stage.deps if d not in producers]
        if missing:
            raise ValueError(f"producers must hold the status of {', '.join(missing)}")
        self._ctx = ctx
        self._stage = stage
        self._producers = {d: producers[d] for d in stage.deps}     # in the order of deps

    @property
    def ctx(self) -> StageContext:
        return self._ctx

    @property
    def stage(self) -> Stage:
        return self._stage

    @property
    def producers(self) -> dict:
        return dict(self._producers)

    def build(self, m) -> StageStatus:
        """Add the stage's logic to Module ``m`` and its readers and writers to the buffers."""
        raise NotImplementedError


def tensor_unit(m, config, stage_name):
    """The stage's R × C :class:`TensorUnit`, submodule ``tu_<stage>``, output always ready."""
    tu = TensorUnit(config.stage_tensor_unit(stage_name))
    m.submodules[f"tu_{hw_name(stage_name)}"] = tu
    m.d.comb += [tu.o.ready.eq(1), tu.clear.eq(0)]
    return tu


class ItemCounter:
    """Item bookkeeping of pipeline d (sub-batches d, d + dp, ...), reset by ``ctx.clear``.

    Members
    -------
    p : Signal(13)
        Local item index.
    base, gbase : Signal(13)
        First row group of the item in the pipeline's buffers and in the batch (shared
        inputs).
    rem : Signal(signed(14))
        Samples of the batch from the item on: ``B - (d + p·dp)·m``.
    cnt : Signal
        Samples of the item, ``min(m, rem)``.
    more : Signal(1)
        ``rem > 0``: the item exists.

    ``cnt``, ``more`` and what :meth:`derived` adds are registers, loaded with their value for
    the new ``rem`` at ``clear`` and :meth:`advance` (no arithmetic on ``rem`` in the cycle
    that uses them).

    With ``lookahead`` (1 or 2) each of them has a shadow register ``<name>_nx``, loaded
    every cycle with its value for the next item (from ``rem``), which :meth:`advance` copies:
    no arithmetic on ``rem`` in the cycle of the advance either. With ``lookahead=2`` the
    compares and differences of ``rem`` the shadows are made of are registers too
    (``<name>_nlt<c>``, ``<name>_nsub<c>``, ``<name>_nrsub<c>``), so a shadow is a mux of
    registers. The shadows follow ``rem`` ``lookahead`` cycles later, so they need at least
    ``lookahead + 1`` cycles from ``clear`` to the first advance and between advances (the
    GEMM loops: an item has R slots or beats or more; :func:`lookahead_of`).
    """

    def __init__(self, m, ctx, name, d, *, lookahead=False):
        cfg = ctx.config
        self._config = cfg
        self._m, self._ctx, self._d = m, ctx, d
        if lookahead not in (False, True, 0, 1, 2):
            raise ValueError(f"lookahead must be 0, 1 or 2, not {lookahead!r}")
        self._lookahead = int(lookahead)
        self._name = name
        self._terms = {}
        self._derived = []
        per = cfg.sub_batch // cfg.array
        self.per = per
        p = Signal(13, name=f"{name}_p")
        base = Signal(13, name=f"{name}_base")             # item's first row group: pipeline's
        gbase = Signal(13, name=f"{name}_gbase")           # and the batch's (shared inputs)
        rem = Signal(signed(14), name=f"{name}_rem")       # B - (d + p·dp)·m
        self.p, self.base, self.gbase, self.rem = p, base, gbase, rem
        rem_clear = self._next(True)[1](0)          # (its register made outside the If)
        with m.If(ctx.clear):
            m.d.sync += [p.eq(0), base.eq(0), gbase.eq(d * per), rem.eq(rem_clear)]
        sbm = cfg.sub_batch
        self.cnt = self.derived(f"{name}_cnt", range(sbm + 1),
                                lambda lt, sub, rsub: Mux(lt(sbm), sub(0), sbm))
        self.more = self.derived(f"{name}_more", 1, lambda lt, sub, rsub: ~lt(1))

    def _next(self, clear):
        """``(lt, sub, rsub)`` of the next ``rem`` r' (at ``clear`` or on :meth:`advance`):
        ``lt(c)`` is r' < c, ``sub(c)`` is r' - c, ``rsub(c)`` is c - r', each one compare
        or subtract of a register and a constant."""
        cfg = self._config
        if clear:
            return self._clear_registered()
        v, off = self.rem, cfg.sub_batch * cfg.dp
        return (lambda c: v < c + off), (lambda c: v - (c + off)), (lambda c: (c + off) - v)

    def _clear_registered(self):
        """:meth:`_next` at ``clear``: the compares and differences of B (``ctx.batch_size``,
        stable from the cycle before ``clear``) as registers loaded every cycle, one per kind
        and constant: no arithmetic on the arguments in the cycle of ``clear``. A register is
        made on first use, so the terms must be used outside conditional statements."""
        v, off = self._ctx.batch_size, self._d * self._config.sub_batch
        return self._registered("c", ((lambda c: v < c + off), (lambda c: v - (c + off)),
                                      (lambda c: (c + off) - v)))

    def _next_registered(self):
        """:meth:`_next` of the advance as registers loaded every cycle (one per kind and
        constant, shared by the derived registers): ``lookahead=2``."""
        return self._registered("n", self._next(False))

    def _registered(self, tag, fns):
        """``(lt, sub, rsub)`` of ``fns`` as registers loaded every cycle, made on first use
        (``<name>_<tag><kind><c>``) and shared by every user of the same kind and constant."""
        def term(kind, fn):
            def get(c):
                key = (tag, kind, c)
                if key not in self._terms:
                    value = fn(c)
                    reg = Signal(value.shape(),
                                 name=f"{self._name}_{tag}{kind}{c}".replace("-", "m"))
                    self._m.d.sync += reg.eq(value)
                    self._terms[key] = reg
                return self._terms[key]
            return get
        return tuple(term(kind, fn) for kind, fn in zip(("lt", "sub", "rsub"), fns))

    def derived(self, name, shape, fn):
        """A register holding ``fn(lt, sub, rsub)`` (:meth:`_next`) of the item's ``rem``."""
        sig = Signal(shape, name=name)
        at_clear = fn(*self._next(True))        # its registers are made outside the If
        with self._m.If(self._ctx.clear):
            self._m.d.sync += sig.eq(at_clear)
        nx = None
        if self._lookahead:
            nx = Signal(shape, name=f"{name}_nx")
            terms = self._next(False) if self._lookahead == 1 else self._next_registered()
            self._m.d.sync += nx.eq(fn(*terms))
        self._derived.append((sig, fn, nx))
        return sig

    def clear_of(self, sig):
        """The value the derived register ``sig`` takes at ``clear`` (call it outside
        conditional statements: it may make the registers of :meth:`_clear_registered`)."""
        for s, fn, _ in self._derived:
            if s is sig:
                return fn(*self._next(True))
        raise ValueError(f"sig must be a register of this ItemCounter, not {sig!r}")

    def next_of(self, sig):
        """The value the derived register ``sig`` takes at :meth:`advance`."""
        for s, fn, nx in self._derived:
            if s is sig:
                return self._next_value(fn, nx)
        raise ValueError(f"sig must be a register of this ItemCounter, not {sig!r}")

    def _next_value(self, fn, nx):
        return fn(*self._next(False)) if nx is None else nx

    def advance(self):
        """Statements that move on to the next item."""
        cfg = self._config
        return [self.p.eq(self.p + 1), self.base.eq(self.base + self.per),
                self.gbase.eq(self.gbase + self.per * cfg.dp),
                self.rem.eq(self.rem - cfg.sub_batch * cfg.dp)] + \
            [sig.eq(self._next_value(fn, nx)) for sig, fn, nx in self._derived]


def lookahead_of(R):
    """The :class:`ItemCounter` lookahead of a GEMM loop on an R-row unit: an item has at
    least R slots (tiles of ``max(K, R)``) or R output beats, so R >= 4 allows 2, R = 2
    allows 1."""
    return 2 if R >= 4 else 1 if R >= 2 else 0


def deps_ready(m, ctx, name, producers, p, advance):
    """Every producer has finished the consumer's item p (``done > p``): an and of registers.

    Per producer, a register ``<name>_lead_<i>`` holds ``done - p`` and a flag
    ``<name>_ok_<i>`` whether it is non-zero, both updated from the producer's ``event`` (its
    ``done`` counts up) and the consumer's ``advance`` (p counts up; only while the flag is
    high, since the item started): the flags are exactly ``done != p`` in every cycle, with
    no compare of the two counters between them and the consumer's start. Both reset at
    ``ctx.clear``. A producer without an ``event`` (a stub of a test harness) is compared
    combinationally: ``done != p``, p the consumer's ``p`` (a consumer moves on to item
    p + 1 only after it started item p, so ``done >= p`` always holds).
    """
    ok_all = Const(1, 1)
    for i, d in enumerate(producers.values()):
        if d.event is None:
            ok_all = ok_all & (d.done != p)
            continue
        lead = Signal(13, name=f"{name}_lead_{i}")
        ok = Signal(name=f"{name}_ok_{i}")
        not_one = Signal(name=f"{name}_notone_{i}")      # lead != 1
        m.d.comb += not_one.eq(lead != 1)
        with m.If(ctx.clear):
            m.d.sync += [lead.eq(0), ok.eq(0)]
        with m.Elif(d.event & ~advance):
            m.d.sync += [lead.eq(lead + 1), ok.eq(1)]
        with m.Elif(~d.event & advance):
            m.d.sync += [lead.eq(lead - 1), ok.eq(not_one)]
        ok_all = ok_all & ok
    return ok_all


def deps_all(producers):
    """Combinational: every producer has finished every item."""
    ok = Const(1, 1)
    for d in producers.values():
        ok = ok & d.all
    return ok


def done_counter(m, ctx, stage, event):
    """Items finished (``event``: the write of an item's last result) and whether that is all
    of them; both visible the cycle after the write. Returns ``(done, all)`` (the stage's
    :class:`StageStatus` also shows ``event``)."""
    cfg = ctx.config
    name = hw_name(stage.name)
    done = Signal(13, name=f"{name}_done")
    left = Signal(signed(14), name=f"{name}_left")      # B - (d + done·dp)·m
    all_done = Signal(name=f"{name}_all")             # left <= 0, registered with left
    # What ``left`` and ``all`` take at ``clear``, registered every cycle from B (stable from
    # the cycle before ``clear``).
    left_c = Signal.like(left, name=f"{name}_left_c")
    all_c = Signal(name=f"{name}_all_c")
    m.d.sync += [left_c.eq(ctx.batch_size - stage.pipe * cfg.sub_batch),
                 all_c.eq(ctx.batch_size <= stage.pipe * cfg.sub_batch)]
    with m.If(ctx.clear):
        m.d.sync += [done.eq(0), left.eq(left_c), all_done.eq(all_c)]
    with m.Elif(event):
        m.d.sync += [done.eq(done + 1), left.eq(left - cfg.sub_batch * cfg.dp),
                     all_done.eq(left <= cfg.sub_batch * cfg.dp)]
    return done, all_done


def nested_last(m, ctx, name, *, step, inner_pen, n, middle, o, o_pen, outer_one):
    """Registered "last" flags of three nested loops (inner, middle n, outer o) that advance
    together on ``step`` and whose inner loop has at least two steps (it never is at its last
    step right after wrapping). Returns ``(inner_last, n_last, o_last)``, each a register
    loaded with the compare of the loop's *next* index: ``inner_pen`` (the inner index is
    one before its last), ``n == middle - 2`` and ``o_pen`` (o is one before its last). No
    compare of an index lies between the index and what uses its flag.

    ``outer_one`` is a pair ``(at_clear, at_advance)``: whether the item starting then has a
    single outer tile.
    """
    il = Signal(name=f"{name}_ilast")
    nl = Signal(name=f"{name}_nlast")
    ol = Signal(name=f"{name}_olast")
    n_pen = (n == middle - 2) if middle >= 2 else Const(0, 1)
    with m.If(ctx.clear):
        m.d.sync += [il.eq(0), nl.eq(middle == 1), ol.eq(outer_one[0])]
    with m.Elif(step):
        with m.If(il):
            m.d.sync += il.eq(0)
            with m.If(nl):
                m.d.sync += nl.eq(middle == 1)
                with m.If(ol):
                    m.d.sync += ol.eq(outer_one[1])
                with m.Else():
                    m.d.sync += ol.eq(o_pen)
            with m.Else():
                m.d.sync += nl.eq(n_pen)
        with m.Else():
            m.d.sync += il.eq(inner_pen)
    return il, nl, ol


def gemm_loop(m, ctx, stage, producers, *, outer, middle, k_len, outer_runtime, k_runtime):
    """Slot sequencer of a GEMM stage on an R × C unit: one slot (operand read or bubble) per
    cycle.

    Loops: outer o (``outer`` tiles, or while ``o·R < cnt`` if ``outer_runtime``), middle n
    (``middle`` tiles), slot t in a tile of ``T = max(K, R)`` slots, the first ``T - K``
    bubbles, K = ``k_len`` (or ``cnt`` if ``k_runtime``). Item p starts once the previous one
    issued its last slot and every producer finished p. Returns a dict of signals: item
    bookkeeping (``p``, ``base``, ``gbase``, ``cnt``), loop indices ``o``, ``n``, ``k``,
    ``elem`` (the slot reads operands), ``last`` (the tile's last slot) and ``item_last``.
    """
    cfg = ctx.config
    S = cfg.array
    R = cfg.stage_array(stage.name)[0]
    name = hw_name(stage.name)
    busy = ctx.busy
    items = ItemCounter(m, ctx, name, stage.pipe, lookahead=lookahead_of(R))
    p, base, gbase, cnt = items.p, items.base, items.gbase, items.cnt
    running = Signal(name=f"{name}_running")
    kmax = max(k_len, cfg.sub_batch, S) if k_runtime else max(k_len, R)
    o = Signal(range(max(outer, cfg.sub_batch // R) + 1), name=f"{name}_o")
    n = Signal(range(middle + 1), name=f"{name}_n")
    t = Signal(range(kmax + 1), name=f"{name}_t")
    k = Signal(range(kmax + 1), name=f"{name}_k")
    bubble = Signal(name=f"{name}_bubble")
    if k_runtime:
        # Registers of the item: the tile's last t (T - 1; R = 1 only, R >= 2 counts down to
        # a registered flag instead) and -pad (T - K bubbles), and k counted from -pad beside
        # t (k = t - pad, bubble while negative).
        if R < 2:
            tend = items.derived(f"{name}_tend", range(kmax + 1),
                                 lambda lt, sub, rsub: Const(R - 1) if R >= cfg.sub_batch else
                                 Mux(lt(R), R - 1, Mux(lt(cfg.sub_batch), sub(1),
                                                       cfg.sub_batch - 1)))
        # -pad of the next item (r' - R below R): no negation after the subtract.
        mpad = items.derived(f"{name}_mpad", range(-R, 1),
                             lambda lt, sub, rsub: Mux(lt(R), sub(R), 0))
        kc = Signal(range(-R, kmax + 1), name=f"{name}_kc")
        with m.If(ctx.clear):
            m.d.sync += kc.eq(Mux(items._next(True)[0](R), items._next(True)[1](R), 0))
        m.d.comb += [bubble.eq(kc < 0), k.eq(kc)]
        if R < 2:
            t_last = t == tend
        else:
            tpen = items.derived(f"{name}_tpen", range(kmax + 1),      # T - 2
                                 lambda lt, sub, rsub: Const(R - 2) if R >= cfg.sub_batch
                                 else Mux(lt(R), R - 2, Mux(lt(cfg.sub_batch), sub(2),
                                                            cfg.sub_batch - 2)))
            t_pen = t == tpen
    else:                       # constants: no compare against a zero pad
        K, pad = k_len, max(0, R - k_len)
        m.d.comb += [bubble.eq(t < pad) if pad else bubble.eq(0), k.eq(t - pad)]
        t_last = t == pad + K - 1
        t_pen = t == pad + K - 2
    go = Signal(name=f"{name}_go")
    slot = Signal(name=f"{name}_slot")
    advance = Signal(name=f"{name}_adv")         # the item's last slot: p moves on
    # For the dependency flags: with R >= 2 an item has at least two slots, so its last
    # slot is never the one that starts it: the flags' update does not wait on ``go``.
    dep_adv = Signal(name=f"{name}_depadv") if R >= 2 else advance
    m.d.comb += [
        go.eq(busy & ~running & items.more & deps_ready(m, ctx, name, producers, p, dep_adv)),
        slot.eq(go | running),
    ]
    n_last = n == middle - 1
    if R < 2:
        o_last = _outer_last(cfg, items, name, o, outer, outer_runtime, R)
    else:                       # T >= R >= 2 slots a tile: registered flags
        o_pen, o_one = _outer_flags(cfg, items, name, o, outer, outer_runtime, R)
        t_last, n_last, o_last = nested_last(m, ctx, name, step=slot, inner_pen=t_pen, n=n,
                                             middle=middle, o=o, o_pen=o_pen, outer_one=o_one)
    item_last = t_last & n_last & o_last
    m.d.comb += advance.eq(slot & item_last)
    if R >= 2:
        m.d.comb += dep_adv.eq(running & item_last)
    with m.If(ctx.clear):
        m.d.sync += [running.eq(0), o.eq(0), n.eq(0), t.eq(0)]
    with m.Elif(slot):
        with m.If(t_last):
            m.d.sync += t.eq(0)
            if k_runtime:
                m.d.sync += kc.eq(mpad)
            with m.If(n_last):
                m.d.sync += n.eq(0)
                with m.If(o_last):
                    m.d.sync += [o.eq(0), running.eq(0)] + items.advance()
                    if k_runtime:
                        m.d.sync += kc.eq(items.next_of(mpad))    # the next item's -pad
                with m.Else():
                    m.d.sync += [o.eq(o + 1), running.eq(1)]
            with m.Else():
                m.d.sync += [n.eq(n + 1), running.eq(1)]
        with m.Else():
            m.d.sync += [t.eq(t + 1), running.eq(1)]
            if k_runtime:
                m.d.sync += kc.eq(kc + 1)
    elem = Signal(name=f"{name}_elem")
    m.d.comb += elem.eq(slot & ~bubble)
    return {"p": p, "base": base, "gbase": gbase, "cnt": cnt, "o": o, "n": n, "k": k,
            "elem": elem, "last": t_last, "item_last": item_last}


def writer_loop(m, ctx, name, d, *, rows, outer, middle, outer_runtime, beat):
    """Beat counters of a GEMM stage's output (an R-row unit, R = ``rows``): row i, middle n,
    outer o, item p of pipeline d, advanced by ``beat``. Returns a dict of signals (``p``,
    ``base``, ``rem``, ``cnt``, ``i``, ``o``, ``n``, ``item_last``)."""
    cfg = ctx.config
    R = rows
    items = ItemCounter(m, ctx, f"{name}_w", d, lookahead=lookahead_of(R))
    i = Signal(range(R), name=f"{name}_wi")
    o = Signal(range(max(outer, cfg.sub_batch // R) + 1), name=f"{name}_wo")
    n = Signal(range(middle + 1), name=f"{name}_wn")
    i_last = i == R - 1
    n_last = n == middle - 1
    if R < 2:
        o_last = _outer_last(cfg, items, f"{name}_w", o, outer, outer_runtime, R)
    else:                       # R >= 2 beats a row loop: registered flags
        o_pen, o_one = _outer_flags(cfg, items, f"{name}_w", o, outer, outer_runtime, R)
        i_last, n_last, o_last = nested_last(m, ctx, f"{name}_w", step=beat,
                                             inner_pen=i == R - 2, n=n, middle=middle, o=o,
                                             o_pen=o_pen, outer_one=o_one)
    with m.If(ctx.clear):
        m.d.sync += [i.eq(0), o.eq(0), n.eq(0)]
    with m.Elif(beat):
        m.d.sync += i.eq(i + 1)
        with m.If(i_last):
            m.d.sync += i.eq(0)
            with m.If(n_last):
                m.d.sync += n.eq(0)
                with m.If(o_last):
                    m.d.sync += [o.eq(0)] + items.advance()
                with m.Else():
                    m.d.sync += o.eq(o + 1)
            with m.Else():
                m.d.sync += n.eq(n + 1)
    return {"p": items.p, "base": items.base, "rem": items.rem, "cnt": items.cnt, "i": i,
            "o": o, "n": n, "item_last": i_last & n_last & o_last}


def _outer_last(cfg, items, name, o, outer, outer_runtime, R):
    """Combinational (R = 1, no registered flags): o is the item's last outer tile, against
    a register ``<name>_omax`` of the item if the outer count is a runtime one."""
    if not outer_runtime:
        return o == outer - 1
    lr = R.bit_length() - 1
    omax = items.derived(f"{name}_omax", range(max(outer, cfg.sub_batch // R) + 1),
                         lambda lt, sub, rsub: Mux(lt(cfg.sub_batch), sub(1) >> lr,
                                                   (cfg.sub_batch - 1) >> lr))
    return o == omax


def _outer_flags(cfg, items, name, o, outer, outer_runtime, R):
    """For :func:`nested_last`: ``o_pen`` (o one before the item's last outer tile) and
    ``outer_one`` (the item has one outer tile, at ``clear`` and at the advance)."""
    lr = R.bit_length() - 1
    if not outer_runtime:
        return (o == outer - 2) if outer >= 2 else Const(0, 1), (outer == 1, outer == 1)
    top = max(outer, cfg.sub_batch // R)
    # omax - 1 (-1: one tile) and omax == 0 of the item, from its rem.
    opm = items.derived(f"{name}_opm", range(-1, top + 1),
                        lambda lt, sub, rsub: Mux(lt(cfg.sub_batch), sub(1) >> lr,
                                                  (cfg.sub_batch - 1) >> lr) - 1)
    one = items.derived(f"{name}_oone", 1,
                        lambda lt, sub, rsub: Mux(lt(cfg.sub_batch), sub(1) >> lr,
                                                  (cfg.sub_batch - 1) >> lr) == 0)
    return o == opm, (items.clear_of(one), items.next_of(one))


def feed(m, ctx, name, tu, loop, a_vals, b_vals):
    """Register the operands (computed from memory data one cycle after the slot) into the
    tensor unit's input (R values of A, C of B): they enter it two cycles after the slot."""
    width = ctx.config.width
    v1 = Signal(name=f"{name}_v1")
    l1 = Signal(name=f"{name}_l1")
    m.d.sync += [v1.eq(loop["elem"] & ~ctx.clear), l1.eq(loop["last"])]
    v2 = Signal(name=f"{name}_v2")
    m.d.sync += v2.eq(v1)
    m.d.comb += tu.i.valid.eq(v2)
    pa = [Signal(signed(width), name=f"{name}_a{i}") for i in range(len(a_vals))]
    pb = [Signal(signed(width), name=f"{name}_b{j}") for j in range(len(b_vals))]
    pl = Signal(name=f"{name}_last")
    m.d.sync += [x.eq(v) for x, v in zip(pa, a_vals)]
    m.d.sync += [x.eq(v) for x, v in zip(pb, b_vals)]
    m.d.sync += pl.eq(l1)
    m.d.comb += [tu.i.payload.a[i].eq(x) for i, x in enumerate(pa)]
    m.d.comb += [tu.i.payload.b[j].eq(x) for j, x in enumerate(pb)]
    m.d.comb += tu.i.payload.last.eq(pl)
