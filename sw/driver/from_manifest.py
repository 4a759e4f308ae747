"""One line from a generated configuration to its driver: :func:`open_driver`.

::

    from sw.driver import open_driver
    drv = open_driver("build/replay_k8_4k", device="golden")   # "sim", "pynq:BIT", "xrt:XCLBIN"
    drv.insert([1.0, 2.0]); drv.sample(4)

The manifest that ``python -m rtl_gen <block> ... --out DIR`` wrote (``DIR/<module>.json``, or
``DIR``; :func:`sw.manifest.load_manifest`) names the block and its configuration; the device
is a device spec as the RL programs take it (:mod:`sw.rl.devices`), opened for that
configuration. On a board the driver checks the HW_* registers against the manifest's
configuration, so a bitstream of another configuration is an error, not wrong numbers.
"""

from sw.manifest import load_manifest
from sw.registry import BLOCKS, vlnv
from sw.rl.devices import check_files, opening

__all__ = ["open_driver", "DEVICE_FORMS"]

#: The device specs :func:`open_driver` takes.
DEVICE_FORMS = "'golden', 'sim', 'pynq:BITFILE[:NAME]' or 'xrt:XCLBIN[:KERNEL]'"


def _device(gen, kind, path, name, spec):
    """The device of ``spec`` (parsed: ``kind``, ``path``, ``name``) for ``gen``'s block."""
    blk = gen.block
    accel = blk.accelerator
    cfg = gen.config.accel if blk.role == "kernel" else gen.config
    if kind == "golden":
        return accel.load("device")(cfg)
    if kind == "sim":
        from sw.driver.sim_process import open_sim
        with opening(spec, "sim"):
            return open_sim(accel.name, cfg)
    trainer = blk.family == "trainer"
    if kind == "pynq":
        if blk.role == "kernel":
            raise ValueError(f"device must be 'xrt:XCLBIN[:KERNEL]' for {gen.module}, a Vitis "
                             f"kernel ({blk.name}), not {spec!r}")
        if trainer:
            from sw.trainer.boards import PynqTrainerDevice
            with opening(spec, "pynq"):
                return PynqTrainerDevice(path, config=cfg, name=name)
        import sw.driver
        with opening(spec, "pynq"):
            return sw.driver.PynqDevice(path, name=name,
                                        vlnv=None if name else vlnv(gen.module))
    if trainer:
        from sw.trainer.boards import XrtTrainerDevice
        with opening(spec, "xrt"):
            return XrtTrainerDevice(path, config=cfg, kernel=name or gen.module)
    if blk.role != "kernel":
        kernel = next(b.name for b in BLOCKS.values()
                      if b.family == blk.family and b.role == "kernel")
        raise ValueError(f"device must be 'golden', 'sim' or 'pynq:BITFILE[:NAME]' for "
                         f"{gen.module}, an accelerator for Vivado block designs ({blk.name}), "
                         f"not {spec!r}: an Alveo card runs its Vitis kernel (python -m rtl_gen "
                         f"{kernel} ...)")
    import sw.driver
    with opening(spec, "xrt"):
        return sw.driver.XrtDevice(path, kernel=name or gen.module, block=blk.name)


def open_driver(manifest, device: str = "golden", **driver_args):
    """The driver of a generated configuration, on a device.

    Parameters
    ----------
    manifest : str or Path
        The manifest ``<module>.json`` that ``python -m rtl_gen`` wrote, or its directory
        (:func:`sw.manifest.load_manifest`); the shipped ones in ``hdl/`` too.
    device : str
        ``"golden"``: the block's golden device of this configuration (pure Python; a kernel's:
        its accelerator's). ``"sim"``: its Verilated RTL (:func:`sw.driver.open_sim`, the
        ``dev`` extra; the first call builds it, minutes; a kernel's accelerator).
        ``"pynq:BITFILE[:NAME]"``: the accelerator in a PYNQ overlay, found by the VLNV it was
        packaged under (``rlk:accel:<module>:1.0``) or by instance ``NAME``.
        ``"xrt:XCLBIN[:KERNEL]"``: a kernel in an xclbin, by default the kernel named after the
        module. Parsed as the RL programs' ``--device`` (:func:`sw.rl.devices.parse_spec`).
    **driver_args
        Passed to the driver (``timeout=``, ``clock_hz=``, ...).

    Returns
    -------
    The block's driver (:class:`~sw.gae.driver.GaeDriver`, :class:`~sw.replay.driver.
    ReplayDriver`, :class:`~sw.learner.driver.LearnerDriver`,
    :class:`~sw.trainer.driver.TrainerDriver`) with the manifest's configuration; ``.device``
    is the device.

    Raises
    ------
    ValueError
        Naming the argument: ``manifest`` is no manifest (:func:`~sw.manifest.load_manifest`)
        or one of a block without a driver; ``device`` is not one of the forms above, or the
        wrong kind for the block (an accelerator on ``xrt``, a kernel on ``pynq``).
    sw.rl.devices.DeviceSpecError
        The device cannot be opened here: a missing file, package or board (a ``ValueError``
        too, naming the spec).
    """
    gen = load_manifest(manifest, argument="manifest")
    blk = gen.block
    if blk.driver is None:
        with_driver = ", ".join(b.name for b in BLOCKS.values() if b.driver is not None)
        raise ValueError(f"manifest {str(gen.path)!r} must be of a block with a driver "
                         f"({with_driver}), not of {blk.name!r} (a building block without a "
                         f"host interface)")
    if not isinstance(device, str) or device.startswith("sim:"):
        raise ValueError(f"device must be {DEVICE_FORMS}, not {device!r}")
    try:
        kind, path, name = check_files(device)
    except ValueError as e:
        if type(e) is not ValueError:          # DeviceSpecError: a missing file, as it says
            raise
        raise ValueError(f"device must be {DEVICE_FORMS}, not {device!r}") from None
    dev = _device(gen, kind, path, name, device)
    cfg = gen.config.accel if blk.role == "kernel" else gen.config
    return blk.load("driver")(dev, cfg, **driver_args)
