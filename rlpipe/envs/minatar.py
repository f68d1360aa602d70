"""MinAtar (Young & Tian 2019): five 10x10 Atari-like games, the optional ``minatar`` extra.

The ``minatar`` package registers ``MinAtar/<Game>-v0`` (all 6 actions) and
``MinAtar/<Game>-v1`` (the game's own action set) for Asterix, Breakout, Freeway, Seaquest and
SpaceInvaders, once :func:`import_minatar` has run. Its observations are ``bool [10, 10, C]``
(one channel per kind of object); :class:`MinAtarChannelsFirst` makes them ``uint8 [C, 10, 10]``,
the layout and dtype rlpipe's image encoders and frame buffers take. The games' own settings
(``sticky_action_prob``, 0.1 by default; ``difficulty_ramping``, on) pass through ``env_kwargs``.
Nothing here imports ``minatar`` at module import.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from rlpipe.envs.families import EnvFamily, MakeEnv, install_hint
from rlpipe.errors import MissingDependencyError

MINATAR_ID_PREFIXES = ("MinAtar/",)
INSTALL_HINT = install_hint("minatar")
MINATAR_GAMES = ("Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders")

__all__ = ["MINATAR_FAMILY", "MINATAR_GAMES", "MINATAR_ID_PREFIXES", "MinAtarChannelsFirst", "import_minatar",
           "make_minatar_env"]


def import_minatar(env_id: str) -> None:
    """Register MinAtar's envs with gymnasium (idempotent); ``env_id`` is for the message.

    Without the package: a one-line :class:`MissingDependencyError` naming the extra to install.
    """
    try:
        from minatar import gym as minatar_gym
    except ImportError:
        raise MissingDependencyError(
            f"env '{env_id}' needs the minatar package, which is not installed; "
            f"MinAtar envs need the extra: {INSTALL_HINT}"
        ) from None
    if f"{MINATAR_ID_PREFIXES[0]}{MINATAR_GAMES[0]}-v1" not in gym.registry:
        minatar_gym.register_envs()


class MinAtarChannelsFirst(gym.ObservationWrapper[np.ndarray, int, np.ndarray]):
    """A MinAtar ``bool [10, 10, C]`` observation as ``uint8 [C, 10, 10]`` (0 or 1), C-contiguous."""

    def __init__(self, env: gym.Env[np.ndarray, int]) -> None:
        super().__init__(env)
        space = env.observation_space
        if not isinstance(space, spaces.Box) or len(space.shape) != 3:
            raise ValueError(f"expected a MinAtar observation space of shape (10, 10, C), got {space}")
        height, width, channels = space.shape
        self.observation_space = spaces.Box(0, 1, (channels, height, width), np.uint8)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(observation.transpose(2, 0, 1), dtype=np.uint8)


def make_minatar_env(env_id: str, env_kwargs: Mapping[str, Any] | None = None) -> gym.Env[np.ndarray, int]:
    """One MinAtar game (``MinAtar/Breakout-v1``, ...) observing ``uint8 [C, 10, 10]``.

    ``env_kwargs`` go to ``gym.make`` (``sticky_action_prob``, ``difficulty_ramping``,
    ``render_mode``, ``max_episode_steps``).
    """
    import_minatar(env_id)
    return MinAtarChannelsFirst(gym.make(env_id, **dict(env_kwargs or {})))


def _make_for_family(spec: MakeEnv) -> gym.Env[np.ndarray, int]:
    limit = {} if spec.max_episode_steps is None else {"max_episode_steps": spec.max_episode_steps}
    return make_minatar_env(spec.env_id, {**spec.kwargs, **limit})


MINATAR_FAMILY = EnvFamily(
    "minatar", MINATAR_ID_PREFIXES, extra="minatar", importer=import_minatar, maker=_make_for_family,
    agent_observations=(MinAtarChannelsFirst,),
)
"""MinAtar's games as ``uint8 [C, 10, 10]`` images (``predict`` takes those; channels are kinds of
objects, not frames)."""
