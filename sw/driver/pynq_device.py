"""Zynq UltraScale+ boards (ZCU106) with PYNQ: the accelerator in a Vivado block design.

Assumed block design (:mod:`rtl_gen.vivado.zcu106_bd`, docs/boards.md): the packaged
accelerator (VLNV ``rlk:accel:<module>:1.0``, :func:`sw.registry.vlnv`) with ``s_axi_control``
behind an AXI SmartConnect on M_AXI_HPM0_FPD and ``s_axi_mem`` on M_AXI_HPM1_FPD, ``ap_clk``
from a PL clock, ``ap_rst_n``
from the matching processor system reset, and ``interrupt`` on an AXI Interrupt Controller
(or a PS IRQ) for PYNQ's :class:`pynq.Interrupt`. Without a usable interrupt the driver polls
CTRL.AP_DONE.

Where the two windows are found: PYNQ 2's ``.hwh`` parser lists an IP with two address ranges
as two ``ip_dict`` entries, ``<instance>/s_axi_control`` and ``<instance>/s_axi_mem``. PYNQ 3
and 4 (``pynqmetadata``) list the ``s_axi_mem`` range, a memory address block, in ``mem_dict``
and then drop the instance from ``ip_dict``; the windows are then read from the overlay's
``systemgraph`` (the parsed ``.hwh``), in the same entry layout (:func:`overlay_windows`), and
:func:`overlay_ip` gives the IP driver PYNQ would have bound by VLNV. The same code runs on the
board, and on a host PC driving a board over PYNQ's remote devices (``PYNQ_REMOTE_DEVICES``,
gRPC: MMIO goes over the network; docs/boards.md).

``pynq`` is imported only when a :class:`PynqDevice` is created (or :func:`gae_ip_class` is
called), so :mod:`sw.driver` works on machines without it.

Caution: on a Zynq an AXI error response to a PS load or store is fatal to the process
(external abort). The driver never touches the memory window during a run (the accelerator
answers SLVERR then) nor an unmapped register.
"""

import asyncio
import threading

import numpy as np

from sw.registry import BLOCKS, FAMILIES, family_vlnvs, vlnv

from .mmio import Device, MemoryPort, Mmio, byte_view, check_offset, check_word
from .regmap import RegisterMapAccess

__all__ = ["PynqDevice", "PynqMmio", "PynqMemory", "ip_class", "gae_ip_class",
           "learner_ip_class", "replay_ip_class", "find_gae_windows", "overlay_windows",
           "overlay_ip", "ACCELERATOR_VLNVS"]


def _import_pynq():
    try:
        import pynq
    except ImportError as e:
        raise ImportError("PynqDevice needs the 'pynq' package (PYNQ 3 or 4 on the board's "
                          "Linux image; on a host PC the 'pynq' extra, docs/boards.md)") from e
    return pynq


class PynqMmio(Mmio):
    """:class:`~sw.driver.mmio.Mmio` over a ``pynq.MMIO``."""

    def __init__(self, mmio):
        self._mmio = mmio

    def read32(self, offset):
        return int(self._mmio.read(check_offset(offset))) & 0xFFFF_FFFF

    def write32(self, offset, value):
        self._mmio.write(check_offset(offset), check_word(value))


