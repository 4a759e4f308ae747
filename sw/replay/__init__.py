"""CPU prioritized replay buffer on the K-ary sum tree golden model."""
from .buffer import PrioritizedReplayBuffer, importance_weights

__all__ = ["PrioritizedReplayBuffer", "importance_weights"]
