"""Run a Vivado TCL script under tclsh with the stub commands of ``vivado_stubs.tcl``.

:func:`run_stubbed` sources the script as ``vivado -mode batch -source`` would and returns a
:class:`StubRecord`: every Vivado command called (with its arguments), the objects the stubs
modelled (IP-XACT core, bus interfaces, memory maps, registers, fields, block-design cells and
pins) with the properties the script set, and the script's error message if it stopped.
"""

import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
TCLSH = shutil.which("tclsh")

#: Skip marker for tests that need tclsh (Debian/Ubuntu: ``apt-get install tcl``).
needs_tclsh = pytest.mark.skipif(TCLSH is None, reason="tclsh not on PATH (apt-get install tcl)")


@dataclass
class StubRecord:
    """What a stubbed run did.

    Members
    -------
    error : str or None
        The message of the TCL error that stopped the script, None if it ran to the end.
    calls : list of list of str
        ``[command, arg, ...]`` for every stubbed Vivado command, in order.
    objects : dict
        Handle -> ``{"kind", "name", "parent", "props"}`` (property names upper case).
    """
    error: str | None
    calls: list
    objects: dict

    def calls_of(self, command: str) -> list:
        """The argument lists (without the command) of every call to ``command``."""
        return [c[1:] for c in self.calls if c[0] == command]

    def children(self, parent: str, kind: str) -> dict:
        """Objects of ``kind`` directly under handle ``parent``, by name."""
        return {o["name"]: dict(o, handle=h) for h, o in self.objects.items()
                if o["parent"] == parent and o["kind"] == kind}

    def of_kind(self, kind: str) -> dict:
        """Every object of ``kind``, by handle."""
        return {h: o for h, o in self.objects.items() if o["kind"] == kind}


def run_stubbed(script, *args, cwd=None, env=None, check=True) -> StubRecord:
    """Source ``script`` under tclsh with stub Vivado commands and ``argv`` = ``args``.

    Parameters
    ----------
    script : path
        The TCL (or XDC) file.
    *args : str
        What ``-tclargs`` would pass.
    cwd : path, optional
        Working directory (default the script's directory).
    env : dict, optional
        Extra environment variables (the stubs' knobs: STUB_WNS, STUB_NO_BOARD, ...).
    check : bool
        Raise if the script stopped with an error.
    """
    script = Path(script).resolve()
    cwd = Path(cwd or script.parent)
    fd, record = tempfile.mkstemp(suffix=".json", prefix=f"stub_{script.stem}_")
    os.close(fd)
    record = Path(record)
    res = subprocess.run([TCLSH, str(HERE / "run_stubbed.tcl"), str(record), str(script),
                          *map(str, args)], cwd=cwd, env={**os.environ, **(env or {})},
                         capture_output=True, text=True, timeout=120)
    try:
        assert res.returncode == 0 and record.stat().st_size, res.stdout + res.stderr
        data = json.loads(record.read_text())
    finally:
        record.unlink()
    out = StubRecord(data["error"], data["calls"], data["objects"])
    if check and out.error is not None:
        raise AssertionError(f"{script.name} stopped: {out.error}\n{res.stdout}{res.stderr}")
    return out
