"""Environments: the vector environment manager and rlpipe's own environments."""
from rlpipe.envs.registration import register_envs
from rlpipe.envs.vector import VectorEnvManager, env_factory

__all__ = ["VectorEnvManager", "env_factory", "register_envs"]
