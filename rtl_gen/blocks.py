"""The gateware of every block of the registry: block name -> its Amaranth component.

:data:`sw.registry.BLOCKS` holds a block's host facts (configuration class, register map, cycle
model, golden device, driver) and imports no Amaranth; this table adds the component each
configuration builds, imported here. The CLI (``python -m rtl_gen``), :func:`rtl_gen.emit.emit`
(and with it the shipped ``hdl/`` files, the Verilator models and the Vivado flow) and the tests
build components through :func:`build`.
"""

from amaranth.lib import wiring

from sw.registry import BLOCKS, Block
from sw.registry import block as find_block

from .gae.accelerator import GaeAccelerator
from .gae.kernel import GaeKernel
from .gae.pe import GaeProcessingElement
from .learner.accelerator import LearnerAccelerator
from .learner.kernel import LearnerKernel
from .learner.tensor_unit import TensorUnit
from .replay.accelerator import ReplayAccelerator
from .replay.kernel import ReplayKernel
from .replay.sumtree import SumTree
from .trainer.accelerator import TrainerAccelerator

__all__ = ["GATEWARE", "gateware", "build"]

#: Block name (:data:`sw.registry.BLOCKS`) -> the component class built from its configuration.
GATEWARE = {
    "gae-pe": GaeProcessingElement,
    "gae-accel": GaeAccelerator,
    "gae-kernel": GaeKernel,
    "sumtree": SumTree,
    "replay-accel": ReplayAccelerator,
    "replay-kernel": ReplayKernel,
    "tensor-unit": TensorUnit,
    "learner": LearnerAccelerator,
    "learner-kernel": LearnerKernel,
    "dqn-trainer": TrainerAccelerator,
}

assert GATEWARE.keys() == BLOCKS.keys(), "every registered block has its gateware"


def gateware(block: "Block | str") -> type:
    """The component class of ``block`` (a :class:`~sw.registry.Block` or its name;
    ``ValueError`` listing the names for an unknown one)."""
    name = block.name if isinstance(block, Block) else find_block(block).name
    return GATEWARE[name]


def build(block: "Block | str", config) -> wiring.Component:
    """The Amaranth component of ``config``, a configuration of ``block`` (a
    :class:`~sw.registry.Block` or its name)."""
    return gateware(block)(config)
