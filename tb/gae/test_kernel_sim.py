"""The GAE Vitis kernel (GaeKernel: core + AXI4-Lite control + AxiDma on m_axi_gmem).

A host puts the memory image (:mod:`sw.gae.layout`) in device memory, writes the arguments and
the 64-bit MEM_PTR, starts the kernel and waits for the interrupt; the kernel copies the input
rows in, runs the core, copies the result rows back, then signals AP_DONE. Every test checks
the results in device memory bit for bit against :func:`sw.gae.model.gae_core`, the AXI
bursts against :func:`~sw.gae.spec.copy_plan` and :meth:`AxiDma.bursts`, and that no
other byte of device memory changed.

Fast tier (this module): configuration and register-map checks, lint, and whole runs of tiny
kernels in Amaranth's simulator with the protocol-checking AXI slave :class:`axi_ram.SimAxiRam`
(random stalls), including refused runs (no device-memory access at all), error responses
(DMA_STATUS), a start while busy, and exact cycle counts. The thorough tier (cocotb + Verilator,
the shipped kernel): tb/gae/test_kernel_rtl.py; the cases of both: tb/gae_kernel_cases.py.
"""

import subprocess

import numpy as np
import pytest
from amaranth.back import verilog

from cocotb_util import WAIVERS
from gae_kernel_cases import (CONFIGS, IMAGE_BASE, assert_results, expected, expected_bursts,
                              image_blocks, random_args, random_codes, result_spans, results_of)
from sw.shell.spec import GMEM
from rtl_gen.gae.kernel import GaeKernel
from sw.gae.spec import GaeKernelConfig, copy_plan, gae_kernel_register_map
from sw.gae.spec import gae_register_map
from sw.gae import spec as gae_spec

pytestmark = pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")


# == fast tier: configuration, register map, ports, lint ========================================
@pytest.mark.parametrize("params,msg", [
    ({"gmem_data_width": 96}, r"gmem_data_width must be one of 32, 64, 128, 256, 512 and at "
                              r"least axi_data_width \(128\), not 96"),
    ({"gmem_data_width": 64}, r"at least axi_data_width \(128\), not 64"),
    ({"n_pe": 1, "max_trajectories": 1, "capacity": 1, "axi_data_width": 32,
      "gmem_data_width": 512}, r"gmem_data_width must be at most 8 \* region_bytes \(64\)"),
    ({"max_burst": 0}, r"max_burst must be an integer in 1..256, not 0"),
    ({"max_outstanding": 33}, r"max_outstanding must be an integer in 1..32, not 33"),
    ({"n_pe": 0}, r"n_pe must be an integer in 1..128, not 0"),
])
def test_config_checks(params, msg):
    with pytest.raises(ValueError, match=msg):
        GaeKernelConfig.from_dict(params)


def test_config_round_trip_and_core_part():
    cfg = GaeKernelConfig.from_dict(CONFIGS["n5-full-il2"])
    assert GaeKernelConfig.from_dict(cfg.to_dict()) == cfg
    core = cfg.core
    assert type(core).__name__ == "GaeCoreConfig" and core.n_pe == 5 and core.results == "full"
    assert core.pe == cfg.pe and core.depth == cfg.depth and cfg.pointer_align == 8
    with pytest.raises(ValueError, match="unknown GAE kernel parameter"):
        GaeKernelConfig.from_dict({"gmem_width": 512})
    with pytest.raises(TypeError, match="config must be a GaeKernelConfig"):
        GaeKernel(core)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_register_map_extends_the_accelerator_map(name):
    cfg = GaeKernelConfig.from_dict(CONFIGS[name])
    rm, base = gae_kernel_register_map(cfg), gae_register_map(cfg.core)
    assert rm.registers[:len(base)] == base.registers          # same offsets, fields, docs
    extra = rm.registers[len(base):]
    assert [(r.name, r.offset) for r in extra] == [
        ("MEM_PTR_LO", base.span), ("MEM_PTR_HI", base.span + 4),
        ("DMA_STATUS", base.span + 8), ("DMA_CYCLES", base.span + 12)]
    lo = rm["MEM_PTR_LO"].fields[0]
    assert (lo.lsb, lo.width, lo.access) == ((cfg.pointer_align - 1).bit_length(),
                                             32 - (cfg.pointer_align - 1).bit_length(), "rw")
    assert [f.name for f in rm["DMA_STATUS"].fields] == ["READ_ERROR", "WRITE_ERROR"]
    assert rm.protocol == "ap_ctrl_hs"


