# amaranth: UnusedElaboratable=no
"""AXI4-Lite CSR block (:class:`rtl_gen.shell.AxiLiteCsr`): what both test tiers share.

The scenarios are written once against a small harness (:class:`Harness`: ``write``, ``read``,
``set``, ``get``, ``tick``, ``reset``, a per-cycle ``trace`` of the AXI handshakes and the core's
output pulses) and run in Amaranth's simulator (tb/shell/test_lite_csr_sim.py) and under
Verilator through cocotbext-axi (tb/shell/test_lite_csr_rtl.py). A register-level reference
model (:class:`CsrModel`) predicts every response and read value; a fake HLS-style core
(:class:`FakeCore`) answers ``ap_start`` with ``ap_ready``/``ap_done``. Two maps are used: an
``ap_ctrl_hs`` map with every access type, and a plain map with another AXI prefix and a wider
address.
"""

import random

from rtl_gen.shell import AxiLiteCsr
from rtl_gen.shell.lite_csr import OKAY, SLVERR
from sw.regmap import Field, Register, RegisterMap


# -- example maps ---------------------------------------------------------------------------------
def hs_map():
    return RegisterMap.with_ap_ctrl_hs("demo", [
        Register.scalar("ARG0", doc="a 32-bit argument"),
        Register("ARG1", None, (Field("LO", 0, 8, "rw", 0x5A), Field("HI", 16, 12, "rw", 0x123)),
                 "two fields around reserved bits"),
        Register("STATUS", None, (Field("COUNT", 0, 16, "ro"), Field("FLAGS", 16, 4, "ro_cor"),
                                  Field("EVENTS", 24, 4, "rw_tow")), "status"),
        Register("CMD", None, (Field("GO", 0, 1, "rw_sc"), Field("KEY", 8, 8, "wo", 0x3C)),
                 "command"),
        Register.scalar("SCRATCH", offset=0x40, reset=0xDEADBEEF),
    ])


def plain_map():
    return RegisterMap("plain", [
        Register.scalar("ID", 32, "ro"),
        Register("CFG", 0x8, (Field("MODE", 0, 2, "rw", 1), Field("LEN", 4, 12, "rw", 100),
                              Field("TRIG", 31, 1, "rw_sc"))),
        Register("IRQ", None, (Field("ERR", 0, 3, "rw_tow"), Field("SEEN", 8, 3, "ro_cor"))),
        Register.scalar("KEY", 16, "wo"),
    ])


CONFIGS = {
    "hs": (hs_map, {}),
    "plain": (plain_map, {"prefix": "s_axi_ctrl", "addr_width": 12}),
}


def build(config):
    make, kw = CONFIGS[config]
    return AxiLiteCsr(make(), **kw)


# -- reference model ------------------------------------------------------------------------------
class CsrModel:
    """Register-level behaviour with the core's inputs held still (no set/clear pulses)."""

    def __init__(self, rm, addr_width):
        self.rm = rm
        self.addr_width = addr_width
        self.by_word = {r.offset >> 2: r for r in rm}
        self.q = {(r.name, f.name): f.reset for r in rm for f in r.fields if f.access != "ro"}
        self.inputs = {}            # (register, field) of an "ro" field -> the core's value

    def reg_at(self, addr):
        return self.by_word.get((addr % (1 << self.addr_width)) >> 2)

    def write(self, addr, data, strb):
        r = self.reg_at(addr)
        if r is None:
            return SLVERR
        mask = sum(0xFF << 8 * i for i in range(4) if strb >> i & 1)
        for f in r.fields:
            k, d, m = (r.name, f.name), f.get(data & mask), f.get(mask)
            if f.access in ("rw", "wo"):
                self.q[k] = (self.q[k] & ~m) | d
            elif f.access == "rw_sc":
                self.q[k] |= d
            elif f.access == "rw_tow":
                self.q[k] ^= d
        return OKAY

    def peek(self, r):
        word = 0
        for f in r.fields:
            if f.readable:
                v = self.inputs.get((r.name, f.name), 0) if f.access == "ro" \
                    else self.q[r.name, f.name]
                word |= v << f.lsb
        return word

    def read(self, addr):
        r = self.reg_at(addr)
        if r is None:
            return SLVERR, 0
        word = self.peek(r)
        for f in r.fields:
            if f.access == "ro_cor":
                self.q[r.name, f.name] = 0
        return OKAY, word

    def interrupt(self):
        if self.rm.protocol != "ap_ctrl_hs":
            return None
        return int(self.q["GIER", "ENABLE"] and (self.q["IP_ISR", "AP_DONE"]
                                                 or self.q["IP_ISR", "AP_READY"]))


