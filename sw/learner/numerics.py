"""Number formats of the learner: its tensor units and the fixed-point formats of a training step.
Plain Python, no Amaranth (part of the learner's specification, :mod:`sw.learner.spec`).

:class:`TensorUnitConfig` describes one systolic array
(:class:`~rtl_gen.learner.tensor_unit.TensorUnit`):
its size, operand and accumulator widths, output format and the longest reduction it takes.
:class:`LearnerNumerics` describes the fixed-point formats of an MLP training step (activations,
weights, gradients, weight gradients, discount and learning rate) and derives from them the tensor
unit configuration of each GEMM kind: forward ``X·W``, backward ``δ·Wᵀ`` and weight gradient
``Xᵀ·δ``.
"""

from dataclasses import dataclass
from functools import cached_property

from sw.config import Config, check_int
from sw.fixed import MAX_INTERMEDIATE_BITS, ROUNDING_MODES, FixedFormat

__all__ = ["TensorUnitConfig", "NumericParams", "LearnerNumerics", "GEMM_KINDS", "TU_LIMITS"]

#: Accepted ranges of the integer parameters of :class:`TensorUnitConfig`.
TU_LIMITS = {
    "rows": (1, 64),
    "cols": (1, 64),
    "in_width": (2, 24),
    "acc_width": (4, 56),
    "out_width": (2, 56),
    "max_k": (1, 1 << 20),
}

#: The three GEMMs of a training step, named as in CF'22 section 3.2.
GEMM_KINDS = ("fw", "bw", "wa")


def _check_rounding(rounding):
    if rounding not in ROUNDING_MODES:
        raise ValueError(f"rounding must be one of {', '.join(ROUNDING_MODES)}, "
                         f"not {rounding!r}")


@dataclass(frozen=True)
class TensorUnitConfig(Config):
    """Parameters of :class:`~rtl_gen.learner.tensor_unit.TensorUnit`.

    The unit computes one ``rows × cols`` output tile ``C = A·B`` per reduction: element k of
    the input stream carries column k of A (``rows`` values) and row k of B (``cols`` values).

    Parameters
    ----------
    rows, cols : int
        Array size R × C, 1..64 each: R·C multiply-accumulate cells.
    in_width : int
        Bits of the signed A and B operands, 2..24. 16 (or up to 18) fits one DSP48E2 per cell.
    a_frac, b_frac : int
        Fraction bits of A and B, 0..in_width-1. Products and the accumulator have
        ``a_frac + b_frac`` fraction bits.
    acc_width : int
        Bits of the signed accumulator in each cell, 2·in_width..56. The accumulator saturates:
        a reduction whose partial sums leave the range is clamped at every step and flags the
        result (see :attr:`exact_k` for when that cannot happen).
    out_width, out_frac : int
        Signed output format, out_width ≤ acc_width and out_frac ≤ a_frac + b_frac. The
        accumulator is rounded (``rounding``) by ``a_frac + b_frac - out_frac`` bits and
        saturated to it with :mod:`sw.fixed`.
    rounding : str
        Rounding mode of the output conversion (see :mod:`sw.fixed`).
    max_k : int
        Longest reduction (elements up to and including the one with ``last``), 1..2**20. It
        sizes the reduction counter; a longer reduction still computes the saturating sum but
        raises the sticky ``k_overflow`` flag, and the golden model refuses it.

    Raises
    ------
    ValueError
        If a parameter is out of range; the message names it.
    """
    what = "tensor unit"

    rows: int = 8
    cols: int = 8
    in_width: int = 16
    a_frac: int = 8
    b_frac: int = 8
    acc_width: int = 32
    out_width: int = 16
    out_frac: int = 8
    rounding: str = "half_up"
    max_k: int = 4096

    def __post_init__(self):
        for name, (lo, hi) in TU_LIMITS.items():
            check_int(name, getattr(self, name), lo, hi)
        check_int("a_frac", self.a_frac, 0, self.in_width - 1)
        check_int("b_frac", self.b_frac, 0, self.in_width - 1)
        check_int("acc_width", self.acc_width, 2 * self.in_width, TU_LIMITS["acc_width"][1])
        check_int("out_width", self.out_width, 2, self.acc_width)
        check_int("out_frac", self.out_frac, 0, min(self.out_width, self.a_frac + self.b_frac))
        _check_rounding(self.rounding)

    # -- formats ----------------------------------------------------------------------------------
    @property
    def a_format(self) -> FixedFormat:
        return FixedFormat(self.in_width, self.a_frac, True, self.rounding)

    @property
    def b_format(self) -> FixedFormat:
        return FixedFormat(self.in_width, self.b_frac, True, self.rounding)

    @property
    def acc_format(self) -> FixedFormat:
        return FixedFormat(self.acc_width, self.a_frac + self.b_frac, True, self.rounding)

    @property
    def out_format(self) -> FixedFormat:
        return FixedFormat(self.out_width, self.out_frac, True, self.rounding)

    @property
    def shift(self) -> int:
        """Fraction bits dropped from the accumulator to the output."""
        return self.a_frac + self.b_frac - self.out_frac

    @property
    def exact_k(self) -> int:
        """Longest reduction whose accumulator cannot saturate, whatever the operands.

        The largest product magnitude is ``2**(2*in_width - 2)`` (both operands at their
        minimum), so ``exact_k = floor((2**(acc_width-1) - 1) / 2**(2*in_width-2))``. With
        16-bit operands a 32-bit accumulator guarantees only k = 1 (operands of realistic
        magnitude are far from that: the tests check the saturation flags), 40 bits 511 and
        48 bits 131071.
        """
        return ((1 << (self.acc_width - 1)) - 1) >> (2 * self.in_width - 2)

    # -- timing -----------------------------------------------------------------------------------
    @property
    def latency(self) -> int:
        """Cycles from the transfer of an element with ``last`` to the first output beat of its
        tile (``rows + cols + 3``); the tile's R beats follow on consecutive cycles."""
        return self.rows + self.cols + 3

    @property
    def macs(self) -> int:
        return self.rows * self.cols


