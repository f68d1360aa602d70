"""Atari 2600 games (``ALE/<Game>-v5``, the optional ``atari`` extra) with the standard DQN preprocessing.

:func:`make_atari_env` builds one env from gymnasium's ALE env (made with ``frameskip=1``) and
gymnasium's own wrappers where they do the job:

- :class:`PressFireOnReset` (ours): one frame of ``FIRE`` right after each game reset, in games
  whose action set has ``FIRE`` (Breakout, Pong, ...), which need it to launch the ball;
- ``AtariPreprocessing``: up to ``noop_max`` no-op frames at reset, frame skip 4 with a max over
  the last two frames, 84x84 grayscale;
- for training (vector wrappers of both backends, :func:`training_episodes`): a lost life ends
  the episode, not the game (:class:`~rlpipe.envs.vector_wrappers.LifeLossEpisodes`), rewards
  clipped to [-1, 1];
- ``FrameStackObservation``: the last 4 frames, zero-padded at an episode's start
  (``uint8 [4, 84, 84]``, oldest first).

The same observations come from ale-py's native vector env (:mod:`rlpipe.envs.ale_vector`),
whose C++ preprocessing these choices follow: FIRE before the no-ops, zero padding, and a life
loss that ends a training episode without resetting the game. Where the two differ (the no-op
count and its random stream) is said in :mod:`rlpipe.envs.ale_vector`.

Nothing here imports ``ale_py`` at module import: rlpipe works without the extra.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation, TimeLimit

from rlpipe.envs.errors import EnvSettingError
from rlpipe.envs.families import EnvFamily, MakeEnv, install_hint
from rlpipe.envs.protocol import CoreVectorEnv
from rlpipe.envs.vector_wrappers import ClipRewards, LifeLossEpisodes
from rlpipe.errors import MissingDependencyError

ATARI_ID_PREFIXES = ("ALE/",)
"""The ids of ale-py's games (gymnasium loads no plugins: importing ``ale_py`` registers them)."""
INSTALL_HINT = install_hint("atari")
FRAME_SKIP = 4
"""Frames each action is repeated for; an observation is the max over the last two."""
SCREEN_SIZE = 84
FRAME_STACK = 4
FIRE = "FIRE"
PACKAGES = {"ale_py": "ale-py", "cv2": "opencv-python-headless"}
"""The modules the extra installs, and their packages' names."""

__all__ = [
    "ATARI_FAMILY",
    "ATARI_ID_PREFIXES",
    "FRAME_STACK",
    "AtariSettings",
    "PressFireOnReset",
    "atari_game",
    "import_atari",
    "make_atari_env",
]


@dataclass(frozen=True)
class AtariSettings:
    """What a run may choose about its Atari games (both backends take it), with the ALE's defaults."""

    repeat_action_probability: float = 0.25
    """Sticky actions: the chance that the ALE repeats the previous action at each frame (Machado
    et al. 2018 recommend 0.25, ALE v5's default); 0 makes a game deterministic given its no-ops."""
    full_action_space: bool = False
    """All 18 joystick actions instead of the game's own set."""
    noop_max: int = 30
    """Most no-op frames at a game's start (Mnih et al. 2015), for varied starts."""
    max_episode_steps: int = 27_000
    """Steps (of 4 frames) after which a game is truncated: 27,000 is ALE v5's 108,000 frames."""


def import_atari(env_id: str) -> None:
    """Import ``ale_py`` and register its envs with gymnasium; ``env_id`` is for the message.

    Also checks for OpenCV, which gymnasium's ``AtariPreprocessing`` resizes frames with. Without
    either: a one-line :class:`MissingDependencyError` naming the extra to install.
    """
    try:
        import ale_py
        import cv2  # noqa: F401 (AtariPreprocessing imports it on first use)
    except ImportError as err:
        package = PACKAGES.get(err.name or "", "ale-py")
        raise MissingDependencyError(
            f"env '{env_id}' needs the {package} package, which is not installed; "
            f"Atari envs need the extra: {INSTALL_HINT}"
        ) from None
    gym.register_envs(ale_py)


