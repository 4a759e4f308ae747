"""Device specs of the RL programs (sw.rl.devices): golden models, PYNQ overlays and XRT
kernels behind one string. The board backends are replaced by stand-ins that record how they
were opened and serve a golden device, so the whole path up to the drivers runs here."""

import numpy as np
import pytest

import sw.driver
import sw.rl.devices
from sw.registry import SHIPPED
from sw.gae.spec import GaeCoreConfig
from sw.learner.spec import LearnerConfig
from sw.replay.spec import SumTreeConfig
from sw.driver import GoldenDevice, LearnerGoldenDevice, ReplayGoldenDevice
from sw.rl.devices import open_device, parse_spec

SHIPPED_PARAMS = {name: p for name, _, p in SHIPPED}
GOLDEN = {"gae": (GoldenDevice, GaeCoreConfig, "gae_accel_n8"),
          "learner": (LearnerGoldenDevice, LearnerConfig, "learner_cartpole_s4"),
          "replay": (ReplayGoldenDevice, SumTreeConfig, "replay_accel_k16")}


def test_parse_spec():
    assert parse_spec("golden") == ("golden", None, None)
    assert parse_spec("sim") == ("sim", None, None)
    assert parse_spec("sim:gae_accel_n64") == ("sim", None, "gae_accel_n64")
    assert parse_spec("pynq:/home/xilinx/gae.bit") == ("pynq", "/home/xilinx/gae.bit", None)
    assert parse_spec("pynq:gae.bit:gae_accel_1") == ("pynq", "gae.bit", "gae_accel_1")
    assert parse_spec("xrt:k.xclbin:learner_kernel_s4") == ("xrt", "k.xclbin",
                                                            "learner_kernel_s4")
    for bad in ("", "board", "pynq", "pynq:", "cuda:x", "xrt::k", "sim:", "sim:a:b", None):
        with pytest.raises(ValueError, match="device spec"):
            parse_spec(bad)


@pytest.mark.parametrize("block", GOLDEN)
def test_golden_devices_are_the_shipped_configurations(block):
    dev_cls, cfg_cls, module = GOLDEN[block]
    dev, cfg, label = open_device("golden", block, module)
    assert isinstance(dev, dev_cls) and cfg == cfg_cls.from_dict(SHIPPED_PARAMS[module])
    assert label == f"{module} (golden model)"
    with pytest.raises(ValueError, match="module must be a shipped"):
        open_device("golden", block, "nope")


#: The board files the tests name: they must exist (sw.rl.devices.check_files), empty here.
BOARD_FILES = ("gae.bit", "gae.hwh", "both.bit", "both.hwh", "r.bit", "r.hwh", "a.xclbin",
               "k.xclbin")


def _stand_ins(monkeypatch, tmp_path):
    """PynqDevice / XrtDevice stand-ins: record the arguments, serve the golden device of the
    block they were asked for (the VLNV or kernel name says which). The working directory is
    ``tmp_path``, with the (empty) :data:`BOARD_FILES`."""
    opened = []
    monkeypatch.chdir(tmp_path)
    for name in BOARD_FILES:
        (tmp_path / name).write_bytes(b"")

    def golden_for(text):
        for block, (dev_cls, cfg_cls, module) in GOLDEN.items():
            if text.startswith(block):
                return dev_cls(cfg_cls.from_dict(SHIPPED_PARAMS[module]))
        raise AssertionError(text)

    def pynq(bitfile=None, *, overlay=None, name=None, vlnv=None):
        opened.append(("pynq", bitfile or overlay, name, vlnv))
        dev = golden_for(name or vlnv.split(":")[2])
        dev.instance = name or vlnv.split(":")[2] + "_0"
        dev.overlay = overlay or f"overlay of {bitfile}"
        return dev

    monkeypatch.setattr(sw.rl.devices, "_OVERLAYS", {})

    def xrt(path, *, kernel, block):
        opened.append(("xrt", path, kernel, block))
        return golden_for(block)

    monkeypatch.setattr(sw.driver, "PynqDevice", pynq)
    monkeypatch.setattr(sw.driver, "XrtDevice", xrt)
    return opened


