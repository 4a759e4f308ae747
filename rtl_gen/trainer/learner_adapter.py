"""The trainer's learner side in gateware: a gathered batch into the learner's input regions,
one learner step, and the TD errors ``Q[a] - y`` read back, bit for bit as the words
:func:`sw.learner.layout.pack_matrix` / :func:`~sw.learner.layout.pack_samples` write and
the target :func:`sw.learner.mlp.dqn_targets` computes."""

from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from sw.learner.layout import mem_addr_bits, region
from sw.learner.spec import learner_register_map
from sw.shell.spec import HOST_READ_LATENCY
from sw.trainer.layout import lane_bytes, record_bytes
from sw.trainer.schedule import (HOST_OUT_STAGES, adapter_max_levels, adapter_pack_cycles,
                                 adapter_readback_cycles, adapter_readback_reads,
                                 adapter_row_chunks, adapter_row_cycles, adapter_row_elements)
from sw.trainer.spec import TrainerConfig

from ..fixed import rshift_round, saturate_staged
from ..shell.signatures import ArgsSignature, MemoryPortSignature, RunControlSignature
from .learner_port import element_addr, region_geometry, registered_host

__all__ = ["LearnerAdapter", "learner_step_layout", "element_addr", "region_geometry",
           "registered_host"]


def learner_step_layout(config: TrainerConfig) -> data.StructLayout:
    """The payload of :attr:`LearnerAdapter.cmd`: ``batch`` (B, 13 bits), ``lr`` (η raw),
    ``gamma`` (the learner's coefficient format) and ``sync`` (this step copies the updated
    weights into the target network: the golden core's ``TargetSync`` decision)."""
    num = config.learner.numerics
    return data.StructLayout({"batch": unsigned(13), "lr": unsigned(num.lr_width),
                              "gamma": unsigned(num.coef_width), "sync": unsigned(1)})


def _log2(n):
    return n.bit_length() - 1


