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
    g, gl = quantize_coefs(0.99, 0.95, cfg.pe)
    return GaeCoreArgs(T, M, g, gl, q(1 / 16), 0, q(0.05), q(1.0), q(8.0), 0, q(4.0), q(-4.0))
