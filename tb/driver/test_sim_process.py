"""sw.driver.open_sim: the Verilated RTL as an ordinary Device, outside cocotb.

A user's own GAE batch on the small accelerator of the RTL tests (its Verilator build is shared
with tb/driver/test_sim_rtl.py) equals the golden device's result bit for bit, the simulator
ends when the device is closed, bus errors come back as BusError, and bad targets are refused
before anything is built. The PPO program on ``--device sim`` is in tb/rl/test_devices.py.
"""

import os
import sys
import textwrap

import numpy as np
import pytest

from driver_util import SMALL, rollout
from sw.driver import BusError, GaeDriver, GoldenDevice, SimProcessDevice, open_sim
from sw.gae.spec import GaeCoreConfig


@pytest.mark.slow
def test_user_batch_on_rtl_equals_golden():
    rng = np.random.default_rng(7)
    batch = rollout(rng, 16, 6, reward="gauss")
    with open_sim("gae-accel", SMALL, quiet=True) as dev:
        assert isinstance(dev, SimProcessDevice)
        adv, ret = GaeDriver(dev).compute(*batch, 0.99, 0.95)
        cycles = dev.time()
        with pytest.raises(BusError):
            dev.control.read32(0x7C)                # unmapped: SLVERR, as on the golden device
        proc = dev._proc
    assert proc.wait(timeout=30) == 0               # closing ends the simulator
    gold = GaeDriver(GoldenDevice(GaeCoreConfig.from_dict(SMALL))).compute(*batch, 0.99, 0.95)
    assert np.array_equal(adv, gold[0]) and np.array_equal(ret, gold[1])
    assert cycles > 0                               # simulation time, not wall time
    with pytest.raises(RuntimeError, match="closed"):
        dev.control.read32(0)


@pytest.mark.slow
@pytest.mark.parametrize("units, flush_rows", [("caller", 5), ("standardized", None)])
def test_streamed_batches_on_rtl_equal_golden(units, flush_rows):
    """GaeDriver.stream on the Verilated RTL: the steps written into their rows while the
    accelerator idles (5 rows at a time, or all with the bootstrap row at the default
    ``flush_rows``), then the result registers and one run. The second
    stream of a driver is a pushed one (the first takes the batch path); both give the golden
    device's results bit for bit, with the same CYCLES (the cycle model's)."""
    rng = np.random.default_rng(11)
    batches = [rollout(rng, 12, 7, reward="gauss") for _ in range(2)]
    results = {}
    with open_sim("gae-accel", SMALL, quiet=True) as dev:
        for name, device in (("rtl", dev), ("golden", GoldenDevice(GaeCoreConfig.from_dict(
                SMALL)))):
            drv = GaeDriver(device, units=units)
            out = []
            for r, v, d, last in batches:
                s = drv.stream(r.shape[1], r.shape[0], 0.97, 0.9, flush_rows=flush_rows)
                for t in range(r.shape[0]):
                    s.push(r[t], v[t], d[t])
                adv, ret = s.finish(last)
                out.append((s.deferred, adv, ret, drv.last_status["CYCLES"]))
            results[name] = out
    assert [o[0] for o in results["rtl"]] == [True, False]
    for (_, a1, r1, c1), (_, a2, r2, c2) in zip(results["rtl"], results["golden"]):
        np.testing.assert_array_equal(a1, a2)
        np.testing.assert_array_equal(r1, r2)
        assert c1 == c2 > 0


def test_bad_targets_refused_before_building(tmp_path):
    with pytest.raises(ValueError, match="target must be a shipped accelerator"):
        open_sim("gae_kernel_n8", cache_dir=tmp_path)
    with pytest.raises(ValueError, match="target must be one of"):
        open_sim("gae-kernel", {}, cache_dir=tmp_path)
    with pytest.raises(ValueError, match="n_pe"):
        open_sim("gae-accel", {"n_pe": 0}, cache_dir=tmp_path)
    with pytest.raises(ValueError, match="clock_period_ns"):
        open_sim("gae_accel_n8", clock_period_ns=0, cache_dir=tmp_path)
    assert not any(tmp_path.iterdir())


#: The generator's build command with the cocotb runner's build stubbed (no Verilator: it
#: links nothing and touches the model), for :data:`sw.driver.sim_process.BUILD_COMMAND`.
STUB_BUILD = (sys.executable, "-c", textwrap.dedent("""
    import sys

    import cocotb_tools.runner

    class Runner:
        def build(self, *, hdl_toplevel, build_dir, **kwargs):
            (build_dir / hdl_toplevel).write_bytes(b"")

    cocotb_tools.runner.get_runner = lambda name: Runner()
    from rtl_gen.sim_build import main
    sys.exit(main())
"""))


def test_open_sim_says_building_only_when_it_builds(tmp_path, monkeypatch, capsys):
    """open_sim's line says "building" when the model must be compiled (none yet, or its
    Verilog changed since) and "built before" when the cache holds a current one; the
    generator's build command runs on the real emitted sources with Verilator stubbed, and the
    simulator is never started."""
    from rtl_gen.sim_build import model_is_current
    from sw.driver import sim_process

    class Stop(Exception):
        pass

    def stop(build_dir, module, **kwargs):
        assert (build_dir / module).is_file()
        raise Stop

    monkeypatch.setattr(sim_process, "BUILD_COMMAND", STUB_BUILD)
    monkeypatch.setattr(sim_process, "start_sim", stop)
    lines = []
    for _ in range(2):
        with pytest.raises(Stop):
            open_sim("gae_accel_n8", cache_dir=tmp_path)
        lines.append(capsys.readouterr().err)
    (build_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert lines[0] == (f"open_sim: building the Verilated RTL of gae_accel_n8 (once per "
                        f"configuration: minutes) in {build_dir}, then starting it\n")
    assert lines[1] == (f"open_sim: starting the Verilated RTL of gae_accel_n8 (built before, "
                        f"{build_dir})\n")
    model = build_dir / "gae_accel"
    verilog = build_dir / "src" / "gae_accel.v"
    assert model_is_current(build_dir, "gae_accel", [verilog])
    os.utime(model, (verilog.stat().st_mtime - 10,) * 2)       # the Verilog is newer
    assert not model_is_current(build_dir, "gae_accel", [verilog])
    model.unlink()
    assert not model_is_current(build_dir, "gae_accel", [verilog])
    with pytest.raises(Stop):
        open_sim("gae_accel_n8", cache_dir=tmp_path, quiet=True)
    assert capsys.readouterr().err == ""


def test_failed_build_is_reported(tmp_path):
    """A build the generator's command refuses comes back as RuntimeError with its message."""
    from sw.driver import sim_process

    with pytest.raises(RuntimeError, match="block must be one of .* not 'nope'"):
        sim_process._build("nope", {}, cache_dir=tmp_path)
