"""GAE kernel (:class:`~rtl_gen.gae.kernel.GaeKernel`) test cases for both tiers: the
configurations, random codes and arguments, the memory image, the expected results, AXI bursts
and the bytes a run may write; :class:`Host`, what a driver does on the cocotb side.

Used by tb/gae/test_kernel_sim.py (Amaranth's simulator), test_kernel_rtl.py and
test_kernel_xrt_rtl.py (cocotb + Verilator).
"""

import numpy as np

from axi_host import AxiHost
from cocotb_util import load_manifest
from rtl_gen.shell.dma import AxiDma
from sw.gae import spec as gae_spec
from sw.gae.spec import GaeKernelConfig, copy_plan, gae_kernel_register_map
from sw.shell.spec import GMEM

#: The thorough tier's configurations: the shipped kernel, and an odd one (5 PEs, full
#: results, interleaved PEs, 64-bit core words on a 64-bit m_axi: one word per beat).
CONFIGS = {
    "n8": {"n_pe": 8, "max_trajectories": 64, "capacity": 1024},
    "n5-full-il2": {"n_pe": 5, "max_trajectories": 20, "capacity": 40, "results": "full",
                    "axi_data_width": 64, "gmem_data_width": 64, "max_burst": 16,
                    "max_outstanding": 2, "pe": {"k": 2, "mode": "interleaved"}},
}
#: Where the tests put the memory image: above 4 GiB, so MEM_PTR_HI matters.
IMAGE_BASE = 0x1_2340_0000


def random_codes(cfg, T, M, rng, p_done=0.05):
    q = cfg.code_max
    return {"rewards": rng.integers(-q, q + 1, (T, M)), "values": rng.integers(-q, q + 1, (T, M)),
            "bootstrap": rng.integers(-q, q + 1, M), "dones": rng.random((T, M)) < p_done}


def random_args(cfg, T, M):
    from sw.gae.golden import quantize_coefs
    from sw.gae.spec import GaeCoreArgs

    q = lambda x: int(cfg.reg_format.quantize(x))  # noqa: E731
    g, gl = quantize_coefs(0.99, 0.95, cfg.pe)
    return GaeCoreArgs(T, M, g, gl, q(1 / 16), 0, q(0.05), q(1.0), q(8.0), 0, q(4.0), q(-4.0))


def image_blocks(cfg, codes) -> dict:
    """``{byte offset: bytes}``: what a host writes into the image for these codes."""
    from sw.gae.layout import pack_rows, region_base

    values = np.vstack([codes["values"], np.asarray(codes["bootstrap"])[None]])
    return {region_base(cfg, name): pack_rows(cfg, name, rows) for name, rows in
            (("rewards", codes["rewards"]), ("values", values), ("dones", codes["dones"]))}


