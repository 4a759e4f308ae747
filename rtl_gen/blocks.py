"""Registry of generatable blocks and of the configurations shipped in ``hdl/``.

A block entry ties a config dataclass to the component built from it. The CLI, the Makefile
(through the CLI) and the tests all go through :func:`emit`, so what is shipped is what is tested.
"""

import dataclasses
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from amaranth.back import verilog
from amaranth.hdl import Shape
from amaranth.lib import data, wiring

from .gae import GaePeConfig, GaeProcessingElement
from .gae.accelerator import GaeAccelerator
from .gae.config import GaeCoreConfig
from .gae.kernel import GaeKernel, GaeKernelConfig
from .learner import LearnerAccelerator, LearnerConfig, TensorUnit, TensorUnitConfig
from .learner.kernel import LearnerKernel, LearnerKernelConfig
from .replay import SumTree, SumTreeConfig
from .replay.accelerator import ReplayAccelerator
from .replay.kernel import ReplayKernel, ReplayKernelConfig

__all__ = ["BLOCKS", "SHIPPED", "Block", "emit", "port_table", "to_verilog",
           "drop_zero_memory_init"]

#: An ``initial`` block of Yosys' ``write_verilog`` that only zeroes memory words, e.g.
#: ``initial begin\n    mem[0] = 144'h000...;\n    mem[1] = ...;\n  end\n``.
_ZERO_INIT = re.compile(
    r"^(?P<ind>[ \t]*)initial begin\n"
    r"(?:[ \t]*[A-Za-z_\\][^\s\[]* ?\[\d+\] = \d+'[hbd]0+;\n)+"
    r"(?P=ind)end\n", re.MULTILINE)


@dataclass(frozen=True)
class Block:
    name: str            # CLI name
    module: str          # default Verilog module name
    config_cls: type
    build: Callable      # config -> wiring.Component
    summary: str


BLOCKS = {
    "gae-pe": Block("gae-pe", "gae_pe", GaePeConfig, GaeProcessingElement,
                    "GAE processing element (HEPPO), one element per cycle"),
    "gae-accel": Block("gae-accel", "gae_accel", GaeCoreConfig, GaeAccelerator,
                       "HEPPO GAE accelerator: stack memory, N PEs, AXI4-Lite + AXI4"),
    "gae-kernel": Block("gae-kernel", "gae_kernel", GaeKernelConfig, GaeKernel,
                        "HEPPO GAE accelerator as a Vitis kernel: AXI4-Lite + m_axi DMA shell"),
    "sumtree": Block("sumtree", "sumtree", SumTreeConfig, SumTree,
                     "K-ary sum tree for prioritized replay, one sample or update per cycle"),
    "replay-accel": Block("replay-accel", "replay_accel", SumTreeConfig, ReplayAccelerator,
                          "prioritized replay: K-ary sum tree, batch buffers, AXI4-Lite + AXI4"),
    "replay-kernel": Block("replay-kernel", "replay_kernel", ReplayKernelConfig, ReplayKernel,
                           "prioritized replay as a Vitis kernel: AXI4-Lite + m_axi DMA shell "
                           "(host-commanded copies)"),
    "tensor-unit": Block("tensor-unit", "tensor_unit", TensorUnitConfig, TensorUnit,
                         "R x C output-stationary systolic GEMM array (learner tensor unit)"),
    "learner": Block("learner", "learner", LearnerConfig, LearnerAccelerator,
                     "MLP training step on a pipeline of S x S tensor units, AXI4-Lite + AXI4"),
    "learner-kernel": Block("learner-kernel", "learner_kernel", LearnerKernelConfig,
                            LearnerKernel, "MLP learner as a Vitis kernel: AXI4-Lite + m_axi DMA "
                                           "shell (host-commanded copies)"),
}

#: Configurations written to ``hdl/`` by ``make``: (directory/module name, block, parameters).
SHIPPED = [
    ("gae_pe_k1", "gae-pe", {"k": 1}),
    ("gae_pe_k2", "gae-pe", {"k": 2}),          # the default, HEPPO's choice
    ("gae_pe_k3", "gae-pe", {"k": 3}),
    ("gae_pe_il4", "gae-pe", {"k": 4, "mode": "interleaved"}),
    # HEPPO's system: 64 trajectories x 1024 steps, 8-bit codes written back in place.
    ("gae_accel_n8", "gae-accel", {"n_pe": 8, "max_trajectories": 64, "capacity": 1024}),
    ("gae_accel_n64", "gae-accel", {"n_pe": 64, "max_trajectories": 64, "capacity": 1024}),
    # The same as an Alveo (Vitis/XRT) kernel: copies the image over a 512-bit m_axi port.
    ("gae_kernel_n8", "gae-kernel", {"n_pe": 8, "max_trajectories": 64, "capacity": 1024}),
    # Prioritized replay sized for the ZCU106: 2^16 leaves in a 16-ary tree (4 levels, latency
    # 18), batches up to 4096; 2^20 leaves need the URAM of a larger part (README).
    ("replay_accel_k16", "replay-accel", {"fanout": 16, "capacity": 1 << 16}),
    # The same as an Alveo (Vitis/XRT) kernel: the window DMA shell, 512-bit m_axi port.
    ("replay_kernel_k16", "replay-kernel", {"fanout": 16, "capacity": 1 << 16}),
    # CartPole DQN 4-64-64-2 with its target network on 4 x 4 tensor units, batches up to 64
    # in sub-batches of 8, 128-bit memory port (ZCU106 HPM0). 8 x 8 units take 3.3x fewer
    # cycles but 3.4x the LUTs, 3.5x the DSPs and minutes more to emit and synthesize.
    ("learner_cartpole_s4", "learner", {"sizes": [4, 64, 64, 2], "array": 4, "max_batch": 64,
                                        "sub_batch": 8, "axi_data_width": 128}),
    # The same as an Alveo (Vitis/XRT) kernel: the window DMA shell, 512-bit m_axi port.
    ("learner_kernel_s4", "learner-kernel", {"sizes": [4, 64, 64, 2], "array": 4,
                                             "max_batch": 64, "sub_batch": 8,
                                             "axi_data_width": 128}),
]


