"""Environments: the vector-env protocol and its backends, the env factory, rlpipe's own environments,
goal-env and MiniGrid support. Nothing here knows the pipeline's config: errors name the env's own
settings (:mod:`rlpipe.envs.errors`)."""
from rlpipe.envs.backends import VECTOR_BACKENDS, EnvSettings, make_vector_env
from rlpipe.envs.bitflip import ENV_ID as BITFLIP_ENV_ID
from rlpipe.envs.bitflip import BitFlipEnv
from rlpipe.envs.deepsea import ENV_ID as DEEPSEA_ENV_ID
from rlpipe.envs.deepsea import DeepSeaEnv
from rlpipe.envs.errors import EnvError, EnvSettingError
from rlpipe.envs.factory import EnvFactory, env_factory, is_goal_env
from rlpipe.envs.goal import FlattenGoalObservation, GoalLayout, find_goal_layout
from rlpipe.envs.minigrid import FlattenMiniGridImage
from rlpipe.envs.protocol import VectorEnv
from rlpipe.envs.recovery import RecreateOnError
from rlpipe.envs.registration import register_envs
from rlpipe.envs.vector import VectorEnvManager

__all__ = [
    "BITFLIP_ENV_ID",
    "DEEPSEA_ENV_ID",
    "VECTOR_BACKENDS",
    "BitFlipEnv",
    "DeepSeaEnv",
    "EnvError",
    "EnvFactory",
    "EnvSettingError",
    "EnvSettings",
    "FlattenGoalObservation",
    "FlattenMiniGridImage",
    "GoalLayout",
    "RecreateOnError",
    "VectorEnv",
    "VectorEnvManager",
    "env_factory",
    "find_goal_layout",
    "is_goal_env",
    "make_vector_env",
    "register_envs",
]
