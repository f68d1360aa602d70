"""Learning tests: observation spaces other than a flat ``Box`` train with cartpole-dqn's settings and no
wrapper of the user's: a ``Discrete`` one (FrozenLake), a dict without goals and a 2-D ``Box``
(:mod:`tests.space_envs`). Each reaches its optimal return, 1.0, and the greedy agent keeps it."""
from __future__ import annotations

from collections.abc import Callable
from functools import partial

import gymnasium as gym
import pytest

from rlpipe.config import load_config
from rlpipe.entry import train
from rlpipe.entry.agent import load
from tests import space_envs

pytestmark = pytest.mark.slow

FROZEN_LAKE = ["env.env_id=FrozenLake-v1", "env.env_kwargs={is_slippery: false, map_name: 4x4}", "env.stop_value=1.0"]


def greedy_returns(run_dir, make_env: Callable[[], gym.Env], episodes: int) -> list[float]:
    """The greedy agent's return in ``episodes`` episodes of seeds 0, 1, ...; it takes the env's own observations."""
    agent, env = load(run_dir), make_env()
    returns = []
    for seed in range(episodes):
        obs, _ = env.reset(seed=seed)
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(int(agent.predict(obs)))
            total, done = total + float(reward), terminated or truncated
        returns.append(total)
    return returns


def train_to_optimum(tmp_path, max_env_step: int, env_overrides: list[str]):
    cfg = load_config("cartpole-dqn", ["run.progress=false", "seed=0", f"run.max_env_step={max_env_step}",
                                       *env_overrides])
    summary = train(cfg, tmp_path / "run")
    assert summary.solved, summary
    assert summary.best_eval_return == 1.0
    return tmp_path / "run"


def test_dqn_walks_the_deterministic_frozen_lake_one_hot(tmp_path):
    # with cartpole-dqn's settings (its epsilon schedule included), 1.0 was first reached at
    # 1,056-2,496 env steps over seeds 0-2 (seed 0: 2,496): 8,000 leave a 3x margin
    run_dir = train_to_optimum(tmp_path, 8000, FROZEN_LAKE)
    make_env = partial(gym.make, "FrozenLake-v1", is_slippery=False, map_name="4x4")
    assert greedy_returns(run_dir, make_env, 1) == [1.0]


def test_dqn_reads_a_dict_without_goals_entry_by_entry(tmp_path):
    # 1.0 was first reached at 1,056 / 1,056 / 1,056 / 96 / 1,056 env steps for seeds 0-4 (seed 0: 1,056):
    # 2,200 leave about 2x the slowest
    run_dir = train_to_optimum(tmp_path, 2200, [f"env.env_id=tests.space_envs:{space_envs.DICT_CORRIDOR_ID}",
                                                "env.stop_value=1.0"])
    make_env = partial(gym.make, space_envs.DICT_CORRIDOR_ID)
    assert greedy_returns(run_dir, make_env, 30) == [1.0] * 30  # every target from every start


def test_dqn_reads_a_2d_box_flattened(tmp_path):
    # 1.0 was first reached at 576 / 576 / 576 / 576 / 1,056 env steps for seeds 0-4 (seed 0: 576):
    # 2,200 leave about 2x the slowest
    run_dir = train_to_optimum(tmp_path, 2200, [f"env.env_id=tests.space_envs:{space_envs.GRID_WALK_ID}",
                                                "env.stop_value=1.0"])
    assert greedy_returns(run_dir, partial(gym.make, space_envs.GRID_WALK_ID), 1) == [1.0]
