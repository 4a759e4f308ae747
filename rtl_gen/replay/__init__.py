"""Prioritized replay blocks: the K-ary sum tree (CF'22 on-chip replay management) and the
accelerator around it (AXI4-Lite control, AXI4 batch buffers, batch engine)."""
from .config import PRNG_BITS, XORSHIFT32_SHIFTS, XORSHIFT32_ZERO_SEED, SumTreeConfig
from .layouts import RESPONDS, SumTreeOp, command_layout, response_layout
from .level import SumTreeLevel
from .prng import Xorshift32
from .sumtree import SumTree
from .regs import ReplayOp, replay_register_map
from .accelerator import ReplayAccelerator

__all__ = ["SumTreeConfig", "XORSHIFT32_SHIFTS", "XORSHIFT32_ZERO_SEED", "PRNG_BITS",
           "SumTree", "SumTreeLevel", "SumTreeOp", "Xorshift32", "RESPONDS", "command_layout",
           "response_layout", "ReplayAccelerator", "ReplayOp", "replay_register_map"]
