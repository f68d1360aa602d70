
import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from rlpipe.envs.goal import FlattenGoalObservation, GoalLayout
from rlpipe.reward_model import HerRewardModel
from tests.goal_envs import PointGoalEnv


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


@pytest.mark.parametrize("strategy", ["final", "future", "episode"])
def test_her_relabels_through_the_goal_envs_compute_reward(strategy):
    env = FlattenGoalObservation(PointGoalEnv())
    layout = env.layout
    her = HerRewardModel(
        {"her_strategy": strategy, "her_replay_k": 2},
        merge_func=layout.merge,
        split_func=layout.split,
        goal_reward_func=layout.reward,
        terminal_on_success=False,
    )
    episodes = [_episode(env, seed) for seed in range(3)]
    calls = env.unwrapped.reward_calls
    batch = her.relabel_batch(episodes, np.random.default_rng(0))
    assert env.unwrapped.reward_calls == calls + 1  # one vectorised call for the whole batch
    assert len(batch["obs"]) == 2 * 30
    state, new_goal, _ = layout.split(batch["obs"])
    _, next_goal, next_achieved = layout.split(batch["next_obs"])
    np.testing.assert_array_equal(new_goal, next_goal)
    expected = env.unwrapped.compute_reward(next_achieved, new_goal, {})
    np.testing.assert_array_equal(batch["reward"], expected)
    assert not batch["terminated"].any()
    # rows come episode by episode (10 steps each), copy-major: row r is step r % 10 of episode (r % 30) // 10
    for row, goal in enumerate(new_goal):
        episode, t = (row % 30) // 10, row % 10
        achieved = layout.split(episodes[episode]["next_obs"])[2]  # the goals this episode reached, in order
        np.testing.assert_array_equal(state[row], layout.split(episodes[episode]["obs"])[0][t])
        reached_at = np.flatnonzero((achieved == goal).all(axis=1))
        allowed = {"final": [9], "future": range(t, 10), "episode": range(10)}[strategy]
        assert set(reached_at) & set(allowed), (strategy, row)


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
