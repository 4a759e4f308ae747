"""GaeDriver on the GoldenDevice: against the float reference (within a derived error bound),
against the bit-exact golden model at code level, and every error path.

Error bound of :meth:`GaeDriver.compute` against :func:`gae_reference` on the same standardized
rewards and raw values (``error_bound`` below, per element, for in-place results): the reward
part of any advantage is within one reward step (error-feedback rounding, no clipping); each
value is within half a value step (plus the register rounding), which reaches an advantage
through ``(1 + gamma) * H`` TD errors (``H = sum (gamma lambda)^l``); the coefficient
rounding (``2**-coef_width`` each) through ``|V| H`` and ``|delta| H^2``; the PE's own rounding
a few data-format ulps per step; the result code half a code of the result range.
"""

import dataclasses
import math
import warnings

import numpy as np
import pytest

from sw.gae.spec import GaeCoreConfig
from sw.gae.spec import gae_register_map
from sw.driver import (BusError, DequantOverflowWarning, GaeBusyError, GaeConfigMismatchError,
                       GaeDriver, GaeError, GaeOverflowWarning, GaeTimeoutError, GoldenDevice,
                       PeOverflowWarning, RequantOverflowWarning, StartRefusedWarning,
                       read_hw_config)
from sw.gae.pipeline import GaeQuantizationPipeline
from sw.gae.golden import gae_reference
from sw.gae.spec import GaeCoreArgs
from sw.gae.model import gae_core

from driver_util import SMALL, ModelMmio, record, rollout
from gae_cases import FULL, random_args, random_codes
from sw.gae import spec as gae_spec

HEPPO = {"n_pe": 8, "max_trajectories": 64, "capacity": 256}

#: random_args' result scales saturate on random codes; tests that only look at other flags.
RANDOM_ARGS_SATURATE = pytest.mark.filterwarnings("ignore::sw.driver.GaeOverflowWarning")


def make(params=SMALL, **kw):
    """A golden device and a driver on it; in standardized units unless ``units`` is given
    (the bound below is that mode's; tb/gae/test_driver_units.py checks the caller's units)."""
    kw.setdefault("units", "standardized")
    cfg = GaeCoreConfig.from_dict(params)
    dev = GoldenDevice(cfg)
    return dev, GaeDriver(dev, cfg, **kw)


def error_bound(drv, batch, values, last_values):
    """Elementwise bound on |compute - gae_reference| for advantages and returns (see doc)."""
    cfg, prep = drv.config, batch.prepared
    rf, df = cfg.reg_format, cfg.pe.data_format
    g, gl = batch.gamma, batch.gamma * batch.lam
    H = sum(gl ** l for l in range(batch.T))
    v_step = drv.pipeline.value_quantizer.step * prep["value_std"]
    e_v = v_step / 2 + cfg.code_max * rf.ulp / 2 + rf.ulp / 2
    e_r = drv.pipeline.reward_quantizer.step + batch.T * cfg.code_max * rf.ulp / 2
    v_max = max(np.abs(values).max(), np.abs(last_values).max()) + e_v
    d_max = np.abs(prep["standardized_rewards"]).max() + (1 + g) * v_max
    coef = 2.0 ** -cfg.pe.coef_frac
    pe = 4 * df.ulp * H
    adv = e_r + (1 + g) * e_v * H + coef * v_max * H + coef * d_max * H * H + pe
    adv_code = batch.adv_range / cfg.code_max / 2 if cfg.results == "inplace" else df.ulp
    rtg_code = batch.rtg_range / cfg.code_max / 2 if cfg.results == "inplace" else df.ulp
    return adv + adv_code, adv + e_v + rtg_code


