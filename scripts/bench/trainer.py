"""The fused DQN trainer: gradient steps per second (GPS) end to end against the strongest CPU
trainer step (``scripts/bench/trainer_cpu.py``: numba, numpy, torch + cpprb, timed in this
process).

One *launch iteration* is what the host does per launch of M gradient steps in
:mod:`sw.rl.dqn_trainer`: append ``inserts · M`` transitions (:meth:`TrainerDriver.insert`),
run the launch (:meth:`TrainerDriver.train`) and read the newest weight snapshot
(:meth:`TrainerDriver.weights`). Its time is

* ``host_us``: the driver's own code on this CPU, against a register stub whose launches end at
  once and whose CONSUMED follows PRODUCER (the steady state: the card took every record
  announced);
* ``bus_us``: what that iteration moved (register accesses, the records written, the snapshot
  read, one launch) through a stated bus model (:data:`BUSES`);
* ``kernel_us``: the cycles of the M steps with their inserts and the end snapshot on the
  sequential trainer core (:func:`sw.trainer.schedule.sequential_launch_cycles`, what CYCLES
  of the shipped accelerators reads: tested cycle for cycle in Verilator; here at a memory
  read latency of 64 cycles), at ``min(300 MHz, the estimated Fmax)`` of the configuration's
  module (``dqn_trainer_zcu106``, ``dqn_trainer_u250``; 300 MHz assumed for the
  configurations not generated); the notes give the overlapped design's cycles too
  (:func:`sw.trainer.schedule.launch_cycles`, not built).

The rows say *modeled*: the device time is the cycle model, not a board. A row compares one
gradient step: ``baseline_us`` is the best CPU trainer step, ``total_us`` the iteration's time
divided by M, so ``speedup`` is the GPS ratio.
"""

from dataclasses import replace

import numpy as np

from bench.common import ALVEO_PCIE, BusModel, traffic_of
from sw.timing import TARGET_MHZ

__all__ = ["BUSES", "rows", "launch_iteration"]

#: The trainer reaches its storage through an AXI4 master: the host writes records into device
#: memory without a window copy.
BUSES = {
    "zcu106": BusModel(
        "ZCU106 PS DDR shared with the PL (pynq.allocate, zero copy)", 1.0e9, 0.25e9,
        transfer_us=1.0, reg_read_us=0.2, reg_write_us=0.05, launch_us=0.5,
        why="the A53 writes records with memcpy into a non-cacheable CMA buffer that the "
            "trainer reads over S_AXI_HP: ~1 GB/s stores, ~0.25 GB/s uncached loads for the "
            "snapshot; 1 us per transfer (Python call, buffer bookkeeping); registers and "
            "launch as the ZCU106 HPM model. Assumed, no board here"),
    "alveo": BusModel(
        "PCIe Gen3 x16 (Alveo, XRT), trainer kernel", ALVEO_PCIE.write_bytes_per_s,
        ALVEO_PCIE.read_bytes_per_s, transfer_us=10.0, reg_read_us=ALVEO_PCIE.reg_read_us,
        reg_write_us=ALVEO_PCIE.reg_write_us, launch_us=ALVEO_PCIE.launch_us,
        why="as the Alveo model, but 10 us per transfer: the XRT buffer sync alone (the "
            "trainer reads device memory itself, no window-shell copy)"),
}

#: (configuration, bus, inserts per gradient step) of each row group.
CONFIGS = (("trainer_zcu106", "zcu106", (0, 1, 4)), ("trainer_u250", "alveo", (0, 1, 4)),
           ("trainer_zcu106_dse", "zcu106", (1,)), ("trainer_u250_dse", "alveo", (1,)),
           ("trainer_lunarlander", "alveo", (1,)))
#: Gradient steps per launch, batch.
STEPS, BATCH = 100, 64
#: Replay capacity instead of the configuration's (None; the framework's test sets a small one).
CAPACITY = None


def _stub(config):
    """An InstantDevice of the trainer whose CONSUMED reads the last PRODUCER written and whose
    snapshot slot 1 holds a whole snapshot of sequence number 1."""
    from sw.driver.stub import InstantDevice
    from sw.trainer.layout import HEADER_BYTES, region_base, storage_bytes
    from sw.trainer.spec import hw_info_values, trainer_register_map

    rm = trainer_register_map(config)
    dev = InstantDevice(rm, hw_info_values(config), storage_bytes(config), store=True)
    producer, consumed = rm.offset("PRODUCER"), rm.offset("CONSUMED")
    control = dev.control
    read32 = control.read32

    def read(offset):
        if offset == consumed:
            dev.traffic.reg_reads += 1
            return dev._regs.get(producer, 0)
        return read32(offset)
    control.read32 = read
    dev.answer("SNAPSHOT_SEQ", 1)
    dev.answer("STEPS_DONE", STEPS)
    dev.image[region_base(config, "snap1"):][:4] = np.array([1], "<u4").view(np.uint8)
    assert HEADER_BYTES >= 8
    return dev


