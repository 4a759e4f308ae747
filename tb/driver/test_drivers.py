"""What the three drivers share: each reads the HW_* registers of the device it is given and
refuses another block's accelerator with its own ConfigMismatch error."""

import pytest

from sw.driver import GoldenDevice
from sw.gae.spec import GaeCoreConfig


def test_each_driver_refuses_the_other_accelerators():
    """A driver attached to another block's control port says so (ConfigMismatch errors),
    never a bare bus error or a wrong configuration."""
    from sw.learner.spec import LearnerConfig
    from sw.replay.spec import SumTreeConfig
    from sw.driver import (GaeConfigMismatchError, GaeDriver, LearnerConfigMismatchError,
                           LearnerDriver, LearnerGoldenDevice, ReplayConfigMismatchError,
                           ReplayDriver, ReplayGoldenDevice)

    devices = {"gae": lambda: GoldenDevice(GaeCoreConfig()),
               "replay": lambda: ReplayGoldenDevice(SumTreeConfig()),
               "learner": lambda: LearnerGoldenDevice(LearnerConfig(sizes=(4, 8, 2), array=4))}
    drivers = {"gae": (GaeDriver, GaeConfigMismatchError, "GAE accelerator"),
               "replay": (ReplayDriver, ReplayConfigMismatchError, "replay accelerator"),
               "learner": (LearnerDriver, LearnerConfigMismatchError, "learner")}
    for block, (drv, err, what) in drivers.items():
        drv(devices[block]())
        for other, make in devices.items():
            if other != block:
                with pytest.raises(err, match=f"do not describe a {what}"):
                    drv(make())
