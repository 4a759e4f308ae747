"""The drivers' per-call host paths (host time per driver call), on the instant
stub and the register-level model, no timing: register access through per-register plans
built once (the same bus words, shadow and errors as the field-by-field definition), the
replay driver's staging buffers, the backends' zero-copy writes, the GAE kernels' reused work
arrays and the learner's region table.
"""

import itertools
import re

import numpy as np
import pytest

from sw.driver import InstantDevice, RegisterAccessError, RegisterMapAccess, ReplayDriver
from sw.driver.mmio import byte_view
from sw.regmap import Field, Register, RegisterMap
from sw.registry import shipped_config
from sw.replay.spec import region_base

from driver_util import ModelMmio, RecordingMmio


def mixed_map():
    """Every access type, and registers that mix them (as in test_regmap's demo map)."""
    return RegisterMap.with_ap_ctrl_hs("mixed", [
        Register.scalar("ARG0"),
        Register("ARG1", None, (Field("LO", 0, 8, "rw", 0x5A), Field("HI", 16, 12, "rw", 0x123))),
        Register("MIXED", None, (Field("MODE", 0, 2, "rw", 1), Field("KEY", 8, 8, "wo", 0x3C),
                                 Field("GO", 16, 1, "rw_sc"))),
        Register("EVENTS", None, (Field("ENABLE", 0, 4, "rw", 0x3), Field("SEEN", 8, 4, "ro_cor"),
                                  Field("ACK", 16, 4, "rw_tow"))),
        Register.scalar("COUNT", 16, "ro"),
    ])


def reference_write(reg, values, shadow, read):
    """The field-by-field definition of a field write (sw/driver/regmap.py's module
    docstring): the word written, or the exception's type and message."""
    by_name = {f.name: f for f in reg.fields}
    for name, v in values.items():
        if name not in by_name:
            return AttributeError
        if by_name[name].access in ("ro", "ro_cor"):
            return RegisterAccessError
        if type(v) is not int or not 0 <= v < 1 << by_name[name].width:
            return ValueError
    keep = [f for f in reg.fields if f.name not in values and f.access == "rw"]
    current = read() if keep and not any(f.access == "ro_cor" for f in reg.fields) else None
    word = 0
    for f in reg.fields:
        if f.name in values:
            word = f.put(word, values[f.name])
        elif f.access == "rw":
            word = f.put(word, f.get(current) if current is not None
                         else shadow[reg.name, f.name])
        elif f.access == "wo":
            word = f.put(word, shadow[reg.name, f.name])
    return word


def test_field_writes_match_the_field_by_field_definition():
    """Every subset of every register's fields, written with values in and out of range:
    the same words on the bus (and reads before them), the same shadow and the same errors
    as the definition; the write recipes are cached per field set and stay right."""
    rm = mixed_map()
    model = ModelMmio(rm)
    log = []
    acc = RegisterMapAccess(rm, RecordingMmio(model, log))
    rng = np.random.default_rng(12)
    for _ in range(2):                                 # second pass: cached recipes
        for reg in rm:
            names = [f.name for f in reg.fields]
            for k in range(1, len(names) + 1):
                for subset in itertools.combinations(names, k):
                    values = {}
                    for n in subset:
                        w = reg.field(n).width
                        values[n] = int(rng.integers(0, 1 << w)) if rng.random() < 0.8 \
                            else (1 << w if rng.random() < 0.5 else -1)
                    shadow = dict(acc._shadow)
                    before = len(log)
                    want = reference_write(reg, values, shadow,
                                           lambda: model.read32(reg.offset))
                    if isinstance(want, type):
                        with pytest.raises(want):
                            getattr(acc, reg.name).write(**values)
                        assert len(log) == before          # nothing on the bus
                        continue
                    getattr(acc, reg.name).write(**values)
                    writes = [e for e in log[before:] if e[0] == "w"]
                    assert writes == [("w", reg.offset, want)], (reg.name, values)
                    for f in reg.fields:
                        if f.access in ("rw", "wo"):
                            assert acc._shadow[reg.name, f.name] == f.get(want)


def test_reads_refresh_the_shadow_and_snapshot_fields():
    rm = mixed_map()
    model = ModelMmio(rm)
    acc = RegisterMapAccess(rm, model)
    acc.ARG1.write(LO=7, HI=9)
    model.write32(rm.offset("ARG1"), 0x0456_0012)      # another master
    assert int(acc.ARG1) == 0x0456_0012                # a plain int read refreshes too
    assert acc._shadow["ARG1", "LO"] == 0x12 and acc._shadow["ARG1", "HI"] == 0x456
    snap = acc.ARG1.read()
    assert snap.fields == {"LO": 0x12, "HI": 0x456} and snap.HI == 0x456
    with pytest.raises(AttributeError, match="register ARG1 has no field 'HO'"):
        snap.HO
    with pytest.raises(RegisterAccessError, match="write-only"):
        acc.MIXED.read().KEY
    assert "CTRL" in vars(acc) and acc.CTRL is acc["CTRL"]    # no __getattr__ call
    with pytest.raises(AttributeError, match="cannot set"):
        acc._regmap = None