def launch_iteration(driver, records, hyper):
    """The host's work per launch (module docstring)."""
    def run():
        if records is not None:
            driver.insert(*records)
        driver.train(STEPS, **hyper)
        driver.weights()
    return run


def steady_launch(config, steps, batch, inserts):
    """The boundaries of a launch in the steady state (one batch queued by the previous
    launch; the host's ``steps·inserts`` records taken a window at a time from the first
    boundary on), for :func:`sw.trainer.schedule.sequential_launch_cycles`."""
    bounds, queued, left = [], 1, steps * inserts
    for i in range(steps + 1):
        w = batch if queued > config.delay else 0
        queued -= bool(w)
        k = min(left, config.append_window)
        left -= k
        step = {"batch": batch} if i < steps else None
        queued += step is not None
        bounds.append((w, k, step))
    return bounds


def _records(config, n, rng):
    n_in, n_out = config.learner.sizes[0], config.learner.sizes[-1]
    return (rng.uniform(-1, 1, (n, n_in)).astype(np.float32), rng.integers(0, n_out, n),
            np.full(n, 0.1, np.float32), rng.uniform(-1, 1, (n, n_in)).astype(np.float32),
            rng.random(n) < 0.05)


def rows(quick: bool, env) -> list:
    """GPS rows for each trainer configuration and inserts per step (module docstring)."""
    from bench.trainer_cpu import time_trainers

    from sw.trainer.configs import TRAINERS, trainer_config
    from sw.trainer.driver import TrainerDriver
    from sw.trainer.schedule import launch_cycles, sequential_launch_cycles

    rng = np.random.default_rng(0)
    hyper = dict(batch=BATCH, lr=0.02, sync_period=250)
    out = []
    for name, bus_name, inserts in CONFIGS:
        cfg = trainer_config(name)
        if CAPACITY is not None:
            cfg = replace(cfg, tree=replace(cfg.tree, capacity=CAPACITY),
                          append_window=min(cfg.append_window, CAPACITY // 2))
        module = TRAINERS[name][3]
        if module is None:
            hz, label = TARGET_MHZ * 1e6, "assumed"
            env.note(f"clock ({name})",
                     f"{TARGET_MHZ} MHz assumed: the target; no timing estimate")
        else:
            hz, label = env.clock(module)
        bus = BUSES[bus_name]
        env.note(f"bus: {bus.name}", bus.why)
        for ins in inserts:
            base = time_trainers(env, sizes=cfg.learner.sizes, capacity=cfg.capacity,
                                 batch=BATCH, inserts=ins)
            best = min(base, key=base.get)
            dev = _stub(cfg)
            drv = TrainerDriver(dev, cfg)
            drv.init_weights(0)
            run = launch_iteration(drv, _records(cfg, STEPS * ins, rng) if ins else None,
                                   hyper)
            host = env.best_of({"host": run}, desc=f"{name} host")["host"]
            traffic = traffic_of(dev, run)
            cycles = sequential_launch_cycles(cfg, steady_launch(cfg, STEPS, BATCH, ins),
                                              final_snapshot=True)
            overlapped = launch_cycles(cfg, STEPS, BATCH, inserts_per_step=ins)
            kernel_us = cycles / hz * 1e6
            bus_us = bus.time_us(traffic)
            share = host / kernel_us
            env.note(f"trainer {name} inserts {ins}",
                     "CPU trainer step " + ", ".join(f"{k} {v:,.1f} us" for k, v in
                                                     base.items())
                     + f"; per launch of {STEPS} steps: host {host:,.1f} us ({share:.1%} of "
                     f"the modeled device time), bus {bus_us:,.1f} us, {cycles:,} cycles of "
                     f"the sequential core ({overlapped:,} overlapped, not built) at "
                     f"{hz / 1e6:.0f} MHz ({label}); {traffic.reg_reads} "
                     f"register reads, {traffic.reg_writes} writes, {traffic.bytes_written:,}"
                     f" B written, {traffic.bytes_read:,} B read")
            clock = (f"{hz / 1e6:.0f} MHz, {module}'s {label} clock" if module
                     else f"{TARGET_MHZ} MHz assumed")
            config = (f"{name} ({TRAINERS[name][1]}; {clock}), M={STEPS}, "
                      f"modeled cycles (sequential core); host {share:.1%} of device time")
            shape = f"GPS B={BATCH} 2^{cfg.capacity.bit_length() - 1} inserts={ins}/step"
            out.append(env.row(block="trainer", config=config, shape=shape, baseline=best,
                               baseline_us=base[best], host_us=host / STEPS,
                               bus_us=bus_us / STEPS, kernel_us=kernel_us / STEPS))
            if "torch+cpprb" in base:
                out.append(env.row(block="trainer", config=config + "; vs what users write",
                                   shape=shape, baseline="torch+cpprb",
                                   baseline_us=base["torch+cpprb"], host_us=host / STEPS,
                                   bus_us=bus_us / STEPS, kernel_us=kernel_us / STEPS))
    return out
