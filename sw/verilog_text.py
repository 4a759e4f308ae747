"""Text passes on the emitted Verilog that make it behave the same in every simulator.

Yosys' Verilog backend (which Amaranth uses) starts each ``always @*`` block with a read of a
dummy register declared ``reg \\$auto$verilog_backend...$N = 0;``. Under Verilog-2005 semantics
the declaration's initialiser is a value change at time 0 that wakes every such block once, so
combinational logic that reads only constants or registers gets its first value. Under
SystemVerilog semantics (IEEE 1800: Icarus ``-g2012``, and Vivado's xsim when the files are
compiled as SV) a declaration initialiser runs before time 0 and is not an event, so those
blocks never run until an input changes: in ``gae_accel_n8`` the memory write address stays X
and the host's first AXI write is lost. And memories whose all-zero initialisers were dropped
(:func:`rtl_gen.emit.drop_zero_memory_init`) start at X in a 4-state simulator, where the FPGA's
RAMs start at zero (and Verilator's ``--x-initial 0`` builds do).

:func:`sim_safe` adds, after each dummy declaration, one assignment to it at ``#0`` -- the
inactive region of time 0, after every ``always`` block has reached its event control in either
semantics -- so each block runs once at time 0 under both standards; and after each memory
declaration without an initialiser, a loop that zeroes it at time 0. Each addition sits inside
``ifndef SYNTHESIS`` / ``ifndef VERILATOR``: synthesis (Yosys and Vivado define ``SYNTHESIS``)
and Verilator (2-state, evaluates every block at start-up, and would warn about the delay)
see exactly the text Amaranth wrote. :func:`synthesis_text` undoes the pass, so the timing
artefact keys its entries by what synthesis reads (:func:`sw.timing.verilog_sha256`).

Host side: no Amaranth.
"""

import re

__all__ = ["sim_safe", "synthesis_text", "SIM_ONLY_BEGIN"]

#: The first line of every block :func:`sim_safe` adds (a reason follows it).
SIM_ONLY_BEGIN = "`ifndef SYNTHESIS // simulation only"

_DUMMY = re.compile(r"^(  reg (\\\$auto\$verilog_backend\.cc:\d+:dump_module\$\d+) ) = 0;\n",
                    re.M)
_MEMORY = re.compile(r"^  reg (?:\[\d+:0\] )?(?P<name>\S+) \[(?P<last>\d+):0\];\n", re.M)
_ADDED = re.compile(r"^" + re.escape(SIM_ONLY_BEGIN) + r"[^\n]*\n`ifndef VERILATOR\n"
                    r"(?:(?!`endif\n)[^\n]*\n)*`endif\n`endif\n", re.M)


def _sim_only(reason: str, body: str) -> str:
    return f"{SIM_ONLY_BEGIN}: {reason}\n`ifndef VERILATOR\n{body}`endif\n`endif\n"


def _wake(m: re.Match) -> str:
    return m.group(0) + _sim_only("wake the always @* blocks at time 0",
                                  f"  initial #0 {m.group(2)}  = 1'h1;\n")


def sim_safe(text: str) -> str:
    """``text`` with a time-0 wake-up after each ``always @*`` dummy register and a time-0
    zeroing loop after each memory without an initialiser (module doc). Idempotent: a text
    that already has them is returned unchanged."""
    text = _DUMMY.sub(_wake, synthesis_text(text))
    count = iter(range(1 << 30))
    # The lines that can hold a memory's first initial word: searching them, not the whole
    # text, for each memory finds the same (a match lies within one line) in time linear in
    # the text, not in the text times the number of memories (3 s at 10 MB and 51 memories).
    first_words = "\n".join(line for line in text.split("\n") if "[0] = " in line)

    def zero(m: re.Match) -> str:
        name = m.group("name")
        ref = name + " " if name.startswith("\\") else name    # an escaped name ends at a space
        if re.search(rf"^\s*{re.escape(name)} ?\[0\] = ", first_words, re.M):
            return m.group(0)                     # initialised by Amaranth: keep its values
        return m.group(0) + _sim_only(
            "memories start at zero, as the FPGA's RAMs do",
            f"  initial begin : rlk_zero_{next(count)}\n    integer i;\n"
            f"    for (i = 0; i <= {m.group('last')}; i = i + 1) {ref}[i] = 0;\n  end\n")
    return _MEMORY.sub(zero, text)


def synthesis_text(text: str) -> str:
    """``text`` without the blocks :func:`sim_safe` added: what synthesis reads."""
    return _ADDED.sub("", text)
