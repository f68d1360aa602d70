"""Neural networks used by the policies, each starting with an encoder chosen from the observation space."""
from rlpipe.model.continuous import DeterministicActor, EnsembleLinear, EnsembleQ, SquashedGaussianActor
from rlpipe.model.encoders import ENCODERS, EncoderConfig, make_encoder
from rlpipe.model.q_network import DQN

__all__ = [
    "DQN",
    "ENCODERS",
    "DeterministicActor",
    "EncoderConfig",
    "EnsembleLinear",
    "EnsembleQ",
    "SquashedGaussianActor",
    "make_encoder",
]
