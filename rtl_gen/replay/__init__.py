"""Prioritized replay gateware: the K-ary sum tree (CF'22 on-chip replay management) and the
accelerator around it (AXI4-Lite control, AXI4 batch buffers, batch engine); its specification
is :mod:`sw.replay.spec`."""
from .accelerator import ReplayAccelerator
from .layouts import RESPONDS, SumTreeOp, command_layout, response_layout
from .level import SumTreeLevel
from .prng import Xorshift32
from .sumtree import SumTree

__all__ = ["SumTree", "SumTreeLevel", "SumTreeOp", "Xorshift32", "RESPONDS", "command_layout",
           "response_layout", "ReplayAccelerator"]
