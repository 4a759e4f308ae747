"""On-chip buffers of the learner pipeline: block memories whose ports several stages share, and
the bit fields of a block word (:mod:`sw.learner.layout`)."""

from amaranth.hdl import Cat, Const, Mux, Signal, unsigned
from amaranth.lib import memory

# The buffers' sizing is plain arithmetic the resource model (scripts/dse_learner.py) shares.
from sw.learner.resources import buffer_specs

__all__ = ["ReadPort", "Buffer", "LearnerBuffers", "buffer_specs", "or_all", "select", "gt_const",
           "lt_const_registered",
           "lanes", "widen", "block_addr", "block_row", "block_col", "chunk", "lane_mask", "split"]


# -- bit fields ----------------------------------------------------------------------------------
#: Values :func:`or_all` ors in a chain; the rest are ored as a balanced tree. Every shipped
#: learner stays below it (``learner_kernel_s8``'s host port ors 70 region pieces).
OR_CHAIN_MAX = 128


def or_all(values):
    """Combinational: the or of ``values`` (1-bit ``Const(0)`` if there are none): a chain
    ``((0 | v0) | v1) | ...`` of the first :data:`OR_CHAIN_MAX` values (taken one at a time,
    as ``values`` yields them), then the rest as a balanced tree of pairs ored to it, so that
    neither the expression's depth (Amaranth checks it recursively: a learner of many layers
    ors about a thousand host-port pieces) nor the logic's grows with the count."""
    out, it = Const(0, 1), iter(values)
    for n, v in enumerate(it, 1):
        out = out | v
        if n == OR_CHAIN_MAX:
            break
    rest = list(it)
    while len(rest) > 1:
        rest = [rest[i] | rest[i + 1] if i + 1 < len(rest) else rest[i]
                for i in range(0, len(rest), 2)]
    return out | rest[0] if rest else out


def select(users):
    """Combinational: the value of the user whose select is high, from ``(sel, value)`` pairs
    whose selects are never high together: a priority mux that takes the first user's value
    when no other user's select is high (its select is not used), later users first."""
    out = users[0][1]
    for sel, v in users[1:]:
        out = Mux(sel, v, out)
    return out


def gt_const(x, c):
    """Combinational: unsigned ``x > c`` for a constant c as an and-or of x's bits (from the
    top bit down: a 1 where c has a 0 decides, a 0 where c has a 1 ends it), which logic
    synthesis maps to a few LUT levels instead of a carry chain."""
    if c < 0:
        return Const(1, 1)
    out = Const(0, 1)
    for i in range(len(x)):                     # from the low bit up: out is x[:i] > c[:i]
        out = (x[i] & out) if (c >> i) & 1 else (x[i] | out)
    return out if c < (1 << len(x)) else Const(0, 1)


def lt_const_registered(m, x, c, *, name, chunk=5):
    """``x < c`` (c a constant) one cycle later: x cut into ``chunk``-bit pieces from the top,
    each piece's ``<`` and ``==`` against c's registered, and the lexicographic combination of
    those flags after the registers (one LUT for two pieces). Logic synthesis maps a whole
    compare of a multiplexed address against a constant to a chain of small LUTs; a piece of
    5 bits stays within a few."""
    n = len(x)
    if c >= (1 << n):
        return Const(1, 1)
    if c <= 0:
        return Const(0, 1)
    out = Const(0, 1)                  # the lower pieces' x < c, built from the bottom up
    for k, lo in enumerate(range(0, n, chunk)):
        hi = min(n, lo + chunk)
        piece, cp = x[lo:hi], (c >> lo) & ((1 << (hi - lo)) - 1)
        eq = Signal(name=f"{name}_eq{k}_q")
        m.d.sync += eq.eq(piece == cp)
        if cp:
            lt = Signal(name=f"{name}_lt{k}_q")
            m.d.sync += lt.eq(piece < cp)
            out = lt | (eq & out)
        else:                          # nothing is below 0
            out = eq & out
    return out


def lanes(value, n, bits):
    """``value`` cut into n lanes of ``bits`` bits, lane 0 at the low end."""
    return [value[i * bits:(i + 1) * bits] for i in range(n)]


