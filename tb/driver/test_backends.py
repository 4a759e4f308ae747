"""PYNQ and XRT backends against fake ``pynq`` / ``pyxrt`` modules (injected in sys.modules).

The fakes implement the parts of the real APIs the backends use, as documented (PYNQ 3:
``Overlay.ip_dict`` with ``<instance>/<interface>`` entries for an IP with two address ranges,
``MMIO.read``/``MMIO.write``, ``DefaultIP`` with ``bindto`` registration, ``Interrupt`` with an
``async wait()``; pyxrt: ``device``, ``xclbin``, ``device.load_xclbin``, ``bo`` with
``write``/``read``/``sync``/``address``, ``ip`` or ``kernel`` ``read_register``/
``write_register``), backed by a :class:`~sw.gae.device.GoldenDevice`. The GAE kernel is a
window kernel: the fake XRT kernel is the golden device in the window shell model
(:class:`xrt_fake.WindowShell`, the contract of :mod:`sw.driver.xrt_device`), with separate
host and device copies of the buffer so a missing ``sync`` shows; the host commands the copies
of :func:`sw.gae.spec.copy_plan` (none out for a refused run). Every backend must give exactly
what the GoldenDevice gives. (``tb/gae/test_kernel_xrt_rtl.py`` runs XrtDevice on the kernel's
RTL.)
"""

import asyncio
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import numpy as np
import pytest

from sw.gae.spec import GaeCoreConfig, GaeKernelConfig
from sw.gae.spec import copy_plan
from sw.shell.spec import copy_cycles
from sw.gae.spec import gae_register_map
from sw.driver import GAE_VLNVS, GaeDriver, GaeError, GoldenDevice
from sw.driver.mmio import BusError
from sw.gae.spec import GaeCoreArgs
from sw.shell.spec import DMA_FLAGS, SHELL_VERSION

GAE_VLNV = GAE_VLNVS[0]      # rlk:accel:gae_accel_n8:1.0, as packaged by rtl_gen.vivado
from sw.driver import pynq_device as pynq_backend
from sw.driver.pynq_device import ACCELERATOR_VLNVS, PynqMemory, find_gae_windows

from driver_util import SMALL, rollout
from xrt_fake import FAKE_LATENCY, WindowShell, window_pyxrt

CTRL_BASE, MEM_BASE = 0xA000_0000, 0xA010_0000


def reference(cfg, batches, **kw):
    """What a GaeDriver on a plain GoldenDevice returns for these batches."""
    drv = GaeDriver(GoldenDevice(cfg), cfg, **kw)
    return [drv.compute(*b, 0.99, 0.95) for b in batches]


def batches(n=2):
    rng = np.random.default_rng(21)
    return [rollout(rng, 20, 6) for _ in range(n)]


def assert_same(got, want):
    for (a, r), (ea, er) in zip(got, want):
        np.testing.assert_array_equal(a, ea)
        np.testing.assert_array_equal(r, er)


