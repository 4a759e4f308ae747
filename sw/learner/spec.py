"""The learner's specification: the MLP training pipeline's configuration, the host-visible
memory regions and their address map, the register map, error codes and status flags, and the
Vitis kernel's configuration. Plain Python, no Amaranth: the generators in
:mod:`rtl_gen.learner`, the golden models (:mod:`sw.learner.gemm`, :mod:`sw.learner.mlp`), the
golden device and the driver all derive from it, with the memory layout inside the regions
(:mod:`sw.learner.layout`, which re-exports the regions), the exact cycle model
(:mod:`sw.learner.schedule`) and the number formats (:mod:`sw.learner.numerics`).
"""

from dataclasses import dataclass, fields
from functools import cached_property, lru_cache

from sw.config import check_int
from sw.regmap import Field, Info, Register, RegisterMap
from sw.shell.spec import DmaParams, kernel_register_map

from .adam import ADAM_ARGS, C1_WIDTH, MASTER_EXTRA, OPTIMIZERS, log_format, moment_format
from .numerics import GEMM_KINDS, TU_LIMITS, LearnerNumerics, NumericParams, TensorUnitConfig

__all__ = ["TensorUnitConfig", "LearnerNumerics", "LearnerConfig", "GEMM_KINDS", "TU_LIMITS",
           "LOSS_KINDS", "ARRAY_SIZES", "AXI_DATA_WIDTHS", "DP_VALUES", "LEARNER_ERRORS",
           "ERRORS", "LEARNER_FLAGS", "SYNC_BITS", "LEARNER_ARGS", "SYNC_ARGS",
           "TARGET_SYNCED_BIT", "STATUS_FLAGS", "learner_register_map", "hw_info_values",
           "config_from_hw", "LearnerKernelConfig", "learner_kernel_register_map", "Region",
           "regions", "region", "region_index", "sub_words", "region_bytes", "mem_addr_bits",
           "region_base", "word_bytes"]

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
class LearnerConfig(NumericParams):
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
    optimizer : str
        The weight update, :data:`~sw.learner.adam.OPTIMIZERS`: ``"sgd"`` (``W -= η·G``,
        register LR) or ``"adam"`` (:mod:`sw.learner.adam`: registers ADAM_*, the moments in
        regions ``m<l>`` and ``v<l>`` and the master weights' low bits in ``wl<l>`` beside the
        weights, LR unused).
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
    what = "learner"

    sizes: tuple = (4, 64, 64, 2)
    array: int = 8
    stage_arrays: str = ""
    max_batch: int = 64
    sub_batch: int = 8
    dp: int = 1
    loss: str = "dqn"
    axi_data_width: int = 64
    optimizer: str = "sgd"

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
        check_int("max_batch", self.max_batch, 1, 4096)
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
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, "
                             f"not {self.optimizer!r}")
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

    def __hash__(self):
        """The hash of the fields, as the dataclass's own, computed once: configurations key
        the region tables' lookup caches, several per driver call. Not pickled (string hashes
        differ between processes)."""
        try:
            return self.__dict__["_hash"]
        except KeyError:
            h = hash(tuple(getattr(self, f.name) for f in fields(self)
                           if f.compare and f.hash is not False))
            object.__setattr__(self, "_hash", h)
            return h

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_hash", None)
        return state

    @cached_property
    def numerics(self) -> LearnerNumerics:
        """The fixed-point formats; ``max_k`` covers the longest reduction of any unit (built
        once per configuration: both are frozen)."""
        return LearnerNumerics(sizes=self.sizes, max_k=max(self.max_batch, max(self.sizes) + 1),
                               **self.numeric_params)

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


