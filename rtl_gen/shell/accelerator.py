"""The one accelerator shell: a core behind the ports a Vivado block design or a Vitis kernel
expects.

:class:`AcceleratorShell` puts any core with the four standard interfaces of
:mod:`rtl_gen.shell.signatures` (``ctrl``, ``args``, ``status``, ``host``) behind:

* ``s_axi_control``: an :class:`~rtl_gen.shell.lite_csr.AxiLiteCsr` with the block's register
  map in the Vitis HLS ``ap_ctrl_hs`` layout, its ``HW_*`` registers constant;
* its memory: the AXI4 slave ``s_axi_mem`` (:class:`~rtl_gen.shell.mm_slave.AxiMemorySlave`,
  ``host_port="axi"``, standalone with ``ap_clk``/``ap_rst_n``), or the local word port
  ``host`` (``host_port="local"``, clocked by the parent's ``sync``) for a DMA shell
  (:class:`~rtl_gen.shell.window.WindowKernel`);
* ``interrupt``.

The ``ap_ctrl_hs`` handshake (:func:`ap_ctrl_hs`) and the refused-start rule are the shell's,
as are STATUS.ERROR, STATUS.START_REFUSED and CYCLES (:data:`sw.shell.spec.SHELL_FIELDS`);
everything else the core reports through ``status``. The GAE, replay and learner accelerators
are this shell around their cores.
"""

from amaranth.hdl import ClockDomain, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from sw.regmap import RegisterMap

from .lite_csr import AxiLiteCsr
from .mm_slave import AxiMemorySlave
from .signatures import ArgsSignature, MemoryPortSignature, RunControlSignature, StatusSignature

__all__ = ["AcceleratorShell", "HOST_PORTS", "shell_members", "shell_domain", "pass_ports",
           "connect_bridges", "ap_ctrl_hs"]

#: Where an accelerator's memory goes: ``"axi"``, the AXI4 slave ``s_axi_mem`` (standalone,
#: with its own ``ap_clk``/``ap_rst_n``); ``"local"``, the word port ``host`` (embedded in a
#: DMA shell, clocked by the parent's ``sync``).
HOST_PORTS = ("axi", "local")


def _prefixed(component, prefix):
    for name, member in component.signature.members.items():
        if name.startswith(f"{prefix}_"):
            yield name, member


def _bridge_ports(bridge):
    return _prefixed(bridge, bridge.prefix)


def shell_members(*bridges) -> dict:
    """Signature members of a kernel top level: ``ap_clk``, ``ap_rst_n``, ``interrupt`` and the
    flat ``<prefix>_*`` AXI ports of each bridge (anything with ``prefix`` and ``signature``)."""
    members = {"ap_clk": In(1), "ap_rst_n": In(1), "interrupt": Out(1)}
    for bridge in bridges:
        for name, member in _bridge_ports(bridge):
            if name in members:
                raise ValueError(f"two bridges declare the port {name!r}")
            members[name] = member
    return members


def shell_domain(m, top):
    """Add the local ``sync`` domain clocked by ``top.ap_clk``, reset while ``ap_rst_n`` is low."""
    m.domains.sync = cd = ClockDomain("sync", local=True)
    m.d.comb += [cd.clk.eq(top.ap_clk), cd.rst.eq(~top.ap_rst_n)]
    return cd


def pass_ports(m, top, inner, prefix):
    """Pass ``inner``'s flat ``<prefix>_*`` ports through to the same ports of ``top``: AXI
    ports stay flat members, named by the AXI convention that Vivado and cocotbext-axi find
    them by."""
    for name, member in _prefixed(inner, prefix):
        if member.flow == In:
            m.d.comb += getattr(inner, name).eq(getattr(top, name))
        else:
            m.d.comb += getattr(top, name).eq(getattr(inner, name))


def connect_bridges(m, top, *bridges):
    """:func:`pass_ports` of each bridge (anything with ``prefix`` and ``signature``)."""
    for bridge in bridges:
        pass_ports(m, top, bridge, bridge.prefix)


