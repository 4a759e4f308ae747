"""The clock of the generated modules: ``min(target, estimate)``, never an assumed clock alone.

Every throughput in seconds (manifests, ``docs/generated/``, benchmarks, RL programs) uses
:func:`clock_mhz`. The estimate of a shipped module comes from ``hdl/timing.json``, written by
``make timing`` (``scripts/timing.py``: Yosys ``synth_xilinx -family xcup`` and a
register-to-register walk of the mapped netlist under an UltraScale+ -2 delay model, see
``docs/timing.md``); that of any other generated configuration from ``<module>_timing.json``
beside its manifest (:func:`timing_file`, written by ``scripts/timing.py --manifest DIR``). An
artefact records the SHA-256 of each module's Verilog; an entry whose hash differs from the
Verilog is *stale* and is not used (the clock falls back to the target, labelled
``"assumed"``). ``tb/test_timing.py`` fails when any entry of ``hdl/timing.json`` is stale,
without Yosys.

This module is host side: no Amaranth, no Yosys.
"""

import hashlib
import json
from functools import lru_cache
from pathlib import Path

from .verilog_text import synthesis_text

__all__ = ["TARGET_MHZ", "HDL", "TIMING_JSON", "verilog_sha256", "load_timing", "entry",
           "status", "clock_mhz", "manifest_clock", "stale_modules", "timing_file"]

#: The clock every flow targets (Vivado constraints, block design, Vitis ``--kernel_frequency``).
TARGET_MHZ = 300

HDL = Path(__file__).resolve().parent.parent / "hdl"
#: The committed timing artefact (``make timing``).
TIMING_JSON = HDL / "timing.json"


def timing_file(directory, module: str) -> Path:
    """The timing artefact of a configuration generated outside ``hdl/``:
    ``<directory>/<module>_timing.json``, beside its manifest (``scripts/timing.py --manifest``
    writes it; :func:`rtl_gen.emit.emit` reads it when it regenerates the module there)."""
    return Path(directory) / f"{module}_timing.json"


def verilog_sha256(text: str) -> str:
    """SHA-256 (hex) of what synthesis reads of a Verilog text
    (:func:`sw.verilog_text.synthesis_text`: without the simulation-only time-0 wake-ups): the
    key that ties a timing entry to its Verilog."""
    return hashlib.sha256(synthesis_text(text).encode()).hexdigest()


@lru_cache(maxsize=4)
def _read(path: str, mtime_ns: int) -> dict:
    return json.loads(Path(path).read_text())


def load_timing(path=None) -> dict:
    """The timing artefact (``{"modules": {module: entry}, ...}``); empty if there is none."""
    path = Path(path or TIMING_JSON)
    try:
        return _read(str(path), path.stat().st_mtime_ns)
    except (OSError, json.JSONDecodeError):
        return {"modules": {}}


def entry(module: str, verilog_text: str | None = None, *, path=None) -> dict | None:
    """The timing entry of ``module`` if it is fresh, else None.

    Parameters
    ----------
    module : str
        Shipped module name (``"gae_pe_k2"``).
    verilog_text : str, optional
        The Verilog the entry must have been computed from; by default
        ``hdl/<module>/<module>.v``.
    path : path-like, optional
        The artefact (default ``hdl/timing.json``).
    """
    if not isinstance(module, str) or not module:
        raise ValueError(f"module must be a module name, not {module!r}")
    found = load_timing(path).get("modules", {}).get(module)
    if found is None:
        return None
    if verilog_text is None:
        v = HDL / module / f"{module}.v"
        if not v.is_file():
            return None
        verilog_text = v.read_text()
    return found if found.get("verilog_sha256") == verilog_sha256(verilog_text) else None


def clock_mhz(module: str, *, target: float = TARGET_MHZ, verilog_text: str | None = None,
              path=None) -> tuple:
    """The clock to quote for a module: ``(mhz, label)``.

    Returns ``(min(target, estimated Fmax), "estimated")`` when ``hdl/timing.json`` holds a
    fresh entry for the module (``"target"`` instead of ``"estimated"`` when the target is the
    lower of the two), else ``(target, "assumed")``. The estimate is Yosys plus a delay model,
    not Vivado: see ``docs/timing.md``.

    Parameters
    ----------
    module : str
        Shipped module name.
    target : float
        The clock the flows constrain (default :data:`TARGET_MHZ`).
    verilog_text, path
        As in :func:`entry`.
    """
    if not (isinstance(target, (int, float)) and target > 0):
        raise ValueError(f"target must be a positive number of MHz, not {target!r}")
    e = entry(module, verilog_text, path=path)
    if e is None:
        return float(target), "assumed"
    fmax = float(e["fmax_mhz"])
    return (fmax, "estimated") if fmax < target else (float(target), "target")


def manifest_clock(module: str, verilog_text: str, throughput: dict | None, *,
                   path=None) -> dict:
    """The ``"clock_mhz"`` record of a manifest: target, estimate, the clock used and the
    throughput per second at that clock (``per_cycle * MHz * 1e6``). ``path``: the artefact
    (default ``hdl/timing.json``; a generated configuration's :func:`timing_file`)."""
    e = entry(module, verilog_text, path=path)
    mhz, label = clock_mhz(module, verilog_text=verilog_text, path=path)
    if path is None or Path(path).resolve() == TIMING_JSON:
        source = ("hdl/timing.json (make timing)" if e else
                  "no fresh hdl/timing.json entry: run make timing")
    else:
        name = Path(path).name
        source = (f"{name} (scripts/timing.py --manifest)" if e else
                  f"no fresh {name} beside the manifest: run scripts/timing.py --manifest on "
                  f"its directory")
    out = {"target": TARGET_MHZ, "estimated_fmax": e["fmax_mhz"] if e else None,
           "used": round(mhz, 1), "label": label, "source": source}
    if throughput and throughput.get("per_cycle") is not None:
        out["throughput_per_second"] = throughput["per_cycle"] * mhz * 1e6
    return out


def status(module: str, *, path=None) -> str:
    """``"fresh"``, ``"stale"`` (an entry computed from other Verilog than
    ``hdl/<module>/<module>.v``) or ``"missing"`` (no entry: ``make timing`` has not run on it)."""
    if module not in load_timing(path).get("modules", {}):
        return "missing"
    return "fresh" if entry(module, path=path) is not None else "stale"


def stale_modules(modules, *, path=None) -> list:
    """The modules of ``modules`` whose entry in the artefact is stale."""
    return [m for m in modules if status(m, path=path) == "stale"]