def test_copy_plan():
    cfg = GaeKernelConfig.from_dict(CONFIGS["n8"])
    plan = copy_plan(cfg, 1024, 64)
    rb = cfg.region_bytes
    assert plan == {"in": [("rewards", 0, 8192 * 16), ("values", rb, 8200 * 16),
                           ("dones", 2 * rb, 8192 * 16)],
                    "out": [("rewards", 0, 8192 * 16), ("values", rb, 8192 * 16)]}
    odd = GaeKernelConfig.from_dict(CONFIGS["n5-full-il2"])
    plan = copy_plan(odd, 7, 6)                                  # G = 2
    assert [n for _, _, n in plan["in"]] == [14 * 8, 16 * 8, 14 * 8]
    assert [r for r, _, _ in plan["out"]] == ["adv", "rtg"]
    assert [n for _, _, n in plan["out"]] == [14 * 4 * 8] * 2     # 5 x 32 bits: 4 AXI words


def test_ports_and_manifest():
    cfg = GaeKernelConfig.from_dict(CONFIGS["n8"])
    k = GaeKernel(cfg)
    names = set(k.signature.members)
    assert {"ap_clk", "ap_rst_n", "interrupt"} <= names
    assert not any(n.startswith("s_axi_mem") for n in names)
    assert all(n in ("ap_clk", "ap_rst_n", "interrupt") or n.startswith(("s_axi_control_",
                                                                          f"{GMEM}_"))
               for n in names)
    assert len(k.s_axi_control_awaddr) == 12 and len(k.m_axi_gmem_araddr) == 64
    assert len(k.m_axi_gmem_wdata) == cfg.gmem_data_width == 512
    km = k.kernel_manifest
    assert km["pointers"] == [{"name": "MEM_PTR", "port": GMEM, "lo": "MEM_PTR_LO",
                               "hi": "MEM_PTR_HI", "offset": gae_register_map(cfg.core).span}]
    assert km["m_axi"] == {GMEM: {"data_width": 512, "max_burst": 256, "outstanding": 4}}
    assert km["scalars"][:2] == ["NUM_TIMESTEPS", "NUM_TRAJECTORIES"] and len(km["scalars"]) == 12


TINY = {"n_pe": 2, "max_trajectories": 4, "capacity": 8, "axi_data_width": 32,
        "gmem_data_width": 64, "max_burst": 4, "max_outstanding": 2}
TINY_FULL = {"n_pe": 3, "max_trajectories": 6, "capacity": 6, "results": "full",
             "axi_data_width": 64, "gmem_data_width": 128, "max_burst": 8,
             "pe": {"k": 2, "mode": "interleaved"}}