def widen(v, width):
    """``v`` zero-extended or truncated to ``width`` bits."""
    return Cat(v, Const(0, max(0, width - len(v))))[:width]


def block_addr(rg, cg, groups_pow2):
    """Block address ``rg · G + cg`` as bit fields (G = ``groups_pow2``, a power of two)."""
    gb = (groups_pow2 - 1).bit_length()
    return Cat(cg[:gb], rg) if gb else rg


def block_col(word, j, lane_bits, S):
    """Column j (runtime) of an S × S block word: S values, row 0 first."""
    rows = lanes(word, S, S * lane_bits)
    return [r.word_select(j, lane_bits) for r in rows]


def block_row(word, i, lane_bits, S):
    """Row i (runtime) of an S × S block word: S values, column 0 first."""
    return lanes(word.word_select(i, S * lane_bits), S, lane_bits)


def chunk(vals, sub, n, lane_bits):
    """Values ``sub·n .. sub·n + n - 1`` (``sub`` runtime) of a block's row or column."""
    if n == len(vals):
        return vals
    return lanes(Cat(*vals).word_select(sub, n * lane_bits), n, lane_bits)


def lane_mask(sub, n, S):
    """S-bit lane mask of chunk ``sub`` (runtime) of n lanes."""
    if n == S:
        return Const((1 << S) - 1, S)
    return (Const((1 << n) - 1, S) << (sub * n))[:S]