# -- fake pynq -------------------------------------------------------------------------------------
def fake_pynq(dev, *, with_interrupt=True, split=True, extra_ip=None):
    cfg = dev.config
    mod = types.ModuleType("pynq")
    windows = {CTRL_BASE: dev.control, MEM_BASE: dev.memory}
    mod.accesses = []

    class MMIO:
        def __init__(self, base_addr, length=4, **kw):
            self.base_addr, self.length = base_addr, length
            self.array = None                          # not a numpy array: per-word access

        def _target(self, offset):
            assert 0 <= offset < self.length, (hex(self.base_addr), offset)
            return windows[self.base_addr]

        def read(self, offset=0):
            mod.accesses.append(("r", self.base_addr, offset))
            t = self._target(offset)
            if self.base_addr == CTRL_BASE:
                return t.read32(offset)
            return int.from_bytes(t.read(offset, 4), "little")

        def write(self, offset, data):
            mod.accesses.append(("w", self.base_addr, offset))
            t = self._target(offset)
            if type(data) is int:
                if self.base_addr == CTRL_BASE:
                    t.write32(offset, data)
                else:
                    t.write(offset, data.to_bytes(4, "little"))
            elif type(data) is bytes:
                assert self.base_addr == MEM_BASE and len(data) % 4 == 0
                t.write(offset, data)
            else:
                raise ValueError("Data type must be int or bytes.")

    class Interrupt:
        def __init__(self, pinname):
            if pinname not in mod.PL.interrupt_pins:
                raise ValueError(f"No Pin of name {pinname} found")
            self.waits = 0

        async def wait(self):
            self.waits += 1
            while not dev.interrupt:
                dev.sleep(1e-6)
                await asyncio.sleep(0)

    drivers = {}

    class RegisterIP(type):
        def __init__(cls, name, bases, attrs):
            for vlnv in attrs.get("bindto", ()):
                drivers[vlnv] = cls
                drivers[vlnv.rpartition(":")[0]] = cls
            super().__init__(name, bases, attrs)

    class DefaultIP(metaclass=RegisterIP):
        def __init__(self, description):
            self.mmio = MMIO(description["phys_addr"], description["addr_range"])
            self._interrupts = description.get("interrupts", {})
            for name, details in self._interrupts.items():
                setattr(self, name, Interrupt(details["fullpath"]))

        @property
        def register_map(self):
            raise AttributeError("register_map only available if the .hwh is provided")

    ctrl_range = 1 << gae_register_map(cfg).min_addr_width
    mem_range = 1 << cfg.mem_addr_bits
    irq = {"interrupt": {"controller": "axi_intc_0", "index": 0,
                         "fullpath": "gae_accel_0/interrupt"}} if with_interrupt else {}
    if split:
        ip_dict = {
            "gae_accel_0/s_axi_control": {"phys_addr": CTRL_BASE, "addr_range": ctrl_range,
                                          "type": GAE_VLNV, "mem_id": "s_axi_control",
                                          "fullpath": "gae_accel_0/s_axi_control",
                                          "interrupts": irq},
            "gae_accel_0/s_axi_mem": {"phys_addr": MEM_BASE, "addr_range": mem_range,
                                      "type": GAE_VLNV, "mem_id": "s_axi_mem",
                                      "fullpath": "gae_accel_0/s_axi_mem", "interrupts": {}},
        }
    else:
        ip_dict = {"gae_accel_0": {"phys_addr": CTRL_BASE, "addr_range": ctrl_range,
                                   "type": GAE_VLNV, "mem_id": "s_axi_control",
                                   "fullpath": "gae_accel_0", "interrupts": irq}}
    ip_dict["axi_intc_0"] = {"phys_addr": 0xA020_0000, "addr_range": 0x1000,
                             "type": "xilinx.com:ip:axi_intc:4.1", "mem_id": "s_axi",
                             "fullpath": "axi_intc_0", "interrupts": {}}
    ip_dict.update(extra_ip or {})

    class Overlay:
        def __init__(self, bitfile, download=True):
            self.bitfile, self.download = bitfile, download
            self.ip_dict = ip_dict
            mod.PL.ip_dict = ip_dict

    mod.PL = types.SimpleNamespace(ip_dict=ip_dict, interrupt_pins={
        d["fullpath"]: d for d in irq.values()})
    mod.MMIO, mod.Interrupt, mod.DefaultIP, mod.Overlay = MMIO, Interrupt, DefaultIP, Overlay
    mod._ip_drivers = drivers
    return mod


@pytest.fixture
def pynq_env(monkeypatch):
    """Install a fake pynq (a function of the device) and reset the lazily built GaeIP."""
    def install(dev, **kw):
        mod = fake_pynq(dev, **kw)
        monkeypatch.setitem(sys.modules, "pynq", mod)
        monkeypatch.setattr(pynq_backend, "_IP_CLASSES", {})
        return mod
    return install


@pytest.mark.parametrize("with_interrupt", [True, False])
def test_pynq_device_runs_the_driver_like_the_golden_device(pynq_env, with_interrupt):
    cfg = GaeCoreConfig.from_dict(SMALL)
    dev = GoldenDevice(cfg)
    pynq = pynq_env(dev, with_interrupt=with_interrupt)
    board = pynq_backend.PynqDevice("gae.bit")
    assert board.instance == "gae_accel_0" and board.overlay.bitfile == "gae.bit"
    assert board.has_interrupt is with_interrupt
    drv = GaeDriver(board)
    assert drv.config.depth == cfg.depth and drv._use_irq is with_interrupt
    got = [drv.compute(*b, 0.99, 0.95) for b in batches()]
    assert_same(got, reference(cfg, batches()))
    assert not dev.interrupt
    touched = {base for _, base, _ in pynq.accesses}
    assert touched == {CTRL_BASE, MEM_BASE}
    assert GAE_VLNV in pynq._ip_drivers                # GaeIP was bound before the overlay
    if with_interrupt:
        assert not board.wait_interrupt(0.05)          # nothing running: times out
        assert board._loop.thread.is_alive()
        board.close()
        assert board._loop is None
    else:
        with pytest.raises(NotImplementedError, match="poll CTRL.AP_DONE"):
            board.wait_interrupt(0.05)


