"""The trainer driver's sessions for the RTL tests: :func:`session` is blocking driver code
whose every launch and register value follows from its own calls (records are appended only
while no launch runs), so the Verilated accelerator and the golden device must return the same
transcript bit for bit; :func:`concurrent` appends while a launch runs, where the boundaries
that see each doorbell depend on timing, and returns what must hold on any device."""

import warnings

import numpy as np

from sw.trainer.layout import record_bytes, region_base, storage_bytes

from .core_bench import small_config

#: The accelerator of the RTL tests: core_bench's small trainer (4-8-2 learner on 2 x 2 units,
#: 16 samples, a 4-ary tree of 256 leaves, a window of 16, delay 1), 128-bit storage port.
SIM_CONFIG = small_config()
SEED = 20261207
HYPER = dict(lr=0.05, gamma=0.9, alpha=0.6, beta=0.4, eps=1e-3, sync_period=5,
             snapshot_period=4, trace_period=3)


class HostBuffer(np.ndarray):
    """A fake ``pynq.allocate`` buffer: the host's copy; ``flush`` hands it to the device's side
    (a golden device's storage), ``invalidate`` takes the device's writes back, each logged."""

    def bind(self, device_bytes, log, **addresses):
        """The buffer on ``device_bytes``, logging to ``log``, with ``addresses`` (PYNQ's
        ``device_address`` or ``physical_address``) as attributes."""
        self.device_bytes, self.log = device_bytes, log
        for name, value in addresses.items():
            setattr(self, name, value)
        return self

    def flush(self):
        self.log.append("flush")
        self.device_bytes[:] = self

    def invalidate(self):
        self.log.append("invalidate")
        self[:] = self.device_bytes


def transitions(n, seed):
    rng = np.random.default_rng(seed)
    obs = rng.normal(0, 0.7, (n, 4))
    return (obs, rng.integers(0, 2, n), rng.normal(0.3, 0.5, n),
            obs + rng.normal(0, 0.2, (n, 4)), rng.random(n) < 0.1)


def _driver(device, config):
    from sw.trainer.driver import TrainerDriver
    drv = TrainerDriver(device, config, seed=SEED & 0xFFFF, timeout=0.05)
    drv.init_weights(1)
    return drv


def session(device, config=SIM_CONFIG, *, launches=12, steps=10) -> dict:
    """Insert, then ``launches`` launches of ``steps`` gradient steps with records appended
    between them (batch sizes 16 and 8 in turn, so the IS-weight divider changes); after each
    launch its status (CYCLES included), the counters, the trace and the newest snapshot's
    weights; at the end the whole storage."""
    from sw.trainer.driver import TrainerWarning

    drv = _driver(device, config)
    out = {"inserted": [drv.insert(*transitions(40, 0))], "launches": []}
    for i in range(launches):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TrainerWarning)
            st = drv.train(steps, batch=16 if i % 2 == 0 else 8, **HYPER)
        stats = drv.stats()
        out["launches"].append({"status": dict(st), "trace": stats.pop("trace").tolist(),
                                **stats, "weights": [w.tolist() for w in drv.raw_weights()]})
        out["inserted"].append(drv.insert(*transitions(3 + i % 4, i + 1)))
    out["storage"] = bytes(device.memory.read(0, storage_bytes(config)))
    return out


def compare(rtl, gold, *, cycles=True):
    """Two :func:`session` transcripts are equal (CYCLES too unless ``cycles`` is False)."""
    assert rtl["inserted"] == gold["inserted"]
    assert len(rtl["launches"]) == len(gold["launches"])
    for i, (a, b) in enumerate(zip(rtl["launches"], gold["launches"])):
        sa, sb = dict(a["status"]), dict(b["status"])
        if not cycles:
            sa.pop("CYCLES"), sb.pop("CYCLES")
        assert sa == sb, (i, sa, sb)
        for key in b:
            if key != "status":
                assert a[key] == b[key], (i, key)
    if rtl["storage"] != gold["storage"]:
        diff = np.flatnonzero(np.frombuffer(rtl["storage"], np.uint8)
                              != np.frombuffer(gold["storage"], np.uint8))
        raise AssertionError(f"storage differs at {len(diff)} bytes from {diff[0]:#x}")


