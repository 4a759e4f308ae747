"""The prioritized replay accelerator's core: the sum tree, its batch buffers and the batch
engine."""

from dataclasses import dataclass

from amaranth.hdl import Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from sw.replay.spec import (REGIONS, REPLAY_ERRORS, TAIL, WORD_BYTES, ReplayOp, SumTreeConfig,
                           field_bits, region_bits, region_words, replay_register_map)
from sw.shell.spec import HOST_READ_LATENCY

from ..shell.host_port import delayed, register_host_requests
from ..shell.signatures import (ArgsSignature, MemoryPortSignature, RunControlSignature,
                                StatusSignature)
from .layouts import SumTreeOp
from .sumtree import SumTree

__all__ = ["ReplayCore"]


class ReplayCore(wiring.Component):
    """A :class:`~rtl_gen.replay.sumtree.SumTree`, five batch buffers and the batch engine:
    what :class:`~rtl_gen.replay.accelerator.ReplayAccelerator` puts in its shell.

    Buffers: one memory per region of :data:`~sw.replay.spec.REGIONS`, ``region_words`` deep,
    only their used bits wide (a host write keeps :func:`~sw.replay.spec.field_bits` bits),
    on the host port while idle. A run (OP, BATCH_SIZE, UPDATE_SIZE sampled with
    ``ctrl.start``): the engine reads one command per cycle from the input buffers into the
    tree (a one-cycle buffer read, then the command register) and writes every response into
    IDX_OUT/PRIO_OUT at the next free entry in the cycle it leaves the tree. It ends when every
    command has been taken, every response is written and :data:`~sw.replay.spec.TAIL` cycles
    have passed since the last command. Updates are posted. Cycles of a run:
    :func:`sw.replay.spec.run_cycles` (``ctrl.cycles``); refused starts end at once with
    ``ctrl.error`` (:data:`~sw.replay.spec.REPLAY_ERRORS`), tree and buffers untouched.

    Parameters
    ----------
    config : SumTreeConfig

    Members
    -------
    ctrl : ``In(RunControlSignature(error_bits=2))``
    args : ``In(ArgsSignature(replay_register_map(config)))``
        OP (``op_code``, ``op_prng``, ``op_relaxed``), ``batch_size``, ``update_size``,
        ``seed``.
    status : ``Out(StatusSignature(...))``
        The tree's sticky flags, ``status_tree_busy``, ``response_cycles``, the root
        (``total_lo``/``_hi``), the maximum-priority register, ``size``, ``write_pointer``.
    host : ``In(MemoryPortSignature(64, ...))``
        The buffers as 64-bit words, region after region (``host.enable`` low while busy or
        starting); read data :data:`~sw.shell.spec.HOST_READ_LATENCY` cycles after
        ``host.re``, writes one cycle after the port (the request is registered).
    """

    def __init__(self, config: SumTreeConfig):
        if not isinstance(config, SumTreeConfig):
            raise TypeError(f"config must be a SumTreeConfig, not {config!r}")
        self._config = config
        regmap = replay_register_map(config)
        words = len(REGIONS) * region_words(config)
        super().__init__({
            "ctrl": In(RunControlSignature(error_bits=2)),
            "args": In(ArgsSignature(regmap)),
            "status": Out(StatusSignature(regmap)),
            "host": In(MemoryPortSignature(data_width=8 * WORD_BYTES,
                                           addr_width=max(1, (words - 1).bit_length()),
                                           read_latency=HOST_READ_LATENCY)),
        })

    @property
    def config(self) -> SumTreeConfig:
        return self._config

    def elaborate(self, platform):
        m = Module()
        m.submodules.tree = tree = SumTree(self._config)
        busy = Signal()
        rports, wports = self._buffers(m)
        self._host_port(m, busy, rports, wports)
        ctl = self._control(m, busy)
        run = self._issue(m, tree, busy, rports)
        rsp = self._responses(m, tree, busy, wports, ctl)
        plan = self._plan(m)
        self._engine(m, tree, busy, ctl, run, rsp, plan)
        self._status(m, tree, ctl)
        return m

    # Each step below adds its logic to ``m`` and returns what later steps use; the order of
    # the calls in :meth:`elaborate` is the order of the statements in the netlist.
    def _buffers(self, m):
        """One memory per region of :data:`~sw.replay.spec.REGIONS`: ``(read ports, write
        ports)`` by region name."""
        cfg = self._config
        rw = region_words(cfg)
        rports, wports = {}, {}
        for name in REGIONS:
            mem = Memory(shape=unsigned(region_bits(cfg, name)), depth=rw, init=[])
            m.submodules[f"buf_{name.lower()}"] = mem
            rports[name] = mem.read_port()
            wports[name] = mem.write_port(granularity=8)
        return rports, wports

    def _host_port(self, m, busy, rports, wports):
        """The buffers on the host port while idle: the requests registered, the read data an
        AND-OR of the registered outputs into a register."""
        cfg = self._config
        hmem = self.host
        rbits = (region_words(cfg) - 1).bit_length()
        # The host's requests registered (read data HOST_READ_LATENCY cycles later: the
        # request, the block RAM, its output register, the region's and-or into a register).
        req = register_host_requests(m, hmem, busy=busy, start=self.ctrl.start)
        h_region = Signal(range(len(REGIONS) + 1))
        h_word = Signal(max(1, rbits))
        m.d.comb += [h_region.eq(req.addr >> rbits), h_word.eq(req.addr[:rbits]
                                                                  if rbits else 0)]
        # The region of a host read, registered one-hot twice (with the block RAM's data and
        # with its output register): the read data is an AND-OR of the registered outputs.
        h_sel_qq = delayed(m, Cat(h_region == r for r in range(len(REGIONS))), 2, name="h_sel")
        rdata = 0
        for r, name in enumerate(REGIONS):
            bits = region_bits(cfg, name)
            data_q = Signal(len(rports[name].data), name=f"h_data_{name.lower()}_q")
            m.d.sync += data_q.eq(rports[name].data)
            rdata = rdata | Mux(h_sel_qq[r], data_q, 0)
            with m.If(~busy):
                m.d.comb += [
                    rports[name].addr.eq(h_word),
                    rports[name].en.eq(req.re & (h_region == r)),
                    wports[name].addr.eq(h_word),
                    wports[name].data.eq(req.wdata[:field_bits(cfg, name)]),
                    wports[name].en.eq(Mux(h_region == r, req.we[:bits // 8], 0)),
                ]
        rdata_q = Signal(len(hmem.rdata), name="host_rdata_q")
        m.d.sync += rdata_q.eq(rdata)
        m.d.comb += hmem.rdata.eq(rdata_q)

    def _control(self, m, busy):
        """The run control's pulses and counters (:class:`_Control`)."""
        ctrl = self.ctrl
        ready = Signal()
        done = Signal()
        m.d.comb += [ctrl.busy.eq(busy), ctrl.ready.eq(ready), ctrl.done.eq(done)]
        error = Signal(2)
        cycles = Signal(32)
        rsp_cycles = Signal(32)
        m.d.sync += [ready.eq(0), done.eq(0)]
        with m.If(busy):
            m.d.sync += cycles.eq(cycles + 1)
        return _Control(ready=ready, done=done, error=error, cycles=cycles,
                        rsp_cycles=rsp_cycles)

    def _issue(self, m, tree, busy, rports):
        """The issue loop: the latched run's phases (tree operation, count) read one element a
        cycle from the input buffers into the command register, then the tail after the last
        command taken (:class:`_Issue`)."""
        cfg = self._config
        # Latched run: up to two phases (tree operation, count) issued one after the other.
        bw = max(cfg.batch_width, 1)
        ph_op = [Signal(SumTreeOp, name=f"ph{p}_op") for p in range(2)]
        # Per phase: its count - 2, from the plan. The issue loop counts it down; the sign bit
        # says the element being read is the phase's last (no compare in the loop).
        ph_left = [Signal(signed(bw + 1), name=f"ph{p}_left") for p in range(2)]
        ph_left_m1 = Signal(signed(bw + 1), name="ph1_left_m1")     # phase 1's count - 3
        phase = Signal()                        # the phase being issued
        issue_i = Signal(bw)                    # next element of the phase to read
        issuing = Signal()                      # elements left to read
        two = Signal()                          # phase 1 follows phase 0
        left = Signal(signed(bw + 1))           # count - 2 - issue_i of the phase
        left_m1 = Signal(signed(bw + 1))        # left - 1, a register (the loop only muxes)
        at_last = left[-1]                      # issue_i is the phase's last element
        wait_tree = Signal()                    # RESET: end when the tree is idle again
        tail = Signal(range(TAIL + 1))
        tail_zero = Signal(init=1)              # registered: tail == 0

        cur_op = Mux(phase, ph_op[1], ph_op[0])

        # Issue: buffer read (cycle 1), command register (cycle 2, valid until taken).
        c_valid = Signal()
        c_op = Signal(SumTreeOp)
        advance = ~c_valid | tree.cmd.ready
        fetch = issuing & advance
        with m.If(busy):
            for name in ("IDX_IN", "PRIO_IN", "TARGET_IN"):
                m.d.comb += [rports[name].addr.eq(issue_i), rports[name].en.eq(advance)]
        with m.If(advance):
            m.d.sync += [c_valid.eq(fetch), c_op.eq(cur_op)]
        with m.If(fetch):
            m.d.sync += [issue_i.eq(issue_i + 1), left.eq(left_m1), left_m1.eq(left_m1 - 1)]
            with m.If(at_last):
                m.d.sync += issue_i.eq(0)
                with m.If(~phase & two):
                    m.d.sync += [phase.eq(1), left.eq(ph_left[1]), left_m1.eq(ph_left_m1)]
                with m.Else():
                    m.d.sync += issuing.eq(0)
        m.d.comb += [
            tree.cmd.valid.eq(c_valid),
            tree.cmd.payload.op.eq(c_op),
            tree.cmd.payload.index.eq(rports["IDX_IN"].data),
            tree.cmd.payload.priority.eq(rports["PRIO_IN"].data),
            tree.cmd.payload.target.eq(rports["TARGET_IN"].data),
            tree.rsp.ready.eq(1),
        ]
        taken = tree.cmd.valid & tree.cmd.ready
        with m.If(taken):
            m.d.sync += [tail.eq(TAIL), tail_zero.eq(0)]
        with m.Elif(~tail_zero):
            m.d.sync += [tail.eq(tail - 1), tail_zero.eq(tail == 1)]
        return _Issue(ph_op=ph_op, ph_left=ph_left, ph_left_m1=ph_left_m1, phase=phase,
                      issue_i=issue_i, issuing=issuing, two=two, left=left, left_m1=left_m1,
                      wait_tree=wait_tree, tail_zero=tail_zero, c_valid=c_valid)

    def _responses(self, m, tree, busy, wports, ctl):
        """The tree's responses written to IDX_OUT/PRIO_OUT in order, at the next free entry
        (:class:`_Responses`)."""
        cfg = self._config
        bw = max(cfg.batch_width, 1)
        rsp_left = Signal(signed(bw + 1))       # output entries expected - 2 - rsp_j
        rsp_at_last = rsp_left[-1]              # rsp_j is the last output entry
        rsp_j = Signal(bw)                      # output entries written
        rsp_none = Signal(init=1)               # registered: no output entry left to write
        got = tree.rsp.valid & busy
        with m.If(busy):
            for name, field in (("IDX_OUT", "index"), ("PRIO_OUT", "value")):
                bits = region_bits(cfg, name)
                m.d.comb += [
                    wports[name].addr.eq(rsp_j),
                    wports[name].data.eq(getattr(tree.rsp.payload, field)[:bits]),
                    wports[name].en.eq(Mux(got, (1 << (bits // 8)) - 1, 0)),
                ]
        with m.If(got):
            m.d.sync += [rsp_j.eq(rsp_j + 1), ctl.rsp_cycles.eq(ctl.cycles + 1),
                         rsp_none.eq(rsp_at_last), rsp_left.eq(rsp_left - 1)]
        return _Responses(left=rsp_left, j=rsp_j, none=rsp_none)

    def _plan(self, m):
        """The run a start would launch, decoded from the arguments and registered every cycle
        (:class:`_Plan`)."""
        # The error code in two steps: the range checks, then the code. The host writes the
        # arguments before AP_START, in writes of their own, which commit at most one every
        # three cycles (:class:`~rtl_gen.shell.lite_csr.AxiLiteCsr`), so the plan is current
        # when a start is seen, and the start only copies it.
        cfg, args = self._config, self.args
        bw = max(cfg.batch_width, 1)
        code = args.op_code
        batch = args.batch_size
        usize = args.update_size
        sample_op = Mux(args.op_prng, SumTreeOp.SAMPLE_PRNG, SumTreeOp.SAMPLE)
        bad_batch, bad_usize, bad_code = Signal(), Signal(), Signal()
        m.d.sync += [
            bad_batch.eq((batch == 0) | (batch > cfg.max_batch)),
            bad_usize.eq((usize == 0) | (usize > cfg.max_batch)),
            bad_code.eq(code > max(o.value for o in ReplayOp)),
        ]
        p_fail = Signal(2, name="plan_fail")
        p_seed = Signal(name="plan_seed")
        p_op = [Signal(SumTreeOp, name=f"plan_ph{p}_op") for p in range(2)]
        p_left = [Signal(signed(bw + 1), name=f"plan_ph{p}_left") for p in range(2)]
        p_left_m1 = [Signal(signed(bw + 1), name=f"plan_ph{p}_left_m1") for p in range(2)]
        p_rsp = Signal(name="plan_rsp")         # the run writes output entries (B of them)
        p_two = Signal(name="plan_two")
        p_rsp_left = Signal(signed(bw + 1), name="plan_rsp_left")
        p_wait = Signal(name="plan_wait_tree")
        fail = Signal(2)
        with m.If(bad_code):
            m.d.comb += fail.eq(REPLAY_ERRORS["op"])
        with m.Elif((code != ReplayOp.RESET) & (code != ReplayOp.SEED) & bad_batch):
            m.d.comb += fail.eq(REPLAY_ERRORS["batch_size"])
        with m.Elif((code == ReplayOp.UPDATE_SAMPLE) & bad_usize):
            m.d.comb += fail.eq(REPLAY_ERRORS["update_size"])

        def plan_n(p, n):
            # n elements: n - 2, in -1 .. max_batch - 2 when the plan does not fail, and n - 3
            return [p_left[p].eq(n - 2), p_left_m1[p].eq(n - 3)]

        m.d.sync += [p_fail.eq(fail), p_seed.eq(code == ReplayOp.SEED), p_rsp.eq(0),
                     p_two.eq(0), p_wait.eq(0), *plan_n(0, batch), *plan_n(1, 1),
                     p_rsp_left.eq(batch - 2)]
        with m.Switch(code):
            with m.Case(ReplayOp.SAMPLE):
                m.d.sync += [p_op[0].eq(sample_op), p_rsp.eq(1)]
            with m.Case(ReplayOp.UPDATE):
                m.d.sync += p_op[0].eq(SumTreeOp.UPDATE)
            with m.Case(ReplayOp.INSERT):
                m.d.sync += [p_op[0].eq(SumTreeOp.INSERT), p_rsp.eq(1)]
            with m.Case(ReplayOp.INSERT_MAX):
                m.d.sync += [p_op[0].eq(SumTreeOp.INSERT_MAX), p_rsp.eq(1)]
            with m.Case(ReplayOp.READ):
                m.d.sync += [p_op[0].eq(SumTreeOp.READ), p_rsp.eq(1)]
            with m.Case(ReplayOp.UPDATE_SAMPLE):
                m.d.sync += [p_rsp.eq(1), p_two.eq(1)]
                with m.If(args.op_relaxed):
                    m.d.sync += [p_op[0].eq(sample_op), p_op[1].eq(SumTreeOp.UPDATE),
                                 *plan_n(1, usize)]
                with m.Else():
                    m.d.sync += [p_op[0].eq(SumTreeOp.UPDATE), *plan_n(0, usize),
                                 p_op[1].eq(sample_op), *plan_n(1, batch)]
            with m.Case(ReplayOp.RESET):
                m.d.sync += [p_op[0].eq(SumTreeOp.RESET), *plan_n(0, 1), p_wait.eq(1)]
        return _Plan(fail=p_fail, seed=p_seed, op=p_op, left=p_left, left_m1=p_left_m1,
                     rsp=p_rsp, two=p_two, rsp_left=p_rsp_left, wait_tree=p_wait)

    def _engine(self, m, tree, busy, ctl, run, rsp, plan):
        """The engine's state machine: a start copies the plan into the issue loop (or ends
        at once with the plan's error, or loads the seed), a run ends when every command is
        taken, every response written and the tail has passed."""
        ctrl = self.ctrl
        ready, done = ctl.ready, ctl.done
        # While idle the issue loop's registers follow the plan (stable before a start), so a
        # start loads nothing into them: their next values depend on ``busy`` and ``fetch``.
        with m.If(~busy):
            m.d.sync += [run.issue_i.eq(0), run.phase.eq(0), run.left.eq(plan.left[0]),
                         run.left_m1.eq(plan.left_m1[0])]

        with m.FSM(name="engine"):
            with m.State("IDLE"):
                # (not in the cycle after an accept: AP_START falls only then)
                with m.If(ctrl.start & ~ready):
                    m.d.sync += [ready.eq(1), ctl.cycles.eq(0), ctl.rsp_cycles.eq(0),
                                 ctl.error.eq(0), rsp.j.eq(0)]
                    m.d.comb += tree.clear.eq(1)
                    with m.If(plan.fail != 0):
                        m.d.sync += [ctl.error.eq(plan.fail), done.eq(1)]
                    with m.Elif(plan.seed):
                        m.d.sync += busy.eq(1)
                        m.next = "SEED"
                    with m.Else():
                        m.d.sync += [busy.eq(1), run.issuing.eq(1), rsp.none.eq(~plan.rsp),
                                     rsp.left.eq(plan.rsp_left), run.two.eq(plan.two),
                                     run.ph_left_m1.eq(plan.left_m1[1]),
                                     run.wait_tree.eq(plan.wait_tree)]
                        m.d.sync += [d.eq(v) for d, v in zip(run.ph_op + run.ph_left,
                                                             plan.op + plan.left)]
                        m.next = "RUN"
            with m.State("RUN"):
                finished = (~run.issuing & ~run.c_valid & rsp.none & run.tail_zero
                            & ~(run.wait_tree & tree.busy))
                with m.If(finished):
                    m.d.sync += [busy.eq(0), done.eq(1)]
                    m.next = "IDLE"
            with m.State("SEED"):
                with m.If(~tree.busy):
                    m.d.comb += tree.seed_load.eq(1)
                    m.d.sync += [busy.eq(0), done.eq(1)]
                    m.next = "IDLE"
        m.d.comb += tree.seed.eq(self.args.seed)

    def _status(self, m, tree, ctl):
        """STATUS.ERROR, the cycle counters, the tree's flags, root, maximum priority, size
        and write pointer."""
        ctrl, status = self.ctrl, self.status
        root, mx = tree.total, tree.max_priority
        m.d.comb += [
            ctrl.error.eq(ctl.error),
            status.status_empty.eq(tree.empty),
            status.status_saturated.eq(tree.saturated),
            status.status_invalid_index.eq(tree.invalid),
            status.status_tree_busy.eq(tree.busy),
            ctrl.cycles.eq(ctl.cycles),
            status.response_cycles.eq(ctl.rsp_cycles),
            status.total_lo.eq(root[:32]),
            status.total_hi.eq(root[32:] if len(root) > 32 else 0),
            status.max_priority_lo.eq(mx[:32]),
            status.max_priority_hi.eq(mx[32:] if len(mx) > 32 else 0),
            status.size.eq(tree.size),
            status.write_pointer.eq(tree.write_pointer),
        ]


@dataclass(frozen=True)
class _Control:
    """The run control's registers: the ``ready`` and ``done`` pulses, STATUS.ERROR, the
    run's cycles and the cycle of its last response."""
    ready: Signal
    done: Signal
    error: Signal
    cycles: Signal
    rsp_cycles: Signal


@dataclass(frozen=True)
class _Issue:
    """The issue loop's registers: the latched phases (``ph_op``, ``ph_left``; phase 1's
    count - 3), the phase and element being read, whether elements are left and phase 1
    follows, the count left, RESET's wait for the tree, the tail's end and the command
    register's valid bit."""
    ph_op: list
    ph_left: list
    ph_left_m1: Signal
    phase: Signal
    issue_i: Signal
    issuing: Signal
    two: Signal
    left: Signal
    left_m1: Signal
    wait_tree: Signal
    tail_zero: Signal
    c_valid: Signal


@dataclass(frozen=True)
class _Responses:
    """The output entries: expected - 2 - written (``left``), written (``j``), none left."""
    left: Signal
    j: Signal
    none: Signal


@dataclass(frozen=True)
class _Plan:
    """The registered plan of the run a start would launch: error code, SEED, per phase the
    tree operation and count - 2 (- 3), output entries written, two phases, output entries
    - 2, RESET's wait for the tree."""
    fail: Signal
    seed: Signal
    op: list
    left: list
    left_m1: list
    rsp: Signal
    two: Signal
    rsp_left: Signal
    wait_tree: Signal
