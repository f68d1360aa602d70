"""env_factory: the one place where actions meet an environment's bounds; missing extras in one line."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlpipe.envs import VectorEnvManager, env_factory
from rlpipe.errors import MissingDependencyError


def test_a_bounded_box_action_space_is_rescaled_to_unit_bounds():
    env = env_factory("Pendulum-v1")()
    try:
        assert env.action_space == gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        env.reset(seed=0)
        base = env.unwrapped
        env.step(np.array([1.0], dtype=np.float32))
        assert base.last_u == pytest.approx(2.0)  # the env's own bound: max torque
        env.step(np.array([-0.5], dtype=np.float32))
        assert base.last_u == pytest.approx(-1.0)
    finally:
        env.close()


def test_random_actions_of_a_box_env_are_uniform_in_unit_bounds():
    env = VectorEnvManager(env_factory("Pendulum-v1"), num_envs=4, seed=0)
    try:
        actions = np.concatenate([env.random_actions() for _ in range(200)])
        assert actions.shape == (800, 1) and actions.dtype == np.float32
        assert actions.min() >= -1.0 and actions.max() <= 1.0
        assert actions.min() < -0.9 and actions.max() > 0.9  # the whole range, not the env's [-2, 2]
    finally:
        env.close()


def test_a_discrete_action_space_is_left_alone():
    env = env_factory("CartPole-v1")()
    try:
        assert env.action_space == gym.spaces.Discrete(2)
    finally:
        env.close()


def _needs_missing_package() -> gym.Env:
    raise gym.error.DependencyNotInstalled('MuJoCo is not installed, run `pip install "gymnasium[mujoco]"`')


def _needs_box2d() -> gym.Env:
    raise gym.error.DependencyNotInstalled(
        'Box2D is not installed, you can install it by run `pip install swig` followed by '
        '`pip install "gymnasium[box2d]"`'
    )


def test_a_missing_box2d_says_what_gymnasium_says_and_nothing_of_mujoco():
    gym.register("RlpipeTest/NeedsBox2D-v0", entry_point=_needs_box2d)
    try:
        with pytest.raises(MissingDependencyError) as err:
            env_factory("RlpipeTest/NeedsBox2D-v0")()
        message = str(err.value)
        assert message.endswith('`pip install "gymnasium[box2d]"`)') and "mujoco" not in message.lower()
    finally:
        del gym.registry["RlpipeTest/NeedsBox2D-v0"]


def test_an_env_whose_package_is_missing_names_the_extra_in_one_line():
    gym.register("RlpipeTest/NeedsMujoco-v0", entry_point=_needs_missing_package)
    try:
        with pytest.raises(MissingDependencyError, match=r"rlpipe\[mujoco\]") as err:
            env_factory("RlpipeTest/NeedsMujoco-v0")()
        assert "\n" not in str(err.value) and "RlpipeTest/NeedsMujoco-v0" in str(err.value)
    finally:
        del gym.registry["RlpipeTest/NeedsMujoco-v0"]
