"""The GAE Vitis kernel (:class:`~rtl_gen.gae.kernel.GaeKernel`: the GAE accelerator in the
window DMA shell), fast tier.

Runs copy nothing: the host copies blocks between its buffer (MEM_PTR) and the accelerator's
memory window with DMA_OFFSET / DMA_BYTES / DMA_CTRL and polls DMA_STATUS. Checked here:
configuration errors (messages), the register map (the GAE map unchanged, then the window
shell's), ports and the registry's ``kernel.xml`` arguments, the copy plan, lint; then tiny
kernels in Amaranth's simulator with the protocol-checking AXI4 slave
:class:`axi_ram.SimAxiRam` as device memory (tb/window_sim.py), running the sessions of
tb/gae_kernel_cases.py: whole GAE batches through host-commanded copies (results bit for bit
against :func:`sw.gae.model.gae_core`, the bursts of every copy, no other buffer byte changed,
DMA_CYCLES of every copy = :func:`sw.shell.spec.copy_cycles`, CYCLES =
:func:`sw.gae.spec.run_cycles`, their sum = :func:`sw.gae.spec.kernel_run_cycles`), refused runs
(nothing touched), copies refused while a run is in progress (LOCKED), RANGE, bus errors,
SHELL_VERSION and the other constants. The same sessions through the Verilated RTL:
tb/gae/test_kernel_rtl.py.
"""

import subprocess

import numpy as np
import pytest
from amaranth.back import verilog

from cocotb_util import WAIVERS
from gae_cases import random_args, random_codes
from gae_kernel_cases import (CONFIGS, gae_batch, locked_copies, range_refusals, refused_runs,
                              registers)
from rtl_gen.gae.accelerator import GaeAccelerator
from rtl_gen.gae.kernel import GaeKernel
from sw.gae.spec import (GaeCoreConfig, GaeKernelConfig, copy_plan, gae_kernel_register_map,
                         gae_register_map, kernel_run_cycles, run_cycles)
from sw.registry import BLOCKS
from sw.shell.spec import (DMA_FLAGS, GMEM, HOST_READ_LATENCY, SHELL_VERSION, TO_ACCELERATOR,
                           TO_BUFFER, copy_cycles, window_kernel_register_map)
from window_sim import BUFFER, simulate_kernel

pytestmark = pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")

#: 32-bit words on a 64-bit m_axi (two words a beat), short bursts; long enough runs (49
#: cycles at full size) for the refusals during a run.
TINY = {"n_pe": 2, "max_trajectories": 4, "capacity": 16, "axi_data_width": 32,
        "gmem_data_width": 64, "max_burst": 4, "max_outstanding": 2}
#: Full results on 3 PEs, interleaved PEs, 64-bit words on a 128-bit m_axi.
TINY_FULL = {"n_pe": 3, "max_trajectories": 6, "capacity": 12, "results": "full",
             "axi_data_width": 64, "gmem_data_width": 128, "max_burst": 8,
             "pe": {"k": 2, "mode": "interleaved"}}
TINIES = pytest.mark.parametrize("params", [TINY, TINY_FULL], ids=["tiny", "tiny-full"])
L = 2                     # SimAxiRam's latency (cycles) in the runs with exact cycle counts


# == configuration, register map, ports, lint ===================================================
@pytest.mark.parametrize("params,exc,msg", [
    ({"gmem_data_width": 96}, ValueError,
     (r"gmem_data_width must be one of 32, 64, 128, 256, 512 and at least the accelerator's "
      r"memory word \(128 bits\), not 96")),
    ({"gmem_data_width": 64}, ValueError,
     r"at least the accelerator's memory word \(128 bits\), not 64"),
    ({"n_pe": 1, "max_trajectories": 1, "capacity": 1, "axi_data_width": 32,
      "gmem_data_width": 512}, ValueError,
     r"gmem_data_width / 8 must divide the memory window \(24 bytes\), not 512"),
    ({"max_burst": 0}, ValueError, r"max_burst must be an integer in 1..256, not 0"),
    ({"max_outstanding": 33}, ValueError, r"max_outstanding must be an integer in 1..32, not 33"),
    ({"n_pe": 0}, ValueError, r"n_pe must be an integer in 1..128, not 0"),
    ({"results": "both"}, ValueError, r"results must be one of inplace, full, not 'both'"),
    ({"gmem_width": 512}, ValueError, r"unknown GAE kernel parameter\(s\): gmem_width"),
])
def test_config_checks(params, exc, msg):
    with pytest.raises(exc, match=msg):
        GaeKernelConfig.from_dict(params)