def test_plain_register_errors_name_the_register():
    rm = mixed_map()
    acc = RegisterMapAccess(rm, ModelMmio(rm))
    for bad in (-1, 1 << 32, 1.0, True - 2):
        with pytest.raises(ValueError, match=r"ARG0: value must be an integer in 0\.\."):
            acc.ARG0 = bad
    acc.ARG0 = np.uint32(5)
    assert int(acc.ARG0) == 5


@pytest.fixture
def replay():
    _, kcfg = shipped_config("replay_kernel_k16")
    dev = InstantDevice.for_kernel("replay_kernel_k16", store=True)
    dev.answer("SIZE", kcfg.accel.capacity)
    dev.answer("TOTAL_LO", 1 << 20)                   # samples see a non-empty tree
    dev.memory.write(region_base(kcfg.accel, "PRIO_OUT"),
                     np.ones(kcfg.accel.max_batch, "<u8").tobytes())
    return ReplayDriver(dev), dev, kcfg.accel


def region(dev, cfg, name, n):
    base = region_base(cfg, name)
    return np.frombuffer(dev.image[base:base + 8 * n].tobytes(), "<u8")


def test_replay_staging_buffers_write_exactly_the_batch(replay):
    """Each update writes its indices and raw priorities as 64-bit words through the reused
    staging buffers: a smaller batch after a larger one writes its own words only. On a
    kernel's window (merge_gap set) both go as one transfer, up to the last priority."""
    drv, dev, cfg = replay
    rng = np.random.default_rng(3)
    lo, hi = region_base(cfg, "IDX_IN"), region_base(cfg, "PRIO_IN")
    assert 0 < hi - lo <= dev.memory.merge_gap + 8 * cfg.max_batch
    for n in (cfg.max_batch, 5, 1, 37):
        idx = rng.integers(0, cfg.capacity, n, dtype=np.uint32)
        prio = rng.random(n) + 0.01
        dev.traffic.reset()
        drv.update(idx, priorities=prio)
        assert dev.traffic.transfers == [("write", lo, hi - lo + 8 * n)]
        assert (region(dev, cfg, "IDX_IN", n) == idx).all()
        raw = cfg.input_format.quantize(np.minimum(prio, cfg.input_format.max_value))
        assert (region(dev, cfg, "PRIO_IN", n) == raw).all()
    x = np.linspace(0, 0.999, 7)
    drv.sample(7, 0.4, targets=x)
    assert (region(dev, cfg, "TARGET_IN", 7)
            == np.minimum(np.floor(x * 2.0 ** cfg.target_bits), 2 ** cfg.target_bits - 1)).all()


def test_replay_arguments_still_checked_before_any_bus_access(replay):
    drv, dev, cfg = replay
    idx = np.arange(4)
    cases = [
        ((idx, np.array([1.0, np.nan, 1.0, 1.0])), {}, "td_errors must be finite: 1 NaN"),
        ((idx, np.array([1.0, np.inf, 1.0, 1.0])), {}, "td_errors must be finite"),
        ((idx,), {"priorities": np.array([1.0, -1e-9, 1.0, 1.0])},
         "priorities must be finite and non-negative"),
        ((idx,), {"priorities": np.array([1.0, np.nan, 1.0, 1.0])},
         "priorities must be finite and non-negative"),
        ((idx,), {"priorities": np.array([1.0, np.inf, 1.0, 1.0])},
         "priorities must be finite and non-negative"),
        ((np.array([0, cfg.capacity]), np.ones(2)), {}, "indices must be in 0.."),
        ((np.array([0.0, 1.0]), np.ones(2)), {}, "indices must be integers"),
        ((idx, np.ones(3)), {}, "td_errors must have 4 elements"),
    ]
    for args, kw, msg in cases:
        dev.traffic.reset()
        with pytest.raises(ValueError, match=msg):
            drv.update(*args, **kw)
        assert dev.traffic.writes == dev.traffic.reg_writes == 0
    dev.answer("SIZE", 3)
    with pytest.raises(ValueError, match=r"indices must be filled slots, in 0\.\.2 .* not 3"):
        drv.update(idx, np.ones(4))


def test_byte_view_shares_contiguous_buffers_and_copies_others():
    a = np.arange(6, dtype="<u8")
    v = byte_view(a)
    assert v.nbytes == 48 and np.shares_memory(np.frombuffer(v, np.uint8), a)
    s = a[::2]
    assert bytes(byte_view(s)) == s.tobytes()
    assert bytes(byte_view(b"abcd")) == b"abcd"


