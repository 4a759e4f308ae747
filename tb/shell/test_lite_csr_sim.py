# amaranth: UnusedElaboratable=no
"""AXI4-Lite CSR block (:class:`rtl_gen.shell.AxiLiteCsr`), fast tier: the scenarios of
tb/lite_csr_scenarios.py in Amaranth's simulator through :class:`AmaranthHarness`, which drives
the AXI ports directly (any WSTRB, exact AW/W/B/AR/R delays); same-cycle corner cases;
construction errors, core ports and the lint check. The thorough tier (the same scenarios under
Verilator through cocotbext-axi): tb/shell/test_lite_csr_rtl.py.
"""

import random
import subprocess
import zlib
from pathlib import Path

import pytest

from lite_csr_scenarios import (CONFIGS, SCENARIOS, Harness, build, hs_map, plain_map,
                                strb_range)
from rtl_gen.shell import AxiLiteCsr
from rtl_gen.emit import port_table
from rtl_gen.shell.lite_csr import OKAY
from sw.regmap import Field, Info, Register, RegisterMap

ROOT = Path(__file__).resolve().parent.parent.parent
WAIVERS = ROOT / "scripts" / "verilator_waivers.vlt"


# -- fast tier: Amaranth simulator ----------------------------------------------------------------
class AmaranthHarness(Harness):
    """Drives the AXI ports from one Amaranth testbench; the fake core runs in ``_step``."""

    def __init__(self, csr, ctx, rst):
        super().__init__(csr)
        self.ctx = ctx
        self.rst = rst
        self._sigs = [csr.axi(k[4:]) if k.startswith("axi.") else self.signal(k)
                      for k in self.traced]
        for name in self.in_ports:
            ctx.set(self.signal(name), 0)
        if self.hs:
            ctx.set(csr.ap_idle, 1)

    def signal(self, name):
        """The signal of a core port by its top-level name (``args__arg0``: ``csr.args.arg0``)."""
        obj = self.csr
        for part in name.split("__"):
            obj = getattr(obj, part)
        return obj

    def set(self, name, value):
        self.ctx.set(self.signal(name), value)

    def get(self, name):
        return self.ctx.get(self.signal(name))

    def _axi(self, **values):
        for k, v in values.items():
            self.ctx.set(self.csr.axi(k), v)

    async def _step(self):
        start = None
        if self.core is not None:
            start = self.get("ap_start")
            done, ready, idle = self.core.outputs(start)
            self.ctx.set(self.csr.ap_done, done)
            self.ctx.set(self.csr.ap_ready, ready)
            self.ctx.set(self.csr.ap_idle, idle)
        _, rst, *vals = await self.ctx.tick().sample(*self._sigs)
        rec = dict(zip(self.traced, vals))
        self.trace.append(rec)
        if self.core is not None:
            if rst:
                self.core.reset()
            else:
                self.core.clock(start)
        return rec

    async def tick(self, n=1):
        for _ in range(n):
            await self._step()

    async def reset(self):
        self.ctx.set(self.rst, 1)
        await self.tick(2)
        self.ctx.set(self.rst, 0)
        await self.tick()

    async def write(self, addr, data, strb=0xF, *, aw_delay=0, w_delay=0, b_delay=0,
                    also=None, timeout=100):
        """``also``: ports driven in the commit cycle only (without delays: the cycle after the
        AW and W handshakes, ``write_latency - 1``)."""
        start = len(self.trace)
        lo, _ = strb_range(strb)
        self._axi(awaddr=addr + lo, wdata=data, wstrb=strb)
        aw_done = w_done = False
        b_seen = None
        for t in range(timeout):
            awv = not aw_done and t >= aw_delay
            wv = not w_done and t >= w_delay
            if b_seen is None and self.ctx.get(self.csr.axi("bvalid")):
                b_seen = t
            self._axi(awvalid=awv, wvalid=wv, bready=b_seen is not None and t >= b_seen + b_delay)
            for k, v in (also or {}).items():
                self.set(k, v if t == self.csr.write_latency - 1 else 0)
            rec = await self._step()
            aw_done |= awv and bool(rec["axi.awready"])
            w_done |= wv and bool(rec["axi.wready"])
            if rec["axi.bvalid"] and rec["axi.bready"]:
                break
        else:
            raise AssertionError(f"write to {addr:#x}: no response in {timeout} cycles")
        self._axi(awvalid=0, wvalid=0, bready=0)
        return rec["axi.bresp"], self.timing(start, "write")

    async def read(self, addr, *, ar_delay=0, r_delay=0, also=None, timeout=100):
        """``also``: ports driven in the first cycle only (the AR cycle without delays)."""
        start = len(self.trace)
        self._axi(araddr=addr)
        ar_done = False
        r_seen = None
        for t in range(timeout):
            arv = not ar_done and t >= ar_delay
            if r_seen is None and self.ctx.get(self.csr.axi("rvalid")):
                r_seen = t
            self._axi(arvalid=arv, rready=r_seen is not None and t >= r_seen + r_delay)
            for k, v in (also or {}).items():
                self.set(k, v if t == 0 else 0)
            rec = await self._step()
            ar_done |= arv and bool(rec["axi.arready"])
            if rec["axi.rvalid"] and rec["axi.rready"]:
                data = self.ctx.get(self.csr.axi("rdata"))
                break
        else:
            raise AssertionError(f"read of {addr:#x}: no response in {timeout} cycles")
        self._axi(arvalid=0, rready=0)
        return rec["axi.rresp"], data, self.timing(start, "read")

    async def write_many(self, items):
        return [(await self.write(a, d))[0] for a, d in items]

    async def read_many(self, addrs):
        return [(await self.read(a))[:2] for a in addrs]

    async def abort_with_reset(self, phase, addr, data):
        self._axi(awaddr=addr, wdata=data, wstrb=0xF, araddr=addr)
        if phase in ("aw", "w", "b"):
            self._axi(awvalid=phase != "w", wvalid=phase != "aw", bready=0)
            for _ in range(4):
                rec = await self._step()
                if rec["axi.awready"] and rec["axi.awvalid"]:
                    self._axi(awvalid=0)
                if rec["axi.wready"] and rec["axi.wvalid"]:
                    self._axi(wvalid=0)
            assert self.ctx.get(self.csr.axi("bvalid")) == (phase == "b")
        else:
            self._axi(arvalid=1, rready=0)
            await self._step()
            self._axi(arvalid=0)
            await self._step()
            assert self.ctx.get(self.csr.axi("rvalid"))
        self._axi(awvalid=0, wvalid=0, arvalid=0)
        await self.reset()


