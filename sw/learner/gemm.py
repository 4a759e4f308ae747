"""Bit-exact golden models of the tensor unit (:class:`rtl_gen.learner.tensor_unit.TensorUnit`)
and of tiled GEMM on it, with its exact cycle model.

Arithmetic (the same in every function here and in the RTL): products of raw operands are
exact; each cell adds them in order k = 0, 1, ... to a saturating ``acc_width`` accumulator
(clamped after every addition, with a sticky flag); at the end of a reduction the sum is
converted with :meth:`FixedFormat.rshift_round` and :meth:`FixedFormat.saturate` of
``config.out_format``.

* :func:`accumulate`, :func:`to_output` -- the cell arithmetic on whole matrices.
* :func:`gemm_fixed` -- C = A·B (+ C0) for any M, K, N, as the tiled hardware computes it.
* :class:`TensorUnitModel` -- element-by-element model of the unit's stream interface.
* :func:`tile_stream`, :func:`untile` -- the host-side tiler: the element stream that computes
  a GEMM of any shape on an R × C unit, and the reassembly of the output beats.
* :func:`schedule`, :func:`stream_cycles`, :func:`gemm_cycles`, :func:`mac_utilisation` -- the
  cycle model, asserted against the RTL in the tests.

Tiling: output tiles are visited row tile by row tile (``mi``), column tile by column tile
(``ni``) inside; edge tiles are padded with zeros (a padded row or column of A or B contributes
nothing, so results do not depend on R and C). Each tile gets the whole K as one reduction if
``K ≤ max_k`` (minus R when preloading C0), else in chunks of at most ``max_k`` elements whose
rounded outputs the host adds with saturation in the output format.
"""

import math

import numpy as np

from sw.learner.spec import TensorUnitConfig

__all__ = [
    "accumulate", "to_output", "gemm_fixed", "gemm_float", "TensorUnitModel",
    "chunk_lengths", "tile_stream", "untile", "schedule", "stream_cycles", "gemm_cycles",
    "ideal_cycles", "mac_utilisation",
]


def _check_config(config):
    if not isinstance(config, TensorUnitConfig):
        raise TypeError(f"config must be a TensorUnitConfig, not {config!r}")


def _check_operands(a, b, config):
    a = np.asarray(a)
    b = np.asarray(b)
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"a and b must be 2-D (M × K and K × N), not {a.ndim}-D and {b.ndim}-D")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"inner dimensions differ: a is {a.shape[0]} × {a.shape[1]}, "
                         f"b is {b.shape[0]} × {b.shape[1]}")
    if 0 in a.shape or b.shape[1] == 0:
        raise ValueError(f"M, K and N must be at least 1, not {a.shape[0]}, {a.shape[1]}, "
                         f"{b.shape[1]}")
    if not (np.issubdtype(a.dtype, np.integer) and np.issubdtype(b.dtype, np.integer)):
        raise ValueError("a and b must be raw integer arrays (quantize them first)")
    config.a_format.check_raw(a, "a")
    config.b_format.check_raw(b, "b")
    return a.astype(np.int64), b.astype(np.int64)


def _check_preload(c, shape, config):
    c = np.asarray(c)
    if c.shape != shape:
        raise ValueError(f"c must have shape {shape}, not {c.shape}")
    if not np.issubdtype(c.dtype, np.integer):
        raise ValueError("c must be a raw integer array in the output format")
    config.out_format.check_raw(c, "c")
    if config.shift > config.in_width - 2:
        raise ValueError(f"preloading C needs 2**shift = 2**{config.shift} to fit the "
                         f"{config.in_width}-bit A operand")
    lo, hi = -(1 << (config.in_width - 1)), (1 << (config.in_width - 1)) - 1
    if c.size and (c.min() < lo or c.max() > hi):
        raise ValueError(f"c must fit the {config.in_width}-bit B operand to be preloaded "
                         f"(raw {lo}..{hi})")
    return c.astype(np.int64)


