"""UltraScale+ -2 delay model and register-to-register path walker for Yosys JSON netlists.

Used by ``scripts/timing.py`` (``make timing``); plain Python, no Yosys, so that the tests can
feed it hand-made netlists. **An estimate, not a timing sign-off: Vivado is the reference**
(``make vivado BOARD=ooc ACCEL=<module>`` writes and runs its out-of-context flow).

The model (:data:`MODEL`, nanoseconds, speed grade -2 at VCCINT 0.85 V)
----------------------------------------------------------------------
A path starts at a clocked output (flip-flop Q, block RAM DOUT, a DSP48E2 output behind PREG
or MREG, a LUT RAM or SRL output) with its clock-to-out, crosses cells with their delays and one
routing hop per net (none on the dedicated carry and DSP cascades), and ends at a clocked input
with its setup time; the clock uncertainty is added once. Ports are not timed (out of context,
as ``constraints/accel_ooc.xdc``).

Sources. DS925 (Zynq UltraScale+ MPSoC Data Sheet, v1.30, table "DSP48 Slice Switching
Characteristics", -2 at 0.85 V): FMAX 775 MHz with all registers, FMAX_MULT_NOMREG 544 MHz,
FMAX_NOPIPELINEREG (no MREG, no ADREG) 410 MHz; table "Clock Buffers": BUFG FMAX 775 MHz. The
DSP stage delays are these periods split: multiplier stage 1/775 MHz = 1.29 ns, ALU stage
1/544 - 1/775 = 0.55 ns, pre-adder 1/410 - 1/544 = 0.60 ns (a DSP without registers costs their
sum on a fabric path). DS925 publishes no CLB or interconnect delays, and its block RAM
clock-to-out figures were not reachable from here: the LUT, carry, flip-flop, routing, LUT RAM
and block RAM figures below are **assumptions** typical of Vivado timing reports on -2
UltraScale+ parts (Versal's DS958 gives a block RAM clock-to-out of 0.901 ns without and
0.262 ns with the output register at -2; UltraScale+ is a slower node, hence 1.20 and 0.35).
The routing term (0.35 ns a hop) is the largest uncertainty: on a congested placement Vivado
sees 0.5-1 ns, on a short local net 0.1 ns.

Carry chains: Yosys maps adders to CARRY4 even for ``-family xcup``; Vivado uses CARRY8, one
per 8 bits. Consecutive CARRY4 of a chain are paired (0-1, 2-3, ...) into CARRY8 units: entering
a unit costs ``carry8_in``, crossing into the next unit ``carry8_cascade``, and levels count
CARRY8 units.
"""

from dataclasses import dataclass, field

__all__ = ["MODEL", "Netlist", "analyze", "fmax_mhz"]

#: The delay model (ns); ``docs/timing.md`` tabulates it with the sources above.
MODEL = {
    "ff_clk_to_q": 0.10,        # assumed
    "ff_setup": 0.05,           # assumed
    "lut": 0.12,                # assumed (LUT1..LUT6, INV)
    "muxf": 0.10,               # assumed (MUXF7/8/9)
    "route": 0.35,              # assumed, per net hop
    "carry8_in": 0.25,          # assumed: S/DI into a CARRY8 to its CO/O
    "carry8_cascade": 0.05,     # assumed: CI to CO/O of each further CARRY8
    "dsp_mult": 1.29,           # DS925: 1 / FMAX 775 MHz (all registers)
    "dsp_alu": 0.55,            # DS925: 1 / FMAX_MULT_NOMREG 544 MHz - dsp_mult
    "dsp_preadd": 0.60,         # DS925: 1 / FMAX_NOPIPELINEREG 410 MHz - 1 / 544 MHz
    "dsp_setup": 0.30,          # assumed: fabric into a DSP input register
    "dsp_clk_to_out": 0.40,     # assumed: PREG/MREG to the fabric
    "bram_clk_to_out": 1.20,    # assumed (DS958 Versal -2: 0.901)
    "bram_clk_to_out_reg": 0.35,  # assumed (DS958 Versal -2: 0.262)
    "bram_setup": 0.45,         # assumed
    "lutram_read": 0.40,        # assumed: LUT RAM / SRL address to output
    "lutram_clk_to_out": 0.90,  # assumed: LUT RAM / SRL clock to output
    "lutram_setup": 0.30,       # assumed
    "clock_uncertainty": 0.10,  # assumed: skew and jitter, once a path
    "fmax_cap_mhz": 775.0,      # DS925: BUFG and DSP48E2 FMAX at -2
}

