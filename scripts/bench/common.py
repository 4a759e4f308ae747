"""What every benchmark of ``scripts/bench_e2e.py`` shares: the row format, the timing helpers,
the bus models, the clock and the device stub's traffic turned into time.

A block's module in ``scripts/bench/`` exposes ``rows(quick: bool, env: Env) -> list[dict]``
and builds each row with :meth:`Env.row`. End to end means (``docs/benchmarks.md``):

* ``host_us``: the driver's own host time, timed on this CPU with
  :class:`sw.driver.stub.InstantDevice`, a device whose runs end the moment they start;
* ``bus_us``: what the call moved (the stub's :class:`~sw.driver.stub.TrafficCounter`) through
  a :class:`BusModel`: bytes over its bandwidth, a fixed latency per transfer and per register
  access, and a fixed launch latency per run;
* ``kernel_us``: exact cycles from the block's cycle model at :meth:`Env.clock`;
* ``baseline_us``: the strongest CPU code measured in the same process (interleaved rounds,
  best of at least 5: :meth:`Env.best_of`); the host time is timed in the same rounds;
* ``total_us = host_us + bus_us + kernel_us`` unless the row says what overlaps, and
  ``speedup = baseline_us / total_us``.
"""

import math
import os
import time
from dataclasses import dataclass

from sw.driver.xrt_device import PCIE_BYTES_PER_S, TRANSFER_S

__all__ = ["ROW_KEYS", "BusModel", "ALVEO_PCIE", "ZCU106_HPM", "BUSES", "DDR_LATENCY",
           "window_copy_cycles", "Env", "load_average", "numba_or_none", "traffic_of"]

#: Keys of a row, in the order the table prints them.
ROW_KEYS = ("block", "config", "shape", "baseline", "baseline_us", "host_us", "bus_us",
            "kernel_us", "total_us", "speedup")


@dataclass(frozen=True)
class BusModel:
    """Time a host <-> accelerator exchange takes on a bus (every figure stated, none measured
    here: there is no board on this machine).

    Parameters
    ----------
    name : str
    write_bytes_per_s, read_bytes_per_s : float
        Effective bandwidth of bulk transfers host -> accelerator and back.
    transfer_us : float
        Fixed cost of one memory transfer (one ``MemoryPort.write`` or ``read``), whatever its
        size: on Alveo the buffer sync and the window shell's copy command.
    reg_read_us, reg_write_us : float
        One 32-bit register read (a non-posted round trip) and write (posted).
    launch_us : float
        The fixed per-call launch latency: per run started, the time from the AP_START write
        to the kernel starting plus from its end to the host seeing AP_DONE, beyond the
        register accesses already counted.
    why : str
        Where the figures come from (printed beside the results).
    """
    name: str
    write_bytes_per_s: float
    read_bytes_per_s: float
    transfer_us: float
    reg_read_us: float
    reg_write_us: float
    launch_us: float
    why: str

    def time_us(self, traffic) -> float:
        """Microseconds of the exchanges counted in ``traffic`` (a
        :class:`~sw.driver.stub.TrafficCounter` or its ``as_dict()``)."""
        t = traffic if isinstance(traffic, dict) else traffic.as_dict()
        return (t["bytes_written"] / self.write_bytes_per_s * 1e6
                + t["bytes_read"] / self.read_bytes_per_s * 1e6
                + (t["writes"] + t["reads"]) * self.transfer_us
                + t["reg_reads"] * self.reg_read_us + t["reg_writes"] * self.reg_write_us
                + t["starts"] * self.launch_us)


#: Alveo U200/U250 in an x86 server, PCIe Gen3 x16, driven through
#: :class:`sw.driver.xrt_device.XrtDevice` (register access through pyxrt, one buffer synced
#: and copied by the window shell per transfer).
ALVEO_PCIE = BusModel(
    "PCIe Gen3 x16 (Alveo, XRT)", PCIE_BYTES_PER_S, PCIE_BYTES_PER_S,
    transfer_us=TRANSFER_S * 1e6,
    reg_read_us=2.0, reg_write_us=1.0, launch_us=2.0,
    why="12 GB/s effective each way (of 15.75 GB/s raw); per transfer 10 us for "
        "the XRT buffer sync (an ioctl, pinning, one XDMA descriptor round trip and its "
        "completion) plus the window shell's copy command (3 register writes, 2 reads: "
        "DMA_STATUS, DMA_CYCLES), so 17 us (sw.driver.xrt_device.TRANSFER_S: the "
        "driver moves blocks closer than the bytes of that time as one transfer); a "
        "register read 2 us (a syscall and a "
        "non-posted PCIe round trip of ~1 us), a write 1 us (posted); launch 2 us per run "
        "(AP_START reaching the kernel, AP_DONE seen by a busy poll one round trip after "
        "the end). Assumed from PCIe and XRT's design, not measured: no card here")

