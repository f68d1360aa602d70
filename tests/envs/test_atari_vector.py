"""The ale_vector backend (ale-py's C++ vector env) against the gymnasium backend over make_atari_env,
each inside the wrappers every backend gets (and, for training, the Atari family's life-loss episodes
and clipped rewards): the same transitions where ale-py allows, and each difference shown."""
from __future__ import annotations

import sys

import gymnasium as gym
import numpy as np
import pytest

from rlpipe.envs import EnvSettings, VectorEnv, make_vector_env
from rlpipe.envs.ale_vector import AleVectorEnv
from rlpipe.envs.atari import AtariSettings, import_atari, make_atari_env
from rlpipe.errors import MissingDependencyError
from rlpipe.utils.batch import FAILED_STEP

DETERMINISTIC = AtariSettings(repeat_action_probability=0.0, noop_max=0)
"""No sticky actions, no no-ops: the two backends draw these from different random streams."""
COLUMNS = ("obs", "action", "reward", "next_obs", "terminated", "truncated", "env_id", FAILED_STEP)


def _made(env_id: str, backend: str, train: bool, settings: AtariSettings | None = None, num_envs: int = 2,
          seed: int = 0) -> VectorEnv:
    return make_vector_env(EnvSettings(env_id, backend=backend, family_settings=settings, train=train), num_envs, seed)


def _both(env_id: str, train: bool, settings: AtariSettings, num_envs: int = 2) -> tuple[VectorEnv, VectorEnv]:
    return _made(env_id, "gymnasium", train, settings, num_envs), _made(env_id, "ale_vector", train, settings, num_envs)


@pytest.mark.parametrize("train", [True, False])
def test_the_same_transitions_as_the_python_path_through_lost_lives_and_games(train):
    python, native = _both("ALE/Breakout-v5", train, DETERMINISTIC)
    try:
        assert np.array_equal(python.obs, native.obs)
        rng = np.random.default_rng(0)
        ended = 0
        for t in range(500):
            action = rng.integers(0, 4, size=2)
            ours, theirs = python.step(action), native.step(action)
            assert set(ours) == set(theirs) == set(COLUMNS)
            for key in COLUMNS:
                assert ours[key].dtype == theirs[key].dtype, key
                assert np.array_equal(ours[key], theirs[key]), f"step {t}: {key}"
            assert np.array_equal(python.obs, native.obs), f"step {t}"
            assert [tuple(e) for e in python.finished_episodes] == [tuple(e) for e in native.finished_episodes]
            ended += int(ours["terminated"].sum())
        # lives lost (5 a game) or whole games over: both happened and matched
        assert ended >= (10 if train else 2)
        assert python.episode_stats.summary() == native.episode_stats.summary()
    finally:
        python.close()
        native.close()


def test_at_a_truncation_only_the_newest_frame_of_the_last_stack_differs():
    """ale-py stops a step's frames at the step limit before it takes the last frame's screen, so its
    final stack's newest frame is the max of two older screens; the Python path's is the real one.
    Observations after the reset, rewards and flags agree."""
    python, native = _both("ALE/Pong-v5", True, AtariSettings(repeat_action_probability=0.0, noop_max=0,
                                                               max_episode_steps=40))
    try:
        rng = np.random.default_rng(0)
        truncations = 0
        for _ in range(100):
            action = rng.integers(0, 6, size=2)
            ours, theirs = python.step(action), native.step(action)
            cut = ours["truncated"]
            truncations += int(cut.sum())
            for key in ("obs", "reward", "terminated", "truncated"):
                assert np.array_equal(ours[key], theirs[key])
            assert np.array_equal(ours["next_obs"][~cut], theirs["next_obs"][~cut])
            assert np.array_equal(ours["next_obs"][cut, :3], theirs["next_obs"][cut, :3])
            assert np.array_equal(python.obs, native.obs)
        assert truncations == 4
    finally:
        python.close()
        native.close()


def test_no_ops_and_seeds_are_drawn_differently_by_the_two_backends():
    """The Python path takes 1 to 30 no-op frames after the FIRE frame (AtariPreprocessing's draw
    from gymnasium's seeded stream); ale-py 0 to 29 frames, less the FIRE frame, from its own
    stream seeded ``seed + i``: with no-ops (or sticky actions) one seed starts different games."""
    import_atari("ALE/Breakout-v5")
    from ale_py.vector_env import AtariVectorEnv

    native = AtariVectorEnv("breakout", 4, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    python = make_atari_env("ALE/Breakout-v5")
    native_starts, python_starts = [], []
    for i in range(8):  # seeded once: a seeded reset reloads the ROM (0.2 s an env)
        native_starts += native.reset(seed=0 if i == 0 else None)[1]["episode_frame_number"].tolist()
        for _ in range(4):
            python.reset(seed=0 if i == 0 else None)
            python_starts.append(python.unwrapped.ale.getEpisodeFrameNumber())
    native.close()
    assert native_starts[:4] != python_starts[:4]  # one seed, two different starts
    assert min(native_starts) >= 1 and max(native_starts) <= 29 and len(set(native_starts)) > 10
    assert min(python_starts) >= 2 and max(python_starts) <= 31 and len(set(python_starts)) > 10


def test_seeded_resets_repeat_and_unseeded_ones_go_on():
    env = _made("ALE/Pong-v5", "ale_vector", True, seed=5)
    try:
        actions = [env.random_actions() for _ in range(60)]
        first = [env.step(action)["next_obs"] for action in actions]
        env.reset(5)
        again = [env.step(action)["next_obs"] for action in actions]
        assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
        env.reset()
        other = [env.step(action)["next_obs"] for action in actions]
        assert not all(np.array_equal(a, b) for a, b in zip(first, other, strict=True))
    finally:
        env.close()


def test_the_interface_of_the_vector_env():
    python, native = _both("ALE/Pong-v5", True, AtariSettings(), num_envs=3)
    try:
        assert native.num_envs == 3 and native.observation_space == python.observation_space
        assert native.action_space == python.action_space == gym.spaces.Discrete(6)
        assert np.array_equal(native.random_actions(), python.random_actions())  # one seeded action stream
        assert native.obs.shape == (3, 4, 84, 84) and native.obs.dtype == np.uint8
        step = native.step(native.random_actions())
        assert step["reward"].dtype == np.float32 and not step[FAILED_STEP].any()
        assert native.vector_steps == 1 and native.failed_steps == 0
    finally:
        python.close()
        native.close()


def test_a_missing_ale_py_names_the_extra_in_one_line(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "ale_py", None)
    with pytest.raises(MissingDependencyError, match=r"ale-py package.*rlpipe\[atari\]") as err:
        AleVectorEnv("ALE/Pong-v5", 2)
    assert "\n" not in str(err.value)
