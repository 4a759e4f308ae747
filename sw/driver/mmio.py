"""The two bus interfaces a driver needs, and the device that bundles them.

A driver talks to an accelerator through exactly two things:

:class:`Mmio`
    32-bit register reads and writes at byte offsets of the control port (``s_axi_control``,
    AXI4-Lite). Every register access of :class:`~sw.driver.regmap.RegisterMapAccess` and
    :class:`~sw.gae.driver.GaeDriver` goes through :meth:`Mmio.read32` and
    :meth:`Mmio.write32`.
:class:`MemoryPort`
    Byte-block reads and writes at byte offsets of the memory port (``s_axi_mem``, AXI4).

and a :class:`Device` bundles one of each with a way to wait for the ``interrupt`` line and a
clock (:meth:`Device.time`, :meth:`Device.sleep`) that backends without real time (the golden
model, the simulator) replace by their own, so polling loops and timeouts mean the same thing
everywhere.

Backends (each in its own module, all imported lazily by :mod:`sw.driver`):

* :class:`~sw.gae.device.GoldenDevice` -- a pure-Python model of the GAE accelerator;
* :class:`~sw.driver.sim.SimDevice` -- the Verilated RTL through cocotbext-axi, driven from a
  thread (cocotb's ``bridge``/``resume``);
* :class:`~sw.driver.pynq_device.PynqDevice` -- a Zynq UltraScale+ board (ZCU106) with PYNQ;
* :class:`~sw.driver.xrt_device.XrtDevice` -- an Alveo card with XRT's ``pyxrt``.

Errors every backend reports the same way: :class:`BusError` for an access the bus answers with
SLVERR/DECERR (unmapped register, memory locked during a run), ``ValueError`` for a malformed
request (unaligned or negative offset, value not a 32-bit unsigned integer).
"""

import operator
import time

__all__ = ["BusError", "Mmio", "MemoryPort", "Device", "byte_view", "check_offset",
           "check_span", "check_word", "merged"]


class BusError(RuntimeError):
    """The bus answered an access with an error response (SLVERR or DECERR).

    On a real Zynq board such an access is usually fatal to the process (the PS turns the error
    response into an external abort, i.e. SIGBUS), so the drivers never issue one on purpose:
    the models raise this exception to make the mistake visible in tests.
    """


def merged(blocks, gap):
    """``blocks`` (``(offset, nbytes)`` pairs in ascending order, not overlapping) grouped
    into transfers: ``[(lo, hi, [indices]), ...]``, a block joining the previous transfer when
    it starts at most ``gap`` bytes after its end."""
    out = []
    for i, (offset, n) in enumerate(blocks):
        if out and offset - out[-1][1] <= gap and offset >= out[-1][1]:
            out[-1][1] = max(out[-1][1], offset + n)
            out[-1][2].append(i)
        else:
            out.append([offset, offset + n, [i]])
    return [tuple(t) for t in out]


def check_offset(offset, *, align=4, what="offset"):
    """``offset`` as a non-negative ``int`` that is a multiple of ``align``."""
    try:
        value = operator.index(offset)
    except TypeError:
        raise ValueError(f"{what} must be an integer, not {offset!r}") from None
    if isinstance(offset, bool) or value < 0 or value % align:
        raise ValueError(f"{what} must be a non-negative multiple of {align}, not {offset!r}")
    return value


def check_span(offset, nbytes, window):
    """``(offset, nbytes)`` as non-negative integers whose bytes lie inside a memory window of
    ``window`` bytes; ``ValueError`` otherwise."""
    offset = check_offset(offset, align=1)
    nbytes = check_offset(nbytes, align=1, what="nbytes")
    if offset + nbytes > window:
        raise ValueError(f"{nbytes} bytes at {offset:#x} go past the memory window "
                         f"({window:#x} bytes)")
    return offset, nbytes


def byte_view(data) -> memoryview:
    """The bytes of ``data`` (bytes, bytearray, a numpy array, any buffer) as a flat ``"B"``
    memoryview: without a copy for a C-contiguous buffer (what the drivers pass: their
    images and staging buffers), a copy otherwise. What the backends' ``write`` take."""
    try:
        return memoryview(data).cast("B")
    except TypeError:                      # not C-contiguous (or not a buffer: bytes() says)
        return memoryview(bytes(data))


