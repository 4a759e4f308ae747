"""Where the RL programs run their accelerators: a device *spec* string, one per accelerator.

========================  =====================================================================
spec                      device
========================  =====================================================================
``golden``                the golden model of a shipped configuration (no hardware; bit-exact)
``sim``                   the Verilated RTL of that configuration (:func:`sw.driver.open_sim`;
                          the ``dev`` extra; slow: for short runs)
``sim:MODULE``            the same, of the shipped accelerator ``MODULE``
``pynq:BITFILE``          a ZCU106 with PYNQ: :class:`sw.driver.PynqDevice` on the overlay
``pynq:BITFILE:NAME``     the same, the accelerator instance ``NAME`` of the block design
``xrt:XCLBIN``            an Alveo card: :class:`sw.driver.XrtDevice`, the block's shipped kernel
``xrt:XCLBIN:KERNEL``     the same, kernel ``KERNEL`` of the xclbin
========================  =====================================================================

On hardware the drivers read the configuration from the HW_* registers, so the bitstream may
hold any configuration of the block; ``golden`` and ``sim`` use the shipped configuration
``module``. A
bitfile is loaded once per process: further specs naming it use the same overlay.
"""

from sw.registry import BLOCKS as _REGISTRY
from sw.registry import FAMILIES, shipped_modules, vlnv

__all__ = ["BLOCKS", "parse_spec", "open_device"]

#: The accelerator families the RL programs run (``"gae"``, ``"learner"``, ``"replay"``), from
#: :data:`sw.registry.FAMILIES`.
BLOCKS = tuple(FAMILIES)


#: Overlays loaded by :func:`open_device`, by bitfile: two accelerators of one bitstream (the
#: learner and the replay of one block design) share it instead of programming the PL twice.
_OVERLAYS = {}


def parse_spec(spec: str):
    """``(kind, path, name)`` of a device spec (module docstring); ValueError if malformed."""
    if not isinstance(spec, str) or not spec:
        raise ValueError(f"device spec must be a non-empty string, not {spec!r}")
    if spec in ("golden", "sim"):
        return spec, None, None
    kind, _, rest = spec.partition(":")
    if kind == "sim" and rest and ":" not in rest:
        return "sim", None, rest
    if kind not in ("pynq", "xrt") or not rest:
        raise ValueError(f"device spec must be 'golden', 'sim[:MODULE]', 'pynq:BITFILE[:NAME]' "
                         f"or 'xrt:XCLBIN[:KERNEL]', not {spec!r}")
    path, _, name = rest.partition(":")
    if not path:
        raise ValueError(f"device spec {spec!r} names no file")
    return kind, path, name or None


def _family_block(family, role):
    return next(b for b in _REGISTRY.values() if b.family == family and b.role == role)


def open_device(spec: str, block: str, module: str):
    """``(device, config_or_None, label)`` for accelerator ``block`` ("gae", "learner" or
    "replay") on ``spec``: for ``golden``, the golden device of the shipped ``module`` and its
    configuration; for ``sim[:MODULE]``, the Verilated RTL of that module (``MODULE`` overrides
    ``module``) and its configuration; on hardware, the board's device and None (the driver reads the
    configuration from the HW_* registers). ``label`` names it in reports."""
    if block not in BLOCKS:
        raise ValueError(f"block must be one of {', '.join(BLOCKS)}, not {block!r}")
    accel = _family_block(block, "accelerator")
    kind, path, name = parse_spec(spec)
    if kind in ("golden", "sim"):
        module = name or module
        modules = shipped_modules(family=block, role="accelerator")
        if module not in modules:
            raise ValueError(f"module must be a shipped {FAMILIES[block]} configuration "
                             f"({', '.join(modules)}), not {module!r}")
        from sw.registry import shipped_config
        _, cfg = shipped_config(module)
        if kind == "sim":
            from sw.driver.sim_process import open_sim
            return open_sim(module), cfg, f"{module} (Verilated RTL)"
        return accel.load("device")(cfg), cfg, f"{module} (golden model)"
    if kind == "pynq":
        from sw.driver import PynqDevice
        where = {"overlay": _OVERLAYS[path]} if path in _OVERLAYS else {"bitfile": path}
        dev = PynqDevice(**where, name=name, vlnv=None if name else vlnv(accel.module))
        _OVERLAYS[path] = dev.overlay
        return dev, None, f"{block} on PYNQ ({dev.instance})"
    from sw.driver import XrtDevice
    kernel_block = _family_block(block, "kernel").name
    kernel = name or shipped_modules(family=block, role="kernel")[0]
    # The block is known here: a kernel of any name is opened as this block's kernel.
    return XrtDevice(path, kernel=kernel, block=kernel_block), None, f"{block} on XRT ({kernel})"
