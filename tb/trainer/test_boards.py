"""The trainer's board backends (sw.trainer.boards) on fake ``pynq`` and ``pyxrt`` modules
over the golden trainer device: the driver session gives the same transcript as on the golden
device itself, so every record reaches the device's memory (flush / sync to the device) before
its doorbell and every read sees the device's writes (invalidate / sync from the device).
The fakes keep the host's copy of the buffer apart from the device's, so a missing flush or
sync shows; the devices take the golden model's clock (timeouts independent of the load). (XrtTrainerDevice also runs on the Verilated RTL: tb/trainer/test_accelerator_rtl.)
"""

import sys
import types

import numpy as np
import pytest

from sw.trainer.boards import TRAINER_VLNV, PynqTrainerDevice, XrtTrainerDevice
from sw.trainer.device import TrainerGoldenDevice
from sw.trainer.spec import trainer_register_map

from .trainer_session import SIM_CONFIG, HostBuffer, compare, session

ADDRESS = 0x7_0000_0000
SIM_CONFIG_BASE_HI = trainer_register_map(SIM_CONFIG).offset("BASE_HI")


def fake_pynq(dev, log):
    mod = types.ModuleType("pynq")

    class MMIO:
        def __init__(self, base, length, **kw):
            self.base = base

        def read(self, offset):
            return dev.control.read32(offset)

        def write(self, offset, value):
            dev.control.write32(offset, value)

    def allocate(shape, dtype, **kw):
        assert dtype == np.uint8 and shape == (dev.storage().size,)
        return np.zeros(shape, np.uint8).view(HostBuffer).bind(dev.storage(), log,
                                                             device_address=ADDRESS)

    class Interrupt:
        def __init__(self, pin):
            raise ValueError("not wired")

    mod.MMIO, mod.allocate, mod.Interrupt = MMIO, allocate, Interrupt
    return mod


def fake_pyxrt(dev, log):
    mod = types.ModuleType("pyxrt")
    sync = types.SimpleNamespace(XCL_BO_SYNC_BO_TO_DEVICE="to", XCL_BO_SYNC_BO_FROM_DEVICE="from")

    class ip:                                              # noqa: N801
        def __init__(self, device, uuid, name):
            log.append(("ip", name))

        def read_register(self, offset):
            return dev.control.read32(offset)

        def write_register(self, offset, value):
            dev.control.write32(offset, value)

    class bo:                                              # noqa: N801
        flags = types.SimpleNamespace(normal="normal")

        def __init__(self, device, size, flags, group):
            assert size == dev.storage().size
            self.host = np.zeros(size, np.uint8)

        def write(self, buf, seek):
            b = np.frombuffer(memoryview(buf).cast("B"), np.uint8)
            self.host[seek:seek + b.size] = b

        def read(self, size, skip):
            return self.host[skip:skip + size].view(np.int8).copy()

        def sync(self, direction, size, offset):
            log.append((direction, offset, size))
            mem = dev.storage()
            if direction == "to":
                mem[offset:offset + size] = self.host[offset:offset + size]
            else:
                self.host[offset:offset + size] = mem[offset:offset + size]

        def address(self):
            return ADDRESS

    mod.device = lambda index=0: types.SimpleNamespace(load_xclbin=lambda x: "uuid")
    mod.xclbin = lambda path: path
    mod.ip, mod.bo, mod.xclBOSyncDirection = ip, bo, sync
    return mod


def _gold():
    return TrainerGoldenDevice(SIM_CONFIG)


def test_pynq_trainer_device_runs_the_session(monkeypatch):
    gold, log = _gold(), []
    monkeypatch.setitem(sys.modules, "pynq", fake_pynq(gold, log))
    overlay = types.SimpleNamespace(ip_dict={"dqn_trainer_0": {
        "phys_addr": 0xA000_0000, "addr_range": 0x1000, "type": f"{TRAINER_VLNV[:-4]}_x:1.0",
        "interrupts": {}}})
    dev = PynqTrainerDevice(overlay=overlay, config=SIM_CONFIG)
    dev.time, dev.sleep = gold.time, gold.sleep           # the model's clock, not the wall's
    assert dev.storage_address == ADDRESS and not dev.has_interrupt
    got = session(dev, SIM_CONFIG, launches=3, steps=5)
    compare(got, session(_gold(), SIM_CONFIG, launches=3, steps=5))
    assert dev.control.read32(SIM_CONFIG_BASE_HI) == ADDRESS >> 32
    assert log.count("flush") >= 4 and "invalidate" in log


def test_xrt_trainer_device_runs_the_session(monkeypatch):
    gold, log = _gold(), []
    monkeypatch.setitem(sys.modules, "pyxrt", fake_pyxrt(gold, log))
    dev = XrtTrainerDevice("k.xclbin", config=SIM_CONFIG, kernel="dqn_trainer_small")
    dev.time, dev.sleep = gold.time, gold.sleep
    assert log[0] == ("ip", "dqn_trainer_small:{dqn_trainer_small_1}")
    got = session(dev, SIM_CONFIG, launches=3, steps=5)
    compare(got, session(_gold(), SIM_CONFIG, launches=3, steps=5))
    assert any(e[0] == "to" for e in log[1:]) and any(e[0] == "from" for e in log[1:])


def test_configuration_is_required_off_the_shipped_modules(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyxrt", fake_pyxrt(_gold(), []))
    with pytest.raises(ValueError, match="config must be given"):
        XrtTrainerDevice("k.xclbin", kernel="my_trainer")
    with pytest.raises(TypeError, match="config must be a TrainerConfig"):
        XrtTrainerDevice("k.xclbin", config={"learner": {}})