@dataclass(frozen=True)
class NumericParams(Config):
    """The fixed-point parameters of a training step, shared by :class:`LearnerNumerics` and
    :class:`~sw.learner.spec.LearnerConfig` (which flattens them onto the command line); see
    :class:`LearnerNumerics` for their meaning. :meth:`_check_numerics` validates them."""

    width: int = 16
    act_frac: int = 10
    weight_frac: int = 13
    grad_frac: int = 11
    acc_width: int = 32
    coef_width: int = 17
    lr_width: int = 24
    lr_frac: int = 24
    rounding: str = "half_up"

    def _check_numerics(self):
        check_int("width", self.width, 4, 24)
        check_int("act_frac", self.act_frac, 0, self.width - 2)
        check_int("weight_frac", self.weight_frac, 0, self.width - 1)
        check_int("grad_frac", self.grad_frac, 0, self.width - 1)
        check_int("acc_width", self.acc_width, 2 * self.width, TU_LIMITS["acc_width"][1])
        check_int("coef_width", self.coef_width, 2, 24)
        check_int("lr_width", self.lr_width, 2, 24)
        check_int("lr_frac", self.lr_frac, 0, self.lr_width)
        _check_rounding(self.rounding)
        need = self.lr_frac + self.act_frac + self.grad_frac - self.weight_frac
        if need < 0:
            raise ValueError(f"lr_frac + act_frac + grad_frac must be at least weight_frac "
                             f"({self.weight_frac}), not {need + self.weight_frac}")
        if self.lr_width + self.acc_width > MAX_INTERMEDIATE_BITS:
            raise ValueError(f"lr_width + acc_width must be at most {MAX_INTERMEDIATE_BITS}, "
                             f"not {self.lr_width + self.acc_width}")

    @property
    def numeric_params(self) -> dict:
        """The :class:`NumericParams` fields, by name."""
        return {f: getattr(self, f) for f in NumericParams.__dataclass_fields__}


