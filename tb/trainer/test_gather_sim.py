"""The trainer's gather engine in Amaranth's simulator (fast tier).

:class:`RecordGather` reads records of random slots (duplicates included) from a storage that
:func:`sw.trainer.layout.pack_records` filled with random transitions; :class:`ReadMemory`, a
cycle-level AXI4 read slave in the testbench, answers its bursts after a read latency and checks
the master side on every cycle (AR payload stable while waiting, INCR bursts of ``beats``
full-width beats, aligned, inside 4 KiB, at most ``max_outstanding`` in flight). The records
must be the golden core's (:meth:`sw.trainer.golden.TrainerCore.gather`) in index order, and
without back-pressure the cycle count must equal :meth:`RecordGather.cycles` in both regimes
(bandwidth-bound and bounded by ``max_outstanding``); with random stalls on every channel and
idle indices nothing is lost, duplicated or reordered.
"""

import numpy as np
import pytest
from amaranth.sim import Simulator

from rtl_gen.trainer.gather import RecordGather
from sw.learner.spec import LearnerConfig
from sw.replay.spec import SumTreeConfig
from sw.trainer.golden import TrainerCore
from sw.trainer.layout import PAGE, pack_records, record_bytes, storage_bytes, unpack_records
from sw.trainer.spec import TrainerConfig

pytestmark = [pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable"),
              pytest.mark.usefixtures("collect_components")]

SEED = 20261208
#: Storage base address: page aligned, above 4 GiB (the 64-bit address sum).
BASE = 0x1_2345_6000


def small_config(storage_width, **kw):
    """The tests' trainer: a 4-16-2 learner (32-byte records), 256 slots."""
    return TrainerConfig(learner=LearnerConfig(sizes=(4, 16, 2), array=4, max_batch=32,
                                               sub_batch=8),
                         tree=SumTreeConfig(fanout=4, capacity=256, max_batch=32),
                         append_window=16, storage_width=storage_width, **kw)


def random_storage(config, rng):
    """A storage whose every ring slot holds a random transition (pack_records' bytes)."""
    n, c = config.capacity, config.learner
    lo, hi = -(1 << (c.width - 1)), 1 << (c.width - 1)
    rec = pack_records(config, rng.integers(lo, hi, (n, c.sizes[0])),
                       rng.integers(0, c.sizes[-1], n), rng.integers(lo, hi, n),
                       rng.integers(lo, hi, (n, c.sizes[0])), rng.random(n) < 0.3)
    storage = rng.integers(0, 256, storage_bytes(config), dtype=np.uint8)
    storage[:rec.size] = rec.ravel()            # the ring is the first region
    return storage