def test_config_parts_and_type_checks():
    cfg = GaeKernelConfig.from_dict(CONFIGS["n5-full-il2"])
    assert GaeKernelConfig.from_dict(cfg.to_dict()) == cfg
    accel = cfg.accel
    assert type(accel) is GaeCoreConfig and accel == GaeCoreConfig.from_dict(
        {k: v for k, v in CONFIGS["n5-full-il2"].items()
         if k not in ("gmem_data_width", "max_burst", "max_outstanding")})
    assert (cfg.window_word_bits, cfg.pointer_align) == (64, 16)
    assert cfg.window_bytes == len(cfg.regions) * cfg.region_bytes == 5 * 8192
    assert cfg.shell_version == SHELL_VERSION
    with pytest.raises(TypeError, match="config must be a GaeKernelConfig, not GaeCoreConfig"):
        GaeKernel(accel)
    with pytest.raises(TypeError, match=r"config must be a kernel configuration \(DmaParams\), "
                                        r"not GaeCoreConfig"):
        gae_kernel_register_map(accel)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_register_map_is_the_gae_map_then_the_window_shell(name):
    cfg = GaeKernelConfig.from_dict(CONFIGS[name])
    rm, base = gae_kernel_register_map(cfg), gae_register_map(cfg.accel)
    assert rm == window_kernel_register_map("gae_kernel", base,
                                            gmem_data_width=cfg.gmem_data_width, doc=rm.doc)
    assert rm.registers[:len(base.registers)] == base.registers   # same offsets, fields, docs
    names = ["MEM_PTR_LO", "MEM_PTR_HI", "DMA_OFFSET", "DMA_BYTES", "DMA_CTRL", "DMA_STATUS",
             "DMA_CYCLES", "DMA_WINDOW", "DMA_ALIGN", "SHELL_VERSION"]
    assert [(r.name, r.offset) for r in rm.registers[len(base.registers):]] == \
        [(n, base.span + 4 * i) for i, n in enumerate(names)]
    assert rm.span <= 1 << 12 and rm.protocol == "ap_ctrl_hs" and rm.name == "gae_kernel"
    lo = rm["MEM_PTR_LO"].fields[0]
    ab = (cfg.pointer_align - 1).bit_length()
    assert (lo.lsb, lo.width, lo.access) == (ab, 32 - ab, "rw")
    assert {f.name: f.lsb for f in rm["DMA_STATUS"].fields} == DMA_FLAGS
    assert {f.name: (f.lsb, f.access) for f in rm["DMA_CTRL"].fields} == \
        {"START": (0, "rw_sc"), "DIR": (1, "rw")}
    assert (TO_ACCELERATOR, TO_BUFFER) == (0, 1)
    consts = rm.info_values(cfg)
    assert consts["DMA_WINDOW"] == cfg.window_bytes
    assert consts["DMA_ALIGN"] == cfg.gmem_data_width // 8 | cfg.axi_data_width // 8 << 16
    assert consts["SHELL_VERSION"] == SHELL_VERSION == 1
    assert {k: v for k, v in consts.items() if k.startswith("HW_")} == \
        base.info_values(cfg.accel)
    assert BLOCKS["gae-kernel"].regmap(cfg) == rm