# -- against the float reference -------------------------------------------------------------------
@pytest.mark.parametrize("params, T, M, reward", [
    (SMALL, 32, 2, "sparse"), (SMALL, 15, 4, "gauss"), (SMALL, 10, 7, "sparse"),
    (HEPPO, 255, 8, "sparse"), (HEPPO, 100, 24, "gauss"), (FULL, 40, 5, "gauss"),
    (FULL, 20, 9, "sparse"),
])
def test_compute_matches_gae_reference_within_the_bound(params, T, M, reward):
    dev, drv = make(params)
    rng = np.random.default_rng(T * 100 + M)
    rewards, values, dones, last = rollout(rng, T, M, reward=reward)
    with warnings.catch_warnings():
        warnings.simplefilter("error", GaeOverflowWarning)
        adv, ret = drv.compute(rewards, values, dones, last, 0.99, 0.95)
    batch = drv.last_batch
    assert batch.prepared["reward_clipped"] == 0 and batch.prepared["value_clipped"] == 0
    ref_a, ref_r = gae_reference(batch.prepared["standardized_rewards"], values, dones, last,
                                 0.99, 0.95)
    bound_a, bound_r = error_bound(drv, batch, values, last)
    err_a, err_r = np.abs(adv - ref_a).max(), np.abs(ret - ref_r).max()
    assert err_a <= bound_a, (err_a, bound_a)
    assert err_r <= bound_r, (err_r, bound_r)
    rel = math.sqrt(np.mean((adv - ref_a) ** 2) / np.mean(ref_a ** 2))
    assert rel < 0.05, rel
    assert adv.dtype == ret.dtype == np.float64 and adv.shape == (T, M)
    assert drv.last_status["ERROR"] == 0
    assert drv.last_status["CYCLES"] == gae_spec.run_cycles(drv.config, T, M) - 1


def test_running_reward_statistics_persist_across_calls():
    dev, drv = make()
    rng = np.random.default_rng(7)
    batches = [rollout(rng, 12, 4, reward="gauss") for _ in range(3)]
    for b in batches:
        drv.compute(*b, 0.99, 0.95)
    stats = drv.pipeline.rewards.stats
    allr = np.concatenate([b[0].ravel() for b in batches])
    assert stats.count == allr.size and stats.mean == pytest.approx(allr.mean())
    np.testing.assert_allclose(drv.last_batch.prepared["standardized_rewards"],
                               (batches[-1][0] - allr.mean()) / allr.std())