# -- a fake ap_ctrl_hs core -----------------------------------------------------------------------
class FakeCore:
    """An HLS-style block: idle until it sees ``ap_start``, then busy for ``n`` cycles, with
    ``ap_ready`` in busy cycle ``ready_at`` and ``ap_done`` in the last one; ``ap_idle`` is
    ``~busy & ~ap_start`` as in HLS-generated FSMs (so auto-restart never looks idle)."""

    def __init__(self, n=10, ready_at=None):
        self.n = n
        self.ready_at = n - 1 if ready_at is None else ready_at
        self.busy = False
        self.t = 0
        self.runs = 0

    def outputs(self, ap_start):
        """(ap_done, ap_ready, ap_idle) during the current cycle."""
        if not self.busy:
            return 0, 0, int(not ap_start)
        return int(self.t == self.n - 1), int(self.t == self.ready_at), 0

    def clock(self, ap_start):
        """The rising edge that ends the current cycle (``ap_start`` as sampled there)."""
        if not self.busy:
            if ap_start:
                self.busy, self.t = True, 0
        elif self.t == self.n - 1:
            self.busy = False
            self.runs += 1
        else:
            self.t += 1

    def reset(self):
        self.busy, self.t = False, 0


# -- harness --------------------------------------------------------------------------------------
class Harness:
    """What the scenarios use; subclasses implement the simulator-specific parts.

    ``trace[c]`` holds the values of the AXI handshake signals (keys ``axi.<suffix>``) and of the
    core's one-bit outputs, ``wr_data`` and ``wr_strb``, during cycle ``c``; a handshake in
    cycle ``c`` completes at the rising edge that ends it.
    """

    any_strobe = True       # False: byte strobes must be contiguous and non-zero

    def __init__(self, csr):
        self.csr = csr
        self.rm = csr.regmap
        self.hs = self.rm.protocol == "ap_ctrl_hs"
        self.trace = []
        self.core = None
        self.traced = ["axi." + s for s in ("awvalid", "awready", "wvalid", "wready", "bvalid",
                                            "bready", "bresp", "arvalid", "arready", "rvalid",
                                            "rready", "rresp")]
        self.traced += [name for name, d, w, _ in csr.core_ports
                        if d == "out" and (w == 1 or name in ("wr_data", "wr_strb"))]
        self.in_ports = [name for name, d, _, _ in csr.core_ports if d == "in"]

    def port(self, r, f):
        """The core-side port of field ``f`` of register ``r`` by its top-level name: a plain
        port (``cmd_go``) or a member of ``args``/``status`` (``args__arg0``)."""
        p = r.path(f).lower()
        for group in ("args", "status"):
            if p in self.csr.signature.members[group].signature.members:
                return f"{group}__{p}"
        return p

    def model(self, rng=None):
        """A fresh model; drives random values on the ``ro`` inputs (held until changed)."""
        m = CsrModel(self.rm, self.csr.addr_width)
        rng = rng or random.Random(0)
        for r in self.rm.user_registers:
            for f in r.fields:
                if f.access == "ro":
                    m.inputs[r.name, f.name] = v = rng.getrandbits(f.width)
                    self.set(self.port(r, f), v)
        if self.hs:
            m.inputs["CTRL", "AP_IDLE"] = 1
        return m

    def timing(self, start, kind):
        tr = self.trace[start:]

        def first(*keys):
            for i, rec in enumerate(tr):
                if all(rec["axi." + k] for k in keys):
                    return start + i
            return None

        if kind == "write":
            return {"aw": first("awvalid", "awready"), "w": first("wvalid", "wready"),
                    "b_first": first("bvalid"), "b": first("bvalid", "bready")}
        return {"ar": first("arvalid", "arready"), "r_first": first("rvalid"),
                "r": first("rvalid", "rready")}

    async def pulse(self, name, value=1):
        self.set(name, value)
        await self.tick()
        self.set(name, 0)

    async def until(self, pred, timeout=500):
        for i in range(timeout):
            if pred():
                return i
            await self.tick()
        raise AssertionError(f"timeout after {timeout} cycles")

    async def read_reg(self, name):
        resp, data, _ = await self.read(self.rm[name].offset)
        assert resp == OKAY
        return data

    async def write_reg(self, name, data, strb=0xF):
        resp, _ = await self.write(self.rm[name].offset, data, strb)
        assert resp == OKAY


