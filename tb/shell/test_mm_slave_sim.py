"""AxiMemorySlave, fast tier: parameters, lint, exact timing (Amaranth sim).

Both tiers run the slave inside :class:`axi_ram.AxiRamHarness`, the intended use: the slave's
memory port drives an ``amaranth.lib.memory.Memory`` (byte write enables, one-cycle read port).

Parameter checks, port names, ``verilator --lint-only -Wall``, and a cycle-level AXI master
(:class:`axi_sim.SimMaster`) in Amaranth's simulator that checks exact latencies, the per-beat
address sequence of INCR/FIXED/WRAP bursts (also narrow) against the AXI specification's
formula, responses, arbitration, and data under random stalls. The thorough tier (cocotbext-axi under
Verilator): tb/shell/test_mm_slave_rtl.py.
"""

import random
import subprocess

import pytest
from amaranth.back import verilog
from amaranth.lib.wiring import In, Out
from hypothesis import given, settings
from hypothesis import strategies as st

from axi_ram import AxiRamHarness
from axi_sim import SimMaster
from cocotb_util import WAIVERS
from rtl_gen.shell.mm_slave import AxiBurst, AxiMemorySlave, AxiResp
from rtl_gen.shell.signatures import MemoryPortSignature

pytestmark = pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")

AXI_NAMES = [
    "awid", "awaddr", "awlen", "awsize", "awburst", "awvalid", "awready",
    "wdata", "wstrb", "wlast", "wvalid", "wready",
    "bid", "bresp", "bvalid", "bready",
    "arid", "araddr", "arlen", "arsize", "arburst", "arvalid", "arready",
    "rid", "rdata", "rresp", "rlast", "rvalid", "rready",
]


def beat_addresses(addr, length, size, burst):
    """Byte address of each beat of a burst (AXI specification A3.4.1); ``length`` = AxLEN."""
    n = 1 << size
    aligned = addr // n * n
    if burst == AxiBurst.FIXED:
        return [addr] * (length + 1)
    addrs = [addr]
    if burst == AxiBurst.INCR:
        return addrs + [aligned + i * n for i in range(1, length + 1)]
    span = n * (length + 1)
    lower = addr // span * span
    a = aligned
    for _ in range(length):
        a += n
        if a >= lower + span:
            a = lower
        addrs.append(a)
    return addrs


# == fast tier: parameters, ports, lint ===========================================================
@pytest.mark.parametrize("kwargs,exc,msg", [
    (dict(data_width=48, addr_width=16), ValueError,
     r"data_width must be one of 32, 64, 128, 256, 512, not 48"),
    (dict(data_width=True, addr_width=16), ValueError, r"data_width must be one of .* not True"),
    (dict(data_width=128, addr_width=4), ValueError,
     r"addr_width must be an integer from 5 to 64, not 4"),
    (dict(data_width=32, addr_width=65), ValueError, r"addr_width must be .* not 65"),
    (dict(data_width=32, addr_width=12, id_width=0), ValueError,
     r"id_width must be an integer from 1 to 16, not 0"),
    (dict(data_width=32, addr_width=12, id_width=17), ValueError, r"id_width .* not 17"),
    (dict(data_width=32, addr_width=12, depth=1025), ValueError,
     r"depth must be an integer from 1 to 1024 \(2\*\*\(addr_width - 2\)\), not 1025"),
    (dict(data_width=32, addr_width=12, depth=0), ValueError, r"depth .* not 0"),
    (dict(data_width=32, addr_width=12, depth=2.0), ValueError, r"depth .* not 2.0"),
    (dict(data_width=32, addr_width=12, prefix=3), TypeError, r"prefix must be a string, not 3"),
    (dict(data_width=32, addr_width=12, mem_read_latency=0), ValueError,
     r"mem_read_latency must be an integer from 1 to 8, not 0"),
    (dict(data_width=32, addr_width=12, prefix="a__b"), ValueError,
     r"prefix must be letters and digits joined by single underscores, not 'a__b'"),
])
def test_parameter_checks(kwargs, exc, msg):
    with pytest.raises(exc, match=msg):
        AxiMemorySlave(**kwargs)


