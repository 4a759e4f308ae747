"""Where the RL programs run their accelerators: a device *spec* string, one per accelerator.

========================  =====================================================================
spec                      device
========================  =====================================================================
``golden``                the golden model of a shipped configuration (no hardware; bit-exact)
``pynq:BITFILE``          a ZCU106 with PYNQ: :class:`sw.driver.PynqDevice` on the overlay
``pynq:BITFILE:NAME``     the same, the accelerator instance ``NAME`` of the block design
``xrt:XCLBIN``            an Alveo card: :class:`sw.driver.XrtDevice`, the block's shipped kernel
``xrt:XCLBIN:KERNEL``     the same, kernel ``KERNEL`` of the xclbin
========================  =====================================================================

On hardware the drivers read the configuration from the HW_* registers, so the bitstream may
hold any configuration of the block; ``golden`` uses the shipped configuration ``module``. A
bitfile is loaded once per process: further specs naming it use the same overlay.
"""

__all__ = ["BLOCKS", "parse_spec", "open_device"]

#: What each RL block maps to: the shipped block name of its accelerator and of its kernel,
#: the VLNV prefix PYNQ overlays are searched for, and its name in messages.
BLOCKS = {"gae": ("gae-accel", "gae-kernel", "gae_accel", "GAE accelerator"),
          "learner": ("learner", "learner-kernel", "learner", "learner"),
          "replay": ("replay-accel", "replay-kernel", "replay_accel", "replay accelerator")}


#: Overlays loaded by :func:`open_device`, by bitfile: two accelerators of one bitstream (the
#: learner and the replay of one block design) share it instead of programming the PL twice.
_OVERLAYS = {}


def parse_spec(spec: str):
    """``(kind, path, name)`` of a device spec (module docstring); ValueError if malformed."""
    if not isinstance(spec, str) or not spec:
        raise ValueError(f"device spec must be a non-empty string, not {spec!r}")
    if spec == "golden":
        return "golden", None, None
    kind, _, rest = spec.partition(":")
    if kind not in ("pynq", "xrt") or not rest:
        raise ValueError(f"device spec must be 'golden', 'pynq:BITFILE[:NAME]' or "
                         f"'xrt:XCLBIN[:KERNEL]', not {spec!r}")
    path, _, name = rest.partition(":")
    if not path:
        raise ValueError(f"device spec {spec!r} names no file")
    return kind, path, name or None


def _shipped(module, block, what):
    from rtl_gen.blocks import SHIPPED

    params = {name: p for name, b, p in SHIPPED if b == block}
    if module not in params:
        raise ValueError(f"module must be a shipped {what} configuration "
                         f"({', '.join(params)}), not {module!r}")
    return params[module]


def open_device(spec: str, block: str, module: str):
    """``(device, config_or_None, label)`` for accelerator ``block`` ("gae", "learner" or
    "replay") on ``spec``: for ``golden``, the golden device of the shipped ``module`` and its
    configuration; on hardware, the board's device and None (the driver reads the
    configuration from the HW_* registers). ``label`` names it in reports."""
    if block not in BLOCKS:
        raise ValueError(f"block must be one of {', '.join(BLOCKS)}, not {block!r}")
    accel_block, kernel_block, vlnv_name, what = BLOCKS[block]
    kind, path, name = parse_spec(spec)
    if kind == "golden":
        params = _shipped(module, accel_block, what)
        if block == "gae":
            from rtl_gen.gae.config import GaeCoreConfig
            from sw.driver import GoldenDevice
            cfg = GaeCoreConfig.from_dict(params)
            return GoldenDevice(cfg), cfg, f"{module} (golden model)"
        if block == "learner":
            from rtl_gen.learner.config import LearnerConfig
            from sw.driver import LearnerGoldenDevice
            cfg = LearnerConfig.from_dict(params)
            return LearnerGoldenDevice(cfg), cfg, f"{module} (golden model)"
        from rtl_gen.replay.config import SumTreeConfig
        from sw.driver import ReplayGoldenDevice
        cfg = SumTreeConfig.from_dict(params)
        return ReplayGoldenDevice(cfg), cfg, f"{module} (golden model)"
    if kind == "pynq":
        from rtl_gen.vivado import vlnv

        from sw.driver import PynqDevice
        where = {"overlay": _OVERLAYS[path]} if path in _OVERLAYS else {"bitfile": path}
        dev = PynqDevice(**where, name=name, vlnv=None if name else vlnv(vlnv_name))
        _OVERLAYS[path] = dev.overlay
        return dev, None, f"{block} on PYNQ ({dev.instance})"
    from rtl_gen.blocks import SHIPPED

    from sw.driver import XrtDevice
    kernel = name or next(m for m, b, _ in SHIPPED if b == kernel_block)
    # The block is known here: a kernel of any name is opened as this block's kernel.
    return XrtDevice(path, kernel=kernel, block=kernel_block), None, f"{block} on XRT ({kernel})"