def ap_ctrl_hs(m, top, csr, ctrl, *, clear=None):
    """The ``ap_ctrl_hs`` handshake between ``csr`` and a core's ``ctrl``
    (:class:`~rtl_gen.shell.signatures.RunControlSignature`), and the refused-start rule.

    ``ctrl.busy`` drives AP_IDLE, ``ctrl.ready`` and ``ctrl.done`` AP_READY and AP_DONE,
    ``ctrl.start`` follows AP_START. An AP_START write while busy and AUTO_RESTART is off is
    refused: AP_START is cleared without a handshake and the returned sticky signal rises; it
    falls in the cycle ``clear`` is high (default ``ctrl.ready``: the next accepted start).

    Returns ``(start_refused, refused)``: the sticky flag for STATUS and the one-cycle pulse.
    """
    refused = Signal()
    start_refused = Signal()
    m.d.comb += [
        csr.ap_idle.eq(~ctrl.busy),
        top.interrupt.eq(csr.interrupt),
        refused.eq(csr.ap_start_write & ctrl.busy & ~csr.auto_restart),
        csr.ap_start_refuse.eq(refused),
        ctrl.start.eq(csr.ap_start),
        csr.ap_ready.eq(ctrl.ready),
        csr.ap_done.eq(ctrl.done),
    ]
    clear = ctrl.ready if clear is None else clear
    # The start that clears the flag and a refused write cannot fall in the same cycle: a start
    # is accepted only while idle, a write is refused only while busy.
    with m.If(clear):
        m.d.sync += start_refused.eq(0)
    with m.Elif(refused):
        m.d.sync += start_refused.eq(1)
    return start_refused, refused


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


