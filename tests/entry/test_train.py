"""Whole pipelines from a config: a dict-observation goal env trains with HER end to end."""
from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from rlpipe.config import load_config
from rlpipe.entry import train
from rlpipe.envs import VectorEnvManager, env_factory, find_goal_layout
from rlpipe.framework import OnlineRLContext
from rlpipe.framework.middleware import EpisodeCollector
from rlpipe.recipes.build import build_parts
from rlpipe.utils.metrics import read_metrics
from tests.goal_envs import POINT_ID

GRID_ID = "rlpipe-test/GridGoal-v0"


class GridGoalEnv(gym.Env):
    """Walk on a 5x5 grid to a target cell; robotics-style reward (0 on target, else -1), never terminates."""

    batched_reward_calls: ClassVar[int] = 0  # calls on a batch of goals: HER relabelling, not env steps
    MOVES = np.array([[1, 0], [-1, 0], [0, 1], [0, -1]], dtype=np.float32)

    def __init__(self) -> None:
        cell = spaces.Box(0.0, 4.0, shape=(2,), dtype=np.float32)
        self.observation_space = spaces.Dict({"observation": cell, "achieved_goal": cell, "desired_goal": cell})
        self.action_space = spaces.Discrete(4)

    def compute_reward(self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Any) -> np.ndarray:
        if np.ndim(achieved_goal) > 1:
            GridGoalEnv.batched_reward_calls += 1
        return -np.any(achieved_goal != desired_goal, axis=-1).astype(np.float32)

    def reset(self, *, seed: int | None = None, options: Any = None):
        super().reset(seed=seed)
        self._pos = self.np_random.integers(0, 5, 2).astype(np.float32)
        self._target = self.np_random.integers(0, 5, 2).astype(np.float32)
        self._t = 0
        return self._obs(), {}

    def step(self, action):
        self._pos = np.clip(self._pos + self.MOVES[int(action)], 0, 4)
        self._t += 1
        return self._obs(), float(self.compute_reward(self._pos, self._target, {})), False, self._t >= 8, {}

    def _obs(self):
        return {"observation": self._pos.copy(), "achieved_goal": self._pos.copy(), "desired_goal": self._target.copy()}


if GRID_ID not in gym.registry:
    gym.register(GRID_ID, entry_point=GridGoalEnv)


def test_goal_env_is_flattened_by_the_factory():
    env = VectorEnvManager(env_factory(GRID_ID), num_envs=2, seed=0)
    assert env.observation_space.shape == (6,)
    assert find_goal_layout(env_factory(GRID_ID)()) is not None
    env.close()


def test_her_pipeline_relabels_through_the_envs_compute_reward(tmp_path):
    cfg = load_config({
        "env": {"env_id": GRID_ID, "collector_env_num": 2, "evaluator_env_num": 2, "n_evaluator_episode": 2,
                "stop_value": 0.0},
        "policy": {"collect": {"n_episode": 2}, "learn": {"update_per_collect": 2, "batch_size": 8},
                   "other": {"her": {"her_strategy": "future", "episode_size": 4}}},
        "run": {"max_env_step": 200, "progress": False, "stop_on_solve": False},
    })
    calls_before = GridGoalEnv.batched_reward_calls
    summary = train(cfg, tmp_path / "run")
    assert summary.env_step >= 200 and summary.train_iter > 0
    assert GridGoalEnv.batched_reward_calls - calls_before >= summary.train_iter  # one per relabelled batch


POINT_SAC_HER = {
    "env": {"env_id": POINT_ID, "collector_env_num": 2, "evaluator_env_num": 2, "n_evaluator_episode": 4,
            "stop_value": 1.1},
    "policy": {"type": "sac", "model": {"encoder_hidden_size_list": [16, 16], "obs_norm": True},
               "collect": {"n_episode": 2}, "learn": {"update_per_collect": 4, "target_theta": 0.005},
               "eval": {"evaluator": {"eval_freq": 8}},
               "other": {"her": {"her_strategy": "future", "episode_size": 4, "relabel_prob": 0.8}}},
    "run": {"max_env_step": 200, "progress": False},
}


def test_a_continuous_goal_env_gives_flat_episodes_with_box_actions():
    with build_parts(load_config(POINT_SAC_HER)) as parts:
        assert parts.cfg.env.eval_metric == "success_rate"  # auto, on a goal env
        collector = EpisodeCollector(parts.cfg, parts.policy.collect_mode, parts.collector_env)
        ctx = OnlineRLContext()
        collector(ctx)
    assert len(ctx.episodes) >= 2
    for episode in ctx.episodes:
        assert episode["obs"].shape == (10, 7) and episode["next_obs"].shape == (10, 7)  # 3 + 2 + 2
        assert episode["action"].shape == (10, 2) and np.abs(episode["action"]).max() <= 1.0
        assert episode["truncated"][-1] and not episode["terminated"].any()


@pytest.mark.parametrize("policy_type", ["sac", "td3", "ddpg"])
def test_her_trains_an_actor_critic_on_a_continuous_goal_env_judged_by_success(tmp_path, policy_type):
    summary = train(load_config(POINT_SAC_HER, [f"policy.type={policy_type}"]), tmp_path / "run")
    assert summary.env_step >= 200 and summary.train_iter > 0
    assert summary.eval_metric == "success_rate"
    evals = [r for r in read_metrics(tmp_path / "run") if r["kind"] == "eval"]
    assert evals and all(0.0 <= r["success_rate"] <= 1.0 and r["return_mean"] <= 0.0 for r in evals)
    assert summary.best_eval_return == max(r["success_rate"] for r in evals)


def test_training_runs_on_subprocess_environments_with_a_step_timeout(tmp_path):
    cfg = load_config(
        "cartpole-dqn",
        ["env.asynchronous=true", "env.step_timeout=30", "env.collector_env_num=2", "env.evaluator_env_num=2",
         "env.n_evaluator_episode=2", "run.max_env_step=200", "run.progress=false", "policy.collect.n_sample=20",
         "policy.learn.batch_size=16", "policy.eval.evaluator.eval_freq=5"],
    )
    summary = train(cfg, tmp_path / "run")
    assert summary.env_step >= 200 and summary.train_iter > 0
