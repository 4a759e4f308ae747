"""A configuration as ``python -m rtl_gen`` wrote it: its manifest and the files beside it.

``python -m rtl_gen <block> ... --out DIR`` writes ``DIR/<module>.v``, the manifest
``DIR/<module>.json`` (block, configuration, ports, latency, clock) and, for a block with a
control port, the register files ``DIR/<module>_regs.{json,h,md}``. :func:`load_manifest`
reads such a manifest back into the registry's block and the configuration object, so the
tools that take a shipped module name (``scripts/timing.py``, ``python -m rtl_gen regs``,
:func:`sw.driver.open_driver`) take any generated configuration as well. Host side: no
Amaranth.

Example::

    gen = load_manifest("build/replay_k8_4k")          # the directory, or .../replay_k8_4k.json
    gen.module, gen.block.name, gen.config.fanout       # 'replay_k8_4k', 'replay-accel', 8
"""

import json
from dataclasses import dataclass
from pathlib import Path

from sw.registry import BLOCKS, Block

__all__ = ["Generated", "load_manifest", "is_manifest"]

#: Keys every manifest of :func:`rtl_gen.emit.manifest` has.
_KEYS = ("block", "module", "config", "ports", "verilog")


@dataclass(frozen=True)
class Generated:
    """One generated configuration.

    Members
    -------
    path : Path
        The manifest ``<module>.json``.
    manifest : dict
        Its contents.
    block : Block
        The registry's block (:data:`sw.registry.BLOCKS`) the manifest names.
    config
        The block's configuration object, from the manifest's ``"config"``.
    """
    path: Path
    manifest: dict
    block: Block
    config: object

    @property
    def module(self) -> str:
        """The Verilog module name (also the files' names)."""
        return self.manifest["module"]

    @property
    def directory(self) -> Path:
        """Where the manifest, the Verilog and the register files are."""
        return self.path.parent

    @property
    def verilog(self) -> Path:
        return self.directory / self.manifest["verilog"]

    def file(self, key: str) -> Path | None:
        """The register file ``key`` (``"json"``, ``"c_header"``, ``"markdown"``) the manifest
        lists, or None for a block without a control port."""
        regs = self.manifest.get("registers")
        return self.directory / regs[key] if regs else None


def is_manifest(data) -> bool:
    """Whether ``data`` (parsed JSON) has the keys of a manifest :func:`rtl_gen.emit.emit`
    writes."""
    return isinstance(data, dict) and all(k in data for k in _KEYS)


def _manifest_path(path: Path, argument: str) -> Path:
    """The manifest file ``path`` names: itself, or in a directory ``<dir>/<dir name>.json``,
    else the only manifest in it (a ``<module>.json`` next to its ``<module>.v``)."""
    if path.is_file():
        return path
    if not path.is_dir():
        raise ValueError(f"{argument} must be a manifest <module>.json or the directory "
                         f"python -m rtl_gen wrote it to, not {str(path)!r} (no such file or "
                         f"directory)")
    own = path / f"{path.name}.json"
    if own.is_file():
        return own
    found = sorted(p for p in path.glob("*.json") if p.with_suffix(".v").is_file())
    if len(found) == 1:
        return found[0]
    if not found:
        raise ValueError(f"{argument} must be a manifest <module>.json or the directory "
                         f"python -m rtl_gen wrote it to, not {str(path)!r} (a directory "
                         f"without a <module>.json next to its <module>.v)")
    raise ValueError(f"{argument} {str(path)!r} holds {len(found)} manifests "
                     f"({', '.join(p.name for p in found)}): name one of them")


def load_manifest(path, *, argument: str = "manifest") -> Generated:
    """The generated configuration at ``path``.

    Parameters
    ----------
    path : str or Path
        A manifest ``<module>.json`` written by ``python -m rtl_gen`` (shipped ones under
        ``hdl/`` included), or the directory it is in (the ``--out`` of ``python -m rtl_gen``):
        ``<dir>/<dir name>.json``, else the only manifest there.
    argument : str
        How messages name ``path`` (a CLI passes its flag, ``"--manifest"``).

    Raises
    ------
    ValueError
        Naming ``argument``: no such file or directory, a directory without a manifest or
        with several, a file that is not JSON or not a manifest, a block the registry does not
        know, or a configuration its block refuses (the block's own message).
    """
    if not isinstance(path, (str, Path)) or not str(path):
        raise ValueError(f"{argument} must be the path of a manifest or of its directory, "
                         f"not {path!r}")
    file = _manifest_path(Path(path), argument)
    where = f"{argument} {str(file)!r}"
    try:
        data = json.loads(file.read_text())
    except OSError as e:
        raise ValueError(f"{where}: cannot read it ({e.strerror or e})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{where} must be a manifest written by python -m rtl_gen, not a "
                         f"file that is not JSON ({e})") from None
    if not is_manifest(data):
        raise ValueError(f"{where} must be a manifest written by python -m rtl_gen (a JSON "
                         f"object with {', '.join(map(repr, _KEYS))})")
    block = BLOCKS.get(data["block"])
    if block is None:
        raise ValueError(f"{where}: block must be one of {', '.join(BLOCKS)}, not "
                         f"{data['block']!r}")
    try:
        config = block.config.from_dict(data["config"])
    except (ValueError, TypeError) as e:
        raise ValueError(f"{where}: {e}") from None
    return Generated(file, data, block, config)
