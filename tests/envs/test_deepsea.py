import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import rlpipe.envs
from rlpipe.envs.deepsea import ENV_ID, DeepSeaEnv, register_envs


def _run(env: DeepSeaEnv, choose) -> tuple[float, list[tuple[float, bool, bool, bool]]]:
    """Play one episode with ``choose(row, col) -> action``; the return and each step's flags."""
    env.reset(seed=0)
    row, col, total, flags = 0, 0, 0.0, []
    while True:
        action = choose(row, col)
        obs, reward, terminated, truncated, info = env.step(action)
        total += reward
        flags.append((reward, terminated, truncated, info["is_success"]))
        if terminated or truncated:
            return total, flags
        row, col = divmod(int(np.flatnonzero(obs)[0]), env.size)


def test_spaces_and_reset_observation():
    env = DeepSeaEnv(size=5)
    obs, info = env.reset(seed=3)
    assert env.observation_space.shape == (25,) and env.action_space == gym.spaces.Discrete(2)
    assert obs.dtype == np.float32 and obs in env.observation_space
    assert np.array_equal(np.flatnonzero(obs), [0]) and obs[0] == 1.0
    assert info == {"is_success": False}


def test_passes_gymnasium_env_checker():
    check_env(DeepSeaEnv(size=4), skip_render_check=True)


def test_optimal_actions_return_one_minus_move_cost_in_size_steps():
    env = DeepSeaEnv(size=8, mapping_seed=4, move_cost=0.02)
    total, flags = _run(env, lambda row, col: int(env.right_action[row, col]))
    assert total == pytest.approx(1.0 - 0.02)
    assert len(flags) == 8
    assert [f[0] for f in flags[:-1]] == pytest.approx([-0.02 / 8] * 7)
    assert [f[1] for f in flags] == [False] * 7 + [True]
    assert [f[2] for f in flags] == [False] * 8
    assert [f[3] for f in flags] == [False] * 7 + [True]


def test_always_left_returns_zero_and_terminates_after_size_steps():
    env = DeepSeaEnv(size=6)
    total, flags = _run(env, lambda row, col: 1 - int(env.right_action[row, col]))
    assert total == 0.0
    assert [f[1:] for f in flags] == [(False, False, False)] * 5 + [(True, False, False)]


def test_one_left_misses_the_treasure_and_only_pays_for_the_rights():
    env = DeepSeaEnv(size=5, move_cost=0.1)
    total, flags = _run(env, lambda row, col: int(env.right_action[row, col]) ^ (row == 2))
    assert total == pytest.approx(-4 * 0.1 / 5)
    assert flags[-1][1:] == (True, False, False)


def test_observation_is_the_one_hot_cell_then_zeros_after_the_last_step():
    env = DeepSeaEnv(size=4, mapping_seed=2)
    env.reset(seed=0)
    table = env.right_action
    obs, *_ = env.step(int(table[0, 0]))  # right: row 1, col 1
    assert np.array_equal(np.flatnonzero(obs), [1 * 4 + 1])
    obs, *_ = env.step(1 - int(table[1, 1]))  # left: row 2, col 0
    assert np.array_equal(np.flatnonzero(obs), [2 * 4 + 0])
    obs, *_ = env.step(1 - int(table[2, 0]))  # left at the wall stays: row 3, col 0
    assert np.array_equal(np.flatnonzero(obs), [3 * 4 + 0])
    obs, _, terminated, *_ = env.step(0)
    assert terminated and not obs.any() and obs.shape == (16,)


def test_the_action_table_is_the_problem_instance():
    a, b, other = DeepSeaEnv(10, mapping_seed=0), DeepSeaEnv(10, mapping_seed=0), DeepSeaEnv(10, mapping_seed=1)
    assert a.right_action.shape == (10, 10) and set(np.unique(a.right_action)) == {0, 1}
    assert np.array_equal(a.right_action, b.right_action)
    assert not np.array_equal(a.right_action, other.right_action)
    before = a.right_action.copy()
    a.reset(seed=123)
    b.reset(seed=7)
    assert np.array_equal(a.right_action, before) and np.array_equal(b.right_action, before)


def test_bad_input_is_one_clear_error():
    for size in (1, 0, 2.5, True):
        with pytest.raises(ValueError, match="size"):
            DeepSeaEnv(size=size)
    with pytest.raises(ValueError, match="move_cost"):
        DeepSeaEnv(move_cost=-0.1)
    env = DeepSeaEnv(size=2)
    with pytest.raises(RuntimeError, match="before reset"):
        env.step(0)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"outside Discrete\(2\)"):
        env.step(2)
    env.step(0)
    env.step(0)
    with pytest.raises(RuntimeError, match="episode ended"):
        env.step(0)


def test_register_envs_is_idempotent_and_makes_the_env():
    register_envs()
    rlpipe.envs.register_envs()
    env = gym.make(ENV_ID, size=20)
    obs, _ = env.reset(seed=0)
    assert ENV_ID == "rlpipe/DeepSea-v0" and obs.shape == (400,)
    assert isinstance(env.unwrapped, DeepSeaEnv) and env.unwrapped.size == 20
