"""Configuration of the learner's tensor units, shared by the generator, golden models and DSE.

:class:`TensorUnitConfig` describes one systolic array (:class:`~.tensor_unit.TensorUnit`):
its size, operand and accumulator widths, output format and the longest reduction it takes.
:class:`LearnerNumerics` describes the fixed-point formats of an MLP training step (activations,
weights, gradients, weight gradients, discount and learning rate) and derives from them the tensor
unit configuration of each GEMM kind: forward ``X·W``, backward ``δ·Wᵀ`` and weight gradient
``Xᵀ·δ``.
"""

from dataclasses import asdict, dataclass

from ..fixed import MAX_INTERMEDIATE_BITS, ROUNDING_MODES, FixedFormat

__all__ = ["TensorUnitConfig", "LearnerNumerics", "LearnerConfig", "GEMM_KINDS", "TU_LIMITS",
           "LOSS_KINDS", "ARRAY_SIZES", "AXI_DATA_WIDTHS", "DP_VALUES"]

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


def _check_int(name, value, lo, hi):
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise ValueError(f"{name} must be an integer in {lo}..{hi}, not {value!r}")


def _check_rounding(rounding):
    if rounding not in ROUNDING_MODES:
        raise ValueError(f"rounding must be one of {', '.join(ROUNDING_MODES)}, "
                         f"not {rounding!r}")


