"""XrtDevice on window kernels (replay, learner), fast tier: a fake ``pyxrt`` whose kernel is a
golden device behind a Python model of the window DMA shell (:class:`xrt_fake.WindowShell`, the
contract of :mod:`rtl_gen.shell.window`: MEM_PTR, DMA_OFFSET/BYTES/CTRL/STATUS, the alignment,
range and LOCKED rules, SHELL_VERSION). The GAE kernel, also a window kernel:
``tb/driver/test_backends.py``.

The drivers' whole sessions (those the RTL tests run) must give on it what they give on the
golden devices directly; blocks that are not aligned to the copy granularities are widened
(a widened write first copies the enclosing block out, so its neighbours survive); copy
errors raise BusError; the block is found from the kernel name. The RTL side of the same
contract: ``tb/replay/test_kernel_xrt_rtl.py``, ``tb/learner/test_kernel_xrt_rtl.py``.
"""

import sys

import numpy as np
import pytest

from sw.shell.spec import DMA_FLAGS, SHELL_VERSION, copy_cycles
from sw.replay.spec import SumTreeConfig
from sw.replay.spec import replay_register_map
from sw.driver.mmio import BusError
from xrt_fake import FAKE_LATENCY, WindowShell, window_pyxrt

BO_ADDRESS = 0x1_0000_1000
REPLAY = dict(fanout=4, capacity=1000, priority_width=24, priority_frac=12, input_guard_bits=4,
              target_bits=28, max_batch=64)


def replay_card(monkeypatch, *, align=16, version=SHELL_VERSION, **kw):
    from sw.driver import XrtDevice
    from sw.replay.device import ReplayGoldenDevice

    cfg = SumTreeConfig(**REPLAY)
    dev = ReplayGoldenDevice(cfg)
    base = replay_register_map(cfg)
    shell = WindowShell(dev, base, window=5 * 64 * 8, align=align, word=8, version=version)
    pyxrt = window_pyxrt(shell, address=BO_ADDRESS)
    monkeypatch.setitem(sys.modules, "pyxrt", pyxrt)
    card = XrtDevice("replay.xclbin", **kw)
    # the golden device's clock, so that runs take time and copies can see it busy
    card.time, card.sleep = dev.time, dev.sleep
    return card, dev, shell, pyxrt


def test_replay_session_through_xrt_device_equals_golden(monkeypatch):
    from replay_session import same, session

    from sw.replay.device import ReplayGoldenDevice

    card, dev, shell, pyxrt = replay_card(monkeypatch, kernel="replay_kernel_k16")
    assert card.block == "replay-kernel" and card.config == SumTreeConfig(**REPLAY)
    assert ("ip", "uuid-1234", "replay_kernel_k16:{replay_kernel_k16_1}") in pyxrt.log
    # MEM_PTR (right after the accelerator's map) holds the buffer's address
    assert shell.regs.offset("MEM_PTR_LO") == replay_register_map(card.config).span
    assert shell.r["MEM_PTR_LO"] == BO_ADDRESS & 0xFFFF_FFFF and shell.r["MEM_PTR_HI"] == 1
    assert len(card.bo.host) == 5 * 64 * 8
    same(session(card), session(ReplayGoldenDevice(SumTreeConfig(**REPLAY))))
    assert shell.copies and all(st == 2 for *_, st in shell.copies)
    assert card.memory.last_copy_cycles == copy_cycles(shell.copies[-1][1], 8,
                                                       latency=FAKE_LATENCY,
                                                       to_device=shell.copies[-1][2])


def test_learner_session_through_xrt_device_equals_golden(monkeypatch):
    from learner_session import SIM_CONFIG, compare, session

    from sw.learner.spec import LearnerConfig
    from sw.learner.layout import mem_addr_bits
    from sw.learner.spec import learner_register_map
    from sw.driver import LearnerGoldenDevice, XrtDevice

    cfg = LearnerConfig.from_dict(SIM_CONFIG)
    dev = LearnerGoldenDevice(cfg)
    # the window is the accelerator's whole byte address space (LearnerKernel.window_bytes)
    shell = WindowShell(dev, learner_register_map(cfg), window=1 << mem_addr_bits(cfg), align=8,
                        word=4)
    monkeypatch.setitem(sys.modules, "pyxrt", window_pyxrt(shell, address=BO_ADDRESS))
    card = XrtDevice("learner.xclbin", kernel="learner_kernel")
    card.time, card.sleep = dev.time, dev.sleep
    assert card.block == "learner-kernel" and card.config == cfg
    compare(session(card), session(LearnerGoldenDevice(cfg)))
    assert all(st == 2 for *_, st in shell.copies)


def test_unaligned_blocks_are_widened_and_keep_their_neighbours(monkeypatch):
    card, dev, shell, _ = replay_card(monkeypatch, kernel="replay_kernel")
    # (IDX_IN keeps 10 bits a word: values that fit)
    words = np.random.default_rng(1).integers(0, 1000, 40)
    image = b"".join(int(w).to_bytes(8, "little") for w in words)
    card.memory.write(0, image)
    assert dev.memory.read(0, 320) == image
    shell.copies.clear()
    card.memory.write(24, (0x155).to_bytes(8, "little"))   # word 3: in the block 16..31
    assert [c[:3] for c in shell.copies] == [(16, 16, True), (16, 16, False)]
    assert dev.memory.read(0, 48) == image[:24] + (0x155).to_bytes(8, "little") + image[32:48]
    shell.copies.clear()
    assert card.memory.read(36, 6) == image[36:42]          # bytes 32..47
    assert [c[:3] for c in shell.copies] == [(32, 16, True)]
    assert card.memory.read(0, 0) == b"" and card.memory.write(8, b"") is None
    with pytest.raises(ValueError, match="go past the memory window"):
        card.memory.read(5 * 64 * 8 - 8, 16)


