"""``sw.driver.open_driver``: a generated configuration's manifest and a device spec give the
block's driver. Golden devices run here; PYNQ and XRT are stand-ins that record how they were
opened and serve a golden device, as in tb/rl/test_devices.py. No Amaranth: the manifests of
configurations that are not shipped are shipped ones with another module name and
configuration (all ``open_driver`` reads)."""

import json
from pathlib import Path

import numpy as np
import pytest

import sw.driver
from sw.driver import (GaeDriver, GoldenDevice, LearnerDriver, LearnerGoldenDevice,
                       ReplayConfigMismatchError, ReplayDriver, ReplayGoldenDevice, open_driver)
from sw.registry import block
from sw.rl.devices import DeviceSpecError

HDL = Path(__file__).resolve().parents[2] / "hdl"


def generated(tmp_path, like, module, params):
    """A manifest for ``module`` with ``params`` in ``tmp_path/module/``, written as
    ``python -m rtl_gen`` writes it (from the shipped manifest ``like``)."""
    man = json.loads((HDL / like / f"{like}.json").read_text())
    cfg = block(man["block"]).config.from_dict(params)
    d = tmp_path / module
    d.mkdir()
    (d / f"{module}.json").write_text(json.dumps({**man, "module": module,
                                                  "verilog": f"{module}.v",
                                                  "config": cfg.to_dict()}))
    (d / f"{module}.v").write_text(f"module {module}; endmodule\n")
    return d, cfg


def test_golden_replay_of_a_configuration_of_your_own(tmp_path):
    d, cfg = generated(tmp_path, "replay_accel_k16", "replay_k8_4k",
                       {"fanout": 8, "capacity": 4096})
    drv = open_driver(d)                                  # device="golden" by default
    assert isinstance(drv, ReplayDriver) and isinstance(drv.device, ReplayGoldenDevice)
    assert drv.config == cfg and drv.config.fanout == 8
    assert open_driver(d / "replay_k8_4k.json", device="golden").config == cfg
    drv.insert([1.0, 0.0, 3.0])
    idx, _, prio = drv.sample(16, 0.4, targets=np.linspace(0, 0.99, 16))
    assert set(idx) == {0, 2} and set(prio) == {1.0, 3.0}


def test_golden_gae_learner_and_kernels(tmp_path):
    d, cfg = generated(tmp_path, "gae_accel_n8", "gae_n4", {"n_pe": 4, "max_trajectories": 16,
                                                            "capacity": 64})
    drv = open_driver(d)
    assert isinstance(drv, GaeDriver) and isinstance(drv.device, GoldenDevice)
    assert drv.config == cfg
    rng = np.random.default_rng(0)
    adv, ret = drv.compute(rng.normal(size=(8, 6)), rng.normal(size=(8, 6)),
                           np.zeros((8, 6), bool), rng.normal(size=6), 0.99, 0.95)
    assert adv.shape == (8, 6) and np.isfinite(ret).all()
    d, cfg = generated(tmp_path, "learner_cartpole_s4", "learner_small",
                       {"sizes": [3, 8, 2], "array": 2, "max_batch": 8, "sub_batch": 2,
                        "axi_data_width": 64})
    drv = open_driver(d)
    assert isinstance(drv, LearnerDriver) and isinstance(drv.device, LearnerGoldenDevice)
    assert drv.config == cfg
    # a kernel's golden device is its accelerator's, with the kernel's accelerator part
    drv = open_driver(HDL / "replay_kernel_k16")
    kcfg = block("replay-kernel").config.from_dict(
        json.loads((HDL / "replay_kernel_k16" / "replay_kernel_k16.json").read_text())["config"])
    assert isinstance(drv.device, ReplayGoldenDevice) and drv.config == kcfg.accel


def test_driver_arguments_are_passed(tmp_path):
    drv = open_driver(HDL / "replay_accel_k16", timeout=2.5, alpha=0.7)
    assert drv._timeout == 2.5 and drv.alpha == 0.7
    with pytest.raises(TypeError, match="unexpected keyword argument 'nope'"):
        open_driver(HDL / "replay_accel_k16", nope=1)


def stand_ins(monkeypatch, tmp_path, serve):
    """PynqDevice / XrtDevice stand-ins recording their arguments and serving ``serve()``."""
    opened = []
    monkeypatch.chdir(tmp_path)
    for name in ("a.bit", "a.hwh", "a.xclbin"):
        (tmp_path / name).write_bytes(b"")

    def pynq(bitfile=None, *, overlay=None, name=None, vlnv=None):
        opened.append(("pynq", bitfile, name, vlnv))
        return serve()

    def xrt(path, *, kernel, block):
        opened.append(("xrt", path, kernel, block))
        return serve()

    monkeypatch.setattr(sw.driver, "PynqDevice", pynq)
    monkeypatch.setattr(sw.driver, "XrtDevice", xrt)
    return opened


