"""Board flows: every generated file of an accelerator, and the commands that build it.

:func:`write_scripts` writes what the writers of :mod:`.package_ip`, :mod:`.zcu106_bd`,
:mod:`.alveo` and :mod:`.ooc_timing` generate; :func:`board_commands` lists the ``vivado`` and
``v++`` command lines that turn them into an IP and bitstream, an ``.xclbin`` or a timing
report.
"""

from pathlib import Path

from .alveo import alveo_xo_tcl, kernel_xml, vpp_link_cfg
from .model import BOARDS, Accelerator, check_accelerator
from .ooc_timing import ooc_timing_tcl
from .package_ip import package_ip_tcl
from .zcu106_bd import zcu106_bd_tcl, zcu106_flow

__all__ = ["write_scripts", "board_commands"]

def write_scripts(acc: Accelerator, out_dir) -> list:
    """Write every generated file of ``acc`` into ``out_dir``.

    A kernel (AXI master, no ``s_axi_mem``) gets ``kernel.xml``, and a ZCU106 script only if
    it is an accelerator driving its own master of at most 128 bits (the trainer's
    ``dqn_trainer_zcu106``: :func:`~.zcu106_bd.zcu106_flow`). Files whose text is unchanged are
    not rewritten (their time stamps stay).

    Parameters
    ----------
    acc : Accelerator
    out_dir : path
        Created if missing (``build/vivado/<module>``).

    Returns
    -------
    list of Path
        The files, written or already up to date.
    """
    check_accelerator(acc)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {"package_ip.tcl": package_ip_tcl(acc, out_dir)}
    if zcu106_flow(acc) is not None:
        files["zcu106_bd.tcl"] = zcu106_bd_tcl(acc, out_dir)
    files.update({
        "alveo_xo.tcl": alveo_xo_tcl(acc, out_dir),
        "alveo_u200.cfg": vpp_link_cfg(acc, "u200"),
        "alveo_u250.cfg": vpp_link_cfg(acc, "u250"),
        "ooc_timing.tcl": ooc_timing_tcl(acc, out_dir),
    })
    if acc.kernel is not None:
        files["kernel.xml"] = kernel_xml(acc)
    paths = []
    for name, text in files.items():
        p = out_dir / name
        if not p.exists() or p.read_text() != text:    # keep time stamps when unchanged
            p.write_text(text)
        paths.append(p)
    return paths


def _vivado(script: Path, log_dir: Path, *args) -> list:
    return ["vivado", "-mode", "batch", "-nojournal", "-log", str(log_dir / f"{script.stem}.log"),
            "-source", str(script), *(["-tclargs", *map(str, args)] if args else [])]


def board_commands(module: str, board: str, out_dir, *, part: str | None = None) -> list:
    """Commands (argument lists) that build ``module`` for ``board`` from ``out_dir``'s scripts.

    Parameters
    ----------
    module : str
        Accelerator name (``hdl/<module>``).
    board : str
        A key of :data:`BOARDS` or ``"ooc"`` (out-of-context timing on ``part``).
    out_dir : path
        ``build/vivado/<module>``, holding :func:`write_scripts`'s output.
    part : str, optional
        Part of the ``"ooc"`` run (default the ZCU106's).

    Returns
    -------
    list of list of str
        The commands, in order; each runs from ``out_dir``.

    Raises
    ------
    ValueError
        ``board`` is neither a key of :data:`BOARDS` nor ``"ooc"``.
    """
    d = Path(out_dir)
    if board == "ooc":
        p = part or BOARDS["zcu106"].part
        return [_vivado(d / "ooc_timing.tcl", d, p, d / f"ooc_{p}")]
    if board not in BOARDS:
        raise ValueError(f"board must be one of {', '.join([*BOARDS, 'ooc'])}, not {board!r}")
    if BOARDS[board].flow == "bd":
        return [_vivado(d / "package_ip.tcl", d), _vivado(d / "zcu106_bd.tcl", d)]
    return [_vivado(d / "alveo_xo.tcl", d, d / "alveo"),
            ["v++", "--link", "--target", "hw", "--config", str(d / f"alveo_{board}.cfg"),
             "--temp_dir", str(d / f"_x_{board}"), "-o", str(d / f"{module}_{board}.xclbin"),
             str(d / "alveo" / f"{module}.xo")]]