_LUTS = {"LUT1", "LUT2", "LUT3", "LUT4", "LUT5", "LUT6", "INV"}
_MUXF = {"MUXF7", "MUXF8", "MUXF9"}
_FFS = {"FDRE", "FDSE", "FDCE", "FDPE"}
_CARRY = {"CARRY4", "CARRY8"}
_BRAM = {"RAMB36E2", "RAMB18E2"}
_LUTRAM_PREFIX = ("RAM16X", "RAM32X", "RAM64X", "RAM128X", "RAM256X", "RAM512X", "RAM32M",
                  "RAM64M", "SRL16", "SRLC16", "SRLC32")
_UNTIMED = {"IBUF", "OBUF", "BUFG", "BUFGCE", "GND", "VCC", "IBUFG", "OBUFT"}
_DSP_CASCADE = {"ACIN": "ACOUT", "BCIN": "BCOUT", "PCIN": "PCOUT", "CARRYCASCIN": "CARRYCASCOUT",
                "MULTSIGNIN": "MULTSIGNOUT"}


def fmax_mhz(period_ns: float, model=MODEL) -> float:
    """Fmax (MHz) of a worst path of ``period_ns``, capped at the clock network's FMAX."""
    if not period_ns > 0:
        raise ValueError(f"period_ns must be positive, not {period_ns!r}")
    return min(1000.0 / period_ns, model["fmax_cap_mhz"])


def _int_param(cell, name, default=0):
    v = cell.get("parameters", {}).get(name, default)
    if isinstance(v, str):
        try:
            return int(v, 2) if set(v) <= {"0", "1"} and len(v) > 1 else int(v)
        except ValueError:
            return default
    return int(v)


def _str_param(cell, name, default=""):
    return str(cell.get("parameters", {}).get(name, default)).strip('"')


@dataclass
class Netlist:
    """One flattened module of a Yosys JSON netlist, indexed by bit.

    Parameters
    ----------
    cells : dict
        ``{name: {"type", "parameters", "port_directions", "connections"}}`` as ``write_json``
        writes them.
    netnames : dict, optional
        ``{name: {"bits": [...], "hide_name": 0 or 1}}``: names for the report.
    """
    cells: dict
    netnames: dict = field(default_factory=dict)

    @classmethod
    def from_json(cls, doc: dict, top: str | None = None) -> "Netlist":
        """The module ``top`` (or the only one) of a ``write_json`` document."""
        mods = doc.get("modules", {})
        if top is None:
            if len(mods) != 1:
                raise ValueError(f"top must name one of {', '.join(mods)}, not None")
            top = next(iter(mods))
        if top not in mods:
            raise ValueError(f"top must be a module of the netlist, not {top!r}")
        m = mods[top]
        return cls(m.get("cells", {}), m.get("netnames", {}))

    def __post_init__(self):
        self.driver = {}            # bit -> (cell, port, index)
        for name, c in self.cells.items():
            dirs = c.get("port_directions", {})
            for port, bits in c.get("connections", {}).items():
                if dirs.get(port) == "output":
                    for i, b in enumerate(bits):
                        if isinstance(b, int):
                            self.driver[b] = (name, port, i)
        self.names = {}
        for name, n in sorted(self.netnames.items(), key=lambda kv: kv[1].get("hide_name", 0)):
            bits = n.get("bits", [])
            for i, b in enumerate(bits):
                if isinstance(b, int) and b not in self.names:
                    self.names[b] = name if len(bits) == 1 else f"{name}[{i}]"
        self._chain = {}

    def bit_name(self, bit) -> str:
        """The public net name of a bit; for a Yosys-internal one (``$abc$...``), the line of
        the module's Verilog the cell driving it comes from (``"line 1234"``)."""
        name = self.names.get(bit, f"${bit}")
        if not name.startswith("$") or bit not in self.driver:
            return name
        cell = self.cells[self.driver[bit][0]]
        src = str(cell.get("attributes", {}).get("src", "")).split("|")[0]
        line = src.rpartition(":")[2].split(".")[0] if ":" in src else ""
        return f"line {line}" if line.isdigit() else name

    def carry_index(self, name) -> int:
        """Position of a CARRY4/CARRY8 in its chain (0 for the first)."""
        seq = []
        while name not in self._chain:
            seq.append(name)
            ci = self.cells[name]["connections"].get("CI", ["0"])[0]
            d = self.driver.get(ci)
            if d is None or self.cells[d[0]]["type"] not in _CARRY or d[1] != "CO" or d[0] in seq:
                self._chain[name] = 0
                seq.pop()
                break
            name = d[0]
        for n in reversed(seq):
            ci = self.cells[n]["connections"]["CI"][0]
            self._chain[n] = self._chain[self.driver[ci][0]] + 1
        return self._chain[seq[0] if seq else name]


