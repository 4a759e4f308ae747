"""The one registry of blocks and of the configurations shipped in ``hdl/``.

Every consumer finds a block here: the generator's CLI (``python -m rtl_gen``) and manifest
writer (:mod:`rtl_gen.emit`), the device specs of the RL programs (:mod:`sw.rl.devices`), the
PYNQ and XRT backends (:mod:`sw.driver`) and the Vivado flow (:mod:`rtl_gen.vivado`). A
:class:`Block` ties a name to its configuration class and register map (plain Python, from the
block's ``spec``), and names -- as ``"module:attribute"`` strings, imported only when asked
for -- its golden device and driver. The host side holds the host facts only: the component a
configuration builds is in the generator's table, :data:`rtl_gen.blocks.GATEWARE`, so this
module imports no Amaranth.

Manifest facts (formats, latency, throughput) come from the spec through :meth:`Block.formats`,
:meth:`Block.latency` and :meth:`Block.throughput`.
"""

import importlib
from dataclasses import dataclass, field
from typing import Callable

from sw.gae import layout as gae_layout
from sw.gae import spec as gae
from sw.learner import layout as learner_layout
from sw.learner import schedule as learner_schedule
from sw.learner import spec as learner
from sw.replay import spec as replay
from sw.shell import spec as shell
from sw.trainer import layout as trainer_layout
from sw.trainer import schedule as trainer_schedule
from sw.trainer import spec as trainer

__all__ = ["Block", "BLOCKS", "SHIPPED", "CANDIDATES", "FAMILIES", "VENDOR", "LIBRARY",
           "VERSION", "vlnv", "block", "shipped", "shipped_modules", "shipped_config",
           "candidate_config", "family_vlnvs", "block_of_module"]

#: IP-XACT vendor, library and version of every packaged accelerator: ``rlk:accel:<module>:1.0``.
VENDOR = "rlk"
LIBRARY = "accel"
VERSION = "1.0"


def vlnv(module: str) -> str:
    """IP-XACT VLNV of a packaged module (``ipx::package_project``; what PYNQ binds by)."""
    return f"{VENDOR}:{LIBRARY}:{module}:{VERSION}"


def _load(ref: str):
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


def _fmt(**formats) -> dict:
    return {name: f.to_dict() for name, f in formats.items()}


