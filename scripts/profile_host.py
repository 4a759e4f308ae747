"""Host (Python) time of every driver call, against the modeled device time.

Each driver runs on its golden device (:class:`sw.gae.device.GoldenDevice`,
:class:`sw.replay.device.ReplayGoldenDevice`, :class:`sw.learner.device.LearnerGoldenDevice`)
wrapped in :class:`TimedDevice`, which adds up the time spent *inside* the device
(register reads and writes, memory reads and writes, interrupt waits: the golden model's own
work, which hardware does). The host time of a call is its time minus that: validation,
quantization, packing, unpacking, dequantization and the register-map bookkeeping in Python.
Times are the calling thread's CPU time (:data:`_now`), best of ``--repeats`` calls, all
configurations timed in one process, interleaved; the load average is printed. The modeled
device time is the spec's cycle model at ``--clock`` (300 MHz default):

* GAE accelerator: :func:`sw.gae.spec.run_cycles` (the image is written and read over AXI by
  the host, which is not counted here: see the bytes column);
* GAE Alveo kernel: :func:`sw.gae.spec.kernel_run_cycles` (its DMA copies plus the run,
  device memory answering at once);
* replay: :func:`sw.replay.spec.run_cycles`; learner: :func:`sw.learner.schedule.step_cycles`.

The "≤ 25 %" column says whether the host time is at most 25 % of the device time (the
project's goal, docs/benchmarks.md); "bus bytes" and "registers" count the memory bytes and 32-bit register accesses
of the call. ``--profile NAME`` prints the cProfile of one call instead.

Usage::

    PYTHONPATH=. python scripts/profile_host.py [--repeats 5] [--profile "gae_accel_n8 compute 64x1024"]
"""

import argparse
import cProfile
import os
import pstats
import time
import warnings

import numpy as np

from sw.console import progress_bar
from sw.driver.mmio import Device, MemoryPort, Mmio
from sw.gae import spec as gae_spec
from sw.gae.device import GoldenDevice
from sw.gae.driver import GaeDriver
from sw.learner.device import LearnerGoldenDevice
from sw.learner.driver import LearnerDriver
from sw.learner.schedule import step_cycles
from sw.registry import shipped_config
from sw.replay import spec as replay_spec
from sw.replay.device import ReplayGoldenDevice
from sw.replay.driver import ReplayDriver


#: CPU time of the calling thread: on a shared machine (load 6-15 on 2 cores) a call of a few
#: milliseconds is nearly always preempted, which wall time would count; the host code is
#: single-threaded (numpy without BLAS here, the numba kernel in the caller's thread), so on an
#: idle machine its wall time is this.
_now = time.thread_time


class _Clock:
    def __init__(self):
        self.inside = 0.0
        self.accesses = 0


class _TimedMmio(Mmio):
    def __init__(self, inner, clock):
        self._inner, self._clock = inner, clock

    def read32(self, offset):
        self._clock.accesses += 1
        t = _now()
        try:
            return self._inner.read32(offset)
        finally:
            self._clock.inside += _now() - t

    def write32(self, offset, value):
        self._clock.accesses += 1
        t = _now()
        try:
            self._inner.write32(offset, value)
        finally:
            self._clock.inside += _now() - t


class _TimedMemory(MemoryPort):
    def __init__(self, inner, clock):
        self._inner, self._clock = inner, clock
        self.bytes = 0

    def write(self, offset, data):
        t = _now()
        try:
            self._inner.write(offset, data)
            self.bytes += memoryview(data).nbytes      # bytes, or a uint8 image array
        finally:
            self._clock.inside += _now() - t

    def read(self, offset, nbytes):
        t = _now()
        try:
            data = self._inner.read(offset, nbytes)
            self.bytes += nbytes
            return data
        finally:
            self._clock.inside += _now() - t


class TimedDevice(Device):
    """``inner`` with the wall time spent inside it added up in :attr:`inside` (seconds)."""

    def __init__(self, inner):
        self._inner, self._clock = inner, _Clock()
        super().__init__(_TimedMmio(inner.control, self._clock),
                         _TimedMemory(inner.memory, self._clock))
        self.has_interrupt = inner.has_interrupt

    @property
    def inside(self):
        return self._clock.inside

    @property
    def accesses(self):
        return self._clock.accesses

    def _timed(self, f, *args):
        t = _now()
        try:
            return f(*args)
        finally:
            self._clock.inside += _now() - t

    def wait_interrupt(self, timeout):
        return self._timed(self._inner.wait_interrupt, timeout)

    def time(self):
        return self._inner.time()

    def sleep(self, seconds):
        return self._timed(self._inner.sleep, seconds)


def _host_time(dev, call):
    """``(host seconds, bus bytes, register accesses)`` of one ``call()``."""
    before, nbytes, regs = dev.inside, dev.memory.bytes, dev.accesses
    t = _now()
    call()
    spent = _now() - t
    return spent - (dev.inside - before), dev.memory.bytes - nbytes, dev.accesses - regs


