"""The trainer's PYNQ backend against the real ``pynq`` package, on the ``.hwh`` of its ZCU106
block design (:func:`rtl_gen.vivado.hwh.zcu106_hwh` of ``dqn_trainer_zcu106``: s_axi_control
on M_AXI_HPM0_FPD, m_axi_gmem into PS DDR through S_AXI_HP0_FPD).

PYNQ parses the ``.hwh``, lists the trainer in ``ip_dict`` by its VLNV, keeps the HP port's
width for its AFIFM and the master's view of PS DDR; :class:`~sw.trainer.boards.PynqTrainerDevice`
finds the control window as on a board and a driver session through ``pynq.MMIO`` matches
the golden device. Only the physical address space (:mod:`pynq_board`: the golden trainer's
control port at the HPM0 window) and ``pynq.allocate`` (a host buffer whose device side is
the golden device's storage, apart until flushed) are stand-ins.
"""

import numpy as np
import pytest

pynq = pytest.importorskip("pynq")

import pynq.ps  # noqa: E402
from pynq.pl_server import embedded_device, global_state, remote_device  # noqa: E402

from rtl_gen.vivado.zcu106_bd import (CONTROL_RANGE, HP0_DDR_SEGMENTS,  # noqa: E402
                                      HPM0_FPD_BASE, bd_instance)
from sw.driver import pynq_device as pb  # noqa: E402
from sw.registry import vlnv  # noqa: E402
from sw.trainer.boards import TRAINER_VLNV, PynqTrainerDevice  # noqa: E402
from sw.trainer.device import TrainerGoldenDevice  # noqa: E402

from pynq_board import BoardSpace, memory_device, write_overlay  # noqa: E402
from trainer.trainer_session import SIM_CONFIG, HostBuffer, compare, session  # noqa: E402

MODULE = "dqn_trainer_zcu106"
#: Where the stand-in pynq.allocate puts the buffer: PS DDR (HP0_DDR_LOW), as a CMA buffer.
BUFFER_ADDRESS = 0x6000_0000


@pytest.fixture
def pynq_state(monkeypatch, tmp_path):
    """PYNQ's process-wide state, reset (as in test_pynq_real.py): the active device, the
    Clocks instance, our IP classes; PYNQ's metadata cache kept out of site-packages."""
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
    if "_devices" in vars(pynq.Device):
        del pynq.Device._devices


def test_trainer_through_pynq_on_its_block_design(pynq_state, tmp_path, monkeypatch):
    gold, log = TrainerGoldenDevice(SIM_CONFIG), []
    bit, acc = write_overlay(tmp_path, MODULE)
    space = BoardSpace(gold, ctrl=HPM0_FPD_BASE, ctrl_range=CONTROL_RANGE, mem=0, mem_range=0)
    monkeypatch.setattr(pynq.Device, "_active_device", memory_device(space), raising=False)

    def allocate(shape, dtype, **kw):
        assert dtype == np.uint8 and shape == (gold.storage().size,)
        return np.zeros(shape, np.uint8).view(HostBuffer).bind(gold.storage(), log,
                                                              physical_address=BUFFER_ADDRESS)

    monkeypatch.setattr(pynq, "allocate", allocate)
    overlay = pynq.Overlay(str(bit))
    inst = bd_instance(MODULE)
    # The trainer is an IP (no memory block): in ip_dict by its VLNV, at the HPM0 window.
    entry = overlay.ip_dict[inst]
    assert (entry["type"], entry["phys_addr"], entry["addr_range"]) == \
        (vlnv(MODULE), HPM0_FPD_BASE, CONTROL_RANGE)
    assert entry["type"].startswith(TRAINER_VLNV.rpartition(":")[0])    # what the device seeks
    assert set(overlay.mem_dict) == {"PSDDR"}          # pynq.allocate's memory
    # The HP port's width, which PYNQ writes into the port's AFIFM on download.
    assert overlay.ip_dict["zynq_ultra_ps_e_0"]["parameters"]["C_SAXIGP2_DATA_WIDTH"] == "128"
    # The master's view: PS DDR through S_AXI_HP0_FPD, where the buffer lies.
    gmem = overlay.systemgraph.blocks[inst].ports["m_axi_gmem"]
    reach = sorted((a["block"], a["baseaddr"], a["addr_range"]) for a in gmem.addrmap.values())
    assert reach == sorted(HP0_DDR_SEGMENTS)
    assert any(b <= BUFFER_ADDRESS < b + s for _, b, s in HP0_DDR_SEGMENTS)
    # PYNQ's own register map of the IP: BASE is one 64-bit pointer register.
    assert overlay.ip_dict[inst]["registers"]["BASE"]["size"] == 64

    dev = PynqTrainerDevice(overlay=overlay, config=SIM_CONFIG, use_interrupt=False)
    dev.time, dev.sleep = gold.time, gold.sleep           # the model's clock, not the wall's
    assert dev.instance == inst and dev.storage_address == BUFFER_ADDRESS
    got = session(dev, SIM_CONFIG, launches=2, steps=4)
    compare(got, session(TrainerGoldenDevice(SIM_CONFIG), SIM_CONFIG, launches=2, steps=4))
    assert "flush" in log and "invalidate" in log
    # The buffer's address is in BASE, as PYNQ's register map of the .hwh reads it.
    assert int(getattr(overlay, inst).register_map.BASE) == BUFFER_ADDRESS
    dev.close()