def test_pynq_gae_ip_is_bound_to_the_vlnv_and_offers_the_driver(pynq_env):
    cfg = GaeCoreConfig.from_dict(SMALL)
    dev = GoldenDevice(cfg)
    pynq = pynq_env(dev)
    GaeIP = pynq_backend.gae_ip_class()
    assert pynq_backend.gae_ip_class() is GaeIP and pynq_backend.GaeIP is GaeIP
    assert issubclass(GaeIP, pynq.DefaultIP) and GaeIP.bindto == list(GAE_VLNVS)
    assert pynq._ip_drivers[GAE_VLNV] is GaeIP
    overlay = pynq.Overlay("gae.bit")
    ip = GaeIP(overlay.ip_dict["gae_accel_0/s_axi_control"])
    assert ip.register_map.HW_N_PE == cfg.n_pe
    ip.register_map.NUM_TIMESTEPS = 7
    assert dev.control.read32(0x10) == 7
    mem_ip = GaeIP(overlay.ip_dict["gae_accel_0/s_axi_mem"])
    with pytest.raises(AttributeError, match="s_axi_mem window"):
        mem_ip.register_map
    got = [ip.compute(*b, 0.99, 0.95) for b in batches()]
    assert ip.driver() is ip.driver()
    assert_same(got, reference(cfg, batches()))


def test_pynq_windows_are_found_or_explained(pynq_env):
    cfg = GaeCoreConfig.from_dict(SMALL)
    dev = GoldenDevice(cfg)
    pynq = pynq_env(dev, split=False)
    with pytest.raises(ValueError, match="lists no s_axi_mem address range; give mem_addr="):
        pynq_backend.PynqDevice("gae.bit")
    board = pynq_backend.PynqDevice("gae.bit", mem_addr=MEM_BASE,
                                    mem_range=1 << cfg.mem_addr_bits)
    assert_same([GaeDriver(board).compute(*batches(1)[0], 0.99, 0.95)],
                reference(cfg, batches(1)))
    with pytest.raises(ValueError, match="mem_range must be given with mem_addr"):
        pynq_backend.PynqDevice("gae.bit", mem_addr=MEM_BASE)
    with pytest.raises(ValueError, match="give bitfile= or overlay="):
        pynq_backend.PynqDevice()
    two = dict(pynq.PL.ip_dict, gae_accel_1={**pynq.PL.ip_dict["gae_accel_0"],
                                             "fullpath": "gae_accel_1"})
    with pytest.raises(ValueError, match=r"expected one accelerator with VLNV .* found "
                                         r"\['gae_accel_0', 'gae_accel_1'\]"):
        find_gae_windows(two)
    assert find_gae_windows(two, name="gae_accel_1")[0] == "gae_accel_1"
    with pytest.raises(ValueError, match="found none"):
        find_gae_windows({"x": {"type": "a:b:c:1.0"}})
    other_version = {"g": {"type": "rlk:accel:gae_accel:2.3", "mem_id": "s_axi_control"}}
    assert find_gae_windows(other_version)[0] == "g"
    # Without vlnv= any of our accelerators is found; two of them need name= or vlnv=.
    mixed = dict(other_version, r={"type": "rlk:accel:replay_accel_k16:1.0",
                                   "mem_id": "s_axi_control"})
    with pytest.raises(ValueError, match=r"found \['g', 'r'\]; pass name= \(or vlnv=\)"):
        find_gae_windows(mixed)
    gae_prefix, replay_prefix = (next(v for v in ACCELERATOR_VLNVS if f":{m}:" in v)
                                 for m in ("gae_accel", "replay_accel"))
    assert find_gae_windows(mixed, vlnv=replay_prefix)[0] == "r"
    assert find_gae_windows(mixed, vlnv=(gae_prefix, "x:y:z:1.0"))[0] == "g"


def test_pynq_memory_bulk_mode_uses_the_numpy_view():
    class RamMmio:
        def __init__(self):
            self.array = np.zeros(64, np.uint32)

    ram = RamMmio()
    mem = PynqMemory(ram, bulk=True)
    data = bytes(range(32))
    mem.write(8, data)
    assert mem.read(8, 32) == data and ram.array[2] == 0x03020100
    with pytest.raises(ValueError, match="multiple of 4"):
        mem.write(0, b"abc")