def check_word(value, *, what="value"):
    """``value`` as an ``int`` in 0..2**32-1."""
    try:
        word = operator.index(value)
    except TypeError:
        raise ValueError(f"{what} must be an integer in 0..0xffffffff, not {value!r}") from None
    if not 0 <= word <= 0xFFFF_FFFF:
        raise ValueError(f"{what} must be an integer in 0..0xffffffff, not {value!r}")
    return word


class Mmio:
    """32-bit memory-mapped register access (the interface; backends subclass it).

    Offsets are byte offsets from the port's base, multiples of 4. Values are unsigned 32-bit
    integers. Reads may have side effects (clear-on-read registers), so a backend must issue
    exactly one bus read per :meth:`read32` call and one bus write per :meth:`write32` call.
    """

    def read32(self, offset: int) -> int:
        """The 32-bit word at byte ``offset``. Raises :class:`BusError` on an error response."""
        raise NotImplementedError

    def write32(self, offset: int, value: int) -> None:
        """Write the 32-bit ``value`` at byte ``offset`` (all byte lanes)."""
        raise NotImplementedError


class MemoryPort:
    """Block access to a memory-mapped window (the interface; backends subclass it).

    Offsets and lengths are in bytes. Backends accept any multiple of 4 (the GAE memory images
    of :mod:`sw.gae.layout` are whole AXI words, so they always are).
    """

    def write(self, offset: int, data: bytes) -> None:
        """Write ``data`` starting at byte ``offset``."""
        raise NotImplementedError

    def read(self, offset: int, nbytes: int) -> bytes:
        """``nbytes`` bytes starting at byte ``offset``."""
        raise NotImplementedError

    #: Bytes between two blocks of :meth:`write_blocks` / :meth:`read_blocks` worth moving to
    #: make them one transfer (0: never). Backends whose transfers carry a fixed cost much
    #: larger than moving such a gap (an XRT buffer sync and a shell copy each) set it.
    merge_gap = 0

    def write_blocks(self, blocks, *, gaps_are_inputs=False) -> None:
        """Write ``blocks``, ``[(offset, data), ...]`` in ascending order, not overlapping.

        ``gaps_are_inputs``: the bytes between the blocks are unused parts of regions only the
        host writes (e.g. the rows of input regions past a batch), so a backend may write them
        too and move blocks :attr:`merge_gap` apart or closer as one transfer; they then hold
        unspecified bytes. Otherwise (and by default) one :meth:`write` per block."""
        for offset, data in blocks:
            self.write(offset, data)

    def read_blocks(self, blocks) -> list:
        """``[bytes, ...]`` of ``blocks``, ``[(offset, nbytes), ...]`` in ascending order, not
        overlapping; blocks :attr:`merge_gap` apart or closer may be read as one transfer."""
        return [self.read(offset, n) for offset, n in blocks]


class Device:
    """A control port, a memory port, an interrupt line and a clock.

    Members
    -------
    control : Mmio
        The AXI4-Lite control/status registers.
    memory : MemoryPort
        The accelerator's memory window.
    has_interrupt : bool
        :meth:`wait_interrupt` works; otherwise drivers poll the status register.

    Subclasses set ``control`` and ``memory`` (plain attributes, so tests can wrap them, e.g. to
    record every access) and override what differs from real time.
    """

    has_interrupt = False

    def __init__(self, control: Mmio, memory: MemoryPort):
        self.control = control
        self.memory = memory

    def wait_interrupt(self, timeout: float) -> bool:
        """Block until the ``interrupt`` line is high or ``timeout`` seconds (of :meth:`time`)
        have passed. Returns whether the line is high. The line stays high until the cause is
        cleared (for ap_ctrl_hs: IP_ISR), so a call after it rose returns at once."""
        raise NotImplementedError(f"{type(self).__name__} has no interrupt; poll instead")

    def time(self) -> float:
        """Seconds on this device's clock (monotonic; wall clock for real hardware)."""
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        """Let ``seconds`` pass on this device's clock."""
        time.sleep(seconds)

    def close(self) -> None:
        """Release the device (no-op by default)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
