"""Operation codes and payload layouts of the sum tree, shared by the RTL, the tests and the host.

:class:`SumTreeOp` is the one list of operations (gateware decoder, test drivers and, later, the
driver's constants). :func:`command_layout` and :func:`response_layout` are the payloads of the
:class:`~rtl_gen.replay.sumtree.SumTree` streams; :func:`op_layout` is the record that travels
down its pipeline (internal, but shared by the level stages in
:mod:`rtl_gen.replay.level`).
"""

from amaranth.hdl import signed, unsigned
from amaranth.lib import data, enum

from sw.replay.spec import SumTreeConfig

__all__ = ["SumTreeOp", "command_layout", "response_layout", "op_layout", "RESPONDS"]


class SumTreeOp(enum.Enum, shape=3):
    """Operation codes of the command stream (3 bits).

    ===============  ==  ===========================================  =========================
    name             #   command fields used                          response
    ===============  ==  ===========================================  =========================
    ``SAMPLE``       0   ``target`` (the host's fraction ``x_raw``)   leaf ``index``, ``value``
    ``SAMPLE_PRNG``  1   none (the on-chip xorshift32 draws it)       leaf ``index``, ``value``
    ``UPDATE``       2   ``index`` (leaf), ``priority`` (raw)         none
    ``INSERT``       3   ``priority``                                 slot ``index``, ``value``
    ``INSERT_MAX``   4   none (the maximum-priority register)         slot ``index``, ``value``
    ``READ``         5   ``index`` (leaf)                             ``index``, ``value``
    ``DEBUG``        6   ``level``, ``index`` (a word of ``level``)   ``index``, node ``value``
    ``RESET``        7   none                                         none
    ===============  ==  ===========================================  =========================

    RESET zeroes the tree, the write pointer and the size and sets the maximum-priority
    register to 1.0 (the PRNG state and the sticky flags stay).
    """
    SAMPLE = 0
    SAMPLE_PRNG = 1
    UPDATE = 2
    INSERT = 3
    INSERT_MAX = 4
    READ = 5
    DEBUG = 6
    RESET = 7


#: Operations that produce exactly one response each.
RESPONDS = frozenset({SumTreeOp.SAMPLE, SumTreeOp.SAMPLE_PRNG, SumTreeOp.INSERT,
                      SumTreeOp.INSERT_MAX, SumTreeOp.READ, SumTreeOp.DEBUG})


def _check(config):
    if not isinstance(config, SumTreeConfig):
        raise TypeError(f"config must be a SumTreeConfig, not {config!r}")


def command_layout(config: SumTreeConfig) -> data.StructLayout:
    """Command payload.

    ``op`` (:class:`SumTreeOp`), ``level`` (``level_select_width`` bits, DEBUG only), ``index``
    (``node_index_width`` bits: a leaf for UPDATE and READ, a node of ``level`` for DEBUG),
    ``priority`` (``input_width`` bits, raw ``input_format``; saturates to the leaf format) and
    ``target`` (``target_bits`` bits, the fraction ``x_raw`` of SAMPLE). Unused fields are
    ignored.
    """
    _check(config)
    return data.StructLayout({
        "op":       SumTreeOp,
        "level":    unsigned(config.level_select_width),
        "index":    unsigned(config.node_index_width),
        "priority": unsigned(config.input_width),
        "target":   unsigned(config.target_bits),
    })


def response_layout(config: SumTreeConfig) -> data.StructLayout:
    """Response payload.

    ``op`` echoes the command. ``index`` (``node_index_width`` bits) is the sampled leaf, the
    inserted slot, the read leaf or the debug node; ``value`` (``level_widths[0]`` bits, the root
    width) its raw priority or node sum. ``empty``: a sample found every priority zero (``index``
    and ``value`` are 0). ``invalid``: a READ or DEBUG addressed no node (``value`` is 0).
    """
    _check(config)
    return data.StructLayout({
        "op":      SumTreeOp,
        "index":   unsigned(config.node_index_width),
        "value":   unsigned(config.root_width),
        "empty":   1,
        "invalid": 1,
    })


def op_layout(config: SumTreeConfig) -> data.StructLayout:
    """The record of one operation in a pipeline stage of the tree (internal).

    Decoded flags (``sample``, ``write``, ``read``, ``debug``, ``respond``), the leaf index of a
    write or the node index a sample has reached (``index``), the new leaf value (``prio``) and
    its change (``delta``, signed) of a write, the remaining target of a sample (``target``, the
    fraction ``x_raw`` before the root stage) and the response value (``value``).
    """
    _check(config)
    wl = config.level_widths[-1]
    return data.StructLayout({
        "valid":   1,
        "op":      SumTreeOp,
        "sample":  1,
        "prng":    1,
        "write":   1,
        "read":    1,
        "debug":   1,
        "respond": 1,
        "empty":   1,
        "invalid": 1,
        "level":   unsigned(config.level_select_width),
        "index":   unsigned(config.node_index_width),
        "prio":    unsigned(wl),
        "delta":   signed(wl + 1),
        "target":  unsigned(max(config.root_width, config.target_bits)),
        "value":   unsigned(config.root_width),
    })