def atari_game(env_id: str) -> str:
    """The ROM name of an ``ALE/<Game>-v5`` id (``"ALE/MsPacman-v5"`` -> ``"ms_pacman"``), as ale-py's
    vector env wants it; a one-line error for an id that is not an ALE game."""
    import_atari(env_id)
    spec = gym.registry.get(env_id)
    game = None if spec is None else spec.kwargs.get("game")
    if not isinstance(game, str):
        raise ValueError(f"env '{env_id}' is not an ALE game (expected an id like 'ALE/Pong-v5')")
    return game


class PressFireOnReset(gym.Wrapper[np.ndarray, int, np.ndarray, int]):
    """After each reset, one frame of ``FIRE`` (the ALE env below must have ``frameskip=1``).

    Games such as Breakout wait for ``FIRE`` before play starts; an agent that has not yet
    learnt to press it wastes its episodes. One frame before the no-ops, as ale-py's vector env
    does (``use_fire_reset``), so both backends start games alike. Our own wrapper: gymnasium
    has none.
    """

    def __init__(self, env: gym.Env[np.ndarray, int]) -> None:
        super().__init__(env)
        meanings = env.unwrapped.get_action_meanings()  # type: ignore[attr-defined]
        self._fire = meanings.index(FIRE) if FIRE in meanings else None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        if self._fire is None:
            return obs, info
        obs, _, _, _, step_info = self.env.step(self._fire)  # one frame cannot end a game that just began
        return obs, {**info, **step_info}


def make_atari_env(
    env_id: str, *, settings: AtariSettings | None = None, render_mode: str | None = None
) -> gym.Env[np.ndarray, int]:
    """One ALE game with the DQN preprocessing; observations ``uint8 [4, 84, 84]``, oldest frame first.

    Episodes are whole games with their real scores; for training, the vector wrappers of
    :data:`ATARI_FAMILY` end an episode at each lost life and clip rewards (for both backends).
    ``settings``: sticky actions, action set, no-ops, step limit (:class:`AtariSettings`).
    ``render_mode="rgb_array"`` lets ``render()`` give the full-colour screen (for videos).
    The step limit is gymnasium's ``TimeLimit`` below the frame stack, so it counts a whole
    game's steps, and not the no-op frames, as ale-py's vector env does.
    """
    settings = settings or AtariSettings()
    atari_game(env_id)  # imports ale-py and checks the id
    env: gym.Env[Any, Any] = gym.make(
        env_id,
        frameskip=1,
        repeat_action_probability=settings.repeat_action_probability,
        full_action_space=settings.full_action_space,
        max_num_frames_per_episode=None,  # no limit in the ALE: TimeLimit below counts steps
        render_mode=render_mode,
    )
    env = PressFireOnReset(env)
    env = AtariPreprocessing(env, noop_max=settings.noop_max, frame_skip=FRAME_SKIP, screen_size=SCREEN_SIZE)
    env = TimeLimit(env, settings.max_episode_steps)
    return FrameStackObservation(env, FRAME_STACK, padding_type="zero")


def _make_for_family(spec: MakeEnv) -> gym.Env[np.ndarray, int]:
    """The family's maker: an ALE game's settings come from ``env.atari``, not from ``env_kwargs``
    (only ``render_mode`` passes) or ``env.max_episode_steps``."""
    if spec.max_episode_steps is not None:
        raise EnvSettingError(f"env '{spec.env_id}' counts its step limit in atari.max_episode_steps",
                              "max_episode_steps")
    unread = sorted(set(spec.kwargs) - {"render_mode"})
    if unread:
        raise EnvSettingError(f"env '{spec.env_id}' takes its settings from atari (sticky actions, action set, "
                              f"no-ops, step limit), not from {unread}", "env_kwargs")
    return make_atari_env(spec.env_id, settings=spec.settings, render_mode=spec.kwargs.get("render_mode"))


def training_episodes(env: CoreVectorEnv) -> CoreVectorEnv:
    """An ALE game's training envs: a lost life ends the episode (DQN's episodic life), rewards clipped."""
    return ClipRewards(LifeLossEpisodes(env, FRAME_STACK), -1.0, 1.0)


ATARI_FAMILY = EnvFamily(
    "atari", ATARI_ID_PREFIXES, extra="atari", importer=import_atari, maker=_make_for_family, settings=AtariSettings,
    native_backends=("ale_vector",), frame_stacks=True, train_wrappers=training_episodes,
)
"""ALE games: the DQN preprocessing (training envs end episodes at a lost life and clip rewards),
stepped by gymnasium's vector envs or ale-py's own; their frame stacks kept once in the buffer."""