class ReadMemory:
    """Cycle-level AXI4 read slave on ``dut``'s AR and R channels over ``storage`` (bytes from
    address ``base``), checking the master each cycle.

    A burst's first beat is due ``latency`` cycles after its AR handshake (plus up to
    ``jitter`` random cycles, in order), beats of due bursts back to back. ``stall``: chance of
    dropping ARREADY or RVALID in a cycle; beats at the byte addresses in ``bad`` answer SLVERR.
    Records every AR handshake ``(cycle, addr)`` and the cycles of SLVERR beats taken.
    """

    def __init__(self, dut, storage, base, *, latency, stall=0.0, jitter=0, rng=None,
                 bad=()):
        self.dut, self.storage, self.base = dut, storage, base
        self.nbytes = dut.config.storage_width // 8
        self.latency, self.stall, self.jitter = latency, stall, jitter
        self.rng = rng or np.random.default_rng(0)
        self.ar = []
        self.reads = []                         # [due cycle, addr, beats left]
        self.held = None
        self.max_in_flight = 0
        self.bad, self.errors = set(bad), []

    def _go(self):
        return not (self.stall and self.rng.random() < self.stall)

    def drive(self, ctx, cycle):
        a = self.dut.axi
        ctx.set(a("arready"), self._go())
        beat = bool(self.reads) and self.reads[0][0] <= cycle and self._go()
        ctx.set(a("rvalid"), beat)
        if beat:
            _, addr, left = self.reads[0]
            off = addr - self.base
            ctx.set(a("rdata"), int.from_bytes(self.storage[off:off + self.nbytes].tobytes(),
                                               "little"))
            ctx.set(a("rlast"), left == 1)
            ctx.set(a("rresp"), 2 if addr in self.bad else 0)

    def sample(self, ctx, cycle):
        a, d = self.dut.axi, self.dut
        valid = ctx.get(a("arvalid"))
        payload = tuple(ctx.get(a(n)) for n in ("araddr", "arlen", "arsize", "arburst", "arid"))
        if self.held is not None:
            assert valid and payload == self.held, "AR: VALID or payload changed before READY"
        if valid and ctx.get(a("arready")):
            addr, ln, size, burst, _ = payload
            beats = ln + 1
            assert (beats, 1 << size, burst) == (d.beats, self.nbytes, 1), payload
            assert addr % self.nbytes == 0, f"ARADDR {addr:#x} not aligned"
            assert addr // PAGE == (addr + beats * self.nbytes - 1) // PAGE, "crosses 4 KiB"
            self.ar.append((cycle, addr))
            due = cycle + self.latency + int(self.rng.integers(0, self.jitter + 1))
            if self.reads:
                due = max(due, self.reads[-1][0])
            self.reads.append([due, addr, beats])
            self.held = None
        else:
            self.held = payload if valid else None
        if ctx.get(a("rvalid")) and ctx.get(a("rready")):
            if self.reads[0][1] in self.bad:
                self.errors.append(cycle)
            self.reads[0][1] += self.nbytes
            self.reads[0][2] -= 1
            if not self.reads[0][2]:
                self.reads.pop(0)
        self.max_in_flight = max(self.max_in_flight, len(self.reads))
        assert len(self.reads) <= d.max_outstanding


def run_gather(dut, storage, slots, *, latency, stall=0.0, idle=0.0, jitter=0, seed=0,
               bad=(), max_cycles=100_000):
    """Send ``slots`` to ``dut`` (base :data:`BASE`) and collect the records. Returns
    ``(records as n x record_bytes uint8, index handshake cycles, record handshake cycles,
    the memory model)``; the memory model's ``error_out`` lists the cycles ``error`` was high."""
    rng = np.random.default_rng(seed)
    mem = ReadMemory(dut, storage, BASE, latency=latency, stall=stall, jitter=jitter, rng=rng,
                     bad=bad)
    mem.error_out = []
    rb = dut.record_bytes
    out, t_idx, t_rec = [], [], []

    async def bench(ctx):
        ctx.set(dut.base, BASE)
        sent, offered, held = 0, False, None    # held: the record offered, not yet taken
        for cycle in range(max_cycles):
            # a stream source keeps an offer up until it is taken
            offer = sent < len(slots) and (offered or rng.random() >= idle)
            ctx.set(dut.idx.valid, offer)
            if offer:
                ctx.set(dut.idx.payload, int(slots[sent]))
            ready = rng.random() >= stall
            ctx.set(dut.rec.ready, ready)
            mem.drive(ctx, cycle)
            valid, payload = ctx.get(dut.rec.valid), ctx.get(dut.rec.payload)
            if held is not None:
                assert valid and payload == held, "rec: VALID or payload changed before READY"
            held = payload if valid and not ready else None
            assert ctx.get(dut.busy) == (len(t_idx) > len(t_rec)), f"busy in cycle {cycle}"
            offered = offer and not ctx.get(dut.idx.ready)
            if offer and not offered:
                t_idx.append(cycle)
                sent += 1
            if valid and ready:
                out.append(payload)
                t_rec.append(cycle)
            if ctx.get(dut.error):
                mem.error_out.append(cycle)
            mem.sample(ctx, cycle)
            await ctx.tick()
            if len(out) == len(slots):
                assert not ctx.get(dut.busy) and not mem.reads
                return
        raise AssertionError(f"{len(out)} of {len(slots)} records after {max_cycles} cycles")

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    raw = np.frombuffer(b"".join(v.to_bytes(rb, "little") for v in out), np.uint8)
    return raw.reshape(-1, rb), t_idx, t_rec, mem


