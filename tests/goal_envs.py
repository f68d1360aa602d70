"""Small goal environments (dict observations with ``compute_reward``) shared by the tests."""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

POINT_ID = "rlpipe-test/PointGoal-v0"


class PointGoalEnv(gym.Env):
    """A point on a plane that must reach a target: the smallest dict-observation goal env.

    observation = (x, y, step fraction), achieved_goal = (x, y), desired_goal = the target.
    The reward follows the robotics convention: 0 within 0.1 of the target, else -1.
    """

    def __init__(self) -> None:
        box2 = spaces.Box(-5.0, 5.0, shape=(2,), dtype=np.float32)
        self.observation_space = spaces.Dict(
            {
                "observation": spaces.Box(-5.0, 5.0, shape=(3,), dtype=np.float32),
                "achieved_goal": box2,
                "desired_goal": box2,
            }
        )
        self.action_space = spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)
        self.reward_calls = 0

    def compute_reward(self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Any) -> np.ndarray:
        self.reward_calls += 1
        distance = np.linalg.norm(achieved_goal - desired_goal, axis=-1)
        return -(distance > 0.1).astype(np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._pos = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        self._target = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        self._t = 0
        return self._obs(), {}

    def step(self, action):
        self._pos = np.clip(self._pos + 0.2 * np.asarray(action, dtype=np.float32), -5, 5).astype(np.float32)
        self._t += 1
        reward = float(self.compute_reward(self._pos, self._target, {}))
        return self._obs(), reward, False, self._t >= 10, {"is_success": reward == 0.0}

    def _obs(self):
        return {
            "observation": np.array([*self._pos, self._t / 10], dtype=np.float32),
            "achieved_goal": self._pos.copy(),
            "desired_goal": self._target.copy(),
        }


if POINT_ID not in gym.registry:
    gym.register(POINT_ID, entry_point=PointGoalEnv)