def strb_range(strb):
    lanes = [i for i in range(4) if strb >> i & 1]
    return (lanes[0], lanes[-1]) if lanes else (0, -1)


CONTIGUOUS = [0b1111] * 6 + [0b0001, 0b0010, 0b0100, 0b1000, 0b0011, 0b0110, 0b1100, 0b0111,
                             0b1110]


def pick_strobe(h, rng):
    return rng.randrange(16) if h.any_strobe and rng.random() < 0.3 else rng.choice(CONTIGUOUS)


def unmapped_words(rm, addr_width, limit=64):
    mapped = {r.offset for r in rm}
    return [a for a in range(0, min(1 << addr_width, 4 * limit), 4) if a not in mapped]


# -- scenarios (each runs under both simulators) --------------------------------------------------
async def scenario_reset_values(h, rng):
    """Every register reads its reset value with OKAY; the core ports show the reset values."""
    m = h.model(rng)
    await h.tick(2)
    for r in h.rm:
        resp, data, _ = await h.read(r.offset)
        assert (resp, data) == m.read(r.offset), r.name
    for r in h.rm.user_registers:
        for f in r.fields:
            if f.access in ("rw", "wo", "rw_sc"):
                assert h.get(h.port(r, f)) == f.reset, (r.name, f.name)
    if h.hs:
        assert h.get("ap_start") == 0 and h.get("interrupt") == 0


async def scenario_read_write_all(h, rng):
    """Patterns into every register; read-only bits ignore writes; reserved bits read 0."""
    m = h.model(rng)
    patterns = [0xFFFFFFFF, 0x00000000, 0xA5A5A5A5, 0x5A5A5A5A, rng.getrandbits(32)]
    for r in h.rm:
        if h.hs and r.name == "CTRL":
            continue         # AP_START would stay set without a core: covered by the hs scenario
        for p in patterns:
            resp, _ = await h.write(r.offset, p)
            assert resp == m.write(r.offset, p, 0xF) == OKAY
            resp, data, _ = await h.read(r.offset)
            assert (resp, data) == m.read(r.offset), (r.name, hex(p), hex(data))
            for f in (r.fields if r in h.rm.user_registers else ()):
                if f.access in ("rw", "wo", "rw_sc"):
                    assert h.get(h.port(r, f)) == m.q[r.name, f.name], (r.name, f.name)


async def scenario_random_traffic(h, rng, n=300):
    """Random reads and writes (mapped and unmapped addresses, strobes, AW/W order, back-pressure)
    against the model; every response ``write_latency`` (``read_latency``) cycles after the
    last request handshake."""
    m = h.model(rng)
    offsets = [r.offset for r in h.rm]
    hole = unmapped_words(h.rm, h.csr.addr_width)
    top = 1 << h.csr.addr_width
    for i in range(n):
        roll = rng.random()
        addr = rng.choice(offsets) if roll < 0.7 else rng.choice(hole) if roll < 0.85 \
            else rng.randrange(0, top, 4)
        d = [rng.choice((0, 0, 0, 1, 2, 5)) for _ in range(3)]
        if rng.random() < 0.5:
            data, strb = rng.getrandbits(32), pick_strobe(h, rng)
            if h.hs and m.reg_at(addr) is h.rm["CTRL"]:
                data &= ~1 if i % 7 else ~0   # set AP_START now and then
            resp, t = await h.write(addr, data, strb, aw_delay=d[0], w_delay=d[1], b_delay=d[2])
            assert resp == m.write(addr, data, strb), (i, hex(addr))
            assert t["b_first"] == max(t["aw"], t["w"]) + h.csr.write_latency, t
        else:
            resp, data, t = await h.read(addr, ar_delay=d[0], r_delay=d[2])
            assert (resp, data) == m.read(addr), (i, hex(addr), resp, hex(data))
            assert t["r_first"] == t["ar"] + h.csr.read_latency, t
        if h.hs:
            assert h.get("interrupt") == m.interrupt()
    for r in h.rm.user_registers:
        for f in r.fields:
            if f.access in ("rw", "wo", "rw_sc"):
                assert h.get(h.port(r, f)) == m.q[r.name, f.name], (r.name, f.name)


