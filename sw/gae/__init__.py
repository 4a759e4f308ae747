"""Host side of the GAE accelerator: standardization and quantization of its inputs."""

from .pipeline import GaeQuantizationPipeline
from .quant import (
                    BITS_RANGE,
                    DEFAULT_MIN_STD,
                    DEFAULT_REWARD_CLIP,
                    DEFAULT_VALUE_CLIP,
                    REWARD_NORMS,
                    REWARD_ROUNDINGS,
                    DynamicRewardStandardizer,
                    RunningMeanStd,
                    UniformQuantizer,
                    block_standardize,
                    dequantize,
)

__all__ = [
    "BITS_RANGE", "DEFAULT_MIN_STD", "DEFAULT_REWARD_CLIP", "DEFAULT_VALUE_CLIP",
    "REWARD_NORMS", "REWARD_ROUNDINGS", "DynamicRewardStandardizer", "GaeQuantizationPipeline", "RunningMeanStd",
    "UniformQuantizer", "block_standardize", "dequantize",
]
