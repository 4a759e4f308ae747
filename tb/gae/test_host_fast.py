"""The compiled host kernels (:mod:`sw.gae.hostfast`) change nothing: every register write, every
byte written to the accelerator's memory and every returned float equal those of the numpy
code they replace (the same driver with ``backend="numba"`` and ``backend="numpy"``: the two
plans of :mod:`sw.gae.plan`), on many random batches, options and edge cases, on the golden
device (which computes, so the results read back depend on the images written)."""

import warnings
import zlib

import numpy as np
import pytest
from driver_util import SMALL

from sw.driver import GaeDriver, GoldenDevice
from sw.gae import hostfast
from sw.gae.pipeline import GaeQuantizationPipeline
from sw.gae.plan import NumbaPlan, NumpyPlan
from sw.gae.spec import GaeCoreConfig

pytestmark = pytest.mark.skipif(not hostfast.available(), reason="numba is not installed")

CONFIGS = {
    "small8": SMALL,
    "small16": {**SMALL, "code_bits": 16},
    "n8": {"n_pe": 8, "max_trajectories": 24, "capacity": 128},
    "full": {"n_pe": 5, "max_trajectories": 20, "capacity": 40, "results": "full",
             "axi_data_width": 64},
}


class Recorder:
    """Every register write and memory write (with its bytes) of a device."""

    def __init__(self, dev):
        self.log = []
        control, memory, log = dev.control, dev.memory, self.log
        w32, mw = control.write32, memory.write

        def write32(offset, value):
            log.append(("w", offset, int(value)))
            w32(offset, value)

        def write(offset, data):
            log.append(("mw", offset, bytes(data)))
            mw(offset, data)
        control.write32, memory.write = write32, write


def run_both(cfg_name, calls, *, drv_kw=None, pipe_kw=None):
    """``calls(drv)`` with ``backend="numba"`` and ``backend="numpy"``: (log, outputs) of
    each."""
    out = []
    for backend in ("numba", "numpy"):
        cfg = GaeCoreConfig.from_dict(CONFIGS[cfg_name])
        dev = GoldenDevice(cfg)
        kw = dict(drv_kw or {})
        if pipe_kw is not None:
            kw["pipeline"] = GaeQuantizationPipeline(bits=cfg.code_bits,
                                                     reg_format=cfg.reg_format, **pipe_kw)
        drv = GaeDriver(dev, cfg, backend=backend, **kw)
        assert drv.backend == drv.plan.backend == backend
        rec = Recorder(dev)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            res = calls(drv)
        out.append((rec.log, res, [(w.category, str(w.message)) for w in caught]))
    return out


def plans(cfg):
    """The compiled plan and the numpy plan of ``cfg`` (default host settings)."""
    settings = GaeDriver(GoldenDevice(cfg), cfg, backend="numpy").host_settings
    return NumbaPlan(cfg, settings), NumpyPlan(cfg, settings)


def same(a, b, path="out"):
    """Equal bit for bit (floats compared by their bytes, NaN-safe)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), path
        for k in a:
            same(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{path}[{i}]")
    elif isinstance(a, (np.ndarray, np.generic)):
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape, (path, a.dtype, b.dtype)
        assert a.tobytes() == b.tobytes(), path
    elif isinstance(a, float):
        assert type(b) is float and np.float64(a).tobytes() == np.float64(b).tobytes(), \
            (path, a, b)
    else:
        assert a == b, (path, a, b)


def reference_view(ref):
    """A :class:`~sw.gae.stream.StreamReference`'s fields, numbers as Python floats."""
    def num(x):
        return tuple(num(y) for y in x) if isinstance(x, tuple) else (
            float(x) if isinstance(x, (float, np.floating)) else x)
    return {k: num(v) for k, v in vars(ref).items()}


def batch_view(batch):
    """What a batch holds that the host computed."""
    return {"codes": batch.codes, "args": vars(batch.args), "prepared": batch.prepared,
            "ranges": (batch.adv_range, batch.rtg_range, batch.adv_bound, batch.rtg_bound,
                       batch.rtg_center, batch.unit_scale), "runs": batch.runs,
            "result_run": batch.result_run}