def test_without_optional_packages_the_package_imports_and_explains():
    code = textwrap.dedent("""
        import sys
        for name in ("pynq", "pyxrt", "cocotb", "cocotbext", "cocotbext.axi"):
            sys.modules[name] = None                   # "import name" raises ImportError
        import sw.driver as d
        from sw.gae.spec import GaeCoreConfig
        d.GaeDriver(d.GoldenDevice(GaeCoreConfig()))
        for make, text in ((lambda: d.PynqDevice("gae.bit"), "needs the 'pynq' package"),
                           (lambda: d.XrtDevice("gae.xclbin"), "needs XRT's 'pyxrt' module"),
                           (lambda: d.SimDevice(None), "needs cocotb and cocotbext-axi")):
            try:
                make()
            except ImportError as e:
                assert text in str(e), e
            else:
                raise AssertionError("no ImportError")
        print("ok")
    """)
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


# -- fake pyxrt: the GAE kernel is a window kernel -------------------------------------------------
def gae_card(monkeypatch, *, mode="ip", address=0x4_0000_1000, version=SHELL_VERSION, **kw):
    """An XrtDevice on a fake pyxrt whose kernel is a GoldenDevice in the window shell model
    (:class:`xrt_fake.WindowShell`) with the GAE kernel's window and granularities."""
    from sw.driver import XrtDevice

    cfg = GaeCoreConfig.from_dict(SMALL)
    kcfg = GaeKernelConfig(**SMALL)
    dev = GoldenDevice(cfg)
    shell = WindowShell(dev, gae_register_map(cfg), window=kcfg.window_bytes,
                        align=kcfg.pointer_align, word=kcfg.window_word_bits // 8,
                        version=version)
    pyxrt = window_pyxrt(shell, mode=mode, address=address)
    monkeypatch.setitem(sys.modules, "pyxrt", pyxrt)
    card = XrtDevice("gae.xclbin", **kw)
    # the golden device's clock, so that runs take time and copies can see it busy
    card.time, card.sleep = dev.time, dev.sleep
    return card, dev, shell, pyxrt


def plan_copies(cfg, T, M, returns=True):
    """The copies of one batch: copy_plan's in-blocks to the accelerator, then its
    out-blocks to the buffer, each accepted (DMA_STATUS = DONE)."""
    plan = copy_plan(cfg, T, M, returns=returns)
    return ([(o, n, False, 2) for _, o, n in plan["in"]]
            + [(o, n, True, 2) for _, o, n in plan["out"]])


@pytest.mark.parametrize("mode", ["ip", "kernel"])
def test_xrt_device_runs_the_driver_like_the_golden_device(monkeypatch, mode):
    cfg = GaeCoreConfig.from_dict(SMALL)
    card, dev, shell, pyxrt = gae_card(monkeypatch, mode=mode)
    assert card.block == "gae-kernel" and not card.has_interrupt
    assert card.config.depth == cfg.depth and card.config.n_pe == cfg.n_pe   # from HW_*
    # MEM_PTR right after the accelerator's map holds the buffer's address
    assert shell.regs.offset("MEM_PTR_LO") == gae_register_map(cfg).span
    assert [shell.r["MEM_PTR_LO"], shell.r["MEM_PTR_HI"]] == [0x1000, 0x4]
    assert card.bo.size() == GaeKernelConfig(**SMALL).window_bytes
    assert card.bo.group == (3 if mode == "kernel" else 0)
    if mode == "ip":
        assert ("ip", "uuid-1234", "gae_kernel_n8:{gae_kernel_n8_1}") in pyxrt.log
    else:
        assert ("kernel", "uuid-1234", "gae_kernel_n8", "exclusive") in pyxrt.log
    drv = GaeDriver(card)
    assert not drv._use_irq
    got = [drv.compute(*b, 0.99, 0.95) for b in batches()]
    assert_same(got, reference(cfg, batches()))
    directions = {d for kind, d, *_ in pyxrt.log if kind == "sync"}
    assert directions == {"to_device", "from_device"}
    # The host commanded exactly the copies of copy_plan for each run (all of the same shape):
    # its in-blocks, then the advantages' out-block (caller's units: the returns are the
    # advantages plus the values), and the returns' block only when the run is retried.
    T, M = batches()[0][0].shape
    one_run = plan_copies(cfg, T, M, returns=False)
    rtg = plan_copies(cfg, T, M)[-1]
    copies, runs = list(shell.copies), 0
    while copies:
        assert copies[:len(one_run)] == one_run
        copies = copies[len(one_run):]
        if copies[:1] == [rtg]:
            copies = copies[1:]
        runs += 1
    assert runs >= len(got)
    assert card.last_copy_cycles == copy_cycles(one_run[-1][1], 8, latency=FAKE_LATENCY,
                                                to_device=one_run[-1][2])


def test_xrt_without_register_access_says_so(monkeypatch):
    with pytest.raises(RuntimeError, match="binds neither xrt::ip nor "
                                           "xrt::kernel::read_register"):
        gae_card(monkeypatch, mode="none")