def accumulate(a, b, config: TensorUnitConfig, *, acc0=None):
    """Saturating accumulation of ``acc0 + sum_k a[:, k] b[k, :]`` in order k = 0, 1, ...

    Parameters
    ----------
    a, b : int arrays, M × K and K × N
        Raw operands.
    acc0 : int array, M × N, optional
        Initial accumulator (raw, accumulator format), zero by default.

    Returns
    -------
    acc : int64 array, M × N
    overflow : bool array, M × N
        The accumulator saturated at some step.
    """
    fmt = config.acc_format
    M, N = a.shape[0], b.shape[1]
    acc = np.zeros((M, N), dtype=np.int64) if acc0 is None else np.array(acc0, dtype=np.int64)
    # Fast path: if even the sum of magnitudes stays in range no partial sum can saturate.
    bound = np.abs(acc).astype(np.float64) + np.abs(a).astype(np.float64) @ np.abs(b)
    if bound.max() < fmt.max_raw * (1 - 1e-9):
        return acc + a @ b, np.zeros((M, N), dtype=bool)
    ovf = np.zeros((M, N), dtype=bool)
    for k in range(a.shape[1]):
        acc, o = fmt.saturate(acc + np.outer(a[:, k], b[k, :]))
        ovf |= o
    return acc, ovf


def to_output(acc, acc_ovf, config: TensorUnitConfig):
    """Output conversion of accumulators: round by ``shift`` bits, saturate. Returns
    ``(values, overflow)`` with the accumulator flags or'ed in."""
    out, o = config.out_format.saturate(config.out_format.rshift_round(acc, config.shift))
    return out, o | np.asarray(acc_ovf, dtype=bool)


def chunk_lengths(K: int, config: TensorUnitConfig, *, preload: bool = False) -> list:
    """Data elements of each reduction a tile's K is split into (``max_k``, minus R preload
    elements in the first reduction when preloading)."""
    first = config.max_k - (config.rows if preload else 0)
    if first < 1:
        raise ValueError(f"max_k ({config.max_k}) must exceed rows ({config.rows}) to preload c")
    lengths = [min(K, first)]
    rest = K - lengths[0]
    while rest > 0:
        lengths.append(min(rest, config.max_k))
        rest -= lengths[-1]
    return lengths


def gemm_fixed(a, b, config: TensorUnitConfig, *, c=None, return_overflow=False):
    """C = A·B (+ C0) exactly as the tiled tensor unit computes it.

    Parameters
    ----------
    a : int array, M × K
        Raw operands in ``config.a_format``.
    b : int array, K × N
        Raw operands in ``config.b_format``.
    config : TensorUnitConfig
    c : int array, M × N, optional
        C0 (raw, output format) to accumulate into, preloaded through the array.
    return_overflow : bool
        Also return the per-element overflow flags.

    Returns
    -------
    out : int64 array, M × N
        Raw values in ``config.out_format``.
    overflow : bool array, M × N
        Only with ``return_overflow``.

    Raises
    ------
    ValueError
        For mismatched shapes, empty dimensions, non-integer or out-of-range operands.
    """
    _check_config(config)
    a, b = _check_operands(a, b, config)
    M, N = a.shape[0], b.shape[1]
    acc0 = None
    if c is not None:
        acc0 = _check_preload(c, (M, N), config) << config.shift
    out = ovf = None
    start = 0
    for i, length in enumerate(chunk_lengths(a.shape[1], config, preload=c is not None)):
        acc, acc_ovf = accumulate(a[:, start:start + length], b[start:start + length],
                                  config, acc0=acc0 if i == 0 else None)
        part, part_ovf = to_output(acc, acc_ovf, config)
        if out is None:
            out, ovf = part, part_ovf
        else:
            out, o = config.out_format.saturate(out + part)
            ovf = ovf | part_ovf | o
        start += length
    return (out, ovf) if return_overflow else out


def gemm_float(a, b, config: TensorUnitConfig, *, c=None):
    """Real value of ``A·B (+ C0)`` for raw operands (float64, no rounding).

    Without saturation and with ``K ≤ max_k``, :func:`gemm_fixed` differs from it by one
    rounding: at most half an output ulp (``"floor"``: less than one ulp), whatever K is.
    """
    af = config.a_format.to_float(a)
    bf = config.b_format.to_float(b)
    res = af @ bf
    if c is not None:
        res = res + config.out_format.to_float(c)
    return res


