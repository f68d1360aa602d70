from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from rlpipe.envs.goal import FlattenGoalObservation, GoalLayout
from rlpipe.reward_model import HerRewardModel


class PointGoalEnv(gym.Env):
    """A point on a plane that must reach a target: the smallest dict-observation goal env.

    observation = (x, y, step fraction), achieved_goal = (x, y), desired_goal = the target.
    The reward follows the robotics convention: 0 within 0.1 of the target, else -1.
    """

    def __init__(self) -> None:
        box2 = spaces.Box(-5.0, 5.0, shape=(2,), dtype=np.float32)
        self.observation_space = spaces.Dict(
            {
                "observation": spaces.Box(-5.0, 5.0, shape=(3,), dtype=np.float32),
                "achieved_goal": box2,
                "desired_goal": box2,
            }
        )
        self.action_space = spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)
        self.reward_calls = 0

    def compute_reward(self, achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Any) -> np.ndarray:
        self.reward_calls += 1
        distance = np.linalg.norm(achieved_goal - desired_goal, axis=-1)
        return -(distance > 0.1).astype(np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._pos = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        self._target = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        self._t = 0
        return self._obs(), {}

    def step(self, action):
        self._pos = np.clip(self._pos + 0.2 * np.asarray(action, dtype=np.float32), -5, 5).astype(np.float32)
        self._t += 1
        reward = float(self.compute_reward(self._pos, self._target, {}))
        return self._obs(), reward, False, self._t >= 10, {}

    def _obs(self):
        return {
            "observation": np.array([*self._pos, self._t / 10], dtype=np.float32),
            "achieved_goal": self._pos.copy(),
            "desired_goal": self._target.copy(),
        }


def _episode(env: gym.Env, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    rows = []
    done = False
    while not done:
        nxt, reward, terminated, truncated, _ = env.step(rng.uniform(-1, 1, 2))
        rows.append((obs, reward, nxt, terminated, truncated))
        obs, done = nxt, terminated or truncated
    o, r, n, te, tr = zip(*rows, strict=True)
    return {
        "obs": np.stack(o),
        "action": np.zeros(len(rows), dtype=np.int64),
        "reward": np.array(r, dtype=np.float32),
        "next_obs": np.stack(n),
        "terminated": np.array(te),
        "truncated": np.array(tr),
    }


def test_wrapper_flattens_in_documented_layout():
    env = FlattenGoalObservation(PointGoalEnv())
    obs, _ = env.reset(seed=0)
    raw = env.unwrapped._obs()
    assert env.observation_space.shape == (7,) and env.observation_space.dtype == np.float32
    assert obs.dtype == np.float32 and obs in env.observation_space
    expected = np.concatenate([raw["observation"], raw["achieved_goal"], raw["desired_goal"]])
    np.testing.assert_array_equal(obs, expected)
    assert env.layout == GoalLayout(3, 2, env.layout.compute_reward) and env.layout.size == 7


def test_unflatten_split_merge_round_trip():
    env = FlattenGoalObservation(PointGoalEnv())
    layout = env.layout
    x = np.random.default_rng(0).normal(size=(4, 7)).astype(np.float32)
    parts = layout.unflatten(x)
    np.testing.assert_array_equal(layout.flatten(parts), x)
    state, desired, achieved = layout.split(x)
    np.testing.assert_array_equal(achieved, parts["achieved_goal"])
    np.testing.assert_array_equal(desired, parts["desired_goal"])
    np.testing.assert_array_equal(layout.merge(state, desired), x)
    new = layout.merge(state, achieved)
    np.testing.assert_array_equal(layout.unflatten(new)["desired_goal"], parts["achieved_goal"])


def test_reward_goes_through_the_envs_compute_reward_batched():
    env = FlattenGoalObservation(PointGoalEnv())
    achieved = np.array([[0.0, 0.0], [1.0, 1.0], [0.05, 0.0]], dtype=np.float32)
    desired = np.zeros((3, 2), dtype=np.float32)
    reward = env.layout.reward(achieved, desired)
    assert reward.dtype == np.float32
    np.testing.assert_array_equal(reward, [0.0, -1.0, 0.0])
    assert env.unwrapped.reward_calls == 1  # one vectorised call for the whole batch


def test_her_relabels_through_the_goal_env():
    env = FlattenGoalObservation(PointGoalEnv())
    layout = env.layout
    her = HerRewardModel(
        {"her_strategy": "future", "her_replay_k": 2},
        merge_func=layout.merge,
        split_func=layout.split,
        goal_reward_func=layout.reward,
        terminal_on_success=False,
    )
    episodes = [_episode(env, seed) for seed in range(3)]
    batch = her.relabel_batch(episodes, np.random.default_rng(0))
    assert len(batch["obs"]) == 2 * 30
    _, new_goal, _ = layout.split(batch["obs"])
    _, next_goal, next_achieved = layout.split(batch["next_obs"])
    np.testing.assert_array_equal(new_goal, next_goal)
    achieved_pool = np.concatenate([layout.split(ep["next_obs"])[2] for ep in episodes])
    assert all((achieved_pool == goal).all(axis=1).any() for goal in new_goal)
    expected = env.unwrapped.compute_reward(next_achieved, new_goal, {})
    np.testing.assert_array_equal(batch["reward"], expected)
    assert (batch["reward"] == 0.0).sum() >= 60 // 10  # a goal taken at t itself is always reached
    assert not batch["terminated"].any()


def test_bad_goal_envs_and_sizes_are_one_clear_error():
    env = PointGoalEnv()
    env.observation_space = spaces.Box(0, 1, shape=(3,))
    with pytest.raises(ValueError, match="Dict observation space"):
        FlattenGoalObservation(env)

    class NoRewardEnv(gym.Env):
        observation_space = PointGoalEnv().observation_space
        action_space = spaces.Discrete(2)

    with pytest.raises(ValueError, match="has no compute_reward"):
        FlattenGoalObservation(NoRewardEnv())

    uneven = PointGoalEnv()
    uneven.observation_space = spaces.Dict(
        {**uneven.observation_space.spaces, "desired_goal": spaces.Box(-5, 5, shape=(3,), dtype=np.float32)}
    )
    with pytest.raises(ValueError, match="achieved_goal has size 2 but desired_goal has size 3"):
        FlattenGoalObservation(uneven)
    flat_only = PointGoalEnv()
    flat_only.observation_space = spaces.Dict(
        {
            **flat_only.observation_space.spaces,
            "observation": spaces.Box(0, 1, shape=(2, 2), dtype=np.float32),
        }
    )
    with pytest.raises(ValueError, match="'observation' must be a 1-D Box"):
        FlattenGoalObservation(flat_only)

    layout = FlattenGoalObservation(PointGoalEnv()).layout
    with pytest.raises(ValueError, match=r"last axis must be 7 \(observation 3"):
        layout.split(np.zeros((2, 6), dtype=np.float32))