@dataclass(frozen=True)
class Block:
    """One generatable block.

    Members
    -------
    name : str
        CLI name (``"gae-accel"``).
    module : str
        Default Verilog module name.
    summary : str
        One line for listings and docs.
    config : type
        Configuration dataclass (``from_dict``/``to_dict``), from the block's spec.
    family : str or None
        The accelerator family the RL programs and device specs name (``"gae"``,
        ``"replay"``, ``"learner"``); None for building blocks without a host interface.
    role : str
        ``"unit"`` (a building block), ``"accelerator"`` (AXI4-Lite + AXI4 slave, PYNQ) or
        ``"kernel"`` (AXI4-Lite + AXI4 master, Vitis/XRT).
    regmap : callable or None
        ``regmap(config)``: the :class:`~sw.regmap.RegisterMap` of the control port.
    device : str or None
        ``"module:Class"`` of the golden device (a pure-Python model behind the bus).
    driver : str or None
        ``"module:Class"`` of the host driver.
    reader : str or None
        Accelerators: ``"module:function"`` that reads the configuration from a device's
        HW_* registers (``reader(mmio)``; what a board backend uses).
    """
    name: str
    module: str
    summary: str
    config: type
    family: str | None = None
    role: str = "unit"
    regmap: Callable | None = None
    device: str | None = None
    driver: str | None = None
    reader: str | None = None
    _formats: Callable = field(default=lambda c: {}, repr=False)
    _latency: Callable = field(default=lambda c: None, repr=False)
    _throughput: Callable = field(default=lambda c: None, repr=False)
    _kernel_args: Callable | None = field(default=None, repr=False)
    _memory: Callable | None = field(default=None, repr=False)

    def load(self, what: str):
        """The object a ``"module:attribute"`` member names: ``"device"``, ``"driver"`` or
        ``"reader"``."""
        if what not in ("device", "driver", "reader"):
            raise ValueError(f"what must be one of device, driver, reader, not {what!r}")
        ref = getattr(self, what)
        if ref is None:
            raise ValueError(f"block {self.name!r} has no {what}")
        return _load(ref)

    def formats(self, config) -> dict:
        """Number formats of a configuration: name -> :meth:`~sw.fixed.FixedFormat.to_dict`."""
        return self._formats(config)

    def latency(self, config) -> dict | None:
        """``{"cycles": n, "of": what}``: the block's latency from its cycle model."""
        return self._latency(config)

    def throughput(self, config) -> dict | None:
        """``{"per_cycle": x, "unit": what}``: sustained rate from its cycle model."""
        return self._throughput(config)

    @property
    def accelerator(self) -> "Block | None":
        """The accelerator block of this block's family (itself for an accelerator)."""
        if self.family is None:
            return None
        return next(b for b in BLOCKS.values()
                    if b.family == self.family and b.role == "accelerator")

    def base_regmap(self, config):
        """The accelerator's own register map: :attr:`regmap` of an accelerator, the part a
        kernel's map starts with (that of ``config.accel``)."""
        if self.role == "kernel":
            return self.accelerator.regmap(config.accel)
        return self.regmap(config)

    def memory_window(self, config):
        """The :class:`~sw.memmap.MemoryWindow` of an accelerator's ``s_axi_mem`` (from its
        layout, the one its driver packs with), of a kernel's ``MEM_PTR`` buffer (its
        accelerator's window in ``DMA_WINDOW`` bytes,
        :meth:`~sw.memmap.MemoryWindow.in_kernel_buffer`), or of the fused trainer's storage
        at ``BASE_HI:BASE_LO`` (:func:`sw.trainer.layout.memory_window`); None for a block
        without one."""
        if self.role == "kernel":
            window = self.accelerator.memory_window(config.accel)
            return None if window is None else window.in_kernel_buffer(config.window_bytes)
        return None if self._memory is None else self._memory(config)

    def kernel_args(self, config) -> dict | None:
        """For a kernel, and an accelerator with its own AXI4 master (the trainer), what
        ``kernel.xml`` needs beyond ports and registers (:func:`sw.shell.spec.kernel_args`);
        None for other blocks."""
        if self._kernel_args is not None:
            return self._kernel_args(config)
        if self.role != "kernel":
            return None
        return shell.kernel_args(config, self.regmap(config), self.base_regmap(config))


# -- per-block facts, all from the specs ----------------------------------------------------------
def _gae_pe_formats(c):
    return _fmt(data=c.data_format, coef=c.coef_format)


def _gae_core_formats(c):
    return _fmt(data=c.pe.data_format, coef=c.pe.coef_format, code=c.code_format,
                offset_register=c.reg_format, scale_register=c.scale_format,
                result_scale_register=c.result_scale_format)


def _gae_full_run(c):
    return {"cycles": gae.run_cycles(c, c.capacity, c.max_trajectories),
            "of": f"a run of T={c.capacity} steps x M={c.max_trajectories} trajectories "
                  f"(sw.gae.spec.run_cycles)"}


def _gae_kernel_run(c):
    return {"cycles": gae.kernel_run_cycles(c, c.capacity, c.max_trajectories, latency=0),
            "of": f"a kernel run of T={c.capacity} x M={c.max_trajectories} with its copies, "
                  f"device memory answering at once (sw.gae.spec.kernel_run_cycles)"}


def _gae_elements(c):
    return {"per_cycle": c.n_pe, "unit": "GAE elements (one per PE per cycle while reading)"}


def _replay_formats(c):
    return _fmt(priority=c.priority_format, input=c.input_format, target=c.target_format,
                root=c.level_formats[0])


def _tree_latency(c):
    return {"cycles": c.latency, "of": "a command into the tree to its response"}


def _replay_run(c):
    return {"cycles": replay.run_cycles(c, replay.ReplayOp.SAMPLE, c.max_batch),
            "of": f"a run of {c.max_batch} samples (sw.replay.spec.run_cycles)"}


def _tree_ops(c):
    return {"per_cycle": 1, "unit": "sum-tree operations (sample, update, insert or read)"}


