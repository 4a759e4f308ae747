"""The learner driver's session of the driver tests: :func:`session` is blocking driver code that
returns everything observable (losses, STATUS words, CYCLES, Q values, TD errors, weights) on a
device of :data:`SIM_CONFIG`; :func:`compare` checks two transcripts. Run on the golden device
(tb/driver/test_xrt_window.py) and on the RTL (tb/learner/test_driver_rtl.py,
tb/learner/test_kernel_xrt_rtl.py). :func:`init_net` and :func:`random_batch` also serve the
fast driver tests (tb/learner/test_driver.py)."""

import warnings

import numpy as np

#: The learner of the RTL test: a small DQN (three layers, 2 x 2 arrays, two 32-bit host
#: words per memory word) that Verilator builds in one to two minutes.
SIM_CONFIG = {"sizes": [4, 8, 8, 2], "array": 2, "max_batch": 16, "sub_batch": 4,
              "axi_data_width": 32}
SEED = 20261124


def init_net(sizes, rng, scale=1.0):
    """PyTorch's nn.Linear initialisation: U(+-1/sqrt(fan_in)), as (weights, biases)."""
    ws, bs = [], []
    for a, b in zip(sizes[:-1], sizes[1:]):
        bound = scale / np.sqrt(a)
        ws.append(rng.uniform(-bound, bound, (a, b)))
        bs.append(rng.uniform(-bound, bound, b))
    return ws, bs


def random_batch(rng, B, n_in=4, n_out=2):
    obs = rng.normal(0, 1, (B, n_in))
    return dict(obs=obs, actions=rng.integers(0, n_out, B), rewards=rng.normal(0.5, 0.5, B),
                next_obs=obs + rng.normal(0, 0.2, (B, n_in)), dones=rng.random(B) < 0.2)


def session(device) -> dict:
    """Blocking driver code; returns everything observable, for comparison across devices."""
    from sw.driver import LearnerDriver, LearnerError, LearnerOverflowWarning

    out = {}
    drv = LearnerDriver(device, timeout=1e-3)
    cfg = drv.config
    out["config"] = cfg.to_dict()
    rng = np.random.default_rng(SEED)
    drv.load_weights(*init_net(cfg.sizes, rng))
    out["weights0"] = drv.read_raw_weights() + drv.read_raw_weights(target=True)
    steps = out["steps"] = []
    # Steps in a row with changing batch sizes (partial sub-batches and S-groups), a sync,
    # per-sample loss weights (one of them 0) in two of them.
    for i, B in enumerate((16, 5, 12, 1, 16)):
        lw = None
        if i in (1, 4):
            lw = rng.uniform(0, 1, B)
            lw[0] = 0.0
            lw[-1] = 1.0
        d = drv.train_step(**random_batch(rng, B, cfg.sizes[0], cfg.sizes[-1]), gamma=0.95,
                           lr=0.05, sync_target=(i == 2), loss_weights=lw, details=True)
        steps.append((d.loss_sum, d.q, d.td_errors, d.cycles, d.synced, dict(d.status),
                      d.weighted_loss))
    out["weights1"] = drv.read_raw_weights() + drv.read_raw_weights(target=True)
    drv.sync_target()
    out["weights2"] = drv.read_raw_weights(target=True)
    # Saturation: large weights.
    ws, bs = init_net(cfg.sizes, rng)
    ws[0][:] = 3.9
    drv.load_weights(ws, bs)
    batch = random_batch(rng, 8, cfg.sizes[0], cfg.sizes[-1])
    batch["obs"] = np.abs(batch["obs"]) + 1.0
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out["saturated"] = drv.train_step(**batch, lr=0.01, details=True).loss_sum
    out["saturated_status"] = dict(drv.last_status)
    out["saturated_warned"] = any(issubclass(x.category, LearnerOverflowWarning) for x in w)
    # A refused step: ERROR, memory untouched.
    drv.start(0, 0)
    try:
        drv.wait()
        out["error"] = None
    except LearnerError as e:
        out["error"] = e.code
    out["error_status"] = dict(drv.last_status)
    out["after_error"] = drv.read_raw("q", 8)
    # Polling, and a start during a step.
    poll = LearnerDriver(device, cfg, use_interrupt=False, poll_interval=2e-7, timeout=1e-3)
    b = poll.prepare(**random_batch(rng, 9, cfg.sizes[0], cfg.sizes[-1]), gamma=0.5, lr=0.1)
    poll.load_batch(b)
    poll.start(b.batch_size, b.lr, b.gamma)
    poll.register_map.CTRL.AP_START = 1
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        out["refused"] = poll.wait()
    out["poll_q"] = poll.read_raw("q", 9)
    out["hw"] = {r._register.name: int(r) for r in drv.register_map
                 if r._register.name.startswith(("HW_", "SYNC_COUNT"))}
    return out


def compare(rtl: dict, gold: dict):
    assert rtl["config"] == gold["config"]
    for key in ("weights0", "weights1", "weights2", "after_error", "poll_q"):
        for x, y in zip(rtl[key], gold[key]):
            np.testing.assert_array_equal(x, y, err_msg=key)
    for i, (a, b) in enumerate(zip(rtl["steps"], gold["steps"])):
        assert a[0] == b[0] and a[3:] == b[3:], (i, a[0], b[0], a[3:], b[3:])
        np.testing.assert_array_equal(a[1], b[1], err_msg=f"q of step {i}")
        np.testing.assert_array_equal(a[2], b[2], err_msg=f"td errors of step {i}")
    for key in ("saturated", "saturated_status", "saturated_warned", "error", "error_status",
                "refused", "hw"):
        assert rtl[key] == gold[key], (key, rtl[key], gold[key])
    assert gold["error"] == 1 and gold["saturated_warned"] and gold["refused"]["START_REFUSED"]