def results_of(cfg, read, T, M):
    """``(adv, rtg)`` from the image through ``read(offset, nbytes) -> bytes``."""
    from sw.gae.layout import region_base, unpack_rows, word_bytes

    G = -(-M // cfg.n_pe)
    names = ("rewards", "values") if cfg.results == "inplace" else ("adv", "rtg")
    return [unpack_rows(cfg, n, read(region_base(cfg, n), T * G * word_bytes(cfg, n)), T, M)
            for n in names]


def expected(cfg, codes, args):
    from sw.gae.model import gae_core

    return gae_core(codes["rewards"], codes["values"], codes["bootstrap"], codes["dones"], args,
                    cfg.core)


def assert_results(cfg, exp, adv, rtg):
    for name, got, want in (("advantages", adv, exp["adv"]), ("rtg", rtg, exp["rtg"])):
        bad = np.argwhere(got != want)
        assert bad.size == 0, f"{name}: {len(bad)} differ, first at {bad[0]}: " \
                              f"{got[tuple(bad[0])]} vs {want[tuple(bad[0])]}"


def expected_bursts(cfg, base, T, M):
    """``(reads, writes)``: the ``(address, beats)`` bursts of a valid run, in order."""
    plan = copy_plan(cfg, T, M)
    Wb = cfg.gmem_data_width // 8

    def bursts(blocks):
        return [b for _, off, n in blocks for b in
                AxiDma.bursts(base + off, -(-n // Wb), data_width=cfg.gmem_data_width,
                              max_burst=cfg.max_burst)]
    return bursts(plan["in"]), bursts(plan["out"])


def result_spans(cfg, T, M):
    """Byte ranges of the image a valid run may write (whole beats of the out-blocks)."""
    Wb = cfg.gmem_data_width // 8
    return [(off, off + -(-n // Wb) * Wb) for _, off, n in copy_plan(cfg, T, M)["out"]]


class Host(AxiHost):
    """What a driver does: cocotbext-axi ``AxiLiteMaster`` on the control port, ``AxiRam`` as
    the device memory on ``m_axi_gmem``."""

    def __init__(self, dut):
        self.cfg = GaeKernelConfig.from_dict(load_manifest()["config"])
        super().__init__(dut, gae_kernel_register_map(self.cfg), mem=GMEM)
        self.reads = self.writes = 0

    async def start(self):
        await super().start()
        # Count the bursts the kernel issues (cocotbext-axi calls these once per beat).
        read, write = self.ram.read_if._read, self.ram.write_if._write

        async def counted_read(address, length):
            self.reads += 1
            return await read(address, length)

        async def counted_write(address, data):
            self.writes += 1
            return await write(address, data)

        self.ram.read_if._read, self.ram.write_if._write = counted_read, counted_write

    def stalls(self, p, seed):
        """Random pauses (probability ``p`` per cycle) on every channel of the device memory."""
        import random

        def gen(rng):
            while True:
                yield rng.random() < p

        rng = random.Random(seed)
        for ch in (self.ram.read_if.ar_channel, self.ram.read_if.r_channel,
                   self.ram.write_if.aw_channel, self.ram.write_if.w_channel,
                   self.ram.write_if.b_channel):
            ch.set_pause_generator(gen(random.Random(rng.getrandbits(32))))

    def load(self, codes, base=IMAGE_BASE, junk=0xA5):
        size = 1 << self.cfg.core.mem_addr_bits
        self.ram.write(base, bytes([junk]) * size)
        for off, data in image_blocks(self.cfg, codes).items():
            self.ram.write(base + off, data)
        return self.ram.read(base, size)

    async def run(self, args, base=IMAGE_BASE, *, wait=True):
        for name, value in vars(args).items():
            if name.upper() in {r.name for r in self.regs.user_registers}:
                await self.wr(name.upper(), value)
        await self.wr("MEM_PTR_LO", base & 0xFFFF_FFFF)
        await self.wr("MEM_PTR_HI", base >> 32)
        await self.kick()
        if wait:
            await self.wait_done()

    async def check_run(self, codes, args, base=IMAGE_BASE):
        """Load, run, compare results and untouched bytes; returns (DMA_CYCLES, CYCLES)."""
        cfg = self.cfg
        T, M = args.num_timesteps, args.num_trajectories
        before = self.load(codes, base)
        reads, writes = self.reads, self.writes
        await self.run(args, base)
        st = await self.status()
        exp = expected(cfg, codes, args)
        assert st["ERROR"] == exp["error"] == 0, st
        after = self.ram.read(base, len(before))
        adv, rtg = results_of(cfg, lambda off, n: after[off:off + n], T, M)
        assert_results(cfg, exp, adv, rtg)
        for flag in ("DEQUANT_OVERFLOW", "PE_OVERFLOW", "REQUANT_OVERFLOW"):
            assert bool(st[flag]) == exp[flag.lower()], flag
        spans = result_spans(cfg, T, M)
        last = 0
        for lo, hi in spans + [(len(before), len(before))]:
            assert after[last:lo] == before[last:lo], "a byte outside the results changed"
            last = hi
        r_bursts, w_bursts = expected_bursts(cfg, base, T, M)
        assert self.reads - reads == sum(n for _, n in r_bursts)
        assert self.writes - writes == sum(n for _, n in w_bursts)
        assert await self.rd("DMA_STATUS") == 0
        cycles = await self.rd("CYCLES")
        assert cycles + 1 == gae_spec.run_cycles(cfg.core, T, M)
        return await self.rd("DMA_CYCLES"), cycles + 1