def _tu_formats(c):
    return _fmt(a=c.a_format, b=c.b_format, acc=c.acc_format, out=c.out_format)


def _learner_formats(c):
    n = c.numerics
    return _fmt(activation=n.act_format, weight=n.weight_format, gradient=n.grad_format,
                weight_gradient=n.wgrad_format, discount=n.coef_format, learning_rate=n.lr_format)


def _learner_step(c):
    return {"cycles": learner_schedule.step_cycles(c, c.max_batch),
            "of": f"a training step of {c.max_batch} samples (sw.learner.schedule.step_cycles)"}


def _learner_rate(c):
    cycles = learner_schedule.step_cycles(c, c.max_batch)
    return {"per_cycle": c.max_batch / cycles,
            "unit": f"samples trained (steps of {c.max_batch})"}


def _trainer_formats(c):
    return {**_learner_formats(c.learner),
            **_fmt(priority=c.tree.priority_format, alpha_beta=c.coef_format,
                   epsilon=c.eps_format)}


def _trainer_step(c):
    b = min(64, c.max_batch)
    return {"cycles": trainer_schedule.sequential_step_cycles(c, b, writeback=b, inserts=1),
            "of": f"a gradient step of {b} samples with one insert, from one step boundary to "
                  f"the next (sw.trainer.schedule.sequential_step_cycles)"}


def _trainer_rate(c):
    b = min(64, c.max_batch)
    cycles = trainer_schedule.sequential_step_cycles(c, b, writeback=b, inserts=1)
    return {"per_cycle": 1 / cycles, "unit": f"gradient steps of {b} samples"}


BLOCKS = {b.name: b for b in [
    Block("gae-pe", "gae_pe", "GAE processing element (HEPPO), one element per cycle",
          gae.GaePeConfig,
          _formats=_gae_pe_formats,
          _latency=lambda c: {"cycles": c.latency, "of": "an input element to its output"},
          _throughput=lambda c: {"per_cycle": 1, "unit": "GAE elements"}),
    Block("gae-accel", "gae_accel",
          "HEPPO GAE accelerator: stack memory, N PEs, AXI4-Lite + AXI4",
          gae.GaeCoreConfig, family="gae",
          role="accelerator", regmap=gae.gae_register_map, device="sw.gae.device:GoldenDevice",
          driver="sw.gae.driver:GaeDriver", reader="sw.gae.driver:read_hw_config",
          _formats=_gae_core_formats, _latency=_gae_full_run,
          _throughput=_gae_elements, _memory=gae_layout.memory_window),
    Block("gae-kernel", "gae_kernel",
          "HEPPO GAE accelerator as a Vitis kernel: AXI4-Lite + m_axi DMA shell",
          gae.GaeKernelConfig, family="gae", role="kernel",
          regmap=gae.gae_kernel_register_map, driver="sw.gae.driver:GaeDriver",
          _formats=_gae_core_formats,
          _latency=_gae_kernel_run, _throughput=_gae_elements),
    Block("sumtree", "sumtree",
          "K-ary sum tree for prioritized replay, one sample or update per cycle",
          replay.SumTreeConfig, _formats=_replay_formats,
          _latency=_tree_latency, _throughput=_tree_ops),
    Block("replay-accel", "replay_accel",
          "prioritized replay: K-ary sum tree, batch buffers, AXI4-Lite + AXI4",
          replay.SumTreeConfig,
          family="replay", role="accelerator", regmap=replay.replay_register_map,
          device="sw.replay.device:ReplayGoldenDevice",
          driver="sw.replay.driver:ReplayDriver", reader="sw.replay.driver:read_replay_config",
          _formats=_replay_formats, _latency=_replay_run, _throughput=_tree_ops,
          _memory=replay.memory_window),
    Block("replay-kernel", "replay_kernel",
          "prioritized replay as a Vitis kernel: AXI4-Lite + m_axi DMA shell "
          "(host-commanded copies)",
          replay.ReplayKernelConfig, family="replay",
          role="kernel",
          regmap=replay.replay_kernel_register_map,
          driver="sw.replay.driver:ReplayDriver",
          _formats=_replay_formats, _latency=_replay_run, _throughput=_tree_ops),
    Block("tensor-unit", "tensor_unit",
          "R x C output-stationary systolic GEMM array (learner tensor unit)",
          learner.TensorUnitConfig,
          _formats=_tu_formats,
          _latency=lambda c: {"cycles": c.latency, "of": "the last operand beat to the first "
                                                         "output beat"},
          _throughput=lambda c: {"per_cycle": c.macs, "unit": "multiply-accumulates"}),
    Block("learner", "learner",
          "MLP training step on a pipeline of S x S tensor units, AXI4-Lite + AXI4",
          learner.LearnerConfig,
          family="learner", role="accelerator", regmap=learner.learner_register_map,
          device="sw.learner.device:LearnerGoldenDevice",
          driver="sw.learner.driver:LearnerDriver",
          reader="sw.learner.driver:read_learner_config", _formats=_learner_formats,
          _latency=_learner_step, _throughput=_learner_rate,
          _memory=learner_layout.memory_window),
    Block("learner-kernel", "learner_kernel",
          "MLP learner as a Vitis kernel: AXI4-Lite + m_axi DMA shell (host-commanded copies)",
          learner.LearnerKernelConfig, family="learner",
          role="kernel",
          regmap=learner.learner_kernel_register_map,
          driver="sw.learner.driver:LearnerDriver",
          _formats=_learner_formats, _latency=_learner_step, _throughput=_learner_rate),
    Block("dqn-trainer", "dqn_trainer",
          "fused DQN trainer (CF'22): sum tree, gather, learner, priorities on chip; AXI4-Lite "
          "+ AXI4 master to the transition storage",
          trainer.TrainerConfig,
          family="trainer", role="accelerator", regmap=trainer.trainer_register_map,
          device="sw.trainer.device:TrainerGoldenDevice",
          driver="sw.trainer.driver:TrainerDriver",
          _formats=_trainer_formats, _latency=_trainer_step, _throughput=_trainer_rate,
          _kernel_args=trainer.kernel_args, _memory=trainer_layout.memory_window),
]}