class AcceleratorShell(wiring.Component):
    """A core behind AXI4-Lite control, an AXI4 memory slave (or a local word port) and an
    interrupt.

    Parameters
    ----------
    core : wiring.Component
        The core, with members ``ctrl: In(RunControlSignature)``, ``args: In(ArgsSignature
        (base))``, ``status: Out(StatusSignature(base))`` and ``host: In(MemoryPortSignature)``
        (:mod:`rtl_gen.shell.signatures`); added as submodule ``core``.
    base : RegisterMap
        The block's ``ap_ctrl_hs`` register map (what the core's ``args`` and ``status``
        come from); its ``HW_*`` registers read ``info``.
    constants : dict
        Register name -> word of every constant register of the control map
        (``regmap.info_values(config)``: the ``HW_*`` registers, and a DMA shell's).
    host_port : str
        ``"axi"`` (default): the memory behind the AXI4 slave ``s_axi_mem`` (``mem_addr_bits``
        byte-address bits, 1-bit IDs), clocked by ``ap_clk``. ``"local"``: no ``s_axi_mem``,
        ``ap_clk``, ``ap_rst_n``; the core's memory port on ``host``, in the parent's ``sync``
        domain (for :class:`~rtl_gen.shell.window.WindowKernel`).
    mem_addr_bits : int
        Byte-address bits of ``s_axi_mem``.
    mem_words : int
        Words of the memory window (at most the range of the core's word address); the AXI4
        slave answers DECERR above it.
    regmap : RegisterMap or None
        The control map: ``base`` (default) or one that adds registers after it (a DMA shell
        drives them through :attr:`csr`).
    control_addr_width : int or None
        Address bits of ``s_axi_control`` (default the map's minimum).

    Members
    -------
    ap_clk, ap_rst_n : ``In(1)``
        ``host_port="axi"`` only: clock (rising edge) and synchronous active-low reset.
    s_axi_control_* : AXI4-Lite slave, 32-bit data
    s_axi_mem_* : AXI4 slave, the core's memory word width, 1-bit IDs (``"axi"`` only)
        SLVERR while the core runs (``host.enable`` low).
    host : ``In(MemoryPortSignature)`` (``"local"`` only)
    interrupt : ``Out(1)``
        ``GIER & |IP_ISR``.

    Latency and throughput are the core's; the shell adds the CSR's one cycle to register
    accesses and the AXI4 slave's to memory accesses (:class:`AxiMemorySlave`).
    """

    def __init__(self, core, base, *, constants, host_port="axi", mem_addr_bits, mem_words,
                 regmap=None, control_addr_width=None):
        if not isinstance(base, RegisterMap) or base.protocol != "ap_ctrl_hs":
            raise TypeError(f"base must be an ap_ctrl_hs RegisterMap, not {base!r}")
        if host_port not in HOST_PORTS:
            raise ValueError(f"host_port must be one of {', '.join(map(repr, HOST_PORTS))}, "
                             f"not {host_port!r}")
        if regmap is None:
            regmap = base
        n = len(base.registers)
        if (not isinstance(regmap, RegisterMap) or regmap.protocol != base.protocol
                or tuple(regmap.registers[:n]) != tuple(base.registers)):
            raise ValueError(f"regmap must start with the registers of {base.name!r} "
                             f"unchanged, not {regmap!r}")
        missing = {r.name for r in regmap.info_registers} - set(constants)
        if missing:
            raise ValueError(f"constants must give every constant register, not miss "
                             f"{', '.join(sorted(missing))}")
        sig = core.signature.members
        want = {"ctrl": In, "args": In, "status": Out, "host": In}
        # (a port member has no signature: check for interfaces before looking at them)
        shaped = all(name in sig and sig[name].is_signature and sig[name].flow == flow
                     for name, flow in want.items())
        host_sig = sig["host"].signature.flip() if shaped else None
        if (not shaped
                or not isinstance(sig["ctrl"].signature.flip(), RunControlSignature)
                or sig["args"].signature.flip() != ArgsSignature(base)
                or sig["status"].signature != StatusSignature(base)
                or not isinstance(host_sig, MemoryPortSignature)):
            raise TypeError(f"core must have ctrl, args, status and host members with the "
                            f"signatures of rtl_gen.shell.signatures for {base.name!r}, "
                            f"not {core!r}")
        if not _is_int(mem_addr_bits) or mem_addr_bits < 1:
            raise ValueError(f"mem_addr_bits must be a positive integer, not {mem_addr_bits!r}")
        self._core = core
        self._base = base
        self._regmap = regmap
        self._host_port = host_port
        self._csr = AxiLiteCsr(regmap, prefix="s_axi_control", addr_width=control_addr_width,
                               base=base, constants=constants)
        D = host_sig.data_width
        if not _is_int(mem_words) or not 1 <= mem_words <= 1 << host_sig.addr_width:
            raise ValueError(f"mem_words must be an integer in 1..{1 << host_sig.addr_width}, "
                             f"not {mem_words!r}")
        self._mem_words = mem_words
        if host_port == "axi":
            self._mem = AxiMemorySlave(data_width=D, addr_width=mem_addr_bits, id_width=1,
                                       depth=self._mem_words, prefix="s_axi_mem",
                                       mem_read_latency=host_sig.read_latency)
            members = shell_members(self._csr, self._mem)
        else:
            self._mem = None
            members = shell_members(self._csr)
            del members["ap_clk"], members["ap_rst_n"]
            members["host"] = In(host_sig)
        super().__init__(members)

    @property
    def core(self):
        return self._core

    @property
    def base(self) -> RegisterMap:
        """The block's own register map (the core's)."""
        return self._base

    @property
    def regmap(self) -> RegisterMap:
        """The control map (``base``, or the one that extends it)."""
        return self._regmap

    @property
    def csr(self) -> AxiLiteCsr:
        """The control port's register block (a DMA shell drives its extra registers)."""
        return self._csr

    @property
    def host_port(self) -> str:
        return self._host_port

    @property
    def mem_words(self) -> int:
        """Words of the memory window (the core's word port's address range)."""
        return self._mem_words

    def elaborate(self, platform):
        m = Module()
        core, csr, mem = self._core, self._csr, self._mem
        axi = self._host_port == "axi"
        if axi:
            shell_domain(m, self)
        m.submodules.csr = csr
        if axi:
            m.submodules.mem = mem
        m.submodules.core = core
        connect_bridges(m, self, *((csr, mem) if axi else (csr,)))

        # Control: ap_ctrl_hs handshake; a start while busy is refused, not queued.
        start_refused, _ = ap_ctrl_hs(m, self, csr, core.ctrl)
        wiring.connect(m, csr.args, core.args)
        wiring.connect(m, core.status, csr.status)
        m.d.comb += [csr.status_error.eq(core.ctrl.error),
                     csr.status_start_refused.eq(start_refused),
                     csr.cycles.eq(core.ctrl.cycles)]

        # Memory: the core's host port behind the AXI4 slave or on the local port; the core
        # holds ``enable`` low while it runs.
        if axi:
            wiring.connect(m, mem.mem, core.host)
        else:
            wiring.connect(m, wiring.flipped(self.host), core.host)
        return m
