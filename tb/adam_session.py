"""An Adam learner's session at the register and memory level: :func:`adam_session` loads
weights, target weights, moments (random, zeros and log_min among them), master-weight
residuals and batches through a
device's memory port, writes the step and ADAM_* registers, starts, waits and returns everything
observable (weights, residuals, moments, second-moment logarithms, STATUS, CYCLES, loss) after
each step.
Run on the Verilated RTL (tb/learner/test_adam_rtl.py) and on the golden device, the transcripts
must be identical; the golden transcript is also checked against the golden update itself.
:data:`ADAM` and :func:`golden_learner` serve the fast Adam tests (tb/learner/test_adam.py,
tb/learner/test_adam_accuracy.py)."""

import numpy as np

#: A small DQN learner with Adam: 2 x 2 arrays, two 32-bit host words per weight word.
ADAM_SIM_CONFIG = {"sizes": [4, 8, 8, 2], "array": 2, "max_batch": 16, "sub_batch": 4,
                   "axi_data_width": 32, "optimizer": "adam"}
SEED = 20261207

#: The fast tests' Adam learner: DQN 4-16-16-2 on 4 x 4 arrays.
ADAM = {"sizes": [4, 16, 16, 2], "array": 4, "max_batch": 64, "sub_batch": 8,
        "optimizer": "adam"}


def golden_learner(params=ADAM, **kw):
    """``(driver, device)``: a :class:`~sw.learner.driver.LearnerDriver` (``kw``, its
    arguments) on the golden device of the learner ``params`` (a configuration dict)."""
    from sw.driver import LearnerDriver, LearnerGoldenDevice
    from sw.learner.spec import LearnerConfig

    cfg = LearnerConfig.from_dict(dict(params))
    dev = LearnerGoldenDevice(cfg)
    return LearnerDriver(dev, **kw), dev


def _write_matrix(device, cfg, name, raw):
    from sw.learner.layout import pack_matrix, region_base
    device.memory.write(region_base(cfg, name), pack_matrix(cfg, name, raw))


def _read_matrix(device, cfg, name, rows):
    from sw.learner.layout import region, region_base, unpack_matrix, word_bytes
    r = region(cfg, name)
    n = cfg.groups(rows) * r.col_groups(cfg) * word_bytes(cfg, name)
    return unpack_matrix(cfg, name, bytes(device.memory.read(region_base(cfg, name), n)), rows)


def _random_raw(rng, fmt, shape, scale):
    """Raw values of ``fmt`` around ``±scale`` (real units), clipped to the format."""
    x = np.round(rng.normal(0, scale, shape) * (1 << fmt.frac)).astype(np.int64)
    return np.clip(x, fmt.min_raw, fmt.max_raw)


def adam_session(device, config_dict=ADAM_SIM_CONFIG, steps=(16, 5, 12, 16, 9, 1)) -> dict:
    """Blocking device code (see the module docstring)."""
    from sw.learner.adam import ADAM_ARGS, ADAM_POWER, AdamHyper, adam_registers
    from sw.learner.layout import pack_samples, region_base
    from sw.learner.spec import LearnerConfig, learner_register_map

    cfg = LearnerConfig.from_dict(config_dict)
    num = cfg.numerics
    rmap = learner_register_map(cfg)
    ctrl = device.control
    rng = np.random.default_rng(SEED)
    L = cfg.n_layers
    shapes = num.weight_shapes()

    def wr(name, value):
        width = rmap[name].fields[0].width
        ctrl.write32(rmap[name].offset, int(value) & ((1 << width) - 1))

    def rd(name):
        return ctrl.read32(rmap[name].offset)

    for l, shp in enumerate(shapes):
        _write_matrix(device, cfg, f"w{l}", _random_raw(rng, num.weight_format, shp, 0.4))
        _write_matrix(device, cfg, f"tw{l}", _random_raw(rng, num.weight_format, shp, 0.4))
        # Moments from an earlier run: some zero, some log_min (v = 0), the rest random.
        mo = _random_raw(rng, num.moment_format, shp, 0.05)
        zero = rng.random(shp) < 0.2
        mo[zero] = 0
        lv = rng.integers(-8 << 16, 2 << 16, shp)
        lv[zero & (rng.random(shp) < 0.5)] = ADAM_POWER.log_min
        if l == 1:          # three states no Adam makes (m != 0, v = 0): updates saturate
            mo[0, :3] = 1 << num.moment_format.frac
            lv[0, :3] = ADAM_POWER.log_min
        res = rng.integers(-128, 128, shp)              # master weights' residuals
        if l == 0:
            mo[:] = 0
            lv[:] = ADAM_POWER.log_min                   # a fresh optimizer's state
            res[:] = 0
        _write_matrix(device, cfg, f"m{l}", mo)
        _write_matrix(device, cfg, f"v{l}", lv)
        _write_matrix(device, cfg, f"wl{l}", res)
    out = {"steps": []}
    hypers = [AdamHyper(lr=1e-3), AdamHyper(lr=3e-2, betas=(0.0, 0.99)),
              AdamHyper(lr=1e-2, eps=0.0), AdamHyper(lr=5e-3, betas=(0.5, 0.0), eps=1e-3)]
    for i, B in enumerate(steps):
        obs = _random_raw(rng, num.act_format, (B, cfg.sizes[0]), 1.0)
        nxt = _random_raw(rng, num.act_format, (B, cfg.sizes[0]), 1.0)
        # The last step: huge rewards, so that gradients and updates saturate.
        rscale = 20.0 if i == len(steps) - 1 else 0.5
        rewards = _random_raw(rng, num.act_format, B, rscale)
        _write_matrix(device, cfg, "obs", obs)
        _write_matrix(device, cfg, "next_obs", nxt)
        device.memory.write(region_base(cfg, "samples"), pack_samples(
            cfg, rng.integers(0, cfg.n_out, B), rewards, rng.random(B) < 0.2,
            rng.integers(0, 1 << num.loss_weight_format.frac, B) if i == 3 else None))
        regs = adam_registers(hypers[i % len(hypers)], i + 1, B)
        wr("BATCH_SIZE", B)
        wr("LR", 0)
        wr("GAMMA", int(0.95 * (1 << num.coef_format.frac)))
        wr("SYNC_TARGET", int(i == 2))
        wr("SYNC_PERIOD", 0)
        for name in ADAM_ARGS:
            wr(name, regs[name])
        ctrl.write32(rmap["CTRL"].offset, 1)
        for _ in range(100_000):
            if ctrl.read32(rmap["CTRL"].offset) & 2:
                break
            device.sleep(2e-7)
        else:
            raise AssertionError(f"step {i} did not finish")
        rows = [s[0] for s in shapes]
        out["steps"].append({
            "regs": regs, "B": B,
            "status": rd("STATUS"), "cycles": rd("CYCLES"),
            "loss": (rd("LOSS_HI") << 32) | rd("LOSS_LO"),
            **{f"{k}{l}": _read_matrix(device, cfg, f"{k}{l}", rows[l])
               for k in ("w", "tw", "m", "v", "wl", "grad") for l in range(L)}})
    return out


def compare(rtl: dict, gold: dict):
    assert len(rtl["steps"]) == len(gold["steps"])
    for i, (a, b) in enumerate(zip(rtl["steps"], gold["steps"])):
        for key in ("status", "cycles", "loss"):
            assert a[key] == b[key], (i, key, a[key], b[key])
        for key in a:
            if key not in ("regs", "B", "status", "cycles", "loss"):
                np.testing.assert_array_equal(a[key], b[key], err_msg=f"{key} of step {i}")
