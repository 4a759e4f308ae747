"""GaeDriver.stream (sw/gae/stream.py): a batch pushed one time step at a time during the rollout.

On the golden device: the streamed run gives exactly what :meth:`GaeDriver.execute` gives for
the same codes and registers loaded as a whole batch (random shapes, episode ends, truncation,
both units, in-place and full results); the first stream of a driver is the batch path; bad
pushes are refused naming the argument; pushes write their rows ``flush_rows`` steps at a
time, and the bus traffic after the last step is the unwritten rows with the bootstrap row, the
result registers and the read-back.
"""

import warnings
import zlib

import numpy as np
import pytest
from driver_util import SMALL

from sw.driver import InstantDevice
from sw.gae.device import GoldenDevice
from sw.gae.driver import ClippingWarning, GaeDriver
from sw.gae.golden import gae_reference
from sw.gae.layout import pack_rows, row_offset, word_bytes
from sw.gae.model import gae_core
from sw.gae.spec import GaeCoreConfig, gae_register_map, hw_info_values
from sw.gae.stream import FIXED_ARGS, FLUSH_ROWS, VALUE_STD_MARGIN
from sw.registry import shipped_config

CONFIGS = {
    "n8": shipped_config("gae_accel_n8")[1],
    "small": GaeCoreConfig(**SMALL),
    "full16": GaeCoreConfig(n_pe=3, max_trajectories=12, capacity=40, code_bits=16,
                            results="full", axi_data_width=32),
}


def rollout(rng, T, M, p_done=0.08):
    r = np.where(rng.random((T, M)) < 0.3, rng.normal(1.0, 2.0, (T, M)), 0.0)
    v = rng.normal(3.0, 1.5, (T, M))
    return r, v, rng.random((T, M)) < p_done, rng.normal(3.0, 1.5, M)


def stream_batch(drv, r, v, d, last, gamma=0.99, lam=0.95, **flags):
    T, M = r.shape
    s = drv.stream(M, T, gamma, lam)
    for t in range(T):
        kw = {k: x[t] for k, x in flags.items()} if flags else {"dones": d[t]}
        s.push(r[t], v[t], **kw)
    return s, s.finish(last)


def rel(x, y):
    return float(np.sqrt(np.mean((x - y) ** 2) / np.mean(y ** 2)))


