"""Neural networks used by the policies."""
from rlpipe.model.continuous import DeterministicActor, EnsembleLinear, EnsembleQ, SquashedGaussianActor
from rlpipe.model.q_network import DQN

__all__ = ["DQN", "DeterministicActor", "EnsembleLinear", "EnsembleQ", "SquashedGaussianActor"]