class TensorUnitModel:
    """Element-by-element model of the tensor unit's stream interface.

    State persists across :meth:`run` calls, like the hardware between transfers: the
    accumulators of an unfinished reduction, the reduction length and the sticky flags.
    """

    def __init__(self, config: TensorUnitConfig):
        _check_config(config)
        self.config = config
        R, C = config.rows, config.cols
        self.acc = np.zeros((R, C), dtype=np.int64)
        self.acc_ovf = np.zeros((R, C), dtype=bool)
        self.kcount = 0
        self.sticky_overflow = False
        self.sticky_k_overflow = False

    def run(self, a, b, last):
        """Feed elements; return the output beats they complete.

        Parameters
        ----------
        a, b, last : arrays of shapes (n, rows), (n, cols), (n,)
            As in :func:`rtl_gen.learner.tensor_unit.pack_elements`.

        Returns
        -------
        dict
            ``"c"`` int64 (beats, cols), ``"overflow"`` and ``"last"`` bool (beats,).
        """
        cfg = self.config
        a = cfg.a_format.check_raw(np.asarray(a, dtype=np.int64), "a")
        b = cfg.b_format.check_raw(np.asarray(b, dtype=np.int64), "b")
        last = np.asarray(last).astype(bool)
        if a.shape != (len(last), cfg.rows) or b.shape != (len(last), cfg.cols):
            raise ValueError(f"a and b must have shapes (n, {cfg.rows}) and (n, {cfg.cols})")
        fmt = cfg.acc_format
        beats_c, beats_o, beats_l = [], [], []
        for k in range(len(last)):
            if self.kcount >= cfg.max_k:
                self.sticky_k_overflow = True
            self.acc, o = fmt.saturate(self.acc + np.outer(a[k], b[k]))
            self.acc_ovf |= o
            if last[k]:
                out, ovf = to_output(self.acc, self.acc_ovf, cfg)
                row_ovf = ovf.any(axis=1)
                beats_c.append(out)
                beats_o.append(row_ovf)
                beats_l.append(np.arange(cfg.rows) == cfg.rows - 1)
                self.sticky_overflow |= bool(row_ovf.any())
                self.acc[:] = 0
                self.acc_ovf[:] = False
                self.kcount = 0
            else:
                self.kcount = min(self.kcount + 1, cfg.max_k)
        if not beats_c:
            return {"c": np.zeros((0, cfg.cols), dtype=np.int64),
                    "overflow": np.zeros(0, bool), "last": np.zeros(0, bool)}
        return {"c": np.concatenate(beats_c), "overflow": np.concatenate(beats_o),
                "last": np.concatenate(beats_l)}


