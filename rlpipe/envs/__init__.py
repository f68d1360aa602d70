"""Environments: the vector environment manager, rlpipe's own environments, goal-env support."""
from rlpipe.envs.bitflip import ENV_ID as BITFLIP_ENV_ID
from rlpipe.envs.bitflip import BitFlipEnv
from rlpipe.envs.goal import FlattenGoalObservation, GoalLayout, find_goal_layout
from rlpipe.envs.recovery import RecreateOnError
from rlpipe.envs.registration import register_envs
from rlpipe.envs.vector import VectorEnvManager, env_factory

__all__ = [
    "BITFLIP_ENV_ID",
    "BitFlipEnv",
    "FlattenGoalObservation",
    "GoalLayout",
    "RecreateOnError",
    "VectorEnvManager",
    "env_factory",
    "find_goal_layout",
    "register_envs",
]