#: ZCU106: the PS and the PL on one chip. The accelerators' memory is an AXI4 *slave*
#: (``s_axi_mem``), so :class:`sw.driver.pynq_device.PynqDevice` moves data with CPU loads
#: and stores through M_AXI_HPM0_FPD, not a DMA through an S_AXI_HP port.
ZCU106_HPM = BusModel(
    "ZCU106 M_AXI_HPM0_FPD (PYNQ MMIO)", 400e6, 40e6, transfer_us=1.0,
    reg_read_us=0.2, reg_write_us=0.05, launch_us=0.5,
    why="CPU programmed I/O from the A53s into the PL's s_axi_mem over the 128-bit HPM0 "
        "port: posted 16-byte stores at ~400 MB/s, reads one non-posted 4-byte word "
        "(~100 ns) at a time, ~40 MB/s; 1 us per transfer (mmap'd window, Python call); "
        "AXI4-Lite register read 0.2 us, posted write 0.05 us; launch 0.5 us. Assumed, no "
        "board here; an S_AXI_HP DMA (128 bit at 300 MHz, ~2.4 GB/s at 50 % efficiency) "
        "would need an AXI DMA in the block design, which the shipped design has not")

#: The bus models by the name a board's entry in the board table gives its host link
#: (:attr:`sw.boards.Board.host_bus`).
BUSES = {"alveo": ALVEO_PCIE, "zcu106": ZCU106_HPM}


#: Cycles device memory (DDR4 behind the Alveo shell) takes to answer a burst request, for the
#: window shell's copies (:func:`sw.shell.spec.copy_cycles`): ~210 ns at 300 MHz (assumed).
DDR_LATENCY = 64


