"""A crashing environment is recreated; its episode ends truncated and collection goes on."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlpipe.envs import RecreateOnError, VectorEnvManager
from rlpipe.errors import EnvironmentFailedError


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


class ResetCrashy(Crashy):
    """Steps never fail; the first instance's second reset raises, and with ``broken`` every reset."""

    broken = False

    def reset(self, *, seed=None, options=None):
        self.resets = getattr(self, "resets", 0) + 1
        if ResetCrashy.broken or (self.generation == 1 and self.resets == 2):
            raise OSError("simulator lost its window")
        return super().reset(seed=seed, options=options)

    def step(self, action):
        self.t += 1
        return np.array([self.t], dtype=np.float32), 1.0, False, self.t >= 5, {}


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
    assert [bool(s["env_error"][0]) for s in steps] == [False, False, True, False, False]
    np.testing.assert_array_equal(crash["next_obs"], [[2.0]])  # the last good observation
    np.testing.assert_array_equal(steps[3]["obs"], [[0.0]])  # a fresh episode in the new instance
    assert Crashy.instances == 2


def test_an_env_that_keeps_crashing_stops_with_a_clear_error():
    env = RecreateOnError(AlwaysCrashes, max_consecutive_errors=2)
    env.reset()
    env.step(0)
    env.step(0)
    with pytest.raises(EnvironmentFailedError, match="failed 3 times in a row"):
        env.step(0)


def test_a_failed_reset_is_retried_on_a_new_instance():
    env = VectorEnvManager(lambda: RecreateOnError(ResetCrashy), num_envs=1, seed=0)
    steps = [env.step(np.zeros(1, dtype=np.int64)) for _ in range(7)]  # episode ends at 5: auto-reset
    assert [bool(s["truncated"][0]) for s in steps] == [False] * 4 + [True, False, False]
    np.testing.assert_array_equal(steps[5]["obs"], [[0.0]])  # the new instance's first observation
    assert Crashy.instances == 2


def test_an_env_whose_reset_keeps_failing_stops_with_a_clear_error(monkeypatch):
    env = RecreateOnError(ResetCrashy, max_consecutive_errors=2)
    env.reset()
    monkeypatch.setattr(ResetCrashy, "broken", True)
    with pytest.raises(EnvironmentFailedError, match=r"failed 3 times in a row \(last error: OSError"):
        env.reset()
    assert Crashy.instances == 3  # the first, and two replacements that failed too


def test_an_env_that_cannot_be_made_again_stops_with_one_line(monkeypatch):
    from rlpipe.envs import recovery

    monkeypatch.setattr(recovery, "RECREATE_FIRST_PAUSE_S", 0.001)
    made = []

    def make():
        if made:
            raise OSError("simulator licence server unreachable")
        made.append(1)
        return AlwaysCrashes()

    env = RecreateOnError(make)
    env.reset(seed=0)
    with pytest.raises(EnvironmentFailedError) as err:
        env.step(0)
    assert str(err.value) == ("the environment could not be made again after it failed (4 tries; last error: "
                              "OSError('simulator licence server unreachable'))")
