"""Tiny environments with observation spaces other than a flat ``Box``, for the spaces tests.

Importing this module registers ``DictCorridor-v0`` (a dict observation without goals) and
``GridWalk-v0`` (a 2-D ``Box`` observation). Both have an optimal return of 1.0.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

DICT_CORRIDOR_ID = "DictCorridor-v0"
GRID_WALK_ID = "GridWalk-v0"


class DictCorridorEnv(gym.Env):
    """A corridor of ``length`` cells; ``target`` (``Discrete(3)``, drawn each episode) names the cell
    that pays 1 and ends the episode: the left end, the middle or the right end. The walk starts on
    a random other cell. Observations are a dict without goals: ``{"pos": Box [0, 1] (the cell,
    scaled), "target": Discrete(3)}``; actions 0 (left), 1 (right), a move off the corridor stays.
    Only a policy that reads both entries (the middle lies left or right of ``pos``) returns 1.0
    every episode."""

    def __init__(self, length: int = 7) -> None:
        self.length = length
        self.observation_space = spaces.Dict(
            {"pos": spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32), "target": spaces.Discrete(3)}
        )
        self.action_space = spaces.Discrete(2)
        self._pos = 0
        self._target = 0

    def _target_cell(self) -> int:
        return (self.length - 1) * self._target // 2

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[dict[str, Any], dict]:
        super().reset(seed=seed)
        self._target = int(self.np_random.integers(3))
        others = [cell for cell in range(self.length) if cell != self._target_cell()]
        self._pos = int(self.np_random.choice(others))
        return self._obs(), {}

    def step(self, action: Any) -> tuple[dict[str, Any], float, bool, bool, dict]:
        self._pos = min(max(self._pos + (1 if int(action) == 1 else -1), 0), self.length - 1)
        arrived = self._pos == self._target_cell()
        return self._obs(), float(arrived), arrived, False, {}

    def _obs(self) -> dict[str, Any]:
        return {"pos": np.array([self._pos / (self.length - 1)], dtype=np.float32), "target": self._target}


class GridWalkEnv(gym.Env):
    """Walk from the top-left cell of a ``rows x cols`` grid to the bottom-right one (reward 1, which
    terminates). The observation is the grid itself, a 2-D float32 ``Box`` with 1.0 at the agent;
    actions 0-3: up, down, left, right (a move off the grid stays)."""

    MOVES = ((-1, 0), (1, 0), (0, -1), (0, 1))

    def __init__(self, rows: int = 3, cols: int = 4) -> None:
        self.rows, self.cols = rows, cols
        self.observation_space = spaces.Box(0.0, 1.0, shape=(rows, cols), dtype=np.float32)
        self.action_space = spaces.Discrete(4)
        self._cell = (0, 0)

    def reset(self, *, seed: int | None = None, options: Any = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self._cell = (0, 0)
        return self._obs(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        d_row, d_col = self.MOVES[int(action)]
        row, col = self._cell
        self._cell = (min(max(row + d_row, 0), self.rows - 1), min(max(col + d_col, 0), self.cols - 1))
        done = self._cell == (self.rows - 1, self.cols - 1)
        return self._obs(), float(done), done, False, {}

    def _obs(self) -> np.ndarray:
        grid = np.zeros((self.rows, self.cols), dtype=np.float32)
        grid[self._cell] = 1.0
        return grid


if DICT_CORRIDOR_ID not in gym.registry:
    gym.register(DICT_CORRIDOR_ID, entry_point=DictCorridorEnv, max_episode_steps=20)
if GRID_WALK_ID not in gym.registry:
    gym.register(GRID_WALK_ID, entry_point=GridWalkEnv, max_episode_steps=30)
