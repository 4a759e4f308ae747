"""XrtDevice + GaeDriver on the GAE kernel's RTL: the host side of the DMA shell contract.

``pyxrt`` is replaced by the fake of :mod:`xrt_fake`, whose buffer object lives in the cocotb
``AxiRam`` the kernel's ``m_axi_gmem`` reads and writes and whose ``xrt::ip`` register access
goes through cocotbext-axi's ``AxiLiteMaster``. The unmodified
:class:`~sw.driver.xrt_device.XrtDevice` and :class:`~sw.gae.driver.GaeDriver` run in a
``bridge`` thread (as with :class:`~sw.driver.sim.SimDevice`), on simulation time, and must
return bit for bit what the same driver returns on a :class:`~sw.gae.device.GoldenDevice`.
The shipped kernel's Verilator model is shared with ``test_kernel_rtl.py`` (same build).
"""

import numpy as np
import pytest

from cocotb_util import load_manifest, run_block
from gae_kernel_cases import CONFIGS, Host
from xrt_fake import xrt_session


@pytest.mark.slow
def test_xrt_device_on_kernel_rtl():
    run_block("gae-kernel", CONFIGS["n8"], __file__, seed=20261125)


def rollout(rng, T, M, *, p_done=0.05):
    """Sparse rewards (-1 at episode ends), a smooth critic with noise, last values."""
    dones = rng.random((T, M)) < p_done
    rewards = np.where(dones, -1.0, 0.0) + 0.1 * rng.normal(size=(T, M))
    values = np.cumsum(rng.normal(size=(T, M)), axis=0) * 0.2 + rng.normal(size=(T, M)) * 0.05
    return rewards, values, dones, values[-1] + rng.normal(size=M) * 0.1


def session(make_device, config):
    """Blocking driver code; returns what it observed (results, STATUS, the refused run)."""
    from sw.driver import GaeDriver, GaeError
    from sw.gae.golden import quantize_coefs
    from sw.gae.spec import GaeCoreArgs

    device = make_device()
    drv = GaeDriver(device, config, timeout=1e-3, poll_interval=2e-7)
    rng = np.random.default_rng(41)
    out = {"compute": []}
    for T, M in ((48, 16), (100, 64), (5, 3)):
        adv, ret = drv.compute(*rollout(rng, T, M), 0.99, 0.95)
        out["compute"].append((adv, ret, drv.last_batch.runs,
                               {k: v for k, v in drv.last_status.items() if k != "CYCLES"}))
    q, rf = config.code_max, config.reg_format
    T, M = 30, 11
    codes = [rng.integers(-q, q + 1, (T, M)), rng.integers(-q, q + 1, (T, M)),
             rng.integers(-q, q + 1, M), rng.random((T, M)) < 0.1]
    g, gl = quantize_coefs(0.97, 0.9, config.pe)
    args = GaeCoreArgs(T, M, g, gl, int(rf.quantize(0.1)), 0, int(rf.quantize(0.05)),
                       int(rf.quantize(0.25)), int(rf.quantize(2.0)), 0, int(rf.quantize(4.0)),
                       int(rf.quantize(0.5)))
    out["run"] = drv.run(*codes, args)
    out["run"].pop("cycles")
    drv.start(GaeCoreArgs(T, M, (1 << config.pe.coef_frac) + 1, gl, 0, 0, 0, 0))
    try:
        drv.wait()
        out["error"] = None
    except GaeError as e:
        out["error"] = e.code
    out["after_error"] = drv.read_results(T, M)       # the refused run changed nothing
    return out


try:
    import cocotb
except ImportError:  # pragma: no cover
    cocotb = None

if cocotb is not None:
    @cocotb.test()
    async def xrt_device_drives_the_kernel(dut):
        """XrtDevice (fake pyxrt on the RTL) == GoldenDevice, bit for bit."""
        from sw.gae.spec import GaeKernelConfig
        from sw.driver import GoldenDevice
        from sw.driver.xrt_device import XRT_KERNEL_NAME

        kcfg = GaeKernelConfig.from_dict(load_manifest()["config"])
        host = Host(dut)
        await host.start()
        rtl, pyxrt = await xrt_session(host, session, kcfg.core, xclbin="gae_kernel_n8.xclbin")
        gold = session(lambda: GoldenDevice(kcfg.core), kcfg.core)

        assert ("ip", f"{XRT_KERNEL_NAME}:{{{XRT_KERNEL_NAME}_1}}") in pyxrt.log
        for (a, r, n, st), (ga, gr, gn, gst) in zip(rtl["compute"], gold["compute"]):
            np.testing.assert_array_equal(a, ga)
            np.testing.assert_array_equal(r, gr)
            assert n == gn and st == gst, (n, gn, st, gst)
        for key in ("adv", "rtg"):
            np.testing.assert_array_equal(rtl["run"][key], gold["run"][key])
        assert {k: v for k, v in rtl["run"].items() if k not in ("adv", "rtg")} == \
            {k: v for k, v in gold["run"].items() if k not in ("adv", "rtg")}
        assert rtl["error"] == gold["error"] == 4
        for x, y in zip(rtl["after_error"], gold["after_error"]):
            np.testing.assert_array_equal(x, y)
        syncs = [e for e in pyxrt.log if e[0] in ("to_device", "from_device")]
        assert {d for d, _, _ in syncs} == {"to_device", "from_device"}
        assert all(off + n <= 1 << kcfg.core.mem_addr_bits for _, off, n in syncs)
        dut._log.info("XrtDevice on the RTL == GoldenDevice: %d compute calls (%s runs), a "
                      "code-level run, a refused run; %d buffer syncs", len(rtl["compute"]),
                      [c[2] for c in rtl["compute"]], len(syncs))
