"""The GAE kernel (:class:`~rtl_gen.gae.kernel.GaeKernel`, the window DMA shell) sessions of both
test tiers: configurations, the memory image and the expected results, and the scenarios a host
runs through the kernel's ports.

Every scenario is a coroutine over a *host* with the calls of :class:`window_sim.WindowSimHost`
(Amaranth's simulator, tb/gae/test_kernel_sim.py) and :class:`window_host.WindowHost` (cocotb +
Verilator, tb/gae/test_kernel_rtl.py): ``wr``/``rd``/``fields``/``status``, ``copy``,
``kick``/``wait_done``, ``set_pointer``, the buffer (``ptr``, ``load``, ``dump``) and the bursts
(``reads``, ``writes``). So both tiers run the same sessions:

* :func:`gae_batch` -- a whole GAE batch the window way: the codes into the buffer, the copies
  in of :func:`~sw.gae.spec.copy_plan`, the run, the copies out; results bit for bit against
  :func:`sw.gae.model.gae_core`, the AXI bursts of every copy against
  :meth:`AxiDma.bursts <rtl_gen.shell.dma.AxiDma.bursts>`, no other buffer byte changed, and
  (given the memory latency) DMA_CYCLES of every copy and the run's CYCLES exactly;
* :func:`refused_runs`, :func:`locked_copies`, :func:`range_refusals`, :func:`registers` --
  the refusals and the register file.
"""

import numpy as np

from fcov import blocks as fcov_blocks
from gae_cases import random_args, random_codes
from sw.gae.spec import copy_plan, run_cycles
from sw.registry import shipped
from sw.shell.spec import DMA_FLAGS, SHELL_VERSION, TO_ACCELERATOR, TO_BUFFER, copy_cycles

__all__ = ["CONFIGS", "HEAVY", "rtl_params", "JUNK", "run_kernel", "image_blocks", "region_spans", "random_image",
           "expected", "results_of", "assert_results", "copy_bursts", "start_run", "gae_batch",
           "refused_runs", "locked_copies", "range_refusals", "registers"]

#: The thorough tier's configurations: the shipped kernels (``gae_kernel_n8``: HEPPO's
#: 64 x 1024 on 8 PEs, 128-bit words, 512-bit m_axi; ``gae_kernel_n64``: 64 PEs, 512-bit
#: words, one a beat: ``heavy``), the n64 kernel's code paths small (8 PEs whose 64-bit words
#: of codes are the m_axi beat: no padding, one word a beat), and full results on 5 PEs with
#: interleaved PEs, 64-bit words and a 128-bit m_axi (two words a beat, copies that end in
#: half a beat).
_SHIPPED = {m: p for m, _, p in shipped(family="gae", role="kernel")}
CONFIGS = {
    "n8": _SHIPPED["gae_kernel_n8"],
    "n64": _SHIPPED["gae_kernel_n64"],
    "n8-w64": {"n_pe": 8, "max_trajectories": 24, "capacity": 64, "axi_data_width": 64,
               "gmem_data_width": 64, "max_burst": 16, "max_outstanding": 2},
    "n5-full-il2": {"n_pe": 5, "max_trajectories": 20, "capacity": 40, "results": "full",
                    "axi_data_width": 64, "gmem_data_width": 128, "max_burst": 16,
                    "max_outstanding": 2, "pe": {"k": 2, "mode": "interleaved"}},
}

#: Configurations whose Verilator model takes minutes of C++ compile for the code paths of a
#: smaller one (``make test-heavy``).
HEAVY = {"n64": "n8-w64"}


def rtl_params():
    """``pytest.param`` of every configuration, the heavy ones marked."""
    import pytest
    return [pytest.param(n, marks=pytest.mark.heavy) if n in HEAVY else n for n in CONFIGS]


#: What the buffer holds where no block was written (so a stray write shows).
JUNK = 0xA5

_DONE = 1 << DMA_FLAGS["DONE"]


def _flag(*names):
    return _DONE | sum(1 << DMA_FLAGS[n] for n in names)


