"""Verilog and manifests: how a registered block configuration becomes files.

:func:`emit` elaborates a block of :data:`sw.registry.BLOCKS` (its component from
:data:`rtl_gen.blocks.GATEWARE`) and writes ``<module>.v``, its manifest ``<module>.json``
(configuration, formats, latency and throughput from the block's spec, ports, register files,
Vitis kernel arguments) and, for blocks with a control port, the
register map as JSON, C header and Markdown (with the memory window's layout, for a block with
one: :meth:`sw.registry.Block.memory_window`). The CLI (``python -m rtl_gen``), the Makefile
(through the CLI), the tests and the Vivado flow all go through it, so what is shipped is what
is tested.
"""

import dataclasses
import json
import re
from pathlib import Path

from amaranth.hdl import Shape
from amaranth.lib import data, wiring

from sw.console import progress_bar
from sw.registry import BLOCKS, SHIPPED, shipped_modules
from sw.registry import block as find_block
from sw.regfiles import register_files
from sw.timing import manifest_clock, timing_file
from sw.verilog_text import sim_safe

from .blocks import build
from .convert import convert, drop_zero_memory_init

__all__ = ["emit", "port_table", "to_verilog", "drop_zero_memory_init", "manifest",
           "shipped_table", "check_module_name", "VERILOG_KEYWORDS"]

#: Reserved words of Verilog-2005 (IEEE 1364-2005, Annex B): not usable as a module name.
VERILOG_KEYWORDS = frozenset("""
    always and assign automatic begin buf bufif0 bufif1 case casex casez cell cmos config
    deassign default defparam design disable edge else end endcase endconfig endfunction
    endgenerate endmodule endprimitive endspecify endtable endtask event for force forever fork
    function generate genvar highz0 highz1 if ifnone incdir include initial inout input instance
    integer join large liblist library localparam macromodule medium module nand negedge nmos nor
    noshowcancelled not notif0 notif1 or output parameter pmos posedge primitive pull0 pull1
    pulldown pullup pulsestyle_onevent pulsestyle_ondetect rcmos real realtime reg release repeat
    rnmos rpmos rtran rtranif0 rtranif1 scalared showcancelled signed small specify specparam
    strong0 strong1 supply0 supply1 table task time tran tranif0 tranif1 tri tri0 tri1 triand
    trior trireg unsigned use uwire vectored wait wand weak0 weak1 while wire wor xnor xor
    """.split())
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


def check_module_name(name, arg="module"):
    """``name`` if it can name a Verilog module and its files (a letter or ``_``, then letters,
    digits and ``_``, at most 128 characters, not a Verilog keyword): no path separators, so
    the files stay in the output directory. ``ValueError`` naming ``arg`` otherwise."""
    if not isinstance(name, str) or not _IDENTIFIER.fullmatch(name) \
            or name in VERILOG_KEYWORDS:
        raise ValueError(f"{arg} must be a Verilog identifier (a letter or _, then letters, "
                         f"digits or _; not a keyword), not {name!r}")
    return name


def _layout_fields(shape):
    if isinstance(shape, data.StructLayout):
        return {name: {"offset": f.offset, "width": Shape.cast(f.shape).width,
                       "signed": Shape.cast(f.shape).signed} for name, f in shape}
    return None


def port_table(component: wiring.Component):
    """Flat Verilog ports of a component: name, direction, width, payload fields."""
    ports = []
    for path, member, _ in component.signature.flatten(component):
        name = "__".join(str(p) for p in path)
        shape = member.shape
        entry = {"name": name, "dir": "input" if member.flow == wiring.In else "output",
                 "width": Shape.cast(shape).width}
        fields = _layout_fields(shape)
        if fields:
            entry["fields"] = fields
        ports.append(entry)
    return ports


def to_verilog(component, name: str, *, progress=None) -> str:
    """Verilog of ``component`` as module ``name``: Amaranth's output without the all-zero
    memory initialisers (:func:`drop_zero_memory_init`), in time and memory linear in the size
    of the design (:func:`rtl_gen.convert.convert` leaves those initialisers out before Yosys
    rather than after, and writes each shared component, e.g. a tensor unit or a GAE PE, once
    per configuration as module ``<name>.<hint>`` in the same text), made to behave the same
    under Verilog-2005 and SystemVerilog semantics (:func:`sw.verilog_text.sim_safe`). ``progress``: a tqdm bar, advanced twice (see there)."""
    return sim_safe(convert(component, name, progress=progress))


