"""A config's environments: ``cfg.env`` as the env layer's :class:`EnvSettings`, and its errors
worded in config keys.

The env layer (:mod:`rlpipe.envs`) knows nothing of config files; its
:class:`~rlpipe.envs.errors.EnvSettingError` names the setting at fault (``env_id``,
``wrappers[0]``). Here that setting becomes the key a user writes (``config key
'env.wrappers[0]': ...``), for every env a pipeline makes: the collector's, the evaluator's,
the one-off probes and a loaded agent's.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import gymnasium as gym
from pydantic import BaseModel

from rlpipe.config import Config, ConfigError
from rlpipe.envs import EnvSettingError, EnvSettings, VectorEnv, backends
from rlpipe.envs.factory import EnvFactory
from rlpipe.envs.families import env_families, family_settings

__all__ = ["ASYNC_STEP_TIMEOUT_S", "EVAL_SEED_OFFSET", "REEVAL_SEED_OFFSET", "env_settings", "make_env_factory",
           "make_envs", "make_vector_env", "setting_errors_as_config_keys"]

ASYNC_STEP_TIMEOUT_S = 60.0
"""``env.step_timeout`` of subprocess environments when the config gives none: a dead or hung
worker is then found and restarted instead of hanging the run."""
EVAL_SEED_OFFSET = 10_000  # evaluator environments never share seeds with the collector's
REEVAL_SEED_OFFSET = 20_000  # nor does `rlpipe eval`, so its figure is not the one checkpoints were chosen on

CONFIG_KEYS = {"imports": "env.import"}
"""Env settings whose config key is not ``env.`` + the setting's name."""


def config_key(setting: str) -> str:
    """The config key of an env setting: ``wrappers[0].type`` -> ``env.wrappers[0].type``,
    ``imports`` -> ``env.import``."""
    name = setting.split("[", 1)[0].split(".", 1)[0]
    return CONFIG_KEYS.get(name, f"env.{name}") + setting[len(name):]


@contextmanager
def setting_errors_as_config_keys() -> Iterator[None]:
    """Re-raise the env layer's :class:`EnvSettingError` as a :class:`ConfigError` naming the config key."""
    try:
        yield
    except EnvSettingError as err:
        raise ConfigError(f"config key '{config_key(err.setting)}': {err.reason}") from None


def env_settings(cfg: Config, train: bool = False) -> EnvSettings:
    """``cfg.env`` in the env layer's terms (subprocess envs get :data:`ASYNC_STEP_TIMEOUT_S` when
    the config sets no timeout), for the collector (``train``) or for evaluation (an ALE game:
    whole games with real scores)."""
    env = cfg.env
    sections = {family.name: _section(getattr(env, family.name, None)) for family in env_families() if family.settings}
    with setting_errors_as_config_keys():
        settings_of_family = family_settings(env.env_id, sections)
    return EnvSettings(
        env_id=env.env_id, env_kwargs=env.env_kwargs, max_episode_steps=env.max_episode_steps,
        imports=tuple(env.import_), wrappers=tuple(wrapper.model_dump() for wrapper in env.wrappers),
        backend=env.backend, asynchronous=env.asynchronous,
        step_timeout=env.step_timeout or (ASYNC_STEP_TIMEOUT_S if env.asynchronous else None),
        nonfinite=env.nonfinite, family_settings=settings_of_family, train=train,
    )


def _section(section: BaseModel | None) -> dict[str, Any] | None:
    """An env family's config section (``env.atari``, named as the family) as plain data."""
    return None if section is None else section.model_dump()


def make_env_factory(cfg: Config, train: bool = False) -> EnvFactory:
    """A factory of single environments as ``cfg.env`` describes them, for evaluation unless
    ``train``; errors name config keys."""
    with setting_errors_as_config_keys():
        factory = env_settings(cfg, train).single_env_factory()

    def make() -> gym.Env:
        with setting_errors_as_config_keys():
            return factory()

    return make


def make_vector_env(cfg: Config, num_envs: int, seed: int, train: bool = False) -> VectorEnv:
    """``num_envs`` environments as ``cfg.env`` describes them, the collector's with ``train``
    (else evaluation envs, as ``rlpipe eval`` wants); a one-line error when they can't be made."""
    with setting_errors_as_config_keys():
        return backends.make_vector_env(env_settings(cfg, train), num_envs, seed)


def make_envs(cfg: Config) -> tuple[VectorEnv | None, VectorEnv]:
    """The collector's and the evaluator's vector environments. No collector's with a remote
    backend (``distributed.backend``), whose collector actors make their own, nor offline only
    (``offline.dataset_share=1``)."""
    local = cfg.distributed.backend == "local" and not cfg.offline_only
    collector = make_vector_env(cfg, cfg.env.collector_env_num, cfg.seed, train=True) if local else None
    try:
        evaluator = make_vector_env(cfg, cfg.env.evaluator_env_num, cfg.seed + EVAL_SEED_OFFSET)
    except BaseException:
        if collector is not None:
            collector.close()
        raise
    return collector, evaluator
