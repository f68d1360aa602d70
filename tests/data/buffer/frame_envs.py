"""Rows of stacked-frame envs as the collector writes them, for the frame store's tests.

Each env is gymnasium's ``FrameStackObservation`` (stack 4) around a tiny env of random
``uint8 [6, 5]`` frames that often repeats a frame, shows a blank one, or ends (terminated or
truncated) after a few steps. :func:`vector_rows` steps several of them like
``VectorEnvManager``: a row's ``next_obs`` is the final observation when its episode ends,
and the env starts its next episode at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.wrappers import FrameStackObservation

from rlpipe.data import NStepAccumulator

FRAME_SHAPE = (6, 5)
STACK = 4


class RandomFrames(gym.Env):
    """Frames of 3 grey levels; a frame repeats with probability 0.3, is blank with 0.1."""

    observation_space = gym.spaces.Box(0, 255, FRAME_SHAPE, np.uint8)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, end_prob: float = 0.1, max_steps: int = 12, distinct: bool = False) -> None:
        self.end_prob, self.max_steps, self.distinct = end_prob, max_steps, distinct
        self._frame = np.zeros(FRAME_SHAPE, np.uint8)
        self._t = 0

    def _next_frame(self) -> np.ndarray:
        u = self.np_random.random()
        if self.distinct:  # every frame differs from all others (almost surely)
            self._frame = self.np_random.integers(0, 256, FRAME_SHAPE, dtype=np.uint8)
        elif u < 0.1:
            self._frame = np.zeros(FRAME_SHAPE, np.uint8)
        elif u >= 0.4:
            self._frame = self.np_random.integers(0, 3, FRAME_SHAPE, dtype=np.uint8) * 100
        return self._frame.copy()

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self._t = 0
        return self._next_frame(), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self._t += 1
        terminated = bool(self.np_random.random() < self.end_prob)
        truncated = not terminated and self._t >= self.max_steps
        return self._next_frame(), 1.0, terminated, truncated, {}


def vector_steps(
    num_envs: int,
    steps: int,
    seed: int = 0,
    padding: str = "reset",
    make_env: Callable[[], gym.Env] | None = None,
    **env_kwargs: Any,
) -> Iterator[dict[str, np.ndarray]]:
    """``steps`` vector steps of ``num_envs`` envs (``make_env``'s, else stacked
    :class:`RandomFrames`) with random actions: one columnar batch each, one row per env."""
    if make_env is None:
        def make_env() -> gym.Env:
            return FrameStackObservation(RandomFrames(**env_kwargs), STACK, padding_type=padding)
    envs = [make_env() for _ in range(num_envs)]
    for i, env in enumerate(envs):
        env.action_space.seed(seed + i)
    obs = np.stack([env.reset(seed=seed + i)[0] for i, env in enumerate(envs)])
    for _ in range(steps):
        actions = np.array([env.action_space.sample() for env in envs])
        rows = [env.step(action) for env, action in zip(envs, actions, strict=True)]
        next_obs = np.stack([row[0] for row in rows])
        terminated = np.array([row[2] for row in rows])
        truncated = np.array([row[3] for row in rows])
        yield {
            "obs": obs.copy(),
            "action": actions,
            "reward": np.array([row[1] for row in rows], dtype=np.float32),
            "next_obs": next_obs,
            "terminated": terminated,
            "truncated": truncated,
            "env_id": np.arange(num_envs),
        }
        obs = next_obs.copy()
        for i in np.flatnonzero(terminated | truncated):
            obs[i] = envs[i].reset()[0]


def vector_rows(
    num_envs: int, steps: int, nstep: int = 1, seed: int = 0, padding: str = "reset", **kwargs: Any
) -> Iterator[dict[str, np.ndarray]]:
    """The batches a collector (and, with ``nstep`` > 1, the n-step accumulator) hands the
    pusher: transitions delayed until their n-step window closes."""
    accumulator = NStepAccumulator(nstep, 0.99)
    for batch in vector_steps(num_envs, steps, seed, padding, **kwargs):
        rows = accumulator.add(batch) if nstep > 1 else batch
        if len(rows["reward"]):
            yield rows