def test_gae_work_arrays_never_reach_the_caller():
    """The compiled GAE host kernels reuse their work arrays from call to call: results of
    one call are not changed by the next (other data, other shape), and equal a fresh
    driver's."""
    from sw.driver import GaeDriver
    # store=True: the in-place result regions read back the codes written, so results
    # differ from batch to batch (a reused array would show)
    drv = GaeDriver(InstantDevice.for_kernel("gae_kernel_n8", store=True))
    rng = np.random.default_rng(5)
    batches = [(rng.normal(size=(T, M)).astype(np.float32),
                rng.normal(size=(T, M)).astype(np.float32),
                rng.random((T, M)) < 0.05, rng.normal(size=M)) for T, M in
               ((64, 16), (64, 16), (33, 9))]
    outs = [drv.compute(r, v, d, last, 0.99, 0.95) for r, v, d, last in batches]
    keep = [tuple(x.copy() for x in o) for o in outs]
    drv.compute(*batches[0][:3], batches[0][3], 0.99, 0.95)
    for o, k in zip(outs, keep):
        assert all((a == b).all() for a, b in zip(o, k))
    assert not (keep[0][0] == keep[1][0]).all()        # the batches' results differ
    for (r, v, d, last), k in zip(batches, keep):
        fresh = GaeDriver(InstantDevice.for_kernel("gae_kernel_n8", store=True))
        got = fresh.compute(r, v, d, last, 0.99, 0.95)
        assert all((a == b).all() for a, b in zip(got, k))


def test_learner_region_table_matches_the_layout():
    from sw.learner import layout
    _, kcfg = shipped_config("learner_kernel_s4")
    cfg = kcfg.accel
    regions = layout.regions(cfg)
    D = cfg.axi_data_width // 8
    for i, r in enumerate(regions):
        assert layout.region(cfg, r.name) is r
        assert layout.region_index(cfg, r.name) == i
        assert layout.word_bytes(cfg, r.name) == layout.sub_words(cfg, r) * D
        assert layout.region_base(cfg, r.name) == i * layout.region_bytes(cfg)
    with pytest.raises(ValueError, match="no region 'nope'"):
        layout.region(cfg, "nope")
    with pytest.raises(TypeError, match="config must be a LearnerConfig"):
        layout.region(object(), "obs")
    num = cfg.numerics
    assert num.act_format is num.act_format and num.loss_weight_format is num.coef_format


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_check_finite_passes_overflowing_sums_and_names_bad_elements(dtype):
    """``check_finite`` passes finite arrays, also those whose sum overflows, and names the
    first NaN or infinite element."""
    from sw.driver.common import check_finite
    big = np.finfo(dtype).max
    for ok in (np.zeros((0, 3), dtype), np.array([big, big, -big], dtype),
               np.array([big, big], dtype), np.array([[1, 2], [3, 4]], dtype)):
        assert check_finite(ok, "x") is ok
    for bad, first in (([1, np.nan, 2], "(1,)"), ([np.inf, -np.inf], "(0,)"),
                       ([[1, 2], [3, -np.inf]], "(1, 1)"), ([big, np.nan, big], "(1,)")):
        with pytest.raises(ValueError, match="x must be finite: .* the first at "
                           + re.escape(first)):
            check_finite(np.array(bad, dtype), "x")


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.uint16, np.int64, np.float32,
                                   np.float64])
def test_bool_flags_takes_zeros_and_ones_and_names_anything_else(dtype):
    """``bool_flags`` (the drivers' dones check): a new bool array of the 0/1 elements (never
    the caller's array), a ValueError naming the argument for any other value, NaN included."""
    from sw.driver.common import bool_flags
    a = np.array([[0, 1, 1], [0, 0, 1]], dtype)
    b = bool_flags(a, "dones")
    assert b.dtype == np.bool_ and b.tolist() == [[False, True, True], [False, False, True]]
    assert not np.shares_memory(a, b)
    assert bool_flags(np.zeros(0, dtype), "dones").shape == (0,)
    bads = [2] if dtype != np.bool_ else []
    if np.dtype(dtype).kind == "i":
        bads.append(-1)
    if np.dtype(dtype).kind == "f":
        bads += [0.5, np.nan, np.inf, -0.0 + 1e-30]
    for bad in bads:
        with pytest.raises(ValueError, match="^dones must be bool-like"):
            bool_flags(np.array([0, 1, bad], dtype), "dones")
    if np.dtype(dtype).kind == "f":                  # -0.0 is a 0
        assert bool_flags(np.array([-0.0, 1.0], dtype), "dones").tolist() == [False, True]