def concurrent(device, config=SIM_CONFIG, *, appends=30) -> dict:
    """A launch until STOP while the host appends ``appends`` small batches (waiting whenever
    the window is full; an AP_START written meanwhile is refused), then STOP, a new launch that takes the last doorbell, and a check
    that every record reached the ring unchanged and was inserted (nothing lost, no
    OVERRUN)."""
    from sw.trainer.driver import TrainerWarning

    drv = _driver(device, config)
    total = drv.insert(*transitions(32, 100))
    drv.start(0, batch=16, **HYPER)
    drv.register_map.CTRL.AP_START = 1                # during the launch: dropped, flagged
    refused = drv.register_map.STATUS.START_REFUSED
    for i in range(appends):
        total += drv.insert(*transitions(1 + i % 5, 200 + i))
    st = drv.stop()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TrainerWarning)
        again = drv.train(2, batch=16, **HYPER)
    stats = drv.stats()
    rb = record_bytes(config)
    ring = bytes(device.memory.read(region_base(config, "ring"), total * rb))
    want = b"".join(drv._records(*transitions(n, s)).tobytes() for n, s in
                    [(32, 100)] + [(1 + i % 5, 200 + i) for i in range(appends)])
    return {"stopped": st, "again": again, "stats": stats, "total": total,
            "produced": drv.produced, "ring_ok": ring == want, "refused": refused}


def check_concurrent(res):
    """What :func:`concurrent` must show on any device."""
    st, again, stats = res["stopped"], res["again"], res["stats"]
    assert res["refused"] == 1, "AP_START during a launch was not flagged START_REFUSED"
    assert st["STOPPED"] == 1 and st["STEPS_DONE"] >= 1 and st["OVERRUN"] == 0, st
    assert again["STOPPED"] == 0 and again["STEPS_DONE"] == 2, again
    assert res["produced"] == res["total"] == stats["consumed"], res
    assert stats["steps_total"] == st["STEPS_DONE"] + 2
    assert res["ring_ok"], "a record in the ring is not the one the host wrote"


def start_long(device, config=SIM_CONFIG):
    """Insert and start a launch until STOP (for a reset in the middle of it)."""
    drv = _driver(device, config)
    drv.insert(*transitions(40, 300))
    drv.start(0, batch=16, **HYPER)
    return drv


def after_reset(device, config=SIM_CONFIG) -> dict:
    """What a host sees after ``ap_rst_n`` pulsed during a launch (the spec: the launch
    abandoned, tree and counters cleared, registers at their reset values), and that a new
    driver can insert and train again."""
    from sw.trainer.driver import TrainerDriver
    drv = TrainerDriver(device, config, seed=1, timeout=0.05)
    rm = drv.register_map
    seen = {"idle": drv._idle(), **{n: rm.read_word(n) for n in (
        "CONSUMED", "STEPS_TOTAL", "STEPS_DONE", "SNAPSHOT_SEQ", "TRACE_COUNT", "PRODUCER",
        "STOP", "STEPS", "BATCH_SIZE")}}
    drv.init_weights(2)
    drv.insert(*transitions(20, 400))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        st = drv.train(3, batch=16, **HYPER)
    return {"seen": seen, "status": st, "stats": {k: v for k, v in drv.stats().items()
                                                  if k != "trace"}}


def check_after_reset(res):
    seen = res["seen"]
    assert seen.pop("idle"), "the launch still runs after the reset"
    assert all(v == 0 for v in seen.values()), seen
    assert res["status"]["STEPS_DONE"] == 3 and res["status"]["ERROR"] == 0, res["status"]
    assert res["stats"]["consumed"] == 20 and res["stats"]["steps_total"] == 3, res["stats"]
