"""The Verilated RTL of an accelerator as an ordinary :class:`~sw.driver.mmio.Device`.

:func:`open_sim` has the generator build the accelerator's Verilator model once (its command
``python -m rtl_gen.sim_build``, :mod:`rtl_gen.sim_build`; cached under ``build/sim/``, shared
with the test suite's builds of the same configuration), then runs it with :func:`start_sim`:
the simulator in a subprocess running the cocotb test :mod:`sw.driver.sim_server`, and a
:class:`SimProcessDevice` whose register, memory, interrupt and clock calls are served there by
:class:`~sw.driver.sim.SimDevice` over a loopback connection. The unchanged drivers run against
it from ordinary Python::

    from sw.driver import GaeDriver, open_sim

    with open_sim("gae_accel_n8") as dev:              # a shipped module, or a block and params
        adv, ret = GaeDriver(dev).compute(rewards, values, dones, last_values, 0.99, 0.95)

Time (:meth:`~SimProcessDevice.time`, timeouts) is simulation time, and none passes between
calls. The RL programs take it as ``--device sim`` (:mod:`sw.rl.devices`). It needs the ``dev``
extra (cocotb, cocotbext-axi, Verilator), and the generator (Amaranth) in the build's process;
this module imports neither Amaranth nor :mod:`rtl_gen`.
"""

import importlib.util
import json
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import weakref
from multiprocessing.connection import Listener
from pathlib import Path

from .mmio import BusError, Device, MemoryPort, Mmio, check_offset, check_word

__all__ = ["open_sim", "start_sim", "SimProcessDevice", "SIM_BLOCKS", "BUILD_COMMAND"]

ROOT = Path(__file__).resolve().parents[2]

#: Blocks with the ports :class:`~sw.driver.sim.SimDevice` drives (AXI4-Lite control, an AXI4
#: memory slave or the trainer's storage master, ``interrupt``): the accelerators, not the
#: window DMA kernels.
SIM_BLOCKS = ("gae-accel", "replay-accel", "learner", "dqn-trainer")

#: The generator's command that builds a model (:mod:`rtl_gen.sim_build`; the block, then
#: ``--params JSON`` and ``--cache-dir DIR`` follow).
BUILD_COMMAND = (sys.executable, "-m", "rtl_gen.sim_build")


def _need(module, extra="dev"):
    try:
        return __import__(module, fromlist=["_"])
    except ImportError as e:
        raise ImportError(f"the simulator device needs {module.split('.')[0]} (pip install -e "
                          f"'.[{extra}]', or make)") from e


def _check_run(clock_period_ns):
    """Refuse a bad clock period, and name the ``dev`` extra if a package of the simulator is
    missing (before anything is built or started)."""
    if isinstance(clock_period_ns, bool) or not isinstance(clock_period_ns, int) \
            or clock_period_ns < 1:
        raise ValueError(f"clock_period_ns must be a positive integer, not {clock_period_ns!r}")
    for need in ("cocotb", "cocotbext.axi", "cocotb_tools.runner"):
        _need(need)


def _env(**extra) -> dict:
    """This process's environment with this checkout first on ``PYTHONPATH`` (the build and the
    simulator import its packages) and ``extra``."""
    return dict(os.environ, **extra,
                PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH"))
                                           if p))


