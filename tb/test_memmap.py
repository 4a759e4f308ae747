"""The memory windows in the register files (sw.memmap, ``Block.memory_window``): the table's
offsets, word sizes and lanes are where the drivers' own packing functions put the bytes, a
kernel's buffer is its ``DMA_WINDOW``, the fused trainer's storage at BASE is its layout's
(records, weights, snapshot headers, trace entries field by field), and the C header with the
``*_MEM_*`` macros compiles. No Amaranth: the layouts and exports are host code."""

import json
import shutil
import subprocess

import numpy as np
import pytest

from sw.gae import layout as gae_layout
from sw.learner import layout as learner_layout
from sw.memmap import LaneField, MemoryRegion, MemoryWindow
from sw.registry import BLOCKS, SHIPPED, block, shipped_config
from sw.regfiles import register_files
from sw.replay import spec as replay_spec
from sw.trainer import layout as trainer_layout

WINDOWED = [m for m, b, _ in SHIPPED if BLOCKS[b].memory_window(shipped_config(m)[1])]
#: A configuration that is not shipped (what a user generates), one per family.
CUSTOM = [("replay-accel", {"fanout": 8, "capacity": 4096}),
          ("gae-accel", {"n_pe": 4, "max_trajectories": 12, "capacity": 100,
                         "results": "full"}),
          ("learner", {"sizes": [3, 8, 2], "array": 2, "max_batch": 8, "sub_batch": 2,
                       "axi_data_width": 64}),
          ("dqn-trainer", {"learner": {"sizes": [3, 8, 2], "array": 2, "max_batch": 8,
                                       "sub_batch": 2, "axi_data_width": 64},
                           "tree": {"fanout": 4, "capacity": 64, "max_batch": 8},
                           "append_window": 8, "storage_width": 64, "trace_depth": 4})]
#: Small trainers: 16-bit lanes (the CUSTOM one) and 32-bit lanes (learner width 20).
TRAINERS = [CUSTOM[3][1],
            {**CUSTOM[3][1], "storage_width": 256,
             "learner": {**CUSTOM[3][1]["learner"], "width": 20, "act_frac": 14,
                         "acc_width": 40, "lr_width": 22, "lr_frac": 22}}]


def lane(image, region, word, p, bits=None, lsb=0, signed=None):
    """Lane ``p`` of memory word ``word`` of an image that starts at the region's word 0, read
    with the table's numbers only (``bits``/``lsb``/``signed``: a field of the lane)."""
    wb = region.word_bytes
    w = int.from_bytes(bytes(image[word * wb:(word + 1) * wb]), "little")
    raw = w >> (p * region.lane_bits + lsb) & ((1 << (bits or region.lane_bits)) - 1)
    signed = region.signed if signed is None else signed
    width = bits or region.lane_bits
    return raw - (1 << width) if signed and raw >> (width - 1) else raw


def test_every_block_with_a_driver_has_a_window():
    assert WINDOWED == [m for m, b, _ in SHIPPED
                        if BLOCKS[b].family in ("gae", "replay", "learner", "trainer")]
    assert len(WINDOWED) == 12


@pytest.mark.parametrize("module", WINDOWED)
def test_table_is_the_drivers_layout(module):
    blk, cfg = shipped_config(module)
    window = blk.memory_window(cfg)
    accel = cfg.accel if blk.role == "kernel" else cfg
    if blk.role == "kernel":
        assert window.port == "MEM_PTR" and window.bytes == cfg.window_bytes
        assert window.regions == blk.accelerator.memory_window(accel).regions
    elif blk.family == "trainer":
        assert_trainer_window_is_its_layout(cfg, window)
        return
    else:
        assert window.port == "s_axi_mem"
    family = blk.family
    for r in window:
        if family == "gae":
            want = (gae_layout.region_base(accel, r.name), gae_layout.word_bytes(accel, r.name),
                    accel.region_bytes, accel.depth, accel.n_pe,
                    gae_layout.lane_width(accel, r.name))
        elif family == "replay":
            want = (replay_spec.region_base(accel, r.name), replay_spec.WORD_BYTES,
                    replay_spec.region_words(accel) * replay_spec.WORD_BYTES,
                    replay_spec.region_words(accel), 1, replay_spec.field_bits(accel, r.name))
        else:
            reg = learner_layout.region(accel, r.name)
            S = accel.array
            want = (learner_layout.region_base(accel, r.name),
                    learner_layout.word_bytes(accel, r.name), learner_layout.region_bytes(accel),
                    reg.depth(accel), S * S if reg.kind == "matrix" else S, reg.lane_bits)
        assert (r.offset, r.word_bytes, r.bytes, r.words, r.lanes, r.lane_bits) == want, r.name
    assert 1 << window.addr_bits >= window.bytes


