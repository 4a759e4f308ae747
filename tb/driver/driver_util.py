"""Helpers shared by the driver tests (pytest and cocotb sides)."""

import numpy as np

from sw.driver.mmio import Device, MemoryPort, Mmio

__all__ = ["RecordingMmio", "RecordingMemory", "record", "rollout", "SMALL"]

#: The small accelerator of the fast tests and the slow RTL test.
SMALL = {"n_pe": 4, "max_trajectories": 8, "capacity": 32, "axi_data_width": 64}


class RecordingMmio(Mmio):
    """Passes accesses through and records them: ``("r", offset, value)``/``("w", ...)``."""

    def __init__(self, inner, log):
        self.inner, self.log = inner, log

    def read32(self, offset):
        value = self.inner.read32(offset)
        self.log.append(("r", offset, value))
        return value

    def write32(self, offset, value):
        self.log.append(("w", offset, value))
        self.inner.write32(offset, value)


class RecordingMemory(MemoryPort):
    def __init__(self, inner, log):
        self.inner, self.log = inner, log

    def write(self, offset, data):
        self.log.append(("mw", offset, len(data)))
        self.inner.write(offset, data)

    def read(self, offset, nbytes):
        self.log.append(("mr", offset, nbytes))
        return self.inner.read(offset, nbytes)


def record(device: Device) -> list:
    """Wrap the device's ports so every access lands in the returned list."""
    log = []
    device.control = RecordingMmio(device.control, log)
    device.memory = RecordingMemory(device.memory, log)
    return log


def rollout(rng, T, M, *, p_done=0.05, value_scale=2.0, reward="sparse"):
    """A synthetic batch: rewards, values (a smooth critic plus noise), dones, last values.

    ``reward="sparse"``: -1 at episode ends, else 0 (CartPole with the Sutton-Barto reward);
    ``"gauss"``: unit normal rewards.
    """
    dones = rng.random((T, M)) < p_done
    if reward == "sparse":
        rewards = np.where(dones, -1.0, 0.0)
    else:
        rewards = rng.normal(size=(T, M))
    # Values: a random walk per trajectory (correlated in time, like a critic's output).
    values = value_scale * np.cumsum(rng.normal(scale=0.3, size=(T, M)), axis=0) + 1.0
    last_values = values[-1] + rng.normal(scale=0.3, size=M)
    return rewards, values, dones, last_values
