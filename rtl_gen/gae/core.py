"""HEPPO GAE accelerator core: BRAM stack memory, dequantizers, N PEs, in-place write-back;
its run control is :func:`~rtl_gen.gae.sequencer.run_sequencer`."""

from dataclasses import dataclass

from amaranth.hdl import Const, Module, Mux, Signal, Value, signed, unsigned
from amaranth.lib import memory, wiring
from amaranth.lib.wiring import In, Out

from sw.gae.spec import GaeCoreConfig, gae_register_map

from sw.fixed import FixedFormat
from sw.shell.spec import HOST_READ_LATENCY

from ..fixed import saturate_fast, saturate_staged
from ..shell.host_port import register_host_requests
from ..shell.signatures import (ArgsSignature, MemoryPortSignature, RunControlSignature,
                                StatusSignature)
from .pe import GaeProcessingElement, _select
from .sequencer import run_sequencer

__all__ = ["GaeCore"]


class GaeCore(wiring.Component):
    """The GAE accelerator's datapath and control, without the bus adapters.

    Memories (one simple dual-port BRAM array each, ``config.depth`` words): ``rewards`` and
    ``values`` (``n_pe`` codes per word), ``dones`` (``n_pe`` bits), and with
    ``results="full"`` ``adv`` and ``rtg`` (``n_pe`` data-format words). Word ``t*G + g`` holds
    time step t of trajectory group g (see :mod:`sw.gae.layout`); cycles of a run:
    :func:`sw.gae.spec.run_cycles`.

    A run, started by ``start`` while idle:

    1. setup: ``G = ceil(M / n_pe)`` and the capacity check by repeated subtraction
       (``G`` cycles); invalid arguments end the run at once with ``error`` set and memory
       untouched;
    2. for each group of L words (L = k in interleaved mode, else 1): L cycles reading the
       bootstrap row, then ``T * L`` cycles reading rows T-1 .. 0, one word per cycle; the codes
       are dequantized (``code * scale + offset``) and fed to the N PEs, one element per PE per
       cycle, ``config.READ_LATENCY`` registers after the read;
    3. the PEs' results are requantized to codes (``"inplace"``) and written over the rewards
       and values, or written at full precision (``"full"``), through the memories' second
       port, ``config.write_latency`` registers after the PEs.

    Every multiplier is split into products that fit one DSP48E2 each, with registers on both
    sides; sums take one carry chain a stage; the block RAMs' data is registered before use.

    Cycles of a run (:func:`sw.gae.spec.run_cycles`): ``1 + G + 1 + wait + ceil(G / L) * L *
    (T + 1) + drain_cycles + 1`` (start accepted, setup, the wait for the coefficient powers
    (``config.coef_wait``), group start, reads, drain).
    While busy the host port is disabled (``host_enable`` = 0). Sticky flags (cleared at each
    start): ``dequant_overflow``, ``pe_overflow``, ``requant_overflow``.

    Host port: word address in units of ``axi_data_width`` bits over all regions; read data
    :data:`~sw.shell.spec.HOST_READ_LATENCY` (4) cycles after ``host_re``: the request
    registered, the block RAM, its output register, the region and sub-word multiplexer into
    a register; ``host_we`` are byte enables, written from the registered request (one cycle
    after the port). ``host_enable`` is low while busy and while ``start`` is high.

    Members
    -------
    ctrl : ``In(RunControlSignature(error_bits=3))``
        ``start``, ``busy``, ``ready`` and ``done`` pulses, ``error`` (STATUS.ERROR codes of
        :data:`sw.gae.spec.ERROR_CODES`), ``cycles``.
    args : ``In(ArgsSignature(gae_register_map(config)))``
        The run arguments (:func:`sw.gae.spec.GAE_CORE_ARGS`), sampled with ``start``; they
        must be stable from the cycle before ``start`` (their refusal checks are registered).
    status : ``Out(StatusSignature(...))``
        The sticky flags ``status_dequant_overflow``, ``status_pe_overflow``,
        ``status_requant_overflow``.
    host : ``In(MemoryPortSignature(axi_data_width, ...))``
        The host's port into the memories (``host.enable`` low while busy).
    """

    def __init__(self, config: GaeCoreConfig):
        if not isinstance(config, GaeCoreConfig):
            raise TypeError(f"config must be a GaeCoreConfig, not {config!r}")
        self._config = config
        D = config.axi_data_width
        host_addr_bits = config.mem_addr_bits - (D // 8 - 1).bit_length()
        regmap = gae_register_map(config)
        super().__init__({
            "ctrl": In(RunControlSignature(error_bits=3)),
            "args": In(ArgsSignature(regmap)),
            "status": Out(StatusSignature(regmap)),
            "host": In(MemoryPortSignature(data_width=D, addr_width=host_addr_bits,
                                           read_latency=HOST_READ_LATENCY)),
        })

    @property
    def config(self) -> GaeCoreConfig:
        return self._config

    @property
    def drain(self) -> int:
        return self._config.drain_cycles

    def elaborate(self, platform):
        m = Module()
        rports, wports, rq = self._memories(m)
        seq = run_sequencer(m, self)
        host = self._host_reads(m, seq, rports, rq)
        s2 = self._dequantize(m, seq, rq)
        pes, pe_ovf = self._processing_elements(m, seq, s2)
        any_req_ovf = self._write_back(m, seq, pes, wports, host)
        # The lanes' masked overflow bits registered, their OR feeding the sticky flag: the
        # flag is set in the same cycle as when the OR itself was registered, but the lane
        # masks (a compare per lane) and the N-input OR no longer share one cycle.
        pe_ovf_lanes = Signal(len(pe_ovf))
        pe_ovf_valid = Signal()
        m.d.sync += [pe_ovf_lanes.eq(_cat(pe_ovf)), pe_ovf_valid.eq(pes[0].o.valid)]
        any_pe_ovf = pe_ovf_valid & pe_ovf_lanes.any()
        self._flags(m, seq.busy, {"dequant_overflow": s2.any_deq_ovf,
                                  "requant_overflow": any_req_ovf, "pe_overflow": any_pe_ovf})
        return m

    # Each step below (and :func:`~rtl_gen.gae.sequencer.run_sequencer`) adds its logic to
    # ``m`` and returns what later steps use; the order of the calls in :meth:`elaborate` is
    # the order of the statements in the netlist.
    def _memories(self, m):
        """One simple dual-port memory per region: ``(read ports, write ports, read data
        registers)`` by name (the register at each block RAM's output, shared by the host's
        reads and the dequantizer's)."""
        cfg = self._config
        rports, wports, rq = {}, {}, {}
        for name in cfg.regions:
            width = cfg.region_word_bits(name)
            mem = memory.Memory(shape=unsigned(width), depth=cfg.depth, init=[])
            m.submodules[f"mem_{name}"] = mem
            rports[name] = mem.read_port()
            wports[name] = mem.write_port(granularity=8)
            rq[name] = Signal(width, name=f"rdata_{name}_q")
            m.d.sync += rq[name].eq(rports[name].data)
        return rports, wports, rq

    def _host_reads(self, m, seq, rports, rq):
        """The read ports: the sequence's reads while busy, the host's while idle, from the
        registered request (:func:`~rtl_gen.shell.host_port.register_host_requests`); the
        data registered at the block RAM's output, then region and sub-word selected into a
        register. Returns the decoded host address (:class:`_HostAddress`)."""
        cfg = self._config
        D = cfg.axi_data_width
        D_bytes = D // 8
        req = register_host_requests(m, self.host, busy=seq.busy, start=self.ctrl.start)
        word_sel_bits = (cfg.region_bytes // D_bytes - 1).bit_length()
        host_region = Signal(range(max(2, len(cfg.regions))))
        host_word = Signal(word_sel_bits)
        m.d.comb += [host_word.eq(req.addr[:word_sel_bits]),
                     host_region.eq(req.addr[word_sel_bits:])]
        host_sub, host_row = {}, {}
        for name in cfg.regions:
            sub_bits = (cfg.region_sub_words(name) - 1).bit_length()
            host_sub[name] = host_word[:sub_bits] if sub_bits else Const(0, 1)
            host_row[name] = host_word[sub_bits:]
        for name in cfg.regions:
            rp = rports[name]
            with m.If(seq.busy):
                m.d.comb += [rp.addr.eq(seq.rd_addr), rp.en.eq(seq.issue)]
            with m.Else():
                m.d.comb += [rp.addr.eq(host_row[name]),
                             rp.en.eq(req.re & (host_region == cfg.regions.index(name)))]
        # Host read data: the block RAM's output registered (the rewards, values and dones
        # registers are the dequantizer's, see _dequantize), then region and sub-word selected
        # into a register, from the address delayed to match.
        h_region_q = Signal.like(host_region)
        h_word_q = Signal.like(host_word)
        h_region_qq = Signal.like(host_region)
        h_word_qq = Signal.like(host_word)
        m.d.sync += [h_region_q.eq(host_region), h_word_q.eq(host_word),
                     h_region_qq.eq(h_region_q), h_word_qq.eq(h_word_q)]
        rdata = Signal(D, name="host_rdata_q")
        m.d.comb += self.host.rdata.eq(rdata)
        with m.Switch(h_region_qq):
            for idx, name in enumerate(cfg.regions):
                with m.Case(idx):
                    subs = cfg.region_sub_words(name)
                    width = cfg.region_word_bits(name)
                    data = rq[name]
                    words = [data[i * D:min((i + 1) * D, width)] for i in range(subs)
                             if i * D < width]
                    words += [Const(0, D)] * (subs - len(words))
                    sub_bits = (subs - 1).bit_length()
                    sel = h_word_qq[:sub_bits] if sub_bits else Const(0, 1)
                    m.d.sync += rdata.eq(_select(words, sel) if subs > 1 else words[0])
        return _HostAddress(region=host_region, sub=host_sub, row=host_row, request=req)

    def _dequantize(self, m, seq, rq):
        """The read data's way to the PEs (``config.READ_LATENCY`` registers): the block RAM,
        its output register, the dequantizer's partial products (``code * scale``, one DSP48E2
        each), their sum with the offset, the saturation to the data format (stage 2);
        bootstrap rows go to per-lane registers. Returns the stage-2 values
        (:class:`_Stage2`)."""
        cfg = self._config
        N, b, W = cfg.n_pe, cfg.code_bits, cfg.pe.data_width
        L = cfg.pe.k if cfg.pe.mode == "interleaved" else 1
        ab = cfg.addr_bits
        dfmt, rfmt = cfg.pe.data_format, cfg.reg_format
        a, lane = seq.args, seq.lane

        # The read's bookkeeping, one register per stage of the data.
        ctl = {"valid": seq.issue, "boot": seq.boot, "first": seq.first, "lane": lane,
               "addr": seq.rd_addr, "grp": seq.grp}

        def delay(src, tag):
            out = {}
            for name, value in src.items():
                sig = Signal(Value.cast(value).shape(), name=f"{tag}_{name}")
                m.d.sync += sig.eq(value)
                out[name] = sig
            return out

        c1 = delay(ctl, "rd1")          # the block RAM's output
        c1 = {**c1, "nvalid": seq.nvalid_of(c1["grp"])}
        del c1["grp"]
        c2 = delay(c1, "rd2")           # its output register
        c3 = delay(c2, "rd3")           # the product
        c4 = delay(c3, "rd4")           # shifted
        s2c = delay(c4, "s2")           # saturated: stage 2

        # The scale words: mantissa and shift (config.scale_format); the product is shifted
        # left by dequant_lshift and right by the shift, to data_frac + 1 fraction bits.
        ld, sfmt = cfg.dequant_lshift, cfg.scale_format
        mb, sl, sb = sfmt.mantissa_bits, sfmt.shift_lsb, sfmt.shift_bits
        osh = dfmt.frac + 1 - rfmt.frac

        def offset_reg(name):
            # The offset at data_frac + 1 fraction bits plus the rounding constant (a register:
            # the arguments are static during a run); the sum is rounded half up.
            reg = Signal(signed(cfg.reg_width + max(osh, 0) + 1), name=f"{name}_rnd")
            off = a[name] << osh if osh >= 0 else a[name] >> -osh
            m.d.sync += reg.eq(off + 1)
            return reg

        offs = {"reward": offset_reg("reward_offset"), "value": offset_reg("value_offset")}
        d_q = Signal(N, name="rd4_dones")
        d_q2 = Signal(N, name="rd3_dones")
        s2_d = Signal(N)
        m.d.sync += [d_q2.eq(rq["dones"][:N]), d_q.eq(d_q2), s2_d.eq(d_q)]
        s2_r = [Signal(signed(W), name=f"s2_r{p}") for p in range(N)]
        s2_v = [Signal(signed(W), name=f"s2_v{p}") for p in range(N)]
        deq_bits = Signal(N, name="deq_ovf_bits")
        deq_lanes = _lane_mask(m, c3["nvalid"], N, name="deq_lanes")
        for p in range(N):
            ovf = []
            for kind, data, out in (("reward", rq["rewards"], s2_r), ("value", rq["values"], s2_v)):
                code = data[p * b:(p + 1) * b].as_signed()
                scale = a[f"{kind}_scale"]
                # code * mantissa: one DSP48E2 (the code and the argument registers before it).
                pp = Signal(signed(b + mb), name=f"deq_{kind[0]}{p}_pp")
                m.d.sync += pp.eq(code * scale[:mb].as_signed())
                # The product shifted (floor): a barrel shifter, registered.
                q = Signal(signed(b + mb + ld), name=f"deq_{kind[0]}{p}_q")
                m.d.sync += q.eq((pp << ld) >> scale[sl:sl + sb])
                val = (q + offs[kind])[1:].as_signed()
                v, o = saturate_fast(m, val, dfmt, name=f"deq_{kind[0]}{p}")
                m.d.sync += out[p].eq(v)
                ovf.append(o)
            o_r, o_v = ovf
            # Rewards of the bootstrap row and lanes past the last trajectory hold no data.
            m.d.sync += deq_bits[p].eq(((o_r & ~c4["boot"]) | o_v) & deq_lanes[p])
        any_deq_ovf = Signal()
        m.d.sync += any_deq_ovf.eq(s2c["valid"] & deq_bits.any())

        s2_valid, s2_boot, s2_first = s2c["valid"], s2c["boot"], s2c["first"]
        s2_lane, s2_addr, s2_nvalid = s2c["lane"], s2c["addr"], s2c["nvalid"]
        # Bootstrap values per lane (interleaved: one set per lane of the super-group).
        boot_regs = [[Signal(signed(W), name=f"boot{j}_{p}") for p in range(N)]
                     for j in range(L)]
        for j in range(L):
            with m.If(s2_valid & s2_boot & ((s2_lane == j) if L > 1 else 1)):
                m.d.sync += [boot_regs[j][p].eq(s2_v[p]) for p in range(N)]
        return _Stage2(valid=s2_valid, boot=s2_boot, first=s2_first, lane=s2_lane, addr=s2_addr,
                       nvalid=s2_nvalid, r=s2_r, v=s2_v, d=s2_d, boot_regs=boot_regs,
                       any_deq_ovf=any_deq_ovf)

    def _processing_elements(self, m, seq, s2):
        """The N PEs, fed one element per cycle from stage 2. Returns ``(pes, overflow
        bits of the lanes holding trajectories)``."""
        cfg = self._config
        N = cfg.n_pe
        L = cfg.pe.k if cfg.pe.mode == "interleaved" else 1
        a = seq.args
        pe_in_valid = Signal()
        m.d.comb += pe_in_valid.eq(s2.valid & ~s2.boot)
        pe_ovf = []
        pes = []
        for p in range(N):
            pe = GaeProcessingElement(cfg.pe)
            m.submodules[f"pe{p}"] = pe
            pes.append(pe)
            boot_val = _select([s2.boot_regs[j][p] for j in range(L)], s2.lane) if L > 1 \
                else s2.boot_regs[0][p]
            m.d.comb += [
                pe.i.valid.eq(pe_in_valid),
                pe.i.payload.reward.eq(s2.r[p]),
                pe.i.payload.value.eq(s2.v[p]),
                pe.i.payload.bootstrap.eq(boot_val),
                pe.i.payload.done.eq(s2.d[p]),
                pe.i.payload.first.eq(s2.first),
                pe.i.payload.timestep.eq(s2.addr),
                pe.i.payload.trajectory.eq(s2.nvalid),
                pe.o.ready.eq(1),
                pe.gamma.eq(a["gamma"]),
                pe.gamma_lambda.eq(a["gamma_lambda"]),
            ]
            pe_ovf.append(pe.o.payload.overflow & (p < pes[0].o.payload.trajectory))
        return pes, pe_ovf

    def _write_back(self, m, seq, pes, wports, host):
        """The PEs' results requantized (in place) or at full precision into the result
        memories through the write ports, the host's writes while idle. Returns the
        requantizer's overflow bit of the cycle."""
        cfg = self._config
        N, b, W = cfg.n_pe, cfg.code_bits, cfg.pe.data_width
        ab = cfg.addr_bits
        rfmt = cfg.reg_format
        D_bytes = cfg.axi_data_width // 8
        a = seq.args
        out0 = pes[0].o
        # The element's bookkeeping, ``config.write_latency`` registers behind the PEs.
        valid, addr, lanes = out0.valid, out0.payload.timestep, out0.payload.trajectory
        tags = []
        for j in range(cfg.write_latency):
            nv, na, nl = Signal(name=f"wb{j}_valid"), Signal(ab, name=f"wb{j}_addr"), \
                Signal(range(N + 1), name=f"wb{j}_lanes")
            m.d.sync += [nv.eq(valid), na.eq(addr), nl.eq(lanes)]
            tags.append((nv, na, nl))
            valid, addr, lanes = nv, na, nl
        w_valid, w_addr, w_lanes = valid, addr, lanes
        # Lane p is written iff p < w_lanes: registered from the stage before.
        w_lane_en = Signal(N, name="w_lane_en")
        if len(tags) > 2:
            pv = tags[-2][0]
            lane_on = _lane_mask(m, tags[-3][2], N, name="wb_lanes")
        else:
            pv, pl = (tags[-2][0], tags[-2][2]) if len(tags) > 1 else \
                (out0.valid, out0.payload.trajectory)
            lane_on = [p < pl for p in range(N)]
        m.d.sync += w_lane_en.eq(_cat([pv & lane_on[p] for p in range(N)]))
        any_req_ovf = Signal()
        if cfg.results == "inplace":
            qmax = cfg.code_max
            F, LR = cfg.REQUANT_FRAC, cfg.REQUANT_LSHIFT
            op_fmt = FixedFormat(cfg.REQUANT_OPERAND_BITS, 0, True)
            sfmt = cfg.result_scale_format
            mb, sl, sb = sfmt.mantissa_bits, sfmt.shift_lsb, sfmt.shift_bits
            w_adv = [Signal(signed(b), name=f"w_adv{p}") for p in range(N)]
            w_rtg = [Signal(signed(b), name=f"w_rtg{p}") for p in range(N)]
            req_bits = Signal(N, name="req_ovf_bits")
            off_bits = cfg.reg_width + F - rfmt.frac + 1

            def offset_reg(name):
                # offset at the product's scale, with the rounding constant (a register).
                reg = Signal(signed(off_bits), name=f"{name}_rnd")
                m.d.sync += reg.eq((a[name] << (F - rfmt.frac)) + (1 << (F - 1)))
                return reg

            offs = {"adv": offset_reg("adv_offset"), "rtg": offset_reg("rtg_offset")}

            def requant(x, kind, out, p):
                """x * scale + offset, rounded, clamped to +-qmax: the operand shifted (a
                barrel shifter), saturated to 27 bits (range checks, then the select), its
                product with the mantissa (one DSP48E2), the sum with the offset, the clamped
                code."""
                scale = a[f"{kind}_scale"]
                tag = f"rq_{kind[0]}{p}"
                xs = Signal(signed(W + LR), name=f"{tag}_x")
                m.d.sync += xs.eq((x << LR) >> scale[sl:sl + sb])
                sat, _ = saturate_staged(m, xs, op_fmt, name=f"{tag}_sat")
                op = Signal(signed(op_fmt.width), name=f"{tag}_op")
                m.d.sync += op.eq(sat)
                prod = Signal(signed(op_fmt.width + mb), name=f"{tag}_pp")
                m.d.sync += prod.eq(op * scale[:mb].as_signed())
                total = Signal(signed(max(op_fmt.width + mb, off_bits) + 1), name=f"{tag}_sum")
                m.d.sync += total.eq(prod + offs[kind])
                code = total[F:].as_signed()
                hi, lo = code > qmax, code < -qmax
                m.d.sync += out[p].eq(Mux(hi, qmax, Mux(lo, -qmax, code[:b])))
                return hi | lo

            req_lanes = _lane_mask(m, tags[3][2], N, name="rq_lanes")
            for p in range(N):
                oa = requant(pes[p].o.payload.advantage, "adv", w_adv, p)
                orr = requant(pes[p].o.payload.rtg, "rtg", w_rtg, p)
                m.d.sync += req_bits[p].eq((oa | orr) & req_lanes[p])
            m.d.sync += any_req_ovf.eq(w_valid & req_bits.any())
            results = {"rewards": w_adv, "values": w_rtg}
        else:
            w_adv = [Signal(signed(W), name=f"w_adv{p}") for p in range(N)]
            w_rtg = [Signal(signed(W), name=f"w_rtg{p}") for p in range(N)]
            for p in range(N):
                m.d.sync += [w_adv[p].eq(pes[p].o.payload.advantage),
                             w_rtg[p].eq(pes[p].o.payload.rtg)]
            results = {"adv": w_adv, "rtg": w_rtg}
            m.d.sync += any_req_ovf.eq(0)

        # Lane byte enables: lane p is written iff p < w_lanes.
        for name in cfg.regions:
            wp = wports[name]
            width = cfg.region_word_bits(name)
            nbytes = width // 8
            if name in results:
                lane_bits = width // N
                data = Signal(width, name=f"wdata_{name}")
                m.d.comb += data.eq(_cat([r[:lane_bits] for r in results[name]]))
                core_en = Signal(nbytes, name=f"wen_{name}")
                m.d.comb += core_en.eq(_cat([
                    _repeat(w_lane_en[p], lane_bits // 8) for p in range(N)]))
            else:
                data, core_en = Const(0, width), Const(0, nbytes)
            # Host writes: place the AXI word into its slot of the memory word.
            subs = cfg.region_sub_words(name)
            sub_bits = (subs - 1).bit_length()
            sel = host.sub[name] if sub_bits else Const(0, 1)
            host_data = _cat([host.request.wdata] * subs)[:width]
            host_en_full = Signal(subs * D_bytes, name=f"host_en_{name}")
            hit = host.region == cfg.regions.index(name)
            m.d.comb += host_en_full.eq(Mux(hit, host.request.we, 0) << (sel * D_bytes))
            with m.If(seq.busy):
                m.d.comb += [wp.addr.eq(w_addr), wp.data.eq(data), wp.en.eq(core_en)]
            with m.Else():
                m.d.comb += [wp.addr.eq(host.row[name]), wp.data.eq(host_data),
                             wp.en.eq(host_en_full[:nbytes])]
        return any_req_ovf

    def _flags(self, m, busy, sources):
        """The sticky flags (cleared at an accepted start) on ``status``."""
        fields = {"dequant_overflow": self.status.status_dequant_overflow,
                  "requant_overflow": self.status.status_requant_overflow,
                  "pe_overflow": self.status.status_pe_overflow}
        for name, src in sources.items():
            reg = Signal(name=f"flag_{name}")
            with m.If(self.ctrl.start & ~busy):
                m.d.sync += reg.eq(0)
            with m.Elif(src):
                m.d.sync += reg.eq(1)
            m.d.comb += fields[name].eq(reg)


@dataclass(frozen=True)
class _HostAddress:
    """The host's registered request (:class:`~rtl_gen.shell.host_port.HostRequest`) and its
    word address decoded: region, and per region the sub-word and row."""
    region: Signal
    sub: dict
    row: dict
    request: object


@dataclass(frozen=True)
class _Stage2:
    """Dequantized values of stage 2 and the bootstrap registers."""
    valid: Signal
    boot: Signal
    first: Signal
    lane: Signal
    addr: Signal
    nvalid: Signal
    r: list
    v: list
    d: Signal
    boot_regs: list
    any_deq_ovf: Signal


def _lane_mask(m, count, n, *, name):
    """``[p < count for p in range(n)]`` one cycle after ``count``, each one LUT after
    registers: ``count``'s high bits compared with every value (greater, equal) and its low
    four bits with every value (greater), registered; lane ``p`` is then ``hi > p_hi | (hi ==
    p_hi & lo > p_lo)``. (Direct compares of one count against n constants map to a chain
    of LUTs that shares their terms.)"""
    lb = min(4, len(count))
    lo, hi = count[:lb], count[lb:]
    n_lo, n_hi = 1 << lb, (n >> lb) + 1
    top_hi = (1 << len(hi)) - 1
    gt_lo = Signal(n_lo, name=f"{name}_gtlo")
    m.d.sync += gt_lo.eq(_cat([lo > j if j < n_lo - 1 else Const(0, 1) for j in range(n_lo)]))
    if len(hi) == 0:
        return [gt_lo[p] for p in range(n)]
    gt_hi = Signal(n_hi, name=f"{name}_gthi")
    eq_hi = Signal(n_hi, name=f"{name}_eqhi")
    m.d.sync += [gt_hi.eq(_cat([hi > k if k < top_hi else Const(0, 1) for k in range(n_hi)])),
                 eq_hi.eq(_cat([hi == k if k <= top_hi else Const(0, 1)
                                for k in range(n_hi)]))]
    return [gt_hi[p >> lb] | (eq_hi[p >> lb] & gt_lo[p & (n_lo - 1)]) for p in range(n)]


def _cat(values):
    from amaranth.hdl import Cat
    return Cat(*values)


def _repeat(bit, n):
    from amaranth.hdl import Cat
    return Cat(*([bit] * n))
