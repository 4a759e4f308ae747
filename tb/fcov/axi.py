"""Functional coverage of the shells' AXI interfaces: the points of each interface (``lite``, the
AXI4-Lite register slave; ``mm_slave``, the AXI4 memory slave; ``dma``, the AXI4 DMA master)
and :class:`AxiMonitor`, which classifies a cycle's channel signals into them."""

from . import count_bins, eq, point, sample

__all__ = ["CHANNELS", "ROLES", "AxiMonitor"]

#: AXI channel names, in the order the reports list them.
CHANNELS = ("aw", "w", "b", "ar", "r")


def _axi(role, *, lite=False, unreachable=None):
    """The points of one AXI interface ``role`` (``lite``: AXI4-Lite, no bursts)."""
    u = unreachable or {}
    if not lite:
        for ch in ("ar", "aw"):
            point(f"{role}.{ch}_len", count_bins(1, 2, 3, 5, 17, top=256),
                  unreachable=u.get(f"{ch}_len"), doc=f"{ch.upper()} burst length (beats)")
            point(f"{role}.{ch}_size", {"full": eq("full"), "narrow": eq("narrow")},
                  unreachable=u.get(f"{ch}_size"), doc=f"{ch.upper()} beat size")
        point(f"{role}.reads_outstanding", count_bins(0, 1, 2, 3),
              unreachable=u.get("reads_outstanding"),
              doc="read bursts accepted and not completed when an AR is accepted")
        point(f"{role}.writes_outstanding", count_bins(0, 1, 2, 3),
              unreachable=u.get("writes_outstanding"),
              doc="write bursts accepted and not answered when an AW is accepted")
    for ch in ("ar", "aw"):
        point(f"{role}.{ch}_addr", {"aligned": eq("aligned"), "unaligned": eq("unaligned")},
              unreachable=u.get(f"{ch}_addr"), doc=f"{ch.upper()} address against the beat size")
    point(f"{role}.w_strb", {"all": eq("all"), "partial": eq("partial"), "none": eq("none")},
          unreachable=u.get("w_strb"), doc="write strobes of a beat")
    point(f"{role}.w_order", {"aw first": eq("aw first"), "w first": eq("w first"),
                              "same cycle": eq("same cycle")},
          unreachable=u.get("w_order"), doc="first W beat of a burst against its AW")
    point(f"{role}.stall", {ch: eq(ch) for ch in CHANNELS}, unreachable=u.get("stall"),
          doc="a channel's VALID high while READY is low (back-pressure)")
    point(f"{role}.stall_4", {ch: eq(ch) for ch in CHANNELS}, unreachable=u.get("stall_4"),
          doc="a channel stalled 4 or more cycles in a row")
    point(f"{role}.reset", {"idle": eq("idle"), "read in flight": eq("read in flight"),
                            "write in flight": eq("write in flight")},
          unreachable=u.get("reset"), doc="reset asserted while ...")


_MM = "rtl_gen/shell/mm_slave.py, AxiMemorySlave.elaborate"
_DMA = "rtl_gen/shell/dma.py, AxiDma._address_channel"
_DMA_W = "rtl_gen/shell/dma_write.py, DmaWrites._write_buffer"

#: The interfaces: role -> (AXI4-Lite?, unreachable bins: point suffix -> {bin: reason}).
#: A reason says why no test can make the bin happen (a property of the design, not of the
#: tests); ``scripts/functional_coverage.py`` lists them beside the bins that were hit.
#: ``lite``: every bin is reachable (AW and W in any order, WSTRB 0, unaligned addresses,
#: back-pressure and reset on every channel).
ROLES = {
    "lite": (True, {}),
    "mm_slave": (False, {
        "writes_outstanding": dict.fromkeys(("2", "3+"), (
            "AWREADY is high only while no burst is active (idle = ~wr_act & ~rd_act) and the "
            "last W beat of a burst waits while BVALID is high, so when an AW is taken at most "
            f"the previous write waits for its B ({_MM})")),
        "w_order": dict.fromkeys(("w first", "same cycle"), (
            "WREADY is wr_act, set by the AW handshake: a burst's W beats are taken from the "
            f"cycle after its AW ({_MM})")),
    }),
    "dma": (False, {
        "ar_size": {"narrow": "AxSIZE is always log2(data_width / 8): full-width beats only "
                              f"({_DMA})"},
        "aw_size": {"narrow": "AxSIZE is always log2(data_width / 8): full-width beats only "
                              f"({_DMA})"},
        "ar_addr": {"unaligned": "burst addresses are the command's dev_addr with the byte "
                                 "offset bits cleared, plus whole beats (rtl_gen/shell/dma.py, "
                                 "AxiDma._command, _address_channel)"},
        "aw_addr": {"unaligned": "burst addresses are the command's dev_addr with the byte "
                                 "offset bits cleared, plus whole beats (rtl_gen/shell/dma.py, "
                                 "AxiDma._command, _address_channel)"},
        "w_strb": {"none": "every W beat carries at least the local word in lane 0 (lane_on "
                           f"bit 0 is constant 1; {_DMA_W})"},
        "stall": {"b": f"BREADY is constant 1 ({_DMA_W})"},
        "stall_4": {"b": f"BREADY is constant 1 ({_DMA_W})"},
    }),
}

