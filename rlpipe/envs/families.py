"""The table of env families: the one place that tells environments apart by their ids.

A family is the environments of one package (ALE games, MinAtar, MiniGrid, Gymnasium-Robotics)
or gymnasium's own and the user's (``gymnasium``, the family of every other id). Its row says
which ids are its (prefixes), which extra installs its package and how to import it (which
registers its envs), how one env is made for training and for evaluation, its settings (the
config section ``env.<name>``), the vector backends of its own package, whether its image
observations are stacks of frames (kept once in the replay buffer), and which of its wrappers
make the observations :meth:`rlpipe.load(...).predict <rlpipe.entry.agent.Agent.predict>` takes.
The env factory, the backends, the buffer builder and the agent read the row of an id
(:func:`family_of`); a new family is a module with its maker and row, listed in :func:`env_families`.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from rlpipe.envs.errors import EnvSettingError
from rlpipe.envs.protocol import CoreVectorEnv

__all__ = ["EnvFamily", "MakeEnv", "env_families", "family_of", "family_settings", "install_hint"]


@dataclass(frozen=True)
class MakeEnv:
    """What a family's maker gets: the id, ``env_kwargs``, the step limit, the family's settings
    (None: its defaults) and whether the env is for training (else for evaluation)."""

    env_id: str
    kwargs: Mapping[str, Any]
    max_episode_steps: int | None
    settings: Any
    train: bool


def _gym_make(spec: MakeEnv) -> gym.Env:
    """``gym.make`` with the kwargs and the step limit (gymnasium's and the user's envs)."""
    kwargs = dict(spec.kwargs)
    if spec.max_episode_steps is not None:
        kwargs["max_episode_steps"] = spec.max_episode_steps
    return gym.make(spec.env_id, **kwargs)


@dataclass(frozen=True)
class EnvFamily:
    """One row of :data:`ENV_FAMILIES`."""

    name: str
    """Its name, and the config section of its settings (``env.atari``)."""
    prefixes: tuple[str, ...]
    """Ids that are its (``ALE/``); empty for the family of every other id."""
    extra: str | None = None
    """The rlpipe extra that installs its package."""
    importer: Callable[[str], None] | None = None
    """Imports its package for an id (registering its envs); a one-line error without the extra."""
    maker: Callable[[MakeEnv], gym.Env] = _gym_make
    """Makes one env, for training or evaluation."""
    settings: type | None = None
    """Its settings (a dataclass, made from the config section ``env.<name>``); None: it has none."""
    native_backends: tuple[str, ...] = ()
    """Vector backends (:data:`~rlpipe.envs.backends.VECTOR_BACKENDS`) of its package that step its
    envs only (ale-py's ``ale_vector``); the others step any env."""
    frame_stacks: bool = False
    """Its image observations are stacks of frames (each frame kept once by the buffer's frame store)."""
    agent_observations: tuple[type[gym.Wrapper], ...] = ()
    """Wrappers whose observations are the family's own as rlpipe holds them (what ``predict`` takes)."""
    train_wrappers: Callable[[CoreVectorEnv], CoreVectorEnv] | None = None
    """Vector wrappers of its training envs, around any backend (an ALE game's life-loss episodes
    and clipped rewards); evaluation envs go without them."""

    def owns(self, env_id: str) -> bool:
        return env_id.startswith(self.prefixes) if self.prefixes else False


def install_hint(extra: str) -> str:
    """How to install an extra, in the words of every missing-package message."""
    return f"scripts/setup.sh {extra}, or pip install 'rlpipe[{extra}]'"


GYMNASIUM_FAMILY = EnvFamily("gymnasium", ())
"""Every id no other family owns: gymnasium's envs (classic control, MuJoCo, Box2D), rlpipe's own
(``rlpipe/BitFlip-v0``, ``rlpipe/DeepSea-v0``) and the user's (``module:EnvId``)."""


@functools.cache
def env_families() -> tuple[EnvFamily, ...]:
    """Every family, the catch-all ``gymnasium`` last (the rows live in their modules, which import
    this one: hence a function, not a module-level tuple)."""
    from rlpipe.envs.atari import ATARI_FAMILY
    from rlpipe.envs.minatar import MINATAR_FAMILY
    from rlpipe.envs.minigrid import MINIGRID_FAMILY
    from rlpipe.envs.popgym import POPGYM_FAMILY
    from rlpipe.envs.robotics import ROBOTICS_FAMILY

    return ATARI_FAMILY, MINATAR_FAMILY, MINIGRID_FAMILY, POPGYM_FAMILY, ROBOTICS_FAMILY, GYMNASIUM_FAMILY


def family_of(env_id: str) -> EnvFamily:
    """The family that owns ``env_id`` (``gymnasium`` for any id no other family owns)."""
    return next((family for family in env_families() if family.owns(env_id)), GYMNASIUM_FAMILY)


def family_settings(env_id: str, sections: Mapping[str, Mapping[str, Any] | None]) -> Any:
    """The settings of ``env_id``'s family from the families' config sections (``{"atari": {...}}``;
    None or absent: the family's defaults); a one-line :class:`EnvSettingError` naming a section
    given for another family's env."""
    family = family_of(env_id)
    for name, section in sections.items():
        if section is not None and name != family.name:
            owner = next((f for f in env_families() if f.name == name), None)
            ids = f" (ids like '{owner.prefixes[0]}...')" if owner is not None and owner.prefixes else ""
            raise EnvSettingError(f"only {name} envs{ids} read it; env '{env_id}' is of the {family.name} family",
                                  name)
    section = sections.get(family.name)
    return None if section is None or family.settings is None else family.settings(**section)