def run_amaranth(config, body, seed=1, *, csr=None):
    """Run ``body(harness, rng)`` on ``build(config)`` (or on ``csr``)."""
    from amaranth.hdl import ClockDomain, Elaboratable, Module
    from amaranth.sim import Simulator

    csr = build(config) if csr is None else csr

    class Top(Elaboratable):
        def __init__(self):
            self.cd = ClockDomain("sync")

        def elaborate(self, platform):
            m = Module()
            m.domains.sync = self.cd
            m.submodules.csr = csr
            return m

    top = Top()

    async def bench(ctx):
        h = AmaranthHarness(csr, ctx, top.cd.rst)
        await h.reset()
        await body(h, random.Random(seed))

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_lite_csr_sim(config, scenario):
    run_amaranth(config, SCENARIOS[scenario], seed=zlib.crc32(f"{config}/{scenario}".encode()))


def test_lite_csr_sim_corner_cases():
    """Same-cycle races (a set beats a clear-on-read, a clear and a toggle), unaligned byte
    addresses, WSTRB 0: need cycle-exact control, so Amaranth only."""
    async def body(h, rng):
        st, cmd, isr = h.rm["STATUS"].offset, h.rm["CMD"].offset, h.rm["IP_ISR"].offset
        h.model(rng)
        # unaligned byte addresses select their word (the harness puts AWADDR on the first
        # enabled byte lane: here ARG0 + 2)
        resp, t = await h.write(h.rm["ARG0"].offset, 0xAB0000, 0b0100)
        assert resp == OKAY and h.get("args__arg0") == 0xAB0000
        resp, data, _ = await h.read(h.rm["ARG0"].offset + 3)
        assert (resp, data) == (OKAY, 0xAB0000)
        # ro_cor: a set pulse in the cycle of the clearing read survives the read
        await h.pulse("status_flags", 0b0001)
        resp, data, t = await h.read(st, also={"status_flags": 0b0010})
        assert t["ar"] == t["r_first"] - 1 and (data >> 16) & 0xF == 0b0001
        assert (await h.read_reg("STATUS") >> 16) & 0xF == 0b0010
        assert (await h.read_reg("STATUS") >> 16) & 0xF == 0
        # rw_sc: a host set and a core clear in the same cycle: the set wins
        await h.write(cmd, 1, also={"cmd_go_clear": 1})
        assert h.get("cmd_go") == 1
        await h.pulse("cmd_go_clear")
        await h.tick()
        assert h.get("cmd_go") == 0
        # rw_tow: a core set in the cycle of a write that would toggle the bit off wins
        await h.pulse("status_events", 0b0100)
        await h.write(st, 0b0100 << 24, also={"status_events": 0b0100})
        assert (await h.read_reg("STATUS") >> 24) & 0xF == 0b0100
        await h.write(st, 0b0100 << 24)
        assert (await h.read_reg("STATUS") >> 24) & 0xF == 0
        # IP_ISR: the same priority (Vitis: set by the event, else toggle on write)
        await h.write_reg("IP_IER", 0b01)
        await h.pulse("ap_done")
        await h.write(isr, 0b01, also={"ap_done": 1})
        assert await h.read_reg("IP_ISR") == 0b01
        await h.write(isr, 0b01)
        assert await h.read_reg("IP_ISR") == 0
        # AP_DONE: an ap_done pulse in the cycle of the clearing CTRL read survives it
        assert await h.read_reg("CTRL") & 2 == 2
        resp, data, _ = await h.read(0, also={"ap_done": 1})
        assert data & 2 == 0
        assert await h.read_reg("CTRL") & 2 == 2
        assert await h.read_reg("CTRL") & 2 == 0
        # WSTRB 0: an OKAY write that changes nothing but still pulses
        await h.write(h.rm["SCRATCH"].offset, 0x600DF00D)
        start = len(h.trace)
        resp, t = await h.write(h.rm["SCRATCH"].offset, 0, 0)
        await h.tick()
        assert resp == OKAY and h.get("args__scratch") == 0x600DF00D
        assert [c for c in range(start, len(h.trace)) if h.trace[c]["scratch_wr_pulse"]] \
            == [t["b_first"]]
        assert h.trace[t["b_first"]]["wr_strb"] == 0
    run_amaranth("hs", body)


