"""Vector-env backends: the one place that decides which implementation steps a run's environments.

:class:`EnvSettings` describes the environments of a run in the env layer's own terms (the
pipeline's config maps onto it in :mod:`rlpipe.recipes.envs`); :func:`make_vector_env` makes
``num_envs`` of them with the backend the settings name, from :data:`VECTOR_BACKENDS`:
``gymnasium`` (:class:`~rlpipe.envs.vector.VectorEnvManager` over gymnasium's vector envs) or,
for ALE games, ``ale_vector`` (:class:`~rlpipe.envs.ale_vector.AleVectorEnv`, ale-py's C++
``AtariVectorEnv``). Another backend is one more function returning a
:class:`~rlpipe.envs.protocol.VectorEnv` and one more row.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rlpipe.envs.ale_vector import AleVectorEnv
from rlpipe.envs.errors import EnvSettingError
from rlpipe.envs.factory import EnvFactory, env_factory
from rlpipe.envs.families import env_families, family_of
from rlpipe.envs.protocol import CoreVectorEnv, VectorEnv
from rlpipe.envs.vector import GymnasiumVectorBackend
from rlpipe.envs.vector_wrappers import NonFiniteCheck, TransitionBatches

__all__ = ["DEFAULT_BACKEND", "VECTOR_BACKENDS", "EnvSettings", "VectorBackend", "make_vector_env"]

DEFAULT_BACKEND = "gymnasium"


@dataclass(frozen=True)
class EnvSettings:
    """The environments of a run: what one env is (the arguments of :func:`env_factory`) and how
    a vector of them runs (``backend``; ``asynchronous``, ``step_timeout`` and ``nonfinite`` as
    :class:`VectorEnvManager` takes them)."""

    env_id: str
    env_kwargs: Mapping[str, Any] = field(default_factory=dict)
    max_episode_steps: int | None = None
    imports: Sequence[str] = ()
    wrappers: Sequence[Mapping[str, Any]] = ()
    backend: str = DEFAULT_BACKEND
    asynchronous: bool = False
    step_timeout: float | None = None
    nonfinite: str = "raise"
    family_settings: Any = None
    """The settings of the env's family (:mod:`rlpipe.envs.families`; an ALE game's
    :class:`~rlpipe.envs.atari.AtariSettings`); None: the family's defaults."""
    train: bool = False
    """Envs for collecting (an ALE game: a lost life ends an episode, rewards clipped) or, without
    it, for evaluating (whole games, real scores)."""

    def single_env_factory(self) -> EnvFactory:
        """A maker of one environment as these settings describe it (no vector around it)."""
        return env_factory(self.env_id, self.env_kwargs, self.max_episode_steps, imports=self.imports,
                           wrappers=self.wrappers, family_settings=self.family_settings, train=self.train)


VectorBackend = Callable[[EnvSettings, int, int], CoreVectorEnv]
"""Makes ``num_envs`` environments of the settings (to be seeded ``seed, seed+1, ...`` at their first
reset): ``(settings, num_envs, seed)``; a :class:`~rlpipe.envs.protocol.CoreVectorEnv`, which
:func:`make_vector_env` wraps."""


def gymnasium_vector_env(settings: EnvSettings, num_envs: int, seed: int) -> GymnasiumVectorBackend:
    """Gymnasium's vector envs (one process, or one subprocess per env with ``asynchronous``)."""
    return GymnasiumVectorBackend(settings.single_env_factory(), num_envs, asynchronous=settings.asynchronous,
                                  step_timeout=settings.step_timeout, name=settings.env_id)


def ale_vector_env(settings: EnvSettings, num_envs: int, seed: int) -> AleVectorEnv:
    """ale-py's C++ vector env (ALE games: the atari family), with the same observations as the
    Python wrappers; it has no user wrappers, env kwargs, subprocesses or step timeout."""
    unread = {"env_kwargs": settings.env_kwargs, "wrappers": settings.wrappers, "asynchronous": settings.asynchronous,
              "step_timeout": settings.step_timeout, "max_episode_steps": settings.max_episode_steps}
    for name, value in unread.items():
        if value:
            raise EnvSettingError(f"the ale_vector backend does not read it (got {value}); use the gymnasium backend",
                                  name)
    return AleVectorEnv(settings.env_id, num_envs, settings=settings.family_settings)


VECTOR_BACKENDS: dict[str, VectorBackend] = {"gymnasium": gymnasium_vector_env, "ale_vector": ale_vector_env}
"""Each backend's name and the function that makes its vector envs."""


def make_vector_env(settings: EnvSettings, num_envs: int, seed: int) -> VectorEnv:
    """``num_envs`` environments as ``settings`` describe them, seeded ``seed, seed+1, ...``: made by
    the backend they name (a family's native backend steps that family's envs only:
    :attr:`~rlpipe.envs.families.EnvFamily.native_backends`), inside the family's training wrappers
    (with ``train``) and the wrappers every backend gets (NaN checks, episode figures, batches:
    :mod:`rlpipe.envs.vector_wrappers`)."""
    backend = VECTOR_BACKENDS.get(settings.backend)
    if backend is None:
        raise EnvSettingError(f"unknown vector env backend '{settings.backend}' (use one of "
                              f"{', '.join(sorted(VECTOR_BACKENDS))})", "backend")
    family = family_of(settings.env_id)
    owner = next((f for f in env_families() if settings.backend in f.native_backends), family)
    if owner is not family:
        raise EnvSettingError(f"the {settings.backend} backend steps {owner.name} envs only (ids like "
                              f"'{owner.prefixes[0]}...'), not '{settings.env_id}'", "backend")
    core = backend(settings, num_envs, seed)
    if settings.train and family.train_wrappers is not None:
        core = family.train_wrappers(core)
    return TransitionBatches(NonFiniteCheck(core, settings.nonfinite), seed)