def window_copy_cycles(config, traffic) -> int:
    """Kernel cycles of the window shell's copies of every transfer counted in ``traffic`` on
    the window kernel ``config`` (a :class:`~sw.shell.spec.DmaParams`): each transfer widened
    to whole window words, :func:`sw.shell.spec.copy_cycles` at :data:`DDR_LATENCY`."""
    from sw.shell.spec import copy_cycles
    wb = config.window_word_bits // 8
    return sum(copy_cycles(-(-n // wb) * wb, wb, latency=DDR_LATENCY, to_device=kind == "read")
               for kind, _, n in traffic.transfers)


def load_average() -> str:
    """The 1-, 5- and 15-minute load averages, formatted."""
    try:
        return "{:.2f}, {:.2f}, {:.2f}".format(*os.getloadavg())
    except OSError:                                  # pragma: no cover - not on Linux
        return "n/a"


def numba_or_none():
    """The ``numba`` module, or None if it is not installed (a bench dependency)."""
    try:
        import numba
    except ImportError:
        return None
    return numba


def _calls_per_round(fn, min_round_s):
    """How many calls of ``fn`` make a round of at least ``min_round_s`` (1 for slow calls)."""
    t0 = time.perf_counter()
    fn()
    dt = time.perf_counter() - t0
    return max(1, min(100_000, math.ceil(min_round_s / max(dt, 1e-9))))


class Env:
    """What the benchmark framework gives a block's ``rows``.

    Members
    -------
    quick : bool
        ``--quick``: fewer rounds (still at least 5) and smaller shapes where a block has them.
    rounds : int
        Rounds of :meth:`best_of`.
    buses : dict
        Name -> :class:`BusModel` (:data:`BUSES`).
    numba : module or None
    progress : callable
        ``tqdm``-like wrapper for loops a user waits for.
    """

    def __init__(self, *, quick=False, rounds=None, progress=None):
        self.quick = quick
        self.rounds = max(5, rounds if rounds is not None else (5 if quick else 9))
        self.buses = dict(BUSES)
        self.numba = numba_or_none()
        if progress is None:
            from sw.console import progress_bar as progress
        self.progress = progress
        self.assumptions = {}

    def clock(self, module: str):
        """``(Hz, label)`` of a shipped module's clock: :func:`sw.timing.clock_mhz`, that is
        ``min(300 MHz, the estimated Fmax of make timing)`` (docs/timing.md)."""
        from sw.timing import clock_mhz
        mhz, label = clock_mhz(module)
        self.assumptions[f"clock ({module})"] = (
            f"{mhz:.0f} MHz {label}" + (" (Yosys + the delay model of docs/timing.md, not "
                                        "Vivado)" if label == "estimated" else ""))
        return mhz * 1e6, label

    def bus(self, name: str) -> BusModel:
        """A bus model by name; its assumptions are printed with the results."""
        model = self.buses[name]
        self.assumptions[f"bus: {model.name}"] = model.why
        return model

    def note(self, key: str, text: str):
        """An assumption or remark printed beside the table."""
        self.assumptions[key] = text

    def best_of(self, fns: dict, *, desc="timing", min_round_s=0.002) -> dict:
        """Best time per call, in microseconds, of each callable of ``fns`` (name -> fn).

        Every round calls every contender (in turn, so load from other processes hits them
        alike); a contender faster than ``min_round_s`` is called enough times in a row to
        fill a round and its per-call mean counts. The best of :attr:`rounds` rounds is
        returned.
        """
        reps = {name: _calls_per_round(fn, min_round_s) for name, fn in fns.items()}
        best = dict.fromkeys(fns, math.inf)
        for _ in self.progress(range(self.rounds), desc=desc, leave=False):
            for name, fn in fns.items():
                n = reps[name]
                t0 = time.perf_counter()
                for _ in range(n):
                    fn()
                dt = (time.perf_counter() - t0) / n
                best[name] = min(best[name], dt)
        return {name: t * 1e6 for name, t in best.items()}

    def kernel_row(self, *, block, module, config, shape, baselines: dict, host_us, traffic,
                   run_cycles, bus="alveo") -> dict:
        """The row of one call of a driver on the shipped window kernel ``module`` against the
        strongest of ``baselines`` (name -> us, all listed in the notes).

        ``traffic``: what the call moved (:func:`traffic_of`); ``run_cycles``: the
        accelerator's cycles for the call from its cycle model. ``kernel_us`` adds the window
        shell's copies of those transfers (:func:`window_copy_cycles`) at :meth:`clock`;
        ``bus_us`` is ``traffic`` through the bus model ``bus``.
        """
        from sw.registry import shipped_config
        _, kcfg = shipped_config(module)
        hz, _ = self.clock(module)
        copies = window_copy_cycles(kcfg, traffic)
        name = min(baselines, key=baselines.get)
        self.note(f"{block} {shape}",
                  "baselines " + ", ".join(f"{k} {v:,.1f} us" for k, v in baselines.items())
                  + f"; accelerator: {run_cycles:,} run + {copies:,} copy cycles, "
                  f"{traffic.writes} writes ({traffic.bytes_written:,} B), {traffic.reads} "
                  f"reads ({traffic.bytes_read:,} B), {traffic.reg_writes + traffic.reg_reads}"
                  f" register accesses, {traffic.starts} runs")
        return self.row(block=block, config=config, shape=shape, baseline=name,
                        baseline_us=baselines[name], host_us=host_us,
                        bus_us=self.bus(bus).time_us(traffic),
                        kernel_us=(run_cycles + copies) / hz * 1e6)

    @staticmethod
    def row(*, block, config, shape, baseline, baseline_us, host_us, bus_us, kernel_us,
            total_us=None) -> dict:
        """One result row (:data:`ROW_KEYS`). ``total_us`` defaults to the sum of the host,
        bus and kernel times (pass it when parts overlap)."""
        if total_us is None:
            total_us = host_us + bus_us + kernel_us
        r = {"block": block, "config": config, "shape": shape, "baseline": baseline,
             "baseline_us": float(baseline_us), "host_us": float(host_us),
             "bus_us": float(bus_us), "kernel_us": float(kernel_us),
             "total_us": float(total_us)}
        r["speedup"] = r["baseline_us"] / r["total_us"] if r["total_us"] > 0 else math.inf
        return r

    @staticmethod
    def refused(*, block, config, shape, baseline, baseline_us, why) -> dict:
        """A row for a shape the accelerator refuses: ``why`` (the driver's error) in
        ``config``, the accelerator's times and the speedup None (``null`` in the JSON)."""
        return {"block": block, "config": f"{config}; REFUSED: {why}", "shape": shape,
                "baseline": baseline,
                "baseline_us": None if baseline_us is None else float(baseline_us),
                "host_us": None, "bus_us": None, "kernel_us": None, "total_us": None,
                "speedup": None}


def traffic_of(device, fn, before=None):
    """Call ``fn()`` once with ``device``'s (an :class:`~sw.driver.stub.InstantDevice`)
    counter reset, after ``before()`` (default ``fn``: the steady state of repeated calls,
    whose argument registers are written only when they change); returns a copy of what it
    counted."""
    from sw.driver.stub import TrafficCounter
    (before or fn)()
    device.traffic.reset()
    fn()
    t = device.traffic
    return TrafficCounter(**t.as_dict(), transfers=list(t.transfers))
