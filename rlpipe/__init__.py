"""rlpipe: off-policy reinforcement learning as a pipeline of small middleware."""
from rlpipe.utils.batched import batched as batched  # a light import: no numpy or torch

__version__ = "0.1.0"

__all__ = ["__version__", "batched", "load", "train"]


def __getattr__(name: str) -> object:
    """``rlpipe.load`` and ``rlpipe.train`` without importing torch and the envs at ``import rlpipe``."""
    if name == "load":
        from rlpipe.entry.agent import load

        return load
    if name == "train":
        from rlpipe.entry.api import train

        return train
    raise AttributeError(f"module 'rlpipe' has no attribute {name!r}")
