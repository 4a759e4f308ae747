"""What the flows are generated from: an emitted accelerator and the boards it can go on.

:class:`Accelerator` reads the two files :func:`rtl_gen.emit.emit` writes next to the Verilog,
the manifest ``<module>.json`` (ports, widths, Vitis kernel arguments) and the register map
``<module>_regs.json`` (:class:`~sw.regmap.RegisterMap`), and derives its AXI interfaces
(:class:`AxiInterface`) from the manifest's ports, checking on construction everything the
script writers rely on. :data:`BOARDS` are the targets of ``make vivado BOARD=`` (the board
table :data:`sw.boards.BOARDS`).
"""

import json
import os
from dataclasses import dataclass
from pathlib import Path

from sw.boards import BOARDS, Board  # the board table, re-exported
from sw.regmap import RegisterMap
from sw.timing import TARGET_MHZ

__all__ = ["TARGET_FREQ_MHZ", "CONTROL_BLOCK", "MEMORY_BLOCK", "Board", "BOARDS",
           "AxiInterface", "Accelerator", "check_accelerator", "find_manifests",
           "find_accelerators"]

#: Kernel clock target of every flow: PS ``pl_clk0`` on the ZCU106, ``kernel_frequency`` on
#: Alveo, the ``create_clock`` of ``constraints/accel_ooc.xdc``.
TARGET_FREQ_MHZ = TARGET_MHZ

#: Address block names; a block design addresses them as ``<cell>/<busif>/<block>``.
CONTROL_BLOCK = "reg0"
MEMORY_BLOCK = "mem0"


# AXI4 signals as (logical name, driven by the master?).
_AXI_SIGNALS = {
    **{f"AW{s}": True for s in ("ID", "ADDR", "LEN", "SIZE", "BURST", "LOCK", "CACHE", "PROT",
                               "QOS", "REGION", "USER", "VALID")},
    "AWREADY": False,
    **{f"W{s}": True for s in ("DATA", "STRB", "LAST", "USER", "VALID")},
    "WREADY": False,
    **{f"B{s}": False for s in ("ID", "RESP", "USER", "VALID")},
    "BREADY": True,
    **{f"AR{s}": True for s in ("ID", "ADDR", "LEN", "SIZE", "BURST", "LOCK", "CACHE", "PROT",
                               "QOS", "REGION", "USER", "VALID")},
    "ARREADY": False,
    **{f"R{s}": False for s in ("ID", "DATA", "RESP", "LAST", "USER", "VALID")},
    "RREADY": True,
}
_AXI_REQUIRED = {"AWADDR", "AWVALID", "AWREADY", "WDATA", "WSTRB", "WVALID", "WREADY", "BRESP",
                 "BVALID", "BREADY", "ARADDR", "ARVALID", "ARREADY", "RDATA", "RRESP", "RVALID",
                 "RREADY"}
_SCALAR_PORTS = {"ap_clk": "input", "ap_rst_n": "input", "interrupt": "output"}


# -- inputs ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AxiInterface:
    """One AXI slave interface found in a manifest's ports.

    Parameters
    ----------
    name : str
        Interface (and port prefix) name, e.g. ``"s_axi_control"``.
    port_map : tuple of (str, str)
        ``(logical, physical)`` pairs, e.g. ``("AWADDR", "s_axi_control_awaddr")``, in port order.
    addr_width, data_width : int
        Widths of ``AWADDR`` and ``WDATA``.
    lite : bool
        AXI4-Lite (no ``AWLEN``) rather than AXI4.
    master : bool
        An AXI master (``m_axi_<name>``) rather than a slave (``s_axi_<name>``).
    """
    name: str
    port_map: tuple
    addr_width: int
    data_width: int
    lite: bool
    master: bool = False

    @property
    def window(self) -> int:
        """Bytes the slave decodes: ``2 ** addr_width``."""
        return 1 << self.addr_width


