"""Small datasets made in the tests: interleaved envs, known episodes."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACTION_SPACE = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)


def interleaved_columns(steps: int = 60, envs: int = 2, length: int = 10, seed: int = 0) -> dict[str, np.ndarray]:
    """``steps`` vector steps of ``envs`` envs, rows of one vector step together; every env's episodes last
    ``length`` steps and end truncated, and each reward is its env id + 1, so returns are known."""
    rng = np.random.default_rng(seed)
    n = steps * envs
    env_id = np.tile(np.arange(envs), steps)
    step = np.repeat(np.arange(steps), envs)
    return {
        "obs": rng.uniform(-1, 1, (n, 3)).astype(np.float32),
        "action": rng.uniform(-1, 1, (n, 2)).astype(np.float32),
        "reward": (env_id + 1).astype(np.float32),
        "next_obs": rng.uniform(-1, 1, (n, 3)).astype(np.float32),
        "terminated": np.zeros(n, dtype=bool),
        "truncated": (step % length) == length - 1,
        "env_id": env_id.astype(np.int64),
    }


@pytest.fixture
def columns() -> dict[str, np.ndarray]:
    return interleaved_columns()
