"""Goal environments with dict observations, flattened for off-policy learners and HER.

A goal environment (the gymnasium-robotics convention) observes a dict with keys
``observation``, ``achieved_goal`` and ``desired_goal`` and offers
``compute_reward(achieved_goal, desired_goal, info)``, vectorised over leading axes.

:class:`FlattenGoalObservation` turns the dict into one float32 vector with the layout::

    [ observation (O) | achieved_goal (G) | desired_goal (G) ]      size O + 2G

:class:`GoalLayout` knows that layout and provides the three goal functions
:class:`rlpipe.reward_model.HerRewardModel` takes, so relabelling goes through the
environment's own ``compute_reward``::

    env = FlattenGoalObservation(gym.make("FetchReach-v4"))
    her = HerRewardModel(cfg, merge_func=env.layout.merge, split_func=env.layout.split,
                         goal_reward_func=env.layout.reward, terminal_on_success=False)

"state" in those functions is ``[observation | achieved_goal]``: everything that does not
change when the goal is relabelled.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from rlpipe.utils.batched import batched

GOAL_KEYS = ("observation", "achieved_goal", "desired_goal")

__all__ = ["GOAL_KEYS", "FlattenGoalObservation", "GoalLayout", "find_goal_layout"]


@dataclass(frozen=True)
class GoalLayout:
    """Sizes of the flat goal observation and the env's reward function.

    ``compute_reward(achieved_goal [..., G], desired_goal [..., G], info) -> reward [...]``.
    """

    obs_dim: int
    goal_dim: int
    compute_reward: Callable[[np.ndarray, np.ndarray, Any], Any]

    @property
    def size(self) -> int:
        """Length of the flat observation."""
        return self.obs_dim + 2 * self.goal_dim

    @classmethod
    def from_env(cls, env: gym.Env[Any, Any]) -> GoalLayout:
        """Read the sizes from a goal env's dict observation space and take its ``compute_reward``."""
        space = env.observation_space
        if not isinstance(space, spaces.Dict) or set(space.spaces) != set(GOAL_KEYS):
            raise ValueError(f"goal env needs a Dict observation space with keys {GOAL_KEYS}, got {space}")
        sizes = {}
        for key in GOAL_KEYS:
            sub = space[key]
            if not isinstance(sub, spaces.Box) or len(sub.shape) != 1:
                raise ValueError(f"goal env observation {key!r} must be a 1-D Box, got {sub}")
            sizes[key] = sub.shape[0]
        if sizes["achieved_goal"] != sizes["desired_goal"]:
            raise ValueError(
                f"goal env achieved_goal has size {sizes['achieved_goal']} "
                f"but desired_goal has size {sizes['desired_goal']}"
            )
        try:
            compute_reward = env.get_wrapper_attr("compute_reward")
        except AttributeError:
            raise ValueError(
                f"goal env {env} has no compute_reward(achieved_goal, desired_goal, info)"
            ) from None
        return cls(sizes["observation"], sizes["achieved_goal"], compute_reward)

    def flatten(self, observation: Mapping[str, np.ndarray]) -> np.ndarray:
        """Dict observation -> flat float32 vector ``[observation | achieved_goal | desired_goal]``."""
        return np.concatenate([np.asarray(observation[key], dtype=np.float32) for key in GOAL_KEYS], axis=-1)

    def unflatten(self, x: np.ndarray) -> dict[str, np.ndarray]:
        """Flat vector(s) ``[..., size]`` -> the dict observation (views into ``x``)."""
        self._check(x)
        o, g = self.obs_dim, self.goal_dim
        return {
            "observation": x[..., :o],
            "achieved_goal": x[..., o : o + g],
            "desired_goal": x[..., o + g :],
        }

    @batched
    def split(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """HER split: ``x [..., size]`` -> (state, desired_goal, achieved_goal).

        The state is ``[observation | achieved_goal]``, everything relabelling keeps.
        """
        self._check(x)
        o, g = self.obs_dim, self.goal_dim
        return x[..., : o + g], x[..., o + g :], x[..., o : o + g]

    @batched
    def merge(self, state: np.ndarray, goal: np.ndarray) -> np.ndarray:
        """HER merge: state ``[..., O + G]`` and a goal ``[..., G]`` -> flat observation."""
        return np.concatenate([state, goal], axis=-1)

    @batched
    def reward(self, achieved_goal: np.ndarray, desired_goal: np.ndarray) -> np.ndarray:
        """HER goal reward through the env's ``compute_reward`` (relabelled transitions carry no info)."""
        return np.asarray(self.compute_reward(achieved_goal, desired_goal, {}), dtype=np.float32)

    def _check(self, x: np.ndarray) -> None:
        if x.shape[-1:] != (self.size,):
            raise ValueError(
                f"goal observation has shape {x.shape}; its last axis must be {self.size} (observation "
                f"{self.obs_dim} + achieved_goal {self.goal_dim} + desired_goal {self.goal_dim})"
            )


class FlattenGoalObservation(gym.ObservationWrapper[np.ndarray, Any, Any]):
    """Observe a goal env as one float32 vector ``[observation | achieved_goal | desired_goal]``.

    ``self.layout`` (a :class:`GoalLayout`) splits, merges and rewards those vectors.
    """

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        super().__init__(env)
        self.layout = GoalLayout.from_env(env)
        dict_space = cast(spaces.Dict, env.observation_space)  # checked by GoalLayout.from_env
        boxes = [cast(spaces.Box, dict_space[key]) for key in GOAL_KEYS]
        self.observation_space = spaces.Box(
            low=np.concatenate([b.low for b in boxes]).astype(np.float32),
            high=np.concatenate([b.high for b in boxes]).astype(np.float32),
            dtype=np.float32,
        )

    def observation(self, observation: Mapping[str, np.ndarray]) -> np.ndarray:
        return self.layout.flatten(observation)


def find_goal_layout(env: gym.Env[Any, Any]) -> GoalLayout | None:
    """The :class:`GoalLayout` of the :class:`FlattenGoalObservation` in ``env``'s wrapper stack, if any."""
    while isinstance(env, gym.Wrapper):
        if isinstance(env, FlattenGoalObservation):
            return env.layout
        env = env.env
    return None
