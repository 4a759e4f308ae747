"""Text passes on the emitted Verilog that make it behave the same in every simulator.

Yosys' Verilog backend (which Amaranth uses) starts each ``always @*`` block with a read of a
dummy register declared ``reg \\$auto$verilog_backend...$N = 0;``. Under Verilog-2005 semantics
the declaration's initialiser is a value change at time 0 that wakes every such block once, so
combinational logic that reads only constants or registers gets its first value. Under
SystemVerilog semantics (IEEE 1800: Icarus ``-g2012``, and Vivado's xsim when the files are
compiled as SV) a declaration initialiser runs before time 0 and is not an event, so those
blocks never run until an input changes: in ``gae_accel_n8`` the memory write address stays X
and the host's first AXI write is lost.

:func:`sim_safe` adds, after each dummy declaration, one assignment to it at ``#0`` -- the
inactive region of time 0, after every ``always`` block has reached its event control in either
semantics -- so each block runs once at time 0 under both standards. The addition sits inside
``ifndef SYNTHESIS`` / ``ifndef VERILATOR``: synthesis (Yosys and Vivado define ``SYNTHESIS``)
and Verilator (2-state, evaluates every block at start-up, and would warn about the delay)
see exactly the text Amaranth wrote. :func:`synthesis_text` undoes the pass, so the timing
artefact keys its entries by what synthesis reads (:func:`sw.timing.verilog_sha256`).

Host side: no Amaranth.
"""

import re

__all__ = ["sim_safe", "synthesis_text", "SIM_ONLY_BEGIN"]

#: The first line of every block :func:`sim_safe` adds.
SIM_ONLY_BEGIN = "`ifndef SYNTHESIS // simulation only: wake the always @* blocks at time 0"

_DUMMY = re.compile(r"^(  reg (\\\$auto\$verilog_backend\.cc:\d+:dump_module\$\d+) ) = 0;\n",
                    re.M)
_ADDED = re.compile(re.escape(SIM_ONLY_BEGIN) + r"\n`ifndef VERILATOR\n  initial #0 [^\n]*\n"
                    r"`endif\n`endif\n")


def _wake(m: re.Match) -> str:
    return (f"{m.group(1)} = 0;\n{SIM_ONLY_BEGIN}\n`ifndef VERILATOR\n"
            f"  initial #0 {m.group(2)}  = 1'h1;\n`endif\n`endif\n")


def sim_safe(text: str) -> str:
    """``text`` with a time-0 wake-up after each ``always @*`` dummy register (module doc).
    Idempotent: a text that already has them is returned unchanged."""
    return _DUMMY.sub(_wake, synthesis_text(text))


def synthesis_text(text: str) -> str:
    """``text`` without the blocks :func:`sim_safe` added: what synthesis reads."""
    return _ADDED.sub("", text)