@dataclass(frozen=True)
class LearnerNumerics(NumericParams):
    """Fixed-point formats of an MLP training step on tensor units (CF'22 section 3.2).

    Every operand a tensor unit sees is ``width`` bits signed; the formats differ in their
    fraction bits. Biases are the last row of each weight matrix (inputs get a constant 1.0
    column appended), so FW and WA are plain GEMMs.

    Parameters
    ----------
    sizes : tuple of int
        Neurons per layer, input first, e.g. ``(4, 64, 64, 2)`` (three weight layers). 2..8
        entries, each 1..4096.
    width : int
        Operand bits of every GEMM, 4..24 (16 fits a DSP48E2 port).
    act_frac : int
        Fraction bits of inputs, pre-activations, activations, Q values, rewards and TD targets.
        At most width-2, so that the bias input 1.0 is representable. The default 10 (16-bit
        range ±32, ulp 0.001) is the precision/range trade measured in
        ``tb/learner/test_mlp.py``: 8 fraction bits triple the gradient error (ReLU
        masks flip near zero). CartPole's Q values approach 1/(1-γ) = 100 late in training:
        scale the rewards by 1/4 or give up precision.
    weight_frac : int
        Fraction bits of the weights (and biases), 0..width-1. Default 13: range ±4.
    grad_frac : int
        Fraction bits of the back-propagated errors δ, 0..width-1. Default 11: range ±16.
    acc_width : int
        Accumulator bits of every tensor unit (saturating), 2·width..56. The weight gradients
        are read out at this width without rounding (fraction act_frac + grad_frac).
    coef_width : int
        Bits of the unsigned discount γ and of the per-sample loss weights (fraction
        coef_width-1, so 1.0 is exact), 2..24.
    lr_width, lr_frac : int
        Unsigned format of the update coefficient η = lr·2/B (the 2/B of the mean squared error
        is folded in, so δ = Q - y keeps its magnitude): 2..24 bits, lr_frac ≤ lr_width. The
        default 24/24 holds η in [0, 1) with 2**-24 resolution (lr = 0.01 at B = 64 is
        5243 ulps).
    rounding : str
        Rounding mode of every conversion.
    max_k : int
        ``max_k`` of the tensor units: at least the largest reduction (batch, or layer width+1).
    """
    what = "learner"

    sizes: tuple = (4, 64, 64, 2)
    max_k: int = 4096

    def __post_init__(self):
        sizes = self.sizes
        if isinstance(sizes, list):
            object.__setattr__(self, "sizes", tuple(sizes))
            sizes = self.sizes
        if (not isinstance(sizes, tuple) or not 2 <= len(sizes) <= 8
                or not all(isinstance(s, int) and not isinstance(s, bool) and 1 <= s <= 4096
                           for s in sizes)):
            raise ValueError(f"sizes must be a tuple of 2..8 integers in 1..4096, not {sizes!r}")
        self._check_numerics()
        check_int("max_k", self.max_k, 1, TU_LIMITS["max_k"][1])

    @property
    def n_layers(self) -> int:
        """Weight layers (CF'22 counts neuron layers: its L is ``n_layers + 1``)."""
        return len(self.sizes) - 1

    # -- formats ----------------------------------------------------------------------------------
    # Built once per (frozen) numerics: the drivers and golden models ask for them per call.
    def _fmt(self, frac, width=None):
        return FixedFormat(width or self.width, frac, True, self.rounding)

    @cached_property
    def act_format(self) -> FixedFormat:
        return self._fmt(self.act_frac)

    @cached_property
    def weight_format(self) -> FixedFormat:
        return self._fmt(self.weight_frac)

    @cached_property
    def grad_format(self) -> FixedFormat:
        return self._fmt(self.grad_frac)

    @cached_property
    def wgrad_format(self) -> FixedFormat:
        return self._fmt(self.act_frac + self.grad_frac, self.acc_width)

    @cached_property
    def coef_format(self) -> FixedFormat:
        return FixedFormat(self.coef_width, self.coef_width - 1, False, self.rounding)

    @property
    def loss_weight_format(self) -> FixedFormat:
        """Per-sample loss weights (prioritized replay's importance-sampling weights, DQN):
        the coefficient format, unsigned with ``coef_width - 1`` fraction bits, so 1.0 is exact
        and a weight of 1.0 leaves δ bit for bit as without weights."""
        return self.coef_format

    @cached_property
    def lr_format(self) -> FixedFormat:
        return FixedFormat(self.lr_width, self.lr_frac, False, self.rounding)

    @property
    def moment_format(self) -> FixedFormat:
        """Adam's first moment (:func:`sw.learner.adam.moment_format`)."""
        from .adam import moment_format
        return moment_format(self)

    @property
    def residual_format(self) -> FixedFormat:
        """Adam's master-weight residual (:func:`sw.learner.adam.residual_format`)."""
        from .adam import residual_format
        return residual_format(self)

    @property
    def logv_format(self) -> FixedFormat:
        """Adam's second moment as its logarithm (:func:`sw.learner.adam.log_format`)."""
        from .adam import log_format
        return log_format()

    def weight_shapes(self) -> list:
        """Shape ``(n_in + 1, n_out)`` of each weight matrix (bias in the last row)."""
        return [(a + 1, b) for a, b in zip(self.sizes[:-1], self.sizes[1:])]

    def tensor_unit(self, kind: str, *, rows: int = 8, cols: int = 8) -> TensorUnitConfig:
        """Tensor unit configuration of one GEMM kind.

        ``"fw"``: A = activations, B = weights, out = pre-activations (act format).
        ``"bw"``: A = δ, B = Wᵀ, out = δ of the layer below (grad format, before the ReLU mask).
        ``"wa"``: A = activationsᵀ, B = δ, out = weight gradient (acc width, no rounding).
        The numbers do not depend on ``rows`` and ``cols``: tiling only pads with zeros.
        """
        common = dict(rows=rows, cols=cols, in_width=self.width, acc_width=self.acc_width,
                      rounding=self.rounding, max_k=self.max_k)
        if kind == "fw":
            return TensorUnitConfig(a_frac=self.act_frac, b_frac=self.weight_frac,
                                    out_width=self.width, out_frac=self.act_frac, **common)
        if kind == "bw":
            return TensorUnitConfig(a_frac=self.grad_frac, b_frac=self.weight_frac,
                                    out_width=self.width, out_frac=self.grad_frac, **common)
        if kind == "wa":
            return TensorUnitConfig(a_frac=self.act_frac, b_frac=self.grad_frac,
                                    out_width=self.acc_width,
                                    out_frac=self.act_frac + self.grad_frac, **common)
        raise ValueError(f"kind must be one of {', '.join(GEMM_KINDS)}, not {kind!r}")