def test_minimal_map_ports():
    """A map with one whole-register field (a run argument: ``args.a``), addr_width above the
    minimum."""
    rm = RegisterMap("tiny", [Register.scalar("A", 8, reset=7)])
    csr = AxiLiteCsr(rm, addr_width=6)
    assert csr.addr_width == 6 and rm.min_addr_width == 2
    assert [p[0] for p in csr.core_ports] == ["a_wr_pulse", "wr_data", "wr_strb", "args__a"]
    assert csr.port(rm["A"], rm["A"].fields[0]) is csr.args.a and len(csr.args.a) == 8


def test_constants_read_their_word_and_have_no_port():
    """A read-only register given in ``constants`` (an ``HW_*`` register: its fields carry an
    Info) reads that word (writes change nothing) and has no core-side port;
    :meth:`AxiLiteCsr.port` gives its fields as constants."""
    base = plain_map()
    rm = RegisterMap(base.name, base.registers + (
        Register("HW_INFO", None, (Field("A", 0, 8, "ro", info=Info("a")),
                                   Field("B", 16, 16, "ro", info=Info("b")))),))
    csr = AxiLiteCsr(rm, prefix="s_axi_ctrl", addr_width=12,
                     constants={"HW_INFO": 0x1234_0056})
    names = [n for n, *_ in csr.core_ports]
    assert not any("hw_info" in n and "wr_pulse" not in n for n in names), names
    assert "status__id" in names                         # the other read-only register
    hw = rm["HW_INFO"]
    assert [csr.port(hw, f).value for f in hw.fields] == [0x56, 0x1234]

    async def body(h, rng):
        assert await h.read_reg("HW_INFO") == 0x1234_0056
        await h.write_reg("HW_INFO", 0)
        assert await h.read_reg("HW_INFO") == 0x1234_0056

    run_amaranth("plain", body, csr=csr)


