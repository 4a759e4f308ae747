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

A spec that cannot be opened here raises :class:`DeviceSpecError`, a ``ValueError`` whose
message names the spec and what is missing: the file (checked before ``pynq`` or ``pyxrt`` is
imported; :func:`check_files` checks it alone), the package its backend needs, or the board
the backend did not find. The programs turn it into exit status 2 and that message.
"""

import contextlib
from pathlib import Path

from sw.registry import BLOCKS as _REGISTRY
from sw.registry import FAMILIES, shipped_modules, vlnv

__all__ = ["BLOCKS", "DeviceSpecError", "parse_spec", "check_files", "open_device"]

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


class DeviceSpecError(ValueError):
    """A device spec that cannot be opened on this machine (module docstring).

    Members
    -------
    spec : str
        The spec, as given (``trainer:`` included for a fused-trainer spec).
    problem : str
        What is missing, without the spec.
    """

    def __init__(self, spec, problem):
        self.spec, self.problem = spec, problem
        super().__init__(f"device spec {spec!r}: {problem}")


#: The package each hardware kind imports, and where it comes from.
_PACKAGES = {
    "pynq": ("pynq", "PYNQ 3 or 4 on the board's Linux image; on a host PC driving a board, "
                     "the 'pynq' extra (docs/boards.md)"),
    "xrt": ("pyxrt", "XRT's Python binding: source /opt/xilinx/xrt/setup.sh first"),
    "sim": ("cocotb", "the 'dev' extra: pip install -e '.[dev]', or make"),
}


def check_files(spec: str):
    """``(kind, path, name)`` of ``spec`` (:func:`parse_spec`; a ``trainer:`` prefix is
    looked through) after checking, without importing any backend, that the files a board
    spec names exist here: the xclbin of ``xrt:``, the bitfile of ``pynq:`` and, for a
    ``.bit``, the ``.hwh`` PYNQ reads beside it. :class:`DeviceSpecError` naming the spec and
    the missing file otherwise; ``ValueError`` for a malformed spec."""
    rest = spec[len("trainer:"):] if isinstance(spec, str) and spec.startswith("trainer:") \
        else spec
    kind, path, name = parse_spec(rest)
    if kind in ("pynq", "xrt"):
        what = "bitfile" if kind == "pynq" else "xclbin"
        p = Path(path)
        if not p.exists():
            raise DeviceSpecError(spec, f"the {what} {path!r} does not exist")
        if not p.is_file():
            raise DeviceSpecError(spec, f"the {what} {path!r} is not a file")
        hwh = p.with_suffix(".hwh")
        if kind == "pynq" and p.suffix == ".bit" and not hwh.is_file():
            raise DeviceSpecError(spec, f"the block design's {str(hwh)!r}, which PYNQ reads "
                                        f"beside the bitfile, does not exist")
    return kind, path, name


def _missing_module(e):
    """The top-level name of the module an ImportError (or its causes) could not import."""
    while e is not None:
        if isinstance(e, ImportError) and e.name:
            return e.name.split(".")[0]
        e = e.__cause__ or e.__context__
    return None


@contextlib.contextmanager
def opening(spec: str, kind: str):
    """Turn what opening ``spec`` (of ``kind``: ``"pynq"``, ``"xrt"`` or ``"sim"``) raises
    into :class:`DeviceSpecError`: an ImportError names the missing package and where it comes
    from; an OSError, RuntimeError or ValueError of the backend (no board, no such kernel or
    instance, a failed build) says that it could not be opened and why."""
    try:
        yield
    except DeviceSpecError:
        raise
    except ImportError as e:
        package, where = _PACKAGES[kind]
        missing = _missing_module(e) or package
        if missing == package:
            problem = f"needs the {package!r} package, which is not installed here ({where})"
        else:
            problem = f"needs the {missing!r} package, which is not installed here ({e})"
        raise DeviceSpecError(spec, problem) from e
    except (OSError, RuntimeError, ValueError) as e:
        backend = {"pynq": "PYNQ", "xrt": "XRT", "sim": "the simulator"}[kind]
        raise DeviceSpecError(spec, f"{backend} could not open it: {e}") from e


def _family_block(family, role):
    return next(b for b in _REGISTRY.values() if b.family == family and b.role == role)


def open_device(spec: str, block: str, module: str):
    """``(device, config_or_None, label)`` for accelerator ``block`` ("gae", "learner" or
    "replay") on ``spec``: for ``golden``, the golden device of the shipped ``module`` and its
    configuration; for ``sim[:MODULE]``, the Verilated RTL of that module (``MODULE`` overrides
    ``module``) and its configuration; on hardware, the board's device and None (the driver
    reads the configuration from the HW_* registers). ``label`` names it in reports.
    :class:`DeviceSpecError` if it cannot be opened here (module docstring)."""
    if block not in BLOCKS:
        raise ValueError(f"block must be one of {', '.join(BLOCKS)}, not {block!r}")
    accel = _family_block(block, "accelerator")
    kind, path, name = check_files(spec)
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
            with opening(spec, "sim"):
                dev = open_sim(module)
            return dev, cfg, f"{module} (Verilated RTL)"
        return accel.load("device")(cfg), cfg, f"{module} (golden model)"
    if kind == "pynq":
        from sw.driver import PynqDevice
        where = {"overlay": _OVERLAYS[path]} if path in _OVERLAYS else {"bitfile": path}
        with opening(spec, "pynq"):
            dev = PynqDevice(**where, name=name, vlnv=None if name else vlnv(accel.module))
        _OVERLAYS[path] = dev.overlay
        return dev, None, f"{block} on PYNQ ({dev.instance})"
    from sw.driver import XrtDevice
    kernel_block = _family_block(block, "kernel").name
    kernel = name or shipped_modules(family=block, role="kernel")[0]
    # The block is known here: a kernel of any name is opened as this block's kernel.
    with opening(spec, "xrt"):
        dev = XrtDevice(path, kernel=kernel, block=kernel_block)
    return dev, None, f"{block} on XRT ({kernel})"
