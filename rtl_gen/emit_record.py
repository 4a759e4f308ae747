"""What an emission read and wrote, so that a check of ``hdl/`` need not emit it again.

``python -m rtl_gen shipped --out hdl --record build/hdl_record.json`` (``make``) writes, next to
the Verilog, a record: the :func:`source_digest` of everything the emission read (the Python
sources of ``rtl_gen`` and ``sw``, ``hdl/timing.json``, Amaranth's version) and the SHA-256 of
every file it wrote per module. Emission is deterministic, so while the sources are unchanged a
module whose files still have the recorded digests is what the generators produce now:
``tb/test_hdl.py`` checks that instead of elaborating the module a second time, and emits it
again whenever the sources, the parameters or any file differ (or no record exists).
"""

import hashlib
import json
from importlib.metadata import version
from pathlib import Path

import sw
from sw.timing import TIMING_JSON

__all__ = ["source_digest", "file_digests", "write_record", "recorded"]

#: The package trees whose Python sources an emission reads.
SOURCE_TREES = (Path(__file__).resolve().parent, Path(sw.__file__).resolve().parent)


def source_digest(trees=SOURCE_TREES, timing=TIMING_JSON) -> str:
    """SHA-256 over every ``*.py`` under ``trees`` (path and bytes), the ``timing`` artefact the
    manifests' clocks come from, and the Amaranth version: what an emission depends on."""
    h = hashlib.sha256(f"amaranth {version('amaranth')}\n".encode())
    for tree in trees:
        tree = Path(tree)
        for path in sorted(tree.rglob("*.py")):
            h.update(f"{tree.name}/{path.relative_to(tree).as_posix()}\n".encode())
            h.update(hashlib.sha256(path.read_bytes()).digest())
    timing = Path(timing)
    h.update(hashlib.sha256(timing.read_bytes() if timing.exists() else b"").digest())
    return h.hexdigest()


def file_digests(directory) -> dict:
    """``{file name: SHA-256}`` of the files in ``directory`` (one module's output)."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(Path(directory).iterdir()) if p.is_file()}


def write_record(path, out_dir, entries, digest: str):
    """Write the record of the modules ``entries`` (``(module, block, params)``) emitted to
    ``out_dir/<module>/`` from sources of ``digest`` (taken before emitting)."""
    out_dir = Path(out_dir)
    record = {"sources": digest, "modules": {
        module: {"block": block, "params": params,
                 "files": file_digests(out_dir / module)}
        for module, block, params in entries}}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")


def recorded(path, out_dir, module: str, block: str, params: dict, digest: str) -> bool:
    """True if the record at ``path`` says that sources of ``digest`` emitted ``module`` (as
    ``block`` with ``params``) to exactly the files now in ``out_dir/<module>/``; False when
    there is no record, the sources or parameters changed, or any file differs."""
    try:
        record = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return False
    entry = record.get("modules", {}).get(module) if isinstance(record, dict) else None
    if record.get("sources") != digest or not isinstance(entry, dict):
        return False
    if entry.get("block") != block or entry.get("params") != json.loads(json.dumps(params)):
        return False
    directory = Path(out_dir) / module
    return directory.is_dir() and entry.get("files") == file_digests(directory)