class LearnerAdapter(wiring.Component):
    """One learner step of the trainer, sequential: pack, run, read back.

    A command (:func:`learner_step_layout`) takes B records (:attr:`rec`, the gather engine's
    records) and B IS weights (:attr:`weight`, the replay side's, in sample order; both
    streams are taken independently, one element per cycle each) and

    1. *pack*: writes every record's ``obs`` and ``next_obs`` rows into the learner's
       ``obs`` and ``next_obs`` regions through its host port, the elements a host word holds
       in one write with their byte enables (``c`` writes per row and region,
       :func:`~sw.trainer.schedule.adapter_row_chunks`; a row takes
       :func:`~sw.trainer.schedule.adapter_row_cycles` cycles, the rows of the last row group
       beyond B as zeros, as :func:`~sw.learner.layout.pack_matrix` pads them); keeps action,
       reward and done per sample; then writes the ``samples`` region's words (S cycles to
       assemble a word's lanes with the loss weights, ``sub`` cycles to write its host words);
    2. *run*: starts the learner (B, η, γ, ``sync_target`` = ``sync``, ``sync_period`` 0)
       and waits for its ``done``;
    3. *read back*: reads the words of ``tq[b, 0..n_out-1]`` (the maximum over each word's
       lanes in :func:`~sw.trainer.schedule.adapter_max_levels` register stages) and the word
       of ``Q[b, a_b]`` (one host read per cycle,
       pipelined), forms ``y = saturate(r + rshift_round(γ·(1-d)·max tq, coef_width - 1))``
       and ``td = Q[a] - y`` (``act_width + 1`` bits) into a B-entry memory, in register
       stages (:data:`~sw.trainer.schedule.ADAPTER_READBACK_STAGES`: no more than one carry
       chain or the DSP between two registers);
    4. *TD*: streams the TD errors on :attr:`td` from an output register as they are
       written, during the read-back (ready respected), then ``done``.

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
        (``wiring.connect``). The host port is used only while the learner is idle; its
        outputs are registers (:func:`registered_host`), all zero between accesses.
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
        hp = registered_host(m, self.host, "hp")
        cmd = self._arguments(m)
        mem = self._memories(m)
        pk = self._pack_registers(m)
        smp = self._samples_registers()
        rb = self._readback_registers(m)
        with m.FSM(name="adapter"):
            self._idle_state(m, cmd, pk, smp, rb)
            with m.State("PACK"):
                with m.If(~pk.more & ~pk.have & ~pk.wt_open):
                    m.next = "SAMPLES"
            self._samples_state(m, hp, cmd, mem, smp)
            self._run_states(m, rb)
            with m.State("READ"):
                for port in mem.rd0:
                    m.d.comb += port.addr.eq(rb.ib)
                # the action registered from sample ib's row at least one cycle before its
                # Q[a] read
                m.d.sync += rb.act_cur.eq(mem.rd0[0].data)
                with m.If(self.td.valid & self.td.ready & rb.out_last):
                    m.next = "IDLE"
        # outside the FSM: the streams' handshakes, the rows, the read-back's issue and the
        # TD output start at their own registers (rec_open, wt_open, more and have, rd_open,
        # out_v and td_avail), which are high only in PACK or READ, not at a decode of the
        # state
        self._intake(m, cmd, mem, pk)
        self._pack(m, hp, cmd, mem, pk)
        self._issue(m, hp, cmd, rb)
        self._td_output(m, cmd, mem, rb)
        vt, val = self._readback_max(m, rb)
        self._readback_results(m, cmd, mem, rb, vt, val)
        return m

    # Each step below adds its logic to ``m`` and returns what later steps use; the order of
    # the calls in :meth:`elaborate` is the order of the statements in the netlist.
    def _arguments(self, m):
        """The command's arguments to the learner, latched with the command, and the last
        sample, group and row of the batch (:class:`_Command`)."""
        cfg, lc = self._config, self._config.learner
        num = lc.numerics
        S, maxb, cw = lc.array, lc.max_batch, num.coef_width
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
        # latched with the command, so that no comparison against B sits on a data path
        last_b = Signal(range(maxb))              # B - 1
        last_g = Signal(range(maxb))              # groups - 1
        last_row = Signal(range(maxb + S))        # the last row of the last group
        return _Command(B=B, lr=lr, gamma=gamma, sync=sync, last_b=last_b, last_g=last_g,
                        last_row=last_row)

    def _memories(self, m):
        """The per-sample memories (combinational reads): action, reward, done, IS weight,
        TD error, the records' obs and next_obs lanes; their ports (:class:`_Memories`)."""
        lc = self._config.learner
        w, n_in = lc.numerics.width, lc.sizes[0]
        lb = 8 * lane_bytes(self._config)
        ab = lc.action_bits
        lwf = lc.numerics.loss_weight_format
        maxb = lc.max_batch
        m.submodules.act_mem = act_mem = Memory(shape=ab, depth=maxb, init=[])
        m.submodules.rew_mem = rew_mem = Memory(shape=signed(w), depth=maxb, init=[])
        m.submodules.done_mem = done_mem = Memory(shape=1, depth=maxb, init=[])
        m.submodules.wt_mem = wt_mem = Memory(shape=lwf.width, depth=maxb, init=[])
        m.submodules.td_mem = td_mem = Memory(shape=signed(w + 1), depth=maxb, init=[])
        # the records' obs and next_obs lanes, written as they arrive (the gather is never
        # held up by the rows' writes), read by the row being loaded
        m.submodules.obs_mem = obs_mem = Memory(shape=2 * n_in * lb, depth=maxb, init=[])
        rec_wr = [mem.write_port() for mem in (act_mem, rew_mem, done_mem, obs_mem)]
        obs_rd = obs_mem.read_port(domain="comb")
        wt_wr = wt_mem.write_port()
        td_wr = td_mem.write_port()
        # port 0: the samples words and the read-back's issue; port 1: the read-back's result
        rd0 = [mem.read_port(domain="comb") for mem in (act_mem, rew_mem, done_mem, wt_mem)]
        rd1 = [mem.read_port(domain="comb") for mem in (rew_mem, done_mem)]
        td_rd = td_mem.read_port(domain="comb")
        return _Memories(rec_wr=rec_wr, obs_rd=obs_rd, wt_wr=wt_wr, td_wr=td_wr, rd0=rd0,
                         rd1=rd1, td_rd=td_rd)

    def _pack_registers(self, m):
        """The pack's registers: rows of obs / next_obs, a host word per write; records and
        weights taken (:class:`_Pack`)."""
        cfg, lc = self._config, self._config.learner
        S, n_in, maxb = lc.array, lc.sizes[0], lc.max_batch
        lb = 8 * lane_bytes(cfg)
        row = Signal(range(maxb + S + 1))       # rows loaded (records and padding)
        have = Signal()                          # a row is being written
        wrow = Signal(range(maxb + 1))           # records received
        rec_open = Signal()                      # records still to receive
        got = Signal()                           # a record is taken
        rec_in = Signal()                        # row != wrow, registered: row's record is in
        row1 = Signal(range(maxb + S + 2))       # row + 1
        cur = Signal(2 * n_in * lb)
        row_cycles = adapter_row_cycles(cfg)
        j = Signal(range(row_cycles))
        wn = Signal(range(maxb + 1))             # weights taken
        last_j = Signal()
        load = Signal()
        real = Signal()                          # row < B (a record row comes next)
        more = Signal()                          # row < the padded rows
        wt_open = Signal()                       # weights still to take
        m.d.comb += last_j.eq(j == row_cycles - 1)
        return _Pack(row=row, have=have, wrow=wrow, rec_open=rec_open, got=got, rec_in=rec_in,
                     row1=row1, cur=cur, j=j, wn=wn, last_j=last_j, load=load, real=real,
                     more=more, wt_open=wt_open)

    def _samples_registers(self):
        """The samples words' registers: the word being assembled, its group and lane or
        host word (``(sword, g, i)``)."""
        lc = self._config.learner
        S, maxb = lc.array, lc.max_batch
        _, s_sub, _ = self._geometry("samples")
        slb = region(lc, "samples").lane_bits
        sword = Signal(S * slb)
        g = Signal(range(maxb + 1))
        i = Signal(range(max(S, s_sub) + 1))
        return sword, g, i

    def _readback_registers(self, m):
        """The read-back's registers: the next read, the tags that follow the reads, the
        running maximum, the TD errors written and the TD output register; ``busy`` and
        ``td`` (:class:`_ReadBack`)."""
        cfg, lc = self._config, self._config.learner
        w, D, maxb, ab = lc.numerics.width, lc.axi_data_width, lc.max_batch, lc.action_bits
        lat = HOST_READ_LATENCY + HOST_OUT_STAGES
        ib = Signal(range(maxb + 1))             # sample of the next read
        co = adapter_readback_reads(cfg) - 1      # tq words per sample
        ik = Signal(range(co + 1))               # its word (co: Q[a])
        rd_open = Signal()                       # ib < B
        act_cur = Signal(ab)                     # the action of sample ib, registered
        tags = [Signal(data.StructLayout({"v": 1, "k": range(co + 1),
                                          "b": range(maxb), "off": _log2(D) or 1}),
                       name=f"tag{t}") for t in range(lat)]
        best = Signal(signed(w))
        rn = Signal(range(maxb))                 # the next TD error to load
        rn_end = Signal()                        # all B loaded
        td_n = Signal(range(maxb + 1))           # TD errors written
        td_we = Signal()                         # one is written this cycle
        avail = Signal(name="td_avail")          # rn != td_n, registered
        rn1 = Signal(range(maxb + 1), name="td_rn1")    # rn + 1, without a wrap
        out_v = Signal()                         # the TD output register
        out_last = Signal()
        out_d = Signal(signed(w + 1))

        m.d.comb += [self.busy.eq(~self.cmd.ready), self.td.valid.eq(out_v),
                     self.td.payload.eq(out_d)]
        m.d.sync += tags[0].v.eq(0)
        return _ReadBack(co=co, ib=ib, ik=ik, rd_open=rd_open, act_cur=act_cur, tags=tags,
                         best=best, rn=rn, rn_end=rn_end, td_n=td_n, td_we=td_we,
                         avail=avail, rn1=rn1, out_v=out_v, out_last=out_last, out_d=out_d)

    def _idle_state(self, m, cmd, pk, smp, rb):
        """State IDLE: a command's transfer, its arguments latched and every counter of the
        step reset."""
        S = self._config.learner.array
        g, i = smp[1:]
        with m.State("IDLE"):
            m.d.comb += self.cmd.ready.eq(1)
            with m.If(self.cmd.valid):
                p = self.cmd.payload
                b1 = p.batch - 1            # rows up to B rounded up to S: (B-1) | (S-1)
                m.d.sync += [cmd.B.eq(p.batch), cmd.lr.eq(p.lr), cmd.gamma.eq(p.gamma),
                             cmd.sync.eq(p.sync), pk.row.eq(0), pk.have.eq(0), pk.j.eq(0),
                             pk.wn.eq(0), pk.wrow.eq(0), pk.rec_open.eq(1), pk.rec_in.eq(0),
                             pk.row1.eq(1), g.eq(0), i.eq(0), rb.ib.eq(0), rb.ik.eq(0),
                             rb.rn.eq(0),
                             rb.rn_end.eq(0), rb.td_n.eq(0), rb.avail.eq(0), rb.rn1.eq(1),
                             rb.out_v.eq(0), pk.real.eq(1), pk.more.eq(1),
                             pk.wt_open.eq(1), cmd.last_g.eq(b1 >> _log2(S)),
                             cmd.last_b.eq(b1), cmd.last_row.eq(b1 | (S - 1)),
                             self.learner_error.eq(0)]
                m.next = "PACK"

    def _samples_state(self, m, hp, cmd, mem, smp):
        """State SAMPLES: the ``samples`` region's words, S cycles to assemble a word's lanes
        (action, reward, done, IS weight), ``sub`` cycles to write its host words."""
        lc = self._config.learner
        S, w, D, maxb = lc.array, lc.numerics.width, lc.axi_data_width, lc.max_batch
        s_base, s_sub, _ = self._geometry("samples")
        slb = region(lc, "samples").lane_bits
        sword, g, i = smp
        rd0 = mem.rd0
        with m.State("SAMPLES"):
            b = Signal(range(maxb + S), name="s_b")
            m.d.comb += [b.eq((g << _log2(S)) | i[:_log2(S)] if S > 1 else g)]
            for port in rd0:
                m.d.comb += port.addr.eq(b)
            lane = Signal(slb)
            m.d.comb += lane.eq(Mux(b <= cmd.last_b, Cat(rd0[1].data[:w], rd0[0].data,
                                                         rd0[2].data, rd0[3].data), 0))
            with m.If(i < S):
                # lane i of the word: shift in from the top
                m.d.sync += [sword.eq(Cat(sword[slb:], lane) if S > 1 else lane),
                             i.eq(i + 1)]
            with m.Else():
                piece = Signal(range(s_sub), name="s_piece")
                word = Signal(s_sub * D, name="s_word")
                m.d.comb += [piece.eq(i - S), word.eq(sword),
                             hp["addr"].eq(s_base + (g << _log2(s_sub)) + piece),
                             hp["we"].eq((1 << (D // 8)) - 1),
                             hp["wdata"].eq(word.word_select(piece, D))]
                with m.If(piece == s_sub - 1):
                    m.d.sync += [i.eq(0), g.eq(g + 1)]
                    with m.If(g == cmd.last_g):
                        m.next = "FLUSH"
                with m.Else():
                    m.d.sync += i.eq(i + 1)

    def _run_states(self, m, rb):
        """States FLUSH (the last samples write leaves the host port's register), START and
        RUN: the learner's step, its error kept; the read-back's reads open with READ."""
        with m.State("FLUSH"):
            # the last samples write leaves the host port's output register
            m.next = "START"
        with m.State("START"):
            m.d.comb += self.learner_ctrl.start.eq(1)
            m.next = "RUN"
        with m.State("RUN"):
            with m.If(self.learner_ctrl.done):
                m.d.sync += [self.learner_error.eq(self.learner_ctrl.error),
                             rb.rd_open.eq(1)]
                m.next = "READ"

    def _td_output(self, m, cmd, mem, rb):
        """The TD errors through one output register as they are written (in READ: the
        first is written there), then ``done`` after the last one is taken."""
        td_rd, rn, rn_end, out_v = mem.td_rd, rb.rn, rb.rn_end, rb.out_v
        # the TD errors through one output register as they are written (td_mem's
        # LUT RAM read ends in a flip-flop, not in the replay side's power unit)
        take = self.td.valid & self.td.ready
        load = Signal(name="td_load")
        m.d.comb += [td_rd.addr.eq(rn), load.eq((~out_v | self.td.ready) & ~rn_end & rb.avail)]
        with m.If(load):
            m.d.sync += [out_v.eq(1), rb.out_d.eq(td_rd.data),
                         rb.out_last.eq(rn == cmd.last_b), rn.eq(rn + 1),
                         rb.rn1.eq(rb.rn1 + 1), rn_end.eq(rn == cmd.last_b)]
        with m.Elif(take):
            m.d.sync += out_v.eq(0)
        # rn != td_n kept in a register (rn never passes td_n): the load's enable is not a
        # compare of two counters
        with m.If(rb.td_we & ~load):
            m.d.sync += rb.avail.eq(1)
        with m.Elif(load & ~rb.td_we):
            m.d.sync += rb.avail.eq(rb.rn1 != rb.td_n)
        with m.If(take & rb.out_last):
            m.d.comb += self.done.eq(1)

    def _readback_max(self, m, rb):
        """Read-back stage V, the element out of the returned word, and the maximum over a
        tq word's lanes (one register stage per level) into the running maximum ``best``.
        Returns ``(tag, Q[a] or element)`` of the last stage."""
        cfg, lc = self._config, self._config.learner
        w, D, n_out = lc.numerics.width, lc.axi_data_width, lc.n_out
        lat = HOST_READ_LATENCY + HOST_OUT_STAGES
        tags, co, best = rb.tags, rb.co, rb.best
        # -- read-back pipeline: tags follow the reads, results into td_mem -----------------
        # V: the element out of the returned word; R1: max tq (0 if done), Q[a], r;
        # R2: γ·max tq (a DSP between registers); R3: its rounding; R4: + r; R5: the
        # saturation's range checks, then y and Q[a] - y into td_mem
        # (ADAPTER_READBACK_STAGES in sw.trainer.schedule)
        m.d.sync += [tags[t + 1].eq(tags[t]) for t in range(lat - 1)]
        tl = tags[-1]
        vt = Signal.like(tl, name="val_tag")
        val = Signal(signed(w))
        E = adapter_row_elements(cfg)
        ew = E * w
        chunk = Signal(ew, name="val_word")       # the tq word's E lanes
        m.d.sync += [vt.eq(tl), val.eq(self.host.rdata.bit_select(tl.off, w)),
                     chunk.eq(self.host.rdata if ew == D else
                              self.host.rdata.word_select(tl.off[_log2(ew):], ew))]
        # the maximum over the word's valid lanes, one register stage per level (a lane
        # beyond n_out in the last word repeats lane 0)
        lanes = []
        for ln in range(min(n_out, E)):
            x = chunk.word_select(ln, w).as_signed()
            if (co - 1) * E + ln >= n_out:
                x = Mux(vt.k == co - 1, chunk[:w].as_signed(), x)
            lanes.append(x)
        for lvl in range(adapter_max_levels(cfg)):
            nxt_lanes = []
            for p in range(0, len(lanes), 2):
                r_ = Signal(signed(w), name=f"max{lvl}_{p // 2}")
                pair = lanes[p:p + 2]
                m.d.sync += r_.eq(pair[0] if len(pair) == 1 else
                                  Mux(pair[1] > pair[0], pair[1], pair[0]))
                nxt_lanes.append(r_)
            lanes = nxt_lanes
            vt_n = Signal.like(vt, name=f"max{lvl}_tag")
            val_n = Signal(signed(w), name=f"max{lvl}_val")
            m.d.sync += [vt_n.eq(vt), val_n.eq(val)]
            vt, val = vt_n, val_n
        cmax = lanes[0]
        with m.If(vt.v):
            with m.If(vt.k == 0):
                m.d.sync += best.eq(cmax)
            with m.Elif(vt.k < co):
                m.d.sync += best.eq(Mux(cmax > best, cmax, best))
        return vt, val

    def _readback_results(self, m, cmd, mem, rb, vt, val):
        """Read-back stages R1 to R5: ``y = saturate(r + rshift_round(γ·(1-d)·max tq))`` and
        ``Q[a] - y`` into td_mem."""
        lc = self._config.learner
        num = lc.numerics
        w, maxb, cw, act = num.width, lc.max_batch, num.coef_width, num.act_format
        rd1, td_wr, td_n = mem.rd1, mem.td_wr, rb.td_n
        for port in rd1:
            m.d.comb += port.addr.eq(vt.b)
        nst = 5
        pv = [Signal(name=f"res_v{s}") for s in range(nst)]
        pb = [Signal(range(maxb), name=f"res_b{s}") for s in range(nst)]
        pq = [Signal(signed(w), name=f"res_q{s}") for s in range(nst)]
        pr = [Signal(signed(w), name=f"res_r{s}") for s in range(3)]
        m.d.sync += [pv[0].eq(vt.v & (vt.k == rb.co)), pb[0].eq(vt.b), pq[0].eq(val),
                     pr[0].eq(rd1[0].data)]
        m.d.sync += [x[s + 1].eq(x[s]) for x in (pv, pb, pq) for s in range(nst - 1)]
        m.d.sync += [pr[s + 1].eq(pr[s]) for s in range(2)]
        mx = Signal(signed(w), name="res_max")        # R1: max tq, 0 after a terminal step
        m.d.sync += mx.eq(Mux(rd1[1].data, 0, rb.best))
        prod = Signal(signed(w + cw + 1), name="res_prod")
        m.d.sync += prod.eq(mx * cmd.gamma)            # R2
        disc = rshift_round(prod, cw - 1, act.rounding)
        disc_r = Signal(disc.shape(), name="res_disc")
        m.d.sync += disc_r.eq(disc)                    # R3
        ysum = Signal(signed(max(w, len(disc)) + 1), name="res_ysum")
        m.d.sync += ysum.eq(pr[2] + disc_r)            # R4
        y, _ = saturate_staged(m, ysum, act, name="y")  # R5
        m.d.comb += [td_wr.en.eq(pv[4]), td_wr.addr.eq(pb[4]), td_wr.data.eq(pq[4] - y),
                     rb.td_we.eq(pv[4])]
        with m.If(pv[4]):
            m.d.sync += td_n.eq(td_n + 1)

    def _intake(self, m, cmd, mem, pk):
        """While ``rec_open`` / ``wt_open`` (set with the command, cleared by the last
        element, both low before PACK ends): the records into the per-sample memories as
        they come, the IS weights into theirs."""
        lc = self._config.learner
        n_in, ab, w = lc.sizes[0], lc.action_bits, lc.numerics.width
        lb = 8 * lane_bytes(self._config)
        wn, wt_open, wrow, rec_open = pk.wn, pk.wt_open, pk.wrow, pk.rec_open
        last_b = cmd.last_b
        rec_wr, wt_wr = mem.rec_wr, mem.wt_wr
        # records: taken whenever they come, into the per-sample memories at wrow
        got = pk.got
        m.d.comb += [self.rec.ready.eq(rec_open), got.eq(self.rec.valid & rec_open)]
        with m.If(got):
            m.d.sync += [wrow.eq(wrow + 1), rec_open.eq(wrow != last_b)]
        code = self.rec.payload.word_select(2 * n_in + 1, lb)
        m.d.comb += [
            *(p.addr.eq(wrow) for p in rec_wr),
            *(p.en.eq(got) for p in rec_wr),
            rec_wr[0].data.eq(code[:ab]),
            rec_wr[1].data.eq(self.rec.payload.word_select(2 * n_in, lb)[:w]),
            rec_wr[2].data.eq(code[lb - 1]),
            rec_wr[3].data.eq(self.rec.payload[:2 * n_in * lb]),
        ]
        take = self.weight.valid & self.weight.ready
        m.d.comb += [self.weight.ready.eq(wt_open), wt_wr.addr.eq(wn),
                     wt_wr.data.eq(self.weight.payload), wt_wr.en.eq(take)]
        with m.If(take):
            m.d.sync += [wn.eq(wn + 1), wt_open.eq(wn != last_b)]

    def _pack(self, m, hp, cmd, mem, pk):
        """While ``more`` or ``have`` (in PACK): the rows of obs / next_obs, a host word per
        write, each once its record is in."""
        lc = self._config.learner
        n_in, w = lc.sizes[0], lc.numerics.width
        lb = 8 * lane_bytes(self._config)
        row, have, cur, j, last_j = pk.row, pk.have, pk.cur, pk.j, pk.last_j
        load, real, more, wrow, rec_in, row1 = (pk.load, pk.real, pk.more, pk.wrow, pk.rec_in,
                                                pk.row1)
        last_b, last_row, obs_rd = cmd.last_b, cmd.last_row, mem.obs_rd
        # rows: a new one when none is being written or this is its last cycle, a record
        # row once its record is in (row < wrow: rec_in)
        free = ~have | last_j
        m.d.comb += [obs_rd.addr.eq(row), load.eq(free & more & (~real | rec_in))]
        with m.If(have):
            m.d.sync += j.eq(Mux(last_j, 0, j + 1))
        with m.If(load):
            m.d.sync += [have.eq(1), row.eq(row + 1), row1.eq(row1 + 1),
                         real.eq(real & (row != last_b)),
                         more.eq(row != last_row), cur.eq(Mux(real, obs_rd.data, 0))]
        with m.Elif(last_j):
            m.d.sync += have.eq(0)
        # row != wrow kept in a register (a record row loads only after its record, so row
        # never passes wrow while real): the load's enable is not a compare of two counters
        with m.If(pk.got & ~load):
            m.d.sync += rec_in.eq(1)
        with m.Elif(load & ~pk.got):
            m.d.sync += rec_in.eq(row1 != wrow)
        # the row's host words: row - 1 is the row in cur; write t < c: obs chunk t, then
        # next_obs chunk t - c (E elements from column E·k); cycles 2c .. P - 1 idle
        rb = Signal.like(row)
        m.d.comb += rb.eq(row - 1)
        c = adapter_row_chunks(self._config)
        E = adapter_row_elements(self._config)
        with m.If(have):
            with m.Switch(j):
                for t in range(2 * c):
                    name, k = ("obs", t) if t < c else ("next_obs", t - c)
                    cols = range(k * E, min(n_in, (k + 1) * E))
                    lanes = [(n_in if name == "next_obs" else 0) + col for col in cols]
                    addr, off = self._element_addr(name, rb, Const(k * E, 16))
                    elems = Cat(*(cur.word_select(ln, lb)[:w] for ln in lanes))
                    with m.Case(t):
                        m.d.comb += [
                            hp["addr"].eq(addr),
                            hp["we"].eq(((1 << (len(cols) * w // 8)) - 1) << (off >> 3)),
                            hp["wdata"].eq(elems << off)]

    def _issue(self, m, hp, cmd, rb):
        """While ``rd_open`` (in READ): the read-back's reads, the co words of tq[b, :] then
        the word of Q[b, a_b], one per cycle."""
        ib, ik, rd_open, act_cur = rb.ib, rb.ik, rb.rd_open, rb.act_cur
        last_b, tag, co = cmd.last_b, rb.tags[0], rb.co
        E = adapter_row_elements(self._config)
        aq, oq = self._element_addr("q", ib, act_cur)
        at, ot = self._element_addr("tq", ib, (ik * E)[:len(ik) + _log2(E)])
        isq = ik == co
        with m.If(rd_open):
            m.d.comb += [hp["addr"].eq(Mux(isq, aq, at)), hp["re"].eq(1)]
            m.d.sync += [tag.v.eq(1), tag.k.eq(ik), tag.b.eq(ib), tag.off.eq(Mux(isq, oq, ot))]
            with m.If(isq):
                m.d.sync += [ik.eq(0), ib.eq(ib + 1), rd_open.eq(ib != last_b)]
            with m.Else():
                m.d.sync += ik.eq(ik + 1)


@dataclass(frozen=True)
class _Command:
    """The command's arguments (B, η, γ, sync); B - 1, the last group, the last padded row."""
    B: Signal
    lr: Signal
    gamma: Signal
    sync: Signal
    last_b: Signal
    last_g: Signal
    last_row: Signal


@dataclass(frozen=True)
class _Memories:
    """The per-sample memories' ports (``rec_wr``: action, reward, done, obs lanes; ``rd0``:
    action, reward, done, weight; ``rd1``: reward, done)."""
    rec_wr: list
    obs_rd: object
    wt_wr: object
    td_wr: object
    rd0: list
    rd1: list
    td_rd: object


@dataclass(frozen=True)
class _Pack:
    """The pack's registers (see :meth:`LearnerAdapter._pack_registers`)."""
    row: Signal
    have: Signal
    wrow: Signal
    rec_open: Signal
    got: Signal
    rec_in: Signal
    row1: Signal
    cur: Signal
    j: Signal
    wn: Signal
    last_j: Signal
    load: Signal
    real: Signal
    more: Signal
    wt_open: Signal


@dataclass(frozen=True)
class _ReadBack:
    """The read-back's registers (see :meth:`LearnerAdapter._readback_registers`) and
    ``co``, the tq words per sample."""
    co: int
    ib: Signal
    ik: Signal
    rd_open: Signal
    act_cur: Signal
    tags: list
    best: Signal
    rn: Signal
    rn_end: Signal
    td_n: Signal
    td_we: Signal
    avail: Signal
    rn1: Signal
    out_v: Signal
    out_last: Signal
    out_d: Signal