# -- the cases ------------------------------------------------------------------------------------
def gae_cases(rng):
    """``(name, device, call, device cycles)`` of GaeDriver.compute on the shipped layouts."""
    out = []
    for module in ("gae_accel_n8", "gae_accel_n64", "gae_kernel_n8"):
        _, cfg = shipped_config(module)
        accel = cfg.accel if module.startswith("gae_kernel") else cfg
        for T, M in ((1024, 64), (128, 8)):
            dev = TimedDevice(GoldenDevice(accel))
            drv = GaeDriver(dev, accel)
            r = rng.normal(size=(T, M))
            v = rng.normal(size=(T, M))
            d = rng.random((T, M)) < 0.02
            last = rng.normal(size=M)
            if module.startswith("gae_kernel"):
                cycles = gae_spec.kernel_run_cycles(cfg, T, M, latency=0, returns=False)
            else:
                cycles = gae_spec.run_cycles(accel, T, M)
            out.append((f"{module} compute {M}x{T}", dev,
                        lambda drv=drv, r=r, v=v, d=d, last=last:
                        drv.compute(r, v, d, last, 0.99, 0.95), cycles))
    return out


def replay_cases(rng, B=256):
    out = []
    for module in ("replay_accel_k16", "replay_kernel_k16"):
        _, cfg = shipped_config(module)
        tree = getattr(cfg, "accel", cfg)
        dev = TimedDevice(ReplayGoldenDevice(tree))
        drv = ReplayDriver(dev, tree)
        drv.insert(rng.random(tree.capacity // 4) + 0.1)
        idx = rng.integers(0, tree.capacity // 4, B)
        pri = rng.random(B) + 0.1
        op = replay_spec.ReplayOp
        out += [
            (f"{module} insert B={B}", dev, lambda drv=drv, p=pri: drv.insert(p),
             replay_spec.run_cycles(tree, op.INSERT, B)),
            (f"{module} sample B={B}", dev, lambda drv=drv: drv.sample(B, 0.4),
             replay_spec.run_cycles(tree, op.SAMPLE, B)),
            (f"{module} update B={B}", dev, lambda drv=drv, i=idx, p=pri: drv.update(i, p),
             replay_spec.run_cycles(tree, op.UPDATE, B)),
            (f"{module} update_and_sample B={B}", dev,
             lambda drv=drv, i=idx, p=pri: drv.update_and_sample(i, p, B, 0.4),
             replay_spec.run_cycles(tree, op.UPDATE_SAMPLE, B, B)),
        ]
    return out


def learner_cases(rng):
    out = []
    for module in ("learner_cartpole_s4", "learner_kernel_s4"):
        _, cfg = shipped_config(module)
        lc = getattr(cfg, "accel", cfg)
        dev = TimedDevice(LearnerGoldenDevice(lc))
        drv = LearnerDriver(dev, lc)
        ws = [rng.normal(scale=0.3, size=(a, b)) for a, b in zip(lc.sizes[:-1], lc.sizes[1:])]
        bs = [np.zeros(b) for b in lc.sizes[1:]]
        out.append((f"{module} load_weights", dev,
                    lambda drv=drv, ws=ws, bs=bs: drv.load_weights(ws, bs), 0))
        drv.load_weights(ws, bs)
        for B in (32, 64):
            obs = rng.normal(size=(B, lc.sizes[0]))
            nxt = rng.normal(size=(B, lc.sizes[0]))
            act = rng.integers(0, lc.sizes[-1], B)
            rew = np.ones(B)
            done = rng.random(B) < 0.05
            out.append((f"{module} train_step B={B}", dev,
                        lambda drv=drv, o=obs, a=act, r=rew, n=nxt, d=done:
                        drv.train_step(o, a, r, n, d, gamma=0.99, lr=1e-3),
                        step_cycles(lc, B)))
        out.append((f"{module} read_weights", dev, lambda drv=drv: drv.read_weights(), 0))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--clock", type=float, default=300e6)
    ap.add_argument("--profile", help="print the cProfile of the case whose name contains this")
    ap.add_argument("--only", help="run only the cases whose name contains this")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    warnings.simplefilter("ignore")
    cases = gae_cases(rng) + replay_cases(rng) + learner_cases(rng)
    if args.only:
        cases = [c for c in cases if args.only in c[0]]
    if args.profile:
        name, dev, call, _ = next(c for c in cases if args.profile in c[0])
        call()
        prof = cProfile.Profile(_now)
        prof.runcall(call)
        print(name)
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
        return
    for _, _, call, _ in cases:                        # warm up (numba compiles once)
        call()
    best = {c[0]: (float("inf"), 0, 0) for c in cases}
    for _ in progress_bar(range(args.repeats), desc="rounds"):  # interleaved rounds
        for name, dev, call, _ in cases:
            host, nbytes, regs = _host_time(dev, call)
            best[name] = (min(best[name][0], host), nbytes, regs)
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; best of {args.repeats}; "
          f"device modeled at {args.clock / 1e6:g} MHz")
    print("| call | host µs | device µs | host / device | ≤ 25 % | bus bytes | registers |")
    print("|---|---:|---:|---:|:-:|---:|---:|")
    for name, _, _, cycles in cases:
        host, nbytes, regs = best[name]
        dev_us = cycles / args.clock * 1e6
        ratio = host * 1e6 / dev_us if dev_us else float("inf")
        ok = "yes" if ratio <= 0.25 else "no"
        dev_s = f"{dev_us:,.2f}" if cycles else "–"
        ratio_s = f"{ratio:,.1f}" if cycles else "–"
        print(f"| {name} | {host * 1e6:,.0f} | {dev_s} | {ratio_s} | "
              f"{ok if cycles else '–'} | {nbytes:,} | {regs} |")


if __name__ == "__main__":
    main()
