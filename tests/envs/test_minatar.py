"""MinAtar's five games as uint8 [C, 10, 10], through the ``minatar`` extra (the test extra installs it)."""
from __future__ import annotations

import sys

import gymnasium as gym
import numpy as np
import pytest

from rlpipe.envs import VectorEnvManager, env_factory
from rlpipe.envs.minatar import MINATAR_GAMES, import_minatar, make_minatar_env
from rlpipe.errors import MissingDependencyError

CHANNELS = {"Asterix": 4, "Breakout": 4, "Freeway": 7, "Seaquest": 10, "SpaceInvaders": 6}


@pytest.mark.parametrize("game", MINATAR_GAMES)
def test_observations_are_the_games_channels_first_as_uint8(game):
    env_id = f"MinAtar/{game}-v1"
    ours = make_minatar_env(env_id)
    import_minatar(env_id)
    raw = gym.make(env_id)
    assert ours.observation_space == gym.spaces.Box(0, 1, (CHANNELS[game], 10, 10), np.uint8)
    assert ours.action_space == raw.action_space
    obs, _ = ours.reset(seed=4)
    raw_obs, _ = raw.reset(seed=4)
    rng = np.random.default_rng(4)
    for _ in range(50):
        assert obs.dtype == np.uint8 and obs.flags.c_contiguous and obs in ours.observation_space
        assert raw_obs.dtype == bool and np.array_equal(obs, raw_obs.transpose(2, 0, 1))
        action = int(rng.integers(ours.action_space.n))
        obs, reward, terminated, truncated, _ = ours.step(action)
        raw_obs, raw_reward, raw_terminated, raw_truncated, _ = raw.step(action)
        assert (reward, terminated, truncated) == (raw_reward, raw_terminated, raw_truncated)
        if terminated:
            obs, _ = ours.reset()
            raw_obs, _ = raw.reset()


def test_all_six_actions_with_v0_and_the_games_own_with_v1():
    assert make_minatar_env("MinAtar/Breakout-v1").action_space == gym.spaces.Discrete(3)
    with pytest.warns(DeprecationWarning):  # gymnasium's note that a v1 exists
        assert make_minatar_env("MinAtar/Breakout-v0").action_space == gym.spaces.Discrete(6)


def test_game_settings_pass_through():
    env = make_minatar_env("MinAtar/Freeway-v1", {"sticky_action_prob": 0.0, "max_episode_steps": 7})
    env.reset(seed=0)
    assert env.unwrapped.game.sticky_action_prob == 0.0
    assert [env.step(0)[3] for _ in range(7)] == [False] * 6 + [True]


def test_a_vector_of_games_is_seeded_and_batched():
    def run() -> list[np.ndarray]:
        env = VectorEnvManager(lambda: make_minatar_env("MinAtar/Asterix-v1"), num_envs=3, seed=1)
        batches = [env.step(env.random_actions())["next_obs"] for _ in range(30)]
        env.close()
        return batches

    first, again = run(), run()
    assert first[0].shape == (3, 4, 10, 10) and first[0].dtype == np.uint8
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))


def test_env_factory_finds_minatar_ids():
    env = env_factory("MinAtar/Breakout-v1")()
    try:
        assert env.action_space == gym.spaces.Discrete(3)
    finally:
        env.close()


def test_a_missing_minatar_package_names_the_extra_in_one_line(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "minatar", None)  # `import minatar` now raises ImportError
    for make in (lambda: env_factory("MinAtar/Breakout-v1"), lambda: make_minatar_env("MinAtar/Breakout-v1")):
        with pytest.raises(MissingDependencyError, match=r"rlpipe\[minatar\]") as err:
            make()
        message = str(err.value)
        assert "\n" not in message and "MinAtar/Breakout-v1" in message and "scripts/setup.sh minatar" in message
