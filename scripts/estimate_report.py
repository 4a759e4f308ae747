"""What a resource estimate is and how it reads (the library part of ``scripts/estimate.py``):
the UltraScale+ cell classes counted, the :class:`Design` and :class:`Estimate` records, the
parsers of Yosys ``stat`` and ``ltp`` output, and the plain-text tables. No Yosys run: that,
the cache and the command line are ``scripts/estimate.py``, which re-exports these names
(``import estimate`` keeps working for ``scripts/timing.py`` and the tests); what the numbers
mean is in its docstring.
"""

import re
from dataclasses import dataclass, field
from pathlib import Path


#: LUTs occupied by each LUT-RAM / shift-register primitive.
LUTRAM_WEIGHTS = {
    "RAM16X1S": 1, "RAM16X1D": 2, "RAM32X1S": 1, "RAM32X1D": 2, "RAM32X2S": 2,
    "RAM64X1S": 1, "RAM64X1D": 2, "RAM128X1S": 2, "RAM128X1D": 4, "RAM256X1S": 4,
    "RAM256X1D": 8, "RAM512X1S": 8, "RAM32M": 4, "RAM32M16": 8, "RAM64M": 4, "RAM64M8": 8,
    "SRL16E": 1, "SRLC16E": 1, "SRLC32E": 1,
}
LUT_CELLS = ("LUT1", "LUT2", "LUT3", "LUT4", "LUT5", "LUT6", "INV")
FF_CELLS = ("FDRE", "FDSE", "FDCE", "FDPE")
CARRY_CELLS = ("CARRY4", "CARRY8")
COLUMNS = ("lut", "lutram", "ff", "dsp", "bram36", "uram", "carry", "depth")


class EstimateError(Exception):
    """A design could not be prepared or synthesized; the message says why."""


@dataclass
class Design:
    """One Verilog design to estimate.

    Parameters
    ----------
    name : str
        Label in the table and the JSON output.
    verilog : Path
        The Verilog file.
    top : str
        Name of the top module.
    generated : dict, optional
        ``{"block": ..., "params": ...}`` when elaborated on the fly (``verilog`` is temporary).
    """
    name: str
    verilog: Path
    top: str
    generated: dict | None = None


@dataclass
class Estimate:
    """Synthesis result of one design.

    Parameters
    ----------
    design : Design
        What was synthesized.
    cells : dict of str to int
        Cell counts by type from Yosys ``stat``.
    depth : int or None
        Longest topological path in cells from ``ltp``, if it could be parsed.
    seconds : float
        Wall time of the Yosys run (from the cache entry when ``cached``).
    cached : bool
        The result was read from the cache.
    log : Path or None
        The Yosys log.
    netlist : Path or None
        The mapped netlist (gzipped Yosys JSON of the top module), if kept.

    Attributes
    ----------
    summary : dict
        ``summarize(cells)`` plus ``"depth"``: the numbers of one table row.
    """
    design: Design
    cells: dict
    depth: int | None
    seconds: float
    cached: bool = False
    log: Path | None = None
    netlist: Path | None = None
    summary: dict = field(init=False)

    def __post_init__(self):
        self.summary = summarize(self.cells)
        self.summary["depth"] = self.depth

    def to_dict(self) -> dict:
        """JSON-ready record: summary numbers, raw cell counts and provenance."""
        d = self.design
        source = {"generated": d.generated} if d.generated else {"verilog": str(d.verilog)}
        return {"name": d.name, **source, "module": d.top, **self.summary,
                "cells": dict(sorted(self.cells.items())),
                "yosys_seconds": round(self.seconds, 2), "cached": self.cached}


# -- parsing ---------------------------------------------------------------------------------------

_SECTION = re.compile(r"^=== (.+?) ===\s*$", re.MULTILINE)
_NEW_CELLS = re.compile(r"^\s*(\d+)\s+cells\s*$")               # yosys >= 0.50: "  2230 cells"
_NEW_TYPE = re.compile(r"^\s*(\d+)\s{2,}(\S+)\s*$")              # "    14   DSP48E2"
_OLD_CELLS = re.compile(r"^\s*Number of cells:\s+(\d+)\s*$")    # older: "Number of cells:  44"
_OLD_TYPE = re.compile(r"^\s+(\S+)\s+(\d+)\s*$")                 # "     DSP48E2      14"
_LTP = re.compile(r"Longest topological path in \S+ \(length=(\d+)\)")