@dataclass(frozen=True)
class TensorUnitConfig:
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
        saturated to it with :mod:`rtl_gen.fixed`.
    rounding : str
        Rounding mode of the output conversion (see :mod:`rtl_gen.fixed`).
    max_k : int
        Longest reduction (elements up to and including the one with ``last``), 1..2**20. It
        sizes the reduction counter; a longer reduction still computes the saturating sum but
        raises the sticky ``k_overflow`` flag, and the golden model refuses it.

    Raises
    ------
    ValueError
        If a parameter is out of range; the message names it.
    """
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
            _check_int(name, getattr(self, name), lo, hi)
        _check_int("a_frac", self.a_frac, 0, self.in_width - 1)
        _check_int("b_frac", self.b_frac, 0, self.in_width - 1)
        _check_int("acc_width", self.acc_width, 2 * self.in_width, TU_LIMITS["acc_width"][1])
        _check_int("out_width", self.out_width, 2, self.acc_width)
        _check_int("out_frac", self.out_frac, 0, min(self.out_width, self.a_frac + self.b_frac))
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

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "TensorUnitConfig":
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown tensor unit parameter(s): {', '.join(sorted(unknown))}")
        return cls(**d)


@dataclass(frozen=True)
class LearnerNumerics:
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
        ``tb/learner/test_mlp_golden.py``: 8 fraction bits triple the gradient error (ReLU
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
        Bits of the unsigned discount γ (fraction coef_width-1, so 1.0 is exact), 2..24.
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
    sizes: tuple = (4, 64, 64, 2)
    width: int = 16
    act_frac: int = 10
    weight_frac: int = 13
    grad_frac: int = 11
    acc_width: int = 32
    coef_width: int = 17
    lr_width: int = 24
    lr_frac: int = 24
    rounding: str = "half_up"
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
        _check_int("width", self.width, 4, 24)
        _check_int("act_frac", self.act_frac, 0, self.width - 2)
        _check_int("weight_frac", self.weight_frac, 0, self.width - 1)
        _check_int("grad_frac", self.grad_frac, 0, self.width - 1)
        _check_int("acc_width", self.acc_width, 2 * self.width, TU_LIMITS["acc_width"][1])
        _check_int("coef_width", self.coef_width, 2, 24)
        _check_int("lr_width", self.lr_width, 2, 24)
        _check_int("lr_frac", self.lr_frac, 0, self.lr_width)
        _check_rounding(self.rounding)
        _check_int("max_k", self.max_k, 1, TU_LIMITS["max_k"][1])
        need = self.lr_frac + self.act_frac + self.grad_frac - self.weight_frac
        if need < 0:
            raise ValueError(f"lr_frac + act_frac + grad_frac must be at least weight_frac "
                             f"({self.weight_frac}), not {need + self.weight_frac}")
        if self.lr_width + self.acc_width > MAX_INTERMEDIATE_BITS:
            raise ValueError(f"lr_width + acc_width must be at most {MAX_INTERMEDIATE_BITS}, "
                             f"not {self.lr_width + self.acc_width}")

    @property
    def n_layers(self) -> int:
        """Weight layers (CF'22 counts neuron layers: its L is ``n_layers + 1``)."""
        return len(self.sizes) - 1

    # -- formats ----------------------------------------------------------------------------------
    def _fmt(self, frac, width=None):
        return FixedFormat(width or self.width, frac, True, self.rounding)

    @property
    def act_format(self) -> FixedFormat:
        return self._fmt(self.act_frac)

    @property
    def weight_format(self) -> FixedFormat:
        return self._fmt(self.weight_frac)

    @property
    def grad_format(self) -> FixedFormat:
        return self._fmt(self.grad_frac)

    @property
    def wgrad_format(self) -> FixedFormat:
        return self._fmt(self.act_frac + self.grad_frac, self.acc_width)

    @property
    def coef_format(self) -> FixedFormat:
        return FixedFormat(self.coef_width, self.coef_width - 1, False, self.rounding)

    @property
    def lr_format(self) -> FixedFormat:
        return FixedFormat(self.lr_width, self.lr_frac, False, self.rounding)

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

    def to_dict(self) -> dict:
        d = asdict(self)
        d["sizes"] = list(self.sizes)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "LearnerNumerics":
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown learner parameter(s): {', '.join(sorted(unknown))}")
        return cls(**d)


#: Loss functions of the learner pipeline: ``"dqn"`` (TD target from an on-chip target network
#: FW chain) and ``"mse"`` (targets written by the host).
LOSS_KINDS = ("dqn", "mse")
#: Sizes S of the S × S tensor units of the learner pipeline.
ARRAY_SIZES = (2, 4, 8, 16)
#: Numbers of parallel learner pipelines (CF'22's data parallelism DP).
DP_VALUES = (1, 2, 4)
#: Data widths of the AXI4 memory port.
AXI_DATA_WIDTHS = (32, 64, 128, 256, 512)


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


@dataclass(frozen=True)
class LearnerConfig:
    """Parameters of the learner pipeline (:class:`~rtl_gen.learner.core.LearnerCore`) and its
    accelerator top (:class:`~rtl_gen.learner.accelerator.LearnerAccelerator`).

    The fixed-point fields are those of :class:`LearnerNumerics` (see there), flattened so that
    ``--param width=16`` works on the command line; :attr:`numerics` builds the object.

    Parameters
    ----------
    sizes : tuple of int, or str
        Neurons per layer, input first; ``"4,64,64,2"`` is accepted too. 2..8 entries, each
        1..1024; with ``loss="dqn"`` the last (the actions) at least 2.
    array : int
        S, in :data:`ARRAY_SIZES`: the block size of the activation, gradient and weight
        buffers (S × S blocks, one memory word each, so that one read gives a tensor unit up
        to S operands in either orientation), the width of LOSS and WU (S lanes), and the size
        of every tensor unit that ``stage_arrays`` does not set: by default every GEMM stage
        is an S × S array.
    stage_arrays : str or dict
        Per-stage R × C tensor units (CF'22's per-stage sizing, chosen by
        ``scripts/dse_learner.py``): ``{key: "RxC"}`` (or ``R`` for R × R, or ``(R, C)``), or
        the same as a string ``"fw:4x4,wa1:2x8"``. A key is a GEMM kind (``fw``, ``tfw``,
        ``bw``, ``wa``: every layer of that kind) or one stage (``fw0``, ``tfw1``, ``bw2``,
        ``wa0``: 0-based weight layer; it overrides its kind). R and C are powers of two in
        2..S (R: samples of an FW/BW tile, inputs of a WA tile; C: outputs of an FW/WA tile,
        inputs of a BW tile). Stored in a canonical string form (:attr:`stage_arrays`);
        :meth:`stage_array` gives one stage's size. Default ``""``: every stage S × S.
    max_batch : int
        Largest batch B a step takes, 1..4096 (sizes the buffers).
    sub_batch : int
        Samples per pipeline item, m: the batch streams through the stages as ``ceil(B/m)``
        sub-batches (CF'22's pipelining: its PI, the samples per pipeline, is about B/dp). A
        multiple of ``array``, at most ``max_batch`` rounded up to a multiple of ``array``.
    dp : int
        Parallel pipelines (CF'22's data parallelism), :data:`DP_VALUES`: sub-batch p runs on
        pipeline ``p mod dp``; the weight update reduces the pipelines' gradient scratchpads.
        With dp > 1, ``sub_batch / array`` must be a power of two (the host's sample-indexed
        view of the per-pipeline buffers is decoded by bit fields).
    loss : str
        ``"dqn"`` or ``"mse"`` (:data:`LOSS_KINDS`).
    axi_data_width : int
        Bits of the host memory port (:data:`AXI_DATA_WIDTHS`).
    width, act_frac, weight_frac, grad_frac, acc_width, coef_width, lr_width, lr_frac, rounding
        As in :class:`LearnerNumerics`.

    Raises
    ------
    ValueError
        If a parameter is out of range or the combination is invalid; the message names the
        parameter.
    """
    sizes: tuple = (4, 64, 64, 2)
    array: int = 8
    stage_arrays: str = ""
    max_batch: int = 64
    sub_batch: int = 8
    dp: int = 1
    loss: str = "dqn"
    axi_data_width: int = 64
    width: int = 16
    act_frac: int = 10
    weight_frac: int = 13
    grad_frac: int = 11
    acc_width: int = 32
    coef_width: int = 17
    lr_width: int = 24
    lr_frac: int = 24
    rounding: str = "half_up"

    def __post_init__(self):
        sizes = self.sizes
        if isinstance(sizes, str):
            try:
                sizes = tuple(int(x) for x in sizes.replace("-", ",").split(","))
            except ValueError:
                raise ValueError(f"sizes must be integers separated by commas, not "
                                 f"{self.sizes!r}") from None
        if isinstance(sizes, list):
            sizes = tuple(sizes)
        object.__setattr__(self, "sizes", sizes)
        if (not isinstance(sizes, tuple) or not 2 <= len(sizes) <= 8
                or not all(isinstance(s, int) and not isinstance(s, bool) and 1 <= s <= 1024
                           for s in sizes)):
            raise ValueError(f"sizes must be a tuple of 2..8 integers in 1..1024, not {sizes!r}")
        if self.array not in ARRAY_SIZES:
            raise ValueError(f"array must be one of {', '.join(map(str, ARRAY_SIZES))}, "
                             f"not {self.array!r}")
        _check_int("max_batch", self.max_batch, 1, 4096)
        top = -(-self.max_batch // self.array) * self.array
        if (not isinstance(self.sub_batch, int) or isinstance(self.sub_batch, bool)
                or self.sub_batch < self.array or self.sub_batch % self.array
                or self.sub_batch > top):
            raise ValueError(f"sub_batch must be a multiple of array ({self.array}) in "
                             f"{self.array}..{top}, not {self.sub_batch!r}")
        if self.dp not in DP_VALUES:
            raise ValueError(f"dp must be one of {', '.join(map(str, DP_VALUES))}, "
                             f"not {self.dp!r}")
        per = self.sub_batch // self.array
        if self.dp > 1 and per & (per - 1):
            raise ValueError(f"sub_batch / array must be a power of two with dp > 1, not "
                             f"{self.sub_batch} / {self.array}")
        if self.loss not in LOSS_KINDS:
            raise ValueError(f"loss must be one of {', '.join(LOSS_KINDS)}, not {self.loss!r}")
        if self.loss == "dqn" and sizes[-1] < 2:
            raise ValueError(f"sizes must end in at least 2 actions for loss='dqn', "
                             f"not {sizes[-1]}")
        if self.axi_data_width not in AXI_DATA_WIDTHS:
            raise ValueError(f"axi_data_width must be one of "
                             f"{', '.join(map(str, AXI_DATA_WIDTHS))}, not "
                             f"{self.axi_data_width!r}")
        object.__setattr__(self, "stage_arrays", self._check_stage_arrays(self.stage_arrays))
        num = self.numerics                       # validates the fixed-point fields
        if (self.array * num.width) % 8:
            raise ValueError(f"array * width must be a multiple of 8 (byte lanes of the host "
                             f"port), not {self.array} * {num.width}")

    def _stage_keys(self):
        L = len(self.sizes) - 1
        kinds = ("fw", "tfw", "bw", "wa") if self.loss == "dqn" else ("fw", "bw", "wa")
        names = [f"{k}{l}" for k in kinds for l in range(L) if not (k == "bw" and l == 0)]
        return kinds, names

    def _check_stage_arrays(self, spec):
        """Canonical string of the ``stage_arrays`` parameter (see the class docstring)."""
        if spec is None or spec == "":
            return ""
        if isinstance(spec, str):
            items = []
            for part in spec.replace(";", ",").split(","):
                part = part.strip()
                if not part:
                    continue
                if ":" not in part:
                    raise ValueError(f"stage_arrays entries must be key:RxC (e.g. 'fw:4x4'), "
                                     f"not {part!r}")
                key, val = part.split(":", 1)
                items.append((key.strip(), val.strip()))
        elif isinstance(spec, dict):
            items = list(spec.items())
        else:
            raise ValueError(f"stage_arrays must be a dict or a string such as "
                             f"'fw:4x4,wa1:2x8', not {spec!r}")
        kinds, names = self._stage_keys()
        out = {}
        for key, val in items:
            if key not in kinds and key not in names:
                raise ValueError(f"stage_arrays key must be one of {', '.join(kinds + tuple(names))}"
                                 f", not {key!r}")
            if key in out:
                raise ValueError(f"stage_arrays sets {key!r} twice")
            try:
                if isinstance(val, str):
                    rc = tuple(int(x) for x in val.lower().split("x"))
                    rc = rc * 2 if len(rc) == 1 else rc
                elif isinstance(val, int) and not isinstance(val, bool):
                    rc = (val, val)
                else:
                    rc = tuple(val)
                if len(rc) != 2:
                    raise ValueError
            except (TypeError, ValueError):
                raise ValueError(f"stage_arrays[{key!r}] must be 'RxC', R or (R, C), "
                                 f"not {val!r}") from None
            for what, v in zip(("rows", "cols"), rc):
                if (not isinstance(v, int) or isinstance(v, bool) or v not in ARRAY_SIZES
                        or v > self.array):
                    ok = ", ".join(str(x) for x in ARRAY_SIZES if x <= self.array)
                    raise ValueError(f"stage_arrays[{key!r}] {what} must be one of {ok} (at "
                                     f"most array = {self.array}, the block size), not {v!r}")
            out[key] = rc
        order = list(kinds) + names
        return ",".join(f"{k}:{out[k][0]}x{out[k][1]}" for k in order if k in out)

    def stage_array(self, stage: str) -> tuple:
        """``(R, C)`` of a GEMM stage's tensor unit: ``"fw0"``, ``"tfw1"``, ``"bw2"``,
        ``"wa0"`` (a pipeline suffix ``@d`` is ignored)."""
        name = stage.split("@")[0]
        kind = name.rstrip("0123456789")
        table = {}
        for part in self.stage_arrays.split(",") if self.stage_arrays else ():
            key, val = part.split(":")
            table[key] = tuple(int(x) for x in val.split("x"))
        kinds, names = self._stage_keys()
        if name not in names:
            raise ValueError(f"stage must be one of {', '.join(names)}, not {stage!r}")
        return table.get(name, table.get(kind, (self.array, self.array)))

    def stage_tensor_unit(self, stage: str) -> TensorUnitConfig:
        """The R × C tensor unit of one GEMM stage (:meth:`stage_array`)."""
        R, C = self.stage_array(stage)
        kind = stage.split("@")[0].rstrip("0123456789")
        return self.numerics.tensor_unit("fw" if kind == "tfw" else kind, rows=R, cols=C)

    @property
    def numerics(self) -> LearnerNumerics:
        """The fixed-point formats; ``max_k`` covers the longest reduction of any unit."""
        return LearnerNumerics(
            sizes=self.sizes, width=self.width, act_frac=self.act_frac,
            weight_frac=self.weight_frac, grad_frac=self.grad_frac, acc_width=self.acc_width,
            coef_width=self.coef_width, lr_width=self.lr_width, lr_frac=self.lr_frac,
            rounding=self.rounding, max_k=max(self.max_batch, max(self.sizes) + 1))

    @property
    def n_layers(self) -> int:
        return len(self.sizes) - 1

    @property
    def n_out(self) -> int:
        return self.sizes[-1]

    @property
    def action_bits(self) -> int:
        """Bits of an action index in the per-sample memory (DQN)."""
        return max(1, (self.sizes[-1] - 1).bit_length())

    @property
    def log_array(self) -> int:
        return self.array.bit_length() - 1

    @property
    def pipe_batch(self) -> int:
        """Samples one pipeline's buffers hold: its share of ``max_batch`` in sub-batches."""
        subs = -(-self.max_batch // self.sub_batch)
        return -(-subs // self.dp) * self.sub_batch

    def groups(self, n: int) -> int:
        """S-wide groups of n values: ``ceil(n / S)``."""
        return -(-n // self.array)

    def groups_pow2(self, n: int) -> int:
        """Column groups of a matrix with n columns as stored: padded to a power of two so that
        a block address is ``row_group · groups_pow2 + col_group`` by bit fields."""
        return _pow2_at_least(self.groups(n))

    def tensor_unit(self, kind: str) -> TensorUnitConfig:
        """The S × S tensor unit of one GEMM kind (``"fw"``, ``"bw"``, ``"wa"``)."""
        return self.numerics.tensor_unit(kind, rows=self.array, cols=self.array)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["sizes"] = list(self.sizes)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "LearnerConfig":
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown learner parameter(s): {', '.join(sorted(unknown))}")
        return cls(**d)
