"""The drivers the adapters run on: a device spec (``"golden"``, ``"pynq:BITFILE"``,
``"xrt:XCLBIN"``, :mod:`sw.rl.devices`) or a driver built by the caller on any device (the
Verilated RTL through :class:`~sw.driver.sim.SimDevice` included)."""

__all__ = ["gae_driver", "replay_driver"]


def gae_driver(gae="golden", module="gae_accel_n8", **driver_kwargs):
    """A :class:`~sw.gae.driver.GaeDriver`: ``gae`` itself if it is one (then no keyword
    arguments), else the driver on device spec ``gae`` (``module``: the shipped configuration
    the ``golden`` spec runs). ``driver_kwargs`` go to the driver (default ``units="caller"``:
    textbook GAE of the caller's rewards and values)."""
    from sw.driver import GaeDriver

    return _driver(GaeDriver, "gae", gae, module, driver_kwargs)


def replay_driver(replay="golden", module="replay_accel_k16", **driver_kwargs):
    """A :class:`~sw.replay.driver.ReplayDriver`: ``replay`` itself if it is one (then no
    keyword arguments), else the driver on device spec ``replay`` (``module``: the shipped
    configuration the ``golden`` spec runs); ``driver_kwargs`` (``alpha``, ``eps``, ...) go to
    the driver."""
    from sw.driver import ReplayDriver

    return _driver(ReplayDriver, "replay", replay, module, driver_kwargs)


def _driver(cls, block, given, module, kwargs):
    if isinstance(given, cls):
        if kwargs:
            raise ValueError(f"{block}: driver options ({', '.join(sorted(kwargs))}) go to a "
                             f"driver built here from a device spec, not to a given "
                             f"{cls.__name__}")
        return given
    if not isinstance(given, str):
        raise ValueError(f"{block} must be a {cls.__name__} or a device spec string "
                         f"('golden', 'pynq:BITFILE[:NAME]', 'xrt:XCLBIN[:KERNEL]'), "
                         f"not {given!r}")
    from sw.rl.devices import open_device

    dev, cfg, _ = open_device(given, block, module)
    return cls(dev, cfg, **kwargs)