async def scenario_unmapped(h, rng):
    """Reads and writes outside the map answer SLVERR, read 0 and change nothing."""
    m = h.model(rng)
    before = [(await h.read(r.offset))[:2] for r in h.rm]
    start = len(h.trace)
    for a in unmapped_words(h.rm, h.csr.addr_width, limit=24) + [(1 << h.csr.addr_width) - 4]:
        resp, _ = await h.write(a, 0xFFFFFFFF)
        assert resp == SLVERR, hex(a)
        resp, data, _ = await h.read(a)
        assert (resp, data) == (SLVERR, 0), hex(a)
    pulses = [k for k in h.traced if k.endswith("_wr_pulse")]
    assert not any(rec[k] for rec in h.trace[start:] for k in pulses)
    after = [(await h.read(r.offset))[:2] for r in h.rm]
    assert before == after
    assert all(m.read(r.offset) == a for r, a in zip(h.rm, after))


async def scenario_strobes(h, rng):
    """Byte-lane writes merge into the register; a CTRL write without lane 0 does not start."""
    m = h.model(rng)
    r = next(r for r in h.rm.user_registers if any(f.access == "rw" for f in r.fields))
    addr = r.offset
    await h.write(addr, 0x11223344)
    m.write(addr, 0x11223344, 0xF)
    strobes = [0b0001, 0b0010, 0b0100, 0b1000, 0b0011, 0b1100, 0b0110, 0b1110, 0b0111]
    if h.any_strobe:
        strobes += [0b0101, 0b1010, 0b1001, 0b0000]
    for strb in strobes:
        data = rng.getrandbits(32)
        assert (await h.write(addr, data, strb))[0] == m.write(addr, data, strb)
        assert (await h.read(addr))[:2] == m.read(addr), bin(strb)
    if h.hs:
        await h.write(0x00, 0xFFFFFFFF, 0b1110)          # AP_START is in lane 0
        assert h.get("ap_start") == 0
        assert (await h.read_reg("CTRL")) & 0x81 == 0


async def scenario_order_latency(h, rng):
    """AW before W, W before AW, together; B and R back-pressure; exact latencies; one write
    every ``write_latency + 1`` cycles, one read every ``read_latency + 1``, back to back."""
    r = next(r for r in h.rm.user_registers if any(f.access == "rw" for f in r.fields))
    m = h.model(rng)
    for aw_d, w_d, b_d in ((0, 0, 0), (4, 0, 0), (0, 4, 0), (3, 6, 12), (0, 0, 4)):
        data = rng.getrandbits(32)
        resp, t = await h.write(r.offset, data, aw_delay=aw_d, w_delay=w_d, b_delay=b_d)
        assert resp == m.write(r.offset, data, 0xF) == OKAY
        if aw_d > w_d:
            assert t["w"] < t["aw"], t
        if w_d > aw_d:
            assert t["aw"] < t["w"], t
        assert t["b_first"] == max(t["aw"], t["w"]) + h.csr.write_latency, t
        if b_d:
            assert t["b"] > t["b_first"]
            # no new request is taken while the response waits
            assert not any(h.trace[c]["axi.awready"] or h.trace[c]["axi.wready"]
                           for c in range(t["b_first"], t["b"] + 1))
        for r_d in (0, 3):
            resp, got, tr = await h.read(r.offset, r_delay=r_d)
            assert (resp, got) == m.read(r.offset)
            assert tr["r_first"] == tr["ar"] + h.csr.read_latency, tr
            assert not any(h.trace[c]["axi.arready"] for c in range(tr["r_first"], tr["r"] + 1))
    # back to back
    words = [rng.getrandbits(32) for _ in range(6)]
    start = len(h.trace)
    assert await h.write_many([(r.offset, w) for w in words]) == [OKAY] * 6
    aw = [c for c in range(start, len(h.trace))
          if h.trace[c]["axi.awvalid"] and h.trace[c]["axi.awready"]]
    assert [b - a for a, b in zip(aw, aw[1:])] == [h.csr.write_latency + 1] * 5, aw
    for w in words:
        m.write(r.offset, w, 0xF)
    start = len(h.trace)
    assert await h.read_many([r.offset] * 6) == [m.read(r.offset)] * 6
    ar = [c for c in range(start, len(h.trace))
          if h.trace[c]["axi.arvalid"] and h.trace[c]["axi.arready"]]
    assert [b - a for a, b in zip(ar, ar[1:])] == [h.csr.read_latency + 1] * 5, ar