def manifest(block, config, component, module: str, verilog_text: str | None = None, *,
             timing_path=None) -> dict:
    """The manifest of one emitted module (see the module docstring). With ``verilog_text``,
    ``"clock_mhz"`` gives the clock to quote, ``min(target, estimate)``, and the throughput per
    second at it (:func:`sw.timing.manifest_clock`, from ``timing_path``, by default
    ``hdl/timing.json``)."""
    out = {
        "block": block.name,
        "module": module,
        "summary": block.summary,
        "config": dataclasses.asdict(config),
        "latency": block.latency(config),
        "throughput": block.throughput(config),
        **({"clock_mhz": manifest_clock(module, verilog_text, block.throughput(config),
                                        path=timing_path)}
           if verilog_text is not None else {}),
        "formats": block.formats(config),
        "clock": "ap_clk (rising edge)" if "ap_clk" in component.signature.members
        else "clk (rising edge)",
        "reset": ("ap_rst_n (active low, synchronous)"
                  if "ap_rst_n" in component.signature.members
                  else "rst (active high, synchronous)"),
        "ports": port_table(component),
        "verilog": f"{module}.v",
    }
    kernel = block.kernel_args(config)
    if kernel is not None:
        out["kernel"] = kernel      # Vitis kernel arguments (rtl_gen.vivado's kernel.xml)
    if block.regmap is not None:
        # The register map, once, in every form its consumers read (see sw.regfiles).
        out["registers"] = {"json": f"{module}_regs.json", "c_header": f"{module}_regs.h",
                            "markdown": f"{module}_regs.md"}
    return out


def _timing_path(out_dir: Path, module: str):
    """Where the clock estimate of ``module`` emitted to ``out_dir`` is: its own
    ``<module>_timing.json`` there if ``scripts/timing.py --manifest`` wrote one (a fresh entry
    survives regenerating the same Verilog), else ``hdl/timing.json`` for a shipped module's
    name (None) and that file, not yet written, for any other."""
    own = timing_file(out_dir, module)
    return None if not own.exists() and module in shipped_modules() else own


def emit(block_name: str, params: dict, out_dir, *, module: str | None = None,
         progress: bool = False) -> dict:
    """Elaborate a block, write ``<module>.v`` and ``<module>.json`` (manifest) to ``out_dir``;
    with ``progress``, a progress line on stderr (the CLI's; large learners take minutes).

    Raises ``ValueError`` for unknown blocks, invalid parameters (message names the parameter)
    or a ``module`` name that is not a Verilog identifier (:func:`check_module_name`), before
    writing anything. Returns the manifest.
    """
    block = find_block(block_name)
    module = check_module_name(block.module if module is None else module)
    config = block.config.from_dict(params)
    component = build(block, config)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with progress_bar(total=2, desc=f"{module}: Verilog", unit="step", disable=not progress,
                      leave=False, bar_format="{desc} {n}/{total} [{elapsed}{postfix}]") as bar:
        text = to_verilog(component, module, progress=bar)
    (out_dir / f"{module}.v").write_text(text)
    man = manifest(block, config, component, module, text,
                   timing_path=_timing_path(out_dir, module))
    if block.regmap is not None:
        assert block.regmap(config) == component.regmap, \
            "the gateware's register map is not the spec's"
        for name, text in register_files(block.regmap(config), config, module,
                                         memory=block.memory_window(config)).items():
            (out_dir / name).write_text(text)
    (out_dir / f"{module}.json").write_text(json.dumps(man, indent=2) + "\n")
    return man


def shipped_table(manifests) -> str:
    """Markdown table of the shipped configurations (``hdl/shipped.md``, copied into the docs):
    module, block, its summary, the parameters given in :data:`~sw.registry.SHIPPED` (the others
    are the block's defaults) and the latency from the block's cycle model."""
    rows = ["| module | block | what | parameters (others default) | latency (cycles) |",
            "|---|---|---|---|---|"]
    given = {module: params for module, _, params in SHIPPED}
    for m in manifests:
        params = ", ".join(f"{k}={v}" for k, v in given[m["module"]].items()) or "defaults"
        lat = m.get("latency")
        text = f"{lat['cycles']}: {lat['of']}" if lat else "—"
        rows.append(f"| `{m['module']}` | `{m['block']}` | {m['summary']} | {params} | "
                    f"{text} |")
    return "\n".join(rows) + "\n"


assert set(BLOCKS) >= {b for _, b, _ in SHIPPED}