@dataclass(frozen=True)
class Accelerator:
    """A packaged-ready accelerator: its manifest, register map and AXI interfaces.

    Parameters
    ----------
    hdl_dir : Path
        The directory of the manifest and the Verilog (``hdl/<module>/``, or the ``--out`` of
        ``python -m rtl_gen``).
    manifest : dict
        ``<module>.json``.
    regmap : RegisterMap
        ``<module>_regs.json``.

    Use :meth:`load`. Members ``module``, ``verilog``, ``interfaces`` (name ->
    :class:`AxiInterface`), ``control`` and ``memory`` (the interfaces named ``s_axi_control``
    and ``s_axi_mem``; ``memory`` is None for a kernel), ``masters`` (the ``m_axi_*``
    interfaces) and ``kernel`` (the manifest's Vitis kernel arguments, or None) are derived and
    checked on construction. An accelerator is a *kernel* if it has an AXI master.

    Raises
    ------
    ValueError
        A port that is neither ``ap_clk``, ``ap_rst_n``, ``interrupt`` nor part of an
        ``s_axi_<name>_*`` AXI slave or ``m_axi_<name>_*`` AXI master (it would be left out of
        the IP), a signal with the wrong direction, a missing AXI signal, a control interface
        that is not a 32-bit AXI4-Lite slave large enough for the register map, no memory
        interface (``s_axi_mem`` or an AXI master), or a kernel whose manifest does not name
        a 64-bit pointer argument (two consecutive registers) for each AXI master.
    """
    hdl_dir: Path
    manifest: dict
    regmap: RegisterMap

    @classmethod
    def load(cls, path) -> "Accelerator":
        """Read an accelerator from its manifest and register map.

        Parameters
        ----------
        path : path
            The manifest ``<module>.json``, or a directory named after the module that holds
            it (``hdl/<module>/``). For a directory of several, see :func:`find_manifests`.

        Raises
        ------
        FileNotFoundError
            ``path`` does not exist, or a directory without ``<its name>.json``.
        ValueError
            ``path`` is not a manifest written by :func:`rtl_gen.emit.emit`, or one without a
            register map (a block, not an accelerator), or the checks of the class fail.
        """
        path = Path(path)
        manifest_path = path / f"{path.name}.json" if path.is_dir() else path
        if not manifest_path.is_file():
            raise FileNotFoundError(
                f"path {str(path)!r}: no manifest {manifest_path.name} in that directory"
                if path.is_dir() else f"path {str(path)!r}: no such manifest file")
        manifest = _read_manifest(manifest_path)
        if manifest is None:
            raise ValueError(f"path {str(manifest_path)!r} is not a manifest written by "
                             f"rtl_gen (a JSON object with 'module', 'ports' and 'verilog')")
        regs = manifest.get("registers")
        if not regs:
            raise ValueError(f"{manifest_path}: the manifest lists no register map: not an "
                             f"accelerator with an AXI4-Lite control interface")
        hdl_dir = manifest_path.parent
        regmap = RegisterMap.from_dict(json.loads((hdl_dir / regs["json"]).read_text()))
        return cls(hdl_dir, manifest, regmap)

    def __post_init__(self):
        ports = {p["name"]: p for p in self.manifest["ports"]}
        for name, direction in _SCALAR_PORTS.items():
            if name not in ports or ports[name]["dir"] != direction or ports[name]["width"] != 1:
                raise ValueError(f"{self.module}: needs a 1-bit {direction} port {name!r}")
        groups = {}
        for p in self.manifest["ports"]:
            if p["name"] in _SCALAR_PORTS:
                continue
            head, _, signal = p["name"].rpartition("_")
            logical = signal.upper()
            if not head.startswith(("s_axi_", "m_axi_")) or logical not in _AXI_SIGNALS:
                raise ValueError(f"{self.module}: port {p['name']!r} is not ap_clk, ap_rst_n, "
                                 f"interrupt or an AXI slave signal s_axi_<name>_<signal> or "
                                 f"master signal m_axi_<name>_<signal>; the IP packager would "
                                 f"leave it unconnected")
            master = head.startswith("m_axi_")
            want = "input" if _AXI_SIGNALS[logical] != master else "output"
            if p["dir"] != want:
                raise ValueError(f"{self.module}: {p['name']} must be an {want} on an AXI "
                                 f"{'master' if master else 'slave'}, not an {p['dir']}")
            groups.setdefault(head, []).append((logical, p))
        interfaces = {}
        for name, members in groups.items():
            have = {logical: p for logical, p in members}
            missing = sorted(_AXI_REQUIRED - set(have))
            if missing:
                raise ValueError(f"{self.module}: AXI interface {name} lacks {', '.join(missing)}")
            interfaces[name] = AxiInterface(
                name, tuple((logical, p["name"]) for logical, p in members),
                have["AWADDR"]["width"], have["WDATA"]["width"], "AWLEN" not in have,
                name.startswith("m_axi_"))
        object.__setattr__(self, "interfaces", interfaces)
        control = interfaces.get("s_axi_control")
        if control is None or not control.lite or control.data_width != 32:
            raise ValueError(f"{self.module}: s_axi_control must be a 32-bit AXI4-Lite slave")
        if control.window < self.regmap.span:
            raise ValueError(f"{self.module}: s_axi_control decodes {control.window} bytes, the "
                             f"register map spans {self.regmap.span}")
        if "s_axi_mem" not in interfaces and not self.masters:
            raise ValueError(f"{self.module}: no s_axi_mem memory interface")
        kernel = self.manifest.get("kernel")
        if self.masters:
            if not kernel:
                raise ValueError(f"{self.module}: an AXI master needs the manifest's 'kernel' "
                                 f"entry (its pointer argument)")
            ptrs = {q["port"]: q for q in kernel.get("pointers", ())}
            names = {r.name: r for r in self.regmap}
            for m in self.masters:
                q = ptrs.get(m.name)
                if q is None:
                    raise ValueError(f"{self.module}: no pointer argument addresses {m.name}")
                lo, hi = names.get(q["lo"]), names.get(q["hi"])
                if lo is None or hi is None or not lo.offset == q["offset"] == hi.offset - 4:
                    raise ValueError(f"{self.module}: pointer {q['name']} must be registers "
                                     f"{q['lo']} at {q['offset']:#x} and {q['hi']} right "
                                     f"after it")
            missing = [n for n in kernel.get("scalars", ()) if n not in names]
            if missing:
                raise ValueError(f"{self.module}: kernel arguments {missing} are not registers")
        object.__setattr__(self, "kernel", kernel if self.masters else None)

    @property
    def module(self) -> str:
        return self.manifest["module"]

    @property
    def verilog(self) -> Path:
        return self.hdl_dir / self.manifest["verilog"]

    @property
    def control(self) -> AxiInterface:
        return self.interfaces["s_axi_control"]

    @property
    def memory(self) -> AxiInterface | None:
        return self.interfaces.get("s_axi_mem")

    @property
    def slaves(self) -> list:
        return [i for i in self.interfaces.values() if not i.master]

    @property
    def masters(self) -> list:
        return [i for i in self.interfaces.values() if i.master]

    def pointer_of(self, register: str):
        """The kernel pointer argument whose low or high word is ``register``, or None."""
        for q in (self.kernel or {}).get("pointers", ()):
            if register in (q["lo"], q["hi"]):
                return q
        return None