async def scenario_core_ports(h, rng):
    """rw/wo outputs, rw_sc set/clear, ro_cor set/clear-on-read, rw_tow set/toggle, write
    pulses with wr_data/wr_strb (also for read-only registers)."""
    h.model(rng)
    for r in h.rm.user_registers:
        for f in r.fields:
            ones, p = (1 << f.width) - 1, h.port(r, f)
            if f.access in ("rw", "wo"):
                v = rng.getrandbits(f.width)
                await h.write(r.offset, v << f.lsb)
                assert h.get(p) == v, p
            elif f.access == "rw_sc":
                await h.write(r.offset, f.mask)
                assert h.get(p) == ones and f.get((await h.read(r.offset))[1]) == ones
                await h.write(r.offset, 0)                             # a written 0: no effect
                assert h.get(p) == ones
                await h.pulse(p + "_clear", ones)
                await h.tick()
                assert h.get(p) == 0 and f.get((await h.read(r.offset))[1]) == 0
            elif f.access == "ro_cor":
                v = rng.randrange(1, ones + 1)
                await h.pulse(p, v)
                await h.tick()
                assert f.get((await h.read(r.offset))[1]) == v, p
                assert f.get((await h.read(r.offset))[1]) == 0, p     # cleared by the read
                await h.write(r.offset, f.mask)                        # writes do nothing
                assert f.get((await h.read(r.offset))[1]) == 0, p
            elif f.access == "rw_tow":
                v = rng.randrange(1, ones + 1)
                await h.pulse(p, v)
                await h.tick()
                assert f.get((await h.read(r.offset))[1]) == v, p
                assert f.get((await h.read(r.offset))[1]) == v, p     # not clear-on-read
                await h.write(r.offset, v << f.lsb)                    # write back: clears
                assert f.get((await h.read(r.offset))[1]) == 0, p
                await h.write(r.offset, 1 << f.lsb)                    # toggle on write
                assert f.get((await h.read(r.offset))[1]) == 1, p
                await h.write(r.offset, 1 << f.lsb)
                assert f.get((await h.read(r.offset))[1]) == 0, p
    # write pulses: one cycle, with the new value, wr_data and wr_strb, in the first B cycle
    for r in h.rm.user_registers:
        data, strb = rng.getrandbits(32), rng.choice(CONTIGUOUS)
        lo, hi = strb_range(strb)
        start = len(h.trace)
        resp, t = await h.write(r.offset, data, strb)
        await h.tick(2)
        mine = f"{r.name.lower()}_wr_pulse"
        pulses = [c for c in range(start, len(h.trace)) if h.trace[c][mine]]
        assert pulses == [t["b_first"]], (r.name, pulses, t)
        mask = sum(0xFF << 8 * i for i in range(lo, hi + 1))
        assert h.trace[pulses[0]]["wr_data"] & mask == data & mask
        assert h.trace[pulses[0]]["wr_strb"] == strb
        others = [k for k in h.traced if k.endswith("_wr_pulse") and k != mine]
        assert not any(h.trace[c][k] for c in range(start, len(h.trace)) for k in others)


async def scenario_ap_ctrl_hs(h, rng):
    """Start, ap_ready/ap_done, AP_IDLE, clear-on-read, ISR toggle-on-write, IER/GIER gating of
    the interrupt, early ap_ready, and AP_START ignoring a written 0."""
    if not h.hs:
        return
    ctrl, isr = h.rm["CTRL"].offset, h.rm["IP_ISR"].offset
    START, DONE, IDLE, READY, AUTO = 1, 2, 4, 8, 0x80
    h.core = core = FakeCore(n=12)
    await h.tick(3)
    assert await h.read_reg("CTRL") == IDLE
    await h.write_reg("GIER", 1)
    await h.write_reg("IP_IER", 3)
    await h.write_reg("ARG0", 0x1234)
    await h.write(ctrl, START)
    assert h.get("ap_start") == 1 and core.runs == 0
    await h.until(lambda: h.get("interrupt") == 1)
    assert core.runs == 1 and h.get("ap_start") == 0 and h.get("args__arg0") == 0x1234
    assert await h.read_reg("IP_ISR") == 0b11
    assert await h.read_reg("CTRL") == DONE | READY | IDLE
    assert await h.read_reg("CTRL") == IDLE                   # AP_DONE, AP_READY: clear on read
    assert h.get("interrupt") == 1                             # ISR is not clear-on-read
    await h.write(isr, 0b01)
    assert await h.read_reg("IP_ISR") == 0b10 and h.get("interrupt") == 1
    await h.write(isr, 0b10)
    assert await h.read_reg("IP_ISR") == 0 and h.get("interrupt") == 0
    await h.write(isr, 0b01)                                   # toggle on write: sets it
    assert await h.read_reg("IP_ISR") == 0b01 and h.get("interrupt") == 1
    await h.write_reg("GIER", 0)
    assert h.get("interrupt") == 0
    await h.write_reg("GIER", 1)
    assert h.get("interrupt") == 1
    await h.write(isr, 0b01)
    assert h.get("interrupt") == 0
    # IER selects which events reach the ISR
    await h.write_reg("IP_IER", 0b10)
    await h.write(ctrl, START)
    await h.until(lambda: core.runs == 2 and not core.busy)
    await h.tick(2)
    assert await h.read_reg("IP_ISR") == 0b10
    assert await h.read_reg("CTRL") == DONE | READY | IDLE
    await h.write(isr, 0b10)
    await h.write_reg("IP_IER", 0)
    # early ap_ready (the core has read its arguments, still busy): AP_START drops at once
    core.ready_at = 2
    await h.write(ctrl, START)
    await h.until(lambda: h.get("ap_start") == 0)
    assert core.busy and core.runs == 2
    assert await h.read_reg("CTRL") == READY                  # not done, not idle
    await h.until(lambda: core.runs == 3 and not core.busy)
    await h.tick(2)
    assert await h.read_reg("CTRL") == DONE | IDLE
    # writing 0 to AP_START does not stop a run
    core.ready_at = core.n - 1
    await h.write(ctrl, START)
    await h.tick(2)
    await h.write(ctrl, 0)
    assert h.get("ap_start") == 1
    await h.until(lambda: core.runs == 4 and not core.busy)
    await h.tick(2)
    assert await h.read_reg("CTRL") == DONE | READY | IDLE
    assert h.get("interrupt") == 0 and await h.read_reg("IP_ISR") == 0
    assert h.get("ap_start") == 0 and await h.read_reg("CTRL") == IDLE


