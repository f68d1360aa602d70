"""The env factory: one function that turns an env description into a maker of single environments.

:func:`env_factory` is the one place where an environment is made: user modules imported,
optional env packages loaded, the user's wrappers applied, goal and MiniGrid observations
flattened, bounded actions rescaled to [-1, 1], and every env wrapped to be recreated when it
crashes. Vector envs (:mod:`rlpipe.envs.vector`, :mod:`rlpipe.envs.backends`) step the envs it makes.
A wrong setting is an :class:`~rlpipe.envs.errors.EnvSettingError` naming the argument at fault.
"""
from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from rlpipe.envs.errors import EnvSettingError
from rlpipe.envs.families import MakeEnv, family_of
from rlpipe.envs.goal import GOAL_KEYS, FlattenGoalObservation
from rlpipe.envs.minigrid import FlattenMiniGridImage, ReportMiniGridSuccess, is_minigrid_env
from rlpipe.envs.recovery import RecreateOnError
from rlpipe.envs.registration import register_envs
from rlpipe.envs.user_envs import apply_wrappers, import_env_modules, resolve_wrappers, split_module_id
from rlpipe.errors import MissingDependencyError, first_line

__all__ = ["EnvFactory", "env_factory", "is_goal_env"]

EnvFactory = Callable[[], gym.Env]
"""Makes one environment each time it is called."""


def is_goal_env(env: gym.Env) -> bool:
    """Whether ``env`` observes a goal dict (``observation``, ``achieved_goal``, ``desired_goal``)."""
    space = env.observation_space
    return isinstance(space, gym.spaces.Dict) and set(space.spaces) == set(GOAL_KEYS)


def _bounded(space: gym.spaces.Box) -> bool:
    return bool(np.isfinite(space.low).all() and np.isfinite(space.high).all())


def _standard_wrappers(env: gym.Env) -> gym.Env:
    """``env`` with rlpipe's own wrappers: goal, MiniGrid, other dict and tuple observations flattened,
    bounded actions in [-1, 1]. A dict or tuple without goals becomes one vector, entry by entry in the
    space's order, each entry as the encoders read it (gymnasium's ``flatten``: a ``Box`` flattened,
    a ``Discrete`` one-hot, a ``MultiDiscrete`` one-hot per dimension), because the vector env and the
    replay buffer carry arrays."""
    if is_goal_env(env):
        env = FlattenGoalObservation(env)
    elif is_minigrid_env(env):
        env = FlattenMiniGridImage(ReportMiniGridSuccess(env))
    elif isinstance(env.observation_space, (gym.spaces.Dict, gym.spaces.Tuple)):
        env = gym.wrappers.FlattenObservation(env)
    space = env.action_space
    if isinstance(space, gym.spaces.Box) and _bounded(space):
        unit = np.ones(space.shape, dtype=space.dtype)
        env = gym.wrappers.RescaleAction(env, -unit, unit)
    return env


def env_factory(env_id: str, env_kwargs: Mapping[str, Any] | None = None, max_episode_steps: int | None = None,
                imports: Sequence[str] = (), wrappers: Sequence[Mapping[str, Any]] = (), *,
                family_settings: Any = None, train: bool = False) -> EnvFactory:
    """A factory for ``gym.make(env_id, ...)``; fails at once on an unknown id.

    Your own environments (:mod:`rlpipe.envs.user_envs`): ``imports`` are modules imported
    first (they register envs), ``env_id`` may be ``module:EnvId``, and ``wrappers``
    (``[{"type": ..., "kwargs": ...}]``) wrap each env right after ``gym.make``.

    Goal environments with dict observations come flattened by :class:`FlattenGoalObservation`,
    MiniGrid environments by :class:`FlattenMiniGridImage`, with ``is_success`` reported by
    :class:`ReportMiniGridSuccess`. The id's family (:func:`~rlpipe.envs.families.family_of`)
    imports its package (which registers its envs) and makes each env with its
    ``family_settings`` (None: the family's defaults), for training (``train``: an ALE game's
    lost life ends an episode, rewards are clipped) or for evaluation.
    A bounded Box action space is rescaled to [-1, 1] (gymnasium's ``RescaleAction``): this is
    the one place where actions meet the env's bounds, so policies, buffers and random
    collection all work in [-1, 1]. Every environment is recreated when it crashes
    (:class:`RecreateOnError`). An env whose package is missing (MuJoCo, MiniGrid,
    Gymnasium-Robotics) is a one-line :class:`MissingDependencyError` naming the extra to install.
    A wrong setting (an unknown id, a module that does not import, a wrapper that does not
    exist or rejects its kwargs, kwargs the env rejects) is an :class:`EnvSettingError` naming
    the argument at fault: the id and wrapper classes now, the rest when an env is made.
    """
    register_envs()
    given_id = env_id
    module, env_id = split_module_id(env_id)
    import_env_modules(imports, "imports")
    import_env_modules([module] if module else [], "env_id")
    modules = [*imports, *([module] if module else [])]
    user_wrappers = resolve_wrappers(wrappers)
    family = family_of(env_id)
    import_package = family.importer
    if import_package is not None:
        import_package(env_id)
    if env_id not in gym.registry:
        hint = difflib.get_close_matches(env_id, list(gym.registry), n=1)
        did_you_mean = f" (did you mean '{hint[0]}'?)" if hint else ""
        raise EnvSettingError(f"unknown gymnasium environment '{env_id}'{did_you_mean}", "env_id")
    given_kwargs = dict(env_kwargs or {})
    spec = MakeEnv(env_id, given_kwargs, max_episode_steps, family_settings, train)

    def make_one() -> gym.Env:
        # again here: a spawned worker process starts with gymnasium's own registry
        import_env_modules(modules)
        if import_package is not None:
            import_package(env_id)
        try:
            return _standard_wrappers(apply_wrappers(family.maker(spec), user_wrappers))
        except gym.error.DependencyNotInstalled as err:
            reason = first_line(err)
            # gymnasium's message says what to install; only MuJoCo has an rlpipe extra (not Box2D)
            extra = ("; MuJoCo envs need the extra: scripts/setup.sh mujoco, or pip install 'rlpipe[mujoco]'"
                     if "mujoco" in reason.lower() else "")
            message = f"env '{env_id}' needs a package that is not installed ({reason}){extra}"
            raise MissingDependencyError(message) from None
        except EnvSettingError:  # a wrapper's: it names its own setting
            raise
        except (TypeError, ValueError) as err:  # gymnasium and env constructors reject bad kwargs this way
            raise EnvSettingError(f"env '{given_id}' could not be made with {given_kwargs} ({first_line(err)})",
                                  "env_kwargs") from None

    def make() -> gym.Env:
        return RecreateOnError(make_one)

    return make