#: The accelerator families: name -> its name in messages.
FAMILIES = {"gae": "GAE accelerator", "replay": "replay accelerator", "learner": "learner",
            "trainer": "fused DQN trainer"}

#: The learner of ``learner_kernel_s8`` (the trainers' learner).
_S8_LEARNER = {"sizes": [4, 64, 64, 2], "array": 8, "max_batch": 256, "sub_batch": 8,
               "axi_data_width": 128}

#: Configurations written to ``hdl/`` by ``make``: (directory/module name, block, parameters).
SHIPPED = [
    # k = 1 (no look-ahead) is not shipped: its feedback loop is a multiply, an add and a
    # saturation in one cycle (estimated 5.0 ns, docs/timing.md) and cannot be pipelined; the
    # interleaved PE gives the same numbers at one element per cycle. `rtl_gen gae-pe --k 1`.
    ("gae_pe_k2", "gae-pe", {"k": 2}),          # the default, HEPPO's choice
    ("gae_pe_k3", "gae-pe", {"k": 3}),
    ("gae_pe_il4", "gae-pe", {"k": 4, "mode": "interleaved"}),
    # HEPPO's system: 64 trajectories x 1024 steps, 8-bit codes written back in place.
    ("gae_accel_n8", "gae-accel", {"n_pe": 8, "max_trajectories": 64, "capacity": 1024}),
    ("gae_accel_n64", "gae-accel", {"n_pe": 64, "max_trajectories": 64, "capacity": 1024}),
    # The same as an Alveo (Vitis/XRT) kernel: copies the image over a 512-bit m_axi port.
    ("gae_kernel_n8", "gae-kernel", {"n_pe": 8, "max_trajectories": 64, "capacity": 1024}),
    # 64 PEs whose window words are the m_axi port's 512 bits: a word of codes is one beat
    # with no padding, and a batch's copies take 64 bytes a cycle (docs/gae.md, "Kernels").
    ("gae_kernel_n64", "gae-kernel", {"n_pe": 64, "max_trajectories": 64, "capacity": 1024,
                                      "axi_data_width": 512}),
    # Prioritized replay sized for the ZCU106: 2^16 leaves in a 16-ary tree (4 levels, latency
    # 46), batches up to 4096; 2^20 leaves need the URAM of a larger part (docs/replay.md).
    ("replay_accel_k16", "replay-accel", {"fanout": 16, "capacity": 1 << 16}),
    # The same as an Alveo (Vitis/XRT) kernel: the window DMA shell, 512-bit m_axi port.
    ("replay_kernel_k16", "replay-kernel", {"fanout": 16, "capacity": 1 << 16}),
    # The Alveo configuration of PAAL and the benchmarks: 2^20 leaves (5 levels), 33.5 Mbit of
    # tree in ~1,100 RAMB36E2 under Yosys (41 % of a U250; Vivado may put the leaf level in
    # URAM, docs/replay.md).
    ("replay_kernel_k16_1m", "replay-kernel", {"fanout": 16, "capacity": 1 << 20}),
    # CartPole DQN 4-64-64-2 with its target network on 4 x 4 tensor units, batches up to 256
    # in sub-batches of 8, 128-bit memory port (ZCU106 HPM0): the small one.
    ("learner_cartpole_s4", "learner", {"sizes": [4, 64, 64, 2], "array": 4, "max_batch": 256,
                                        "sub_batch": 8, "axi_data_width": 128}),
    # The same as an Alveo (Vitis/XRT) kernel: the window DMA shell, 512-bit m_axi port.
    ("learner_kernel_s4", "learner-kernel", {"sizes": [4, 64, 64, 2], "array": 4,
                                             "max_batch": 256, "sub_batch": 8,
                                             "axi_data_width": 128}),
    # The same network on 8 x 8 tensor units (one DSP per cell: 755 DSPs, 44 % of the
    # ZCU106's): a step of 64 samples in 5,614 cycles instead of 20,307 (docs/learner.md).
    ("learner_kernel_s8", "learner-kernel", _S8_LEARNER),
    # The fused DQN trainer (docs/trainer.md) around an 8 x 8 learner, CartPole 4-64-64-2: on
    # the ZCU106, 2^16 records in PS DDR over a 128-bit S_AXI_HP port, batches up to 64 (with
    # learner_kernel_s8's B <= 256 its regions and the tree need 317 BRAM36 of the XCZU7EV's
    # 312; with B <= 64, 106 for the learner) ...
    ("dqn_trainer_zcu106", "dqn-trainer", {
        "learner": {**_S8_LEARNER, "max_batch": 64},
        "tree": {"fanout": 16, "capacity": 1 << 16, "max_batch": 64}, "storage_width": 128}),
    # ... and as an Alveo U250 kernel with learner_kernel_s8's learner (B <= 256), 2^20
    # records in card DDR over a 512-bit AXI4 master.
    ("dqn_trainer_u250", "dqn-trainer", {
        "learner": _S8_LEARNER, "tree": {"fanout": 16, "capacity": 1 << 20, "max_batch": 256},
        "storage_width": 512}),
]

