"""The GAE accelerator core's run control (:class:`~rtl_gen.gae.core.GaeCore`): the run
arguments latched at start and checked, the group count, and the read sequence the datapath
follows."""

from dataclasses import dataclass

from amaranth.hdl import Mux, Signal, Value, signed, unsigned

from sw.gae.spec import GAE_CORE_ARGS, GAE_CORE_ERRORS, MAX_RUN_TRAJECTORIES

__all__ = ["RunSequence", "run_sequencer"]


def run_sequencer(m, core):
    """Run control of ``core`` (a :class:`~rtl_gen.gae.core.GaeCore`: its ``ctrl`` and
    ``args``): the arguments latched at start, their checks (STATUS.ERROR), the group count,
    and the read sequence (bootstrap row, then rows T-1 .. 0, L words per row, group after
    group), then the drain. Returns a :class:`RunSequence`."""
    cfg = core.config
    ctrl = core.ctrl
    pe_cfg = cfg.pe
    N = cfg.n_pe
    L = pe_cfg.k if pe_cfg.mode == "interleaved" else 1
    depth, ab = cfg.depth, cfg.addr_bits
    args = GAE_CORE_ARGS(cfg)

    # -- run arguments, latched at start --------------------------------------------------
    a = {name: Signal(signed(w) if s else unsigned(w), name=f"arg_{name}")
         for name, (w, s) in args.items()}
    T = Signal(ab + 1)          # time steps
    G = Signal(13)              # groups of n_pe trajectories
    rem = Signal(signed(14))    # trajectories left while dividing; then lanes of last group
    rows = Signal(ab + 2)       # (T + 1) * G accumulated during the division
    last_lanes = Signal(range(N + 1))
    # Registers one step ahead of the arithmetic the control needs (short paths).
    T_minus_1, T_plus_1 = Signal(ab + 1), Signal(ab + 2)
    G_minus_1 = Signal(13)
    nxt_rows = Signal(ab + 2)   # rows + T + 1
    room = Signal(signed(34))   # depth - nxt_rows
    G_minus_L = Signal(signed(15))
    last_group = Signal()

    busy = Signal()
    err = Signal(3)
    cycles = Signal(32)
    m.d.comb += [ctrl.busy.eq(busy), ctrl.error.eq(err),
                 ctrl.cycles.eq(cycles)]
    with m.If(busy):
        m.d.sync += cycles.eq(cycles + 1)

    # -- read sequencing -------------------------------------------------------------------
    row_base = Signal(ab + 2)    # t * G
    grp_base = Signal(14)        # first group of the current super-group
    lane = Signal(range(max(L, 2)))
    t = Signal(ab + 1)
    t_zero = Signal()            # t == 0, a register (the row loop's end off the compare)
    boot = Signal()              # reading bootstrap rows
    issue = Signal()             # a read is issued this cycle
    drain = Signal(range(-1, core.drain))  # the drain's cycles left - 1: its sign ends it
    # The PEs register the coefficients and compute powers of gamma*lambda
    # (pe.coef_settle cycles); the first element must not need them before
    # (GaeCoreConfig.coef_wait).
    settle_init = cfg.coef_wait
    settle = Signal(range(settle_init + 2))
    with m.If(settle != 0):
        m.d.sync += settle.eq(settle - 1)
    one = 1 << pe_cfg.coef_frac

    m.d.sync += [ctrl.ready.eq(0), ctrl.done.eq(0)]
    rd_addr = Signal(ab + 2)
    m.d.comb += rd_addr.eq(row_base + grp_base + lane)
    args_in = core.args
    # The refusal checks of the arguments, registered: the arguments must be stable from
    # the cycle before ``start`` (the AXI4-Lite registers are: AP_START is a later write).
    chk = {name: Signal(name=f"chk_{name}") for name in
           ("no_timesteps", "no_trajectories", "capacity", "coefficient")}
    m.d.sync += [
        chk["no_timesteps"].eq(args_in.num_timesteps == 0),
        chk["no_trajectories"].eq(args_in.num_trajectories == 0),
        chk["capacity"].eq((args_in.num_timesteps >= depth)
                           | (args_in.num_trajectories > MAX_RUN_TRAJECTORIES)),
        chk["coefficient"].eq((args_in.gamma > one) | (args_in.gamma_lambda > one)),
    ]

    with m.FSM(name="ctrl"):
        with m.State("IDLE"):
            with m.If(ctrl.start):
                m.d.sync += [ctrl.ready.eq(1), cycles.eq(0), err.eq(0),
                             settle.eq(settle_init)]
                for name, sig in a.items():
                    m.d.sync += sig.eq(getattr(args_in, name))
                m.d.sync += [
                    T.eq(args_in.num_timesteps),
                    T_minus_1.eq(args_in.num_timesteps - 1),
                    T_plus_1.eq(args_in.num_timesteps + 1),
                    nxt_rows.eq(args_in.num_timesteps + 1),
                    room.eq(depth - 1 - args_in.num_timesteps),
                    rem.eq(args_in.num_trajectories), G.eq(0), rows.eq(0),
                ]
                with m.If(chk["no_timesteps"]):
                    m.d.sync += [err.eq(GAE_CORE_ERRORS["no_timesteps"]),
                                 ctrl.done.eq(1)]
                with m.Elif(chk["no_trajectories"]):
                    m.d.sync += [err.eq(GAE_CORE_ERRORS["no_trajectories"]),
                                 ctrl.done.eq(1)]
                with m.Elif(chk["capacity"]):
                    m.d.sync += [err.eq(GAE_CORE_ERRORS["capacity"]), ctrl.done.eq(1)]
                with m.Elif(chk["coefficient"]):
                    m.d.sync += [err.eq(GAE_CORE_ERRORS["coefficient"]),
                                 ctrl.done.eq(1)]
                with m.Else():
                    m.d.sync += busy.eq(1)
                    m.next = "SETUP"
        with m.State("SETUP"):
            # One group per cycle: G += 1, rem -= N, rows += T + 1 (nxt_rows = rows + T + 1
            # is a register, one step ahead; room = depth - nxt_rows, negative: too many).
            with m.If(room[-1]):
                m.d.sync += [err.eq(GAE_CORE_ERRORS["capacity"]), busy.eq(0),
                             ctrl.done.eq(1)]
                m.next = "IDLE"
            with m.Else():
                m.d.sync += [G.eq(G + 1), G_minus_1.eq(G), G_minus_L.eq(G + 1 - L),
                             rem.eq(rem - N), rows.eq(nxt_rows),
                             nxt_rows.eq(nxt_rows + T_plus_1), room.eq(room - T_plus_1)]
                with m.If(rem <= N):
                    m.d.sync += last_lanes.eq(rem)
                    m.next = "START_GROUPS"
        with m.State("START_GROUPS"):
            # rows = (T + 1) * G, so T * G = rows - G: the bootstrap row.
            m.d.sync += [row_base.eq(rows - G), grp_base.eq(0), lane.eq(0), boot.eq(1),
                         t.eq(T), t_zero.eq(0)]      # T >= 1 (0 is refused)
            with m.If(settle == 0):
                m.next = "READ"
        with m.State("READ"):
            # Row by row: the bootstrap row T, then rows T-1 .. 0; L words per row.
            m.d.comb += issue.eq(1)
            with m.If(lane == L - 1):
                m.d.sync += lane.eq(0)
                with m.If(boot):
                    m.d.sync += [boot.eq(0), t.eq(t - 1), t_zero.eq(t == 1),
                                 row_base.eq(row_base - G)]
                with m.Elif(t_zero):
                    with m.If(last_group):
                        m.d.sync += drain.eq(core.drain - 1)
                        m.next = "DRAIN"
                    with m.Else():
                        m.d.sync += [grp_base.eq(grp_base + L), row_base.eq(rows - G),
                                     t.eq(T), t_zero.eq(0), boot.eq(1)]
                with m.Else():
                    m.d.sync += [t.eq(t - 1), t_zero.eq(t == 1),
                                 row_base.eq(row_base - G)]
            with m.Else():
                m.d.sync += lane.eq(lane + 1)
        with m.State("DRAIN"):
            m.d.sync += drain.eq(drain - 1)
            with m.If(drain[-1]):
                m.d.sync += [busy.eq(0), ctrl.done.eq(1)]
                m.next = "IDLE"

    # The super-group being read is the run's last. A register: grp_base and G change at
    # least two cycles before it is read (at the end of a super-group, T >= 1).
    m.d.sync += last_group.eq(grp_base >= G_minus_L)
    # The group read this cycle; the lanes of it that hold real trajectories follow from it
    # a register later (nvalid_of).
    grp = Signal(14)
    m.d.comb += grp.eq(grp_base + lane)

    def nvalid_of(g):
        return Mux(g < G_minus_1, N, Mux(g == G_minus_1, last_lanes, 0))

    first = ~boot & (t == T_minus_1)
    return RunSequence(args=a, busy=busy, issue=issue, rd_addr=rd_addr, lane=lane, boot=boot,
                       first=first, grp=grp, nvalid_of=nvalid_of)


@dataclass(frozen=True)
class RunSequence:
    """What :func:`run_sequencer` gives the datapath: the latched arguments, ``busy``,
    the read of this cycle (``issue``, ``rd_addr``, ``lane``, ``boot``, ``first``: row T-1,
    ``grp``: its group), and ``nvalid_of(grp)``, the lanes of a group holding trajectories
    (combinational, from a registered ``grp``)."""
    args: dict
    busy: Signal
    issue: Signal
    rd_addr: Signal
    lane: Signal
    boot: Signal
    first: Value
    grp: Signal
    nvalid_of: object
