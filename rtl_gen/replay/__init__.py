"""Prioritized replay blocks: the K-ary sum tree (CF'22 on-chip replay management)."""
from .config import PRNG_BITS, XORSHIFT32_SHIFTS, XORSHIFT32_ZERO_SEED, SumTreeConfig

__all__ = ["SumTreeConfig", "XORSHIFT32_SHIFTS", "XORSHIFT32_ZERO_SEED", "PRNG_BITS"]
