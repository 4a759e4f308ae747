"""The AXI coverage monitor (:class:`fcov.axi.AxiMonitor`) inside a cocotb test.

:func:`start_axi_monitor` samples a top level's flat AXI ports (``<prefix>_arvalid`` and so on,
the names Amaranth gives the shells' ports and cocotbext-axi's ``from_prefix`` expects) once
per cycle, but only when :func:`fcov.enabled` (``RLK_COVERAGE=1``): a normal test run starts
nothing and pays nothing.

Every driver in these tests (cocotbext-axi's models, the testbenches) changes the ports at a
clock edge or while the clock is low, and the designs' outputs change only at the rising edge;
so the values in the read-only phase after the falling edge are the ones the next rising edge
takes: a handshake counted there is VALID and READY at that edge.
"""

from . import enabled
from .axi import CHANNELS, AxiMonitor

__all__ = ["start_axi_monitor"]

#: Payload signals the monitor reads when a channel's handshake happens (full AXI4; AXI4-Lite
#: has only the addresses and ``wstrb``).
_PAYLOAD = {"ar": ("addr", "len", "size"), "aw": ("addr", "len", "size"),
            "w": ("strb", "last"), "r": ("last",), "b": ()}
_LITE_PAYLOAD = {"ar": ("addr",), "aw": ("addr",), "w": ("strb",), "r": (), "b": ()}


def _int(handle):
    """A signal's value as an int; 0 for X or Z (a 4-state simulator before reset)."""
    try:
        return int(handle.value)
    except ValueError:
        return 0


class _Port:
    """The handles of one AXI port and its :class:`AxiMonitor`."""

    def __init__(self, dut, prefix, role):
        def sig(name):
            try:
                return getattr(dut, f"{prefix}_{name}")
            except AttributeError:
                raise ValueError(f"prefix {prefix!r}: the top level has no port "
                                 f"{prefix}_{name}") from None

        data = sig("wstrb") if hasattr(dut, f"{prefix}_wstrb") else None
        data_bytes = len(data) if data is not None else len(sig("rdata")) // 8
        self.monitor = AxiMonitor(role, data_bytes)
        payload = _LITE_PAYLOAD if self.monitor.lite else _PAYLOAD
        self.channels = [(ch, sig(f"{ch}valid"), sig(f"{ch}ready"),
                          [(f"{ch}_{p}", sig(f"{ch}{p}")) for p in payload[ch]])
                         for ch in CHANNELS]
        self.idle = {f"{ch}_{k}": 0 for ch in CHANNELS for k in ("valid", "ready")}
        self.idle.update({key: 0 for *_, fields in self.channels for key, _ in fields})

    def step(self, reset):
        s = dict(self.idle, reset=reset)
        if not reset:
            for ch, valid, ready, fields in self.channels:
                if _int(valid):
                    s[f"{ch}_valid"] = 1
                    if _int(ready):          # READY matters only with VALID
                        s[f"{ch}_ready"] = 1
                        for key, h in fields:
                            s[key] = _int(h)
        self.monitor.step(s)


def start_axi_monitor(dut, clk, reset, ports, *, reset_active_low=False):
    """Sample the AXI ports ``ports`` of ``dut`` once per cycle of ``clk`` into the coverage
    points of their roles, from a cocotb task started here; only when :func:`fcov.enabled`.

    Parameters
    ----------
    dut : the cocotb handle of the top level.
    clk, reset : its clock and reset handles (``rst``, or ``ap_rst_n`` with
        ``reset_active_low``).
    ports : dict
        Port prefix (``"s_axi_control"``) -> role of :data:`fcov.axi.ROLES` (``"lite"``,
        ``"mm_slave"``, ``"dma"``).

    Returns the task, or None when coverage is off. The task ends with the cocotb test; start
    a new one in each test.
    """
    if not enabled():
        return None
    import cocotb
    from cocotb.triggers import FallingEdge, ReadOnly

    if not isinstance(ports, dict) or not ports:
        raise ValueError(f"ports must be a non-empty dict of prefix -> role, not {ports!r}")
    mons = [_Port(dut, prefix, role) for prefix, role in ports.items()]
    active = 0 if reset_active_low else 1

    async def sample():
        fall = FallingEdge(clk)
        while True:
            await fall
            await ReadOnly()
            in_reset = _int(reset) == active
            for m in mons:
                m.step(in_reset)

    return cocotb.start_soon(sample())
