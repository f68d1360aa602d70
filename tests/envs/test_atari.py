"""Atari through make_atari_env: gymnasium's preprocessing and frame stack (each difference shown),
FIRE at reset, training's episodic life and clipped rewards, Pong's stacks and episode ends, and a
one-line error without the ``atari`` extra. The test extra installs ale-py (with its ROMs) and OpenCV."""
from __future__ import annotations

import sys
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

from rlpipe.envs import EnvSettings, VectorEnvManager, env_factory, make_vector_env
from rlpipe.envs.atari import AtariSettings, PressFireOnReset, atari_game, import_atari, make_atari_env
from rlpipe.errors import MissingDependencyError

FIRE = 1  # in the minimal action sets of Pong and Breakout


def _reference(env_id: str, padding: str = "zero", fire_frame: bool = False) -> gym.Env:
    """gymnasium's DQN preprocessing and frame stack over the ALE env; with ``fire_frame``, one frame
    of FIRE after each reset below them (what rlpipe adds in games that have FIRE)."""
    base = gym.make(env_id, frameskip=1, max_num_frames_per_episode=None)
    if fire_frame:
        base = _FireFrameAfterReset(base)
    return FrameStackObservation(AtariPreprocessing(base), 4, padding_type=padding)


class _FireFrameAfterReset(gym.Wrapper):
    def reset(self, **kwargs: Any) -> tuple[np.ndarray, dict[str, Any]]:
        self.env.reset(**kwargs)
        obs, *_, info = self.env.step(FIRE)
        return obs, info


class _RecordActions(gym.Wrapper):
    """Keeps the actions that reach the ALE env."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.actions: list[int] = []

    def step(self, action: int) -> Any:
        self.actions.append(int(action))
        return self.env.step(action)


def _play(env: gym.Env, seed: int, steps: int) -> list[tuple[Any, ...]]:
    """(obs, reward, terminated, truncated) of a reset and ``steps`` seeded random actions."""
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    out: list[tuple[Any, ...]] = [(obs, 0.0, False, False)]
    for _ in range(steps):
        obs, reward, terminated, truncated, _ = env.step(int(rng.integers(env.action_space.n)))
        out.append((obs, float(reward), terminated, truncated))
        if terminated or truncated:
            break
    return out


@pytest.mark.parametrize(("env_id", "has_fire"), [("ALE/MsPacman-v5", False), ("ALE/Pong-v5", True)])
def test_frames_equal_gymnasiums_preprocessing_and_zero_padded_frame_stack(env_id, has_fire):
    """Evaluation env, default settings (sticky actions, up to 30 no-ops), one seed and action
    sequence: every stack, reward and flag as gymnasium's wrappers give them. In a game with FIRE
    the reference needs the one FIRE frame that rlpipe presses after each reset."""
    ours = _play(make_atari_env(env_id), seed=3, steps=300)
    theirs = _play(_reference(env_id, fire_frame=has_fire), seed=3, steps=300)
    assert len(ours) == len(theirs) == 301
    for t, ((obs, *flags), (ref_obs, *ref_flags)) in enumerate(zip(ours, theirs, strict=True)):
        assert obs.dtype == np.uint8 and obs.shape == (4, 84, 84)
        assert np.array_equal(obs, ref_obs) and flags == ref_flags, f"step {t}"
    assert any(reward != 0 for _, reward, *_ in ours)  # the comparison covers rewards too


def test_without_the_fire_frame_a_fire_game_starts_one_frame_apart():
    ours = make_atari_env("ALE/Pong-v5", settings=AtariSettings(noop_max=0))
    plain = AtariPreprocessing(gym.make("ALE/Pong-v5", frameskip=1), noop_max=0)
    assert plain.unwrapped.get_action_meanings()[FIRE] == "FIRE"
    ours.reset(seed=0)
    plain.reset(seed=0)
    assert ours.unwrapped.ale.getEpisodeFrameNumber() == plain.unwrapped.ale.getEpisodeFrameNumber() + 1


def test_gymnasiums_default_reset_padding_differs_only_before_the_first_frame():
    """rlpipe pads an episode's first stacks with zeros (as ale-py's vector env, SB3's VecFrameStack
    and Dopamine do); FrameStackObservation's default repeats the first frame there."""
    ours = _play(make_atari_env("ALE/MsPacman-v5"), seed=1, steps=5)
    theirs = _play(_reference("ALE/MsPacman-v5", padding="reset"), seed=1, steps=5)
    first = ours[0][0][-1]
    for t, ((obs, *_), (ref_obs, *_)) in enumerate(zip(ours, theirs, strict=True)):
        padded = max(0, 3 - t)
        assert np.array_equal(obs[padded:], ref_obs[padded:])
        assert not obs[:padded].any() and all(np.array_equal(frame, first) for frame in ref_obs[:padded])


@pytest.mark.parametrize(("env_id", "pressed"), [("ALE/Breakout-v5", [FIRE]), ("ALE/MsPacman-v5", [])])
def test_fire_is_pressed_for_one_frame_at_reset_in_games_that_have_it(env_id, pressed):
    recorder = _RecordActions(gym.make(env_id, frameskip=1))
    env = PressFireOnReset(recorder)
    env.reset(seed=0)
    assert recorder.actions == pressed
    env.step(0)
    assert recorder.actions == [*pressed, 0]


