"""The trainer's gather engine, thorough tier: cocotb + Verilator with cocotbext-axi's memory.

:class:`RecordGather` of the small trainer (4-16-2 learner, 32-byte records, 256 slots) at
storage widths 64, 128 and 512 (records of 4 and 2 beats, two records per beat), the three side
by side in one Verilated model (:class:`GatherSet`: one build, a few seconds of simulation).
Each reads from ``AxiRamRead`` (the read half of cocotbext-axi's ``AxiRam``: the engine has no
write channels) holding a storage that :func:`sw.trainer.layout.pack_records` filled with
random transitions, at a base above 4 GiB. A few hundred random slots (runs of duplicates
included) go in with random idle cycles, random pauses on AR and R and random back-pressure on
the records; every record must be the golden core's
(:meth:`sw.trainer.golden.TrainerCore.gather`) bit for bit, in index order. Without pauses the
R channel must carry a beat in every cycle after the first.
"""

import random

import numpy as np
import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from cocotb_util import StreamTB, load_manifest, run_component
from rtl_gen.trainer.gather import RecordGather
from sw.learner.spec import LearnerConfig
from sw.replay.spec import SumTreeConfig
from sw.trainer.golden import TrainerCore
from sw.trainer.layout import pack_records, record_bytes, storage_bytes, unpack_records
from sw.trainer.spec import TrainerConfig

pytestmark = pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")

#: Storage base address: page aligned, above 4 GiB.
BASE = 0x2_0000_3000
#: Indices per pass.
COUNT = 300
#: storage width -> max_outstanding
CASES = {64: 8, 128: 8, 512: 4}


def small_config(storage_width):
    return TrainerConfig(learner=LearnerConfig(sizes=(4, 16, 2), array=4, max_batch=32,
                                               sub_batch=8),
                         tree=SumTreeConfig(fanout=4, capacity=256, max_batch=32),
                         append_window=16, storage_width=storage_width)


class GatherSet(wiring.Component):
    """One :class:`RecordGather` of :func:`small_config` per storage width in :data:`CASES`,
    side by side: unit ``w``'s ports are suffixed ``_w<w>`` (``idx_w64__valid``,
    ``base_w64``) and its AXI ports prefixed ``m_axi_w<w>`` (``m_axi_w64_araddr``)."""

    def __init__(self):
        self.units = {w: RecordGather(small_config(w), max_outstanding=o, prefix=f"m_axi_w{w}")
                      for w, o in CASES.items()}
        super().__init__({
            name if name.startswith("m_axi_") else f"{name}_w{w}": member
            for w, u in self.units.items() for name, member in u.signature.members.items()})

    def elaborate(self, platform):
        m = Module()
        for w, u in self.units.items():
            m.submodules[f"gather_w{w}"] = u
            for name, member in u.signature.members.items():
                ours = getattr(self, name if name.startswith("m_axi_") else f"{name}_w{w}")
                theirs = getattr(u, name)
                if not member.is_port:                  # idx, rec: streams
                    pair = (wiring.flipped(ours), theirs) if member.flow == In else \
                        (theirs, wiring.flipped(ours))
                    wiring.connect(m, *pair)
                elif member.flow == In:
                    m.d.comb += theirs.eq(ours)
                else:
                    m.d.comb += ours.eq(theirs)
        return m


@pytest.mark.slow
def test_gather_rtl():
    run_component(GatherSet(), "record_gather_set", __file__,
                  manifest={w: small_config(w).to_dict() for w in CASES}, seed=20261208)


def random_pause(rng, p):
    """Endless pause generator for cocotbext-axi channels: True (stall) with probability p."""
    while True:
        yield rng.random() < p


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


try:
    import cocotb
except ImportError:  # pragma: no cover
    cocotb = None

if cocotb is not None:
    @cocotb.test()
    @cocotb.parametrize(width=list(CASES), pause=[0.0, 0.3])
    async def gather_matches_golden(dut, width, pause):
        """Random slots in, records out bit for bit as the golden core's, in order."""
        from cocotbext.axi import AxiRamRead, AxiReadBus

        config = TrainerConfig.from_dict(load_manifest()[str(width)])
        beats = RecordGather(config).beats
        rng = np.random.default_rng(cocotb.RANDOM_SEED)
        prng = random.Random(cocotb.RANDOM_SEED)
        dut._log.info("storage width %d, %d beats per record, seed %d",
                      config.storage_width, beats, cocotb.RANDOM_SEED)
        tb = StreamTB(dut, inp=f"idx_w{width}", out=f"rec_w{width}")
        for w in CASES:
            getattr(dut, f"base_w{w}").value = BASE
            getattr(dut, f"idx_w{w}__valid").value = 0
        ram = AxiRamRead(AxiReadBus.from_prefix(dut, f"m_axi_w{width}"), dut.clk, dut.rst,
                         size=1 << 48)
        storage = random_storage(config, rng)
        ram.write(BASE, storage.tobytes())
        if pause:
            ram.ar_channel.set_pause_generator(random_pause(random.Random(prng.random()), pause))
            ram.r_channel.set_pause_generator(random_pause(random.Random(prng.random()), pause))
        await tb.start()

        slots = rng.integers(0, config.capacity, COUNT)
        for at in rng.integers(0, COUNT - 8, 6):
            slots[at:at + rng.integers(2, 8)] = slots[at]       # runs of one slot
        outs, t_in, t_out = await tb.run([int(s) for s in slots], idle=pause, stall=pause,
                                         rng=prng, max_cycles=40 * COUNT * beats)
        rb = record_bytes(config)
        raw = np.frombuffer(b"".join(v.to_bytes(rb, "little") for v in outs), np.uint8)
        raw = raw.reshape(-1, rb)
        ring = storage[:config.capacity * rb].reshape(-1, rb)
        bad = np.flatnonzero((raw != ring[slots]).any(axis=1))
        assert not bad.size, f"records {bad[:8]} differ (slots {slots[bad[:8]]})"
        for ours, gold in zip(unpack_records(config, raw),
                              TrainerCore(config, storage, 0).gather(slots)):
            np.testing.assert_array_equal(ours, gold)
        cycles = t_out[-1] - t_in[0]
        dut._log.info("%d records in %d cycles (%d beats)", COUNT, cycles, COUNT * beats)
        assert not int(getattr(dut, f"busy_w{width}").value)
        if not pause:
            # the full bandwidth: one R beat per cycle after cocotbext-axi's first answer
            assert cycles <= COUNT * beats + 10, cycles