def check_records(config, storage, slots, raw):
    """The records equal the ring's bytes and the golden core's gather, in index order."""
    rb = record_bytes(config)
    ring = storage[:config.capacity * rb].reshape(-1, rb)
    np.testing.assert_array_equal(raw, ring[slots])
    ours = unpack_records(config, raw)
    gold = TrainerCore(config, storage, 0).gather(slots)
    for a, b in zip(ours, gold):
        np.testing.assert_array_equal(a, b)


# == parameters ================================================================================
def test_parameter_checks():
    c = small_config(128)
    with pytest.raises(TypeError, match=r"config must be a TrainerConfig, not 128"):
        RecordGather(128)
    for v in (0, 257, True, 2.0):
        with pytest.raises(ValueError, match=rf"max_outstanding must be an integer from 1 to "
                           rf"256, not {v!r}"):
            RecordGather(c, max_outstanding=v)
    with pytest.raises(ValueError, match=r"id_width must be an integer from 1 to 16, not 0"):
        RecordGather(c, id_width=0)
    with pytest.raises(ValueError, match=r"prefix must be letters and digits joined by single "
                       r"underscores, not 'm__x'"):
        RecordGather(c, prefix="m__x")
    big = TrainerConfig(learner=LearnerConfig(sizes=(600, 16, 2), array=4, max_batch=32,
                                              sub_batch=8),
                        tree=SumTreeConfig(fanout=4, capacity=256, max_batch=32),
                        append_window=16, storage_width=64)
    with pytest.raises(ValueError, match=r"record_bytes must be at most 2048 \(one burst of at "
                       r"most 256 beats within a 4 KiB page\), not 4096"):
        RecordGather(big)
    with pytest.raises(TypeError):
        RecordGather(c, 8)                      # keyword-only
    g = RecordGather(c)
    with pytest.raises(ValueError, match=r"batch must be a positive integer, not 0"):
        g.cycles(0, 4)
    with pytest.raises(ValueError, match=r"read_latency must be a positive integer, not 0"):
        g.cycles(4, 0)


@pytest.mark.parametrize("width,beats,lane_bits", [(64, 4, 0), (128, 2, 0), (256, 1, 0),
                                                   (512, 1, 1)])