def tile_stream(a, b, config: TensorUnitConfig, *, c=None):
    """The element stream computing ``A·B (+ C0)`` on an R × C tensor unit.

    Returns
    -------
    stream : dict
        ``"a"`` (n, rows), ``"b"`` (n, cols), ``"last"`` (n,): see
        :func:`~rtl_gen.learner.tensor_unit.pack_elements`. For tile (mi, ni), element k holds
        ``A[mi·R : mi·R+R, k]`` and ``B[k, ni·C : ni·C+C]``, zero-padded at the edges: the
        transposes of BW and WA are these index orders, nothing else.
    tiles : list of (mi, ni, chunk)
        The reduction each group of R output beats belongs to, in stream order.
    """
    _check_config(config)
    a, b = _check_operands(a, b, config)
    R, C = config.rows, config.cols
    M, K = a.shape
    N = b.shape[1]
    c = None if c is None else _check_preload(c, (M, N), config)
    mt, nt = -(-M // R), -(-N // C)
    ap = np.zeros((mt * R, K), dtype=np.int64)
    ap[:M] = a
    bp = np.zeros((K, nt * C), dtype=np.int64)
    bp[:, :N] = b
    cp = None
    if c is not None:
        cp = np.zeros((mt * R, nt * C), dtype=np.int64)
        cp[:M, :N] = c
    lengths = chunk_lengths(K, config, preload=c is not None)
    parts_a, parts_b, parts_l, tiles = [], [], [], []
    for mi in range(mt):
        a_tile = ap[mi * R:(mi + 1) * R]            # R × K; element k is column k
        for ni in range(nt):
            b_tile = bp[:, ni * C:(ni + 1) * C]     # K × C; element k is row k
            start = 0
            for ci, length in enumerate(lengths):
                ea = a_tile[:, start:start + length].T
                eb = b_tile[start:start + length]
                if ci == 0 and cp is not None:
                    ea = np.concatenate([np.eye(R, dtype=np.int64) << config.shift, ea])
                    eb = np.concatenate([cp[mi * R:(mi + 1) * R, ni * C:(ni + 1) * C], eb])
                el = np.zeros(len(ea), dtype=bool)
                el[-1] = True
                parts_a.append(ea)
                parts_b.append(eb)
                parts_l.append(el)
                tiles.append((mi, ni, ci))
                start += length
    stream = {"a": np.concatenate(parts_a), "b": np.concatenate(parts_b),
              "last": np.concatenate(parts_l)}
    return stream, tiles


def untile(beats, tiles, M: int, N: int, config: TensorUnitConfig):
    """Reassemble output beats (``TensorUnitModel.run`` or the RTL) into M × N results.

    Chunk results of one tile are added in the output format with saturation, in chunk order.
    Returns ``(out, overflow)``; ``overflow`` is per beat, so per tile row here.
    """
    R, C = config.rows, config.cols
    vals = np.asarray(beats["c"], dtype=np.int64)
    flags = np.asarray(beats["overflow"], dtype=bool)
    if len(vals) != R * len(tiles):
        raise ValueError(f"expected {R * len(tiles)} beats for {len(tiles)} tiles, "
                         f"got {len(vals)}")
    mt, nt = -(-M // R), -(-N // C)
    out = np.zeros((mt * R, nt * C), dtype=np.int64)
    ovf = np.zeros((mt * R, nt * C), dtype=bool)
    for t, (mi, ni, ci) in enumerate(tiles):
        block = vals[t * R:(t + 1) * R]
        rows, cols = slice(mi * R, (mi + 1) * R), slice(ni * C, (ni + 1) * C)
        fl = np.repeat(flags[t * R:(t + 1) * R, None], C, axis=1)
        if ci == 0:
            out[rows, cols] = block
            ovf[rows, cols] = fl
        else:
            s, o = config.out_format.saturate(out[rows, cols] + block)
            out[rows, cols] = s
            ovf[rows, cols] |= fl | o
    return out[:M, :N], ovf[:M, :N]


# -- cycle model ----------------------------------------------------------------------------------
def schedule(last, config: TensorUnitConfig):
    """Transfer cycles of a stream with an always-valid producer and an always-ready consumer.

    An element is accepted every cycle, except that an element with ``last`` waits until R
    cycles after the previous ``last``. Returns ``(in_cycles, out_cycles)``: the cycle of each
    input transfer (the first at 0) and of each output beat.
    """
    _check_config(config)
    R = config.rows
    last = np.asarray(last).astype(bool)
    t, prev = -1, -R
    cin = np.zeros(len(last), dtype=np.int64)
    for k, is_last in enumerate(last):
        t += 1
        if is_last:
            t = max(t, prev + R)
            prev = t
        cin[k] = t
    lasts = cin[last]
    cout = (lasts[:, None] + config.latency + np.arange(R)[None, :]).ravel()
    return cin, cout


def stream_cycles(lengths, config: TensorUnitConfig) -> int:
    """Cycles from the first input transfer to the last output beat (inclusive) for reductions
    of the given lengths streamed back to back: ``sum`` of each tile's ``max(k, R)`` (the first
    counts ``k - 1``), then ``latency + R``."""
    lengths = list(lengths)
    if not lengths or any(not isinstance(k, (int, np.integer)) or k < 1 for k in lengths):
        raise ValueError(f"lengths must be positive integers, not {lengths!r}")
    R = config.rows
    t = lengths[0] - 1
    for k in lengths[1:]:
        t += max(k, R)
    return int(t + config.latency + R)


def gemm_cycles(M: int, K: int, N: int, config: TensorUnitConfig, *, preload=False) -> int:
    """Exact cycles of an M × K × N GEMM on the tensor unit (first input to last output).

    With T = ceil(M/R)·ceil(N/C) tiles of one reduction of k = K (+ R if preloading) elements::

        cycles = (k - 1) + (T - 1)·max(k, R) + (R + C + 3) + R

    i.e. the ideal ``M·K·N/(R·C)`` when R | M, C | N and K ≥ R, plus ``R + C + 2 + R`` of fill
    and drain (the ``-1`` is the first element's own cycle). When K exceeds ``max_k`` the tiles
    have several reductions and :func:`stream_cycles` sums them.
    """
    _check_config(config)
    for name, v in (("M", M), ("K", K), ("N", N)):
        if not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name} must be a positive integer, not {v!r}")
    R, C = config.rows, config.cols
    tiles = math.ceil(M / R) * math.ceil(N / C)
    lengths = chunk_lengths(K, config, preload=preload)
    if preload:
        lengths[0] += R
    if len(lengths) == 1:
        k = lengths[0]
        return (k - 1) + (tiles - 1) * max(k, R) + config.latency + R
    return stream_cycles(lengths * tiles, config)


def ideal_cycles(M: int, K: int, N: int, config: TensorUnitConfig) -> float:
    """``M·K·N / (R·C)``: every cell busy every cycle."""
    return M * K * N / config.macs


def mac_utilisation(M: int, K: int, N: int, config: TensorUnitConfig) -> float:
    """Useful multiply-accumulates over ``R·C·gemm_cycles``."""
    return ideal_cycles(M, K, N, config) / gemm_cycles(M, K, N, config)