@pytest.mark.parametrize("flag", ["READ_ERROR", "WRITE_ERROR", "LOCKED", "RANGE"])
def test_copy_errors_raise_bus_error(monkeypatch, flag):
    card, dev, shell, _ = replay_card(monkeypatch, kernel="replay_kernel_k16")
    shell.inject = 1 << DMA_FLAGS[flag]
    with pytest.raises(BusError, match=f"{flag} \\(DMA_STATUS=0x{shell.inject | 2:x}\\)"):
        card.memory.write(0, bytes(16))


def test_copy_while_the_accelerator_runs_raises_bus_error(monkeypatch):
    from sw.replay.driver import ReplayDriver

    card, dev, shell, _ = replay_card(monkeypatch, kernel="replay_kernel_k16")
    drv = ReplayDriver(card, timeout=1e-3)
    drv.insert(np.ones(64))
    card.control.write32(replay_register_map(card.config).offset("CTRL"), 1)  # again
    assert dev.busy
    with pytest.raises(BusError, match="LOCKED"):
        card.memory.read(0, 8)


@pytest.mark.parametrize("version", [0, SHELL_VERSION + 1])
def test_shell_version_is_checked(monkeypatch, version):
    """A kernel whose SHELL_VERSION is not this layout's (0: no such register, as on a GAE
    kernel built before the window shell) is refused before the buffer is allocated."""
    with pytest.raises(RuntimeError, match=f"SHELL_VERSION reads {version:#x}, not "
                                           f"{SHELL_VERSION}: not a window kernel"):
        replay_card(monkeypatch, kernel="replay_kernel_k16", version=version)
    assert not any(e[0] == "sync" for e in sys.modules["pyxrt"].log)
    assert sys.modules["pyxrt"].shell.bo is None


def test_block_selection(monkeypatch):
    from sw.driver.xrt_device import _block_of

    assert _block_of("replay_kernel_k16") == "replay-kernel"
    assert _block_of("learner_kernel_s4") == "learner-kernel"
    assert _block_of("learner_kernel") == "learner-kernel"
    assert _block_of("gae_kernel_n8") == _block_of("my_kernel") == "gae-kernel"
    with pytest.raises(ValueError, match="block must be one of gae-kernel, replay-kernel, "
                                         "learner-kernel"):
        replay_card(monkeypatch, block="replay-accel")


def test_blocks_close_together_move_as_one_transfer(monkeypatch):
    """write_blocks with gaps_are_inputs and read_blocks merge blocks at most merge_gap apart
    into one sync and one copy of their span; farther blocks, blocks whose span needs
    widening, and writes without gaps_are_inputs go one by one. The blocks' bytes land
    where single writes put them, and reads return what single reads return."""
    card, dev, shell, _ = replay_card(monkeypatch, kernel="replay_kernel")
    mem = card.memory
    a, b = (7).to_bytes(8, "little") * 2, (9).to_bytes(8, "little") * 4
    shell.copies.clear()
    mem.write_blocks([(0, a), (64, b)], gaps_are_inputs=True)
    assert [c[:3] for c in shell.copies] == [(0, 96, False)]
    assert dev.memory.read(0, 16) == a and dev.memory.read(64, 32) == b
    shell.copies.clear()
    assert mem.read_blocks([(0, 16), (64, 32)]) == [a, b]
    assert [c[:3] for c in shell.copies] == [(0, 96, True)]
    shell.copies.clear()
    mem.write_blocks([(0, a), (64, b)])                       # gaps not declared inputs
    assert [c[:3] for c in shell.copies] == [(0, 16, False), (64, 32, False)]
    mem.merge_gap = 32
    shell.copies.clear()
    mem.write_blocks([(0, a), (64, b)], gaps_are_inputs=True)  # 48 bytes apart
    assert [c[:3] for c in shell.copies] == [(0, 16, False), (64, 32, False)]
    mem.merge_gap = 1 << 16
    shell.copies.clear()
    mem.write_blocks([(8, a[:8]), (64, b)], gaps_are_inputs=True)   # starts mid-block
    assert [c[:3] for c in shell.copies] == [(0, 16, True), (0, 16, False), (64, 32, False)]
    assert dev.memory.read(8, 8) == a[:8]


def test_stub_of_a_kernel_counts_merged_transfers():
    from sw.driver import InstantDevice
    from sw.driver.xrt_device import PCIE_BYTES_PER_S, TRANSFER_S, merge_gap
    from sw.registry import shipped_config
    dev = InstantDevice.for_kernel("replay_kernel_k16", store=True)
    wb = shipped_config("replay_kernel_k16")[1].window_word_bits // 8
    gap = dev.memory.merge_gap
    assert gap == merge_gap(wb)
    # moving the gap (PCIe, then the shell's copy at 300 MHz) costs one transfer's fixed cost
    assert abs(gap / PCIE_BYTES_PER_S + gap / (wb * 300e6) - TRANSFER_S) < 1e-9
    a, b = bytes(range(16)), bytes(range(100, 132))
    dev.memory.write_blocks([(0, a), (4096, b)], gaps_are_inputs=True)
    assert dev.traffic.transfers == [("write", 0, 4096 + 32)]
    assert [bytes(x) for x in dev.memory.read_blocks([(0, 16), (4096, 32)])] == [a, b]
    assert dev.traffic.transfers[-1] == ("read", 0, 4096 + 32) and dev.traffic.reads == 1
    dev.memory.write_blocks([(0, a), (4096, b)])
    assert dev.traffic.transfers[-2:] == [("write", 0, 16), ("write", 4096, 32)]