def _build(block: str, params: dict, *, cache_dir=None, announce=None) -> tuple:
    """``(build_dir, module)`` of the Verilator model of ``block`` with ``params``, built by
    :data:`BUILD_COMMAND` (nothing to compile if the cache holds it).
    ``announce(building, build_dir)``, if given, is called before the build step with whether
    the model must be compiled. ``ImportError`` naming what is missing if the generator
    (Amaranth, :mod:`rtl_gen`) or Verilator is not installed, ``RuntimeError`` with the
    command's message if it fails."""
    for package in ("amaranth", "rtl_gen"):         # found, not imported
        if importlib.util.find_spec(package) is None:
            raise ImportError(f"building the simulator's model needs the generator "
                              f"(amaranth, rtl_gen): {package} is not installed")
    _need("verilator")
    command = [*BUILD_COMMAND, block, "--params", json.dumps(params)]
    if cache_dir is not None:
        command += ["--cache-dir", str(cache_dir)]
    result = None
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(command, env=_env(), stdout=subprocess.PIPE, stderr=err,
                                stdin=subprocess.DEVNULL, text=True)
        try:
            for line in proc.stdout:                # its JSON lines (rtl_gen.sim_build)
                reply = json.loads(line)
                if "building" in reply and announce is not None:
                    announce(reply["building"], Path(reply["build_dir"]))
                if "module" in reply:
                    result = Path(reply["build_dir"]), reply["module"]
        except BaseException:                       # interrupted: no build left running
            proc.kill()
            raise
        finally:
            proc.stdout.close()
            proc.wait()
        err.seek(0)
        message = err.read().strip()
    if proc.returncode != 0 or result is None:
        raise RuntimeError(f"the model of {block} {params} was not built "
                           f"({' '.join(command)}, exit status {proc.returncode}):\n"
                           f"{message[-2000:]}")
    return result


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
        test_dir=build_dir / "serve",
        results_xml=str(build_dir / "serve" / f"results-{os.getpid()}.xml"),
        extra_env={k: os.environ[k] for k in ("RLK_SIM_ADDRESS", "RLK_SIM_AUTHKEY",
                                              "RLK_SIM_PERIOD_NS")})


def start_sim(build_dir, module: str, *, clock_period_ns=4, start_timeout: float = 120.0,
              label: str | None = None) -> SimProcessDevice:
    """A :class:`SimProcessDevice` on the built Verilator model of ``module`` in ``build_dir``
    (:func:`rtl_gen.sim_build.build_sim` builds one): the simulator in a subprocess, clocked at
    ``clock_period_ns``. ``label`` names it in messages (default ``module``). ``RuntimeError``
    with the simulator's log if it does not start within ``start_timeout`` seconds."""
    build_dir = Path(build_dir)
    _check_run(clock_period_ns)
    label = module if label is None else label
    key = secrets.token_bytes(16)
    listener = Listener(("127.0.0.1", 0), authkey=key)
    host, port = listener.address
    (build_dir / "serve").mkdir(exist_ok=True)
    log = build_dir / "serve" / f"serve-{os.getpid()}-{port}.log"
    env = _env(RLK_SIM_ADDRESS=f"{host}:{port}", RLK_SIM_AUTHKEY=key.hex(),
               RLK_SIM_PERIOD_NS=str(clock_period_ns),
               RLK_SIM_RUN=json.dumps({"build_dir": str(build_dir), "module": module}))
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


def open_sim(target: str = "gae_accel_n8", params=None, *, cache_dir=None, clock_period_ns=4,
             start_timeout: float = 120.0, quiet: bool = False) -> SimProcessDevice:
    """A :class:`SimProcessDevice` on the Verilated RTL of ``target``: a shipped accelerator
    module (``"gae_accel_n8"``, ``"replay_accel_k16"``, ``"learner_cartpole_s4"``), or a block
    of :data:`SIM_BLOCKS` with ``params`` (a dict or its configuration). The first call per
    configuration builds the model (:data:`BUILD_COMMAND`, minutes); later ones start in
    seconds (:func:`start_sim`). ``ImportError`` naming the extra if cocotb or Verilator is
    missing; ``RuntimeError`` with the simulator's log if it does not start within
    ``start_timeout`` seconds. Unless ``quiet``, one line on stderr says whether the model is
    being built (only when it must be compiled) or was built before, and that it is started."""
    block, params = _target(target, params)
    _check_run(clock_period_ns)
    label = target if block != target else f"{block} {params}"

    def announce(building, build_dir):
        if building:
            print(f"open_sim: building the Verilated RTL of {label} (once per configuration: "
                  f"minutes) in {build_dir}, then starting it", file=sys.stderr, flush=True)
        else:
            print(f"open_sim: starting the Verilated RTL of {label} (built before, "
                  f"{build_dir})", file=sys.stderr, flush=True)

    build_dir, module = _build(block, params, cache_dir=cache_dir,
                               announce=None if quiet else announce)
    return start_sim(build_dir, module, clock_period_ns=clock_period_ns,
                     start_timeout=start_timeout, label=label)
