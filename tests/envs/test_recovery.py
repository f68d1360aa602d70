"""A crashing environment is recreated; its episode ends truncated and collection goes on."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlpipe.envs import RecreateOnError, VectorEnvManager


class Crashy(gym.Env):
    """Counts up; the first instance raises on its 3rd step, later instances never."""

    instances = 0

    def __init__(self) -> None:
        Crashy.instances += 1
        self.generation = Crashy.instances
        self.observation_space = gym.spaces.Box(0, 100, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.array([0.0], dtype=np.float32), {}

    def step(self, action):
        self.t += 1
        if self.generation == 1 and self.t == 3:
            raise RuntimeError("simulator died")
        return np.array([self.t], dtype=np.float32), 1.0, False, self.t >= 5, {}


class AlwaysCrashes(Crashy):
    def step(self, action):
        raise RuntimeError("broken for good")


@pytest.fixture(autouse=True)
def reset_count():
    Crashy.instances = 0


def test_crash_truncates_the_episode_and_recreates_the_env():
    env = VectorEnvManager(lambda: RecreateOnError(Crashy), num_envs=1, seed=0)
    steps = [env.step(np.zeros(1, dtype=np.int64)) for _ in range(5)]
    truncated = [bool(s["truncated"][0]) for s in steps]
    assert truncated == [False, False, True, False, False]
    crash = steps[2]
    assert crash["reward"][0] == 0.0 and not crash["terminated"][0]
    np.testing.assert_array_equal(crash["next_obs"], [[2.0]])  # the last good observation
    np.testing.assert_array_equal(steps[3]["obs"], [[0.0]])  # a fresh episode in the new instance
    assert Crashy.instances == 2


def test_an_env_that_keeps_crashing_stops_with_a_clear_error():
    env = RecreateOnError(AlwaysCrashes, max_consecutive_errors=2)
    env.reset()
    env.step(0)
    env.step(0)
    with pytest.raises(RuntimeError, match="failed 3 times in a row"):
        env.step(0)