# random shapes: a short batch sets a narrow range for the next one, which then clips a little
@pytest.mark.filterwarnings("ignore::sw.gae.driver.ClippingWarning")
@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("units", ["caller", "standardized"])
def test_streamed_run_equals_batch_run_bit_for_bit(name, units):
    cfg = CONFIGS[name]
    rng = np.random.default_rng(zlib.crc32(f"{name} {units}".encode()))
    drv = GaeDriver(GoldenDevice(cfg), units=units)
    gamma, lam = 0.97, 0.9
    for it in range(4):
        M = int(rng.integers(1, cfg.max_trajectories + 1))
        G = -(-M // cfg.n_pe)
        T = int(rng.integers(1, min(cfg.depth // G - 1, 200) + 1))
        r, v, d, last = rollout(rng, T, M)
        s, (adv, ret) = stream_batch(drv, r, v, d, last, gamma, lam)
        assert s.deferred == (it == 0) and not s.is_open
        # the same codes and registers as one batch on a fresh accelerator
        other = GaeDriver(GoldenDevice(cfg), units=units)
        a2, r2 = other.execute(s.batch)
        np.testing.assert_array_equal(adv, a2)
        np.testing.assert_array_equal(ret, r2)
        last_run = (s.batch.refinements or [s.batch])[-1]   # a deferred batch is refined
        c = last_run.codes
        out = gae_core(c["rewards"], c["values"], c["bootstrap"], c["dones"],
                       last_run.run_args[-1], cfg)
        np.testing.assert_array_equal(drv.read_results(T, M)[0], out["adv"])
        if units == "caller":                   # within the quantization error of textbook GAE
            ref_a, ref_r = gae_reference(r, v, d, last, gamma, lam)
            assert rel(adv, ref_a) < 0.08 and rel(ret, ref_r) < 0.04


@pytest.mark.filterwarnings("ignore::sw.gae.driver.ClippingWarning")
def test_episode_ends_and_truncation_as_gymnasium_flags():
    """terminated/truncated/final_values per push: the truncated step bootstraps from its final
    observation (folded into the reward, as the batch path does)."""
    cfg = CONFIGS["small"]
    rng = np.random.default_rng(5)
    T, M = 30, 8
    drv = GaeDriver(GoldenDevice(cfg))
    for it in range(3):
        r, v, term, last = rollout(rng, T, M)
        trunc = rng.random((T, M)) < 0.05
        fv = rng.normal(3.0, 1.5, (T, M))
        s, (adv, ret) = stream_batch(drv, r, v, None, last, terminated=term, truncated=trunc,
                                     final_values=fv)
        a2, _ = GaeDriver(GoldenDevice(cfg)).execute(s.batch)
        np.testing.assert_array_equal(adv, a2)
        np.testing.assert_array_equal(s.batch.codes["dones"], term | trunc)
        d = term | trunc
        ref_a, _ = gae_reference(r + 0.99 * np.where(trunc & ~term, fv, 0), v, d, last, 0.99,
                                 0.95)
        assert rel(adv, ref_a) < 0.08, (it, rel(adv, ref_a))


@pytest.mark.parametrize("flush_rows", [1, 5, None])
def test_pushes_write_their_rows_every_flush_rows_steps(flush_rows):
    """Pushes stage their rows on the host and write them ``flush_rows`` at a time (one write
    per region, rows contiguous); after each write the device memory holds exactly the pushed
    steps' codes in their rows; the last push never writes: ``finish`` writes the rest with the
    bootstrap row (three writes), and the memory then holds what the batch path loads."""
    cfg = CONFIGS["n8"]
    rng = np.random.default_rng(2)
    T, M = 12, 13
    dev = InstantDevice(gae_register_map(cfg), hw_info_values(cfg), 1 << cfg.mem_addr_bits,
                        store=True)
    drv = GaeDriver(dev)
    r, v, d, last = rollout(rng, T, M)
    stream_batch(drv, r, v, d, last)                      # the first stream: the batch path
    kw = {} if flush_rows is None else {"flush_rows": flush_rows}
    s = drv.stream(M, T, 0.99, 0.95, **kw)
    k = s.flush_rows
    assert k == (FLUSH_ROWS if flush_rows is None else flush_rows)
    regs = dev.registers()
    assert {n.upper() for n in FIXED_ARGS} <= set(regs)
    G = -(-M // cfg.n_pe)
    nbytes = {x: G * word_bytes(cfg, x) for x in ("rewards", "values", "dones")}
    dev.traffic.reset()
    expect = []
    for t in range(T):
        s.push(r[t], v[t], d[t])
        end = (t + 1) // k * k if t + 1 < T else (T - 1) // k * k
        assert s.pushed == t + 1 and s.written == end
        if (t + 1) % k == 0 and t + 1 < T:             # a write of rows t + 1 - k .. t
            expect += [("write", row_offset(cfg, x, t + 1 - k, M), k * nbytes[x])
                       for x in ("rewards", "values", "dones")]
        assert dev.traffic.transfers == expect and dev.traffic.reg_writes == 0
    w = s.written
    assert w == (T - 1) // k * k
    if w:                                             # the written rows hold the pushed codes
        for x, rows in (("rewards", s._rc), ("values", s._vc), ("dones", s._dc)):
            lo = row_offset(cfg, x, 0, M)
            np.testing.assert_array_equal(dev.image[lo:lo + w * nbytes[x]],
                                          np.frombuffer(pack_rows(cfg, x, rows[:w]), np.uint8))
    dev.traffic.reset()
    s.finish(last)
    t = dev.traffic
    # after the last step: the unwritten rows with the bootstrap row, the four result
    # registers, the run, read-back of the advantages (caller's units: the returns are the
    # advantages plus the values)
    assert (t.writes, t.reads, t.starts) == (3, 1, 1)
    assert t.transfers[:3] == [("write", row_offset(cfg, x, w, M), (T - w + (x == "values"))
                                * nbytes[x]) for x in ("rewards", "values", "dones")]
    image = dev.image.copy()
    batch_dev = InstantDevice(gae_register_map(cfg), hw_info_values(cfg),
                              1 << cfg.mem_addr_bits, store=True)
    GaeDriver(batch_dev).load(s.batch.codes["rewards"], s.batch.codes["values"],
                              s.batch.codes["bootstrap"], s.batch.codes["dones"])
    np.testing.assert_array_equal(image, batch_dev.image)


def test_per_push_standardization_and_the_reference():
    """Standardized units: the running reward statistics take each push (N rewards); the
    value registers come from the previous batch's block statistics."""
    cfg = CONFIGS["small"]
    rng = np.random.default_rng(9)
    drv = GaeDriver(GoldenDevice(cfg), units="standardized")
    r, v, d, last = rollout(rng, 20, 8)
    stream_batch(drv, r, v, d, last)
    ref = drv.stream_reference
    allv = np.concatenate([v.ravel(), last])
    assert ref.value_mean == pytest.approx(allv.mean()) and \
        ref.value_std == pytest.approx(allv.std())
    count = drv.pipeline.rewards.stats.count
    s = drv.stream(8, 20, 0.99, 0.95)
    vs, vo = drv.pipeline.value_quantizer.dequantize_params(
        cfg.reg_format, std=ref.value_std * VALUE_STD_MARGIN, mean=ref.value_mean)
    assert (s._args.value_scale, s._args.value_offset) == (vs, vo)
    s.push(r[0], v[0], d[0])
    assert drv.pipeline.rewards.stats.count == count + 8
    drv.reset()
    assert drv.stream_reference is None
    s.abort()
    assert drv.stream(8, 20, 0.99, 0.95).deferred


def test_values_far_outside_the_previous_range_clip_and_warn():
    cfg = CONFIGS["small"]
    rng = np.random.default_rng(4)
    drv = GaeDriver(GoldenDevice(cfg))
    r, v, d, last = rollout(rng, 16, 8)
    stream_batch(drv, r, v, d, last)
    with pytest.warns(ClippingWarning, match="values fell outside the ranges"):
        s, _ = stream_batch(drv, r, v * 10, d, last * 10)
    assert s.clipped["value"] > 0 and s.clipped["reward"] == 0
    with warnings.catch_warnings():                     # the next stream has the new range
        warnings.simplefilter("error", ClippingWarning)
        stream_batch(drv, r, v * 10, d, last * 10)


def test_bad_pushes_are_refused_naming_the_argument():
    cfg = CONFIGS["small"]
    drv = GaeDriver(GoldenDevice(cfg))
    with pytest.raises(ValueError, match="n_envs must be an integer in 1..4096"):
        drv.stream(0, 4, 0.99, 0.95)
    with pytest.raises(ValueError, match="horizon must be an integer"):
        drv.stream(4, 2.5, 0.99, 0.95)
    with pytest.raises(ValueError, match="do not fit"):
        drv.stream(8, 33, 0.99, 0.95)
    with pytest.raises(ValueError, match="lam must be a real number in"):
        drv.stream(4, 4, 0.99, 1.5)
    for bad in (0, 2.5, True, "8"):
        with pytest.raises(ValueError, match="flush_rows must be an integer in 1..65536"):
            drv.stream(4, 4, 0.99, 0.95, flush_rows=bad)
    rng = np.random.default_rng(1)
    r, v, d, last = rollout(rng, 4, 3)
    stream_batch(drv, r, v, d, last)
    s = drv.stream(3, 4, 0.99, 0.95)
    with pytest.raises(ValueError, match=r"rewards must have shape \(3,\) \(n_envs\)"):
        s.push(r[0][:2], v[0], d[0])
    with pytest.raises(ValueError, match="values must be finite"):
        s.push(r[0], [np.nan, 0, 0], d[0])
    with pytest.raises(ValueError, match="dones must be bool-like"):
        s.push(r[0], v[0], [2, 0, 0])
    with pytest.raises(ValueError, match="exactly one of dones"):
        s.push(r[0], v[0])
    with pytest.raises(ValueError, match="truncated steps need final_values"):
        s.push(r[0], v[0], terminated=d[0], truncated=[True, False, False])
    assert s.pushed == 0
    with pytest.raises(ValueError, match="finish: only 0 of horizon=4 steps"):
        s.finish(last)
    with pytest.raises(RuntimeError, match="a GaeStream is open"):
        drv.compute(r, v, d, last, 0.99, 0.95)
    with pytest.raises(RuntimeError, match="a GaeStream is open"):
        drv.stream(3, 4, 0.99, 0.95)
    for t in range(4):
        s.push(r[t], v[t], d[t])
    with pytest.raises(ValueError, match="all horizon=4 steps were pushed"):
        s.push(r[0], v[0], d[0])
    with pytest.raises(ValueError, match=r"last_values must have shape \(3,\)"):
        s.finish(last[:2])
    s.finish(last)
    with pytest.raises(RuntimeError, match="push: this stream is closed"):
        s.push(r[0], v[0], d[0])
    std = GaeDriver(GoldenDevice(cfg), units="standardized")
    stream_batch(std, r, v, d, last)
    s = std.stream(3, 4, 0.99, 0.95)
    with pytest.raises(ValueError, match="truncated steps need units='caller'"):
        s.push(r[0], v[0], terminated=d[0], truncated=[True, False, False],
               final_values=v[0])


def test_block_standardized_rewards_stream_as_one_batch():
    """Block standardization needs the whole batch: every stream defers to the batch path at
    finish, and gives what ``compute`` gives on a twin driver, even after a first batch."""
    from sw.gae.pipeline import GaeQuantizationPipeline

    cfg = CONFIGS["n8"]
    rng = np.random.default_rng(7)

    def driver():
        pipe = GaeQuantizationPipeline(bits=cfg.code_bits, reg_format=cfg.reg_format,
                                       reward_standardization="block")
        return GaeDriver(GoldenDevice(cfg), cfg, pipeline=pipe, units="standardized")

    streamed, batched = driver(), driver()
    for _ in range(2):
        r, v, d, last = rollout(rng, 32, 8)
        s, (adv, ret) = stream_batch(streamed, r, v, d, last)
        assert s.deferred
        adv2, ret2 = batched.compute(r, v, d, last, 0.99, 0.95)
        np.testing.assert_array_equal(adv, adv2)
        np.testing.assert_array_equal(ret, ret2)


@pytest.mark.filterwarnings("ignore::sw.gae.driver.ClippingWarning")
@pytest.mark.parametrize("units", ["caller", "standardized"])
def test_finish_into_the_callers_arrays(units):
    """``finish(last, out=(adv, ret))`` writes what ``finish(last)`` returns (float64: the same
    bytes, float32: rounded once) into the caller's arrays and returns them; deferred and
    streamed runs alike; in the caller's units the returns are the advantages plus the pushed
    values."""
    cfg = CONFIGS["n8"]
    rng = np.random.default_rng(11)
    T, M = 24, 8
    drv, twin = (GaeDriver(GoldenDevice(cfg), units=units) for _ in range(2))
    for it in range(3):
        r, v, d, last = rollout(rng, T, M)
        _, want = stream_batch(twin, r, v, d, last)
        out = (np.full((T, M), np.nan, np.float32), np.full((T, M), np.nan, np.float32))
        s = drv.stream(M, T, 0.99, 0.95)
        for t in range(T):
            s.push(r[t], v[t], d[t])
        got = s.finish(last, out=out)
        assert got[0] is out[0] and got[1] is out[1] and s.deferred == (it == 0)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w.astype(np.float32))
        if units == "caller":
            np.testing.assert_array_equal(want[1], want[0] + v)
    s = drv.stream(M, T, 0.99, 0.95)
    for t in range(T):
        s.push(r[t], v[t], d[t])
    with pytest.raises(ValueError, match=r"out\[0\] must have shape"):
        s.finish(last, out=(np.empty((M, T)), np.empty((T, M))))
    assert s.is_open                        # a refused out= leaves the stream to finish
    s.finish(last)