def split(idx, n, S):
    """A tile index over n-wide groups as (block index, chunk in the block): S/n chunks of n
    lanes per block."""
    q = (S // n).bit_length() - 1
    if q == 0:
        return idx, Const(0, 1)
    return idx >> q, idx[:q]


# -- buffers -------------------------------------------------------------------------------------
class ReadPort:
    """A memory read port shared by users that are never active in the same cycle.

    Each user adds its enable and address (:meth:`use`); :meth:`connect` drives the port with
    the or of the enables and a priority mux of the addresses (combinational, :func:`select`):
    the first user's address is the default, so its enable -- a stage's slot logic, the
    deepest -- never reaches the address. Data arrives one cycle after the enable (a
    synchronous read port). A user may select its address with a cheaper signal than its
    enable (``sel``, high whenever the enable may be and never while another user's is): the
    host's idle, not its address decode. A single user's address is not muxed at all.
    """

    def __init__(self, port):
        self.port = port
        self.users = []

    @property
    def data(self):
        return self.port.data

    def use(self, en, addr, sel=None, read=None):
        """Add a user reading ``addr`` while ``en`` (address selected by ``sel``, default
        ``en``); returns the port's data. ``read`` (default ``en``) drives the port's enable
        instead of ``en``: a stage that uses the data only the cycle after its own ``en`` may
        read every cycle of a step (``ctx.busy``, a register), which keeps its slot logic off
        the enable."""
        self.users.append((en if read is None else read, addr, en if sel is None else sel))
        return self.port.data

    def connect(self, m):
        if not self.users:
            m.d.comb += self.port.en.eq(0)
            return
        w = len(self.port.addr)
        addr = select([(sel, widen(addr, w)) for _, addr, sel in self.users])
        m.d.comb += [
            self.port.en.eq(or_all(en for en, _, _ in self.users)),
            self.port.addr.eq(addr),
        ]


class Buffer:
    """One on-chip memory of S × S blocks (or sample words), with shared ports.

    Parameters
    ----------
    name : str
        Hardware name (the memory is the submodule ``mem_<name>``).
    depth : int
        Words (at least 2 are built).
    word_bits : int
        Bits of a word: ``S²·lane_bits`` for a block, ``S·lane_bits`` for sample words.
    lane_bits : int
        Bits of one element.
    row_lanes : int
        Elements per block row (S; 1 for sample words).
    granularity : int
        Write-enable granularity in bits (8 for host-written buffers).
    data : MemoryData, optional
        The memory's contents (a simulation harness keeps it to preload and read the buffer);
        default: a new zero-initialized one.

    Members
    -------
    mem : Memory
        One write port of ``granularity``, read ports made by :meth:`read_port`.
    """

    def __init__(self, name, *, depth, word_bits, lane_bits, row_lanes, granularity, data=None):
        self.name = name
        self.depth = depth
        self.word_bits = word_bits
        self.lane_bits = lane_bits
        self.row_bits = row_lanes * lane_bits
        if data is None:
            self.mem = memory.Memory(shape=unsigned(word_bits), depth=max(depth, 2), init=[])
        else:
            self.mem = memory.Memory(data=data)
        self.granularity = granularity
        self.wp = self.mem.write_port(granularity=granularity)
        self.ports = []
        self.writers = []

    def read_port(self, index=0):
        """Read port ``index`` (:class:`ReadPort`), made on first use with those below it."""
        while len(self.ports) <= index:
            self.ports.append(ReadPort(self.mem.read_port()))
        return self.ports[index]

    def row_enable(self, row_onehot_en, lane_mask=None):
        """Write enables of the rows set in ``row_onehot_en`` (one bit per block row),
        restricted to the lanes set in ``lane_mask`` (one bit per lane of a row; the write
        granularity must not split a group of lanes written together)."""
        units = self.row_bits // self.granularity
        if lane_mask is None:
            return Cat(*[row_onehot_en[i].replicate(units) for i in range(len(row_onehot_en))])
        en = []
        for i in range(len(row_onehot_en)):
            for u in range(units):
                en.append(row_onehot_en[i] & lane_mask[(u * self.granularity) // self.lane_bits])
        return Cat(*en)

    def write(self, en, addr, data, sel=None):
        """Add a writer: ``en`` holds the write port's enables (already gated); ``sel`` (default
        ``en.any()``) selects its address and data (see :class:`ReadPort`)."""
        self.writers.append((en, addr, data, en.any() if sel is None else sel))

    def connect(self, m):
        """Drive the read ports and the write port from their users (combinational)."""
        for p in self.ports:
            p.connect(m)
        if not self.writers:
            m.d.comb += self.wp.en.eq(0)
            return
        w = len(self.wp.addr)
        nen = len(self.wp.en)
        addr = select([(sel, widen(addr, w)) for _, addr, _, sel in self.writers])
        data = select([(sel, widen(data, self.word_bits)) for _, _, data, sel in self.writers])
        m.d.comb += [
            self.wp.en.eq(or_all(widen(en, nen) for en, _, _, _ in self.writers)),
            self.wp.addr.eq(addr),
            self.wp.data.eq(data),
        ]


class LearnerBuffers:
    """Every buffer of a learner pipeline (:func:`buffer_specs`), with port 0 of each made.

    Port 0 of each memory is the host's (pipeline 0's first reader shares it). The memories
    become submodules ``mem_<name>`` of ``m`` in construction order.

    Parameters
    ----------
    m : Module
    config : LearnerConfig
    data : dict of str to MemoryData, optional
        Contents per buffer key (a simulation harness preloads and reads them).
    """

    def __init__(self, m, config, *, data=None):
        self.config = config
        self.shared = set()
        self._bufs = {}
        for key, (shared, kw) in buffer_specs(config).items():
            buf = Buffer(**kw) if data is None else Buffer(**kw, data=data[key])
            m.submodules[f"mem_{buf.name}"] = buf.mem
            self._bufs[key] = buf
            if shared:
                self.shared.add(key)
        for b in self._bufs.values():
            b.read_port(0)

    def __contains__(self, key):
        return key in self._bufs

    def __getitem__(self, key):
        return self._bufs[key]

    def __iter__(self):
        return iter(self._bufs.values())

    def get(self, name, d):
        """Buffer ``name`` as pipeline d sees it."""
        return self._bufs[name] if name in self._bufs else self._bufs[f"{name}@{d}"]

    def port(self, name, d, role):
        """Read port of buffer ``name`` for pipeline d: ``role`` 0 or 1 (two readers of one
        buffer in one pipeline). Shared buffers give every pipeline its own ports; port 0
        (pipeline 0, role 0) is also the host's."""
        index = role * self.config.dp + d if name in self.shared else role
        return self.get(name, d).read_port(index)

    def connect(self, m):
        """Drive every buffer's ports from their users (after every user was added)."""
        for b in self._bufs.values():
            b.connect(m)
