"""Fakes implementing the real interfaces of policies, for middleware tests."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlpipe.envs import VectorEnvManager, env_factory
from rlpipe.framework import task


class ConstantActor:
    """A collect/eval mode that always pushes the cart left and records its kwargs."""

    def __init__(self) -> None:
        self.kwargs: list[dict] = []

    def forward(self, obs: np.ndarray, **kwargs) -> np.ndarray:
        self.kwargs.append(kwargs)
        return np.zeros(len(obs), dtype=np.int64)


class RecordingLearner:
    """A learn mode that records the batches it trains on and returns a loss per step."""

    def __init__(self, losses=None) -> None:
        self.batches: list[dict] = []
        self._losses = list(losses or [])

    def forward(self, batch):
        self.batches.append(batch)
        loss = self._losses.pop(0) if self._losses else 0.5
        return {"total_loss": loss, "priority": np.full(len(batch["reward"]), 2.0, dtype=np.float32)}


@pytest.fixture
def cartpole_env():
    env = VectorEnvManager(env_factory("CartPole-v1"), num_envs=3, seed=0)
    yield env
    env.close()


@pytest.fixture(autouse=True)
def fresh_task():
    with task.start():
        yield task


class FailsOnce(gym.Env):
    """Counts up to 5 steps per episode; the first instance made (every one, with
    ``broken_every_time``) raises on its 3rd step."""

    made = 0
    broken_every_time = False  # then every instance raises on its 3rd step

    def __init__(self) -> None:
        FailsOnce.made += 1
        self.broken = FailsOnce.made == 1 or FailsOnce.broken_every_time
        self.observation_space = gym.spaces.Box(0, 9, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.zeros(1, dtype=np.float32), {}

    def step(self, action):
        self.t += 1
        if self.broken and self.t == 3:
            raise RuntimeError("simulator died")
        return np.full(1, self.t, dtype=np.float32), 1.0, False, self.t >= 5, {}
