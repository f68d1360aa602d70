"""The VectorEnv protocol: the gymnasium manager implements it, and the collectors and the
evaluator run on any object that does (here a counter in plain numpy, no gymnasium vector env)."""
from __future__ import annotations

from types import SimpleNamespace

import gymnasium as gym
import numpy as np

from rlpipe.envs import VectorEnv, VectorEnvManager, env_factory
from rlpipe.envs.episode_stats import EpisodeStats, FinishedEpisode
from rlpipe.framework import OnlineRLContext
from rlpipe.framework.middleware import StepCollector, evaluate_episodes
from rlpipe.utils.batch import FAILED_STEP


class CounterVectorEnv:
    """``num_envs`` counters, each an episode of ``length`` steps with reward 1 per step; the
    observation is the step within the episode. Implements :class:`VectorEnv` and nothing more."""

    def __init__(self, num_envs: int, length: int) -> None:
        self.num_envs = num_envs
        self.observation_space: gym.Space = gym.spaces.Box(0, length, shape=(1,), dtype=np.float32)
        self.action_space: gym.Space = gym.spaces.Discrete(2)
        self.action_space.seed(0)
        self.episode_stats = EpisodeStats(num_envs)
        self.finished_episodes: list[FinishedEpisode] = []
        self.failed_steps = 0
        self.closed = False
        self._length = length
        self._t = np.zeros(num_envs, dtype=np.int64)
        self.obs = self._observe()

    def _observe(self) -> np.ndarray:
        return self._t.astype(np.float32)[:, None]

    def reset(self, seed: int | None = None) -> np.ndarray:
        self._t[:] = 0
        self.episode_stats.restart()
        self.obs = self._observe()
        return self.obs

    def step(self, action: np.ndarray) -> dict[str, np.ndarray]:
        obs = self.obs
        self._t += 1
        done = self._t >= self._length
        next_obs = self._observe()
        reward = np.ones(self.num_envs, dtype=np.float32)
        self.finished_episodes = self.episode_stats.add(reward, done)
        self._t[done] = 0
        self.obs = self._observe()
        return {"obs": obs, "action": np.asarray(action), "reward": reward, "next_obs": next_obs,
                "terminated": done, "truncated": np.zeros(self.num_envs, dtype=bool),
                "env_id": np.arange(self.num_envs), FAILED_STEP: np.zeros(self.num_envs, dtype=bool)}

    def random_actions(self) -> np.ndarray:
        return np.stack([self.action_space.sample() for _ in range(self.num_envs)])

    def close(self) -> None:
        self.closed = True


class Greedy:
    def forward(self, obs: np.ndarray, **kwargs: object) -> np.ndarray:
        return np.zeros(len(obs), dtype=np.int64)


def test_the_gymnasium_manager_is_a_vector_env():
    env = VectorEnvManager(env_factory("CartPole-v1"), num_envs=2, seed=0)
    try:
        assert isinstance(env, VectorEnv)
    finally:
        env.close()


def test_an_object_missing_a_member_is_not_a_vector_env():
    env = CounterVectorEnv(2, 3)
    assert isinstance(env, VectorEnv)
    del env.failed_steps
    assert not isinstance(env, VectorEnv)


def test_the_step_collector_runs_on_any_vector_env():
    env = CounterVectorEnv(num_envs=2, length=3)
    cfg = SimpleNamespace(policy=SimpleNamespace(collect=SimpleNamespace(n_sample=8)))
    ctx = OnlineRLContext()
    StepCollector(cfg, Greedy(), env)(ctx)
    assert ctx.env_step == 8  # 4 vector steps of 2 envs
    assert ctx.env_episode == 2  # both counters ended an episode at their 3rd step
    assert ctx.trajectories is not None
    assert ctx.trajectories["obs"][:, 0].tolist() == [0, 0, 1, 1, 2, 2]  # the newest vector step is held
    assert ctx.collect_episode_stats == {"episode_return_mean": 3.0, "episode_length_mean": 3.0, "failed_steps": 0}


def test_evaluate_episodes_runs_on_any_vector_env():
    output = evaluate_episodes(Greedy(), CounterVectorEnv(num_envs=2, length=4), n_episode=3)
    assert output["episode_return"].tolist() == [4.0, 4.0, 4.0]
    assert output["episode_length"].tolist() == [4, 4, 4]
