"""The memory windows in the register files (sw.memmap, ``Block.memory_window``): the table's
offsets, word sizes and lanes are where the drivers' own packing functions put the bytes, a
kernel's buffer is its ``DMA_WINDOW``, and the C header with the ``*_MEM_*`` macros compiles.
No Amaranth: the layouts and exports are host code."""

import json
import shutil
import subprocess

import numpy as np
import pytest

from sw.gae import layout as gae_layout
from sw.learner import layout as learner_layout
from sw.memmap import LaneField, MemoryRegion, MemoryWindow
from sw.registry import BLOCKS, SHIPPED, block, shipped_config
from sw.regmap import register_files
from sw.replay import spec as replay_spec

WINDOWED = [m for m, b, _ in SHIPPED if BLOCKS[b].memory_window(shipped_config(m)[1])]
#: A configuration that is not shipped (what a user generates), one per family.
CUSTOM = [("replay-accel", {"fanout": 8, "capacity": 4096}),
          ("gae-accel", {"n_pe": 4, "max_trajectories": 12, "capacity": 100,
                         "results": "full"}),
          ("learner", {"sizes": [3, 8, 2], "array": 2, "max_batch": 8, "sub_batch": 2,
                       "axi_data_width": 64})]


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
                        if BLOCKS[b].family in ("gae", "replay", "learner")]
    assert len(WINDOWED) == 10


@pytest.mark.parametrize("module", WINDOWED)
def test_table_is_the_drivers_layout(module):
    blk, cfg = shipped_config(module)
    window = blk.memory_window(cfg)
    accel = cfg.accel if blk.role == "kernel" else cfg
    if blk.role == "kernel":
        assert window.port == "MEM_PTR" and window.bytes == cfg.window_bytes
        assert window.regions == blk.accelerator.memory_window(accel).regions
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
    for r in window:
        assert f"| 0x{r.offset:05x} | {r.name} | {r.bytes:#x} | {r.words:,} |" in md
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
            checks.append(f"_Static_assert(({F}_MASK >> {F}_SHIFT) == (1ull << {F}_WIDTH) - 1, "
                          f"\"{f.name}\");")
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
    with pytest.raises(ValueError, match="region 'b' at 0x20 overlaps 'a'"):
        MemoryWindow((region(), region("b", 32)), addr_bits=8)
    with pytest.raises(ValueError, match="region names must differ in upper case"):
        MemoryWindow((region(), region("A", 64)), addr_bits=8)
    with pytest.raises(ValueError, match="need more than addr_bits = 6"):
        MemoryWindow((region(), region("b", 64)), addr_bits=6)
    with pytest.raises(ValueError, match="extra defines macros the registers define"):
        from sw.regmap import Register, RegisterMap
        RegisterMap("m", (Register.scalar("MEM_BYTES", offset=0),)).to_c_header(
            "P", extra="#define P_MEM_BYTES_OFFSET 1\n")
