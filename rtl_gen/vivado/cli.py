"""``python -m rtl_gen.vivado {scripts,run}``: write the scripts, run Vivado and v++.

``scripts`` writes every generated file of the accelerators in ``--hdl`` into
``<out>/<module>/`` (``make vivado-scripts``); ``run`` writes one accelerator's and runs the
flow of ``--board`` when ``vivado`` (and ``v++``) are on ``PATH``, else prints the commands and
exits with 3, so nothing pretends to have built (``make vivado``). Bad arguments exit with 2.
"""

import argparse
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from .alveo import DMA_GAP
from .flows import board_commands, write_scripts
from .model import BOARDS, Accelerator, find_accelerators, find_manifests
from .tcl import wrap
from .zcu106_bd import zcu106_refusal

__all__ = ["main"]

#: What ``run`` builds when ``--hdl`` holds several accelerators and ``--accel`` is not given
#: (the Makefile's ``ACCEL`` default).
DEFAULT_ACCEL = "gae_accel_n8"


def _accelerators(hdl: Path, wanted) -> dict:
    """Module -> manifest path of the accelerators at ``--hdl`` (the ``wanted`` names, or all).

    Raises ``ValueError`` naming ``--hdl`` or ``--accel`` when there is none, or when a wanted
    one is not there.
    """
    manifests = find_manifests(hdl, argument="--hdl")
    found = {m: manifests[m] for m in find_accelerators(hdl, argument="--hdl")}
    if not found:
        blocks = list(manifests)
        raise ValueError(
            f"--hdl {str(hdl)!r}: no accelerator found, i.e. no <module>.json manifest with a "
            f"register map next to its <module>.v, as `python -m rtl_gen` writes them"
            + (f" ({', '.join(blocks)}: {'a block' if len(blocks) == 1 else 'blocks'} without "
               f"a control interface)" if blocks else ""))
    for name in wanted or ():
        if name not in found:
            raise ValueError(f"--accel {name!r} is not an accelerator at --hdl {str(hdl)!r} "
                             f"(there: {', '.join(found)})")
    return {m: found[m] for m in wanted} if wanted else found


def main(argv=None) -> int:
    """``python -m rtl_gen.vivado {scripts,run}``: see ``--help`` and docs/boards.md.

    Parameters
    ----------
    argv : list of str, optional
        The arguments (default ``sys.argv[1:]``).

    Returns
    -------
    int
        0 on success; 2 for bad arguments or inputs (nothing found at ``--hdl``, an unknown
        board, a manifest that fails the checks of :class:`Accelerator`); 3 if ``vivado`` or
        ``v++`` is not on ``PATH`` (the commands are printed); else the failing tool's code.
    """
    ap = argparse.ArgumentParser(prog="python -m rtl_gen.vivado",
                                 description="Vivado and Vitis scripts generated from an "
                                 "accelerator's manifest and register map.")
    sub = ap.add_subparsers(dest="command", required=True)
    hdl_help = ("generator output: a manifest <module>.json, a directory holding manifests "
                "(python -m rtl_gen <block> --out DIR), or a tree of such directories "
                "(default ./hdl)")
    out_help = "scripts go to OUT/<module>/ (default ./build/vivado)"
    sp = sub.add_parser("scripts", help="write the TCL and v++ configurations")
    sp.add_argument("--hdl", type=Path, default=Path("hdl"), help=hdl_help)
    sp.add_argument("--out", type=Path, default=Path("build", "vivado"), help=out_help)
    sp.add_argument("--accel", action="append", help="accelerator(s) (default: all in --hdl)")
    rp = sub.add_parser("run", help="write the scripts of one accelerator and run its flow")
    rp.add_argument("--board", required=True, help="zcu106, u200, u250 or ooc")
    rp.add_argument("--accel", help=f"accelerator (default: the only one in --hdl, else "
                                    f"{DEFAULT_ACCEL})")
    rp.add_argument("--part", help="part of the ooc run (default the ZCU106's)")
    rp.add_argument("--hdl", type=Path, default=Path("hdl"), help=hdl_help)
    rp.add_argument("--out", type=Path, default=Path("build", "vivado"), help=out_help)
    args = ap.parse_args(argv)
    try:
        if args.command == "scripts":
            for name, manifest in _accelerators(args.hdl, args.accel).items():
                acc = Accelerator.load(manifest)
                for p in write_scripts(acc, args.out / name):
                    print(f"wrote {p}")
            return 0
        if args.board not in (*BOARDS, "ooc"):
            raise ValueError(f"BOARD must be one of {', '.join([*BOARDS, 'ooc'])}, "
                             f"not {args.board!r}")
        found = _accelerators(args.hdl, [args.accel] if args.accel else None)
        if len(found) > 1:
            if DEFAULT_ACCEL not in found:
                raise ValueError(f"--hdl {str(args.hdl)!r} holds {len(found)} accelerators "
                                 f"({', '.join(found)}): name one with --accel")
            found = {DEFAULT_ACCEL: found[DEFAULT_ACCEL]}
        (manifest,) = found.values()
        acc = Accelerator.load(manifest)
        if args.board in BOARDS and BOARDS[args.board].flow == "bd" and \
                zcu106_refusal(acc) is not None:
            raise ValueError(f"{acc.module} is {zcu106_refusal(acc)}: build it for u200 or "
                             f"u250, not {args.board}")
        out = (args.out / acc.module).resolve()     # absolute: the commands run from there
        write_scripts(acc, out)
    except (ValueError, OSError, KeyError, json.JSONDecodeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    commands = board_commands(acc.module, args.board, out, part=args.part)
    tools = sorted({c[0] for c in commands})
    missing = [t for t in tools if shutil.which(t) is None]
    if BOARDS.get(args.board) and BOARDS[args.board].flow == "vitis" and \
            not any(i.startswith("m_axi_") for i in acc.interfaces):
        note = f"note: the {args.board} flow stops before package_xo for {acc.module}: {DMA_GAP}"
        print("\n".join(wrap(note, 96)), file=sys.stderr)
    if missing:
        print(f"error: {' and '.join(missing)} not found on PATH, so nothing was built.\n"
              f"The scripts are in {out}. On a machine with Vivado/Vitis (settings64.sh "
              f"sourced), run:", file=sys.stderr)
        for c in commands:
            print("  " + shlex.join(c), file=sys.stderr)
        return 3
    for c in commands:
        print("+ " + shlex.join(c), flush=True)
        res = subprocess.run(c, cwd=out)
        if res.returncode != 0:
            print(f"error: {c[0]} failed with exit code {res.returncode}", file=sys.stderr)
            return res.returncode
    return 0
