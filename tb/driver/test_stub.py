"""sw.driver.stub: the instant device counts what a driver writes and reads.

The same driver call runs on a golden device wrapped in a recorder and on
:class:`~sw.driver.stub.InstantDevice`: the memory transfers (direction, offset, bytes), the
register writes and the runs started must be the same. No timing is asserted.
"""

import numpy as np
import pytest

from sw.driver import GaeDriver, GoldenDevice, InstantDevice, ReplayDriver, TrafficCounter
from sw.driver.mmio import BusError, MemoryPort, Mmio
from sw.registry import shipped_config, shipped_modules
from sw.replay.device import ReplayGoldenDevice


class _Recorder:
    """Wrap a device's control and memory ports; record what crosses them."""

    def __init__(self, device):
        self.transfers, self.reg_writes = [], []
        rec, control, memory = self, device.control, device.memory

        class C(Mmio):
            def read32(self, offset):
                return control.read32(offset)

            def write32(self, offset, value):
                rec.reg_writes.append((offset, value))
                control.write32(offset, value)

        class M(MemoryPort):
            def write(self, offset, data):
                rec.transfers.append(("write", offset, len(bytes(data))))
                memory.write(offset, data)

            def read(self, offset, nbytes):
                rec.transfers.append(("read", offset, nbytes))
                return memory.read(offset, nbytes)

        device.control, device.memory = C(), M()


def _stub_of(config, regmap, mem_bytes):
    return InstantDevice(regmap, regmap.info_values(config), mem_bytes, store=True)


def test_gae_compute_traffic_matches_golden_device():
    _, cfg = shipped_config("gae_accel_n8")
    rng = np.random.default_rng(1)
    T, M = 16, 12
    r, v = rng.normal(size=(T, M)), rng.normal(size=(T, M))
    d, last = rng.random((T, M)) < 0.1, rng.normal(size=M)
    golden = GoldenDevice(cfg)
    rec = _Recorder(golden)
    # one run each: a refinement follows the results, which the stub does not compute
    GaeDriver(golden, result_tolerance=None).compute(r, v, d, last, 0.99, 0.95)
    stub = _stub_of(cfg, golden.regmap, 1 << cfg.mem_addr_bits)
    drv = GaeDriver(stub, result_tolerance=None)
    stub.traffic.reset()
    drv.compute(r, v, d, last, 0.99, 0.95)
    t = stub.traffic
    assert t.transfers == rec.transfers
    assert t.writes == sum(k == "write" for k, _, _ in rec.transfers) == 3
    assert t.bytes_written == sum(n for k, _, n in rec.transfers if k == "write")
    assert t.bytes_read == sum(n for k, _, n in rec.transfers if k == "read") > 0
    assert t.starts == 1
    # The argument registers hold what the driver wrote on the golden device.
    offsets = {golden.regmap.offset(n) for n in ("NUM_TIMESTEPS", "NUM_TRAJECTORIES", "GAMMA")}
    assert {o: w for o, w in rec.reg_writes if o in offsets} == \
        {o: w for o, w in stub._regs.items() if o in offsets}
    assert stub.registers()["NUM_TIMESTEPS"] == T


def test_replay_update_traffic_matches_golden_device():
    _, cfg = shipped_config("replay_accel_k16")
    golden = ReplayGoldenDevice(cfg)
    drv = ReplayDriver(golden)
    drv.insert(count=64)                       # update takes filled slots only
    rec = _Recorder(golden)
    idx, prio = np.arange(0, 64, 3), np.linspace(0.5, 2.0, 22)
    drv.update(idx, prio)
    stub = _stub_of(cfg, golden.regmap, golden.image.size)
    ReplayDriver(stub)
    stub.answer("SIZE", 64)
    stub.traffic.reset()
    ReplayDriver(stub, cfg).update(idx, prio)
    assert stub.traffic.transfers == rec.transfers
    assert stub.traffic.bytes_written == 2 * 8 * idx.size     # IDX_IN and PRIO_IN, 64-bit words
    assert stub.traffic.starts == 1 and stub.traffic.reads == 0


@pytest.mark.parametrize("module", shipped_modules(role="kernel"))
def test_for_kernel_attaches_every_driver(module):
    block, config = shipped_config(module)
    dev = InstantDevice.for_kernel(module)
    drv = block.accelerator.load("driver")(dev)
    # What the HW_* registers describe (GAE's do not carry every parameter).
    regmap = block.accelerator.regmap
    assert regmap(drv.config).info_values(drv.config) == \
        regmap(config.accel).info_values(config.accel)
    ctrl = dev.register_map["CTRL"].unpack(dev.control.read32(0))
    assert ctrl["AP_IDLE"] and ctrl["AP_DONE"] and ctrl["AP_READY"]


def test_counter_reset_answers_and_errors():
    dev = InstantDevice.for_kernel("replay_kernel_k16")
    dev.memory.write(0, b"\1" * 16)
    assert bytes(dev.memory.read(0, 4)) == b"\0" * 4            # store=False: zeros
    dev.answer("SIZE", 7)
    assert dev.control.read32(dev.register_map.offset("SIZE")) == 7
    t = dev.traffic
    assert (t.writes, t.bytes_written, t.reads, t.bytes_read, t.reg_reads) == (1, 16, 1, 4, 1)
    assert t.transfers == [("write", 0, 16), ("read", 0, 4)]
    t.reset()
    assert t == TrafficCounter()
    with pytest.raises(BusError, match="no register at 0xffc"):
        dev.control.read32(0xFFC)
    with pytest.raises(BusError, match="no register"):
        dev.control.write32(0xFFC, 1)
    with pytest.raises(ValueError, match="go past the memory window"):
        dev.memory.read(dev.memory._nbytes - 4, 8)
    with pytest.raises(ValueError, match="module must be a shipped kernel"):
        InstantDevice.for_kernel("gae_accel_n8")
