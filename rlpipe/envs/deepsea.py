"""Deep sea: the exploration benchmark of bsuite (Osband et al., "Behaviour Suite for RL").

The agent descends an ``size x size`` grid one row per step, starting at the top-left cell,
and chooses "left" or "right" each step. Only ``size`` rights in a row reach the treasure in
the bottom-right corner, and every right costs a little, so a learner that is not driven to
explore deeply settles on always-left (return 0) and a dithering one (epsilon-greedy) needs
on the order of ``2 ** size`` episodes to see the treasure once.

Which action means "right" is randomised per cell by a fixed table drawn from
``mapping_seed``: the table is the problem instance, so ``reset(seed=...)`` never changes it
(the collector's and the evaluator's envs get different reset seeds but must face the same
sea). Apart from the table, the dynamics are deterministic.

Observation layout: float32 one-hot of the agent's cell, row-major, shape ``(size * size,)``;
all zeros once the agent has left the grid (after the last step).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

ENV_ID = "rlpipe/DeepSea-v0"

__all__ = ["ENV_ID", "DeepSeaEnv", "register_envs"]


class DeepSeaEnv(gym.Env[np.ndarray, np.int64]):
    """Dive ``size`` rows; only always-right finds the treasure.

    - action: ``Discrete(2)``; in cell ``(row, col)`` action ``a`` moves right iff
      ``a == right_action[row, col]``, else left;
    - reward: ``-move_cost / size`` for each right (so ``size`` rights cost ``move_cost``),
      plus 1.0 for a right taken while already in the last column; starting from column 0
      that can only be the ``size``-th right on the last row, so the optimal return is
      ``1 - move_cost`` and every other return is <= 0;
    - terminated: after exactly ``size`` steps; never truncated;
    - info: ``{"is_success": bool}``, True on the last step exactly when the 1.0 was collected.
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 (gymnasium's class attribute)

    def __init__(self, size: int = 10, mapping_seed: int = 0, move_cost: float = 0.01) -> None:
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 2:
            raise ValueError(f"size must be an integer >= 2, got {size!r}")
        if not move_cost >= 0:  # also rejects NaN
            raise ValueError(f"move_cost must be >= 0, got {move_cost!r}")
        self.size = int(size)
        self.move_cost = float(move_cost)
        table = np.random.default_rng(mapping_seed).integers(0, 2, size=(self.size, self.size))
        table.setflags(write=False)
        self.right_action: np.ndarray = table
        """``right_action[row, col]``: the action (0 or 1) that moves right in that cell."""
        self.observation_space = spaces.Box(0.0, 1.0, shape=(self.size * self.size,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self._row: int | None = None  # None until the first reset
        self._col = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)  # seeds np_random for gymnasium's contract; the dynamics never use it
        self._row, self._col = 0, 0
        return self._observation(), {"is_success": False}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self._row is None:
            raise RuntimeError("DeepSeaEnv.step called before reset()")
        if self._row >= self.size:
            raise RuntimeError("DeepSeaEnv.step called after the episode ended; call reset()")
        if int(action) not in (0, 1):
            raise ValueError(f"action {action!r} is outside Discrete(2)")
        last = self.size - 1
        right = int(action) == self.right_action[self._row, self._col]
        reward = 0.0
        success = False
        if right:
            reward -= self.move_cost / self.size
            success = self._col == last  # checked before moving: the treasure is a right from the last column
            reward += float(success)
            self._col = min(self._col + 1, last)
        else:
            self._col = max(self._col - 1, 0)
        self._row += 1
        terminated = self._row == self.size
        return self._observation(), reward, terminated, False, {"is_success": success}

    def _observation(self) -> np.ndarray:
        obs = np.zeros(self.size * self.size, dtype=np.float32)
        if self._row is not None and self._row < self.size:
            obs[self._row * self.size + self._col] = 1.0
        return obs


def register_envs() -> None:
    """Register :class:`DeepSeaEnv` as ``rlpipe/DeepSea-v0`` (``gym.make(ENV_ID, size=20)``).

    Safe to call any number of times: an existing registration is left as it is.
    """
    if ENV_ID not in gym.registry:
        gym.register(id=ENV_ID, entry_point="rlpipe.envs.deepsea:DeepSeaEnv")