#: Configurations a design space exploration picked that are not shipped until their fit and
#: clock are measured: (module name, block, parameters, target device of
#: ``scripts/dse_learner.py``). ``scripts/estimate.py --candidate NAME`` synthesizes one and
#: checks it against its device (``make estimate-candidates``); docs/learner.md has the figures.
CANDIDATES = [
    # The fastest point of `scripts/dse_learner.py --device zcu106` with a DSP margin: two
    # pipelines of 8 x 8 blocks with CF'22's per-stage sizing (22 tensor units, 816 modelled
    # DSPs), B up to 256: a step of 64 samples in 3,874 cycles against learner_kernel_s8's 5,614.
    # As generated it does not fit: 435 BRAM36 of the XCZU7EV's 312 (Yosys 0.23, 2026-12-02).
    ("learner_zcu106_dp2", "learner", {
        "sizes": [4, 64, 64, 2], "array": 8, "max_batch": 256, "sub_batch": 8, "dp": 2,
        "stage_arrays": "fw0:4x8,tfw0:4x8,wa0:4x8,fw2:4x2,tfw2:4x2,wa2:4x2,bw2:2x4",
        "axi_data_width": 128}, "zcu106"),
    # The DSE's picks for B = 64 with its resource model (sw.learner.resources, which matches
    # Yosys on BRAM36 and DSP exactly for the shipped learners and the candidate above), 75 % of
    # each resource usable, at an assumed 300 MHz: not generated and synthesized yet.
    # ZCU106: two pipelines, 8 x 8 blocks, per-stage arrays; 3,755 cycles per step of 64;
    # modelled 1,206 DSP (70 %), 155 BRAM36 (50 %), 156k LUT (68 %, LUT RAM included).
    ("learner_zcu106_b64", "learner", {
        "sizes": [4, 64, 64, 2], "array": 8, "max_batch": 64, "sub_batch": 8, "dp": 2,
        "stage_arrays": "fw0:8x8,fw1:8x8,fw2:8x4,bw2:4x8,bw1:8x8,wa0:8x8,wa1:8x8,wa2:8x4,"
                        "tfw0:8x8,tfw1:8x8,tfw2:8x4",
        "axi_data_width": 128}, "zcu106"),
    # U250: four pipelines, 16 x 16 blocks, per-stage arrays; 1,357 cycles per step of 64;
    # modelled 7,788 DSP (63 %), no BRAM36 (its buffers map to LUT RAM), 986k LUT (57 %).
    ("learner_u250_b64", "learner", {
        "sizes": [4, 64, 64, 2], "array": 16, "max_batch": 64, "sub_batch": 16, "dp": 4,
        "stage_arrays": "fw0:8x16,fw1:16x16,fw2:16x8,bw2:8x16,bw1:16x16,wa0:8x16,wa1:16x16,"
                        "wa2:16x8,tfw0:8x16,tfw1:16x16,tfw2:16x8",
        "axi_data_width": 128}, "u250"),
]


