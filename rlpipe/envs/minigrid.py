"""MiniGrid (and BabyAI) support: the optional ``minigrid`` extra, and a flat observation for MLPs.

MiniGrid envs observe a dict: ``image`` (the agent's 7x7 egocentric view, each cell encoded as
``(object index, colour index, state index)``), ``direction`` and a ``mission`` string.
:class:`FlattenMiniGridImage` keeps the image alone, flattened to float32, so rlpipe's MLP
Q-networks can take it. Nothing here imports ``minigrid`` at module import: rlpipe works
without the extra, and only a MiniGrid env id asks for it.
"""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from rlpipe.envs.families import EnvFamily, install_hint
from rlpipe.errors import MissingDependencyError

MINIGRID_ID_PREFIXES = ("MiniGrid-", "BabyAI-")
"""The ids that importing ``minigrid`` registers with gymnasium (which does not load them itself)."""

__all__ = [
    "MINIGRID_FAMILY",
    "MINIGRID_ID_PREFIXES",
    "FlattenMiniGridImage",
    "ReportMiniGridSuccess",
    "import_minigrid",
    "is_minigrid_env",
]


def import_minigrid(env_id: str) -> None:
    """Import ``minigrid`` so that its envs are in ``gym.registry``; ``env_id`` is for the message.

    Gymnasium 1.x loads no plugins, so ``gym.make("MiniGrid-...")`` only works once the package
    has been imported. Without the package: a one-line :class:`MissingDependencyError`
    naming the extra to install.
    """
    try:
        import minigrid  # noqa: F401 (registers the envs)
    except ImportError:
        raise MissingDependencyError(
            f"env '{env_id}' needs the minigrid package, which is not installed; "
            f"MiniGrid envs need the extra: {install_hint('minigrid')}"
        ) from None


def is_minigrid_env(env: gym.Env) -> bool:
    """Whether ``env`` is a MiniGrid env observing its dict (an ``image`` key) and wants flattening.

    Decided on the env itself, not on its id, so custom-registered MiniGrid envs are found too,
    and another env with an ``image`` key (an RGB camera, say) is never mistaken for one.
    """
    space = env.observation_space
    if not (isinstance(space, spaces.Dict) and "image" in space.spaces):
        return False
    try:
        from minigrid.minigrid_env import MiniGridEnv
    except ImportError:
        return False
    return isinstance(env.unwrapped, MiniGridEnv)


class FlattenMiniGridImage(gym.ObservationWrapper[np.ndarray, Any, dict[str, Any]]):
    """A MiniGrid env's ``image`` as a flat float32 vector in [0, 1] (shape ``(147,)`` for 7x7x3).

    Each channel is divided by its largest index (object 10, colour 5, state 3), so every
    input lies in [0, 1] like the other rlpipe envs' observations, instead of the raw 0..10
    indices (or the space's nominal 0..255): an MLP with default initialisation then sees
    inputs of one scale, and no information is lost (the map is one-to-one). State goes up to
    3, not 2 (open/closed/locked), because a fully observed grid stores the agent's
    direction (0..3) there. The indices stay ordinal rather than one-hot (minigrid's
    ``OneHotPartialObsWrapper``, 7x7x20 inputs); that is enough for DQN on small grids.

    ``direction`` and ``mission`` are dropped: the view is egocentric (it turns with the
    agent), and a fixed-task env's mission string is constant. One wrapper rather than
    minigrid's ``ImgObsWrapper`` plus gymnasium's ``FlattenObservation``: those keep uint8
    and the 0..255 bounds, so a third (scaling) wrapper would still be needed.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        space = env.observation_space
        image = space["image"] if isinstance(space, spaces.Dict) and "image" in space.spaces else None
        if not isinstance(image, spaces.Box) or image.shape[-1:] != (3,):
            raise ValueError(f"expected a MiniGrid dict observation with a (..., 3) 'image', got {space}")
        from minigrid.core.constants import COLOR_TO_IDX, OBJECT_TO_IDX, STATE_TO_IDX

        largest = [max(OBJECT_TO_IDX.values()), max(COLOR_TO_IDX.values()), max(*STATE_TO_IDX.values(), 3)]
        self._scale = 1.0 / np.asarray(largest, dtype=np.float32)
        self.observation_space = spaces.Box(0.0, 1.0, shape=(int(np.prod(image.shape)),), dtype=np.float32)

    def observation(self, observation: dict[str, Any]) -> np.ndarray:
        """The image, scaled per channel (broadcast over the last axis) and flattened."""
        return (observation["image"] * self._scale).reshape(-1)


class ReportMiniGridSuccess(gym.Wrapper[Any, Any, Any, Any]):
    """Add ``info["is_success"]``: True on the step that ends an episode with a positive reward.

    MiniGrid rewards only reaching the goal (``1 - 0.9 * steps / max_steps``, always > 0);
    episodes that end otherwise (lava, the time limit) score 0. With the flag, training and
    evaluation records report a success rate, as for the other goal-reaching envs.
    """

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, {**info, "is_success": bool(terminated and float(reward) > 0)}


MINIGRID_FAMILY = EnvFamily("minigrid", MINIGRID_ID_PREFIXES, extra="minigrid", importer=import_minigrid)
"""MiniGrid and BabyAI (flattened by :class:`FlattenMiniGridImage`, decided on the env itself, so a
MiniGrid env registered under another id is flattened too)."""