# -- cell timing ------------------------------------------------------------------------------
def _kind(ctype: str) -> str:
    if ctype in _LUTS:
        return "lut"
    if ctype in _MUXF:
        return "muxf"
    if ctype in _FFS:
        return "ff"
    if ctype in _CARRY:
        return "carry"
    if ctype == "DSP48E2":
        return "dsp"
    if ctype in _BRAM:
        return "bram"
    if ctype.startswith(_LUTRAM_PREFIX):
        return "lutram"
    if ctype in _UNTIMED:
        return "untimed"
    return "unknown"


def _dsp_regs(cell) -> dict:
    regs = {r: _int_param(cell, r) for r in ("AREG", "BREG", "CREG", "DREG", "ADREG", "MREG",
                                               "PREG")}
    regs["preadd"] = "AD" in (_str_param(cell, "AMULTSEL", "A"), _str_param(cell, "BMULTSEL", "B"))
    regs["mult"] = _str_param(cell, "USE_MULT", "MULTIPLY") != "NONE"
    return regs


def _dsp_input_stage(port: str) -> str | None:
    """Which DSP stage an input feeds: "in" (A/B/D/INMODE), "alu" (C, OPMODE, ...), or None."""
    if port in ("A", "B", "D", "INMODE", "ACIN", "BCIN"):
        return "in"
    if port in ("C", "OPMODE", "ALUMODE", "CARRYIN", "CARRYINSEL", "PCIN", "CARRYCASCIN",
                "MULTSIGNIN"):
        return "alu"
    return None                     # CLK, CE*, RST*: clocked controls


def _dsp_in_to_out(regs, model) -> float:
    """Delay from an A/B input to P through the unregistered stages."""
    d = (model["dsp_preadd"] if regs["preadd"] and not regs["ADREG"] else 0.0)
    d += model["dsp_mult"] if regs["mult"] else 0.0
    return d + model["dsp_alu"]


def _dsp_internal(regs, model) -> float:
    """Worst register-to-register stage inside a DSP48E2 (0 if it has at most one register
    rank, i.e. no internal path)."""
    stages = [model["dsp_preadd"] if regs["preadd"] else 0.0,
              model["dsp_mult"] if regs["mult"] else 0.0, model["dsp_alu"]]
    ranks = [bool(regs["AREG"] or regs["BREG"]), bool(regs["ADREG"]), bool(regs["MREG"]),
             bool(regs["PREG"])]
    # stage k lies between rank k and rank k+1; sum stages between consecutive used ranks
    worst, acc, started = 0.0, 0.0, ranks[0]
    for k, stage in enumerate(stages):
        acc += stage
        if ranks[k + 1]:
            if started:
                worst = max(worst, acc)
            started, acc = True, 0.0
    return worst


