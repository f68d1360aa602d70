import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from rlpipe.envs.bitflip import ENV_ID, BitFlipEnv, register_envs


def _split(obs: np.ndarray, n_bits: int) -> tuple[np.ndarray, np.ndarray]:
    return obs[:n_bits], obs[n_bits:]


def test_spaces_and_reset_layout():
    env = BitFlipEnv(n_bits=6)
    obs, info = env.reset(seed=3)
    assert env.observation_space.shape == (12,) and env.action_space.n == 6
    assert obs.dtype == np.float32 and obs in env.observation_space
    state, goal = _split(obs, 6)
    assert set(np.unique(obs)) <= {0.0, 1.0}
    assert not np.array_equal(state, goal)
    assert info == {"is_success": False}


def test_passes_gymnasium_env_checker():
    check_env(BitFlipEnv(n_bits=4), skip_render_check=True)


def test_reset_is_deterministic_under_seed():
    a, b = BitFlipEnv(8), BitFlipEnv(8)
    assert np.array_equal(a.reset(seed=11)[0], b.reset(seed=11)[0])
    draws = {a.reset(seed=s)[0].tobytes() for s in range(20)}
    assert len(draws) > 15


def test_goal_never_equals_state_even_for_one_bit():
    env = BitFlipEnv(n_bits=1)
    for seed in range(30):
        state, goal = _split(env.reset(seed=seed)[0], 1)
        assert state[0] != goal[0]


def test_step_flips_one_bit_and_keeps_goal():
    env = BitFlipEnv(n_bits=5)
    obs, _ = env.reset(seed=0)
    nxt, *_ = env.step(2)
    assert np.array_equal(np.flatnonzero(obs[:5] != nxt[:5]), [2])
    assert np.array_equal(obs[5:], nxt[5:])


def test_reaching_the_goal_rewards_and_terminates():
    env = BitFlipEnv(n_bits=7)
    obs, _ = env.reset(seed=5)
    state, goal = _split(obs, 7)
    wrong = np.flatnonzero(state != goal)
    for bit in wrong[:-1]:
        _, reward, terminated, truncated, info = env.step(int(bit))
        assert (reward, terminated, truncated, info["is_success"]) == (0.0, False, False, False)
    _, reward, terminated, truncated, info = env.step(int(wrong[-1]))
    assert (reward, terminated, truncated, info["is_success"]) == (1.0, True, False, True)


def test_truncated_after_n_bits_steps_without_success():
    env = BitFlipEnv(n_bits=6)
    obs, _ = env.reset(seed=1)
    state, goal = _split(obs, 6)
    same = int(np.flatnonzero(state == goal)[0])  # toggling a correct bit never reaches the goal
    flags = [env.step(same)[1:4] for _ in range(6)]
    assert [f[0] for f in flags] == [0.0] * 6
    assert [f[1] for f in flags] == [False] * 6
    assert [f[2] for f in flags] == [False] * 5 + [True]


def test_bad_input_is_one_clear_error():
    with pytest.raises(ValueError, match="n_bits"):
        BitFlipEnv(n_bits=0)
    env = BitFlipEnv(n_bits=3)
    with pytest.raises(RuntimeError, match="before reset"):
        env.step(0)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"outside Discrete\(3\)"):
        env.step(3)


def test_register_envs_is_idempotent_and_makes_the_env():
    register_envs()
    register_envs()
    env = gym.make(ENV_ID, n_bits=4)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (8,)
    assert isinstance(env.unwrapped, BitFlipEnv) and env.unwrapped.n_bits == 4


def test_continuous_actions_flip_every_bit_with_a_positive_component():
    env = BitFlipEnv(n_bits=6, continuous=True)
    check_env(BitFlipEnv(n_bits=4, continuous=True), skip_render_check=True)
    assert env.action_space.shape == (6,) and env.action_space.dtype == np.float32
    obs, _ = env.reset(seed=0)
    nxt, *_ = env.step(np.array([0.5, -0.2, 1.0, 0.0, -1.0, 0.01], dtype=np.float32))
    assert np.array_equal(np.flatnonzero(obs[:6] != nxt[:6]), [0, 2, 5])
    state, goal = _split(nxt, 6)
    _, reward, terminated, _, info = env.step(np.where(state != goal, 1.0, -1.0))  # flip exactly the wrong bits
    assert reward == 1.0 and terminated and info == {"is_success": True}
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"action of shape \(3,\) is not in Box\(-1, 1, \(6,\)\)"):
        env.step(np.zeros(3))
