"""The trainer's accesses to the learner's host port, shared by the learner adapter and the
storage traffic: a region's geometry, an element's word address and bit offset, and the
registered outputs that drive the port."""

from amaranth.hdl import Cat, Signal

from sw.learner.layout import region, region_base, sub_words

__all__ = ["element_addr", "region_geometry", "registered_host"]


def _log2(n):
    return n.bit_length() - 1


def region_geometry(lc, name):
    """``(base word, host words per memory word, stored column groups)`` of learner region
    ``name`` on the host port."""
    r = region(lc, name)
    return (region_base(lc, name) // (lc.axi_data_width // 8), sub_words(lc, r),
            r.col_groups(lc))


def element_addr(lc, name, b, j):
    """Combinational: host word address and bit offset of element ``(b, j)`` (row, column) of
    matrix region ``name`` of learner ``lc`` (S, G, sub and D are powers of two)."""
    S, w, D = lc.array, lc.numerics.width, lc.axi_data_width
    base, sub, G = region_geometry(lc, name)
    lS = _log2(S)
    block = ((b >> lS) << _log2(G)) | (j >> lS)
    lane = Cat(j[:lS], b[:lS])
    bit = lane * w
    addr = base + (block << _log2(sub)) + (bit >> _log2(D))
    return addr, bit[:_log2(D)]


def registered_host(m, port, name):
    """Signals ``addr``, ``re``, ``we`` and ``wdata`` (a dict; 0 unless driven) whose values
    drive the host port ``port`` one cycle later: the learner's address decoding starts at a
    flip-flop. Reads return :data:`~sw.shell.spec.HOST_READ_LATENCY` + 1 cycles after they
    are issued on these signals (:data:`sw.trainer.schedule.HOST_OUT_STAGES`)."""
    sig = {n: Signal(len(getattr(port, n)), name=f"{name}_{n}")
           for n in ("addr", "re", "we", "wdata")}
    m.d.sync += [getattr(port, n).eq(v) for n, v in sig.items()]
    return sig