def data(rng, T, M, kind):
    """Rewards, values, dones, last values of one kind of batch."""
    d = rng.random((T, M)) < rng.choice([0.0, 0.02, 0.2, 0.9])
    v = rng.normal(scale=rng.choice([0.01, 1.0, 300.0]), size=(T, M)).cumsum(0)
    last = v[-1] + rng.normal(size=M)
    r = {"gauss": lambda: rng.normal(scale=rng.choice([1e-3, 1.0, 50.0]), size=(T, M)),
         "sparse": lambda: np.where(d, -1.0, 0.0),
         "zero": lambda: np.zeros((T, M)),
         "constant": lambda: np.full((T, M), 1.0),
         "discrete": lambda: rng.integers(-2, 3, (T, M)).astype(float)}[kind]()
    if kind in ("zero", "constant") and rng.random() < 0.5:
        v, last = np.zeros((T, M)), np.zeros(M)
    return r, v, d, last


def shapes(cfg_name, rng, n):
    cfg = GaeCoreConfig.from_dict(CONFIGS[cfg_name])
    # M = n_pe: every word holds n_pe results (hostfast's row decode); n_pe + 1: not
    out = [(1, 1), (1, cfg.n_pe + 1), (2, cfg.n_pe)]
    while len(out) < n:
        M = int(rng.integers(1, cfg.max_trajectories + 1))
        G = -(-M // cfg.n_pe)
        out.append((int(rng.integers(1, cfg.depth // G)), M))
    return out


@pytest.mark.parametrize("cfg_name", CONFIGS)
@pytest.mark.parametrize("units", ["caller", "standardized"])
def test_compute_same(cfg_name, units):
    rng = np.random.default_rng(zlib.crc32(f"{cfg_name} {units}".encode()))
    kinds = ["gauss", "sparse", "zero", "constant", "discrete"]
    for i, (T, M) in enumerate(shapes(cfg_name, rng, 14)):
        kind = kinds[i % len(kinds)]
        r, v, d, last = data(rng, T, M, kind)
        dtype = [np.float64, np.float32][i % 2]
        r, v, last = r.astype(dtype), v.astype(dtype), last.astype(dtype)
        rounding = ["error_feedback", "nearest"][(i // 2) % 2]
        drv_kw = {"units": units, "on_requant_overflow": ["retry", "warn"][(i // 3) % 2],
                  "result_sigmas": [4.0, 0.5][(i // 4) % 2]}

        def calls(drv):
            a = drv.compute(r, v, d, last, 0.99, 0.95)
            b = drv.compute(r * 2, v, d, last, 1.0, [1.0, 0.9][i % 2])  # statistics carried
            return a, b, batch_view(drv.last_batch)
        (log1, out1, w1), (log0, out0, w0) = run_both(cfg_name, calls, drv_kw=drv_kw,
                                                      pipe_kw={"reward_rounding": rounding})
        same(out1, out0)
        same(w1, w0)
        assert log1 == log0


@pytest.mark.parametrize("cfg_name", ["small8", "n8"])
def test_gymnasium_and_sb3_flags_same(cfg_name):
    rng = np.random.default_rng(7)
    for T, M in shapes(cfg_name, rng, 6):
        r, v, d, last = data(rng, T, M, "gauss")
        trunc = rng.random((T, M)) < 0.1
        fv = np.where(trunc, rng.normal(size=(T, M)), np.nan)
        starts = rng.random((T, M)) < 0.1
        nxt = rng.random(M) < 0.5

        def calls(drv):
            a = drv.compute(r, v, last_values=last, gamma=0.98, lam=0.9, terminated=d,
                            truncated=trunc, final_values=fv)
            b = drv.compute(r, v, last_values=last, gamma=0.98, lam=0.9,
                            episode_starts=starts, next_done=nxt)
            c = drv.compute(r, v, d.astype(np.int64), last, 0.5, 0.5)
            return a, b, c, batch_view(drv.last_batch)
        (log1, out1, _), (log0, out0, _) = run_both(cfg_name, calls)
        same(out1, out0)
        assert log1 == log0


def test_fixed_result_range_same():
    rng = np.random.default_rng(3)
    r, v, d, last = data(rng, 20, 7, "gauss")
    (log1, out1, _), (log0, out0, _) = run_both(
        "small8", lambda drv: drv.compute(r, v, d, last, 0.99, 0.95),
        drv_kw={"units": "caller", "result_range": (0.5, 2.0)})
    same(out1, out0)
    assert log1 == log0


@pytest.mark.parametrize("bad", ["nan_rewards", "inf_values", "nan_last", "huge_truncation"])
def test_errors_same(bad):
    """Non-finite inputs: the same error, or the same result, as the numpy path."""
    rng = np.random.default_rng(11)
    r, v, d, last = data(rng, 10, 6, "gauss")
    kw = {}
    if bad == "nan_rewards":
        r[3, 2] = np.nan
    elif bad == "inf_values":
        v[0, 0] = np.inf
    elif bad == "nan_last":
        last[5] = np.nan
    else:
        kw = {"terminated": d, "truncated": ~d, "final_values": np.full(r.shape, 1e308)}
        r = r + 1e308

    def calls(drv):
        try:
            if kw:
                return drv.compute(r, v, last_values=last, gamma=0.99, lam=0.95, **kw)
            return drv.compute(r, v, d, last, 0.99, 0.95)
        except (ValueError, OverflowError) as e:
            return type(e).__name__, str(e)
    (log1, out1, _), (log0, out0, _) = run_both("small8", calls)
    same(out1, out0)
    assert log1 == log0


@pytest.mark.parametrize("cfg_name", ["small8", "small16", "full"])
@pytest.mark.parametrize("units", ["caller", "standardized"])
def test_stream_same(cfg_name, units):
    """Three streams (the first deferred, each next on the previous one's scales), step by
    step; the references they leave for the next stream (the statistics pushes keep) too."""
    rng = np.random.default_rng(zlib.crc32(f"{cfg_name} {units} stream".encode()))
    kinds = [("gauss", "discrete", "sparse"), ("zero", "constant", "gauss", "sparse")]
    for i, (T, M) in enumerate(shapes(cfg_name, rng, 6)):
        batches = [data(rng, T, M, k) for k in kinds[i % 2]]

        def calls(drv):
            out = []
            try:
                for r, v, d, last in batches:
                    s = drv.stream(M, T, 0.99, 0.95)
                    for t in range(T):
                        s.push(r[t], v[t], d[t])
                    out.append((s.finish(last), batch_view(s.batch), dict(s.clipped),
                                reference_view(drv.stream_reference)))
            except (ValueError, ZeroDivisionError) as e:      # the same error, or none
                out.append((type(e).__name__, str(e)))
            return out
        (log1, out1, w1), (log0, out0, w0) = run_both(cfg_name, calls, drv_kw={"units": units})
        same(out1, out0)
        same(w1, w0)
        assert log1 == log0


def test_dequantize_out_of_range_raises():
    """Codes outside the code range: np.take's IndexError, as before."""
    cfg = GaeCoreConfig.from_dict(SMALL)
    drv = GaeDriver(GoldenDevice(cfg), cfg)
    drv.compute(*data(np.random.default_rng(0), 4, 3, "gauss")[:3], np.zeros(3), 0.9, 0.9)
    with pytest.raises(IndexError):
        drv.dequantize(drv.last_batch, np.full((4, 3), 500), np.zeros((4, 3), np.int64))


def reference_result_stats(batch, cfg):
    """The statistics :func:`sw.gae.results.choose_result_scale` takes, straight numpy (not
    :func:`sw.gae.results.result_stats`: the kernels and that function checked against a third
    spelling)."""
    a, c, rf, sf = batch.args, batch.codes, cfg.reg_format, cfg.scale_format
    g = a.gamma * 2.0 ** -cfg.pe.coef_frac

    def deq(x, scale, offset):
        return np.asarray(x, np.float64) * sf.to_float(scale) + rf.to_float(offset)
    r = deq(c["rewards"], a.reward_scale, a.reward_offset)
    v = deq(c["values"], a.value_scale, a.value_offset)
    boot = deq(c["bootstrap"], a.value_scale, a.value_offset)
    delta = r + g * np.concatenate([v[1:], boot[None]]) * ~c["dones"] - v
    ends = np.array(c["dones"].T)
    ends[:, -1] = True
    center = float(batch.prepared["value_mean"])
    return {"max_abs_delta": float(np.abs(delta).max()), "mean_delta": float(delta.mean()),
            "std_delta": float(delta.std()),
            "longest": int(np.diff(np.flatnonzero(ends), prepend=-1).max()), "center": center,
            "v_dev": float(max(np.abs(v - center).max(), np.abs(boot - center).max()))}


@pytest.mark.parametrize("T,M", [(1024, 64), (1023, 61), (200, 9), (1, 1), (129, 1), (3, 64)])
def test_sums_same_as_numpy(T, M):
    """numpy's pairwise sums (value mean, TD error mean and std) reproduced bit for bit on
    shapes whose sums split many times, and what else the result scale takes."""
    from sw.driver import InstantDevice
    drv = GaeDriver(InstantDevice.for_kernel("gae_kernel_n8"))
    rng = np.random.default_rng(T * 100 + M)
    for kind in ("gauss", "sparse", "discrete"):
        r, v, d, last = data(rng, T, M, kind)
        v = v + rng.normal(size=v.shape) * 1e-3
        batch = drv.prepare(r, v, d, last, 0.99, 0.95)
        vall = np.concatenate([v, last[None]]) * batch.unit_scale
        same(batch.prepared["value_mean"], float(vall.mean()))
        same(hostfast.result_stats(batch, drv.config), reference_result_stats(batch, drv.config))
        same(NumpyPlan(drv.config, drv.host_settings).result_stats(batch),
             reference_result_stats(batch, drv.config))


def test_pairwise_kernels_same_as_numpy():
    """The kernels' pairwise sums (numpy's recursion as a loop) equal numpy's sums of the same
    elements, at lengths around the block size, the 8-element steps and many halvings, at
    offsets into the array."""
    k = hostfast._kernels()
    rng = np.random.default_rng(11)
    a = rng.normal(size=300_011) * 2.0 ** rng.integers(-30, 30, 300_011)
    for n in (0, 1, 7, 8, 9, 127, 128, 129, 135, 136, 137, 255, 256, 257, 1000, 4097, 65_536,
              300_000):
        for lo in (0, 3, 11):
            x = a[lo:lo + n]
            m = float(x.mean()) if n else 0.0
            same(float(k["pairwise"](a, lo, n)), float(x.sum()), f"sum n={n} lo={lo}")
            same(float(k["pairwise_sq"](a, lo, n, m)), float(((x - m) ** 2).sum()),
                 f"sum of squares n={n} lo={lo}")


def test_unusual_inputs_take_the_numpy_path():
    """Inputs the kernels do not take (shapes that disagree, int dones in a batch) give what
    the numpy code gives, error or result: the compiled plan hands them to its numpy plan."""
    cfg = GaeCoreConfig.from_dict(SMALL)
    r, v, d, last = data(np.random.default_rng(5), 6, 3, "gauss")
    cases = [(r[0], v[0], last, d[0]), (r, v, last[:2], d), (r, v[:, :2], last, d)]

    def outcome(f):
        try:
            return f()
        except Exception as e:  # noqa: BLE001 - the same exception is the point
            return type(e).__name__, str(e)
    got = []
    for plan in plans(cfg):
        got.append([outcome(lambda a=a: plan.quantize(*a, 0.9, 0.9, None)) for a in cases])
        drv = GaeDriver(GoldenDevice(cfg), cfg, backend=plan.backend)
        batch = drv.prepare(r, v, d, last, 0.9, 0.9)
        batch.codes["dones"] = batch.codes["dones"].astype(np.int64)
        plan.result_scale(batch)
        got[-1].append(batch_view(batch))
    same(got[0], got[1])


@pytest.mark.parametrize("cfg_name", CONFIGS)
@pytest.mark.parametrize("units", ["caller", "standardized"])
def test_out_arrays_hold_the_results(cfg_name, units):
    """``compute(..., out=(adv, ret))`` writes the very results it would return into the
    caller's arrays (float64: the same bytes; float32: those rounded once) and returns them,
    with the kernels and without, retried runs included (``result_sigmas`` 0.5 saturates)."""
    rng = np.random.default_rng(zlib.crc32(f"out {cfg_name} {units}".encode()))
    for i, (T, M) in enumerate(shapes(cfg_name, rng, 6)):
        r, v, d, last = data(rng, T, M, ["gauss", "discrete"][i % 2])
        sigmas = [4.0, 0.5][i % 2]

        def calls(drv):
            want = drv.compute(r, v, d, last, 0.99, 0.95)
            outs = []
            for dtype in (np.float64, np.float32):
                o = (np.full((T, M), np.nan, dtype), np.full((T, M), np.nan, dtype))
                got = drv.compute(r, v, d, last, 0.99, 0.95, out=o)
                assert got[0] is o[0] and got[1] is o[1]
                outs.append(o)
            return want, outs
        for _, (want, (o64, o32)), _ in run_both(cfg_name, calls,
                                                 drv_kw={"units": units,
                                                         "result_sigmas": sigmas}):
            same(tuple(o64), want)
            same(tuple(o32), tuple(x.astype(np.float32) for x in want))


def test_out_arrays_are_checked():
    cfg = GaeCoreConfig.from_dict(SMALL)
    drv = GaeDriver(GoldenDevice(cfg), cfg)
    T, M = 4, 3
    r, v, d, last = np.ones((T, M)), np.ones((T, M)), np.zeros((T, M), bool), np.ones(M)
    a = np.empty((T, M))
    for out, match in [(a, "out must be None or a pair"),
                       ((a, np.empty((T, M), np.int32)), r"out\[1\] must be a float32"),
                       ((np.empty((M, T)), a), r"out\[0\] must have shape \(4, 3\)"),
                       ((np.empty((M, T)).T, a), r"out\[0\] must be C-contiguous"),
                       ((a, a), "must not overlap")]:
        with pytest.raises(ValueError, match=match):
            drv.compute(r, v, d, last, 0.99, 0.95, out=out)


def test_caller_units_read_back_the_advantages_only():
    """In the caller's units the returns are the advantages plus the values: one results
    block is read per run (copy_plan with returns=False; a refinement is another run of the
    same shape); in standardized units both are."""
    from sw.gae.spec import copy_plan
    cfg = GaeCoreConfig.from_dict(CONFIGS["n8"])
    T, M = 16, 8
    rng = np.random.default_rng(3)
    r, v, d, last = data(rng, T, M, "gauss")
    for units, returns in (("caller", False), ("standardized", True)):
        dev = GoldenDevice(cfg)
        reads = []
        read = dev.memory.read
        dev.memory.read = lambda o, n, read=read: reads.append((o, n)) or read(o, n)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")            # standardized units may clip: no matter
            drv = GaeDriver(dev, cfg, units=units, result_sigmas=8.0)
            drv.compute(r, v, d, last, 0.99, 0.95)
        runs = drv.last_batch.total_runs
        assert runs == 1 + len(drv.last_batch.refinements)        # no retry here
        assert reads == [(o, n) for _, o, n in copy_plan(cfg, T, M, returns=returns)["out"]] \
            * runs


def test_packed_images_after_other_shapes():
    """The 64-bit packer writes payload bytes only and leaves the reused images' padding as
    it was: images after calls of other shapes (same image size: the general packer, which
    zeroes; int8 codes at M a multiple of n_pe: the 64-bit one) equal the numpy packer's."""
    cfg = GaeCoreConfig.from_dict(CONFIGS["n8"])
    rng = np.random.default_rng(11)
    fast, ref = plans(cfg)

    def images(T, M):
        codes = rng.integers(-128, 128, (2, T + 1, M)).astype(np.int8)
        d = rng.random((T, M)) < 0.5
        args = (codes[0, :T], codes[1, :T], codes[1, T], d)
        return [[(r, bytes(memoryview(x))) for r, x in plan.images(*args, lambda T, M: None)]
                for plan in (fast, ref)]
    for T, M in [(5, 17), (5, 24), (5, 24), (5, 19), (5, 24), (6, 16), (5, 24), (7, 8)]:
        got, want = images(T, M)
        assert got == want, (T, M)
