"""Bit flipping: the toy goal-reaching task of the hindsight experience replay paper.

The agent holds ``n_bits`` bits and must turn them into a goal pattern, flipping one bit
per step. The reward is sparse (1 only on reaching the goal), so without hindsight
relabelling a random policy almost never sees a reward once ``n_bits`` passes ~10.

With ``continuous=True`` the action is a ``Box(-1, 1, (n_bits,))`` and every component > 0
flips its bit (several bits per step may flip): the fast test case for HER with SAC/TD3/DDPG.

Observation layout: ``concat(state, goal)`` as float32 of shape ``(2 * n_bits,)``; this is
exactly what :class:`rlpipe.reward_model.HerRewardModel`'s default split expects (state
first half, desired goal second half, achieved goal = state).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

ENV_ID = "rlpipe/BitFlip-v0"

__all__ = ["ENV_ID", "BitFlipEnv", "register_envs"]


class BitFlipEnv(gym.Env[np.ndarray, Any]):
    """Flip bits until the state equals the goal.

    - action: ``Discrete(n_bits)``, the index of the bit to flip; with ``continuous=True`` a
      ``Box(-1, 1, (n_bits,))`` vector whose components > 0 flip their bits;
    - reward: 1.0 when the state equals the goal after the step, else 0.0;
    - terminated: True exactly when the goal is reached;
    - truncated: after ``n_bits`` steps without reaching it (always enough to reach any goal);
    - info: ``{"is_success": bool}``.

    ``reset(seed=...)`` draws a random state and a different random goal from the env's
    seeded generator, so a seeded reset is reproducible.
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 (gymnasium's class attribute)

    def __init__(self, n_bits: int = 8, continuous: bool = False) -> None:
        if isinstance(n_bits, bool) or not isinstance(n_bits, (int, np.integer)) or n_bits < 1:
            raise ValueError(f"n_bits must be a positive integer, got {n_bits!r}")
        self.n_bits = int(n_bits)
        self.continuous = bool(continuous)
        self.observation_space = spaces.Box(0.0, 1.0, shape=(2 * self.n_bits,), dtype=np.float32)
        self.action_space: spaces.Space[Any] = (
            spaces.Box(-1.0, 1.0, shape=(self.n_bits,), dtype=np.float32) if self.continuous
            else spaces.Discrete(self.n_bits)
        )
        self._state = np.zeros(self.n_bits, dtype=np.float32)
        self._goal = np.zeros(self.n_bits, dtype=np.float32)
        self._steps: int | None = None  # None until the first reset

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        rng = self.np_random
        self._state = rng.integers(0, 2, size=self.n_bits).astype(np.float32)
        self._goal = self._state
        while np.array_equal(self._goal, self._state):  # rejection keeps the goal uniform over the others
            self._goal = rng.integers(0, 2, size=self.n_bits).astype(np.float32)
        self._steps = 0
        return self._observation(), {"is_success": False}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self._steps is None:
            raise RuntimeError("BitFlipEnv.step called before reset()")
        flip = self._bits_to_flip(action)
        self._state[flip] = 1.0 - self._state[flip]
        self._steps += 1
        success = bool(np.array_equal(self._state, self._goal))
        truncated = not success and self._steps >= self.n_bits
        return self._observation(), float(success), success, truncated, {"is_success": success}

    def compute_reward(self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Any) -> np.ndarray:
        """The goal-env reward, vectorised over leading axes: 1.0 where all bits match, else 0.0."""
        return np.all(np.asarray(achieved_goal) == np.asarray(desired_goal), axis=-1).astype(np.float32)

    def _bits_to_flip(self, action: Any) -> Any:
        """The bit index (discrete) or the mask of bits (continuous) ``action`` flips."""
        if self.continuous:
            vector = np.asarray(action, dtype=np.float32)
            if vector.shape != (self.n_bits,):
                raise ValueError(f"action of shape {vector.shape} is not in Box(-1, 1, ({self.n_bits},))")
            return vector > 0
        bit = int(action)
        if not 0 <= bit < self.n_bits:
            raise ValueError(f"action {action!r} is outside Discrete({self.n_bits})")
        return bit

    def _observation(self) -> np.ndarray:
        return np.concatenate([self._state, self._goal])


def register_envs() -> None:
    """Register :class:`BitFlipEnv` as ``rlpipe/BitFlip-v0`` (``gym.make(ENV_ID, n_bits=15)``,
    ``continuous=True`` for a Box action space).

    Safe to call any number of times: an existing registration is left as it is.
    """
    if ENV_ID not in gym.registry:
        gym.register(id=ENV_ID, entry_point="rlpipe.envs.bitflip:BitFlipEnv")
