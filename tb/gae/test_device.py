"""GoldenDevice: the GAE accelerator's ports modelled in Python, register by register.

Runs are checked against :func:`sw.gae.model.gae_core` bit for bit and
:meth:`sw.gae.spec.run_cycles` cycle for cycle; the same behaviour is checked on the RTL by the
slow test in tb/driver/test_sim_rtl.py.
"""

import numpy as np
import pytest

from sw.gae.spec import GaeCoreConfig
from sw.gae.spec import gae_register_map, hw_info_values
from sw.driver import BusError, GoldenDevice
from sw.gae.layout import pack_rows, region_base, unpack_rows, word_bytes
from sw.gae.model import gae_core

from driver_util import SMALL
from gae_cases import FULL, random_args, random_codes
from sw.gae import spec as gae_spec


class Poke:
    """Raw register access by name on a device's control port."""

    def __init__(self, dev):
        self.dev = dev
        self.rm = gae_register_map(dev.config)

    def rd(self, name):
        return self.dev.control.read32(self.rm.offset(name))

    def wr(self, name, value):
        self.dev.control.write32(self.rm.offset(name), int(value) & 0xFFFF_FFFF)

    def load(self, codes):
        cfg = self.dev.config
        values = np.vstack([codes["values"], codes["bootstrap"][None]])
        for name, rows in (("rewards", codes["rewards"]), ("values", values),
                           ("dones", codes["dones"])):
            self.dev.memory.write(region_base(cfg, name), pack_rows(cfg, name, rows))

    def results(self, T, M):
        cfg = self.dev.config
        G = -(-M // cfg.n_pe)
        names = ("rewards", "values") if cfg.results == "inplace" else ("adv", "rtg")
        return [unpack_rows(cfg, n, self.dev.memory.read(region_base(cfg, n),
                                                        T * G * word_bytes(cfg, n)), T, M)
                for n in names]

    def start(self, args, ctrl=1):
        for name in vars(args):
            if name.upper() in {r.name for r in self.rm.user_registers}:
                self.wr(name.upper(), getattr(args, name))
        self.wr("CTRL", ctrl)


@pytest.fixture
def small():
    return GoldenDevice(GaeCoreConfig.from_dict(SMALL))


def test_parameters_are_checked():
    with pytest.raises(TypeError, match="config must be a GaeCoreConfig"):
        GoldenDevice({"n_pe": 4})
    cfg = GaeCoreConfig.from_dict(SMALL)
    with pytest.raises(ValueError, match="clock_hz must be a positive number, not 0"):
        GoldenDevice(cfg, clock_hz=0)
    with pytest.raises(ValueError, match="access_cycles must be a positive integer, not 0"):
        GoldenDevice(cfg, access_cycles=0)


def test_reset_values_info_and_bus_errors(small):
    p = Poke(small)
    assert p.rd("CTRL") == 0b100                      # idle
    for name, value in hw_info_values(small.config).items():
        assert p.rd(name) == value
    span = p.rm.span
    with pytest.raises(BusError, match=f"read of unmapped control address {span:#x}"):
        small.control.read32(span)
    with pytest.raises(BusError, match="write of unmapped"):
        small.control.write32(span + 4, 1)
    with pytest.raises(ValueError, match="offset must be a non-negative multiple of 4"):
        small.control.read32(2)
    with pytest.raises(ValueError, match=r"value must be an integer in 0\.\.0xffffffff"):
        small.control.write32(0x10, -1)
    with pytest.raises(ValueError, match="goes past the memory window"):
        small.memory.read((1 << small.config.mem_addr_bits) - 4, 8)


def test_run_is_gae_core_bit_exact_and_takes_run_cycles():
    small = GoldenDevice(GaeCoreConfig.from_dict(SMALL), access_cycles=4)
    cfg, p = small.config, Poke(small)
    rng = np.random.default_rng(1)
    T, M = 9, 7                                       # 2 groups, the last one 3 lanes wide
    codes, args = random_codes(cfg, T, M, rng), random_args(cfg, T, M)
    # Padding lane 7 holds a marker that the run must leave alone (no trajectory there).
    padded = {k: np.pad(v, [(0, 0)] * (v.ndim - 1) + [(0, 1)], constant_values=5)
              for k, v in codes.items() if k != "dones"}
    padded["dones"] = np.pad(codes["dones"], [(0, 0), (0, 1)])
    p.load(padded)
    p.wr("GIER", 1)
    p.wr("IP_IER", 1)
    p.start(args)
    t0 = small.cycle
    assert p.rd("CTRL") & 0b100 == 0                  # busy
    with pytest.raises(BusError, match="while a run is in progress"):
        small.memory.read(0, 8)
    assert 0 < p.rd("CYCLES") < gae_spec.run_cycles(cfg, T, M)
    assert small.wait_interrupt(1.0)
    assert small.cycle - t0 == 1 + gae_spec.run_cycles(cfg, T, M)   # accepted a cycle late
    assert p.rd("CYCLES") == gae_spec.run_cycles(cfg, T, M) - 1
    ctrl = p.rd("CTRL")
    assert ctrl & 0b110 == 0b110 and p.rd("CTRL") & 0b10 == 0   # AP_DONE clear on read
    exp = gae_core(codes["rewards"], codes["values"], codes["bootstrap"], codes["dones"], args,
                   cfg)
    adv, rtg = p.results(T, M)
    np.testing.assert_array_equal(adv, exp["adv"])
    np.testing.assert_array_equal(rtg, exp["rtg"])
    image = p.results(T, M + 1)
    assert (image[0][:, M] == 5).all() and (image[1][:, M] == 5).all()
    G = 2
    boot = unpack_rows(cfg, "values", small.memory.read(
        region_base(cfg, "values") + T * G * word_bytes(cfg, "values"),
        G * word_bytes(cfg, "values")), 1, M)
    np.testing.assert_array_equal(boot[0], codes["bootstrap"])
    status = p.rd("STATUS")
    assert status & 0b111 == 0
    assert bool(status >> 10 & 1) == exp["requant_overflow"]
    assert small.interrupt
    p.wr("IP_ISR", 1)
    assert not small.interrupt


@pytest.mark.parametrize("T, M, error", [(0, 3, 1), (4, 0, 2), ("depth", 1, 3), (4, 5000, 3),
                                         (4, 3, 4)])
def test_refused_runs_leave_memory_alone(small, T, M, error):
    cfg, p = small.config, Poke(small)
    rng = np.random.default_rng(2)
    p.load(random_codes(cfg, 4, 3, rng))
    before = small.memory.read(0, 1 << cfg.mem_addr_bits)
    T = cfg.depth if T == "depth" else T
    args = random_args(cfg, T, M)
    if error == 4:
        args.gamma_lambda = (1 << cfg.pe.coef_frac) + 1
    p.start(args)
    small.sleep(1e-7)
    assert p.rd("CTRL") & 0b110 == 0b110 and p.rd("STATUS") & 0b111 == error
    assert p.rd("CYCLES") == 0
    assert small.memory.read(0, 1 << cfg.mem_addr_bits) == before
    p.start(random_args(cfg, 4, 3))                   # a good run clears ERROR
    small.sleep(1e-6)
    assert p.rd("STATUS") & 0b111 == 0


def test_start_while_busy_is_refused_not_queued(small):
    cfg, p = small.config, Poke(small)
    rng = np.random.default_rng(3)
    T, M = 30, 8
    p.load(random_codes(cfg, T, M, rng))
    p.start(random_args(cfg, T, M))
    p.wr("CTRL", 1)                                   # refused
    small.sleep(1e-5)
    assert small.runs == 1 and p.rd("STATUS") >> 11 & 1 == 1
    assert p.rd("CTRL") & 0b101 == 0b100              # idle, AP_START not pending
    p.start(random_args(cfg, 2, 2))
    small.sleep(1e-6)
    assert small.runs == 2 and p.rd("STATUS") >> 11 & 1 == 0


def test_auto_restart_runs_again_until_cleared(small):
    cfg, p = small.config, Poke(small)
    p.load(random_codes(cfg, 3, 4, np.random.default_rng(4)))
    p.wr("CTRL", 0x80)
    assert small.runs == 0                            # AUTO_RESTART alone starts nothing
    p.start(random_args(cfg, 3, 4), ctrl=0x81)
    small.sleep(3 * gae_spec.run_cycles(cfg, 3, 4) / small.clock_hz)
    assert small.runs >= 3 and p.rd("CTRL") & 0b1 == 1
    p.wr("CTRL", 0)
    small.sleep(1e-6)
    runs = small.runs
    small.sleep(1e-6)
    assert small.runs == runs and p.rd("CTRL") & 0b101 == 0b100


def test_wait_interrupt_times_out_on_the_virtual_clock(small):
    cfg, p = small.config, Poke(small)
    t0 = small.time()
    assert not small.wait_interrupt(1e-3)             # nothing running
    assert small.time() - t0 == pytest.approx(1e-3, abs=1e-8)
    p.wr("GIER", 1)
    p.wr("IP_IER", 1)
    T, M = 30, 8
    p.load(random_codes(cfg, T, M, np.random.default_rng(5)))
    p.start(random_args(cfg, T, M))
    assert not small.wait_interrupt(10 / small.clock_hz)       # too short
    assert small.wait_interrupt(1.0)
    assert small.wait_interrupt(0)                    # stays high until IP_ISR is cleared
    p.wr("GIER", 0)
    assert not small.interrupt


def test_padding_and_rows_past_depth_are_not_storage(small):
    cfg = small.config
    wb = word_bytes(cfg, "dones")                     # 8 bytes: one memory byte, padding
    small.memory.write(region_base(cfg, "dones"), b"\xff" * wb)
    assert small.memory.read(region_base(cfg, "dones"), wb) == b"\xff" + bytes(wb - 1)
    past = region_base(cfg, "rewards") + cfg.depth * word_bytes(cfg, "rewards")
    small.memory.write(past, b"\x12" * 8)
    assert small.memory.read(past, 8) == bytes(8)
    small.reset()                                     # memory survives ap_rst_n
    assert small.memory.read(region_base(cfg, "dones"), 1) != b"\x00"


def test_full_results_mode_is_bit_exact():
    cfg = GaeCoreConfig.from_dict(FULL)
    dev = GoldenDevice(cfg)
    p = Poke(dev)
    rng = np.random.default_rng(6)
    for T, M in ((7, 13), (1, 1), (12, 20)):
        codes, args = random_codes(cfg, T, M, rng), random_args(cfg, T, M)
        p.load(codes)
        p.start(args)
        dev.sleep(1e-5)
        assert p.rd("CYCLES") == gae_spec.run_cycles(cfg, T, M) - 1
        exp = gae_core(codes["rewards"], codes["values"], codes["bootstrap"], codes["dones"],
                       args, cfg)
        adv, rtg = p.results(T, M)
        np.testing.assert_array_equal(adv, exp["adv"])
        np.testing.assert_array_equal(rtg, exp["rtg"])
        # The inputs are untouched in full mode.
        got = unpack_rows(cfg, "rewards", dev.memory.read(
            0, T * -(-M // 5) * word_bytes(cfg, "rewards")), T, M)
        np.testing.assert_array_equal(got, codes["rewards"])