def test_boards_are_opened_for_the_module(monkeypatch, tmp_path):
    d, cfg = generated(tmp_path, "replay_accel_k16", "replay_k8_4k",
                       {"fanout": 8, "capacity": 4096})
    k, kcfg = generated(tmp_path, "replay_kernel_k16", "replay_kernel_k8",
                        {"fanout": 8, "capacity": 4096})
    opened = stand_ins(monkeypatch, tmp_path, lambda: ReplayGoldenDevice(cfg))
    drv = open_driver(d, device="pynq:a.bit")
    assert opened[-1] == ("pynq", "a.bit", None, "rlk:accel:replay_k8_4k:1.0")
    assert drv.config == cfg
    open_driver(d, device="pynq:a.bit:replay_1")
    assert opened[-1] == ("pynq", "a.bit", "replay_1", None)
    drv = open_driver(k, device="xrt:a.xclbin")
    assert opened[-1] == ("xrt", "a.xclbin", "replay_kernel_k8", "replay-kernel")
    assert drv.config == kcfg.accel
    open_driver(k, device="xrt:a.xclbin:krnl")
    assert opened[-1] == ("xrt", "a.xclbin", "krnl", "replay-kernel")


def test_a_bitstream_of_another_configuration_is_refused(monkeypatch, tmp_path):
    """On a board the driver checks the HW_* registers against the manifest."""
    d, _ = generated(tmp_path, "replay_accel_k16", "replay_k8_4k",
                     {"fanout": 8, "capacity": 4096})
    _, shipped = generated(tmp_path, "replay_accel_k16", "other", {"fanout": 16,
                                                                   "capacity": 1 << 16})
    stand_ins(monkeypatch, tmp_path, lambda: ReplayGoldenDevice(shipped))
    with pytest.raises(ReplayConfigMismatchError, match=r"config does not match the hardware: "
                                                         r"HW_CAPACITY 0x10000 \(config: 0x1000\)"):
        open_driver(d, device="pynq:a.bit")


def test_bad_arguments_name_them(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match=r"^manifest must be a manifest <module>.json or the "
                                         r"directory"):
        open_driver(tmp_path / "nope")
    with pytest.raises(ValueError, match=r"must be of a block with a driver \(gae-accel, .*\), "
                                         r"not of 'gae-pe'"):
        open_driver(HDL / "gae_pe_k2")
    for bad in ("cuda", "sim:replay_accel_k16", "", None, "xrt:"):
        with pytest.raises(ValueError, match=r"^device must be 'golden', 'sim', "
                                             r"'pynq:BITFILE\[:NAME\]' or 'xrt:XCLBIN\[:KERNEL\]'"):
            open_driver(HDL / "replay_accel_k16", device=bad)
    with pytest.raises(DeviceSpecError, match="the xclbin 'missing.xclbin' does not exist"):
        open_driver(HDL / "replay_kernel_k16", device="xrt:missing.xclbin")
    monkeypatch.chdir(tmp_path)
    for name in ("a.bit", "a.hwh", "a.xclbin"):
        (tmp_path / name).write_bytes(b"")
    with pytest.raises(ValueError, match=r"^device must be 'golden', 'sim' or "
                                         r"'pynq:BITFILE\[:NAME\]' for replay_accel_k16, an "
                                         r"accelerator .*python -m rtl_gen replay-kernel"):
        open_driver(HDL / "replay_accel_k16", device="xrt:a.xclbin")
    with pytest.raises(ValueError, match=r"^device must be 'xrt:XCLBIN\[:KERNEL\]' for "
                                         r"gae_kernel_n8, a Vitis kernel"):
        open_driver(HDL / "gae_kernel_n8", device="pynq:a.bit")


def test_runs_without_the_generator():
    """On a board there is no Amaranth: open_driver imports none of the generator stack."""
    import subprocess
    import sys
    code = f"""
import sys
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("amaranth", "rtl_gen"):
            raise ImportError(name + " is blocked")
sys.meta_path.insert(0, Refuse())
from sw.driver import open_driver
drv = open_driver({str(HDL / "replay_accel_k16")!r})
drv.insert([1.0])
print(type(drv).__name__)
"""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=HDL.parent)
    assert res.returncode == 0 and res.stdout.strip() == "ReplayDriver", res.stderr
