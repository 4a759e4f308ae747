"""The trainer's learner side in gateware: a gathered batch into the learner's input regions,
one learner step, and the TD errors ``Q[a] - y`` read back, bit for bit as the words
:func:`sw.learner.layout.pack_matrix` / :func:`~sw.learner.layout.pack_samples` write and
the target :func:`sw.learner.mlp.dqn_targets` computes."""

from amaranth.hdl import Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from sw.learner.layout import mem_addr_bits, region, region_base, sub_words
from sw.learner.spec import learner_register_map
from sw.shell.spec import HOST_READ_LATENCY
from sw.trainer.layout import lane_bytes, record_bytes
from sw.trainer.schedule import adapter_pack_cycles, adapter_readback_cycles
from sw.trainer.spec import TrainerConfig

from ..fixed import rshift_round, saturate
from ..shell.signatures import ArgsSignature, MemoryPortSignature, RunControlSignature

__all__ = ["LearnerAdapter", "learner_step_layout", "element_addr", "region_geometry"]


def learner_step_layout(config: TrainerConfig) -> data.StructLayout:
    """The payload of :attr:`LearnerAdapter.cmd`: ``batch`` (B, 13 bits), ``lr`` (η raw),
    ``gamma`` (the learner's coefficient format) and ``sync`` (this step copies the updated
    weights into the target network: the golden core's ``TargetSync`` decision)."""
    num = config.learner.numerics
    return data.StructLayout({"batch": unsigned(13), "lr": unsigned(num.lr_width),
                              "gamma": unsigned(num.coef_width), "sync": unsigned(1)})


def _log2(n):
    return n.bit_length() - 1


def region_geometry(lc, name):
    """``(base word, host words per memory word, stored column groups)`` of learner region
    ``name`` on the host port."""
    r = region(lc, name)
    return (region_base(lc, name) // (lc.axi_data_width // 8), sub_words(lc, r),
            r.col_groups(lc))


def element_addr(lc, name, b, j):
    """Combinational: host word address and bit offset of element ``(b, j)`` (row, column) of
    matrix region ``name`` of learner ``lc`` (S, G, sub and D are powers of two)."""
    S, w, D = lc.array, lc.numerics.width, lc.axi_data_width
    base, sub, G = region_geometry(lc, name)
    lS = _log2(S)
    block = ((b >> lS) << _log2(G)) | (j >> lS)
    lane = Cat(j[:lS], b[:lS])
    bit = lane * w
    addr = base + (block << _log2(sub)) + (bit >> _log2(D))
    return addr, bit[:_log2(D)]