def test_positional_parameters_rejected():
    with pytest.raises(TypeError):
        AxiMemorySlave(32, 16)


def test_ports_and_properties():
    s = AxiMemorySlave(data_width=64, addr_width=20, id_width=6, depth=3000, prefix="s_axi_gmem")
    # the AXI ports, and the memory side as one interface (flat: mem.addr, mem.re, ...)
    ports = {"_".join(map(str, path)): (member.flow, len(value))
             for path, member, value in s.signature.flatten(s)}
    expect = {f"s_axi_gmem_{n}" for n in AXI_NAMES} | {
        "mem_addr", "mem_re", "mem_we", "mem_wdata", "mem_rdata", "mem_enable"}
    assert set(ports) == expect
    widths = {n: w for n, (_, w) in ports.items()}
    assert widths["s_axi_gmem_awaddr"] == 20 and widths["s_axi_gmem_araddr"] == 20
    assert widths["s_axi_gmem_awid"] == widths["s_axi_gmem_rid"] == 6
    assert widths["s_axi_gmem_wstrb"] == 8 and widths["s_axi_gmem_rdata"] == 64
    assert widths["mem_addr"] == 12 and widths["mem_we"] == 8 and widths["mem_wdata"] == 64
    # the slave is the initiator of the memory port: enable and rdata come in
    assert ports["mem_enable"][0] == In and ports["mem_rdata"][0] == In
    assert all(ports[f"mem_{n}"][0] == Out for n in ("addr", "re", "we", "wdata"))
    mem = s.signature.members["mem"]
    assert mem.flow == Out and mem.signature == MemoryPortSignature(data_width=64, addr_width=12)
    assert s.mem.enable.init == 1 and s.mem.enable.name == "mem_enable"
    assert s.mem.addr.name == "mem_addr"
    assert s.mem_addr_width == 12 and s.depth == 3000 and s.prefix == "s_axi_gmem"
    assert s.axi("rready") is s.s_axi_gmem_rready
    full = AxiMemorySlave(data_width=128, addr_width=16)
    assert full.depth == 4096 and full.mem_addr_width == 12
    assert AxiMemorySlave(data_width=32, addr_width=3, depth=1).mem_addr_width == 1


LINT_CONFIGS = [
    dict(data_width=32, addr_width=16, id_width=1),
    dict(data_width=128, addr_width=20, id_width=4, depth=700),
    dict(data_width=512, addr_width=32, id_width=16, depth=3),
]


@pytest.mark.parametrize("params", LINT_CONFIGS, ids=lambda p: f"w{p['data_width']}")
def test_verilog_lint_clean(tmp_path, params):
    for name, comp in (("axi_mem_slave", AxiMemorySlave(**params)),
                       ("axi_ram_harness", AxiRamHarness(**params))):
        path = tmp_path / f"{name}.v"
        path.write_text(verilog.convert(comp, name=name, emit_src=False))
        res = subprocess.run(["verilator", "--lint-only", "-Wall", str(WAIVERS), str(path)],
                             capture_output=True, text=True)
        assert res.returncode == 0, res.stdout + res.stderr


# == fast tier: cycle-level AXI master in Amaranth's simulator (axi_sim.SimMaster) ================
def simulate(params, testbench):
    from amaranth.sim import Simulator

    dut = AxiRamHarness(**params)
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    result = {}

    async def bench(ctx):
        result["value"] = await testbench(ctx, dut)

    sim.add_testbench(bench)
    sim.run()
    return result["value"]