def test_ports_kernel_args_and_registry():
    cfg = GaeKernelConfig.from_dict(CONFIGS["n8"])
    k = GaeKernel(cfg)
    names = set(k.signature.members)
    assert {"ap_clk", "ap_rst_n", "interrupt"} <= names
    assert all(n in ("ap_clk", "ap_rst_n", "interrupt")
               or n.startswith(("s_axi_control_", f"{GMEM}_")) for n in names)
    assert not any(n.startswith("s_axi_mem") for n in names)
    assert len(k.s_axi_control_awaddr) == 12 and len(k.m_axi_gmem_araddr) == 64
    assert len(k.m_axi_gmem_wdata) == cfg.gmem_data_width == 512
    assert len(k.m_axi_gmem_awid) == len(k.m_axi_gmem_arid) == 1
    assert (k.window_bytes, k.pointer_align, k.word_bytes) == (3 * 256 * 1024, 64, 16)
    assert k.config == cfg and k.regmap == gae_kernel_register_map(cfg)
    assert isinstance(k.accelerator, GaeAccelerator) and k.accelerator.config == cfg.accel
    assert k.accelerator.mem_words * 16 == k.window_bytes
    block = BLOCKS["gae-kernel"]
    assert (block.role, block.family, block.module) == ("kernel", "gae", "gae_kernel")
    assert block.accelerator is BLOCKS["gae-accel"]
    assert block.kernel_args(cfg) == {
        "m_axi": {GMEM: {"data_width": 512, "max_burst": 256, "outstanding": 4}},
        "pointers": [{"name": "MEM_PTR", "port": GMEM, "lo": "MEM_PTR_LO", "hi": "MEM_PTR_HI",
                      "offset": gae_register_map(cfg.accel).span}],
        "scalars": ["NUM_TIMESTEPS", "NUM_TRAJECTORIES", "GAMMA", "GAMMA_LAMBDA",
                    "REWARD_SCALE", "REWARD_OFFSET", "VALUE_SCALE", "VALUE_OFFSET",
                    "ADV_SCALE", "ADV_OFFSET", "RTG_SCALE", "RTG_OFFSET"]}
    full = GaeKernelConfig.from_dict(CONFIGS["n5-full-il2"])
    args = block.kernel_args(full)
    assert args["m_axi"] == {GMEM: {"data_width": 128, "max_burst": 16, "outstanding": 2}}
    assert args["scalars"][-1] == "VALUE_OFFSET" and len(args["scalars"]) == 8
    assert BLOCKS["gae-accel"].kernel_args(full.accel) is None


