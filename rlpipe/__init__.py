"""rlpipe: off-policy reinforcement learning as a pipeline of small middleware."""
__version__ = "0.1.0"