def check_accelerator(acc) -> "Accelerator":
    """``acc`` if it is an :class:`Accelerator`, else ``TypeError`` naming the argument."""
    if not isinstance(acc, Accelerator):
        raise TypeError(f"acc must be an Accelerator (Accelerator.load), not {acc!r}")
    return acc


def _read_manifest(path: Path):
    """The manifest in ``path``, or None if the file is JSON but not a manifest.

    Raises ``ValueError`` (naming the file) if it is not JSON at all."""
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(data, dict) or not {"module", "ports", "verilog"} <= data.keys():
        return None
    return data


def find_manifests(path, *, argument: str = "path") -> dict:
    """The manifests of everything ``python -m rtl_gen`` emitted at ``path``.

    Parameters
    ----------
    path : path
        A manifest file ``<module>.json``; a directory holding manifests next to their Verilog
        (``<module>.json`` + ``<module>.v``, what ``python -m rtl_gen <block> --out DIR``
        writes); or a tree of such directories (``hdl/``, searched to any depth, skipping
        hidden directories).
    argument : str
        How error messages name ``path`` (the CLI passes ``"--hdl"``).

    Returns
    -------
    dict
        Module name -> manifest path, sorted by name. Blocks without a register map are
        included (:func:`find_accelerators` leaves them out).

    Raises
    ------
    FileNotFoundError
        ``path`` does not exist.
    ValueError
        ``path`` is a file that is not a manifest; a manifest that is not valid JSON; or the
        same module in two places.
    """
    path = Path(path)
    if path.is_file():
        manifest = _read_manifest(path)
        if manifest is None:
            raise ValueError(f"{argument} {str(path)!r} is not a manifest written by rtl_gen (a "
                             f"JSON object with 'module', 'ports' and 'verilog')")
        return {manifest["module"]: path}
    if not path.is_dir():
        raise FileNotFoundError(f"{argument} {str(path)!r}: no such file or directory")
    found = {}
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
        names = set(files)
        for name in sorted(names):
            stem, ext = os.path.splitext(name)
            if ext != ".json" or f"{stem}.v" not in names:
                continue
            p = Path(root) / name
            manifest = _read_manifest(p)
            if manifest is None:
                continue
            module = manifest["module"]
            if module in found:
                raise ValueError(f"{argument} {str(path)!r}: module {module} is there twice, "
                                 f"{found[module]} and {p}; give one of them")
            found[module] = p
    return dict(sorted(found.items()))


def find_accelerators(path, *, argument: str = "path") -> list:
    """Names of the accelerators (manifests with a register map) at ``path``, sorted.

    ``path`` and ``argument`` are as for :func:`find_manifests`, which gives the manifest of
    each (``Accelerator.load`` reads it). Bare blocks (no control interface) are left out.
    """
    return [m for m, p in find_manifests(path, argument=argument).items()
            if _read_manifest(p).get("registers")]
