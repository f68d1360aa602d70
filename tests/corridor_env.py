"""A user's own environment module: importing it registers ``Corridor-v0`` (for the tests of
``module:EnvId``, ``env.import`` and ``env.wrappers``)."""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

ENV_ID = "Corridor-v0"


class CorridorEnv(gym.Env):
    """Walk right along a corridor of ``length`` cells; reward 1 at the end, which terminates."""

    def __init__(self, length: int = 6) -> None:
        self.length = length
        self.observation_space = spaces.Box(0.0, 1.0, shape=(length,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)  # 0: left, 1: right
        self._pos = 0

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self._pos = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self._pos = int(np.clip(self._pos + (1 if int(action) == 1 else -1), 0, self.length - 1))
        done = self._pos == self.length - 1
        return self._obs(), float(done), done, False, {}

    def _obs(self) -> np.ndarray:
        obs = np.zeros(self.length, dtype=np.float32)
        obs[self._pos] = 1.0
        return obs


if ENV_ID not in gym.registry:
    gym.register(ENV_ID, entry_point=CorridorEnv, max_episode_steps=30)