def full_strb(params):
    return (1 << (params["data_width"] // 8)) - 1


@pytest.mark.parametrize("mem_latency", [1, 3])
def test_sim_exact_latency_and_rate(mem_latency):
    """16-beat write then read, nothing stalls: beats every cycle, B and R latencies exact."""
    params = dict(data_width=32, addr_width=12, id_width=2, mem_read_latency=mem_latency)
    read_latency = AxiMemorySlave(**params).read_latency
    assert read_latency == mem_latency + 2
    words = [random.Random(1).getrandbits(32) for _ in range(16)]

    async def tb(ctx, dut):
        m = SimMaster(dut)
        w = await m.run(ctx, writes=[(1, 0x40, 15, 2, AxiBurst.INCR,
                                      [(d, 0xF) for d in words])])
        r = await m.run(ctx, reads=[(2, 0x40, 15, 2, AxiBurst.INCR)])
        return w, r

    w, r = simulate(params, tb)
    a = w["aw"][0]
    assert w["w"] == list(range(a + 1, a + 17)), "one W beat per cycle from the cycle after AW"
    assert w["we"] == [(c + 1, 0x10 + i, 0xF) for i, c in enumerate(w["w"])]
    (b_cycle, bid, bresp), = w["b"]
    assert b_cycle == w["w"][-1] + AxiMemorySlave.write_response_latency
    assert (bid, bresp) == (1, AxiResp.OKAY)
    ar = r["ar"][0]
    cycles = [c for c, *_ in r["r"]]
    assert cycles == list(range(ar + read_latency, ar + read_latency + 16))
    assert [d for _, _, d, _, _ in r["r"]] == words
    assert [(i, rs, lst) for _, i, _, rs, lst in r["r"]] == [(2, 0, k == 15) for k in range(16)]
    assert [addr for _, addr in r["re"]] == list(range(0x10, 0x20))


@pytest.mark.parametrize("stall,mem_latency", [(0.0, 1), (0.7, 1), (0.0, 3), (0.7, 3)])
def test_sim_single_beat_transactions(stall, mem_latency):
    """Single-beat writes every 3 cycles and reads every 2; no B lost when bready stalls."""
    params = dict(data_width=32, addr_width=12, id_width=3, mem_read_latency=mem_latency)

    async def tb(ctx, dut):
        m = SimMaster(dut, stall=stall, seed=3)
        w = await m.run(ctx, writes=[(k, 4 * k, 0, 2, AxiBurst.INCR, [(100 + k, 0xF)])
                                     for k in range(8)])
        r = await m.run(ctx, reads=[(7 - k, 4 * k, 0, 2, AxiBurst.INCR) for k in range(8)])
        return w, r

    w, r = simulate(params, tb)
    assert [(i, rs) for _, i, rs in w["b"]] == [(k, AxiResp.OKAY) for k in range(8)]
    assert [(i, d) for _, i, d, _, _ in r["r"]] == [(7 - k, 100 + k) for k in range(8)]
    if not stall:
        # the first write does not wait for the B register
        assert [b - a for a, b in zip(w["aw"], w["aw"][1:])] == [2] + [3] * 6
        assert set(b - a for a, b in zip(r["ar"], r["ar"][1:])) == {2}


BURSTS = [  # (addr, len, size, burst) on a 64-bit bus (8 bytes, 3 address bits per word)
    (0x100, 7, 3, AxiBurst.INCR), (0x103, 4, 3, AxiBurst.INCR), (0x105, 9, 0, AxiBurst.INCR),
    (0x10A, 6, 1, AxiBurst.INCR), (0x11C, 5, 2, AxiBurst.INCR), (0x128, 3, 3, AxiBurst.FIXED),
    (0x12B, 2, 1, AxiBurst.FIXED), (0x130, 3, 3, AxiBurst.WRAP), (0x148, 3, 3, AxiBurst.WRAP),
    (0x178, 15, 3, AxiBurst.WRAP), (0x10C, 7, 2, AxiBurst.WRAP), (0x10E, 1, 1, AxiBurst.WRAP),
    (0x105, 15, 0, AxiBurst.WRAP), (0x000, 255, 3, AxiBurst.INCR),
]


@pytest.mark.parametrize("addr,length,size,burst", BURSTS,
                         ids=lambda v: f"{v:x}" if isinstance(v, int) else None)
def test_sim_burst_addresses(addr, length, size, burst):
    """Each read and write beat accesses the word the AXI specification's formula gives."""
    params = dict(data_width=64, addr_width=16, id_width=3)
    expect = [a >> 3 for a in beat_addresses(addr, length, size, burst)]

    async def tb(ctx, dut):
        m = SimMaster(dut)
        r = await m.run(ctx, reads=[(5, addr, length, size, burst)])
        w = await m.run(ctx, writes=[(6, addr, length, size, burst, [(0, 1)] * (length + 1))])
        return r, w

    r, w = simulate(params, tb)
    assert [a for _, a in r["re"]] == expect
    assert [a for _, a, _ in w["we"]] == expect
    assert all(rs == AxiResp.OKAY for _, _, _, rs, _ in r["r"])
    assert w["b"][0][1:] == (6, AxiResp.OKAY)


@pytest.mark.parametrize("addr,length,size,burst", [
    (0x100, 3, 0, 3),                       # reserved burst type
    (0x100, 4, 3, AxiBurst.WRAP),           # WRAP of 5 beats
    (0x100, 2, 3, AxiBurst.WRAP),           # WRAP of 3 beats
    (0x100, 1, 4, AxiBurst.INCR),           # 16-byte beats on an 8-byte bus
])
def test_sim_unsupported_bursts_answer_slverr(addr, length, size, burst):
    params = dict(data_width=64, addr_width=16)

    async def tb(ctx, dut):
        m = SimMaster(dut)
        r = await m.run(ctx, reads=[(0, addr, length, size, burst)])
        w = await m.run(ctx, writes=[(0, addr, length, size, burst, [(7, 0xFF)] * (length + 1))])
        return r, w

    r, w = simulate(params, tb)
    assert len(r["r"]) == length + 1 and r["r"][-1][4] == 1
    assert all(rs == AxiResp.SLVERR and d == 0 for _, _, d, rs, _ in r["r"])
    assert w["b"][0][2] == AxiResp.SLVERR
    assert r["re"] == [] and w["we"] == []


def test_sim_enable_and_decode_errors():
    """enable = 0: SLVERR, no access. Beyond depth: DECERR for those beats only."""
    params = dict(data_width=32, addr_width=12, depth=10)

    async def tb(ctx, dut):
        m = SimMaster(dut)
        ctx.set(dut.enable, 0)
        off = await m.run(ctx, writes=[(0, 0, 3, 2, AxiBurst.INCR, [(1, 0xF)] * 4)],
                          reads=[(0, 0, 3, 2, AxiBurst.INCR)])
        ctx.set(dut.enable, 1)
        # words 8, 9 exist, 10, 11 do not
        oob_w = await m.run(ctx, writes=[(1, 32, 3, 2, AxiBurst.INCR,
                                          [(0xA0 + i, 0xF) for i in range(4)])])
        oob_r = await m.run(ctx, reads=[(1, 32, 3, 2, AxiBurst.INCR)])
        return off, oob_w, oob_r

    off, oob_w, oob_r = simulate(params, tb)
    assert off["re"] == [] and off["we"] == []
    assert off["b"][0][2] == AxiResp.SLVERR
    assert [(d, rs) for _, _, d, rs, _ in off["r"]] == [(0, AxiResp.SLVERR)] * 4
    assert oob_w["b"][0][2] == AxiResp.DECERR
    assert [a for _, a, _ in oob_w["we"]] == [8, 9]
    assert [a for _, a in oob_r["re"]] == [8, 9]
    assert [(d, rs) for _, _, d, rs, _ in oob_r["r"]] == [
        (0xA0, AxiResp.OKAY), (0xA1, AxiResp.OKAY), (0, AxiResp.DECERR), (0, AxiResp.DECERR)]


def test_sim_enable_drop_mid_burst():
    """Dropping enable in the middle of a read burst turns the remaining beats into SLVERR."""
    params = dict(data_width=32, addr_width=12)

    def drop(ctx, dut, cycle):
        ctx.set(dut.enable, int(cycle < 6))

    async def tb(ctx, dut):
        return await SimMaster(dut).run(ctx, reads=[(0, 0, 7, 2, AxiBurst.INCR)], on_cycle=drop)

    r = simulate(params, tb)
    resp = [rs for _, _, _, rs, _ in r["r"]]
    n_ok = len(r["re"])
    assert 0 < n_ok < 8 and all(c < 6 for c, _ in r["re"])
    assert resp == [AxiResp.OKAY] * n_ok + [AxiResp.SLVERR] * (8 - n_ok)


@given(data=st.data())
@settings(max_examples=25, deadline=None)
def test_sim_burst_addresses_random(data):
    """Random legal bursts on a 128-bit bus: every beat reads the word the spec formula gives."""
    size = data.draw(st.integers(0, 4), label="size")
    burst = data.draw(st.sampled_from(list(AxiBurst)), label="burst")
    if burst == AxiBurst.WRAP:
        length = data.draw(st.sampled_from([1, 3, 7, 15]), label="len")
        addr = data.draw(st.integers(0, 0xFFF), label="addr") >> size << size
    else:
        length = data.draw(st.integers(0, 40), label="len")
        addr = data.draw(st.integers(0, 0xFFF), label="addr")
    expect = [a >> 4 for a in beat_addresses(addr, length, size, burst)]

    async def tb(ctx, dut):
        return await SimMaster(dut).run(ctx, reads=[(1, addr, length, size, burst)])

    r = simulate(dict(data_width=128, addr_width=13, id_width=1), tb)
    assert [a for _, a in r["re"]] == expect
    assert [lst for *_, lst in r["r"]] == [0] * length + [1]


@pytest.mark.parametrize("idle,stall,mem_latency", [
    (0.0, 0.0, 1), (0.3, 0.0, 1), (0.0, 0.5, 1), (0.4, 0.4, 1), (0.0, 0.0, 3), (0.0, 0.5, 3),
    (0.4, 0.4, 3)])
def test_sim_random_traffic(idle, stall, mem_latency):
    """Reads and writes pending together, random gaps and stalls: data, IDs, round robin."""
    params = dict(data_width=32, addr_width=12, id_width=4, depth=256,
                  mem_read_latency=mem_latency)
    rng = random.Random(int(1000 * idle + 10 * stall))
    writes, reads = [], []
    model = [0] * 256
    for k in range(8):   # writes to words 0..127, reads of words 128..255 (known contents)
        base = 16 * k
        n = rng.randint(1, 16)
        beats = [(rng.getrandbits(32), rng.choice([0xF, 0xF, 0x5, 0x8])) for _ in range(n)]
        writes.append((k, 4 * base, n - 1, 2, AxiBurst.INCR, beats))
        for i, (d, st) in enumerate(beats):
            for byte in range(4):
                if st >> byte & 1:
                    mask = 0xFF << 8 * byte
                    model[base + i] = model[base + i] & ~mask | d & mask
        reads.append((15 - k, 4 * (128 + base), rng.randint(0, 15), 2, AxiBurst.INCR))
    init = [rng.getrandbits(32) for _ in range(128)]

    async def tb(ctx, dut):
        m = SimMaster(dut)
        await m.run(ctx, writes=[(0, 512, 127, 2, AxiBurst.INCR, [(d, 0xF) for d in init])])
        m = SimMaster(dut, idle=idle, stall=stall, seed=rng.getrandbits(16))
        rec = await m.run(ctx, writes=writes, reads=reads)
        back = await SimMaster(dut).run(ctx, reads=[(0, 0, 127, 2, AxiBurst.INCR)])
        return rec, back

    rec, back = simulate(params, tb)
    assert [d for _, _, d, _, _ in back["r"]] == model[:128]
    assert [(i, rs) for _, i, rs in rec["b"]] == [(k, AxiResp.OKAY) for k in range(8)]
    got = [(i, d) for _, i, d, rs, _ in rec["r"]]
    expect = [(15 - k, init[16 * k + j]) for k, rd in enumerate(reads) for j in range(rd[2] + 1)]
    assert got == expect
    # Round robin: the address handshakes alternate while both kinds are pending.
    events = sorted([(c, "w") for c in rec["aw"]] + [(c, "r") for c in rec["ar"]])
    kinds = "".join(k for _, k in events)
    if idle == 0.0:
        assert kinds == "wr" * 8, kinds