# -- memory geometry -----------------------------------------------------------------------------
# The host-visible regions and their address map; the bit layout inside a word and the images
# of matrices and samples are :mod:`sw.learner.layout`'s.
@dataclass(frozen=True)
class Region:
    """One host-visible memory of the learner.

    Attributes
    ----------
    name : str
        ``obs``, ``next_obs``, ``samples``, ``targets``, ``h<l>``, ``q``, ``th<l>``, ``tq``,
        ``delta<l>``, ``w<l>``, ``tw<l>``, ``grad<l>`` (l is the 0-based weight layer, as in
        :class:`sw.learner.mlp.StepResult`).
    kind : str
        ``"matrix"`` (S × S blocks) or ``"samples"`` (S lanes per word).
    rows, cols : int
        Largest matrix the region holds.
    lane_bits : int
        Bits of one element.
    signed : bool
        Elements are two's complement.
    host_write : bool
        The host may write it (inputs and weights); the others are results, read-only.
    doc : str
    format : str
        The elements' number format, ``numerics.<format>_format`` of
        :class:`~sw.learner.numerics.LearnerNumerics` (``"act"``, ``"grad"``, ``"weight"``,
        ``"wgrad"``); empty for ``samples``, whose lanes pack several values.
    """
    name: str
    kind: str
    rows: int
    cols: int
    lane_bits: int
    signed: bool
    host_write: bool
    doc: str
    format: str = ""

    @property
    def lane_range(self) -> tuple:
        """``(lo, hi)``: the raw values one lane holds."""
        lb = self.lane_bits
        return (-(1 << (lb - 1)), (1 << (lb - 1)) - 1) if self.signed else (0, (1 << lb) - 1)

    def row_groups(self, config: LearnerConfig) -> int:
        return config.groups(self.rows)

    def col_groups(self, config: LearnerConfig) -> int:
        """Stored column groups (a power of two; 1 for ``samples``)."""
        return config.groups_pow2(self.cols) if self.kind == "matrix" else 1

    def depth(self, config: LearnerConfig) -> int:
        """Memory words (blocks)."""
        return self.row_groups(config) * self.col_groups(config)

    def word_bits(self, config: LearnerConfig) -> int:
        """Bits of one memory word, a multiple of 8."""
        S = config.array
        bits = S * S * self.lane_bits if self.kind == "matrix" else S * self.lane_bits
        return -(-bits // 8) * 8


def regions(config: LearnerConfig) -> tuple:
    """The host-visible regions, in address order."""
    if not isinstance(config, LearnerConfig):
        raise TypeError(f"config must be a LearnerConfig, not {config!r}")
    return _regions(config)


@lru_cache(maxsize=64)
def _regions(config: LearnerConfig) -> tuple:
    # A config is a frozen dataclass: the layout is computed once per configuration (the
    # golden device looks regions up for every matrix it packs).
    num = config.numerics
    sizes, L, B, w = config.sizes, config.n_layers, config.max_batch, num.width
    out = [Region("obs", "matrix", B, sizes[0], w, True, True,
                  "input batch x (act format)", "act")]
    if config.loss == "dqn":
        out += [Region("next_obs", "matrix", B, sizes[0], w, True, True,
                       "next observations s' (act format)", "act"),
                Region("samples", "samples", B, 1,
                       w + config.action_bits + 1 + num.loss_weight_format.width, False, True,
                       "per sample: reward (act format), action, done, loss weight "
                       "(coefficient format)")]
    else:
        out.append(Region("targets", "matrix", B, sizes[-1], w, True, True,
                          "MSE targets Y (act format)", "act"))
    out += [Region(f"h{l}", "matrix", B, sizes[l + 1], w, True, False,
                   f"activations relu(z) of layer {l}", "act") for l in range(L - 1)]
    out.append(Region("q", "matrix", B, sizes[-1], w, True, False, "Q values (act format)", "act"))
    if config.loss == "dqn":
        out += [Region(f"th{l}", "matrix", B, sizes[l + 1], w, True, False,
                       f"target network activations of layer {l}", "act") for l in range(L - 1)]
        out.append(Region("tq", "matrix", B, sizes[-1], w, True, False,
                          "target network Q values of s'", "act"))
    out += [Region(f"delta{l}", "matrix", B, sizes[l + 1], w, True, False,
                   f"errors δ of layer {l}'s output (grad format)", "grad") for l in range(L)]
    out += [Region(f"w{l}", "matrix", sizes[l] + 1, sizes[l + 1], w, True, True,
                   f"weights of layer {l}, bias in the last row (weight format)", "weight")
            for l in range(L)]
    if config.loss == "dqn":
        out += [Region(f"tw{l}", "matrix", sizes[l] + 1, sizes[l + 1], w, True, True,
                       f"target network weights of layer {l}", "weight") for l in range(L)]
    out += [Region(f"grad{l}", "matrix", sizes[l] + 1, sizes[l + 1], num.acc_width, True, False,
                   f"weight gradients of layer {l} (wgrad format)", "wgrad") for l in range(L)]
    if config.optimizer == "adam":
        mw, lw = moment_format(num).width, log_format().width
        out += [Region(f"m{l}", "matrix", sizes[l] + 1, sizes[l + 1], mw, True, True,
                       f"Adam's first moment of layer {l} (moment format)", "moment")
                for l in range(L)]
        out += [Region(f"v{l}", "matrix", sizes[l] + 1, sizes[l + 1], lw, True, True,
                       f"log2 of Adam's second moment of layer {l} (logv format; log_min: 0)",
                       "logv") for l in range(L)]
        out += [Region(f"wl{l}", "matrix", sizes[l] + 1, sizes[l + 1], MASTER_EXTRA, True,
                       True, f"Adam's master weights of layer {l} beyond w{l}: the residual "
                       f"M - W (residual format)", "residual") for l in range(L)]
    return tuple(out)


def region(config: LearnerConfig, name: str) -> Region:
    if not isinstance(config, LearnerConfig):
        regions(config)                               # its TypeError
    got = _region_table(config).get(name)
    if got is not None:
        return got[1]
    raise ValueError(f"no region {name!r} in this learner configuration "
                     f"(regions: {', '.join(r.name for r in regions(config))})")


@lru_cache(maxsize=64)
def _region_table(config: LearnerConfig) -> dict:
    """Name -> (index, Region, host bytes per memory word) of every region (once per
    configuration: the drivers and golden devices look regions up per matrix they pack)."""
    D = config.axi_data_width // 8
    return {r.name: (i, r, sub_words(config, r) * D) for i, r in enumerate(_regions(config))}


def region_index(config: LearnerConfig, name: str) -> int:
    region(config, name)                              # the error for an unknown name
    return _region_table(config)[name][0]


def sub_words(config: LearnerConfig, r: Region) -> int:
    """D-bit host words per memory word (a power of two)."""
    return _pow2_at_least(-(-r.word_bits(config) // config.axi_data_width))


def region_bytes(config: LearnerConfig) -> int:
    """Host address bytes per region (a power of two, the same for every region)."""
    regions(config)                                   # type check
    return _region_bytes(config)


@lru_cache(maxsize=64)
def _region_bytes(config: LearnerConfig) -> int:
    D = config.axi_data_width // 8
    return _pow2_at_least(max(_pow2_at_least(r.depth(config)) * sub_words(config, r) * D
                              for r in regions(config)))


def mem_addr_bits(config: LearnerConfig) -> int:
    """Byte address bits of the host memory port."""
    return (_pow2_at_least(len(regions(config))) * region_bytes(config) - 1).bit_length()


def region_base(config: LearnerConfig, name: str) -> int:
    return region_index(config, name) * region_bytes(config)


def word_bytes(config: LearnerConfig, name: str) -> int:
    """Host bytes per memory word of a region (``sub · D/8``)."""
    region(config, name)                              # the checks
    return _region_table(config)[name][2]


# -- run codes -----------------------------------------------------------------------------------
#: STATUS.ERROR codes: the batch size register is 0 or above ``max_batch``.
LEARNER_ERRORS = {"ok": 0, "batch_size": 1}
#: STATUS.ERROR code -> text (the driver's exception messages).
ERRORS = {0: "ok", 1: "BATCH_SIZE is 0 or above max_batch"}
assert set(ERRORS) == set(LEARNER_ERRORS.values())

#: Sticky saturation flags, named as the keys of :attr:`sw.learner.mlp.StepResult.overflow`.
LEARNER_FLAGS = ("fw", "target_fw", "target", "delta", "bw", "wa", "wu")

#: Bits of the target-sync period and step counter (DQN): periods up to 65535 steps.
SYNC_BITS = 16


# -- register map ---------------------------------------------------------------------------------
#: Step arguments: register name -> (core port, doc).
LEARNER_ARGS = {
    "BATCH_SIZE": ("batch_size", "samples B of the step, 1..max_batch"),
    "LR": ("lr", "update coefficient eta = lr * 2 / B, unsigned, lr_frac fraction bits"),
    "GAMMA": ("gamma", "discount gamma (DQN), unsigned, coef_width - 1 fraction bits"),
}

#: Target-network sync arguments (DQN only): register name -> (core port, bits, doc).
SYNC_ARGS = {
    "SYNC_TARGET": ("sync_target", 1, "1: copy the updated weights w<l> into the target "
                    "network tw<l> at the end of the step (no extra cycles)"),
    "SYNC_PERIOD": ("sync_period", SYNC_BITS, "N > 0: also sync at every N-th step counted "
                    "since the last sync (DQN target update period); 0: off"),
}
#: STATUS bit of the last step's target sync (DQN only).
TARGET_SYNCED_BIT = 16

#: STATUS flag fields: name -> (bit, core flag, doc). Sticky during a step, cleared at start.
STATUS_FLAGS = {
    "FW_OVERFLOW": (8, "fw", "an activation or Q value saturated (FW)"),
    "TARGET_FW_OVERFLOW": (9, "target_fw", "a target network value saturated"),
    "TARGET_OVERFLOW": (10, "target", "a TD target saturated"),
    "DELTA_OVERFLOW": (11, "delta", "an output error delta saturated (LOSS)"),
    "BW_OVERFLOW": (12, "bw", "a back-propagated error saturated (BW)"),
    "WA_OVERFLOW": (13, "wa", "a weight gradient saturated (WA)"),
    "WU_OVERFLOW": (14, "wu", "an updated weight saturated (WU)"),
    "START_REFUSED": (15, None, "AP_START was written during a step; it was dropped"),
}


def _info(name, lsb, width, param, **kw):
    return Field(name, lsb, width, "ro", info=Info(param, **kw))


def learner_register_map(config: LearnerConfig) -> RegisterMap:
    """ap_ctrl_hs control registers, step arguments, status, loss, cycles, hardware info."""
    num = config.numerics
    widths = {"BATCH_SIZE": 13, "LR": num.lr_width, "GAMMA": num.coef_width}
    dqn = config.loss == "dqn"
    args = [Register.scalar(name, widths[name], "rw", doc=doc)
            for name, (_, doc) in LEARNER_ARGS.items()]
    if dqn:
        args += [Register.scalar(name, bits, "rw", doc=doc)
                 for name, (_, bits, doc) in SYNC_ARGS.items()]
    if config.optimizer == "adam":
        lw = log_format().width
        args += [Register.scalar(name, lw if signed else C1_WIDTH, "rw", doc=doc)
                 for name, (_, signed, doc) in ADAM_ARGS.items()]
    errors = ", ".join(f"{v} {k}" for k, v in LEARNER_ERRORS.items())
    synced = ((Field("TARGET_SYNCED", TARGET_SYNCED_BIT, 1, "ro",
                     doc="the last step copied w<l> into tw<l> (DQN)"),) if dqn else ())
    status = Register("STATUS", None, (
        Field("ERROR", 0, 2, "ro", doc=f"error of the last start ({errors})"),
        *(Field(name, bit, 1, "ro", doc=doc) for name, (bit, _, doc) in STATUS_FLAGS.items()),
        *synced,
    ), doc="result of the last step; flags are sticky during a step, cleared at start")
    regs = [
        Register.scalar("LOSS_LO", 32, "ro", doc="sum over the batch of (Q - y)^2, raw "
                        "(2 act_frac fraction bits), bits 31..0"),
        Register.scalar("LOSS_HI", 32, "ro", doc="bits 63..32 of the loss sum"),
        Register.scalar("CYCLES", 32, "ro", doc="cycles of the last step (start to done)"),
    ]
    if dqn:
        regs.append(Register.scalar("SYNC_COUNT", SYNC_BITS, "ro",
                                    doc="steps since the last target sync (saturating)"))
    # HW_LAYERS.OPTIMIZER: only in Adam learners' maps (bits 27..24 read 0, SGD, in the others,
    # whose register files stay as they were).
    optimizer, optimizer_doc = (), ""
    if config.optimizer != "sgd":
        optimizer = (_info("OPTIMIZER", 24, 4, "optimizer", choices=OPTIMIZERS),)
        optimizer_doc = (f", optimizer ({', '.join(f'{i} {k}' for i, k in enumerate(OPTIMIZERS))}"
                         f"; bits 27..24 read 0, sgd, where the field is absent)")
    regs += [
        Register("HW_ARRAY", None, (
            _info("ARRAY", 0, 8, "array"), _info("SUB_BATCH", 8, 8, "sub_batch"),
            _info("MAX_BATCH", 16, 16, "max_batch")),
            doc="tensor unit size S, samples per sub-batch, largest batch"),
        Register("HW_LAYERS", None, (
            _info("LAYERS", 0, 4, "n_layers"), _info("LOSS", 4, 4, "loss", choices=LOSS_KINDS),
            _info("AXI_BYTES", 8, 8, "axi_data_width", scale=8), _info("DP", 16, 8, "dp"),
            *optimizer),
            doc=f"weight layers, loss ({', '.join(f'{i} {k}' for i, k in enumerate(LOSS_KINDS))})"
                f", memory bus bytes, parallel pipelines" + optimizer_doc),
        Register("HW_FORMAT", None, (
            _info("WIDTH", 0, 8, "width"), _info("ACT_FRAC", 8, 8, "act_frac"),
            _info("WEIGHT_FRAC", 16, 8, "weight_frac"), _info("GRAD_FRAC", 24, 8, "grad_frac")),
            doc="operand formats"),
        Register("HW_FORMAT2", None, (
            _info("ACC_WIDTH", 0, 8, "acc_width"), _info("COEF_WIDTH", 8, 8, "coef_width"),
            _info("LR_WIDTH", 16, 8, "lr_width"), _info("LR_FRAC", 24, 8, "lr_frac")),
            doc="gradient, discount and learning-rate formats"),
    ]
    regs += [Register.scalar(f"HW_SIZE{i}", 16, "ro", doc=f"neurons of layer {i} ({n})",
                             info=Info(f"sizes.{i}"))
             for i, n in enumerate(config.sizes)]
    return RegisterMap.with_ap_ctrl_hs("learner", args + [status] + regs,
                                       doc="MLP learner pipeline (CF'22 section 3.2)")


def config_from_hw(params: dict) -> LearnerConfig:
    """The configuration the HW_* registers describe (:meth:`~sw.regmap.RegisterMap.decode_info`
    output, with ``sizes.<i>`` for each layer); ``ValueError`` if they describe none. The
    rounding mode and the per-stage arrays are not in the registers (defaults)."""
    n_layers = params["n_layers"]
    sizes = tuple(params[f"sizes.{i}"] for i in range(n_layers + 1))
    rest = {k: v for k, v in params.items() if k != "n_layers" and not k.startswith("sizes.")}
    return LearnerConfig(sizes=sizes, **rest)


def hw_info_values(config: LearnerConfig) -> dict:
    """The constant HW_* register words of ``config`` (what the hardware reports)."""
    return learner_register_map(config).info_values(config)


assert {f for _, f, _ in STATUS_FLAGS.values() if f} == set(LEARNER_FLAGS)


# -- Vitis kernel (DMA shell) --------------------------------------------------------------------
@dataclass(frozen=True)
class LearnerKernelConfig(DmaParams, LearnerConfig):
    """:class:`LearnerConfig` and the window shell's parameters (:class:`~sw.shell.spec.DmaParams`:
    ``gmem_data_width``, ``max_burst``, ``max_outstanding``), for the Vitis kernel.
    The window is the memory regions (:func:`regions`, :func:`mem_addr_bits` address bits),
    ``axi_data_width``-bit words.

    :attr:`accel` is the :class:`LearnerConfig` part (what the accelerator and driver use).
    """
    what = "learner kernel"
    kernel_name = "learner_kernel"
    kernel_doc = "MLP learner accelerator as a Vitis kernel (window DMA shell)"
    accel_register_map = staticmethod(learner_register_map)

    @property
    def window_word_bits(self) -> int:
        return self.axi_data_width

    @property
    def window_bytes(self) -> int:
        return 1 << mem_addr_bits(self)


#: The kernel's control map (:func:`sw.shell.spec.kernel_register_map`).
learner_kernel_register_map = kernel_register_map