def run_kernel(name, test_file, *, seed):
    """:func:`cocotb_util.run_block` of the GAE kernel of ``CONFIGS[name]`` with the cocotb
    tests of ``test_file``, holding a lock on its build directory: tb/gae/test_kernel_rtl.py
    and test_kernel_xrt_rtl.py share each configuration's Verilator model, and two pytest-xdist
    workers must not build it (or write its results.xml) at the same time."""
    import fcntl
    import hashlib
    import json

    from cocotb_util import ROOT, run_block

    params = CONFIGS[name]
    key = hashlib.sha256(json.dumps(["gae-kernel", params], sort_keys=True).encode())
    # not the build's own lock (rtl_gen.sim_build.build_sim, "<block>-<hash>.lock"): this
    # one is held around the whole run, and run_block takes that one inside it
    lock = ROOT / "build" / "sim" / f"gae-kernel-{key.hexdigest()[:12]}.run.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            run_block("gae-kernel", params, test_file, seed=seed)
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


# -- images and results --------------------------------------------------------------------------
def image_blocks(cfg, codes) -> dict:
    """``{window offset: bytes}``: what a host writes into the buffer for these codes."""
    from sw.gae.layout import pack_rows, region_base

    values = np.vstack([codes["values"], np.asarray(codes["bootstrap"])[None]])
    return {region_base(cfg, name): pack_rows(cfg, name, rows) for name, rows in
            (("rewards", codes["rewards"]), ("values", values), ("dones", codes["dones"]))}


def region_spans(cfg) -> list:
    """``(region, window offset, bytes)`` of the memory words each region holds (``depth``
    rows; the window's rows past them address no memory)."""
    from sw.gae.layout import region_base, word_bytes

    return [(name, region_base(cfg, name), cfg.depth * word_bytes(cfg, name))
            for name in cfg.regions]


def random_image(cfg, rng) -> dict:
    """``{window offset: bytes}``: every memory word of every region random (the lanes only:
    the padding bits are not stored)."""
    from sw.gae.layout import lane_width, pack_rows

    out = {}
    for name, base, _ in region_spans(cfg):
        w = lane_width(cfg, name)
        rows = rng.random((cfg.depth, cfg.n_pe)) < 0.5 if w == 1 else \
            rng.integers(-(1 << (w - 1)), 1 << (w - 1), (cfg.depth, cfg.n_pe))
        out[base] = pack_rows(cfg, name, rows)
    return out


def expected(cfg, codes, args) -> dict:
    """:func:`sw.gae.model.gae_core` of one batch."""
    from sw.gae.model import gae_core

    return gae_core(codes["rewards"], codes["values"], codes["bootstrap"], codes["dones"], args,
                    cfg.accel)