# -- against the bit-exact golden model ------------------------------------------------------------
@pytest.mark.parametrize("params", [SMALL, FULL, {**SMALL, "code_bits": 16}])
def test_code_level_run_is_gae_core_bit_exact(params):
    dev, drv = make(params)
    cfg = drv.config
    rng = np.random.default_rng(8)
    for T, M in ((1, 1), (5, cfg.n_pe + 1), (cfg.depth // 2 - 1, 2), (3, 2 * cfg.n_pe)):
        codes, args = random_codes(cfg, T, M, rng), random_args(cfg, T, M)
        exp = gae_core(codes["rewards"], codes["values"], codes["bootstrap"], codes["dones"],
                       args, cfg)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", GaeOverflowWarning)
            got = drv.run(codes["rewards"], codes["values"], codes["bootstrap"], codes["dones"],
                          args)
        np.testing.assert_array_equal(got["adv"], exp["adv"])
        np.testing.assert_array_equal(got["rtg"], exp["rtg"])
        for flag in ("dequant_overflow", "pe_overflow", "requant_overflow"):
            assert got[flag] == exp[flag]
        assert got["cycles"] == gae_spec.run_cycles(cfg, T, M) - 1


def test_compute_is_gae_core_on_the_codes_it_chose():
    dev, drv = make(HEPPO)
    rewards, values, dones, last = rollout(np.random.default_rng(9), 64, 19)
    adv, ret = drv.compute(rewards, values, dones, last, 0.97, 0.9)
    b = drv.last_batch
    assert b.runs > 1                        # the retry's merge is checked too
    got = (adv, ret)
    for run, args in enumerate(b.run_args):  # each element from the run the driver says
        exp = gae_core(b.codes["rewards"], b.codes["values"], b.codes["bootstrap"],
                       b.codes["dones"], args, drv.config)
        dec = drv.dequantize(dataclasses.replace(b, args=args), exp["adv"], exp["rtg"])
        for i in (0, 1):
            here = b.result_run[i] == run
            np.testing.assert_array_equal(got[i][here], dec[i][here])
            if run < b.runs - 1:             # taken from a run only where its code fitted
                key = ("adv", "rtg")[i]
                assert (np.abs(exp[key][here]) < drv.config.code_max).all()


# -- validation before any bus access --------------------------------------------------------------
T0, M0 = 6, 3


def good():
    return rollout(np.random.default_rng(10), T0, M0)


def bad_cases():
    r, v, d, lv = good()
    nan = r.copy()
    nan[2, 1] = np.nan
    inf = v.copy()
    inf[0, 0] = np.inf
    return [
        ((r[0], v, d, lv, 0.9, 0.9), r"rewards must be a \[T, M\] array, not shape \(3,\)"),
        ((r.astype(object), v, d, lv, 0.9, 0.9), "rewards must be a numeric array .* object"),
        ((r + 0j, v, d, lv, 0.9, 0.9), "rewards must be a numeric array"),
        ((np.array([["a"] * 3] * 6), v, d, lv, 0.9, 0.9), "rewards must be a numeric array"),
        ((nan, v, d, lv, 0.9, 0.9), r"rewards must be finite: 1 NaN .* first at \(2, 1\)"),
        ((r, inf, d, lv, 0.9, 0.9), r"values must be finite: .* first at \(0, 0\)"),
        ((r, v[:, :2], d, lv, 0.9, 0.9), r"values must have the shape of rewards \(6, 3\)"),
        ((r, v, d[:5], lv, 0.9, 0.9), r"dones must have the shape of rewards"),
        ((r, v, d * 2.0 + 0.5, lv, 0.9, 0.9), "dones must be bool-like"),
        ((r, v, d, lv[:2], 0.9, 0.9), r"last_values must have shape \(3,\), not \(2,\)"),
        ((r, v, d, np.full(3, np.nan), 0.9, 0.9), "last_values must be finite"),
        ((r, v, d, lv, 1.01, 0.9), r"gamma must be a real number in \[0, 1\], not 1.01"),
        ((r, v, d, lv, -0.1, 0.9), r"gamma must be a real number in \[0, 1\]"),
        ((r, v, d, lv, float("nan"), 0.9), "gamma must be a real number"),
        ((r, v, d, lv, True, 0.9), "gamma must be a real number in .* not True"),
        ((r, v, d, lv, "0.9", 0.9), "gamma must be a real number"),
        ((r, v, d, lv, 0.9, 2), r"lam must be a real number in \[0, 1\], not 2"),
        ((r[:0], v[:0], d[:0], lv, 0.9, 0.9), "need at least one time step"),
        ((np.zeros((70, 3)), np.zeros((70, 3)), np.zeros((70, 3)), lv, 0.9, 0.9),
         r"T=70 steps x M=3 trajectories do not fit: .* = 71 \* 1 = 71 memory words.* has 66"),
        ((np.zeros((30, 9)), np.zeros((30, 9)), np.zeros((30, 9)), np.zeros(9), 0.9, 0.9),
         r"do not fit.*e\.g\. T <= 21 for this M"),
    ]


@pytest.mark.parametrize("case", range(len(bad_cases())))
def test_invalid_input_raises_before_any_bus_access(case):
    dev, drv = make({**SMALL, "capacity": 65, "max_trajectories": 4})
    log = record(dev)
    args, message = bad_cases()[case]
    with pytest.raises(ValueError, match=message):
        drv.compute(*args)
    assert log == []
    assert drv.pipeline.rewards.stats.count == 0      # statistics untouched too


def test_bool_like_dones_and_integer_rewards_are_accepted():
    dev, drv = make()
    r, v, d, lv = good()
    a1 = drv.compute(np.rint(r * 3).astype(np.int32), v, d.astype(np.int8), lv, 1, 0)
    dev2, drv2 = make()
    a2 = drv2.compute(np.rint(r * 3), v, d, lv, 1.0, 0.0)
    np.testing.assert_array_equal(a1[0], a2[0])


def test_code_level_inputs_are_checked_before_any_bus_access():
    dev, drv = make()
    log = record(dev)
    rng = np.random.default_rng(11)
    c = random_codes(drv.config, 4, 3, rng)
    with pytest.raises(ValueError, match=r"reward_codes must be integer codes in -128\.\.127"):
        drv.load(c["rewards"] * 2, c["values"], c["bootstrap"], c["dones"])
    with pytest.raises(ValueError, match="reward_codes must be integer codes"):
        drv.load(c["rewards"] * 0.5, c["values"], c["bootstrap"], c["dones"])
    with pytest.raises(ValueError, match=r"bootstrap_codes must have shape \(3,\)"):
        drv.load(c["rewards"], c["values"], c["bootstrap"][:2], c["dones"])
    with pytest.raises(ValueError, match=r"args\.gamma must be in 0\.\.131071"):
        drv.start(GaeCoreArgs(4, 3, -1, 0, 0, 0, 0, 0))
    with pytest.raises(ValueError, match=r"args\.reward_scale must be a S18E5"):
        drv.start(GaeCoreArgs(4, 3, 0, 0, 1 << 31, 0, 0, 0))
    # Scale words: reserved bits (between the mantissa and the shift, above the shift), offsets
    # outside their format, a requantizer mantissa whose operand window cannot saturate.
    with pytest.raises(ValueError, match=r"args\.value_scale must be a S18E5.*not 0x40000"):
        drv.start(GaeCoreArgs(4, 3, 0, 0, 0, 0, 1 << 18, 0))
    with pytest.raises(ValueError, match=r"args\.rtg_scale must be a S18E5.*not 0x20000001"):
        drv.start(GaeCoreArgs(4, 3, 0, 0, 0, 0, 0, 0, 0, 0, (1 << 29) | 1, 0))
    with pytest.raises(ValueError, match=r"args\.value_offset must be a raw sQ16\.16"):
        drv.start(GaeCoreArgs(4, 3, 0, 0, 0, 0, 0, 1 << 31))
    with pytest.raises(ValueError, match=r"args\.adv_scale mantissa 1 is too small for "
                                         r"args\.adv_offset 0"):
        drv.start(GaeCoreArgs(4, 3, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0))
    with pytest.raises(TypeError, match="args must be a GaeCoreArgs"):
        drv.start({"num_timesteps": 4})
    assert log == []


# -- status: errors, warnings, busy, timeouts ------------------------------------------------------
@pytest.mark.parametrize("change, code, text", [
    ({"num_timesteps": 0}, 1, "num_timesteps is 0"),
    ({"num_trajectories": 0}, 2, "num_trajectories is 0"),
    ({"num_timesteps": 66}, 3, r"\(num_timesteps \+ 1\) \* ceil\(num_trajectories / n_pe\) "
                               r"exceeds the memory depth"),
    ({"gamma": (1 << 16) + 1}, 4, r"gamma or gamma_lambda above 1\.0"),
])
def test_status_error_raises_with_the_errors_text(change, code, text):
    dev, drv = make()
    args = random_args(drv.config, 4, 3)
    for k, v in change.items():
        setattr(args, k, v)
    drv.start(args)
    with pytest.raises(GaeError, match=f"GAE accelerator error {code}: {text}") as info:
        drv.wait()
    assert info.value.code == code


def overflow_args(cfg, T, M, kind):
    q = lambda x: int(cfg.reg_format.quantize(x))  # noqa: E731
    args = random_args(cfg, T, M)
    if kind == "dequant":
        args.value_scale, args.value_offset = cfg.scale_format.quantize(300.0), q(0.0)
    elif kind == "pe":
        args.reward_scale = cfg.scale_format.quantize(250.0)
        args.gamma_lambda = 1 << cfg.pe.coef_frac
    else:
        args.adv_scale = cfg.result_scale_format.quantize(200.0)
    return args


@RANDOM_ARGS_SATURATE
@pytest.mark.parametrize("kind, category", [("dequant", DequantOverflowWarning),
                                            ("pe", PeOverflowWarning),
                                            ("requant", RequantOverflowWarning)])
def test_overflow_flags_warn_with_their_own_category(kind, category):
    dev, drv = make()
    cfg = drv.config
    codes = random_codes(cfg, 30, 2, np.random.default_rng(12))
    codes["rewards"][:] = cfg.code_max
    codes["dones"][:] = False
    args = overflow_args(cfg, 30, 2, kind)
    with pytest.warns(category, match=f"STATUS.{kind.upper()}_OVERFLOW") as rec:
        out = drv.run(codes["rewards"], codes["values"], codes["bootstrap"], codes["dones"],
                      args)
    assert out[f"{kind}_overflow"]
    assert issubclass(category, GaeOverflowWarning) and issubclass(category, RuntimeWarning)
    exp = gae_core(codes["rewards"], codes["values"], codes["bootstrap"], codes["dones"], args,
                   cfg)
    assert {type(w.message) for w in rec} == {
        c for c, f in ((DequantOverflowWarning, "dequant_overflow"),
                       (PeOverflowWarning, "pe_overflow"),
                       (RequantOverflowWarning, "requant_overflow")) if exp[f]}


def test_requant_overflow_warns_or_retries_with_wider_ranges():
    rollouts = rollout(np.random.default_rng(13), 30, 4, reward="gauss")
    dev, drv = make(result_range=(0.05, 0.05), on_requant_overflow="warn")
    with pytest.warns(RequantOverflowWarning):
        adv_sat, _ = drv.compute(*rollouts, 0.99, 0.95)
    assert np.abs(adv_sat).max() <= 0.05 * 1.01
    dev, drv = make(result_range=(0.05, 0.05))         # default: "retry"
    with warnings.catch_warnings():
        warnings.simplefilter("error", GaeOverflowWarning)
        adv, ret = drv.compute(*rollouts, 0.99, 0.95)
    b = drv.last_batch
    assert b.adv_range > 0.05 and b.adv_range <= b.adv_bound * 1.01
    ref_a, _ = gae_reference(b.prepared["standardized_rewards"], *rollouts[1:], 0.99, 0.95)
    assert np.abs(adv - ref_a).max() <= error_bound(drv, b, rollouts[1], rollouts[3])[0]


@RANDOM_ARGS_SATURATE
def test_start_while_busy_raises_and_writes_nothing():
    dev, drv = make()
    cfg = drv.config
    codes = random_codes(cfg, 30, 8, np.random.default_rng(14))
    drv.load(codes["rewards"], codes["values"], codes["bootstrap"], codes["dones"])
    drv.start(random_args(cfg, 30, 8))
    log = record(dev)
    with pytest.raises(GaeBusyError, match="busy"):
        drv.start(random_args(cfg, 30, 8))
    assert [(k, off) for k, off, _ in log] == [("r", 0)]
    drv.wait()


@RANDOM_ARGS_SATURATE
def test_start_refused_by_another_master_warns():
    dev, drv = make()
    cfg = drv.config
    codes = random_codes(cfg, 30, 8, np.random.default_rng(15))
    drv.load(codes["rewards"], codes["values"], codes["bootstrap"], codes["dones"])
    drv.start(random_args(cfg, 30, 8))
    drv.register_map.CTRL.AP_START = 1                # someone else, mid-run
    with pytest.warns(StartRefusedWarning, match="START_REFUSED"):
        status = drv.wait()
    assert status["START_REFUSED"] == 1 and dev.runs == 1


@RANDOM_ARGS_SATURATE
@pytest.mark.parametrize("use_interrupt", [True, False])
def test_timeout_on_the_device_clock(use_interrupt):
    cfg = GaeCoreConfig.from_dict(SMALL)
    dev = GoldenDevice(cfg, clock_hz=1e3)             # 1 ms per cycle: a run takes ~0.1 s
    drv = GaeDriver(dev, cfg, timeout=1e-3, clock_hz=1e9, use_interrupt=use_interrupt,
                    poll_interval=1e-3)
    codes = random_codes(cfg, 30, 8, np.random.default_rng(16))
    drv.load(codes["rewards"], codes["values"], codes["bootstrap"], codes["dones"])
    drv.start(random_args(cfg, 30, 8))
    with pytest.raises(GaeTimeoutError, match="within 0.001"):
        drv.wait()
    assert dev.busy
    status = drv.wait(timeout=10.0)                   # a longer wait succeeds
    assert status["ERROR"] == 0


def test_polling_and_interrupt_give_the_same_results():
    rollouts = rollout(np.random.default_rng(17), 20, 6)
    out = []
    for use_interrupt in (True, False):
        dev, drv = make(use_interrupt=use_interrupt)
        log = record(dev)
        out.append(drv.compute(*rollouts, 0.99, 0.95))
        gier = [v for k, off, v in log if k == "w" and off == 0x04]
        assert gier == [int(use_interrupt)]
        if use_interrupt:
            assert ("w", 0x0C, 1) in log and not dev.interrupt   # IP_ISR.AP_DONE cleared
    np.testing.assert_array_equal(out[0][0], out[1][0])
    np.testing.assert_array_equal(out[0][1], out[1][1])


# -- configuration ---------------------------------------------------------------------------------
@pytest.mark.parametrize("params", [SMALL, FULL, HEPPO, {**SMALL, "code_bits": 16,
                                                          "pe": {"k": 5, "data_width": 24,
                                                                 "data_frac": 10}}])
def test_config_read_back_from_hw_registers_touches_only_mapped_registers(params):
    cfg = GaeCoreConfig.from_dict(params)
    dev = GoldenDevice(cfg)
    log = record(dev)
    hw = read_hw_config(dev.control)                  # GoldenDevice raises BusError otherwise
    assert hw.results == cfg.results and hw.depth == cfg.depth and hw.n_pe == cfg.n_pe
    assert gae_register_map(hw) == gae_register_map(cfg)
    assert hw.region_bytes == cfg.region_bytes and hw.pe.data_format == cfg.pe.data_format
    assert all(k == "r" for k, *_ in log)
    drv = GaeDriver(dev)                              # config=None: the one read back
    assert drv.config == hw


def test_config_mismatch_names_the_fields():
    dev = GoldenDevice(GaeCoreConfig.from_dict(SMALL))
    wrong = GaeCoreConfig.from_dict({**SMALL, "n_pe": 8, "code_bits": 16})
    with pytest.raises(GaeConfigMismatchError, match=r"HW_N_PE: HW_N_PE 4 \(config: 8\);.*"
                                                     r"HW_FORMAT: CODE_BITS 8 \(config: 16\)"):
        GaeDriver(dev, wrong)
    full = GaeCoreConfig.from_dict({**SMALL, "results": "full"})
    with pytest.raises(GaeConfigMismatchError, match="FULL_RESULTS 0 .config: 1."):
        GaeDriver(dev, full)
    # Same depth, another split of it: accepted.
    GaeDriver(dev, GaeCoreConfig.from_dict({**SMALL, "max_trajectories": 4, "capacity": 65}))
    assert GaeDriver(dev, dict(SMALL)).config == GaeCoreConfig.from_dict(SMALL)


def test_not_a_gae_accelerator():
    rm = gae_register_map(GaeCoreConfig())
    with pytest.raises(GaeConfigMismatchError, match="do not describe a GAE accelerator"):
        read_hw_config(ModelMmio(rm))                  # all zeros
    # A smaller map (another block): the probe reads an unmapped address, the bus says no,
    # and the driver says what that means.
    from sw.regmap import Register, RegisterMap
    with pytest.raises(GaeConfigMismatchError, match="another accelerator's control port") as e:
        read_hw_config(ModelMmio(RegisterMap("x", [Register.scalar("A")])))
    assert isinstance(e.value.__cause__, BusError)


def test_driver_parameters_are_checked():
    cfg = GaeCoreConfig.from_dict(SMALL)
    dev = GoldenDevice(cfg)
    log = record(dev)
    for kw, message in [
        ({"timeout": 0}, "timeout must be a positive number, not 0"),
        ({"poll_interval": -1}, "poll_interval must be a positive number"),
        ({"clock_hz": None}, "clock_hz must be a positive number"),
        ({"result_sigmas": float("inf")}, "result_sigmas must be a positive number"),
        ({"result_range": 3.0}, r"result_range must be a pair \(R_A, R_G\) or None"),
        ({"result_range": (1.0, -1.0)}, "result_range must be a positive number"),
        ({"on_requant_overflow": "ignore"}, "on_requant_overflow must be 'warn' or 'retry'"),
        ({"use_interrupt": "yes"}, "use_interrupt must be a bool or None"),
        ({"pipeline": GaeQuantizationPipeline(bits=7)}, "pipeline must have bits=8"),
    ]:
        with pytest.raises(ValueError, match=message):
            GaeDriver(dev, cfg, **kw)
    assert all(k == "r" for k, *_ in log)             # only the HW_* probe, never a write
    with pytest.raises(TypeError, match="device must be a Device"):
        GaeDriver(object(), cfg)
    with pytest.raises(TypeError, match="config must be a GaeCoreConfig"):
        GaeDriver(dev, 8)
    with pytest.raises(TypeError, match="pipeline must be a GaeQuantizationPipeline"):
        GaeDriver(dev, cfg, pipeline=object())

    class NoIrq(GoldenDevice):
        has_interrupt = False

    with pytest.raises(ValueError, match="use_interrupt=True but NoIrq has no interrupt"):
        GaeDriver(NoIrq(cfg), cfg, use_interrupt=True)
    assert not GaeDriver(NoIrq(cfg), cfg)._use_irq