def test_copy_plan_and_kernel_cycles():
    cfg = GaeKernelConfig.from_dict(CONFIGS["n8"])
    rb = cfg.region_bytes
    plan = copy_plan(cfg, 1024, 64)                              # G = 8
    assert plan == {"in": [("rewards", 0, 8192 * 16), ("values", rb, 8200 * 16),
                           ("dones", 2 * rb, 8192 * 16)],
                    "out": [("rewards", 0, 8192 * 16), ("values", rb, 8192 * 16)]}
    # Three copies in of N words (N + L + 7 cycles each), two out (N + L + 6 + R: the
    # accelerator's memory read with latency R), then the run.
    R = HOST_READ_LATENCY
    assert kernel_run_cycles(cfg, 1024, 64, latency=3) == \
        (8192 + 8200 + 8192 + 2 * 8192) + 3 * (3 + 7) + 2 * (3 + 6 + R) \
        + run_cycles(cfg.accel, 1024, 64)
    odd = GaeKernelConfig.from_dict(CONFIGS["n5-full-il2"])
    plan = copy_plan(odd, 7, 6)                                  # G = 2
    assert [n for _, _, n in plan["in"]] == [14 * 8, 16 * 8, 14 * 8]
    assert [(r, off) for r, off, _ in plan["out"]] == [("adv", 3 * 8192), ("rtg", 4 * 8192)]
    assert [n for _, _, n in plan["out"]] == [14 * 4 * 8] * 2   # 5 x 32 bits: 4 words
    for c, (T, M) in ((cfg, (1, 1)), (cfg, (1024, 64)), (odd, (40, 20)), (odd, (3, 11))):
        for _, off, n in copy_plan(c, T, M)["in"] + copy_plan(c, T, M)["out"]:
            assert off % c.pointer_align == 0 and n % (c.axi_data_width // 8) == 0
            assert off + n <= c.window_bytes
    assert copy_cycles(0, 16, latency=7) == 3 and copy_cycles(160, 16, latency=7) == 24


@TINIES
def test_verilog_lint_clean(tmp_path, params):
    path = tmp_path / "gae_kernel.v"
    path.write_text(verilog.convert(GaeKernel(GaeKernelConfig.from_dict(params)),
                                    name="gae_kernel", emit_src=False))
    res = subprocess.run(["verilator", "--lint-only", "-Wall", str(WAIVERS), str(path)],
                         capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stdout + res.stderr


# == whole sessions in Amaranth's simulator =======================================================
def _kernel(params):
    return GaeKernel(GaeKernelConfig.from_dict(params))


@TINIES
def test_batches_bit_exact_with_exact_cycles(params):
    """Shapes that fill the memory, one trajectory, a partial last group, back to back:
    results bit-exact, DMA_CYCLES of every copy and CYCLES exact, their sum is
    kernel_run_cycles."""
    rng = np.random.default_rng(5)
    dut = _kernel(params)
    cfg = dut.config

    async def tb(host):
        out = []
        for T, M in ((cfg.capacity, cfg.max_trajectories), (3, 1), (2, cfg.n_pe + 1)):
            got = await gae_batch(host, cfg, random_codes(cfg, T, M, rng, p_done=0.2),
                                  random_args(cfg, T, M), latency=L)
            out.append((T, M, got))
        return out

    for T, M, got in simulate_kernel(dut, tb, latency=L):
        total = sum(c for _, _, c in got["copies"]) + got["cycles"]
        assert total == kernel_run_cycles(cfg, T, M, latency=L), (T, M, total)


@TINIES
def test_batches_bit_exact_under_random_stalls(params):
    """READY and VALID of the device memory dropped 30 % of the cycles, latency 3."""
    rng = np.random.default_rng(6)
    dut = _kernel(params)
    cfg = dut.config

    async def tb(host):
        for T, M in ((cfg.capacity, cfg.max_trajectories), (5, cfg.n_pe + 1)):
            await gae_batch(host, cfg, random_codes(cfg, T, M, rng, p_done=0.2),
                            random_args(cfg, T, M))
        return host.ram.max_reads, host.ram.max_writes

    reads, writes = simulate_kernel(dut, tb, stall=0.3, latency=3, seed=2)
    assert reads > 1 and writes > 1       # bursts were in flight together


@TINIES
def test_refused_runs_touch_nothing(params):
    rng = np.random.default_rng(7)
    dut = _kernel(params)
    assert simulate_kernel(dut, lambda host: refused_runs(host, dut.config, rng))


@TINIES
def test_copies_and_starts_refused_during_a_run(params):
    rng = np.random.default_rng(8)
    dut = _kernel(params)

    async def tb(host):
        await locked_copies(host, dut.config, rng)
        return True

    assert simulate_kernel(dut, tb, latency=L)


@TINIES
def test_range_refusals(params):
    dut = _kernel(params)

    async def tb(host):
        await range_refusals(host, dut.config, latency=L)
        return True

    assert simulate_kernel(dut, tb, latency=L)


def test_registers_constants_and_bus_errors():
    """The register file (tb/gae_kernel_cases.registers), unmapped addresses answer SLVERR;
    error responses of device memory set READ_ERROR or WRITE_ERROR (the copy still ends), the
    next copy clears them."""
    dut = _kernel(TINY)
    cfg = dut.config
    rng = np.random.default_rng(9)
    bad_read = BUFFER + cfg.region_bytes + 8           # 2nd beat of the values region
    bad_write = BUFFER + 16                            # 3rd beat of the rewards region

    async def tb(host):
        await registers(host, cfg)
        assert await host.wr(host.regs.span, 1) == 2 and await host.wr(0xFFC, 1) == 2
        assert await host.wr("SHELL_VERSION", 0) == 0
        T, M = 4, 3
        codes, args = random_codes(cfg, T, M, rng), random_args(cfg, T, M)
        plan = copy_plan(cfg, T, M)
        flags = []
        for _, off, n in plan["in"]:
            flags.append((await host.copy(off, n, TO_ACCELERATOR))[0])
        for _, off, n in plan["out"]:
            flags.append((await host.copy(off, n, TO_BUFFER))[0])
        host.ram.bad.clear()
        host.ram.bad_writes.clear()
        await gae_batch(host, cfg, codes, args, latency=L)         # flags clear again
        return flags

    flags = simulate_kernel(dut, tb, latency=L, bad={bad_read}, bad_writes={bad_write})
    rd, wr = 1 << DMA_FLAGS["READ_ERROR"], 1 << DMA_FLAGS["WRITE_ERROR"]
    done = 1 << DMA_FLAGS["DONE"]
    # (SimAxiRam answers SLVERR to writes of the `bad` beats too: the values copied out)
    assert flags == [done, done | rd, done, done | wr, done | wr], [hex(f) for f in flags]