def test_ports(width, beats, lane_bits):
    c = small_config(width)
    g = RecordGather(c, max_outstanding=5, id_width=3)
    assert (g.beats, g.lane_bits, g.record_bytes) == (beats, lane_bits, 32)
    assert (g.config, g.max_outstanding, g.id_width, g.prefix) == (c, 5, 3, "m_axi_gmem")
    assert len(g.base) == 64 and len(g.idx.payload) == c.tree.index_width == 8
    assert len(g.rec.payload) == 256 and len(g.m_axi_gmem_rdata) == width
    assert len(g.m_axi_gmem_araddr) == 64 and len(g.m_axi_gmem_arid) == 3
    assert g.axi("rready") is g.m_axi_gmem_rready and g.m_axi_gmem_arlen.name == \
        "m_axi_gmem_arlen"
    assert not any(n.startswith(("m_axi_gmem_aw", "m_axi_gmem_w", "m_axi_gmem_b"))
                   for n in g.signature.members)
    assert RecordGather(c, prefix="m_axi_storage").m_axi_storage_araddr.name == \
        "m_axi_storage_araddr"
    # the reference address: slot s at base + s * 32, a beat holding 512 / 256 records
    assert g.address(BASE, 5) == (BASE + 5 * 32 - (5 * 32) % (width // 8),
                                  (5 * 32) % (width // 8) // 32)


def test_cycle_formula_regimes():
    g = RecordGather(small_config(128), max_outstanding=8)      # b = 2
    assert g.cycles(1, 10) == 10 + 2 + 1                        # latency L + b + 1
    assert g.cycles(64, 10) == 64 * 2 + 10 + 1                  # (O-1)b = 14 >= L + 1
    # bounded by O: 8 bursts per round trip of L + b + 1 = 67 cycles at L = 64
    assert g.cycles(64, 64) == 64 + 1 + 2 + 7 * 67 + 7 * 2
    # full bandwidth from O = 1 + ceil((L + 1) / b) = 34 on
    assert RecordGather(small_config(128), max_outstanding=34).cycles(64, 64) == 64 * 2 + 65
    assert RecordGather(small_config(128), max_outstanding=33).cycles(64, 64) == 64 * 2 + 66


# == simulation ================================================================================
#: (storage_width, max_outstanding, read latency): both regimes of the cycle formula.
TIMED = [
    (128, 8, 4), (128, 3, 10), (128, 1, 1),         # b = 2
    (64, 8, 12), (64, 2, 6),                        # b = 4
    (256, 8, 5), (256, 4, 8),                       # b = 1
    (512, 8, 3), (512, 2, 5),                       # b = 1, two records per beat
]


@pytest.mark.parametrize("width,outstanding,latency", TIMED,
                         ids=[f"w{w}-o{o}-l{lat}" for w, o, lat in TIMED])
def test_records_and_exact_cycles(width, outstanding, latency):
    config = small_config(width)
    rng = np.random.default_rng([SEED, width, outstanding, latency])
    storage = random_storage(config, rng)
    slots = rng.integers(0, config.capacity, 37)
    slots[5:9] = slots[4]                           # duplicates, back to back
    slots[-1] = config.capacity - 1
    dut = RecordGather(config, max_outstanding=outstanding)
    raw, t_idx, t_rec, mem = run_gather(dut, storage, slots, latency=latency)
    check_records(config, storage, slots, raw)
    assert t_rec[-1] - t_idx[0] == dut.cycles(len(slots), latency)
    assert [a for _, a in mem.ar] == [dut.address(BASE, int(s))[0] for s in slots]
    # the first record: L + b + 1 cycles after its index
    assert t_rec[0] - t_idx[0] == latency + dut.beats + 1


@pytest.mark.parametrize("width", [64, 128, 256, 512])
def test_random_stalls(width):
    """Random ARREADY, RVALID and rec.ready stalls, idle indices, random memory latency: the
    records stay whole and in order; a lone index after idle still comes back."""
    config = small_config(width)
    rng = np.random.default_rng([SEED, width])
    storage = random_storage(config, rng)
    slots = rng.integers(0, config.capacity, 120)
    slots[10:14] = slots[9]
    dut = RecordGather(config, max_outstanding=4)
    raw, t_idx, t_rec, mem = run_gather(dut, storage, slots, latency=3, stall=0.3, idle=0.3,
                                        jitter=6, seed=width)
    check_records(config, storage, slots, raw)
    assert mem.max_in_flight == 4


def test_single_record_and_idle():
    """One index: busy until its record leaves, then idle; the output holds while stalled."""
    config = small_config(128)
    rng = np.random.default_rng(SEED)
    storage = random_storage(config, rng)
    dut = RecordGather(config)
    raw, t_idx, t_rec, _ = run_gather(dut, storage, np.array([200]), latency=2)
    check_records(config, storage, np.array([200]), raw)
    assert t_rec[0] - t_idx[0] == dut.cycles(1, 2) == 2 + 2 + 1


def test_error_responses():
    """SLVERR beats: ``error`` is high in the cycle after each, and the records still come out
    whole (with the data as received)."""
    config = small_config(64)                       # 4 beats per record
    rng = np.random.default_rng(SEED + 1)
    storage = random_storage(config, rng)
    slots = np.array([3, 7, 3, 100, 7])
    dut = RecordGather(config)
    bad = {BASE + 7 * 32 + 8, BASE + 100 * 32 + 24}   # beat 1 of slot 7, beat 3 of slot 100
    raw, _, _, mem = run_gather(dut, storage, slots, latency=2, stall=0.2, seed=1, bad=bad)
    check_records(config, storage, slots, raw)
    assert len(mem.errors) == 3
    assert mem.error_out == [c + 1 for c in mem.errors]