def parse_stat(text: str, top: str | None = None) -> dict:
    """Cell counts by type from the output of Yosys ``stat``.

    Parameters
    ----------
    text : str
        Output of ``stat``; both the table layout of Yosys >= 0.50 and the older
        ``Number of cells:`` layout are understood.
    top : str, optional
        Module whose section to read when there are several; by default the section named
        ``design hierarchy`` (totals) if present, else the last one.

    Returns
    -------
    dict of str to int
        ``{cell type: count}``, for example ``{"LUT2": 413, "DSP48E2": 14, ...}``.

    Raises
    ------
    ValueError
        If the text holds no module section, or none named ``top``.
    """
    heads = list(_SECTION.finditer(text))
    if not heads:
        raise ValueError("no '=== module ===' section in the stat output")
    sections = {m.group(1).strip().lstrip("\\"): text[m.end():nxt.start() if nxt else len(text)]
                for m, nxt in zip(heads, heads[1:] + [None])}
    if top is not None:
        if top not in sections:
            raise ValueError(f"no stat section for module {top!r} (found {', '.join(sections)})")
        body = sections[top]
    else:
        body = sections.get("design hierarchy", list(sections.values())[-1])

    cells = {}
    in_cells = False
    for line in body.splitlines():
        if _NEW_CELLS.match(line) or _OLD_CELLS.match(line):
            in_cells, cells = True, {}
            continue
        if not in_cells:
            continue
        if m := _NEW_TYPE.match(line):
            cells[m.group(2)] = cells.get(m.group(2), 0) + int(m.group(1))
        elif (m := _OLD_TYPE.match(line)) and not line.lstrip().startswith("Number of"):
            cells[m.group(1)] = cells.get(m.group(1), 0) + int(m.group(2))
        elif line.strip():
            in_cells = False
    return cells


def parse_ltp(text: str) -> int | None:
    """Length of the longest topological path from Yosys ``ltp`` output, or None."""
    m = _LTP.search(text)
    return int(m.group(1)) if m else None


def summarize(cells: dict) -> dict:
    """Resource summary (LUT, LUTRAM, FF, DSP, BRAM36, URAM, CARRY) of cell counts by type."""
    def total(names):
        return sum(cells.get(n, 0) for n in names)
    bram36 = cells.get("RAMB36E2", 0) + 0.5 * cells.get("RAMB18E2", 0)
    return {
        "lut": total(LUT_CELLS),
        "lutram": sum(n * LUTRAM_WEIGHTS[c] for c, n in cells.items() if c in LUTRAM_WEIGHTS),
        "ff": total(FF_CELLS),
        "dsp": total(("DSP48E2",)),
        "bram36": int(bram36) if bram36.is_integer() else bram36,
        "uram": total(("URAM288",)),
        "carry": total(CARRY_CELLS),
    }


# -- tables ----------------------------------------------------------------------------------------

def format_table(results) -> str:
    """Plain-text table, one row per design."""
    head = ["design", "LUT", "LUTRAM", "FF", "DSP", "BRAM36", "URAM", "CARRY", "depth", "yosys"]
    rows = []
    for r in results:
        s = r.summary
        rows.append([r.design.name] + ["-" if s[c] is None else str(s[c]) for c in COLUMNS]
                    + ["cached" if r.cached else f"{r.seconds:.1f} s"])
    widths = [max(len(row[c]) for row in [head] + rows) for c in range(len(head))]

    def line(row):
        return "  ".join(cell.ljust(w) if c == 0 else cell.rjust(w)
                         for c, (cell, w) in enumerate(zip(row, widths)))
    return "\n".join([line(head), line(["-" * w for w in widths])] + [line(r) for r in rows])


def fit_table(results, devices) -> str:
    """Utilization of each result on its device: ``devices`` maps a design's name to a
    :class:`sw.boards.Device` (whole device, the platform shell not subtracted). LUTs with
    and without INV cells: old Yosys releases leave inverters as INV cells (0.23: 23,835 on
    ``learner_cartpole_s4`` against 0.70's 650) that Vivado folds into the LUTs they drive."""
    head = ["design", "device", "LUT", "LUT w/o INV", "FF", "DSP", "BRAM36", "URAM"]
    rows = []
    for r in results:
        dev = devices.get(r.design.name)
        if dev is None:
            continue
        s = r.summary
        used = {"LUT": s["lut"], "LUT w/o INV": s["lut"] - r.cells.get("INV", 0),
                "FF": s["ff"], "DSP": s["dsp"], "BRAM36": s["bram36"], "URAM": s["uram"]}
        budget = {"LUT": dev.lut, "LUT w/o INV": dev.lut, "FF": dev.ff, "DSP": dev.dsp,
                  "BRAM36": dev.bram36, "URAM": dev.uram}
        rows.append([r.design.name, dev.part]
                    + [f"{used[c]:,} ({100 * used[c] / budget[c]:.0f} %)" if budget[c]
                       else f"{used[c]:,}" for c in head[2:]])
    widths = [max(len(row[c]) for row in [head] + rows) for c in range(len(head))]
    return "\n".join("  ".join(cell.ljust(w) if c < 2 else cell.rjust(w)
                               for c, (cell, w) in enumerate(zip(row, widths)))
                     for row in [head, ["-" * w for w in widths]] + rows)
