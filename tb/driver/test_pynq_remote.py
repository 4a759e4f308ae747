"""PYNQ remote devices: a host PC drives the board over gRPC with the same driver code.

A separate Python process plays the host PC: ``PYNQ_REMOTE_DEVICES`` names the board before
``pynq`` is imported (as a user sets it), PYNQ selects its ``RemoteDevice``, ``PynqDevice``
loads the overlay -- the ``.hwh`` is parsed on the host, the bitstream is written to the
board's ``fpga_manager``, PL clock and AXI widths are programmed through remote MMIO -- and
``GaeDriver`` runs batches. The board is :class:`pynq_board.RemoteBoard`: PYNQ's own gRPC
services over a golden device's ports. What needs a real board (the PL, interrupts, remote
buffers) is listed in docs/boards.md.
"""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

from sw.driver import GaeDriver, GoldenDevice
from sw.registry import shipped_config
from rtl_gen.vivado.hwh import PL0_DIVISORS
from rtl_gen.vivado.zcu106_bd import (CONTROL_RANGE, HPM0_FPD_BASE, HPM0_WIDTH, HPM1_FPD_BASE,
                                      hpm1_width)

from driver_util import rollout
from pynq_board import FPD_AXI_FS, PL0_REF_CTRL, BoardSpace, RemoteBoard, write_overlay

HOST = textwrap.dedent("""
    import json, sys
    import numpy as np
    from pynq.pl_server import embedded_device, global_state, remote_device
    bit, tmp = sys.argv[1], sys.argv[2]
    global_state.STATE_DIR = tmp          # PYNQ's metadata cache: out of site-packages
    embedded_device.__file__ = remote_device.__file__ = tmp + "/pl_server.py"
    import pynq
    from sw.driver import GaeDriver, PynqDevice
    device = pynq.Device.active_device    # chosen by PYNQ_REMOTE_DEVICES
    board = PynqDevice(bit)
    drv = GaeDriver(board)
    data = np.load(tmp + "/batches.npz")
    out = {}
    for i in range(len(data.files) // 4):
        a, r = drv.compute(*(data[f"{k}{i}"] for k in "rvdl"), 0.99, 0.95)
        out[f"a{i}"], out[f"r{i}"] = a, r
    np.savez(tmp + "/results.npz", **out)
    print(json.dumps({"device": type(device).__name__, "board": device.name,
                      "arch": device.arch, "instance": board.instance,
                      "interrupt": board.has_interrupt, "Interrupt": pynq.Interrupt.__name__}))
""")


def test_a_host_pc_runs_the_driver_on_a_remote_board(tmp_path):
    module = "gae_accel_n8"
    _, cfg = shipped_config(module)
    bit, acc = write_overlay(tmp_path, module)
    golden = GoldenDevice(cfg)
    space = BoardSpace(golden, ctrl=HPM0_FPD_BASE, ctrl_range=CONTROL_RANGE, mem=HPM1_FPD_BASE,
                       mem_range=acc.memory.window)
    rng = np.random.default_rng(9)
    batches = [rollout(rng, 24, 8) for _ in range(2)]
    np.savez(tmp_path / "batches.npz", **{f"{k}{i}": x for i, b in enumerate(batches)
                                         for k, x in zip("rvdl", b)})
    root = Path(__file__).resolve().parents[2]
    with RemoteBoard(space) as board:
        env = {**__import__("os").environ, "PYNQ_REMOTE_DEVICES": board.address}
        done = subprocess.run([sys.executable, "-c", HOST, str(bit), str(tmp_path)], cwd=root,
                              env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    host = json.loads(done.stdout.strip().splitlines()[-1])
    assert host == {"device": "RemoteDevice", "board": "ZCU106", "arch": "aarch64",
                    "instance": f"{module}_0", "interrupt": False,
                    "Interrupt": "RemoteInterrupt"}
    # The download: the bitstream went to the board's fpga_manager, then PYNQ set the PS's
    # pl_clk0 divisors and the HPM0/HPM1 widths of the .hwh, through remote MMIO.
    assert board.programmed == f"{module}.bin"
    assert board.files[f"/lib/firmware/{module}.bin"]
    pl0 = space.words[PL0_REF_CTRL]
    assert ((pl0 >> 8) & 63, (pl0 >> 16) & 63) == PL0_DIVISORS
    code = {32: 0, 64: 1, 128: 2}
    axi_fs = space.words[FPD_AXI_FS]
    assert ((axi_fs >> 8) & 3, (axi_fs >> 10) & 3) == (code[HPM0_WIDTH], code[hpm1_width(acc)])
    # The results: what the driver computes on the golden device directly.
    got, ref = np.load(tmp_path / "results.npz"), GaeDriver(GoldenDevice(cfg))
    for i, b in enumerate(batches):
        a, r = ref.compute(*b, 0.99, 0.95)
        np.testing.assert_array_equal(got[f"a{i}"], a)
        np.testing.assert_array_equal(got[f"r{i}"], r)
