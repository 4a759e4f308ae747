"""The trainer accelerator under Verilator (thorough tier): the same TrainerDriver code on the
Verilated RTL of the small trainer (SimDevice: AXI4-Lite control, cocotbext-axi's AxiRam on
the storage master at an address above 4 GiB, the interrupt) and on the golden device.

* :func:`trainer_session.session`: 120 gradient steps in 12 launches with records appended
  between them; every launch's STATUS, STEPS_DONE and CYCLES (the golden device at AxiRam's
  latencies), the counters, the trace, the snapshot weights and finally the whole storage
  must be the golden's; again with every AXI channel pausing at random (CYCLES then differ).
* :func:`trainer_session.concurrent`: records appended while a launch runs, STOP, a new
  launch: nothing lost or overrun, the ring holding what the host wrote.
* ``same_session_through_xrt``: XrtTrainerDevice on a fake ``pyxrt`` over the same ports.
* ``ap_rst_n`` during a launch: the launch abandoned, counters and registers at their reset
  values, and a new host inserts and trains (the golden device the same:
  tb/trainer/test_driver.py).

``short_session`` (two launches of four steps) is what tb/test_simulators.py runs under
Icarus and Verilator, comparing their per-cycle traces of every output port.
"""

import pytest

from cocotb_util import load_manifest, run_block, start_trace

from .trainer_session import SEED, SIM_CONFIG

#: cocotbext-axi AxiRam: cycles from an AR handshake to its first R beat, and from the last W
#: beat to the B handshake.
AXIRAM_LATENCY = 2


@pytest.mark.slow
def test_driver_on_trainer_rtl_matches_golden_device():
    run_block("dqn-trainer", SIM_CONFIG.to_dict(), __file__, seed=SEED)


@pytest.mark.slow
def test_driver_on_open_sim_process_matches_golden_device():
    """The trainer in a simulator subprocess (``open_sim``, what ``--device trainer:sim``
    opens): the storage address comes over the connection, the session is the golden's."""
    from sw.driver.sim_process import open_sim
    from sw.trainer.device import TrainerGoldenDevice

    from .trainer_session import compare, session

    with open_sim("dqn-trainer", SIM_CONFIG, quiet=True) as dev:
        assert dev.storage_address == 0x1_0000_0000
        rtl = session(dev, SIM_CONFIG, launches=2, steps=5)
    gold = session(TrainerGoldenDevice(SIM_CONFIG, read_latency=AXIRAM_LATENCY,
                                       write_latency=AXIRAM_LATENCY), SIM_CONFIG, launches=2,
                   steps=5)
    compare(rtl, gold)


try:
    import cocotb
except ImportError:  # pragma: no cover
    cocotb = None

if cocotb is not None:
    @cocotb.test()
    @cocotb.parametrize(pause=[0.0, 0.3])
    async def same_trainer_driver_code_on_rtl_and_golden(dut, pause):
        from sw.driver import SimDevice
        from sw.trainer.device import TrainerGoldenDevice
        from sw.trainer.spec import TrainerConfig
        from trainer.trainer_session import compare, session

        cfg = TrainerConfig.from_dict(load_manifest()["config"])
        sim = SimDevice(dut, pause=pause, seed=cocotb.RANDOM_SEED)
        await sim.start()
        rtl = await sim.call(session, sim, cfg)
        gold = session(TrainerGoldenDevice(cfg, read_latency=AXIRAM_LATENCY,
                                           write_latency=AXIRAM_LATENCY), cfg)
        compare(rtl, gold, cycles=not pause)
        dut._log.info("trainer driver session identical on RTL and golden model (pause %.1f); "
                      "CYCLES per launch %s", pause,
                      [x["status"]["CYCLES"] for x in rtl["launches"]])

    @cocotb.test()
    async def short_session(dut):
        from sw.driver import SimDevice
        from sw.trainer.device import TrainerGoldenDevice
        from sw.trainer.spec import TrainerConfig
        from trainer.trainer_session import compare, session

        cfg = TrainerConfig.from_dict(load_manifest()["config"])
        sim = SimDevice(dut)
        await sim.start()
        start_trace(dut, dut.ap_clk)
        rtl = await sim.call(session, sim, cfg, launches=2, steps=4)
        gold = session(TrainerGoldenDevice(cfg, read_latency=AXIRAM_LATENCY,
                                           write_latency=AXIRAM_LATENCY), cfg,
                       launches=2, steps=4)
        compare(rtl, gold)

    @cocotb.test()
    async def appends_during_a_launch_are_all_taken(dut):
        from sw.driver import SimDevice
        from sw.trainer.spec import TrainerConfig
        from trainer.trainer_session import check_concurrent, concurrent

        cfg = TrainerConfig.from_dict(load_manifest()["config"])
        sim = SimDevice(dut, pause=0.2, seed=cocotb.RANDOM_SEED + 1)
        await sim.start()
        res = await sim.call(concurrent, sim, cfg)
        check_concurrent(res)
        dut._log.info("concurrent appends: %d records, STOP after %d steps", res["total"],
                      res["stopped"]["STEPS_DONE"])

    @cocotb.test()
    async def reset_mid_launch_clears_and_a_new_host_trains(dut):
        from cocotb.triggers import ClockCycles

        from sw.driver import SimDevice
        from sw.trainer.spec import TrainerConfig
        from trainer.trainer_session import after_reset, check_after_reset, start_long

        cfg = TrainerConfig.from_dict(load_manifest()["config"])
        sim = SimDevice(dut)
        await sim.start()
        await sim.call(start_long, sim, cfg)
        await ClockCycles(dut.ap_clk, 3000)           # a few steps into the launch
        await sim.reset()
        check_after_reset(await sim.call(after_reset, sim, cfg))

    @cocotb.test()
    async def same_session_through_xrt(dut):
        """XrtTrainerDevice (fake pyxrt: xrt::ip registers over AXI4-Lite, the bo in the
        AxiRam the core reads) runs the session as SimDevice does, bit for bit."""
        from axi_host import AxiHost
        from sw.trainer.boards import XrtTrainerDevice
        from sw.trainer.device import TrainerGoldenDevice
        from sw.trainer.spec import TrainerConfig, trainer_register_map
        from trainer.trainer_session import compare, session
        from xrt_fake import BO_ADDRESS, xrt_session

        cfg = TrainerConfig.from_dict(load_manifest()["config"])
        host = AxiHost(dut, trainer_register_map(cfg), mem="m_axi_gmem")
        await host.start()
        rtl, pyxrt = await xrt_session(host, lambda make: session(make(), cfg, launches=3,
                                                                  steps=6),
                                       device_cls=XrtTrainerDevice, config=cfg,
                                       kernel="dqn_trainer", max_sleep=2e-6)
        gold = session(TrainerGoldenDevice(cfg, read_latency=AXIRAM_LATENCY,
                                           write_latency=AXIRAM_LATENCY), cfg, launches=3,
                       steps=6)
        compare(rtl, gold)
        assert int(host.ram.read(BO_ADDRESS, 1)[0]) == rtl["storage"][0]
