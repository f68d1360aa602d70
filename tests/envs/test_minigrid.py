"""MiniGrid through env_factory: a flat float32 image for MLPs, is_success, the missing extra in one line.

The test extra installs minigrid (scripts/test.sh), so these tests run in CI.
"""
from __future__ import annotations

import sys

import gymnasium as gym
import numpy as np
import pytest

from rlpipe.envs import FlattenMiniGridImage, env_factory
from rlpipe.envs.minigrid import is_minigrid_env
from rlpipe.errors import MissingDependencyError

ENV_ID = "MiniGrid-DoorKey-5x5-v0"


def test_env_factory_gives_a_flat_float32_image_and_discrete_actions():
    env = env_factory(ENV_ID)()
    try:
        assert env.observation_space == gym.spaces.Box(0.0, 1.0, (147,), np.float32)
        assert isinstance(env.action_space, gym.spaces.Discrete)
        obs, _ = env.reset(seed=0)
        assert obs.dtype == np.float32 and obs in env.observation_space
        nxt, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        assert nxt.shape == (147,) and nxt in env.observation_space
        assert (float(reward), terminated, truncated) == (0.0, False, False)  # the goal is behind a locked door
    finally:
        env.close()


def test_the_image_is_scaled_per_channel_without_losing_the_indices():
    raw = gym.make(ENV_ID)
    flat = FlattenMiniGridImage(gym.make(ENV_ID))
    image = raw.reset(seed=5)[0]["image"]
    obs = flat.reset(seed=5)[0]
    assert obs.max() <= 1.0 and obs.max() > 0.5  # walls (object 2) and the agent's view are in
    assert np.array_equal(np.rint(obs.reshape(7, 7, 3) * [10, 5, 3]).astype(np.uint8), image)


def test_only_minigrid_envs_are_detected():
    assert is_minigrid_env(gym.make(ENV_ID))
    assert not is_minigrid_env(gym.make("CartPole-v1"))


def test_a_missing_minigrid_package_names_the_extra_in_one_line(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "minigrid", None)  # `import minigrid` now raises ImportError
    with pytest.raises(MissingDependencyError, match=r"rlpipe\[minigrid\]") as err:
        env_factory(ENV_ID)
    message = str(err.value)
    assert "\n" not in message and ENV_ID in message and "scripts/setup.sh minigrid" in message


def test_reaching_the_goal_is_reported_as_success():
    env = env_factory("MiniGrid-Empty-5x5-v0")()  # agent at (1, 1) facing right, goal at (3, 3)
    try:
        env.reset(seed=0)
        forward, right = 2, 1
        flags = []
        for action in (forward, forward, right, forward, forward):
            _, reward, terminated, _, info = env.step(action)
            flags.append(info["is_success"])
        assert flags == [False, False, False, False, True] and terminated and float(reward) > 0
    finally:
        env.close()
