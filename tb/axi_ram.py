"""AXI4 memories for the tests.

:class:`AxiRamHarness`: an :class:`~rtl_gen.shell.mm_slave.AxiMemorySlave` in front of a
``Memory``, the design both tiers of the slave's tests simulate.

:class:`SimAxiRam`: a cycle-level AXI4 slave for Amaranth's simulator on a master's
``m_axi_gmem`` ports (:class:`~rtl_gen.shell.dma.AxiDma` and the kernels that contain one),
checking the master side of the protocol every cycle.
"""

import random

from amaranth.hdl import Module, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from rtl_gen.shell.dma import BOUNDARY_BYTES
from rtl_gen.shell.mm_slave import AxiMemorySlave

#: The master port the slave model answers.
P = "m_axi_gmem"


def read_data_delayed(m, data, read_latency):
    """``data`` (a one-register read port's) through ``read_latency - 1`` more registers: a
    memory with that read latency."""
    for k in range(read_latency - 1):
        q = Signal.like(data, name=f"rdata_q{k}")
        m.d.sync += q.eq(data)
        data = q
    return data


class AxiRamHarness(wiring.Component):
    """An :class:`AxiMemorySlave` in front of a ``Memory``: an AXI-attached RAM.

    The memory's read data passes ``mem_read_latency - 1`` registers (a parameter of the
    slave; :func:`read_data_delayed`). Ports: the slave's AXI ports, ``enable``
    (``In(1, init=1)``, the slave's ``mem.enable``), plus ``dbg_mem_re``, ``dbg_mem_we`` and
    ``dbg_mem_addr`` mirroring its memory port so tests can watch the accesses.
    """

    def __init__(self, **params):
        self.slave = AxiMemorySlave(**params)
        s = self.slave
        members = {name: member for name, member in s.signature.members.items()
                   if name != "mem"}
        members.update({
            "enable": In(1, init=1),
            "dbg_mem_re": Out(1),
            "dbg_mem_we": Out(s.data_width // 8),
            "dbg_mem_addr": Out(s.mem_addr_width),
        })
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        m.submodules.slave = s = self.slave
        m.submodules.mem = mem = Memory(shape=unsigned(s.data_width), depth=s.depth, init=[])
        wp = mem.write_port(granularity=8)
        rp = mem.read_port(domain="sync")
        port = s.mem
        rdata = read_data_delayed(m, rp.data, s.mem_read_latency)
        m.d.comb += [
            wp.addr.eq(port.addr), wp.en.eq(port.we), wp.data.eq(port.wdata),
            rp.addr.eq(port.addr), rp.en.eq(port.re), port.rdata.eq(rdata),
            port.enable.eq(self.enable),
            self.dbg_mem_re.eq(port.re), self.dbg_mem_we.eq(port.we),
            self.dbg_mem_addr.eq(port.addr),
        ]
        for name, member in s.signature.members.items():
            if name == "mem":
                continue
            if member.flow == In:
                m.d.comb += getattr(s, name).eq(getattr(self, name))
            else:
                m.d.comb += getattr(self, name).eq(getattr(s, name))
        return m


class SimAxiRam:
    """Cycle-level AXI4 slave over a sparse byte memory, checking the master's behaviour.

    ``stall``: probability of dropping a READY or VALID in a cycle; ``latency``: cycles from
    an AR handshake to its first R beat and from the last W beat to B; ``bad``: byte addresses
    whose beats answer SLVERR (``bad_writes``: only when written). ``early_w``: take W beats
    before their AW (AXI lets a slave; the beats wait for their burst's address).
    ``aw_after_w``: an integer k (implies ``early_w``): AWREADY stays low until WVALID has been
    high in more than k cycles since the last AW handshake, counting the current one, or a
    burst's last beat waits for its AW (a slave that waits for write data; k = 0 takes an AW
    together with the W beat that arrives with or after it). ``rst``: a
    signal of the testbench's, the master's reset: while it is 1 the slave drops every burst
    and drives its VALIDs and READYs low. Records every AR/AW ``(cycle, addr, beats)``.

    With ``RLK_COVERAGE=1`` (:func:`fcov.enabled`) each :meth:`step` also samples the channels
    into the functional coverage points of ``role`` (:class:`fcov.axi.AxiMonitor`; default
    ``"dma"``, the :class:`~rtl_gen.shell.dma.AxiDma` the tests put on this slave).
    """

    def __init__(self, dut, *, width, max_burst, max_outstanding, stall=0.0, latency=1,
                 seed=0, bad=(), bad_writes=(), early_w=False, aw_after_w=None, rst=None,
                 role="dma"):
        import fcov

        self.dut, self.width = dut, width
        self.nbytes = width // 8
        self.max_burst, self.max_outstanding = max_burst, max_outstanding
        self.stall, self.latency = stall, latency
        self.rng = random.Random(seed)
        self.bad, self.bad_writes = set(bad), set(bad_writes)
        self.early_w, self.aw_after_w, self.rst = early_w or aw_after_w is not None, \
            aw_after_w, rst
        self.w_seen = 0                         # cycles with WVALID since the last AW taken
        self.aw_with_w = 0                      # cycles an AW and a W beat were taken together
        self.bytes = {}
        self.ar, self.aw = [], []
        self.max_reads = self.max_writes = 0
        self.max_early_w = 0                    # most W beats held before their AW
        self._drop()
        self.monitor = None
        if fcov.enabled():
            from fcov.axi import AxiMonitor

            self.monitor = AxiMonitor(role, self.nbytes)

    def _drop(self):
        """Forget every burst in flight (the state after a reset)."""
        self.reads, self.writes = [], []        # pending: [ready_cycle, addr, beats_left]
        self.w_beats = []                       # write bursts awaiting W: [addr, beats, n_got]
        self.w_fifo = []                        # W beats taken, not yet applied to a burst
        self.b_queue = []                       # [ready_cycle, resp]
        self.w_resp = []
        self.held = {}
        self.w_seen = 0

    def s(self, name):
        return getattr(self.dut, f"{P}_{name}")

    def load(self, addr, data):
        for i, b in enumerate(data):
            self.bytes[addr + i] = b

    def dump(self, addr, n):
        return bytes(self.bytes.get(addr + i, 0) for i in range(n))

    def _check_burst(self, ctx, ch, cycle):
        addr, ln = ctx.get(self.s(f"{ch}addr")), ctx.get(self.s(f"{ch}len"))
        size, burst = ctx.get(self.s(f"{ch}size")), ctx.get(self.s(f"{ch}burst"))
        beats = ln + 1
        assert burst == 1 and 1 << size == self.nbytes, (ch, burst, size)
        assert addr % self.nbytes == 0, f"{ch} address {addr:#x} not aligned"
        assert beats <= self.max_burst, f"{ch} burst of {beats} > {self.max_burst}"
        assert addr // BOUNDARY_BYTES == (addr + beats * self.nbytes - 1) // BOUNDARY_BYTES, \
            f"{ch} burst {addr:#x}+{beats} beats crosses 4 KiB"
        return addr, beats

    def _hold(self, ctx, ch, names):
        """A VALID that was not taken must stay up with the same payload."""
        valid = ctx.get(self.s(f"{ch}valid"))
        now = tuple(ctx.get(self.s(n)) for n in names)
        prev = self.held.get(ch)
        if prev is not None:
            assert valid and now == prev, f"{ch}: VALID or payload changed before READY"
        return valid, now

    def _sample(self, ctx, reset):
        """One cycle of the channels, as the next clock edge takes them, into the monitor."""
        s = {"reset": reset}
        for ch in ("aw", "w", "b", "ar", "r"):
            s[f"{ch}_valid"] = ctx.get(self.s(f"{ch}valid"))
            s[f"{ch}_ready"] = ctx.get(self.s(f"{ch}ready"))
        for ch in ("ar", "aw"):
            for f in ("addr", "len", "size"):
                s[f"{ch}_{f}"] = ctx.get(self.s(f"{ch}{f}"))
        for f in ("w_strb", "w_last", "r_last"):
            s[f] = ctx.get(self.s(f.replace("_", "")))
        self.monitor.step(s)

    async def step(self, ctx, cycle):
        rng, st = self.rng, self.stall
        go = lambda: not (st and rng.random() < st)           # noqa: E731
        if self.rst is not None and ctx.get(self.rst):
            for name in ("arready", "awready", "wready", "rvalid", "bvalid"):
                ctx.set(self.s(name), 0)
            self._drop()
            if self.monitor is not None:
                self._sample(ctx, 1)
            return
        # -- drive ------------------------------------------------------------------------
        ctx.set(self.s("arready"), go())
        k = self.aw_after_w
        ctx.set(self.s("awready"), go() and (
            k is None or self.w_seen + ctx.get(self.s("wvalid")) > k
            or any(last for *_, last in self.w_fifo)))
        ctx.set(self.s("wready"), (self.early_w or bool(self.w_beats)) and go())
        r_beat = None
        if self.reads and self.reads[0][0] <= cycle and go():
            _, addr, left = self.reads[0]
            data = self.dump(addr, self.nbytes)
            r_beat = (addr, left == 1)
            ctx.set(self.s("rdata"), int.from_bytes(data, "little"))
            ctx.set(self.s("rresp"), 2 if addr in self.bad else 0)
            ctx.set(self.s("rlast"), left == 1)
        ctx.set(self.s("rvalid"), r_beat is not None)
        b = bool(self.b_queue) and self.b_queue[0][0] <= cycle and go()
        ctx.set(self.s("bvalid"), bool(b))
        if b:
            ctx.set(self.s("bresp"), self.b_queue[0][1])
        if self.monitor is not None:
            self._sample(ctx, 0)
        # -- sample -----------------------------------------------------------------------
        ar_v, ar_p = self._hold(ctx, "ar", ("araddr", "arlen"))
        aw_v, aw_p = self._hold(ctx, "aw", ("awaddr", "awlen"))
        if ar_v and ctx.get(self.s("arready")):
            addr, beats = self._check_burst(ctx, "ar", cycle)
            self.ar.append((cycle, addr, beats))
            self.reads.append([cycle + self.latency, addr, beats])
            self.held.pop("ar", None)
        else:
            self.held["ar"] = ar_p if ar_v else None
        if aw_v and ctx.get(self.s("awready")):
            addr, beats = self._check_burst(ctx, "aw", cycle)
            self.aw.append((cycle, addr, beats))
            self.w_beats.append([addr, beats, 0, 0])
            self.held.pop("aw", None)
        else:
            self.held["aw"] = aw_p if aw_v else None
        if r_beat is not None and ctx.get(self.s("rready")):
            self.reads[0][1] += self.nbytes
            self.reads[0][2] -= 1
            if not self.reads[0][2]:
                self.reads.pop(0)
        w_v = ctx.get(self.s("wvalid"))
        if aw_v and ctx.get(self.s("awready")):
            self.aw_with_w += bool(w_v and ctx.get(self.s("wready")))
            self.w_seen = 0
        else:
            self.w_seen += w_v
        if w_v and ctx.get(self.s("wready")):
            self.w_fifo.append((ctx.get(self.s("wdata")).to_bytes(self.nbytes, "little"),
                                ctx.get(self.s("wstrb")), ctx.get(self.s("wlast"))))
        while self.w_fifo and self.w_beats:     # beats in order, once their AW is in
            data, strb, wlast = self.w_fifo.pop(0)
            burst = self.w_beats[0]
            addr = burst[0] + burst[2] * self.nbytes
            for i in range(self.nbytes):
                if strb >> i & 1:
                    self.bytes[addr + i] = data[i]
            burst[2] += 1
            burst[3] = max(burst[3], 2 if addr in self.bad | self.bad_writes else 0)
            assert wlast == (burst[2] == burst[1]), "WLAST misplaced"
            if burst[2] == burst[1]:
                self.b_queue.append([cycle + self.latency, burst[3]])
                self.w_beats.pop(0)
        self.max_early_w = max(self.max_early_w, len(self.w_fifo))
        if b and ctx.get(self.s("bready")):
            self.b_queue.pop(0)
        # In flight per direction: address handshake done, last R / B not yet delivered.
        self.max_reads = max(self.max_reads, len(self.reads))
        self.max_writes = max(self.max_writes, len(self.w_beats) + len(self.b_queue))
        assert len(self.reads) <= self.max_outstanding
        assert len(self.w_beats) + len(self.b_queue) <= self.max_outstanding
