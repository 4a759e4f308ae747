"""The core side of a host memory port: its requests registered before they reach the RAMs."""

from amaranth.hdl import Signal

__all__ = ["HostRequest", "register_host_requests", "delayed"]


class HostRequest:
    """A host request one cycle after it was on the port: ``addr``, ``re``, ``we`` and
    ``wdata`` registers (``re`` and ``we`` are 0 unless ``enable`` was 1)."""

    def __init__(self, addr, re, we, wdata):
        self.addr, self.re, self.we, self.wdata = addr, re, we, wdata


def register_host_requests(m, host, *, busy, start) -> HostRequest:
    """Register the requests on ``host`` (a core's ``In(MemoryPortSignature)``) and drive its
    ``enable``; returns the registered request (:class:`HostRequest`).

    A core acts on a request one cycle after the shell put it on the port, from registers:
    the address decode and the byte enables reach the block RAMs through one multiplexer
    (host or core) instead of the shell's logic as well. Reads and writes keep their order,
    so a read still sees every earlier write; the read latency of the port grows by one.

    ``enable`` is ``~busy & ~start``: a request is accepted only if the core will still be
    idle in the next cycle, when it acts on it (a core becomes busy only in the cycle after
    ``start``), so an accepted write is never dropped and an accepted read never returns the
    core's data.
    """
    enable = ~busy & ~start
    q = HostRequest(addr=Signal.like(host.addr, name="host_addr_q"),
                    re=Signal(name="host_re_q"),
                    we=Signal.like(host.we, name="host_we_q"),
                    wdata=Signal.like(host.wdata, name="host_wdata_q"))
    m.d.comb += host.enable.eq(enable)
    m.d.sync += [q.addr.eq(host.addr), q.re.eq(host.re & enable),
                 q.we.eq(host.we & enable.replicate(len(host.we))), q.wdata.eq(host.wdata)]
    return q


def delayed(m, value, n, *, name):
    """``value`` ``n`` cycles later, through registers ``<name>_q``, ``<name>_qq``, ... (the
    host read's address and region bits follow its data through the block RAM and its output
    register this way)."""
    for k in range(1, n + 1):
        q = Signal.like(value, name=f"{name}_{'q' * k}")
        m.d.sync += q.eq(value)
        value = q
    return value
