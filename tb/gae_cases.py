"""GAE accelerator cases of the golden-device and driver tests (tb/gae/test_device.py,
tb/gae/test_driver.py): a second configuration beside ``driver_util.SMALL``, random codes and
register arguments; synthetic batches of the accuracy tests (tb/gae/test_refinement.py, also
``scripts/gae_accuracy.py``)."""

import math

import numpy as np

from sw.gae.golden import gae_reference, quantize_coefs
from sw.gae.spec import GaeCoreArgs

#: Full-results mode on 5 PEs with interleaved lookahead-2 PEs and 64-bit words.
FULL = {"n_pe": 5, "max_trajectories": 20, "capacity": 40, "results": "full",
        "axi_data_width": 64, "pe": {"k": 2, "mode": "interleaved"}}


def random_codes(cfg, T, M, rng, p_done=0.1):
    q = cfg.code_max
    return {"rewards": rng.integers(-q, q + 1, (T, M)), "values": rng.integers(-q, q + 1, (T, M)),
            "bootstrap": rng.integers(-q, q + 1, M), "dones": rng.random((T, M)) < p_done}


def random_args(cfg, T, M):
    q = lambda x: int(cfg.reg_format.quantize(x))  # noqa: E731
    s, rs = cfg.scale_format.quantize, cfg.result_scale_format.quantize
    g, gl = quantize_coefs(0.99, 0.95, cfg.pe)
    return GaeCoreArgs(T, M, g, gl, s(1 / 16), 0, s(0.05), q(1.0), rs(8.0), 0, rs(4.0), q(-4.0))


def random_scale_args(cfg, T, M, rng, shift=None):
    """:func:`random_args` with random scale words (random mantissas at ``shift``, or random
    shifts) and random offsets in every (de)quantizer register: results saturate often."""
    args = random_args(cfg, T, M)

    def word(fmt):
        e = int(rng.integers(0, fmt.max_shift + 1)) if shift is None else shift
        return fmt.pack(int(rng.integers(-fmt.max_mantissa - 1, fmt.max_mantissa + 1)), e)

    rf = cfg.reg_format
    args.reward_scale, args.value_scale = word(cfg.scale_format), word(cfg.scale_format)
    args.reward_offset, args.value_offset = (
        int(rng.integers(rf.min_raw, rf.max_raw, endpoint=True)) >> int(rng.integers(0, 32))
        for _ in range(2))
    if cfg.results == "inplace":
        args.adv_scale = word(cfg.result_scale_format)
        args.rtg_scale = word(cfg.result_scale_format)
        args.adv_offset, args.rtg_offset = (int(rng.integers(-(1 << 24), 1 << 24))
                                            for _ in range(2))
    return args


def synthetic(seed, T, M, *, reward, value, ratio, scale=1.0, p_done=0.04):
    """A batch of ``reward`` rewards (``gauss``: unit normal; ``shifted``: normal with a mean
    in [-3, 3]; ``sparse``: 5 % of the steps a normal spike of std 4, else 0; ``constant``:
    +1) and ``value`` values (``iid``: independent normal noise, a critic that knows nothing;
    ``walk``: a random walk; ``critic``: the textbook lambda = 1 returns plus 30 % noise),
    the values scaled so that their RMS is ``ratio`` times the rewards'; both times ``scale``.
    ``(rewards, values, dones, last_values)``. The batches of tb/gae/test_refinement.py and of
    ``scripts/gae_accuracy.py``."""
    rng = np.random.default_rng(seed)
    dones = rng.random((T, M)) < p_done
    if reward == "gauss":
        r = rng.normal(size=(T, M))
    elif reward == "shifted":
        r = rng.normal(loc=rng.uniform(-3, 3), size=(T, M))
    elif reward == "sparse":
        r = (rng.random((T, M)) < 0.05) * rng.normal(scale=4.0, size=(T, M))
    else:
        r = np.ones((T, M))
    if value == "iid":
        v = rng.normal(size=(T + 1, M))
    elif value == "walk":
        v = np.cumsum(rng.normal(scale=0.2, size=(T + 1, M)), axis=0)
    else:
        _, ret = gae_reference(r, np.zeros((T, M)), dones, np.zeros(M), 0.99, 1.0)
        v = np.concatenate([ret, ret[-1:]]) + rng.normal(scale=0.3 * ret.std() + 1e-3,
                                                         size=(T + 1, M))
    rms_r = math.sqrt(float(np.mean(r ** 2)))
    rms_v = math.sqrt(float(np.mean(v ** 2)))
    v = v * (ratio * rms_r / rms_v)
    return r * scale, v[:T] * scale, dones, v[T] * scale


def noisy_values_batch(seed=0, T=300, M=5):
    """Values spread 3 times the rewards (independent noise), 4 % episode ends, T = 300,
    5 trajectories: one run's in-place results are more than 3 % off on it."""
    rng = np.random.default_rng(seed)
    r = rng.normal(size=(T, M))
    v = rng.normal(scale=3.0, size=(T, M))
    d = rng.random((T, M)) < 0.04
    return r, v, d, rng.normal(scale=3.0, size=M)
