"""Command line: write Verilog and a manifest for a named block configuration.

Examples::

    python -m rtl_gen gae-pe --k 3 --mode lookahead --out build/gae_k3
    python -m rtl_gen gae-pe --config my_pe.json --out build/my_pe
    python -m rtl_gen shipped --out hdl          # every configuration shipped in hdl/
    python -m rtl_gen list                       # blocks and their parameters
    python -m rtl_gen regs --format ipxact --module gae_accel_n8 --out build/regs
    python -m rtl_gen regs --manifest build/replay_k8_4k --out build/regs   # any configuration
"""

import argparse
import dataclasses
import json
import os
import re
import sys
from pathlib import Path

from sw.manifest import load_manifest
from sw.registry import BLOCKS, SHIPPED

from .emit import check_module_name, emit, shipped_table
from .emit_record import source_digest, write_record
from .regs import FORMATS, export, regmap_modules


def _accepted(config_cls, name):
    """What ``config_cls`` accepts for parameter ``name`` (``"an integer in 1..16"``), read
    from its own validation message so that the help never restates a range; for a range that
    depends on other parameters, the one at their defaults. None if the message says nothing
    usable."""
    try:
        config_cls(**{name: None})
    except (ValueError, TypeError) as e:
        m = re.fullmatch(rf"{re.escape(name)} must be (.*), not None", str(e), re.S)
        return m.group(1) if m else None
    return None


def _param_help(config_cls, field):
    default = field.default
    if dataclasses.is_dataclass(default):
        default = dataclasses.asdict(default)
    accepted = _accepted(config_cls, field.name)
    return (f"{accepted}; " if accepted else "") + f"default {default!r}"


def _read_config_file(path: Path, block) -> dict:
    """The parameters of a ``--config`` JSON file; ``ValueError`` naming the file."""
    where = f"--config {path}"
    try:
        text = path.read_text()
    except OSError as e:
        raise ValueError(f"{where}: cannot read it ({e.strerror or e})") from None
    try:
        params = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{where}: must be JSON ({e})") from None
    if not isinstance(params, dict):
        raise ValueError(f"{where}: must hold a JSON object of parameters, not a "
                         f"{type(params).__name__}")
    names = {f.name for f in dataclasses.fields(block.config)}
    unknown = {k: v for k, v in params.items() if k not in names}
    if unknown:
        try:                                # the configuration's own message names them
            block.config.from_dict(unknown)
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None
    return params


def _check_out(path: Path) -> Path:
    """``path`` if ``--out`` can be a directory there: it is one, or it can be made (its
    nearest existing parent is a writable directory); ``ValueError`` naming ``--out``
    otherwise. Creates nothing: a parameter refused later leaves no empty directory."""
    where = f"--out {path}"
    if path.exists():
        if not path.is_dir():
            raise ValueError(f"{where}: must be a directory, and a file of that name exists")
        if not os.access(path, os.W_OK | os.X_OK):
            raise ValueError(f"{where}: the directory is not writable")
        return path
    for parent in path.absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                raise ValueError(f"{where}: cannot make the directory, {parent} is a file")
            if not os.access(parent, os.W_OK | os.X_OK):
                raise ValueError(f"{where}: cannot make the directory, {parent} is not "
                                 f"writable")
            break
    return path


def _parse_value(field, text):
    if text.lstrip().startswith("{"):
        try:
            return json.loads(text)       # a nested configuration, e.g. --pe '{"k": 3}'
        except json.JSONDecodeError as e:
            raise ValueError(f"{field.name} must be valid JSON: {e}") from None
    if field.type in (int, "int"):
        try:
            return int(text, 0)
        except ValueError:
            raise ValueError(f"{field.name} must be an integer, not {text!r}") from None
    return text


def _block_parser(sub, block):
    p = sub.add_parser(block.name, help=block.summary,
                       description=f"{block.summary}. Unset parameters take their defaults; "
                                   "a range that depends on other parameters is shown for "
                                   "their defaults.")
    p.add_argument("--out", required=True, type=Path, help="output directory")
    p.add_argument("--name", help=f"Verilog module name, also the files' names: a Verilog "
                                  f"identifier (default {block.module})")
    p.add_argument("--config", type=Path,
                   help="JSON file of parameters; command-line flags override it")
    for field in dataclasses.fields(block.config):
        p.add_argument(f"--{field.name.replace('_', '-')}", dest=field.name, metavar="V",
                       help=_param_help(block.config, field))
    p.set_defaults(block=block)
    return p


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m rtl_gen", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    for block in BLOCKS.values():
        _block_parser(sub, block)
    sp = sub.add_parser("shipped", help="emit every configuration shipped in hdl/")
    sp.add_argument("--out", required=True, type=Path)
    sp.add_argument("--record", type=Path, metavar="PATH",
                    help="also write what was emitted from which sources (make: "
                         "build/hdl_record.json; tb/test_hdl.py reads it)")
    sub.add_parser("list", help="list blocks and parameters")
    rp = sub.add_parser("regs", help="SystemRDL or IP-XACT of register maps (docs/regs.md)")
    rp.add_argument("--format", choices=FORMATS, default="rdl")
    rp.add_argument("--module", action="append",
                    help="a shipped module with a register map (repeatable; default all "
                         "shipped ones unless --manifest is given)")
    rp.add_argument("--manifest", action="append", type=Path, metavar="PATH",
                    help="any generated configuration with a register map: its manifest "
                         "<module>.json or the directory python -m rtl_gen wrote it to "
                         "(repeatable)")
    rp.add_argument("--out", required=True, type=Path)
    args = ap.parse_args(argv)

    try:
        if getattr(args, "out", None) is not None:
            _check_out(args.out)
        if args.command == "list":
            for block in BLOCKS.values():
                print(f"{block.name}: {block.summary}")
                for f in dataclasses.fields(block.config):
                    print(f"    --{f.name.replace('_', '-')} ({_param_help(block.config, f)})")
            return 0
        if args.command == "regs":
            generated = [load_manifest(p, argument="--manifest") for p in args.manifest or ()]
            modules = args.module or ([] if generated else regmap_modules())
            for module in [*modules, *generated]:
                print(f"wrote {export(module, args.format, args.out)}")
            return 0
        if args.command == "shipped":
            digest = source_digest()
            manifests = []
            for module, block, params in SHIPPED:
                manifests.append(emit(block, params, args.out / module, module=module,
                                      progress=True))
                print(f"wrote {args.out / module / module}.v")
            (args.out / "shipped.md").write_text(shipped_table(manifests))
            print(f"wrote {args.out / 'shipped.md'}")
            if args.record is not None:
                write_record(args.record, args.out, SHIPPED, digest)
                print(f"wrote {args.record}")
            return 0
        block = args.block
        if args.name is not None:
            check_module_name(args.name, "name")
        params = {}
        if args.config:
            params.update(_read_config_file(args.config, block))
        for field in dataclasses.fields(block.config):
            text = getattr(args, field.name)
            if text is not None:
                params[field.name] = _parse_value(field, text)
        manifest = emit(block.name, params, args.out, module=args.name, progress=True)
        lat = manifest["latency"]
        print(f"wrote {args.out / manifest['verilog']}"
              + (f" (latency {lat['cycles']} cycles: {lat['of']})" if lat else ""))
        return 0
    except (ValueError, TypeError, OSError, ImportError, json.JSONDecodeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