# -- construction, ports, lint --------------------------------------------------------------------
def test_core_ports_ap_ctrl_hs():
    rm = RegisterMap.with_ap_ctrl_hs("gae_core", [
        Register.scalar("GAMMA", 18), Register.scalar("GAMMA_LAMBDA", 18),
        Register("STATUS", None, (Field("BUSY", 0, 1, "ro"), Field("COUNT", 8, 16, "ro")))])
    csr = AxiLiteCsr(rm)
    assert [(n, d, w) for n, d, w, _ in csr.core_ports] == [
        ("ap_start", "out", 1), ("ap_done", "in", 1), ("ap_ready", "in", 1),
        ("ap_idle", "in", 1), ("interrupt", "out", 1), ("auto_restart", "out", 1),
        ("ap_start_write", "out", 1), ("ap_start_refuse", "in", 1),
        ("gamma_wr_pulse", "out", 1), ("gamma_lambda_wr_pulse", "out", 1),
        ("status_wr_pulse", "out", 1), ("wr_data", "out", 32), ("wr_strb", "out", 4),
        ("args__gamma", "out", 18), ("args__gamma_lambda", "out", 18),
        ("status__status_busy", "in", 1), ("status__status_count", "in", 16)]
    # the argument and status fields are the args and status interfaces, named flat inside
    assert set(csr.signature.members["args"].signature.members) == {"gamma", "gamma_lambda"}
    assert set(csr.signature.members["status"].signature.members) == {"status_busy",
                                                                       "status_count"}
    assert csr.args.gamma.name == "gamma" and csr.status.status_count.name == "status_count"
    st = rm["STATUS"]
    assert csr.port(st, st.field("COUNT")) is csr.status.status_count
    # core_ports and the AXI ports are exactly the Verilog ports of the block as a top level
    table = {p["name"]: (p["dir"], p["width"]) for p in port_table(csr)}
    core = {n: (d + "put", w) for n, d, w, _ in csr.core_ports}
    assert {n: v for n, v in table.items() if not n.startswith("s_axi_control_")} == core
    names = [n for n, _ in csr.signature.members.items()]
    assert names[:17] == [f"s_axi_control_{s}" for s in (
        "awaddr", "awvalid", "awready", "wdata", "wstrb", "wvalid", "wready", "bresp", "bvalid",
        "bready", "araddr", "arvalid", "arready", "rdata", "rresp", "rvalid", "rready")]
    assert csr.addr_width == 5 and len(csr.s_axi_control_awaddr) == 5
    assert (csr.write_latency, csr.read_latency) == (2, 1)


def test_construction_errors():
    rm = hs_map()
    with pytest.raises(ValueError, match=r"addr_width must be an integer in 7..32, not 2"):
        AxiLiteCsr(rm, addr_width=2)
    with pytest.raises(ValueError, match=r"addr_width must be an integer in 7..32, not 33"):
        AxiLiteCsr(rm, addr_width=33)
    with pytest.raises(ValueError, match=r"prefix must be a Verilog identifier, not 's-axi'"):
        AxiLiteCsr(rm, prefix="s-axi")
    with pytest.raises(TypeError, match=r"regmap must be a RegisterMap"):
        AxiLiteCsr({"registers": []})
    # (plain ports: fields outside the args and status interfaces, whose top-level names are
    # args__<name> and status__<name>)
    clash = RegisterMap("c", [Register("S_AXI", 0, (Field("CONTROL_AWADDR", 0, 1, "wo"),))])
    with pytest.raises(ValueError, match=r"core port 's_axi_control_awaddr' .* clashes with an "
                                         r"AXI port"):
        AxiLiteCsr(clash)
    clash = RegisterMap("c", [Register.scalar("A"),
                              Register.scalar("A_WR_PULSE", 1, "ro_cor")])
    with pytest.raises(ValueError, match=r"core port 'a_wr_pulse' .* clashes with core port "
                                         r"'a_wr_pulse'"):
        AxiLiteCsr(clash)
    with pytest.raises(ValueError, match=r"core port 'input' .* is a Verilog keyword"):
        AxiLiteCsr(RegisterMap("k", [Register.scalar("INPUT", 32, "wo")]))
    # base and constants
    with pytest.raises(ValueError, match=r"base must be a RegisterMap that regmap starts with"):
        AxiLiteCsr(rm, base=plain_map())
    with pytest.raises(ValueError, match=r"constants: register 'ARG0' is not read-only"):
        AxiLiteCsr(rm, constants={"ARG0": 1})
    with pytest.raises(KeyError, match=r"no register 'NOPE'"):
        AxiLiteCsr(rm, constants={"NOPE": 1})


def _lint(path, *extra):
    res = subprocess.run(["verilator", "--lint-only", "-Wall", str(WAIVERS), *map(str, extra),
                          str(path)], capture_output=True, text=True)
    return res.returncode, res.stdout + res.stderr


@pytest.mark.parametrize("config", list(CONFIGS))
def test_verilog_lint_clean(tmp_path, config):
    """`verilator --lint-only -Wall` with the project's waivers (which cover the Vitis-mandated
    ``interrupt`` port name) is clean."""
    from amaranth.back import verilog

    v = tmp_path / "csr.v"
    v.write_text(verilog.convert(build(config), name="csr", emit_src=False))
    rc, out = _lint(v)
    assert rc == 0, out