class LearnerAdapter(wiring.Component):
    """One learner step of the trainer, sequential: pack, run, read back.

    A command (:func:`learner_step_layout`) takes B records (:attr:`rec`, the gather engine's
    records) and B IS weights (:attr:`weight`, the replay side's, in sample order; both
    streams are taken independently, one element per cycle each) and

    1. *pack*: writes every record's ``obs`` and ``next_obs`` elements into the learner's
       ``obs`` and ``next_obs`` regions through its host port, one element per cycle with its
       byte enables (``2·n_in`` cycles per row, the rows of the last row group beyond B as
       zeros, as :func:`~sw.learner.layout.pack_matrix` pads them); keeps action, reward and
       done per sample; then writes the ``samples`` region's words (S cycles to assemble a
       word's lanes with the loss weights, ``sub`` cycles to write its host words);
    2. *run*: starts the learner (B, η, γ, ``sync_target`` = ``sync``, ``sync_period`` 0)
       and waits for its ``done``;
    3. *read back*: reads ``tq[b, 0..n_out-1]`` and ``Q[b, a_b]`` (one host read per cycle,
       pipelined), forms ``y = saturate(r + rshift_round(γ·(1-d)·max tq, coef_width - 1))``
       and ``td = Q[a] - y`` (``act_width + 1`` bits) into a B-entry memory;
    4. *TD*: streams the B TD errors on :attr:`td` (ready respected), then ``done``.

    Without back-pressure (records and weights offered from the command's cycle on, ``td``
    always ready) the command takes :func:`~sw.trainer.schedule.adapter_pack_cycles` +
    learner ``step_cycles`` + :func:`~sw.trainer.schedule.adapter_readback_cycles` cycles
    from its transfer to ``done``.

    Parameters
    ----------
    config : TrainerConfig
        The learner (``array`` S, ``axi_data_width`` D, ``sizes``, numerics: the width w must
        be a multiple of 8 dividing D, so that an element is whole bytes of one host word),
        ``max_batch`` and the record layout of :mod:`sw.trainer.layout`.

    Members
    -------
    cmd : ``In(stream.Signature(learner_step_layout(config)))``
        A step; ``ready`` (combinational from a register) while idle.
    rec : ``In(stream.Signature(8 * record_bytes))``
        The B records, byte j of a record in payload bits 8j..8j+7.
    weight : ``In(stream.Signature(loss_weight_width))``
        The B IS weights (learner ``loss_weight_format``, raw).
    td : ``Out(stream.Signature(signed(act_width + 1)))``
        The B TD errors ``Q[a] - y`` in sample order.
    learner_ctrl : ``Out(RunControlSignature(error_bits=2))``
    learner_args : ``Out(ArgsSignature(learner_register_map(config.learner)))``
    host : ``Out(MemoryPortSignature(...))``
        To :class:`~rtl_gen.learner.core.LearnerCore`'s ``ctrl``, ``args`` and ``host``
        (``wiring.connect``). The host port is used only while the learner is idle.
    busy : ``Out(1)``
        A command runs.
    done : ``Out(1)``
        One cycle, after the last TD error was taken.
    learner_error : ``Out(2)``
        The learner's ``error`` of the last step (sticky until the next command).

    Raises
    ------
    TypeError
        ``config`` is not a :class:`~sw.trainer.spec.TrainerConfig`.
    ValueError
        The learner's width is not a multiple of 8 or does not divide its host port's width.
    """

    def __init__(self, config):
        if not isinstance(config, TrainerConfig):
            raise TypeError(f"config must be a TrainerConfig, not {config!r}")
        lc = config.learner
        w, D = lc.numerics.width, lc.axi_data_width
        if w % 8 or D % w:
            raise ValueError(f"learner width must be a multiple of 8 that divides "
                             f"axi_data_width ({D}), not {w}")
        self._config = config
        host_bits = mem_addr_bits(lc) - (D // 8 - 1).bit_length()
        super().__init__({
            "cmd": In(stream.Signature(learner_step_layout(config))),
            "rec": In(stream.Signature(8 * record_bytes(config))),
            "weight": In(stream.Signature(lc.numerics.loss_weight_format.width)),
            "td": Out(stream.Signature(signed(w + 1))),
            "learner_ctrl": Out(RunControlSignature(error_bits=2)),
            "learner_args": Out(ArgsSignature(learner_register_map(lc))),
            "host": Out(MemoryPortSignature(data_width=D, addr_width=host_bits,
                                            read_latency=HOST_READ_LATENCY)),
            "busy": Out(1), "done": Out(1), "learner_error": Out(2),
        })

    @property
    def config(self) -> TrainerConfig:
        return self._config

    def pack_cycles(self, batch: int) -> int:
        return adapter_pack_cycles(self._config, batch)

    def readback_cycles(self, batch: int) -> int:
        return adapter_readback_cycles(self._config, batch)

    # -----------------------------------------------------------------------------------------
    def _geometry(self, name):
        return region_geometry(self._config.learner, name)

    def _element_addr(self, name, b, j):
        return element_addr(self._config.learner, name, b, j)

    def elaborate(self, platform):
        m = Module()
        cfg, lc = self._config, self._config.learner
        num = lc.numerics
        S, w, D, n_in, n_out = lc.array, num.width, lc.axi_data_width, lc.sizes[0], lc.n_out
        lb = 8 * lane_bytes(cfg)
        ab = lc.action_bits
        lwf = num.loss_weight_format
        maxb = lc.max_batch
        lat = HOST_READ_LATENCY
        cw = num.coef_width
        act = num.act_format

        # -- the command's arguments -------------------------------------------------------
        B = Signal(13)
        lr = Signal(num.lr_width)
        gamma = Signal(cw)
        sync = Signal()
        # SYNC_PERIOD 0 (the trainer decides each sync) from a register: a constant port
        # would be folded into the learner's counter compare (Verilator's UNSIGNED warning)
        period = Signal.like(self.learner_args.sync_period, name="sync_period_zero")
        m.d.sync += period.eq(0)
        m.d.comb += [self.learner_args.batch_size.eq(B), self.learner_args.lr.eq(lr),
                     self.learner_args.gamma.eq(gamma), self.learner_args.sync_target.eq(sync),
                     self.learner_args.sync_period.eq(period)]
        groups = Signal(range(maxb + 1))          # row groups of B
        m.d.comb += groups.eq((B + S - 1) >> _log2(S))

        # -- per-sample memories (combinational reads) -------------------------------------
        m.submodules.act_mem = act_mem = Memory(shape=ab, depth=maxb, init=[])
        m.submodules.rew_mem = rew_mem = Memory(shape=signed(w), depth=maxb, init=[])
        m.submodules.done_mem = done_mem = Memory(shape=1, depth=maxb, init=[])
        m.submodules.wt_mem = wt_mem = Memory(shape=lwf.width, depth=maxb, init=[])
        m.submodules.td_mem = td_mem = Memory(shape=signed(w + 1), depth=maxb, init=[])
        rec_wr = [mem.write_port() for mem in (act_mem, rew_mem, done_mem)]
        wt_wr = wt_mem.write_port()
        td_wr = td_mem.write_port()
        # port 0: the samples words and the read-back's issue; port 1: the read-back's result
        rd0 = [mem.read_port(domain="comb") for mem in (act_mem, rew_mem, done_mem, wt_mem)]
        rd1 = [mem.read_port(domain="comb") for mem in (rew_mem, done_mem)]
        td_rd = td_mem.read_port(domain="comb")

        # -- pack: rows of obs / next_obs, one element per cycle ----------------------------
        row = Signal(range(maxb + S + 1))       # rows loaded (records and padding)
        have = Signal()                          # a row is being written
        cur = Signal(8 * record_bytes(cfg))
        j = Signal(range(2 * n_in))
        wn = Signal(range(maxb + 1))             # weights taken
        last_j = Signal()
        load = Signal()
        pad_rows = Signal(range(maxb + S + 1))
        m.d.comb += [last_j.eq(j == 2 * n_in - 1), pad_rows.eq(groups << _log2(S))]

        # -- samples words ------------------------------------------------------------------
        s_base, s_sub, _ = self._geometry("samples")
        slb = region(lc, "samples").lane_bits
        sword = Signal(S * slb)
        g = Signal(range(maxb + 1))
        i = Signal(range(max(S, s_sub) + 1))

        # -- read-back ----------------------------------------------------------------------
        ib = Signal(range(maxb + 1))             # sample of the next read
        ik = Signal(range(n_out + 1))            # its element (n_out: Q[a])
        tags = [Signal(data.StructLayout({"v": 1, "k": range(n_out + 1),
                                          "b": range(maxb), "off": _log2(D) or 1}),
                       name=f"tag{t}") for t in range(lat)]
        best = Signal(signed(w))
        qa = Signal(signed(w))
        res_v = Signal()
        res_b = Signal(range(maxb))
        res_best = Signal(signed(w))
        res_q = Signal(signed(w))
        tn = Signal(range(maxb + 1))             # TD errors sent

        m.d.comb += [self.busy.eq(~self.cmd.ready)]
        m.d.sync += tags[0].v.eq(0)
        with m.FSM(name="adapter"):
            with m.State("IDLE"):
                m.d.comb += self.cmd.ready.eq(1)
                with m.If(self.cmd.valid):
                    p = self.cmd.payload
                    m.d.sync += [B.eq(p.batch), lr.eq(p.lr), gamma.eq(p.gamma),
                                 sync.eq(p.sync), row.eq(0), have.eq(0), j.eq(0), wn.eq(0),
                                 g.eq(0), i.eq(0), ib.eq(0), ik.eq(0), tn.eq(0),
                                 self.learner_error.eq(0)]
                    m.next = "PACK"
            with m.State("PACK"):
                self._pack(m, B, row, have, cur, j, wn, last_j, load, pad_rows, rec_wr,
                           wt_wr, n_in, lb, ab, w)
                with m.If((row == pad_rows) & ~have & (wn == B)):
                    m.next = "SAMPLES"
            with m.State("SAMPLES"):
                b = Signal(range(maxb + S), name="s_b")
                m.d.comb += [b.eq((g << _log2(S)) | i[:_log2(S)] if S > 1 else g)]
                for port in rd0:
                    m.d.comb += port.addr.eq(b)
                lane = Signal(slb)
                m.d.comb += lane.eq(Mux(b < B, Cat(rd0[1].data[:w], rd0[0].data, rd0[2].data,
                                                   rd0[3].data), 0))
                with m.If(i < S):
                    # lane i of the word: shift in from the top
                    m.d.sync += [sword.eq(Cat(sword[slb:], lane) if S > 1 else lane),
                                 i.eq(i + 1)]
                with m.Else():
                    piece = Signal(range(s_sub), name="s_piece")
                    word = Signal(s_sub * D, name="s_word")
                    m.d.comb += [piece.eq(i - S), word.eq(sword),
                                 self.host.addr.eq(s_base + (g << _log2(s_sub)) + piece),
                                 self.host.we.eq((1 << (D // 8)) - 1),
                                 self.host.wdata.eq(word.word_select(piece, D))]
                    with m.If(piece == s_sub - 1):
                        m.d.sync += [i.eq(0), g.eq(g + 1)]
                        with m.If(g + 1 == groups):
                            m.next = "START"
                    with m.Else():
                        m.d.sync += i.eq(i + 1)
            with m.State("START"):
                m.d.comb += self.learner_ctrl.start.eq(1)
                m.next = "RUN"
            with m.State("RUN"):
                with m.If(self.learner_ctrl.done):
                    m.d.sync += self.learner_error.eq(self.learner_ctrl.error)
                    m.next = "READ"
            with m.State("READ"):
                self._issue(m, ib, ik, B, rd0, tags[0], n_out)
                with m.If(td_wr.en & (td_wr.addr == B - 1)):
                    m.next = "TD"
            with m.State("TD"):
                m.d.comb += [td_rd.addr.eq(tn), self.td.valid.eq(1),
                             self.td.payload.eq(td_rd.data)]
                with m.If(self.td.ready):
                    m.d.sync += tn.eq(tn + 1)
                    with m.If(tn == B - 1):
                        m.d.comb += self.done.eq(1)
                        m.next = "IDLE"

        # -- read-back pipeline: tags follow the reads, results into td_mem -----------------
        m.d.sync += [tags[t + 1].eq(tags[t]) for t in range(lat - 1)]
        tl = tags[-1]
        val = Signal(signed(w))
        m.d.comb += val.eq(self.host.rdata.bit_select(tl.off, w))
        with m.If(tl.v):
            with m.If(tl.k == 0):
                m.d.sync += best.eq(val)
            with m.Elif(tl.k < n_out):
                m.d.sync += best.eq(Mux(val > best, val, best))
        m.d.sync += [res_v.eq(tl.v & (tl.k == n_out)), res_b.eq(tl.b), res_best.eq(best),
                     res_q.eq(val)]
        # the result stage: y and Q[a] - y
        for port in rd1:
            m.d.comb += port.addr.eq(res_b)
        prod = Signal(signed(w + cw + 1))
        m.d.comb += prod.eq(Mux(rd1[1].data, 0, res_best * gamma))
        disc = rshift_round(prod, cw - 1, act.rounding)
        ysum = Signal(signed(max(w, len(disc)) + 1))
        m.d.comb += ysum.eq(rd1[0].data + disc)
        y, _ = saturate(m, ysum, act, name="y")
        m.d.comb += [td_wr.en.eq(res_v), td_wr.addr.eq(res_b), td_wr.data.eq(res_q - y)]
        return m

    def _pack(self, m, B, row, have, cur, j, wn, last_j, load, pad_rows, rec_wr, wt_wr,
              n_in, lb, ab, w):
        lc = self._config.learner
        D = lc.axi_data_width
        # a new row when none is being written or this is its last element
        free = ~have | last_j
        more = row < pad_rows
        real = row < B
        m.d.comb += [self.rec.ready.eq(free & more & real),
                     load.eq(free & more & (~real | self.rec.valid))]
        with m.If(have):
            m.d.sync += j.eq(Mux(last_j, 0, j + 1))
        with m.If(load):
            m.d.sync += [have.eq(1), row.eq(row + 1),
                         cur.eq(Mux(real, self.rec.payload, 0))]
        with m.Elif(last_j):
            m.d.sync += have.eq(0)
        code = self.rec.payload.word_select(2 * n_in + 1, lb)
        m.d.comb += [
            *(p.addr.eq(row) for p in rec_wr),
            *(p.en.eq(self.rec.valid & self.rec.ready) for p in rec_wr),
            rec_wr[0].data.eq(code[:ab]),
            rec_wr[1].data.eq(self.rec.payload.word_select(2 * n_in, lb)[:w]),
            rec_wr[2].data.eq(code[lb - 1]),
        ]
        m.d.comb += [self.weight.ready.eq(wn < B), wt_wr.addr.eq(wn),
                     wt_wr.data.eq(self.weight.payload),
                     wt_wr.en.eq(self.weight.valid & self.weight.ready)]
        with m.If(self.weight.valid & self.weight.ready):
            m.d.sync += wn.eq(wn + 1)
        # the element write: row - 1 is the row in cur
        rb = Signal.like(row)
        m.d.comb += rb.eq(row - 1)
        col = Signal(range(n_in))
        nxt = Signal()
        m.d.comb += [nxt.eq(j >= n_in), col.eq(Mux(nxt, j - n_in, j))]
        a0, o0 = self._element_addr("obs", rb, col)
        a1, o1 = self._element_addr("next_obs", rb, col)
        off = Signal(range(D))
        m.d.comb += off.eq(Mux(nxt, o1, o0))
        with m.If(have):
            m.d.comb += [self.host.addr.eq(Mux(nxt, a1, a0)),
                         self.host.we.eq(((1 << (w // 8)) - 1) << (off >> 3)),
                         self.host.wdata.eq(
                             cur.word_select(j, lb)[:w] << off)]

    def _issue(self, m, ib, ik, B, rd0, tag, n_out):
        """The read-back's reads: tq[b, 0..n_out-1] then Q[b, a_b], one per cycle."""
        for port in rd0:
            m.d.comb += port.addr.eq(ib)
        going = ib < B
        aq, oq = self._element_addr("q", ib, rd0[0].data)
        at, ot = self._element_addr("tq", ib, ik)
        isq = ik == n_out
        with m.If(going):
            m.d.comb += [self.host.addr.eq(Mux(isq, aq, at)), self.host.re.eq(1)]
            m.d.sync += [tag.v.eq(1), tag.k.eq(ik), tag.b.eq(ib), tag.off.eq(Mux(isq, oq, ot))]
            with m.If(isq):
                m.d.sync += [ik.eq(0), ib.eq(ib + 1)]
            with m.Else():
                m.d.sync += ik.eq(ik + 1)