def block(name: str) -> Block:
    """The block called ``name`` (``ValueError`` listing the names otherwise)."""
    if name not in BLOCKS:
        raise ValueError(f"block must be one of {', '.join(BLOCKS)}, not {name!r}")
    return BLOCKS[name]


def shipped(*, family: str | None = None, role: str | None = None) -> list:
    """``(module, block, params)`` of the shipped configurations, optionally only those of a
    family and role (``shipped(family="replay", role="kernel")``)."""
    return [(m, b, p) for m, b, p in SHIPPED
            if (family is None or BLOCKS[b].family == family)
            and (role is None or BLOCKS[b].role == role)]


def shipped_modules(*, family: str | None = None, role: str | None = None) -> list:
    """Module names of :func:`shipped`."""
    return [m for m, _, _ in shipped(family=family, role=role)]


def shipped_config(module: str):
    """``(block, config)`` of a shipped module (``ValueError`` naming the choices)."""
    for m, b, params in SHIPPED:
        if m == module:
            return BLOCKS[b], BLOCKS[b].config.from_dict(params)
    raise ValueError(f"module must be a shipped module ({', '.join(m for m, _, _ in SHIPPED)}), "
                     f"not {module!r}")


def candidate_config(module: str):
    """``(block, config, device)`` of a configuration of :data:`CANDIDATES` (``ValueError``
    naming the choices)."""
    for m, b, params, device in CANDIDATES:
        if m == module:
            return BLOCKS[b], BLOCKS[b].config.from_dict(params), device
    raise ValueError(f"module must be a candidate ({', '.join(m for m, *_ in CANDIDATES)}), "
                     f"not {module!r}")


def family_vlnvs(family: str) -> tuple:
    """VLNVs of the shipped accelerators of a family (what a PYNQ IP class binds to)."""
    return tuple(vlnv(m) for m in shipped_modules(family=family, role="accelerator"))


def block_of_module(module: str, *, role: str | None = None) -> Block | None:
    """The block of a module name: a shipped module (``replay_kernel_k16``) or a block's
    default module name (``replay_kernel``); None if it is neither."""
    for m, b, _ in SHIPPED:
        if m == module and (role is None or BLOCKS[b].role == role):
            return BLOCKS[b]
    for b in BLOCKS.values():
        if b.module == module and (role is None or b.role == role):
            return b
    return None