async def scenario_auto_restart(h, rng):
    """AUTO_RESTART keeps AP_START set; AP_DONE is reported once, when the core goes idle after
    AUTO_RESTART is cleared (Vitis HLS 2021.1+); ISR.AP_DONE counts every run."""
    if not h.hs:
        return
    ctrl = h.rm["CTRL"].offset
    START, DONE, IDLE, READY, AUTO = 1, 2, 4, 8, 0x80
    h.core = core = FakeCore(n=6)
    await h.tick(3)
    await h.write_reg("IP_IER", 0b01)
    await h.write(ctrl, AUTO | START)
    await h.until(lambda: core.runs >= 3)
    got = await h.read_reg("CTRL")
    assert got & (START | AUTO) == START | AUTO and got & (DONE | READY | IDLE) == 0, hex(got)
    assert await h.read_reg("IP_ISR") == 0b01
    await h.write(ctrl, 0)                          # clear AUTO_RESTART; AP_START: 0 is ignored
    runs = core.runs
    await h.until(lambda: not core.busy and h.get("ap_start") == 0)
    assert core.runs - runs in (0, 1)               # the run in flight ends, no new one starts
    runs = core.runs
    await h.tick(30)
    assert core.runs == runs and not core.busy
    # the last run's ap_ready came after AUTO_RESTART was cleared, so AP_READY is set too
    assert await h.read_reg("CTRL") == DONE | READY | IDLE
    assert await h.read_reg("CTRL") == IDLE
    await h.write(h.rm["IP_ISR"].offset, 0b01)


async def scenario_reset_mid_transaction(h, rng):
    """Reset while a write waits for W, for AW, for BREADY, and while a read waits for RREADY:
    the block comes back at its reset values and works."""
    r = next(r for r in h.rm.user_registers if any(f.access == "rw" for f in r.fields))
    for phase in ("aw", "w", "b", "r"):
        data = rng.getrandbits(32)
        await h.write(r.offset, data)
        await h.abort_with_reset(phase, r.offset, ~data & 0xFFFFFFFF)
        m = h.model(rng)
        for reg in h.rm:
            assert (await h.read(reg.offset))[:2] == m.read(reg.offset), (phase, reg.name)
        data = rng.getrandbits(32)
        assert (await h.write(r.offset, data))[0] == m.write(r.offset, data, 0xF)
        assert (await h.read(r.offset))[:2] == m.read(r.offset), phase


SCENARIOS = {f.__name__.removeprefix("scenario_"): f for f in (
    scenario_reset_values, scenario_read_write_all, scenario_random_traffic, scenario_unmapped,
    scenario_strobes, scenario_order_latency, scenario_core_ports, scenario_ap_ctrl_hs,
    scenario_auto_restart, scenario_reset_mid_transaction)}