def results_of(cfg, read, T, M):
    """``(adv, rtg)`` from the image through ``read(window offset, nbytes) -> bytes``."""
    from sw.gae.layout import region_base, unpack_rows, word_bytes

    G = -(-M // cfg.n_pe)
    names = ("rewards", "values") if cfg.results == "inplace" else ("adv", "rtg")
    return [unpack_rows(cfg, n, read(region_base(cfg, n), T * G * word_bytes(cfg, n)), T, M)
            for n in names]


def assert_results(exp, adv, rtg):
    for name, got, want in (("advantages", adv, exp["adv"]), ("rtg", rtg, exp["rtg"])):
        bad = np.argwhere(got != want)
        assert bad.size == 0, f"{name}: {len(bad)} differ, first at {bad[0]}: " \
                              f"{got[tuple(bad[0])]} vs {want[tuple(bad[0])]}"


def copy_bursts(cfg, ptr, offset, nbytes) -> list:
    """``(address, beats)`` of the bursts a copy of ``nbytes`` at window ``offset`` issues."""
    from rtl_gen.shell.dma import AxiDma

    wb = cfg.gmem_data_width // 8
    return AxiDma.bursts(ptr + offset, -(-nbytes // wb), data_width=cfg.gmem_data_width,
                         max_burst=cfg.max_burst)


# -- sessions ------------------------------------------------------------------------------------
async def _checked_copy(host, cfg, offset, nbytes, direction, latency):
    """A copy that must succeed: DONE alone, exactly the bursts of :func:`copy_bursts` in its
    direction and none in the other, DMA_CYCLES = ``copy_cycles`` when ``latency`` is given.
    Returns DMA_CYCLES."""
    r0, w0 = len(host.reads), len(host.writes)
    st, cycles = await host.copy(offset, nbytes, direction)
    assert st == _DONE, (offset, nbytes, direction, f"DMA_STATUS={st:#x}")
    want = copy_bursts(cfg, host.ptr, offset, nbytes)
    got_r, got_w = host.reads[r0:], host.writes[w0:]
    assert (got_r, got_w) == ((want, []) if direction == TO_ACCELERATOR else ([], want)), \
        (offset, nbytes, direction, got_r, got_w)
    if latency is not None:
        want_cycles = copy_cycles(nbytes, cfg.axi_data_width // 8, latency=latency,
                                  to_device=direction == TO_BUFFER)
        assert cycles == want_cycles, (offset, nbytes, direction, cycles, want_cycles)
    return cycles


async def start_run(host, args):
    """The argument registers, then AP_START (interrupt enabled)."""
    names = {r.name for r in host.regs.user_registers}
    for name, value in vars(args).items():
        if name.upper() in names:
            await host.wr(name.upper(), value)
    await host.kick()


async def gae_batch(host, cfg, codes, args, *, latency=None) -> dict:
    """One GAE batch through host-commanded copies, checked (module docstring).

    ``latency``: the device memory's latency (cycles) for exact DMA_CYCLES; None when it
    stalls. Returns ``{"copies": [(direction,
    bytes, DMA_CYCLES)], "cycles": run cycles (CYCLES + 1), "status": STATUS fields}``.
    """
    T, M = args.num_timesteps, args.num_trajectories
    plan = copy_plan(cfg, T, M)
    window = cfg.window_bytes
    host.load(host.ptr, bytes([JUNK]) * window)
    blocks = image_blocks(cfg, codes)
    # The blocks the driver writes are exactly those the plan copies in.
    assert [(off, len(data)) for off, data in blocks.items()] == \
        [(off, n) for _, off, n in plan["in"]]
    for off, data in blocks.items():
        host.load(host.ptr + off, data)
    before = host.dump(host.ptr, window)
    copies = []
    for _, off, n in plan["in"]:
        copies.append((TO_ACCELERATOR, n,
                       await _checked_copy(host, cfg, off, n, TO_ACCELERATOR, latency)))
    r0, w0 = len(host.reads), len(host.writes)
    await start_run(host, args)
    await host.wait_done()
    assert (len(host.reads), len(host.writes)) == (r0, w0), "a run touched device memory"
    st = await host.status()
    exp = expected(cfg, codes, args)
    assert st["ERROR"] == exp["error"] == 0, st
    for flag in ("DEQUANT_OVERFLOW", "PE_OVERFLOW", "REQUANT_OVERFLOW"):
        assert bool(st[flag]) == exp[flag.lower()], (flag, st)
    assert st["START_REFUSED"] == 0
    cycles = await host.rd("CYCLES") + 1
    assert cycles == run_cycles(cfg.accel, T, M), (T, M, cycles)
    for _, off, n in plan["out"]:
        copies.append((TO_BUFFER, n, await _checked_copy(host, cfg, off, n, TO_BUFFER, latency)))
    after = host.dump(host.ptr, window)
    adv, rtg = results_of(cfg, lambda off, n: after[off:off + n], T, M)
    assert_results(exp, adv, rtg)
    fcov_blocks.gae_run(cfg.accel, args, codes["dones"])
    last = 0
    for lo, hi in sorted((off, off + n) for _, off, n in plan["out"]) + [(window, window)]:
        assert after[last:lo] == before[last:lo], f"a buffer byte in {last:#x}..{lo:#x} changed"
        last = hi
    return {"copies": copies, "cycles": cycles, "status": st}


async def _load_image(host, cfg, image):
    """Write ``image`` into the buffer and copy every region in."""
    for off, data in image.items():
        host.load(host.ptr + off, data)
    for _, off, n in region_spans(cfg):
        st, _ = await host.copy(off, n, TO_ACCELERATOR)
        assert st == _DONE, f"DMA_STATUS={st:#x}"


async def _check_image(host, cfg, image):
    """Copy every region out into a buffer of junk: it must read back as ``image``."""
    host.load(host.ptr, bytes([JUNK]) * cfg.window_bytes)
    for _, off, n in region_spans(cfg):
        st, _ = await host.copy(off, n, TO_BUFFER)
        assert st == _DONE, f"DMA_STATUS={st:#x}"
    for off, data in image.items():
        got = host.dump(host.ptr + off, len(data))
        assert got == data, f"region at {off:#x} changed: first byte {_first_diff(got, data)}"


def _first_diff(a, b):
    return next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)


def _with(args, **change):
    for k, v in change.items():
        setattr(args, k, v)
    return args


async def refused_runs(host, cfg, rng):
    """Each STATUS.ERROR (argument checks of :func:`sw.gae.spec.check_args`): AP_DONE at once,
    not one AXI burst, the accelerator's memory (every word of every region) unchanged, the
    copy engine's DMA_STATUS unchanged; a batch afterwards is right."""
    image = random_image(cfg, rng)
    await _load_image(host, cfg, image)
    dma = await host.rd("DMA_STATUS")
    one = 1 << cfg.pe.coef_frac
    cases = [((0, 3), {}, 1), ((4, 0), {}, 2), ((cfg.depth, 1), {}, 3),
             ((cfg.capacity, cfg.max_trajectories + 1), {}, 3),        # (T+1)*G > depth
             ((3, 4097), {}, 3), ((3, 2), {"gamma": one + 1}, 4),
             ((3, 2), {"gamma_lambda": one + 1}, 4)]
    for (T, M), change, err in cases:
        r0, w0 = len(host.reads), len(host.writes)
        await start_run(host, _with(random_args(cfg, T, M), **change))
        await host.wait_done()
        st = await host.status()
        assert st["ERROR"] == err, (T, M, change, st)
        assert (len(host.reads), len(host.writes)) == (r0, w0), (T, M, change)
        assert await host.rd("DMA_STATUS") == dma
    await _check_image(host, cfg, image)
    T, M = 3, cfg.n_pe + 1
    return await gae_batch(host, cfg, random_codes(cfg, T, M, rng), random_args(cfg, T, M))


async def locked_copies(host, cfg, rng):
    """While a run is in progress a copy either way is refused (DONE and LOCKED, DMA_CYCLES 0,
    no burst, the buffer and the accelerator's memory untouched) and AP_START is refused
    (STATUS.START_REFUSED); the run's results are right. A run started during a copy makes the
    copy's remaining words drop (LOCKED, the copy still ends); the next copy clears the flags.
    """
    T, M = cfg.capacity, cfg.max_trajectories
    codes, args = random_codes(cfg, T, M, rng), random_args(cfg, T, M)
    plan = copy_plan(cfg, T, M)
    host.load(host.ptr, bytes([JUNK]) * cfg.window_bytes)
    for off, data in image_blocks(cfg, codes).items():
        host.load(host.ptr + off, data)
    for _, off, n in plan["in"]:
        assert (await host.copy(off, n, TO_ACCELERATOR))[0] == _DONE
    names = {r.name for r in host.regs.user_registers}
    for name, value in vars(args).items():
        if name.upper() in names:
            await host.wr(name.upper(), value)
    await host.wr("GIER", 1)
    await host.wr("IP_IER", 1)
    # Junk where the copy-in would read, so a copy that went through would show.
    _, off_in, n_in = plan["in"][0]
    _, off_out, n_out = plan["out"][0]
    host.load(host.ptr + off_in, bytes([0x5A]) * n_in)
    await host.wr("DMA_OFFSET", off_in)
    await host.wr("DMA_BYTES", n_in)
    before = host.dump(host.ptr, cfg.window_bytes)
    r0, w0 = len(host.reads), len(host.writes)
    await host.wr("CTRL", 1)                                          # the run starts
    await host.wr("DMA_CTRL", 1)                                      # copy in: refused
    while not (st := await host.rd("DMA_STATUS")) & _DONE:
        pass
    cycles = await host.rd("DMA_CYCLES")
    assert (st, cycles) == (_flag("LOCKED"), 0), (f"DMA_STATUS={st:#x}", cycles)
    st, cycles = await host.copy(off_out, n_out, TO_BUFFER)           # copy out: refused
    assert (st, cycles) == (_flag("LOCKED"), 0), (f"DMA_STATUS={st:#x}", cycles)
    await host.wr("CTRL", 1)                                          # AP_START: refused
    ctrl = await host.rd("CTRL")
    assert not ctrl & 0b110, f"the run ended before the refusals were tested (CTRL={ctrl:#x})"
    await host.wait_done()
    assert (len(host.reads), len(host.writes)) == (r0, w0), "a refused copy moved data"
    assert host.dump(host.ptr, cfg.window_bytes) == before
    st = await host.status()
    exp = expected(cfg, codes, args)
    assert st["ERROR"] == 0 and st["START_REFUSED"] == 1, st
    for _, off, n in plan["out"]:
        assert (await host.copy(off, n, TO_BUFFER))[0] == _DONE
    after = host.dump(host.ptr, cfg.window_bytes)
    assert_results(exp, *results_of(cfg, lambda off, n: after[off:off + n], T, M))
    # A run started during a copy: the words still due are dropped, LOCKED, the copy ends.
    _, off, n = max(region_spans(cfg), key=lambda s: s[2])
    await host.copy(off, n, TO_ACCELERATOR, wait=False)
    await host.wr("CTRL", 1)
    while (st := await host.rd("DMA_STATUS")) & 1:                    # BUSY
        pass
    assert st == _flag("LOCKED"), f"DMA_STATUS={st:#x}"
    await host.wait_done()
    st, cycles = await host.copy(0, 0, TO_ACCELERATOR)                # flags clear at a start
    assert (st, cycles) == (_DONE, 3), (f"DMA_STATUS={st:#x}", cycles)


async def range_refusals(host, cfg, *, latency=None):
    """Misaligned offsets or lengths and blocks past the window (also through a 32-bit
    overflow of offset + bytes) are refused: DONE and RANGE, DMA_CYCLES 0, no burst, the buffer
    untouched. 0 bytes and the whole window are accepted."""
    window, align, word = cfg.window_bytes, cfg.pointer_align, cfg.axi_data_width // 8
    host.load(host.ptr, bytes([JUNK]) * window)
    before = host.dump(host.ptr, window)
    cases = ([(align // 2, word)] + ([(word, word)] if align > word else [])   # offsets
             + [(0, word // 2), (0, word + 1)]                                   # lengths
             + [(0, window + word), (window - align, 2 * align), (window + align, 0),
                (0x1_0000_0000 - align, 2 * align)])                             # past the end
    for direction in (TO_ACCELERATOR, TO_BUFFER):
        for off, n in cases:
            r0, w0 = len(host.reads), len(host.writes)
            st, cycles = await host.copy(off, n, direction)
            assert (st, cycles) == (_flag("RANGE"), 0), (off, n, direction, f"{st:#x}", cycles)
            assert (len(host.reads), len(host.writes)) == (r0, w0), (off, n, direction)
    assert host.dump(host.ptr, window) == before
    for off in (0, window):
        st, cycles = await host.copy(off, 0, TO_BUFFER)
        assert (st, cycles) == (_DONE, 3), (off, f"{st:#x}", cycles)
    # The whole window out (its rows past a region's depth read whatever the memory gives).
    await _checked_copy(host, cfg, 0, window, TO_BUFFER, latency)


async def registers(host, cfg):
    """The constants (DMA_WINDOW, DMA_ALIGN, SHELL_VERSION, HW_*), MEM_PTR (its low bits read
    0), the other host-writable registers read back, DMA_CTRL.START self-clearing; MEM_PTR is
    restored."""
    rm = host.regs
    for name, value in rm.info_values(cfg).items():
        assert await host.rd(name) == value, name
    assert await host.rd("SHELL_VERSION") == SHELL_VERSION == 1
    assert await host.rd("DMA_WINDOW") == cfg.window_bytes
    assert await host.rd("DMA_ALIGN") == cfg.pointer_align | (cfg.axi_data_width // 8) << 16
    assert await host.rd("MEM_PTR_LO") == host.ptr & 0xFFFF_FFFF
    assert await host.rd("MEM_PTR_HI") == host.ptr >> 32
    skip = {"CTRL", "GIER", "IP_IER", "IP_ISR", "DMA_CTRL"}
    for reg in rm.user_registers:
        rw = sum(f.mask for f in reg.fields if f.access == "rw")
        if rw and reg.name not in skip:
            await host.wr(reg.name, 0xFFFF_FFFF)
            assert await host.rd(reg.name) == rw, reg.name
    assert rm["MEM_PTR_LO"].fields[0].mask == 0xFFFF_FFFF & -cfg.pointer_align
    await host.wr("DMA_CTRL", rm["DMA_CTRL"].pack({"START": 0, "DIR": 1}))
    assert await host.rd("DMA_CTRL") == rm["DMA_CTRL"].pack({"DIR": 1})
    await host.wr("DMA_OFFSET", 0)
    await host.wr("DMA_BYTES", 0)
    await host.wr("DMA_CTRL", 1)                     # a copy of nothing: START clears at once
    assert await host.rd("DMA_CTRL") == 0
    while await host.rd("DMA_STATUS") != _DONE:
        pass
    for name in ("DMA_STATUS", "DMA_CYCLES"):        # read-only: writes are ignored
        before = await host.rd(name)
        await host.wr(name, 0xFFFF_FFFF)
        assert await host.rd(name) == before, name
    await host.set_pointer()