def _arcs(nl: Netlist, name: str, cell: dict, model) -> tuple:
    """``(comb, starts, ends)`` of a cell: combinational arcs ``{(out_port, i): [(in_port, j,
    delay)]}``, clocked outputs ``{(out_port, i): clk_to_out}``, clocked inputs
    ``{(in_port, j): setup}``."""
    kind, ctype = _kind(cell["type"]), cell["type"]
    conns, dirs = cell.get("connections", {}), cell.get("port_directions", {})
    ins = [p for p in conns if dirs.get(p) == "input"]
    outs = [p for p in conns if dirs.get(p) == "output"]
    comb, starts, ends = {}, {}, {}
    if kind in ("lut", "muxf"):
        d = model[kind]
        for o in outs:
            for i in range(len(conns[o])):
                comb[(o, i)] = [(p, j, d) for p in ins for j in range(len(conns[p]))]
    elif kind == "ff":
        for o in outs:
            starts[(o, 0)] = model["ff_clk_to_q"]
        for p in ins:
            if p != "C":
                ends[(p, 0)] = model["ff_setup"]
    elif kind == "carry":
        new_unit = ctype == "CARRY8" or nl.carry_index(name) % 2 == 0
        cin = model["carry8_cascade"] if new_unit else 0.0
        for o in ("CO", "O"):
            for i in range(len(conns.get(o, []))):
                arcs = [(p, 0, cin) for p in ("CI", "CI_TOP", "CYINIT") if p in conns]
                arcs += [(p, j, model["carry8_in"]) for p in ("S", "DI") if p in conns
                         for j in range(i + 1)]
                comb[(o, i)] = arcs
    elif kind == "dsp":
        regs = _dsp_regs(cell)
        through = _dsp_in_to_out(regs, model)
        out_registered = regs["PREG"] or regs["MREG"]
        for o in outs:
            for i in range(len(conns[o])):
                if o in ("ACOUT", "BCOUT"):
                    continue
                if regs["PREG"]:
                    starts[(o, i)] = model["dsp_clk_to_out"]
                    continue
                if regs["MREG"]:
                    starts[(o, i)] = model["dsp_clk_to_out"] + model["dsp_alu"]
                arcs = []
                for p in ins:
                    stage = _dsp_input_stage(p)
                    if stage == "in" and not regs["MREG"]:
                        reg = regs["AREG"] if p in ("A", "ACIN") else regs["BREG"] \
                            if p in ("B", "BCIN") else regs["DREG"] if p == "D" else 0
                        if not reg:
                            arcs += [(p, j, through) for j in range(len(conns[p]))]
                    elif stage == "alu" and not (p == "C" and regs["CREG"]):
                        arcs += [(p, j, model["dsp_alu"]) for j in range(len(conns[p]))]
                if arcs:
                    comb[(o, i)] = arcs
        for p in ins:
            stage = _dsp_input_stage(p)
            reg = {"A": "AREG", "ACIN": "AREG", "B": "BREG", "BCIN": "BREG", "D": "DREG",
                   "C": "CREG"}.get(p)
            clocked = (stage is None and p != "CLK") or (reg and regs[reg]) \
                or (stage == "in" and regs["MREG"]) or (stage == "alu" and out_registered
                                                        and p != "C")
            if clocked:
                for j in range(len(conns[p])):
                    ends[(p, j)] = model["dsp_setup"]
    elif kind == "bram":
        for o in outs:
            if "CAS" in o:
                continue
            reg = _int_param(cell, "DOB_REG" if o.startswith(("DOUTB", "DOUTPB")) else "DOA_REG")
            for i in range(len(conns[o])):
                starts[(o, i)] = model["bram_clk_to_out_reg" if reg else "bram_clk_to_out"]
        for p in ins:
            if "CLK" not in p and "CAS" not in p:
                for j in range(len(conns[p])):
                    ends[(p, j)] = model["bram_setup"]
    elif kind == "lutram":
        addr = [p for p in ins if p.startswith(("A", "DPRA"))]
        for o in outs:
            for i in range(len(conns[o])):
                starts[(o, i)] = model["lutram_clk_to_out"]
                comb[(o, i)] = [(p, j, model["lutram_read"]) for p in addr
                                for j in range(len(conns[p]))]
        for p in ins:
            if p not in ("WCLK", "CLK") and p not in addr:
                for j in range(len(conns[p])):
                    ends[(p, j)] = model["lutram_setup"]
    return comb, starts, ends