def test_gae_rows_are_where_the_table_says():
    cfg = block("gae-accel").config.from_dict(CUSTOM[1][1])
    window = block("gae-accel").memory_window(cfg)
    rng = np.random.default_rng(0)
    T, M, n = 5, 10, cfg.n_pe
    G = -(-M // n)
    for name, lo, hi in (("rewards", -127, 128), ("dones", 0, 2), ("adv", -2**20, 2**20)):
        r = window[name]
        rows = rng.integers(lo, hi, (T, M))
        image = gae_layout.pack_rows(cfg, name, rows)
        for t in range(T):
            for j in range(M):
                assert lane(image, r, t * G + j // n, j % n) == rows[t, j]
        assert gae_layout.row_offset(cfg, name, 3, M) == r.word_offset(3 * G)
        assert f"ceil(M / {n})" in window.doc and f"g*{n} + p" in window.doc


def test_replay_entries_are_where_the_table_says():
    cfg = block("replay-accel").config.from_dict(CUSTOM[0][1])
    window = block("replay-accel").memory_window(cfg)
    assert [r.name for r in window] == list(replay_spec.REGIONS)
    assert window.addr_bits == replay_spec.mem_addr_bits(cfg)
    # the golden device's memory: what a driver wrote at the table's offsets
    from sw.driver import ReplayDriver, ReplayGoldenDevice
    dev = ReplayGoldenDevice(cfg)
    drv = ReplayDriver(dev, cfg)
    drv.insert([1.0, 2.5, 0.25])
    r = window["PRIO_IN"]
    image = dev.memory.read(r.offset, 3 * r.word_bytes)
    assert [lane(image, r, i, 0) / 2 ** r.frac for i in range(3)] == [1.0, 2.5, 0.25]
    out = window["IDX_OUT"]
    image = dev.memory.read(out.offset, 3 * out.word_bytes)
    assert [lane(image, out, i, 0) for i in range(3)] == [0, 1, 2]


def test_learner_blocks_and_samples_are_where_the_table_says():
    cfg = block("learner").config.from_dict(CUSTOM[2][1])
    window = block("learner").memory_window(cfg)
    S = cfg.array
    rng = np.random.default_rng(1)
    r = window["w0"]
    G = learner_layout.region(cfg, "w0").col_groups(cfg)
    assert f"word rg*{G} + cg" in r.doc
    m = rng.integers(-2**15, 2**15, (4, 8))
    image = learner_layout.pack_matrix(cfg, "w0", m)
    for i in range(4):
        for j in range(8):
            assert lane(image, r, (i // S) * G + j // S, (i % S) * S + j % S) == m[i, j]
    assert r.frac == cfg.numerics.weight_format.frac
    s = window["samples"]
    fields = {f.name: f for f in s.fields}
    acts, rews, dones = [1, 0, 1], [-300, 5, 77], [False, True, False]
    weights = [1 << fields["loss_weight"].frac, 3, 12345]
    image = learner_layout.pack_samples(cfg, acts, rews, dones, weights)
    for k, want in enumerate(zip(acts, rews, dones, weights)):
        got = tuple(lane(image, s, k // S, k % S, f.width, f.lsb, f.signed)
                    for f in (fields[n] for n in ("action", "reward", "done", "loss_weight")))
        assert got == tuple(int(x) for x in want)


def assert_trainer_window_is_its_layout(cfg, window):
    """Every region of the trainer's window from sw.trainer.layout's functions: the ring, a
    weight image's layers (load and both snapshot slots), the headers and the trace, and
    together they span each region of ``layout.regions`` exactly."""
    L = trainer_layout
    lane_bits = 8 * L.lane_bytes(cfg)
    word = L.word_bytes(cfg)
    assert window.port == "BASE" and window.bytes == L.storage_bytes(cfg)
    assert window.addr_bits == 64
    ends = L.weight_offsets(cfg)[1:] + (L.weight_bytes(cfg),)
    want = {"ring": (L.region_base(cfg, "ring"), L.regions(cfg)["ring"][1], cfg.capacity,
                     L.record_bytes(cfg), L.record_lanes(cfg), lane_bits)}
    for slot in ("load", "snap0", "snap1"):
        base = L.region_base(cfg, slot)
        if slot != "load":
            want[f"{slot}_header"] = (base, L.HEADER_BYTES, 1, L.HEADER_BYTES, 2, 32)
            base += L.HEADER_BYTES
        for l, (off, end) in enumerate(zip(L.weight_offsets(cfg), ends)):
            want[f"{slot}_w{l}"] = (base + off, end - off, (end - off) // word, word,
                                    word * 8 // lane_bits, lane_bits)
    want["trace"] = (L.region_base(cfg, "trace"), cfg.trace_depth * L.TRACE_BYTES,
                     cfg.trace_depth, L.TRACE_BYTES, 4, 32)
    assert [r.name for r in window] == list(want)
    for r in window:
        assert (r.offset, r.bytes, r.words, r.word_bytes, r.lanes, r.lane_bits) == \
            want[r.name], r.name
    for name, (off, n) in L.regions(cfg).items():
        parts = [r for r in window if r.name == name or r.name.startswith(f"{name}_")]
        assert parts[0].offset == off and parts[-1].end == off + n, name
        assert all(a.end == b.offset for a, b in zip(parts, parts[1:])), name
        assert off % L.PAGE == 0
    assert window["ring"].fields == L.record_fields(cfg)
    assert window["trace"].fields == L.trace_fields(cfg)
    assert window["snap1_header"].fields == L.header_fields()
    num = cfg.learner.numerics
    assert window["load_w0"].frac == num.weight_format.frac
    assert {f.name: f.frac for f in L.record_fields(cfg)} == {
        "obs": num.act_format.frac, "next_obs": num.act_format.frac,
        "reward": num.act_format.frac, "action": None, "done": None}


def _trainer(params):
    return block("dqn-trainer").config.from_dict(params)


@pytest.mark.parametrize("params", TRAINERS, ids=["lanes16", "lanes32"])
def test_small_trainer_window_is_its_layout(params):
    cfg = _trainer(params)
    window = block("dqn-trainer").memory_window(cfg)
    assert_trainer_window_is_its_layout(cfg, window)
    assert trainer_layout.lane_bytes(cfg) == (4 if cfg.learner.width > 16 else 2)
    # the record the gather engine and the learner adapter read: obs, next obs, reward, then
    # the action with done in the top bit of its lane
    n, L = cfg.learner.sizes[0], 8 * trainer_layout.lane_bytes(cfg)
    assert [(f.name, f.lane, f.lanes, f.lsb, f.width, f.signed) for f in window["ring"].fields] \
        == [("obs", 0, n, 0, L, True), ("next_obs", n, n, 0, L, True),
            ("reward", 2 * n, 1, 0, L, True), ("action", 2 * n + 1, 1, 0, L - 1, False),
            ("done", 2 * n + 1, 1, L - 1, 1, False)]


def _fields(region):
    return {f.name: f for f in region.fields}


def _field(image, region, word, f, k=0):
    """Element ``k`` of field ``f`` of word ``word`` of a region image, from the table."""
    return lane(image, region, word, f.lane + k, f.width, f.lsb, f.signed)


@pytest.mark.parametrize("params", TRAINERS, ids=["lanes16", "lanes32"])
def test_trainer_records_are_where_the_table_says(params):
    from sw.trainer import hostfast

    cfg = _trainer(params)
    window = block("dqn-trainer").memory_window(cfg)
    ring = window["ring"]
    F = _fields(ring)
    n_in = cfg.learner.sizes[0]
    fmt = cfg.learner.numerics.act_format
    rng = np.random.default_rng(2)
    n = 9
    obs = rng.integers(fmt.min_raw, fmt.max_raw + 1, (n, n_in))
    nxt = rng.integers(fmt.min_raw, fmt.max_raw + 1, (n, n_in))
    obs[0], nxt[0] = fmt.min_raw, fmt.max_raw                     # both ends of the format
    rew = rng.integers(fmt.min_raw, fmt.max_raw + 1, n)
    act = rng.integers(0, cfg.learner.n_out, n)
    done = rng.random(n) < 0.5
    done[:2] = [True, False]
    image = trainer_layout.pack_records(cfg, obs, act, rew, nxt, done).ravel()
    assert image.size == n * ring.word_bytes
    for s in range(n):
        for i in range(n_in):
            assert _field(image, ring, s, F["obs"], i) == obs[s, i]
            assert _field(image, ring, s, F["next_obs"], i) == nxt[s, i]
        assert _field(image, ring, s, F["reward"]) == rew[s]
        assert _field(image, ring, s, F["action"]) == act[s]
        assert _field(image, ring, s, F["done"]) == done[s]
        # past the fields' lanes: zeros up to the record's bytes
        pad = image[s * ring.word_bytes:(s + 1) * ring.word_bytes]
        assert not pad[ring.lanes * ring.lane_bits // 8:].any()
    # the compiled packer the driver uses (when numba is there) gives the same bytes
    fast = hostfast.records(cfg, obs * fmt.ulp, act, rew * fmt.ulp, nxt * fmt.ulp, done)
    if fast is not None:
        np.testing.assert_array_equal(fast.ravel(), image)
    back = trainer_layout.unpack_records(cfg, image.reshape(n, -1))
    for a, b in zip(back, (obs, act, rew, nxt, done)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("params", TRAINERS, ids=["lanes16", "lanes32"])
def test_trainer_storage_through_the_driver_is_where_the_table_says(params):
    """The driver on the golden trainer device: its inserted records, the load region, a
    snapshot (header and weights) and the trace entries, read back from device memory with
    the table's numbers only."""
    from sw.trainer.device import TrainerGoldenDevice
    from sw.trainer.driver import TrainerDriver

    cfg = _trainer(params)
    window = block("dqn-trainer").memory_window(cfg)
    drv = TrainerDriver(TrainerGoldenDevice(cfg), seed=1)
    drv.init_weights(0)
    mem = drv.device.memory

    def region(name, words=None):
        r = window[name]
        return r, np.frombuffer(mem.read(r.offset, (words or r.words) * r.word_bytes), np.uint8)

    n_in, fmt = cfg.learner.sizes[0], cfg.learner.numerics.act_format
    rng = np.random.default_rng(3)
    n = 12
    obs = np.round(rng.normal(0, 0.5, (n, n_in)) / fmt.ulp) * fmt.ulp
    nxt = np.round(rng.normal(0, 0.5, (n, n_in)) / fmt.ulp) * fmt.ulp
    rew = np.round(rng.normal(0, 0.5, n) / fmt.ulp) * fmt.ulp
    act, done = rng.integers(0, cfg.learner.n_out, n), rng.random(n) < 0.3
    assert drv.insert(obs, act, rew, nxt, done) == n
    ring, image = region("ring", n)
    F = _fields(ring)
    for s in range(n):
        got = [_field(image, ring, s, F["obs"], i) for i in range(n_in)]
        assert got == list(np.round(obs[s] / fmt.ulp).astype(int))
        assert [_field(image, ring, s, F[k]) for k in ("reward", "action", "done")] == \
            [round(rew[s] / fmt.ulp), act[s], done[s]]
        assert F["obs"].frac == F["next_obs"].frac == fmt.frac
    raw0 = drv.raw_weights()
    shapes = cfg.learner.numerics.weight_shapes()

    def matrix(name, shape):
        r, image = region(name)
        rows, cols = shape
        k = np.arange(rows * cols)
        return np.array([lane(image, r, int(i) // r.lanes, int(i) % r.lanes)
                         for i in k]).reshape(rows, cols)

    for l, shape in enumerate(shapes):
        np.testing.assert_array_equal(matrix(f"load_w{l}", shape), raw0[l])
    drv.train(3, batch=4, lr=0.05, snapshot_period=2, trace_period=1)
    seq = drv.stats()["snapshot_seq"]
    assert seq == 2                          # after step 2, and the launch's end
    r, image = region(f"snap{seq % 2}_header")
    H = _fields(r)
    assert _field(image, r, 0, H["seq"]) == seq
    assert _field(image, r, 0, H["steps_total"]) == drv.stats()["steps_total"]
    raw = drv.raw_weights()
    for l, shape in enumerate(shapes):
        np.testing.assert_array_equal(matrix(f"snap{seq % 2}_w{l}", shape), raw[l])
    stats = drv.stats()
    r, image = region("trace")
    T = _fields(r)
    for e in range(stats["trace_count"]):
        row = stats["trace"][e]
        assert _field(image, r, e, T["steps_total"]) == row[0]
        assert _field(image, r, e, T["consumed"]) == row[1]
        total, samples = (_field(image, r, e, T[k]) for k in ("abs_td_sum", "samples"))
        assert samples == 4 and total * 2.0 ** -T["abs_td_sum"].frac / samples == \
            pytest.approx(row[2])


def test_trainer_header_and_trace_pack_where_the_table_says():
    cfg = _trainer(CUSTOM[3][1])
    window = block("dqn-trainer").memory_window(cfg)
    r = window["snap0_header"]
    image = trainer_layout.pack_header(0xFFFFFFFF, 123456789)
    assert image.size == r.bytes
    assert [_field(image, r, 0, f) for f in r.fields] == [0xFFFFFFFF, 123456789]
    assert trainer_layout.unpack_header(image) == {"seq": 0xFFFFFFFF, "steps_total": 123456789}
    t = window["trace"]
    vals = ([1, 2], [3, 4], [2**32 - 1, 5], [6, 7])
    image = trainer_layout.pack_trace(cfg, *vals).ravel()
    for e in range(2):
        assert [_field(image, t, e, f) for f in t.fields] == [v[e] for v in vals]
    back = trainer_layout.unpack_trace(cfg, image)
    assert [list(back[f.name]) for f in t.fields] == [list(v) for v in vals]


@pytest.mark.parametrize("module", WINDOWED)
def test_register_files_carry_the_window(module):
    blk, cfg = shipped_config(module)
    window = blk.memory_window(cfg)
    files = register_files(blk.regmap(cfg), cfg, module, memory=window)
    doc = json.loads(files[f"{module}_regs.json"])
    assert doc["memory"] == window.to_dict()
    assert [(r["name"], r["offset"]) for r in doc["memory"]["regions"]] == \
        [(r.name, r.offset) for r in window]
    md = files[f"{module}_regs.md"]
    ow = max(2, len(f"{window.bytes - 1:x}"))
    for r in window:
        assert f"| 0x{r.offset:0{ow}x} | {r.name} | {r.bytes:#x} | {r.words:,} |" in md
    assert f"#define {module.upper()}_MEM_BYTES" in files[f"{module}_regs.h"]
    # the register map reads back from the JSON as before
    from sw.regmap import RegisterMap
    assert RegisterMap.from_dict(doc) == blk.regmap(cfg).with_constant_resets(cfg)


def _headers():
    for module in WINDOWED:
        blk, cfg = shipped_config(module)
        yield module, blk, cfg
    for name, params in CUSTOM:
        yield f"{name.replace('-', '_')}_custom", block(name), block(name).config.from_dict(params)


HEADERS = list(_headers())


@pytest.mark.parametrize("module,blk,cfg", HEADERS, ids=[h[0] for h in HEADERS])
def test_c_header_compiles_with_the_tables_values(module, blk, cfg):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    window = blk.memory_window(cfg)
    header = register_files(blk.regmap(cfg), cfg, module, memory=window)[f"{module}_regs.h"]
    P = f"{module.upper()}_MEM"
    checks = [f"_Static_assert({P}_BYTES == {window.bytes}u, \"bytes\");"]
    for r in window:
        R = f"{P}_{r.name.upper()}"
        checks += [f"_Static_assert({R}_OFFSET == {r.offset}u && {R}_WORDS == {r.words}u && "
                   f"{R}_WORD_BYTES == {r.word_bytes}u && {R}_LANES * {R}_LANE_BITS == "
                   f"{r.lanes * r.lane_bits}u && {R}_SIGNED == {int(r.signed)}, \"{r.name}\");"]
        for f in r.fields:
            F = f"{R}_{f.name.upper()}"
            checks.append(f"_Static_assert(({F}_MASK >> {F}_SHIFT) == (1ull << {F}_WIDTH) - 1 "
                          f"&& {F}_SHIFT == {f.lsb} && {F}_WIDTH == {f.width}, \"{f.name}\");")
            if f.lane is not None:
                checks.append(f"_Static_assert({F}_LANE == {f.lane}u && {F}_LANES == "
                              f"{f.lanes}u && {F}_LANE + {F}_LANES <= {R}_LANES, "
                              f"\"{f.name} lanes\");")
    src = header + "\n".join(checks) + "\nint main(void) { return 0; }\n"
    res = subprocess.run([cc, "-std=c11", "-Wall", "-Werror", "-fsyntax-only", "-x", "c", "-"],
                         input=src, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr


def test_bad_windows_are_refused():
    def region(name="a", offset=0, **kw):
        args = dict(bytes=64, words=8, word_bytes=8, lanes=1, lane_bits=32, signed=False,
                    frac=None, access="rw")
        return MemoryRegion(name, offset, **{**args, **kw})

    with pytest.raises(ValueError, match="region name must be a C identifier, not 'a-b'"):
        region("a-b")
    with pytest.raises(ValueError, match="8 words of 8 bytes do not fit its 32 bytes"):
        region(bytes=32)
    with pytest.raises(ValueError, match="4 lanes of 32 bits do not fit a word of 8 bytes"):
        region(lanes=4)
    with pytest.raises(ValueError, match="access must be one of rw, ro, not 'wo'"):
        region(access="wo")
    with pytest.raises(ValueError, match="fields must be LaneFields inside its 32-bit lanes"):
        region(fields=(LaneField("x", 30, 4),))
    with pytest.raises(ValueError, match="field 'x': lanes = 2 needs a first lane"):
        LaneField("x", 0, 4, lanes=2)
    with pytest.raises(ValueError, match="field 'x' in lanes 0 .. 1 is outside its 1 lanes"):
        region(fields=(LaneField("x", 0, 4, lane=0, lanes=2),))
    with pytest.raises(ValueError, match="port must be one of s_axi_mem, MEM_PTR, BASE"):
        MemoryWindow((region(),), addr_bits=8, port="m_axi")
    with pytest.raises(ValueError, match="region 'b' at 0x20 overlaps 'a'"):
        MemoryWindow((region(), region("b", 32)), addr_bits=8)
    with pytest.raises(ValueError, match="region names must differ in upper case"):
        MemoryWindow((region(), region("A", 64)), addr_bits=8)
    with pytest.raises(ValueError, match="need more than addr_bits = 6"):
        MemoryWindow((region(), region("b", 64)), addr_bits=6)
    with pytest.raises(ValueError, match="extra defines macros the registers define"):
        from sw.regfiles import to_c_header
        from sw.regmap import Register, RegisterMap
        to_c_header(RegisterMap("m", (Register.scalar("MEM_BYTES", offset=0),)), "P",
                    extra="#define P_MEM_BYTES_OFFSET 1\n")