def test_xrt_gae_kernel_before_the_window_shell_is_refused(monkeypatch):
    """A GAE kernel of the earlier layout (copies inside its runs, no SHELL_VERSION register:
    reads 0) is refused with the advice to rebuild."""
    with pytest.raises(RuntimeError, match=r"SHELL_VERSION reads 0x0, not 1: not a window "
                                           r"kernel .*a GAE kernel built before the window "
                                           r"shell\? rebuild the xclbin"):
        gae_card(monkeypatch, version=0)


def test_xrt_refused_run_copies_nothing_out_and_copy_errors_raise(monkeypatch):
    cfg = GaeCoreConfig.from_dict(SMALL)
    card, dev, shell, pyxrt = gae_card(monkeypatch)
    drv = GaeDriver(card)
    T, M = 3, 2
    codes = np.ones((T, M), np.int64)
    drv.load(codes, codes, np.ones(M, np.int64), np.zeros((T, M), bool))
    assert shell.copies == plan_copies(cfg, T, M)[:3]                 # the in-blocks
    drv.start(GaeCoreArgs(0, M, 1, 1, 0, 0, 0, 0))                    # ERROR 1: no time steps
    with pytest.raises(GaeError, match="num_timesteps is 0"):
        drv.wait()
    assert len(shell.copies) == 3                                     # nothing copied out
    # a copy answered with an error flag raises, naming it
    for flag, to_buffer in (("READ_ERROR", False), ("WRITE_ERROR", True)):
        shell.inject = 1 << DMA_FLAGS[flag]
        status = shell.inject | 1 << DMA_FLAGS["DONE"]
        what = "accelerator -> buffer" if to_buffer else "buffer -> accelerator"
        with pytest.raises(BusError, match=f"copy of 64 bytes at 0x40 \\({what}\\) failed: "
                                           f"{flag} \\(DMA_STATUS={status:#x}\\)"):
            if to_buffer:
                card.memory.read(0x40, 64)
            else:
                card.memory.write(0x40, bytes(64))
    loaded = dev.memory.read(0, 16)
    assert any(loaded) and card.memory.read(0, 16) == loaded
    # a copy while the accelerator runs is refused (what s_axi_mem answers with SLVERR)
    drv.start(GaeCoreArgs(T, M, 1, 1, 0, 0, 0, 0))
    assert dev.busy
    with pytest.raises(BusError, match="LOCKED"):
        card.memory.read(0, 16)
    assert shell.copies[-1][3] == 1 << DMA_FLAGS["LOCKED"] | 1 << DMA_FLAGS["DONE"]
    drv.wait()
    assert card.memory.read(0, 16) == dev.memory.read(0, 16)


def test_xrt_pointer_must_read_back(monkeypatch):
    # a buffer address the kernel cannot take: not 64-byte aligned (gmem_data_width = 512)
    with pytest.raises(RuntimeError, match="reads back 0x400001000 after writing the buffer "
                                           "address 0x400001020"):
        gae_card(monkeypatch, address=0x4_0000_1020)


def test_xrt_memory_bounds(monkeypatch):
    card, dev, shell, pyxrt = gae_card(monkeypatch, cu="gae_kernel_n8_2")
    assert ("ip", "uuid-1234", "gae_kernel_n8:{gae_kernel_n8_2}") in pyxrt.log
    size = GaeKernelConfig(**SMALL).window_bytes
    with pytest.raises(ValueError, match="go past the memory window"):
        card.memory.read(size - 4, 8)
    with pytest.raises(ValueError, match="go past the memory window"):
        card.memory.write(size - 4, bytes(8))
    assert card.memory.read(size - 8, 8) == dev.memory.read(size - 8, 8)
    assert shell.copies[-1][:3] == (size - 64, 64, True)          # widened to DMA_ALIGN
    # a block inside one word: the write is widened to 0..63 and keeps its neighbours (the
    # rewards region's code lanes, bytes 0..3 of each 8-byte word, are writable)
    image = bytes(np.random.default_rng(4).integers(1, 256, 64, np.uint8))
    dev.memory.write(0, image)
    before = dev.memory.read(0, 64)
    card.memory.write(0x38, b"\x01\x02\x03\x04")
    assert card.memory.read(0x38, 4) == b"\x01\x02\x03\x04"
    assert dev.memory.read(0, 64) == before[:0x38] + b"\x01\x02\x03\x04" + before[0x3C:]
    assert [c[:3] for c in shell.copies[-3:]] == [(0, 64, True), (0, 64, False),
                                                  (0, 64, True)]