class PynqMemory(MemoryPort):
    """:class:`~sw.driver.mmio.MemoryPort` over a ``pynq.MMIO`` of the ``s_axi_mem`` window.

    32-bit accesses, one per word, through ``MMIO.write(offset, bytes)`` and ``MMIO.read``
    (what PYNQ guarantees on every device). ``bulk=True`` copies through the MMIO's numpy
    ``array`` view instead (much faster; numpy may use wider loads and stores, which the
    AXI4 slave accepts but which need the mapping to be aligned).
    """

    def __init__(self, mmio, *, bulk=False):
        self._mmio = mmio
        self._bulk = bool(bulk) and isinstance(getattr(mmio, "array", None), np.ndarray)

    def write(self, offset, data):
        offset = check_offset(offset)
        data = byte_view(data)                      # no copy of the driver's image
        n = data.nbytes
        if n % 4:
            raise ValueError(f"data length must be a multiple of 4, not {n}")
        if self._bulk:
            self._mmio.array[offset // 4:offset // 4 + n // 4] = np.frombuffer(data, "<u4")
        else:
            self._mmio.write(offset, bytes(data))

    def read(self, offset, nbytes):
        offset = check_offset(offset)
        nbytes = check_offset(nbytes, what="nbytes")
        if self._bulk:
            return np.array(self._mmio.array[offset // 4:(offset + nbytes) // 4],
                            "<u4").tobytes()
        words = [int(self._mmio.read(offset + 4 * i)) & 0xFFFF_FFFF for i in range(nbytes // 4)]
        return np.array(words, "<u4").tobytes()


def _vlnv_matches(vlnv, want):
    """Same vendor and library, a name that starts with ``want``'s name, any version (so
    ``rlk:accel:gae_accel:1.0`` matches ``rlk:accel:gae_accel_n8:1.0``)."""
    if not isinstance(vlnv, str) or vlnv.count(":") != 3:
        return False
    v, lib, name, _ = vlnv.split(":")
    wv, wlib, wname, _ = want.split(":")
    return (v, lib) == (wv, wlib) and name.startswith(wname)


#: VLNV prefixes of every accelerator this package drives (GAE, learner, replay): what
#: :class:`PynqDevice` looks for when no ``vlnv`` is given.
ACCELERATOR_VLNVS = tuple(vlnv(b.module) for b in BLOCKS.values() if b.role == "accelerator")


def find_gae_windows(ip_dict: dict, *, name=None, vlnv=None):
    """``(instance, control_entry, memory_entry_or_None)`` of the accelerator in an ``ip_dict``.

    Entries are matched by VLNV (any version; ``vlnv`` one prefix, a sequence of them, or None
    for any of :data:`ACCELERATOR_VLNVS`), or by ``name`` (the instance, or one of its
    ``<instance>/<interface>`` keys). Raises ``ValueError`` listing what was found otherwise.
    """
    wanted = ACCELERATOR_VLNVS if vlnv is None else (vlnv,) if isinstance(vlnv, str) \
        else tuple(vlnv)
    groups = {}
    for key, entry in ip_dict.items():
        if not isinstance(entry, dict):
            continue
        instance, _, intf = key.rpartition("/")
        if not intf or entry.get("mem_id") != intf:
            instance = key
        if name is not None and name not in (key, instance):
            continue
        if name is None and not any(_vlnv_matches(entry.get("type"), w) for w in wanted):
            continue
        groups.setdefault(instance, []).append(entry)
    if len(groups) != 1:
        what = f"named {name!r}" if name is not None else f"with VLNV {' or '.join(wanted)}"
        hint = "" if len(groups) < 2 else "; pass name= (or vlnv=) to choose"
        raise ValueError(f"expected one accelerator {what} in the overlay, found "
                         f"{sorted(groups) or 'none'}{hint} (IP: {sorted(ip_dict)})")
    instance, entries = next(iter(groups.items()))
    control = memory = None
    for entry in entries:
        intf = entry.get("mem_id") or ""
        if intf.endswith("s_axi_mem"):
            memory = entry
        elif control is None or intf.endswith("s_axi_control"):
            control = entry
    if control is None:
        raise ValueError(f"accelerator {instance!r}: no s_axi_control address range")
    return instance, control, memory


def _registers_of(port) -> dict:
    """A ``pynqmetadata`` port's registers in ``ip_dict`` form (what ``DefaultIP`` builds
    ``register_map`` from)."""
    return {r.name: {"address_offset": r.offset, "size": r.width, "access": r.access,
                     "description": r.description,
                     "fields": {f.name: {"bit_offset": f.LSB, "bit_width": f.MSB - f.LSB + 1,
                                         "access": f.access, "description": f.description}
                                for f in r.bitfields.values()}}
            for r in port.registers.values()}


def overlay_windows(overlay) -> dict:
    """The overlay's ``ip_dict`` plus, for every IP core missing from it (PYNQ 3 and 4 move a
    core with a memory address block to ``mem_dict``), one entry per addressed slave
    interface read from ``overlay.systemgraph``, keyed ``<instance>/<interface>`` with
    ``phys_addr``, ``addr_range``, ``type`` (VLNV), ``mem_id``, ``fullpath``, ``registers``
    and ``interrupts``: PYNQ 2's layout, which :func:`find_gae_windows` reads."""
    ip_dict = dict(getattr(overlay, "ip_dict", {}) or {})
    graph = getattr(overlay, "systemgraph", None)
    if graph is None:
        return ip_dict
    present = {key.rpartition("/")[0] if "/" in key and isinstance(e, dict)
               and key.endswith("/" + str(e.get("mem_id"))) else key
               for key, e in ip_dict.items()}
    pins = getattr(overlay, "interrupt_pins", {}) or {}
    for core in graph.blocks.values():
        inst, core_vlnv = core.hierarchy_name, getattr(core, "vlnv", None)
        if inst in present or core_vlnv is None:
            continue
        irq = {pin.rpartition("/")[2]: d for pin, d in pins.items()
               if pin.rpartition("/")[0] == inst}
        for intf, port in core.ports.items():
            if getattr(port, "baseaddr", None) is None or not hasattr(port, "registers"):
                continue
            ip_dict[f"{inst}/{intf}"] = {
                "phys_addr": port.baseaddr, "addr_range": port.range, "type": core_vlnv.str,
                "mem_id": intf, "fullpath": f"{inst}/{intf}", "registers": _registers_of(port),
                "interrupts": irq, "gpio": {}, "parameters": {}}
    return ip_dict


def overlay_ip(overlay, *, name=None, vlnv=None):
    """The IP driver of our accelerator in ``overlay`` (a :func:`ip_class` instance), chosen
    as ``pynq.Overlay`` chooses drivers: by the IP's VLNV in PYNQ's driver registry (where
    the ``bindto`` of our classes put it), ``DefaultIP`` if none is bound. For PYNQ 3 and 4,
    where ``overlay.<instance>`` is the ``s_axi_mem`` memory, not the IP. ``name``/``vlnv``
    as for :func:`find_gae_windows`."""
    pynq = _import_pynq()
    for family in _IP_KINDS:
        ip_class(family)
    from pynq.overlay import _ip_drivers
    instance, control, memory = find_gae_windows(overlay_windows(overlay), name=name,
                                                 vlnv=vlnv)
    kind = control.get("type") or ""
    cls = _ip_drivers.get(kind) or _ip_drivers.get(kind.rpartition(":")[0]) or pynq.DefaultIP
    description = dict(control, _rlk_windows={"control": control, "memory": memory})
    if getattr(overlay, "device", None) is not None:
        description["device"] = overlay.device
    return cls(description)


class _LoopThread:
    """One asyncio event loop in a daemon thread, for the lifetime of a device.

    PYNQ's ``Interrupt`` keeps an ``asyncio.Event`` and registers the UIO file descriptor
    with the loop it first runs in, so every wait must use the same loop; a thread of its own
    also works when the caller already runs a loop (Jupyter).
    """

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="gae-interrupts",
                                       daemon=True)
        self.thread.start()

    def run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def close(self):
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


class PynqDevice(Device):
    """One of our accelerators (GAE, learner or replay) in a PYNQ overlay.

    Parameters
    ----------
    bitfile : str or None
        The overlay's ``.bit`` (with its ``.hwh`` beside it), loaded with ``pynq.Overlay``;
        or None with ``overlay=``.
    overlay : pynq.Overlay or None
        An overlay already loaded.
    name : str or None
        The accelerator's instance name in the block design; default: the one IP whose VLNV
        matches ``vlnv``.
    vlnv : str, sequence of str, or None
        VLNV prefix(es) to look for (e.g. :data:`~sw.learner.driver.LEARNER_VLNV`); default
        any of :data:`ACCELERATOR_VLNVS`, so an overlay with one accelerator needs neither
        ``name`` nor ``vlnv`` (the driver then checks its HW_* registers).
    mem_addr, mem_range : int or None
        Physical base and size of the ``s_axi_mem`` window, if the ``.hwh`` does not list it.
    use_interrupt : bool
        Use ``pynq.Interrupt("<instance>/interrupt")`` if the pin is wired to an interrupt
        controller (silently polled otherwise, and always on a PYNQ remote device).
    bulk : bool
        See :class:`PynqMemory`.
    download : bool
        Passed to ``pynq.Overlay``.

    Members
    -------
    overlay, instance, ip_entry, mem_entry
    """

    def __init__(self, bitfile=None, *, overlay=None, name=None, vlnv=None, mem_addr=None,
                 mem_range=None, use_interrupt=True, bulk=False, download=True):
        pynq = _import_pynq()
        gae_ip_class()                      # bind our drivers before the overlay is parsed
        learner_ip_class()
        replay_ip_class()
        if overlay is None:
            if bitfile is None:
                raise ValueError("give bitfile= or overlay=")
            overlay = pynq.Overlay(bitfile, download=download)
        self.overlay = overlay
        instance, control, memory = find_gae_windows(overlay_windows(overlay), name=name,
                                                     vlnv=vlnv)
        self.instance, self.ip_entry, self.mem_entry = instance, control, memory
        # the overlay's device (a RemoteDevice for a board driven over the network), else
        # PYNQ's active device
        on = {"device": overlay.device} if getattr(overlay, "device", None) is not None else {}
        ctl = pynq.MMIO(control["phys_addr"], control["addr_range"], **on)
        if mem_addr is None:
            if memory is None:
                raise ValueError(f"accelerator {instance!r}: the overlay lists no s_axi_mem "
                                 f"address range; give mem_addr= and mem_range=")
            mem_addr, mem_range = memory["phys_addr"], memory["addr_range"]
        elif mem_range is None:
            raise ValueError("mem_range must be given with mem_addr")
        mem = pynq.MMIO(int(mem_addr), int(mem_range), **on)
        super().__init__(PynqMmio(ctl), PynqMemory(mem, bulk=bulk))
        self._interrupt = None
        self._loop = None
        # PYNQ's remote devices have no interrupts yet (RemoteInterrupt.wait raises): poll.
        remote = getattr(overlay, "device", None) is not None and \
            overlay.device.has_capability("REMOTE")
        if use_interrupt and not remote:
            self._interrupt = self._find_interrupt(pynq, instance, control)
        self.has_interrupt = self._interrupt is not None

    @staticmethod
    def _find_interrupt(pynq, instance, entry):
        pins = [d.get("fullpath") for d in (entry.get("interrupts") or {}).values()]
        pins += [f"{instance}/interrupt"]
        for pin in pins:
            if not pin:
                continue
            try:
                return pynq.Interrupt(pin)
            except (ValueError, KeyError, AttributeError):
                continue
        return None

    def wait_interrupt(self, timeout: float) -> bool:
        if self._interrupt is None:
            raise NotImplementedError("no interrupt connected; poll CTRL.AP_DONE")
        if self._loop is None:
            self._loop = _LoopThread()

        async def wait():
            await asyncio.wait_for(self._interrupt.wait(), timeout)

        try:
            self._loop.run(wait())
        except (asyncio.TimeoutError, TimeoutError):
            return False
        return True

    def close(self):
        if self._loop is not None:
            self._loop.close()
            self._loop = None


def _ip_base(pynq):
    """The part of :class:`GaeIP`, :class:`LearnerIP` and :class:`ReplayIP` that is the same:
    a ``pynq.DefaultIP`` subclass (no ``bindto``, so PYNQ binds only the subclasses) whose
    ``register_map`` and ``driver(config=None, **kwargs)`` are built, once, from the
    subclass's ``_read_config`` (HW_* registers -> configuration), ``_register_map_of``
    (configuration -> register map) and ``_driver_class``; ``mem_addr``, ``mem_range``,
    ``use_interrupt``, ``bulk`` of ``driver()`` go to :class:`PynqDevice`."""

    class _AcceleratorIP(pynq.DefaultIP):
        #: who owns the window, in the error of ``register_map`` on the memory window
        _window_owner = "accelerator's"
        #: VLNV :class:`PynqDevice` looks for
        _device_vlnv = None

        def __init__(self, description):
            super().__init__(description)
            self._description = description
            self._ip_driver = None
            self._ip_regs = None

        def _on_memory_window(self) -> bool:
            return str(self._description.get("mem_id") or "").endswith("s_axi_mem")

        @property
        def register_map(self):
            if self._on_memory_window():
                raise AttributeError(f"this is the {self._window_owner} s_axi_mem window; the "
                                     "registers are on its s_axi_control window")
            if self._ip_regs is None:
                mmio = PynqMmio(self.mmio)
                self._ip_regs = RegisterMapAccess(
                    self._register_map_of(self._read_config(mmio)), mmio)
            return self._ip_regs

        @property
        def hwh_register_map(self):
            """PYNQ's own ``register_map`` (``pynq.registers.RegisterMap``), built by PYNQ
            from the registers the ``.hwh`` declares (what ``DefaultIP.register_map`` is)."""
            return pynq.DefaultIP.register_map.fget(self)

        def _device(self, kwargs):
            """A :class:`PynqDevice` for this IP's instance in the loaded overlay (takes the
            device's keyword arguments out of ``kwargs``)."""
            dev_keys = {"mem_addr", "mem_range", "use_interrupt", "bulk"}
            dev_kw = {k: kwargs.pop(k) for k in list(kwargs) if k in dev_keys}
            path = self._description.get("fullpath", "")
            mem_id = str(self._description.get("mem_id") or "")
            instance = path.rpartition("/")[0] if mem_id and path.endswith(mem_id) else path
            windows = self._description.get("_rlk_windows")
            if windows is not None:          # made by overlay_ip: its windows, its device
                overlay = _Windows(windows, self._description.get("device"))
            else:
                overlay = _ActiveOverlay(pynq)
            return PynqDevice(overlay=overlay, name=instance or None,
                              vlnv=self._device_vlnv, **dev_kw)

        def driver(self, config=None, **kwargs):
            """The driver for this accelerator (kept after the first call; ``mem_addr``,
            ``mem_range``, ``use_interrupt``, ``bulk`` go to :class:`PynqDevice`, the rest
            to the driver)."""
            if self._ip_driver is None:
                device = self._device(kwargs)
                self._ip_driver = self._driver_class(device, config, **kwargs)
            return self._ip_driver

    return _AcceleratorIP


class _GaeMethods:
    def compute(self, rewards, values, dones, last_values, gamma, lam):
        """:meth:`GaeDriver.compute <sw.gae.driver.GaeDriver.compute>` on this IP."""
        return self.driver().compute(rewards, values, dones, last_values, gamma, lam)


class _LearnerMethods:
    def load_weights(self, weights, biases, **kwargs):
        return self.driver().load_weights(weights, biases, **kwargs)

    def read_weights(self, **kwargs):
        return self.driver().read_weights(**kwargs)

    def train_step(self, *args, **kwargs):
        return self.driver().train_step(*args, **kwargs)

    def sync_target(self):
        return self.driver().sync_target()


class _ReplayMethods:
    pass


#: Per family: the IP class's name and the driver shortcuts it offers.
_IP_KINDS = {"gae": ("GaeIP", _GaeMethods), "learner": ("LearnerIP", _LearnerMethods),
             "replay": ("ReplayIP", _ReplayMethods)}
_IP_CLASSES = {}


def ip_class(family: str):
    """The ``pynq.DefaultIP`` subclass of an accelerator family (``"gae"``, ``"learner"``,
    ``"replay"``), bound to the VLNVs of its shipped accelerators
    (:func:`sw.registry.family_vlnvs`); created, and so registered with PYNQ, on the first
    call (needs ``pynq``). Everything it knows -- the VLNVs, how to read the configuration
    from the HW_* registers, the register map and the driver class -- comes from
    :data:`sw.registry.BLOCKS`.

    Instances are what ``overlay.<instance>`` returns for our IP. On the control window they
    offer ``register_map`` (:class:`~sw.driver.regmap.RegisterMapAccess`, replacing PYNQ's
    ``.hwh``-derived one) and ``driver(config=None, **kwargs)`` (the family's driver on a
    :class:`PynqDevice` for this overlay; ``mem_addr``, ``mem_range``, ``use_interrupt``,
    ``bulk`` go to the device), plus the driver's main calls: ``compute`` (GAE),
    ``load_weights``, ``read_weights``, ``train_step``, ``sync_target`` (learner).
    """
    if family not in _IP_KINDS:
        raise ValueError(f"family must be one of {', '.join(_IP_KINDS)}, not {family!r}")
    if family in _IP_CLASSES:
        return _IP_CLASSES[family]
    pynq = _import_pynq()
    accel = next(b for b in BLOCKS.values() if b.family == family and b.role == "accelerator")
    name, methods = _IP_KINDS[family]
    cls = type(name, (methods, _ip_base(pynq)), {
        "__doc__": f"PYNQ driver of the {FAMILIES[family]} (see :func:`ip_class`).",
        "__module__": __name__, "__qualname__": name,
        "bindto": list(family_vlnvs(family)),
        "_window_owner": f"{FAMILIES[family]}'s",
        "_device_vlnv": vlnv(accel.module),
        "_read_config": staticmethod(accel.load("reader")),
        "_register_map_of": staticmethod(accel.regmap),
        "_driver_class": accel.load("driver"),
    })
    _IP_CLASSES[family] = cls
    return cls


def gae_ip_class():
    """:func:`ip_class` of the GAE accelerator (``GaeIP``)."""
    return ip_class("gae")


def learner_ip_class():
    """:func:`ip_class` of the learner (``LearnerIP``)."""
    return ip_class("learner")


def replay_ip_class():
    """:func:`ip_class` of the replay accelerator (``ReplayIP``)."""
    return ip_class("replay")


class _ActiveOverlay:
    """The currently loaded overlay's ``ip_dict`` (``pynq.PL``), for :class:`PynqDevice`."""

    def __init__(self, pynq):
        self.ip_dict = pynq.PL.ip_dict


class _Windows:
    """The windows :func:`overlay_ip` found, as an overlay for :class:`PynqDevice`."""

    def __init__(self, windows, device):
        self.ip_dict = {e["fullpath"]: e for e in windows.values() if e is not None}
        self.device = device


def __getattr__(name):
    for family, (cls_name, _) in _IP_KINDS.items():
        if name == cls_name:
            return ip_class(family)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
