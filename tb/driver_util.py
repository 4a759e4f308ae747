"""Helpers shared by the driver tests (pytest and cocotb sides): recording and modelled
control ports, synthetic rollouts, a fake ``pynq`` overlay."""

import numpy as np

from sw.driver.mmio import BusError, Device, MemoryPort, Mmio

__all__ = ["ModelMmio", "RecordingMmio", "RecordingMemory", "fake_pynq_overlay", "record",
           "rollout", "SMALL"]

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


class ModelMmio(Mmio):
    """Register-level semantics of :class:`rtl_gen.shell.AxiLiteCsr` (no core behind it)."""

    def __init__(self, rm):
        self.rm = rm
        self.by_offset = {r.offset: r for r in rm}
        self.q = {(r.name, f.name): f.reset for r in rm for f in r.fields if f.access != "ro"}
        self.inputs = {}

    def read32(self, offset):
        r = self.by_offset.get(offset)
        if r is None:
            raise BusError(f"unmapped {offset:#x}")
        word = 0
        for f in r.fields:
            if f.readable:
                v = self.inputs.get((r.name, f.name), 0) if f.access == "ro" \
                    else self.q[r.name, f.name]
                word |= v << f.lsb
        for f in r.fields:
            if f.access == "ro_cor":
                self.q[r.name, f.name] = 0
        return word

    def write32(self, offset, value):
        r = self.by_offset.get(offset)
        if r is None:
            raise BusError(f"unmapped {offset:#x}")
        for f in r.fields:
            k, d = (r.name, f.name), f.get(value)
            if f.access in ("rw", "wo"):
                self.q[k] = d
            elif f.access == "rw_sc":
                self.q[k] |= d
            elif f.access == "rw_tow":
                self.q[k] ^= d


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


def fake_pynq_overlay(monkeypatch, dev, instance, module, *, ctrl_base=0xA000_0000,
                      mem_base=0xA100_0000):
    """Install a fake ``pynq`` (``MMIO``, ``DefaultIP``, ``Interrupt`` without pins, ``PL``,
    ``Overlay``) whose overlay holds the accelerator ``instance`` of the shipped ``module``:
    its ``s_axi_control`` and ``s_axi_mem`` windows are the golden device ``dev``'s ports. The
    lazily built PYNQ IP classes of :mod:`sw.driver.pynq_device` are reset. Returns
    ``(ip_dict, vlnv)``."""
    import sys
    import types

    from sw.driver import pynq_device as pb

    windows = {ctrl_base: dev.control, mem_base: dev.memory}
    mod = types.ModuleType("pynq")

    class MMIO:
        def __init__(self, base_addr, length=4, **kw):
            self.base_addr, self.length, self.array = base_addr, length, None

        def read(self, offset=0):
            assert 0 <= offset < self.length
            t = windows[self.base_addr]
            if self.base_addr == ctrl_base:
                return t.read32(offset)
            return int.from_bytes(t.read(offset, 4), "little")

        def write(self, offset, data):
            t = windows[self.base_addr]
            if self.base_addr == ctrl_base:
                t.write32(offset, data)
            else:
                t.write(offset, data if isinstance(data, bytes) else data.to_bytes(4, "little"))

    class DefaultIP:
        def __init__(self, description):
            self.mmio = MMIO(description["phys_addr"], description["addr_range"])

    def Interrupt(pin):                                 # noqa: N802 - pynq's name
        raise ValueError(f"No Pin of name {pin} found")

    vl = f"rlk:accel:{module}:1.0"
    entry = dict(type=vl, interrupts={})
    ip_dict = {
        f"{instance}/s_axi_control": dict(entry, phys_addr=ctrl_base, addr_range=0x1000,
                                          mem_id="s_axi_control",
                                          fullpath=f"{instance}/s_axi_control"),
        f"{instance}/s_axi_mem": dict(entry, phys_addr=mem_base, addr_range=len(dev.image),
                                      mem_id="s_axi_mem", fullpath=f"{instance}/s_axi_mem"),
    }
    mod.MMIO, mod.DefaultIP, mod.Interrupt = MMIO, DefaultIP, Interrupt
    mod.PL = types.SimpleNamespace(ip_dict=ip_dict)
    mod.Overlay = lambda bitfile, download=True: types.SimpleNamespace(ip_dict=ip_dict)
    monkeypatch.setitem(sys.modules, "pynq", mod)
    monkeypatch.setattr(pb, "_IP_CLASSES", {})
    return ip_dict, vl
