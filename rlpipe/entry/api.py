"""``rlpipe.train``: training from Python, as an SB3 user writes it.

It takes what a Python caller has at hand (an env id or an env factory, ``env=``; overrides as a
list or a dict) and the options of ``rlpipe train`` under the same names, builds the one
:class:`~rlpipe.entry.options.TrainOptions` the command line builds too, runs
:func:`~rlpipe.entry.train.run_training`, and returns a :class:`TrainResult` (summary, run
directory, ``.agent()``). Its errors name its arguments.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import gymnasium as gym

from rlpipe.config import Config, load_config
from rlpipe.entry.agent import Agent, load
from rlpipe.entry.options import ArgumentError, TrainOptions
from rlpipe.entry.summary import RunSummary
from rlpipe.entry.train import default_run_dir, run_training
from rlpipe.recipes.hooks import Hook
from rlpipe.recipes.pipeline import Middleware

EnvArgument = str | Callable[..., gym.Env]
"""``env=``: a gymnasium id (``"CartPole-v1"``, ``"my_envs:Corridor-v0"``) or a callable making an env."""
FACTORY_NAMESPACE = "rlpipe-python"
"""gymnasium namespace of the ids that env factories passed as ``env=`` are registered under."""


@dataclass
class TrainResult:
    """What :func:`train` returns: the run's summary, its directory and its agent."""

    summary: RunSummary
    run_dir: Path

    def agent(self) -> Agent:
        """The trained agent (:func:`rlpipe.load`: the best checkpoint when it was evaluated after
        training began, else the final one)."""
        return load(self.run_dir)

    def __getattr__(self, name: str) -> Any:
        """The summary's figures as attributes (``result.env_step``), as ``rlpipe.train`` returned the
        summary itself in earlier releases."""
        if name.startswith("_") or name == "summary":
            raise AttributeError(name)
        return getattr(self.summary, name)


def train(
    config: Config | str | Path | Mapping[str, Any],
    run_dir: str | Path | None = None,
    *,
    env: EnvArgument | None = None,
    overrides: Iterable[str] | Mapping[str, Any] = (),
    resume: bool = False,
    overwrite: bool = False,
    overwrite_empty: bool = False,
    allow_unsealed: bool = False,
    middleware: Mapping[str, Sequence[Middleware]] | None = None,
    hooks: Sequence[Hook] = (),
    announce: Callable[[str], None] | None = None,
) -> TrainResult:
    """Train ``config`` (a preset name, YAML path, dict or :class:`Config`), on ``env`` if given.

    ``env`` replaces ``env.env_id``: an id string, or a callable returning a ``gymnasium.Env``
    (registered in this process under ``rlpipe-python/<name>-v0``, the id the run's config
    keeps: ``rlpipe eval`` in another process needs an id it can import, e.g.
    ``my_envs:Corridor-v0``). ``overrides`` are ``"key.path=value"`` strings or a dict
    ``{"key.path": value}``. The other arguments are :class:`~rlpipe.entry.options.TrainOptions`'
    (the same names as ``rlpipe train``'s options): a ``run_dir`` that already holds a run is
    refused unless ``overwrite=True`` or ``resume=True``; ``hooks`` see the run after every
    iteration and may stop it; ``middleware`` adds your own at named points of the pipeline.
    ``run_dir`` keeps its place as the second argument, as in earlier releases.
    """
    texts = [*_override_texts(overrides), *([f"env.env_id={_env_id(env)}"] if env is not None else [])]
    options = TrainOptions(run_dir=Path(run_dir) if run_dir is not None else None, resume=resume,
                           overwrite=overwrite, overwrite_empty=overwrite_empty, allow_unsealed=allow_unsealed,
                           middleware=middleware or {}, hooks=hooks, announce=announce)
    cfg = load_config(config, texts)
    path = options.run_dir if options.run_dir is not None else default_run_dir(cfg)
    summary = run_training(cfg, replace(options, run_dir=path))
    return TrainResult(summary, path)


def _override_texts(overrides: Iterable[str] | Mapping[str, Any]) -> list[str]:
    """``overrides`` as ``key=value`` strings; a dict's values are written as JSON (which YAML reads)."""
    if isinstance(overrides, Mapping):
        return [f"{key}={json.dumps(value)}" for key, value in overrides.items()]
    if isinstance(overrides, str):
        raise ArgumentError(f"overrides must be a list of 'key=value' strings or a dict, got the string {overrides!r}")
    texts = list(overrides)
    wrong = [text for text in texts if not isinstance(text, str)]
    if wrong:
        raise ArgumentError(f"overrides must be a list of 'key=value' strings or a dict; {wrong[0]!r} is not a string")
    return texts


def _env_id(env: EnvArgument) -> str:
    """The gymnasium id of ``env``; an env factory is registered under one first."""
    if isinstance(env, str):
        return env
    if not callable(env):
        raise ArgumentError(f"env must be a gymnasium id or a callable returning a gymnasium.Env, got {env!r}")
    name = re.sub(r"[^A-Za-z0-9_]+", "_", getattr(env, "__name__", type(env).__name__)).strip("_") or "env"
    env_id = f"{FACTORY_NAMESPACE}/{name}-v0"
    gym.registry.pop(env_id, None)  # a later call with another factory of the same name replaces it
    gym.register(env_id, entry_point=env)
    return env_id