def _dedicated(nl: Netlist, dbit, cell_type, port) -> bool:
    """A net on a dedicated cascade (no routing hop)."""
    d = nl.driver.get(dbit)
    if d is None:
        return False
    dtype = nl.cells[d[0]]["type"]
    if cell_type in _CARRY and port == "CI":
        return dtype in _CARRY and d[1] == "CO"
    return cell_type == "DSP48E2" and dtype == "DSP48E2" and _DSP_CASCADE.get(port) == d[1]


# -- the walk ---------------------------------------------------------------------------------
def _hop(nl, bit, cell_type, port, model) -> float:
    return 0.0 if _dedicated(nl, bit, cell_type, port) else model["route"]


def _levels(steps) -> dict:
    """Logic levels of a path: LUTs (with MUXF), CARRY8 units, DSPs crossed."""
    lut = sum(1 for s in steps if s["kind"] in ("lut", "muxf"))
    units = {(s["chain"], s["unit"]) for s in steps if s["kind"] == "carry"}
    dsp = sum(1 for s in steps if s["kind"] == "dsp")
    lutram = sum(1 for s in steps if s["kind"] == "lutram")
    return {"total": lut + len(units) + dsp + lutram, "lut": lut, "carry8": len(units),
            "carry4": sum(1 for s in steps if s["type"] == "CARRY4"), "dsp": dsp,
            "lutram": lutram}


