"""The PYNQ backend against the real ``pynq`` package (PYNQ 4, the ``pynq`` extra).

``pynq.Overlay`` parses a ``.hwh`` generated from the register description
(:func:`rtl_gen.vivado.hwh.zcu106_hwh`), binds our IP classes by VLNV, builds its own
``register_map`` from the registers the ``.hwh`` declares and maps the windows with
``pynq.MMIO``; only the address space under ``MMIO`` is a stand-in (:mod:`pynq_board`: a
golden device's ports). The unmodified drivers must compute what they compute on the golden
device directly. The remote-board path is ``test_pynq_remote.py``.
"""

import numpy as np
import pytest

import pynq
import pynq.overlay
import pynq.ps
from pynq.pl_server import embedded_device, global_state, remote_device

from sw.driver import pynq_device as pb
from sw.registry import shipped_config, vlnv
from rtl_gen.vivado.hwh import PL0_DIVISORS
from rtl_gen.vivado.package_ip import IPXACT_ACCESS, register_access
from rtl_gen.vivado.zcu106_bd import CONTROL_RANGE, HPM0_FPD_BASE, HPM1_FPD_BASE

from driver_util import rollout
from pynq_board import PL0_REF_CTRL, BoardSpace, memory_device, write_overlay

MODULES = {"gae": "gae_accel_n8", "replay": "replay_accel_k16", "learner": "learner_cartpole_s4"}


@pytest.fixture
def pynq_state(monkeypatch, tmp_path):
    """PYNQ's process-wide state, reset: the active device, the Clocks instance bound to a
    device, our lazily built IP classes; PYNQ's metadata cache kept out of site-packages."""
    monkeypatch.setattr(global_state, "STATE_DIR", str(tmp_path))
    for mod in (embedded_device, remote_device):
        monkeypatch.setattr(mod, "__file__", str(tmp_path / "pl_server.py"))
    monkeypatch.setattr(pb, "_IP_CLASSES", {})

    def reset_clocks():
        if "_real_instance" in vars(pynq.ps.Clocks):
            del pynq.ps.Clocks._real_instance
        pynq.ps.Clocks.device = None

    reset_clocks()
    yield
    reset_clocks()
    if "_devices" in vars(pynq.Device):         # probed by this test: probe again next time
        del pynq.Device._devices


def board(tmp_path, family, monkeypatch):
    """A PYNQ device over a fresh golden device of the shipped accelerator of ``family``,
    made PYNQ's active device; ``(bitfile, space, golden device, config)``."""
    module = MODULES[family]
    block, cfg = shipped_config(module)
    golden = block.load("device")(cfg)
    bit, acc = write_overlay(tmp_path, module)
    space = BoardSpace(golden, ctrl=HPM0_FPD_BASE, ctrl_range=CONTROL_RANGE, mem=HPM1_FPD_BASE,
                       mem_range=acc.memory.window)
    monkeypatch.setattr(pynq.Device, "_active_device", memory_device(space), raising=False)
    return str(bit), space, golden, cfg


def test_gae_driver_runs_through_pynq_on_the_golden_device(pynq_state, tmp_path, monkeypatch):
    from sw.driver import GaeDriver, GoldenDevice

    bit, space, golden, cfg = board(tmp_path, "gae", monkeypatch)
    dev = pb.PynqDevice(bit)
    inst = "gae_accel_n8_0"
    # PYNQ 4 lists the core under mem_dict (its s_axi_mem is a memory block), not ip_dict.
    assert inst not in dev.overlay.ip_dict and dev.overlay.mem_dict[inst]["mem_id"] == "s_axi_mem"
    assert dev.instance == inst and not dev.has_interrupt
    assert (dev.ip_entry["phys_addr"], dev.mem_entry["phys_addr"]) == (HPM0_FPD_BASE,
                                                                        HPM1_FPD_BASE)
    assert pynq.Device.active_device.downloads == [bit]
    pl0 = space.words[PL0_REF_CTRL]                  # pynq.Clocks programmed pl_clk0
    assert ((pl0 >> 8) & 63, (pl0 >> 16) & 63) == PL0_DIVISORS
    rng = np.random.default_rng(5)
    batches = [rollout(rng, 40, 8) for _ in range(2)]
    drv, ref = GaeDriver(dev), GaeDriver(GoldenDevice(cfg))
    assert drv.config == ref.config
    for b in batches:
        for got, want in zip(drv.compute(*b, 0.99, 0.95), ref.compute(*b, 0.99, 0.95)):
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("family", list(MODULES))
def test_ip_classes_bind_by_vlnv_and_pynq_builds_the_register_map(pynq_state, tmp_path,
                                                                  monkeypatch, family):
    bit, space, golden, cfg = board(tmp_path, family, monkeypatch)
    module = MODULES[family]
    overlay = pynq.Overlay(bit)
    ip = pb.overlay_ip(overlay)
    cls = pb.ip_class(family)
    assert type(ip) is cls and isinstance(ip, pynq.DefaultIP)
    assert pynq.overlay._ip_drivers[vlnv(module)] is cls                 # RegisterIP did it
    # PYNQ's register map, from the .hwh, is the register description.
    hwh_map, rm = ip.hwh_register_map, shipped_config(module)[0].regmap(cfg)
    assert isinstance(hwh_map, pynq.registers.RegisterMap)
    assert set(hwh_map._register_classes) == {r.name for r in rm}
    for r in rm:
        reg_cls, offset, size, _, _, access = hwh_map._register_classes[r.name]
        assert (offset, size, access) == (r.offset, 32, register_access(r))
        assert {k: (v["bit_offset"], v["bit_width"], v["access"])
                for k, v in reg_cls._fields.items()} == {
            f.name: (f.lsb, f.width, IPXACT_ACCESS[f.access][0]) for f in r.fields}
    # Both maps read the hardware through pynq.MMIO: the HW_* words of the configuration.
    for r in rm.info_registers:
        word = rm.info_values(cfg)[r.name]
        assert int(getattr(hwh_map, r.name)) == word
        assert int(ip.register_map[r.name]) == word
    block = shipped_config(module)[0]
    assert ip.driver().config == block.load("driver")(block.load("device")(cfg)).config
    assert ip.driver().device.instance == f"{module}_0"


def test_replay_and_learner_drivers_run_through_pynq(pynq_state, tmp_path, monkeypatch):
    from learner_session import init_net, random_batch
    from sw.driver import LearnerDriver, LearnerGoldenDevice, ReplayDriver

    bit, _, _, cfg = board(tmp_path, "replay", monkeypatch)
    rb = ReplayDriver(pb.PynqDevice(bit))
    slots = rb.insert([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(rb.read(slots), [1.0, 2.0, 3.0])
    assert rb.total() == 6.0
    bit, _, _, cfg = board(tmp_path, "learner", monkeypatch)
    ip = pb.overlay_ip(pynq.Overlay(bit))
    rng = np.random.default_rng(11)
    net, batch = init_net(tuple(cfg.sizes), rng), random_batch(rng, 24)
    ip.load_weights(*net)
    got = ip.train_step(**batch, lr=0.02, sync_target=True)
    ref = LearnerDriver(LearnerGoldenDevice(cfg))
    ref.load_weights(*net)
    assert got == ref.train_step(**batch, lr=0.02, sync_target=True)
    assert isinstance(ip.driver().device, pb.PynqDevice)
