"""``python -m rtl_gen regs``: SystemRDL and IP-XACT of the register maps, of the shipped
modules (``--module``) or of any generated configuration (``--manifest``,
:func:`sw.manifest.load_manifest`).

SystemRDL is :func:`sw.rdl.to_systemrdl` of the register description with the configuration's
constants as the HW_* fields' reset values (:meth:`sw.regmap.RegisterMap.with_constant_resets`:
what the hardware reads). IP-XACT (IEEE 1685-2009,
the ``spirit`` schema of Vivado's ``component.xml``) is made from that SystemRDL by
``systemrdl-compiler`` and PeakRDL-ipxact (the ``regs`` extra), with the VLNV the IP is
packaged under (:func:`sw.registry.vlnv`). docs/regs.md.
"""

from pathlib import Path

from sw.manifest import Generated
from sw.rdl import to_systemrdl
from sw.registry import LIBRARY, VENDOR, VERSION, shipped, shipped_config

__all__ = ["FORMATS", "regmap_modules", "compile_rdl", "export"]

FORMATS = ("rdl", "ipxact")


def regmap_modules() -> list:
    """The shipped modules that have a register map (accelerators and kernels)."""
    return [m for m, b, _ in shipped() if shipped_config(m)[0].regmap is not None]


def _regmap(module):
    """``(module name, register map with its constants' resets)`` of a shipped module name or
    a generated configuration (:class:`~sw.manifest.Generated`)."""
    if isinstance(module, Generated):
        if module.block.regmap is None:
            raise ValueError(f"manifest {str(module.path)!r} must be of a block with a register "
                             f"map, not of {module.block.name!r} (a building block without a "
                             f"control port)")
        block, cfg, name = module.block, module.config, module.module
    elif module not in regmap_modules():
        raise ValueError(f"module must be a shipped module with a register map "
                         f"({', '.join(regmap_modules())}), not {module!r}")
    else:
        (block, cfg), name = shipped_config(module), module
    return name, block.regmap(cfg).with_constant_resets(cfg)


def compile_rdl(path):
    """The elaborated root of a SystemRDL file (``systemrdl-compiler``; ``ImportError`` naming
    the ``regs`` extra if it is missing, ``ValueError`` if it does not compile)."""
    try:
        from systemrdl import RDLCompileError, RDLCompiler
    except ImportError as e:
        raise ImportError("SystemRDL needs the 'regs' extra (pip install -e '.[regs]': "
                          "systemrdl-compiler, peakrdl-ipxact)") from e
    rdlc = RDLCompiler()
    try:
        rdlc.compile_file(str(path))
        return rdlc.elaborate()
    except RDLCompileError as e:
        raise ValueError(f"{path}: does not compile as SystemRDL ({e})") from None


def export(module, fmt: str, out_dir) -> Path:
    """Write ``<out_dir>/<module>.rdl`` (``fmt="rdl"``) or ``<module>.rdl`` and
    ``<module>.xml`` (``"ipxact"``); returns the path of the requested file. ``module``: a
    shipped module's name, or a generated configuration
    (:func:`sw.manifest.load_manifest`)."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    module, rm = _regmap(module)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rdl = out_dir / f"{module}.rdl"
    rdl.write_text(to_systemrdl(rm, name=module))
    if fmt == "rdl":
        return rdl
    root = compile_rdl(rdl)
    from peakrdl_ipxact import IPXACTExporter, Standard

    xml = out_dir / f"{module}.xml"
    IPXACTExporter(vendor=VENDOR, library=LIBRARY, version=VERSION,
                   standard=Standard.IEEE_1685_2009).export(root.top, str(xml))
    return xml