def analyze(nl: Netlist, *, model=MODEL, paths: int = 3) -> dict:
    """The worst register-to-register paths of a netlist under ``model``.

    Parameters
    ----------
    nl : Netlist
    model : dict
        Delays in ns (:data:`MODEL`).
    paths : int
        How many worst paths to report (with distinct end registers).

    Returns
    -------
    dict
        ``period_ns`` (worst path, or 0 without any), ``fmax_mhz`` (None without a path),
        ``levels`` of the worst path, ``paths`` (each: ``ns``, ``start``, ``end``, ``levels``,
        ``cells``: the cells on it with their kind and delay), ``dsp`` (every DSP48E2: its
        register parameters, whether Yosys left it combinational, whether the flip-flops around
        it could be absorbed as AREG/BREG (``inputs_from_ffs``) and PREG (``outputs_to_ffs``:
        P read by flip-flops only)), ``bram`` (block RAMs and their output
        registers), ``unmodelled`` (cell types timed as path boundaries only) and
        ``combinational_loops``.
    """
    if not isinstance(paths, int) or paths < 1:
        raise ValueError(f"paths must be a positive integer, not {paths!r}")
    arcs, unknown = {}, set()
    for name, cell in nl.cells.items():
        if _kind(cell["type"]) == "unknown":
            unknown.add(cell["type"])
        arcs[name] = _arcs(nl, name, cell, model)
    arrival, pred, loops = {}, {}, 0
    IN_PROGRESS = object()

    def inputs_of(bit):
        cname, port, i = nl.driver[bit]
        comb, starts, _ = arcs[cname]
        return cname, starts.get((port, i)), comb.get((port, i), ())

    for root in list(nl.driver):
        if root in arrival:
            continue
        stack = [root]
        while stack:
            bit = stack[-1]
            if arrival.get(bit) is not None and arrival[bit] is not IN_PROGRESS:
                stack.pop()
                continue
            cname, start, comb = inputs_of(bit)
            conns, ctype = nl.cells[cname]["connections"], nl.cells[cname]["type"]
            if arrival.get(bit) is None and bit not in arrival:
                arrival[bit] = IN_PROGRESS
                pending = [b for p, j, _ in comb for b in [conns[p][j]]
                           if isinstance(b, int) and b in nl.driver and b not in arrival]
                if pending:
                    stack.extend(pending)
                    continue
            best, how = (start, ("start", cname)) if start is not None else (None, None)
            for p, j, d in comb:
                b = conns[p][j]
                a = arrival.get(b) if isinstance(b, int) else None
                if a is IN_PROGRESS:
                    loops += 1
                    continue
                if a is None:
                    continue
                t = a + _hop(nl, b, ctype, p, model) + d
                if best is None or t > best:
                    best, how = t, (b, cname)
            arrival[bit], pred[bit] = best, how
            stack.pop()

    ends = []
    for cname, (_, _, cell_ends) in arcs.items():
        cell = nl.cells[cname]
        for (p, j), setup in cell_ends.items():
            b = cell["connections"][p][j]
            a = arrival.get(b) if isinstance(b, int) else None
            if a is None or a is IN_PROGRESS:
                continue
            t = a + _hop(nl, b, cell["type"], p, model) + setup + model["clock_uncertainty"]
            ends.append((t, b, cname, p, j))
    ends.sort(key=lambda e: -e[0])

    def trace(bit):
        steps = []
        while True:
            how = pred.get(bit)
            if how is None:
                break
            src, cname = how
            cell = nl.cells[cname]
            kind = _kind(cell["type"])
            step = {"type": cell["type"], "kind": kind, "out": nl.bit_name(bit)}
            if kind == "carry":
                step["chain"] = _chain_root(nl, cname)
                idx = nl.carry_index(cname)
                step["unit"] = idx // 2 if cell["type"] == "CARRY4" else idx
            steps.append(step)
            if src == "start":
                break
            bit = src
        steps.reverse()
        return steps

    out, seen = [], set()
    for t, b, cname, p, j in ends:
        end_name = nl.bit_name(nl.cells[cname]["connections"].get("Q", [b])[0]) \
            if nl.cells[cname]["type"] in _FFS else f"{nl.cells[cname]['type']}.{p}[{j}]"
        key = end_name.split("[")[0]
        if key in seen:
            continue
        seen.add(key)
        steps = trace(b)
        start = steps[0] if steps else {"out": "?", "type": "?"}
        out.append({"ns": round(t, 3), "start": f"{start['out']} ({start['type']})",
                    "end": f"{end_name} ({nl.cells[cname]['type']}.{p})",
                    "levels": _levels(steps[1:] if steps else []),
                    "cells": [f"{s['type']}:{s['out']}" for s in steps]})
        if len(out) == paths:
            break

    p_bits = {b for c in nl.cells.values() if c["type"] == "DSP48E2"
              for b in c["connections"].get("P", []) if isinstance(b, int)}
    p_to_non_ff = set()             # P bits read by anything but a flip-flop's D
    for c in nl.cells.values():
        dirs = c.get("port_directions", {})
        for port, bits in c.get("connections", {}).items():
            if dirs.get(port) != "input" or (c["type"] in _FFS and port == "D"):
                continue
            p_to_non_ff.update(b for b in bits if b in p_bits)
    dsps, internal = [], 0.0
    for cname, cell in nl.cells.items():
        if cell["type"] != "DSP48E2":
            continue
        regs = _dsp_regs(cell)
        conns = cell["connections"]
        fed_by_ff = all(nl.driver.get(b, ("", "", 0))[0] and
                        nl.cells[nl.driver[b][0]]["type"] in _FFS
                        for p in ("A", "B") for b in conns.get(p, []) if isinstance(b, int))
        inner = _dsp_internal(regs, model)
        internal = max(internal, inner)
        dsps.append({"cell": cname, **{k: int(v) for k, v in regs.items()},
                     "combinational": not any(regs[r] for r in ("AREG", "BREG", "MREG",
                                                                 "PREG")),
                     "inputs_from_ffs": fed_by_ff,
                     "outputs_to_ffs": not any(b in p_to_non_ff for b in conns.get("P", [])),
                     "internal_ns": round(inner, 3)})
    brams = [{"cell": n, "type": c["type"], "DOA_REG": _int_param(c, "DOA_REG"),
              "DOB_REG": _int_param(c, "DOB_REG")}
             for n, c in nl.cells.items() if c["type"] in _BRAM]
    period = max(out[0]["ns"] if out else 0.0, internal)
    return {"period_ns": round(period, 3),
            "fmax_mhz": round(fmax_mhz(period, model), 1) if period else None,
            "levels": out[0]["levels"] if out else None,
            "paths": out, "dsp": dsps, "dsp_internal_ns": round(internal, 3), "bram": brams,
            "unmodelled": sorted(unknown), "combinational_loops": loops}


def _chain_root(nl: Netlist, name: str) -> str:
    while True:
        ci = nl.cells[name]["connections"].get("CI", ["0"])[0]
        d = nl.driver.get(ci)
        if d is None or nl.cells[d[0]]["type"] not in _CARRY or d[1] != "CO":
            return name
        name = d[0]
