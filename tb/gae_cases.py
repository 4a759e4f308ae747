"""GAE accelerator cases of the golden-device and driver tests (tb/gae/test_device.py,
tb/gae/test_driver.py): a second configuration beside ``driver_util.SMALL``, random codes and
register arguments."""

from sw.gae.golden import quantize_coefs
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
