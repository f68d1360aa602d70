"""Your own environments from a config: modules to import, ``module:EnvId`` ids, extra wrappers.

A module that registers environments when imported (``gym.register(...)`` at its top level)
is named either in the id, gymnasium's ``my_pkg.envs:Corridor-v0`` syntax, or in
``env.import``. Both are kept in ``config.yaml``, so ``rlpipe eval`` and ``rlpipe resume``
import them again. ``env.wrappers`` lists gymnasium wrappers applied right after ``gym.make``
(before rlpipe's own goal flattening and action rescaling), each a class name of
``gymnasium.wrappers`` (``FlattenObservation``) or a dotted path (``my_pkg.wrappers.Clip``),
with keyword arguments.
"""
from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym

from rlpipe.envs.errors import EnvSettingError
from rlpipe.errors import first_line

WrapperSpec = tuple[type[gym.Wrapper], Mapping[str, Any]]
"""A wrapper class and its keyword arguments."""

__all__ = ["WrapperSpec", "apply_wrappers", "import_env_modules", "resolve_wrappers", "split_module_id"]


def split_module_id(env_id: str) -> tuple[str | None, str]:
    """``"my_pkg.envs:Corridor-v0"`` -> ``("my_pkg.envs", "Corridor-v0")``; a plain id has no module."""
    module, sep, bare = env_id.partition(":")
    return (module, bare) if sep else (None, env_id)


def import_env_modules(modules: Sequence[str], setting: str = "imports") -> None:
    """Import each module (they register their environments); an :class:`EnvSettingError` naming
    ``setting`` (where the module was named) when one fails."""
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as err:  # a user's module may fail in any way while importing
            reason = first_line(err)
            raise EnvSettingError(f"cannot import module '{module}' ({reason})", setting) from None


def _wrapper_class(path: str, setting: str) -> type[gym.Wrapper]:
    if "." not in path and ":" not in path:
        found = getattr(gym.wrappers, path, None)
        if found is None:
            raise EnvSettingError(f"gymnasium.wrappers has no wrapper '{path}' "
                                  "(give a dotted path, e.g. my_pkg.wrappers.MyWrapper)", setting)
    else:
        module, _, name = path.replace(":", ".").rpartition(".")
        import_env_modules([module], setting)
        found = getattr(importlib.import_module(module), name, None)
        if found is None:
            raise EnvSettingError(f"module '{module}' has no '{name}'", setting)
    if not (isinstance(found, type) and issubclass(found, gym.Wrapper)):
        raise EnvSettingError(f"'{path}' is not a gymnasium wrapper class", setting)
    return found


def resolve_wrappers(wrappers: Sequence[Mapping[str, Any]]) -> list[WrapperSpec]:
    """``[{"type": PATH, "kwargs": {...}}, ...]`` -> wrapper classes with their kwargs, checked now."""
    return [(_wrapper_class(spec["type"], f"wrappers[{i}].type"), dict(spec.get("kwargs") or {}))
            for i, spec in enumerate(wrappers)]


def apply_wrappers(env: gym.Env, wrappers: Sequence[WrapperSpec]) -> gym.Env:
    """``env`` inside each wrapper in turn (the first is innermost); bad kwargs are one line."""
    for i, (cls, kwargs) in enumerate(wrappers):
        try:
            env = cls(env, **kwargs)
        except (TypeError, ValueError) as err:
            raise EnvSettingError(f"{cls.__name__}(**{dict(kwargs)}) failed ({first_line(err)})",
                                  f"wrappers[{i}]") from None
    return env
