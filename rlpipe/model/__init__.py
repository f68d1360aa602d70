"""Neural networks used by the policies."""
from rlpipe.model.q_network import DQN

__all__ = ["DQN"]