def _layout_fields(shape):
    if isinstance(shape, data.StructLayout):
        return {name: {"offset": f.offset, "width": Shape.cast(f.shape).width,
                       "signed": Shape.cast(f.shape).signed} for name, f in shape}
    return None


def port_table(component: wiring.Component):
    """Flat Verilog ports of a component: name, direction, width, payload fields."""
    ports = []
    for path, member, _ in component.signature.flatten(component):
        name = "__".join(str(p) for p in path)
        shape = member.shape
        entry = {"name": name, "dir": "input" if member.flow == wiring.In else "output",
                 "width": Shape.cast(shape).width}
        fields = _layout_fields(shape)
        if fields:
            entry["fields"] = fields
        ports.append(entry)
    return ports


def drop_zero_memory_init(text: str) -> str:
    """Remove the ``initial`` blocks that set every word of a memory to zero.

    Amaranth's ``Memory(init=[])`` still writes one ``mem[i] = 0;`` line per word (megabytes at
    2**20 leaves, and Yosys runs out of memory reading them). Zero is what the FPGA's block and
    ultra RAMs hold after configuration without an INIT attribute, and what the test builds
    (``--x-initial 0``) use, so nothing changes. Only blocks made exclusively of all-zero word
    assignments are removed; a memory with any non-zero initial word keeps its whole block.
    """
    return _ZERO_INIT.sub("", text)


def to_verilog(component, name: str) -> str:
    """Verilog of ``component`` as module ``name``: Amaranth's output without the all-zero
    memory initialisers (:func:`drop_zero_memory_init`)."""
    return drop_zero_memory_init(verilog.convert(component, name=name, emit_src=False))


def emit(block_name: str, params: dict, out_dir, *, module: str | None = None) -> dict:
    """Elaborate a block, write ``<module>.v`` and ``<module>.json`` (manifest) to ``out_dir``.

    Raises ``ValueError`` for unknown blocks or invalid parameters (message names the parameter).
    Returns the manifest.
    """
    if block_name not in BLOCKS:
        raise ValueError(f"block must be one of {', '.join(BLOCKS)}, not {block_name!r}")
    block = BLOCKS[block_name]
    config = block.config_cls.from_dict(params)
    component = block.build(config)
    module = module or block.module
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    text = to_verilog(component, module)
    (out_dir / f"{module}.v").write_text(text)
    manifest = {
        "block": block.name,
        "module": module,
        "summary": block.summary,
        "config": dataclasses.asdict(config),
        "latency_cycles": getattr(component, "latency", None),
        "throughput_per_cycle": 1,
        "formats": {name: getattr(config, name).to_dict()
                    for name in ("data_format", "coef_format") if hasattr(config, name)},
        "clock": "ap_clk (rising edge)" if hasattr(component, "ap_clk") else "clk (rising edge)",
        "reset": ("ap_rst_n (active low, synchronous)" if hasattr(component, "ap_rst_n")
                  else "rst (active high, synchronous)"),
        "ports": port_table(component),
        "verilog": f"{module}.v",
    }
    kernel = getattr(component, "kernel_manifest", None)
    if kernel is not None:
        manifest["kernel"] = kernel     # Vitis kernel arguments (rtl_gen.vivado's kernel.xml)
    regmap = getattr(component, "regmap", None)
    if regmap is not None:
        # The register map, once, in every form its consumers read (see rtl_gen.regmap).
        manifest["registers"] = {"json": f"{module}_regs.json", "c_header": f"{module}_regs.h",
                                 "markdown": f"{module}_regs.md"}
        (out_dir / f"{module}_regs.json").write_text(regmap.to_json())
        (out_dir / f"{module}_regs.h").write_text(regmap.to_c_header(module.upper()))
        (out_dir / f"{module}_regs.md").write_text(regmap.to_markdown())
    (out_dir / f"{module}.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest
