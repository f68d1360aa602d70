"""Neural networks used by the policies, each starting with an encoder chosen from the observation space."""
from rlpipe.model.continuous import (
    Actor,
    DeterministicActor,
    EnsembleLinear,
    EnsembleQ,
    GaussianActor,
    SquashedGaussianActor,
    StateValue,
)
from rlpipe.model.encoders import EncoderConfig, make_encoder
from rlpipe.model.heads import DistributionalQ
from rlpipe.model.noisy import NoisyLinear
from rlpipe.model.q_network import DQN
from rlpipe.model.recurrent import RecurrentQ

__all__ = [
    "DQN",
    "Actor",
    "DeterministicActor",
    "DistributionalQ",
    "EncoderConfig",
    "EnsembleLinear",
    "EnsembleQ",
    "GaussianActor",
    "NoisyLinear",
    "RecurrentQ",
    "SquashedGaussianActor",
    "StateValue",
    "make_encoder",
]
