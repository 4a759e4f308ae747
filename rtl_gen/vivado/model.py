"""What the flows are generated from: an emitted accelerator and the boards it can go on.

:class:`Accelerator` reads the two files :func:`rtl_gen.emit.emit` writes next to the Verilog,
the manifest ``<module>.json`` (ports, widths, Vitis kernel arguments) and the register map
``<module>_regs.json`` (:class:`~sw.regmap.RegisterMap`), and derives its AXI interfaces
(:class:`AxiInterface`) from the manifest's ports, checking on construction everything the
script writers rely on. :data:`BOARDS` are the targets of ``make vivado BOARD=``.
"""

import json
from dataclasses import dataclass
from pathlib import Path

from sw.regmap import RegisterMap

__all__ = ["TARGET_FREQ_MHZ", "CONTROL_BLOCK", "MEMORY_BLOCK", "Board", "BOARDS",
           "AxiInterface", "Accelerator", "find_accelerators"]

#: Kernel clock target of every flow: PS ``pl_clk0`` on the ZCU106, ``kernel_frequency`` on
#: Alveo, the ``create_clock`` of ``constraints/accel_ooc.xdc``.
TARGET_FREQ_MHZ = 300

#: Address block names; a block design addresses them as ``<cell>/<busif>/<block>``.
CONTROL_BLOCK = "reg0"
MEMORY_BLOCK = "mem0"


@dataclass(frozen=True)
class Board:
    """A target board.

    Parameters
    ----------
    name : str
        ``make vivado BOARD=`` value.
    part : str
        FPGA part.
    flow : str
        ``"bd"`` (Vivado block design with a Zynq PS) or ``"vitis"`` (Alveo kernel).
    platform : str or None
        Vitis platform (``"vitis"`` flows).
    """
    name: str
    part: str
    flow: str
    platform: str | None = None


BOARDS = {
    "zcu106": Board("zcu106", "xczu7ev-ffvc1156-2-e", "bd"),
    "u200": Board("u200", "xcu200-fsgd2104-2-e", "vitis", "xilinx_u200_gen3x16_xdma_2_202110_1"),
    "u250": Board("u250", "xcu250-figd2104-2L-e", "vitis",
                  "xilinx_u250_gen3x16_xdma_4_1_202210_1"),
}

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
        ``hdl/<module>/``.
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
    def load(cls, hdl_dir) -> "Accelerator":
        hdl_dir = Path(hdl_dir)
        manifest = json.loads((hdl_dir / f"{hdl_dir.name}.json").read_text())
        regs = manifest.get("registers")
        if not regs:
            raise ValueError(f"{hdl_dir}: the manifest lists no register map: not an "
                             f"accelerator with an AXI4-Lite control interface")
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


def find_accelerators(hdl_root) -> list:
    """Names of the directories in ``hdl_root`` whose manifest has a register map, sorted."""
    found = []
    for d in sorted(Path(hdl_root).iterdir()):
        m = d / f"{d.name}.json"
        if m.is_file() and json.loads(m.read_text()).get("registers"):
            found.append(d.name)
    return found