def test_observation_and_action_spaces():
    env = make_atari_env("ALE/Breakout-v5")
    assert env.observation_space == gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    assert env.action_space == gym.spaces.Discrete(4)
    full = make_atari_env("ALE/Breakout-v5", settings=AtariSettings(full_action_space=True))
    assert full.action_space == gym.spaces.Discrete(18)
    obs, _ = env.reset(seed=0)
    assert obs in env.observation_space and obs.flags.c_contiguous


def test_rgb_array_rendering_gives_the_full_colour_screen():
    env = make_atari_env("ALE/Pong-v5", render_mode="rgb_array")
    env.reset(seed=0)
    frame = env.render()
    assert frame.shape == (210, 160, 3) and frame.dtype == np.uint8 and len(np.unique(frame.reshape(-1, 3), axis=0)) > 2


def test_training_loses_lives_as_episodes_with_clipped_rewards_in_the_same_game():
    """Same seed and actions: the training envs (the family's vector wrappers) play the very game the
    evaluation envs play, end an episode at each lost life with a fresh stack of the current frame
    (the game goes on), and clip MsPacman's 10-point rewards to 1."""
    train = make_vector_env(EnvSettings("ALE/MsPacman-v5", train=True), 1, seed=2)
    play = make_vector_env(EnvSettings("ALE/MsPacman-v5"), 1, seed=2)
    rng = np.random.default_rng(2)
    lives_lost, game_over = 0, False
    try:
        while not game_over:
            action = rng.integers(train.action_space.n, size=1)
            step, played = train.step(action), play.step(action)
            game_over = bool(played["terminated"][0])
            assert np.array_equal(step["next_obs"][0, -1], played["next_obs"][0, -1]) and not step["truncated"][0]
            assert step["reward"][0] == np.sign(played["reward"][0])
            if step["terminated"][0] and not game_over:
                lives_lost += 1
                assert not train.obs[0, :3].any() and np.array_equal(train.obs[0, -1], play.obs[0, -1])
            else:
                assert step["terminated"][0] == game_over
        assert lives_lost == 2  # MsPacman's 3 lives
        assert train.episode_stats.episodes == 3 and play.episode_stats.episodes == 1  # per life, per game
    finally:
        train.close()
        play.close()


def test_pong_stacks_shift_points_are_scored_and_truncated_episodes_start_afresh():
    steps = 150
    factory = lambda: make_atari_env("ALE/Pong-v5", settings=AtariSettings(max_episode_steps=steps))  # noqa: E731
    env = VectorEnvManager(factory, num_envs=2, seed=0)
    try:
        rewards = []
        for t in range(2 * steps + 100):
            obs = env.obs.copy()
            step = env.step(env.random_actions())
            assert np.array_equal(step["obs"], obs)
            assert not step["terminated"].any()  # Pong has no lives to lose
            k = t % steps  # the episode's step
            ended = k == steps - 1
            assert step["truncated"].tolist() == [ended, ended]
            assert np.array_equal(step["next_obs"][:, :3], obs[:, 1:])  # the stack shifts by one frame
            blank = ~step["next_obs"].any(axis=(2, 3))  # Pong's screen is never black: only padding is
            assert blank.sum(axis=1).tolist() == [max(0, 2 - k)] * 2 and not blank[:, 2:].any()
            if ended:  # a new episode: zero padding and the new game's first frame
                assert not env.obs[:, :3].any() and env.obs[:, 3].any(axis=(1, 2)).all()
            else:
                assert np.array_equal(env.obs, step["next_obs"])
            rewards.append(step["reward"])
        assert set(np.unique(rewards)) <= {-1.0, 0.0, 1.0} and (np.asarray(rewards) == -1.0).sum() >= 5
        assert env.episode_stats.summary()["episode_length_mean"] == steps
    finally:
        env.close()


def test_atari_game_names_the_rom_and_rejects_other_ids():
    assert atari_game("ALE/MsPacman-v5") == "ms_pacman"
    with pytest.raises(ValueError, match="'CartPole-v1' is not an ALE game"):
        atari_game("CartPole-v1")


@pytest.mark.parametrize(("module", "package"), [("ale_py", "ale-py"), ("cv2", "opencv-python-headless")])
def test_a_missing_package_names_the_extra_in_one_line(monkeypatch: pytest.MonkeyPatch, module, package):
    monkeypatch.setitem(sys.modules, module, None)  # `import module` now raises ImportError
    for make in (lambda: env_factory("ALE/Pong-v5"), lambda: make_atari_env("ALE/Pong-v5")):
        with pytest.raises(MissingDependencyError, match=r"rlpipe\[atari\]") as err:
            make()
        message = str(err.value)
        assert "\n" not in message and "ALE/Pong-v5" in message and package in message
        assert "scripts/setup.sh atari" in message


def test_env_factory_finds_ale_ids():
    import_atari("ALE/Pong-v5")
    env = env_factory("ALE/Pong-v5")()
    try:
        assert isinstance(env.action_space, gym.spaces.Discrete)
    finally:
        env.close()
