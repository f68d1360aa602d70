"""Gymnasium-Robotics through the ``robotics`` extra: Fetch and PointMaze made and flattened,
and one-line errors without the package or with a mujoco it does not work with."""
from __future__ import annotations

import sys

import mujoco
import numpy as np
import pytest

from rlpipe.envs import env_factory, find_goal_layout
from rlpipe.envs.robotics import check_mujoco_version
from rlpipe.errors import MissingDependencyError
from tests.cli_errors import one_line_error


def test_fetch_reach_is_a_flattened_goal_env_relabelled_through_its_own_reward():
    env = env_factory("FetchReach-v4")()
    obs, _ = env.reset(seed=0)
    assert obs.shape == (16,) and env.action_space.shape == (4,)  # 10 + 3 + 3
    *_, terminated, _, info = env.step(env.action_space.sample())
    assert "is_success" in info and not terminated
    layout = find_goal_layout(env)
    achieved = np.array([[1.3, 0.7, 0.5], [1.3, 0.7, 0.5]])
    desired = np.array([[1.3, 0.7, 0.52], [1.5, 0.7, 0.5]])
    np.testing.assert_array_equal(layout.reward(achieved, desired), [0.0, -1.0])  # 5 cm threshold
    env.close()


def test_point_maze_reports_success_under_its_own_info_key():
    env = env_factory("PointMaze_UMaze-v3")()
    obs, _ = env.reset(seed=0)
    assert obs.shape == (8,) and env.action_space.shape == (2,)
    assert "success" in env.step(env.action_space.sample())[-1]
    env.close()


@pytest.mark.parametrize("version", ["4.0.1", "3.13.0", "3.1.6"])
def test_a_mujoco_outside_the_working_range_is_named(version):
    with pytest.raises(MissingDependencyError, match=rf"needs mujoco>=3.2,<3.11 .*mujoco {version} is installed"):
        check_mujoco_version(version, "FetchReach-v4")
    check_mujoco_version("3.10.0", "FetchReach-v4")



def test_a_fetch_preset_with_an_incompatible_mujoco_is_one_line(capsys, monkeypatch):
    monkeypatch.setattr(mujoco, "__version__", "4.0.1")
    err = one_line_error(capsys, ["train", "fetchreach-sac-her", "run.max_env_step=1000"])
    assert "env 'FetchReach-v4' needs mujoco>=3.2,<3.11" in err and "rlpipe[robotics]" in err


def test_a_fetch_preset_without_the_extra_is_one_line(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "gymnasium_robotics", None)  # what an uninstalled package imports as
    err = one_line_error(capsys, ["train", "fetchreach-sac-her", "run.max_env_step=1000"])
    assert "env 'FetchReach-v4' needs the gymnasium-robotics package" in err and "scripts/setup.sh robotics" in err