@pytest.mark.parametrize("params", [TINY, TINY_FULL], ids=["tiny", "tiny-full"])
def test_verilog_lint_clean(tmp_path, params):
    path = tmp_path / "gae_kernel.v"
    path.write_text(verilog.convert(GaeKernel(GaeKernelConfig.from_dict(params)),
                                    name="gae_kernel", emit_src=False))
    res = subprocess.run(["verilator", "--lint-only", "-Wall", str(WAIVERS), str(path)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


# == fast tier: whole runs in Amaranth's simulator ================================================
class SimHost:
    """AXI4-Lite master and interrupt wait for Amaranth's simulator; steps the AXI slave model
    (device memory) every cycle."""

    def __init__(self, ctx, dut, ram, regs):
        self.ctx, self.dut, self.ram, self.regs = ctx, dut, ram, regs
        self.cycle = 0

    def s(self, name):
        return getattr(self.dut, f"s_axi_control_{name}")

    async def tick(self):
        await self.ctx.tick()
        self.cycle += 1

    async def step(self):
        """The device memory's part of the current cycle (call before sampling, then tick)."""
        await self.ram.step(self.ctx, self.cycle)

    async def idle(self, n):
        for _ in range(n):
            await self.step()
            await self.tick()

    async def write(self, reg, value):
        ctx, s = self.ctx, self.s
        addr = reg if isinstance(reg, int) else self.regs.offset(reg)
        for name, v in (("awaddr", addr), ("awvalid", 1), ("wdata", int(value) & 0xFFFF_FFFF),
                        ("wstrb", 0xF), ("wvalid", 1), ("bready", 1)):
            ctx.set(s(name), v)
        aw = w = False
        for _ in range(50):
            await self.step()
            aw_hs, w_hs = not aw and ctx.get(s("awready")), not w and ctx.get(s("wready"))
            b, resp = ctx.get(s("bvalid")), ctx.get(s("bresp"))
            await self.tick()
            aw, w = aw or aw_hs, w or w_hs
            ctx.set(s("awvalid"), not aw)
            ctx.set(s("wvalid"), not w)
            if b:
                ctx.set(s("bready"), 0)
                return resp
        raise AssertionError("AXI4-Lite write timed out")

    async def read(self, reg):
        ctx, s = self.ctx, self.s
        ctx.set(s("araddr"), reg if isinstance(reg, int) else self.regs.offset(reg))
        ctx.set(s("arvalid"), 1)
        ctx.set(s("rready"), 1)
        for _ in range(50):
            await self.step()
            ar_hs = ctx.get(s("arready"))
            r, data = ctx.get(s("rvalid")), ctx.get(s("rdata"))
            await self.tick()
            if ar_hs:
                ctx.set(s("arvalid"), 0)
            if r:
                ctx.set(s("rready"), 0)
                return data
        raise AssertionError("AXI4-Lite read timed out")

    async def start(self, args, ptr):
        for name, value in vars(args).items():
            if name.upper() in {r.name for r in self.regs.user_registers}:
                await self.write(name.upper(), value)
        await self.write("MEM_PTR_LO", ptr & 0xFFFF_FFFF)
        await self.write("MEM_PTR_HI", ptr >> 32)
        await self.write("GIER", 1)
        await self.write("IP_IER", 1)
        await self.write("CTRL", 1)

    async def wait_done(self, max_cycles=20000):
        for _ in range(max_cycles):
            await self.step()
            irq = self.ctx.get(self.dut.interrupt)
            await self.tick()
            if irq:
                break
        else:
            raise AssertionError(f"no interrupt in {max_cycles} cycles")
        assert (await self.read("CTRL")) & 0b10, "interrupt without AP_DONE"
        await self.write("IP_ISR", 1)

    async def status(self):
        word = await self.read("STATUS")
        return {f.name: f.get(word) for f in self.regs["STATUS"].fields}


def simulate_kernel(params, testbench, *, stall=0.0, seed=1, bad=()):
    from amaranth.hdl import ClockDomain, Module
    from amaranth.sim import Simulator

    from axi_ram import SimAxiRam

    cfg = GaeKernelConfig.from_dict(params)
    dut = GaeKernel(cfg)
    # ap_clk is a port: drive it from a clock domain of the simulator.
    top = Module()
    top.submodules.dut = dut
    top.domains.sim = cd = ClockDomain("sim")
    top.d.comb += dut.ap_clk.eq(cd.clk)
    sim = Simulator(top)
    sim.add_clock(1e-8, domain="sim")
    result = {}

    async def bench(ctx):
        ram = SimAxiRam(dut, width=cfg.gmem_data_width,
                        max_burst=cfg.max_burst, max_outstanding=cfg.max_outstanding,
                        stall=stall, latency=2, seed=seed, bad=bad)
        host = SimHost(_DomainContext(ctx, cd), dut, ram, dut.regmap)
        ctx.set(dut.ap_rst_n, 0)
        await host.idle(2)
        ctx.set(dut.ap_rst_n, 1)
        await host.idle(1)
        result["value"] = await testbench(host, cfg)

    sim.add_testbench(bench)
    sim.run()
    return result["value"]


class _DomainContext:
    """A simulator context whose ``tick()`` is the ``sim`` domain's."""

    def __init__(self, ctx, cd):
        self._ctx, self._cd = ctx, cd

    def get(self, x):
        return self._ctx.get(x)

    def set(self, x, v):
        self._ctx.set(x, v)

    async def tick(self):
        await self._ctx.tick("sim")


async def run_and_check(host, cfg, codes, args, *, base=IMAGE_BASE, junk=b"\xa5"):
    """Load the image (every other byte of the buffer set to ``junk``), run, check all."""
    ram = host.ram
    T, M = args.num_timesteps, args.num_trajectories
    size = 1 << cfg.core.mem_addr_bits
    ram.load(base, junk * size)
    for off, data in image_blocks(cfg, codes).items():
        ram.load(base + off, data)
    before = ram.dump(base, size)
    n_ar, n_aw = len(ram.ar), len(ram.aw)
    await host.start(args, base)
    await host.wait_done()
    st = await host.status()
    exp = expected(cfg, codes, args)
    assert st["ERROR"] == exp["error"] == 0, st
    after = ram.dump(base, size)
    adv, rtg = results_of(cfg, lambda off, n: after[off:off + n], T, M)
    assert_results(cfg, exp, adv, rtg)
    for flag in ("DEQUANT_OVERFLOW", "PE_OVERFLOW", "REQUANT_OVERFLOW"):
        assert bool(st[flag]) == exp[flag.lower()], flag
    reads, writes = expected_bursts(cfg, base, T, M)
    assert [(a, n) for _, a, n in ram.ar[n_ar:]] == reads
    assert [(a, n) for _, a, n in ram.aw[n_aw:]] == writes
    spans = result_spans(cfg, T, M)
    keep = [i for i in range(size) if not any(lo <= i < hi for lo, hi in spans)]
    assert all(after[i] == before[i] for i in keep), "a byte outside the results changed"
    cycles = await host.read("CYCLES")
    assert cycles + 1 == gae_spec.run_cycles(cfg.core, T, M)
    assert (await host.read("DMA_STATUS")) == 0
    return exp, await host.read("DMA_CYCLES")


@pytest.mark.parametrize("params", [TINY, TINY_FULL], ids=["tiny", "tiny-full"])
@pytest.mark.parametrize("stall", [0.0, 0.3])
def test_sim_runs_bit_exact(params, stall):
    """Shapes that fill the memory, one group, a partial last group; back-to-back runs."""
    rng = np.random.default_rng(5)

    async def tb(host, cfg):
        shapes = [(cfg.capacity, cfg.max_trajectories), (3, 1), (2, cfg.n_pe + 1)]
        for T, M in shapes:
            await run_and_check(host, cfg, random_codes(cfg, T, M, rng, p_done=0.2),
                                random_args(cfg, T, M))
        return True

    assert simulate_kernel(params, tb, stall=stall, seed=int(stall * 10))


def test_sim_exact_cycles():
    """Without stalls, DMA_CYCLES (the cycles the kernel is busy) is exactly: ``G`` size-check
    cycles, per copied block of N core words one command cycle plus the ``N + L + 4`` cycles of
    :class:`AxiDma` (L = 2, the slave model's latency), the core-start cycle, the core's
    ``run_cycles`` and the AP_DONE cycle."""
    rng = np.random.default_rng(6)

    async def tb(host, cfg):
        out = []
        for T, M in ((8, 4), (1, 1), (5, 3)):
            _, dma_cycles = await run_and_check(host, cfg, random_codes(cfg, T, M, rng),
                                                random_args(cfg, T, M))
            out.append((T, M, dma_cycles))
        return cfg, out

    cfg, out = simulate_kernel(TINY, tb)
    for T, M, dma_cycles in out:
        G = -(-M // cfg.n_pe)
        plan = copy_plan(cfg, T, M)
        D = cfg.axi_data_width // 8
        words = [n // D for _, _, n in plan["in"] + plan["out"]]
        want = G + sum(1 + w + 2 + 4 for w in words) + 1 + gae_spec.run_cycles(
            cfg.core, T, M) + 1
        assert dma_cycles == want == gae_spec.kernel_run_cycles(cfg, T, M, latency=2), \
            (T, M, dma_cycles, want)


def test_sim_refused_runs_touch_no_memory():
    """Every core error: AP_DONE with STATUS.ERROR, no AXI request at all, memory as it was."""
    rng = np.random.default_rng(7)

    async def tb(host, cfg):
        ram = host.ram
        ram.load(IMAGE_BASE, bytes(rng.integers(0, 256, 1 << cfg.core.mem_addr_bits,
                                                np.uint8)))
        one = 1 << cfg.pe.coef_frac
        cases = [((0, 3), {}, 1), ((4, 0), {}, 2), ((cfg.depth, 1), {}, 3),
                 ((cfg.capacity, cfg.max_trajectories + 1), {}, 3),       # (T+1)*G > depth
                 ((3, 4097), {}, 3), ((3, 2), {"gamma": one + 1}, 4),
                 ((3, 2), {"gamma_lambda": one + 1}, 4)]
        for (T, M), change, err in cases:
            args = random_args(cfg, T, M)
            for k, v in change.items():
                setattr(args, k, v)
            await host.start(args, IMAGE_BASE)
            await host.wait_done()
            assert (await host.status())["ERROR"] == err, (T, M, change)
            assert not ram.ar and not ram.aw, f"device memory accessed by a refused run " \
                                              f"({T}, {M}, {change})"
            # Only the size check and the core's own refusal (both up to G + 1 cycles).
            dma_cycles = await host.read("DMA_CYCLES")
            assert dma_cycles <= 2 * (-(-min(M, 4096) // cfg.n_pe) + 3), dma_cycles
        # ... and a valid run afterwards works.
        await run_and_check(host, cfg, random_codes(cfg, 3, 3, rng), random_args(cfg, 3, 3))
        return True

    assert simulate_kernel(TINY, tb)


def test_sim_registers_pointer_errors_and_refused_start():
    """MEM_PTR low bits read 0; error responses set DMA_STATUS (the run completes);
    AP_START during a run is refused and flagged; unmapped addresses answer SLVERR."""
    rng = np.random.default_rng(8)
    # The second beat of the dones block (read, never written back).
    bad_read = IMAGE_BASE + 2 * GaeKernelConfig.from_dict(TINY).region_bytes + 8
    T, M = 4, 3

    async def tb(host, cfg):
        await host.write("MEM_PTR_LO", 0xFFFF_FFFF)
        assert await host.read("MEM_PTR_LO") == 0xFFFF_FFFF & -cfg.pointer_align
        await host.write("MEM_PTR_HI", 0x8765_4321)
        assert await host.read("MEM_PTR_HI") == 0x8765_4321
        span = host.regs.span
        assert await host.write(span, 1) == 2 and await host.write(0xFFC, 1) == 2   # SLVERR
        codes = random_codes(cfg, T, M, rng)
        args = random_args(cfg, T, M)
        for off, data in image_blocks(cfg, codes).items():
            host.ram.load(IMAGE_BASE + off, data)
        await host.start(args, IMAGE_BASE)
        await host.idle(2)
        assert not (await host.read("CTRL")) & 0b100, "AP_IDLE during the copy-in"
        await host.write("CTRL", 1)                                  # refused
        await host.wait_done()
        st = await host.status()
        assert st["START_REFUSED"] == 1 and st["ERROR"] == 0
        assert await host.read("DMA_STATUS") == 0b01                # read error only
        await host.idle(20)
        assert (await host.read("CTRL")) & 0b101 == 0b100, "a refused start was queued"
        # Results of the rows that were read correctly are right; the next start clears it all.
        host.ram.bad.clear()
        exp, _ = await run_and_check(host, cfg, codes, args)
        assert (await host.status())["START_REFUSED"] == 0
        host.ram.bad_writes.add(IMAGE_BASE + cfg.region_bytes)      # first beat of values out
        await host.start(args, IMAGE_BASE)
        await host.wait_done()
        assert await host.read("DMA_STATUS") == 0b10
        return True

    assert simulate_kernel(TINY, tb, bad={bad_read})