for _role, (_lite, _unreachable) in ROLES.items():
    _axi(_role, lite=_lite, unreachable=_unreachable)


# -- AXI monitor ----------------------------------------------------------------------------------
class AxiMonitor:
    """Passive, per cycle: classifies the traffic on one AXI interface into the points of
    ``role`` (:data:`ROLES`). Call :meth:`step` once per rising clock edge with the values
    the edge samples: ``reset`` and, per channel in :data:`CHANNELS`, ``<ch>_valid`` and
    ``<ch>_ready``; on AR/AW ``<ch>_addr`` and (full AXI4) ``<ch>_len`` (AXLEN, beats - 1),
    ``<ch>_size`` (AXSIZE); ``w_strb``, and (full AXI4) ``w_last``, ``r_last``. ``data_bytes``:
    the interface's data width in bytes."""

    def __init__(self, role, data_bytes):
        if role not in ROLES:
            raise ValueError(f"role must be one of {sorted(ROLES)}, not {role!r}")
        self.role, self.lite = role, ROLES[role][0]
        self.data_bytes = data_bytes
        self.full_size = (data_bytes - 1).bit_length()
        self._clear()

    def _clear(self):
        self.reads = 0          # accepted ARs without their last R
        self.writes = 0         # accepted AWs without their B
        self.w_early = 0        # W bursts started (first beat accepted) before their AW
        self.aw_waiting = 0     # AWs accepted whose first W beat has not been accepted
        self.in_w_burst = False
        self.stalled = dict.fromkeys(CHANNELS, 0)

    def step(self, s):
        r = self.role
        if s["reset"]:
            kind = ("read in flight" if self.reads else
                    "write in flight" if self.writes or self.aw_waiting or self.in_w_burst
                    else "idle")
            sample(f"{r}.reset", kind)
            self._clear()
            return
        fire = {ch: bool(s[f"{ch}_valid"]) and bool(s[f"{ch}_ready"]) for ch in CHANNELS}
        for ch in CHANNELS:
            if s[f"{ch}_valid"] and not s[f"{ch}_ready"]:
                self.stalled[ch] += 1
                sample(f"{r}.stall", ch)
                if self.stalled[ch] == 4:
                    sample(f"{r}.stall_4", ch)
            else:
                self.stalled[ch] = 0
        for ch in ("ar", "aw"):
            if fire[ch]:
                size = self.full_size if self.lite else int(s[f"{ch}_size"])
                sample(f"{r}.{ch}_addr",
                       "aligned" if int(s[f"{ch}_addr"]) % (1 << size) == 0 else "unaligned")
                if not self.lite:
                    sample(f"{r}.{ch}_len", int(s[f"{ch}_len"]) + 1)
                    sample(f"{r}.{ch}_size", "full" if size == self.full_size else "narrow")
        if fire["ar"] and not self.lite:
            sample(f"{r}.reads_outstanding", self.reads)
        if fire["aw"] and not self.lite:
            sample(f"{r}.writes_outstanding", self.writes)
        first_w = fire["w"] and not self.in_w_burst
        if fire["w"]:
            strb, full = int(s["w_strb"]), (1 << self.data_bytes) - 1
            sample(f"{r}.w_strb", "all" if strb == full else "none" if strb == 0 else "partial")
            self.in_w_burst = not (self.lite or s["w_last"])
        same = False
        if first_w:
            if self.aw_waiting:
                sample(f"{r}.w_order", "aw first")
                self.aw_waiting -= 1
            elif fire["aw"]:
                sample(f"{r}.w_order", "same cycle")
                same = True
            else:
                sample(f"{r}.w_order", "w first")
                self.w_early += 1
        if fire["aw"] and not same:
            if self.w_early:
                self.w_early -= 1
            else:
                self.aw_waiting += 1
        # outstanding counts: a request counts from its acceptance to its last response
        self.reads += fire["ar"] - (fire["r"] and (self.lite or bool(s["r_last"])))
        self.writes += fire["aw"] - fire["b"]

