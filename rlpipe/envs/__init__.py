"""Environments: the vector environment manager, rlpipe's own environments, goal-env and MiniGrid support."""
from rlpipe.envs.bitflip import ENV_ID as BITFLIP_ENV_ID
from rlpipe.envs.bitflip import BitFlipEnv
from rlpipe.envs.deepsea import ENV_ID as DEEPSEA_ENV_ID
from rlpipe.envs.deepsea import DeepSeaEnv
from rlpipe.envs.goal import FlattenGoalObservation, GoalLayout, find_goal_layout
from rlpipe.envs.minigrid import FlattenMiniGridImage
from rlpipe.envs.recovery import RecreateOnError
from rlpipe.envs.registration import register_envs
from rlpipe.envs.vector import VectorEnvManager, env_factory

__all__ = [
    "BITFLIP_ENV_ID",
    "DEEPSEA_ENV_ID",
    "BitFlipEnv",
    "DeepSeaEnv",
    "FlattenGoalObservation",
    "FlattenMiniGridImage",
    "GoalLayout",
    "RecreateOnError",
    "VectorEnvManager",
    "env_factory",
    "find_goal_layout",
    "register_envs",
]