def test_board_specs_open_the_board_backends(monkeypatch, tmp_path):
    opened = _stand_ins(monkeypatch, tmp_path)
    dev, cfg, label = open_device("pynq:gae.bit", "gae", "ignored")
    assert cfg is None and label == "gae on PYNQ (gae_accel_0)"
    assert opened[-1] == ("pynq", "gae.bit", None, "rlk:accel:gae_accel:1.0")
    open_device("pynq:both.bit:replay_accel_1", "replay", "ignored")
    assert opened[-1] == ("pynq", "both.bit", "replay_accel_1", None)
    open_device("pynq:both.bit:learner_1", "learner", "ignored")      # loaded once
    assert opened[-1] == ("pynq", "overlay of both.bit", "learner_1", None)
    for block, kernel in (("gae", "gae_kernel_n8"), ("learner", "learner_kernel_s4"),
                          ("replay", "replay_kernel_k16")):
        _, cfg, label = open_device("xrt:a.xclbin", block, "ignored")
        assert opened[-1] == ("xrt", "a.xclbin", kernel, f"{block}-kernel") and cfg is None
        assert label == f"{block} on XRT ({kernel})"
    # A kernel of another name is still opened as the block's kernel.
    open_device("xrt:a.xclbin:my_learner", "learner", "ignored")
    assert opened[-1] == ("xrt", "a.xclbin", "my_learner", "learner-kernel")


def test_ppo_and_dqn_run_on_board_specs(monkeypatch, tmp_path):
    """The programs read the configuration from the device's HW_* registers and give what
    they give on the golden models."""
    pytest.importorskip("torch")
    from sw.rl.dqn import accelerators
    from sw.rl.ppo import accelerator, golden_accelerator

    _stand_ins(monkeypatch, tmp_path)
    rng = np.random.default_rng(5)
    T, M = 32, 8
    batch = (rng.normal(size=(T, M)), rng.normal(size=(T, M)), rng.random((T, M)) < 0.05,
             rng.normal(size=M), 0.99, 0.95)
    board = accelerator("pynq:gae.bit")
    for a, b in zip(board(*batch), golden_accelerator()(*batch)):
        np.testing.assert_array_equal(a, b)
    learner, replay = accelerators(learner_device="xrt:k.xclbin",
                                   replay_device="pynq:r.bit", target_period=7)
    shipped = SHIPPED_PARAMS["learner_cartpole_s4"]
    assert learner.driver.config == LearnerConfig.from_dict(shipped)
    assert learner.driver.sync_period == 7
    assert replay.driver.config == SumTreeConfig.from_dict(SHIPPED_PARAMS["replay_accel_k16"])
    assert replay.name == "replay on PYNQ (replay_accel_0)"
    assert [replay.insert() for _ in range(3)] == [0, 1, 2]


def test_cli_refuses_bad_specs(capsys):
    from sw.rl import dqn, ppo

    with pytest.raises(SystemExit):
        ppo.main(["--device", "cuda:0"])
    assert "--device: device spec must be" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        dqn.main(["--replay-device", "xrt:"])
    assert "--replay-device: device spec must be" in capsys.readouterr().err


def test_sim_spec_refuses_other_modules_before_building():
    with pytest.raises(ValueError, match="module must be a shipped GAE accelerator"):
        open_device("sim:gae_kernel_n8", "gae", "gae_accel_n8")


@pytest.mark.slow
def test_ppo_on_sim_device_equals_golden():
    """One PPO iteration with GAE on the Verilated RTL of gae_accel_n8 (its build is shared
    with tb/gae/test_accelerator_rtl.py) trains exactly as on the golden model."""
    from sw.rl.ppo import PPOConfig, accelerator, train

    cfg = PPOConfig(total_steps=1024, seed=0)
    sim = accelerator("sim", "gae_accel_n8")
    assert sim.name == "gae_accel_n8 (Verilated RTL)"
    on_sim = train(cfg, sim, progress=False)
    on_golden = train(cfg, accelerator("golden", "gae_accel_n8"), progress=False)
    assert on_sim.episodes == on_golden.episodes and on_sim.episodes
    assert sim.runs >= 1
