"""The files the generated scripts use at Vivado time, found as package data.

Two kinds of file are sourced by path from the scripts in ``build/vivado/<module>/``:

``rlk_common.tcl``
    The TCL helpers every generated script sources; it lives in this package.
``constraints/``
    The XDC files. Their one source is the repository's top-level ``constraints/`` folder;
    ``pyproject.toml`` maps the data-only package ``rtl_gen.vivado.constraints`` onto it, so a
    wheel installs them as ``rtl_gen/vivado/constraints/*.xdc``.

Both are looked up through :func:`importlib.resources.files` relative to this package. In a
source checkout (used in place, or installed in editable mode) the mapping of the wheel does
not exist and ``constraints/`` is found at the root of the checkout the package runs from,
never at another checkout's.
"""

from importlib import resources
from pathlib import Path

__all__ = ["DATA", "data_path", "common_tcl", "constraints_dir"]

#: Package data the generated scripts refer to: file or folder name -> what it is.
DATA = {
    "rlk_common.tcl": "TCL helpers sourced by every generated script",
    "constraints": "XDC files (the repository's constraints/)",
}


def data_path(name: str) -> Path:
    """The file or folder ``name`` of :data:`DATA`, on disk.

    Parameters
    ----------
    name : str
        A key of :data:`DATA`.

    Returns
    -------
    Path
        Absolute. Inside the installed package, or, for a source checkout, at the checkout's
        root (``constraints/``).

    Raises
    ------
    ValueError
        ``name`` is not a key of :data:`DATA`.
    RuntimeError
        The package is not installed as files on disk (e.g. imported from a zip archive):
        Vivado needs the files at a path.
    FileNotFoundError
        Neither the installed nor the source-checkout location holds ``name``.
    """
    if name not in DATA:
        raise ValueError(f"name must be one of {', '.join(map(repr, DATA))}, not {name!r}")
    root = resources.files(__package__)
    if not isinstance(root, Path):
        raise RuntimeError(f"{__package__} is not installed as files on disk ({root!r}): the "
                           f"generated scripts refer to its {name} by path; install the "
                           f"package unpacked")
    root = root.resolve()
    packaged = root / name
    if packaged.exists():
        return packaged
    checkout = root.parents[1]
    if (checkout / "pyproject.toml").is_file() and (checkout / name).exists():
        return checkout / name
    raise FileNotFoundError(f"{name} ({DATA[name]}) is neither in the installed package "
                            f"({packaged}) nor in a source checkout ({checkout / name})")


def common_tcl() -> Path:
    """``rlk_common.tcl``, the TCL helpers the generated scripts source."""
    return data_path("rlk_common.tcl")


def constraints_dir() -> Path:
    """The folder of the XDC files (``zcu106.xdc``, ``alveo_kernel.xdc``, ``accel_ooc.xdc``)."""
    return data_path("constraints")
