"""Typed contexts: the data that middleware hand each other during one iteration.

A context lives for one iteration of :class:`~rlpipe.framework.task.Task`; ``renew()``
returns a fresh one that carries over only the *kept* fields (the counters that must
persist, such as ``env_step`` and ``train_iter``). Everything else is per-iteration data.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar


@dataclass
class Context:
    """Base context: iteration counter plus the ``keep``/``renew`` mechanism.

    Attributes not declared here may still be set (``ctx.my_field = ...``); they live for
    one iteration unless named in :meth:`keep`.
    """

    total_step: int = 0
    finish: bool = False

    _default_kept: ClassVar[tuple[str, ...]] = ("total_step",)

    def __post_init__(self) -> None:
        self._kept: set[str] = set(self._default_kept)

    def keep(self, *names: str) -> None:
        """Carry the named fields over to the next iteration's context."""
        self._kept.update(names)

    def renew(self) -> Context:
        """Return the next iteration's context: kept fields copied, the rest reset."""
        new = type(self)()
        new._kept = set(self._kept)
        for name in self._kept:
            setattr(new, name, getattr(self, name))
        new.total_step = self.total_step + 1
        return new

    def field_names(self) -> list[str]:
        """Names of the declared fields (for docs and debugging)."""
        return [f.name for f in dataclasses.fields(self)]

    def get(self, name: str, default: Any = None) -> Any:
        """Dict-style access, for code written against the seed's dict-like context."""
        return getattr(self, name, default)


@dataclass
class OnlineRLContext(Context):
    """Context of an online (interacting) RL pipeline.

    Kept across iterations: ``env_step``, ``env_episode``, ``train_iter``,
    ``last_eval_iter``, ``last_eval_env_step``, ``last_eval_value``, ``last_save_iter``.
    """

    # persistent counters
    env_step: int = 0
    env_episode: int = 0
    train_iter: int = 0
    last_eval_iter: int = -1
    last_eval_env_step: int = -1
    last_eval_value: float = float("-inf")
    last_save_iter: int = -1
    # per-iteration data
    train_data: Any = None
    train_output: Any = None
    collect_kwargs: dict[str, Any] = field(default_factory=dict)
    trajectories: Any = None
    episodes: Any = None
    trajectory_end_idx: list[int] = field(default_factory=list)
    eval_value: float | None = None
    eval_output: Any = None
    reward_model_output: dict[str, float] | None = None
    collect_episode_stats: dict[str, float] | None = None
    warming_up: bool = False
    distributed_stats: dict[str, float] | None = None

    _default_kept: ClassVar[tuple[str, ...]] = (
        "total_step",
        "env_step",
        "env_episode",
        "train_iter",
        "last_eval_iter",
        "last_eval_env_step",
        "last_eval_value",
        "last_save_iter",
    )


@dataclass
class OfflineRLContext(Context):
    """Context of an offline pipeline (training from a fixed dataset)."""

    train_epoch: int = 0
    train_iter: int = 0
    last_eval_iter: int = -1
    last_eval_value: float = float("-inf")
    train_data: Any = None
    train_output: Any = None
    eval_value: float | None = None
    eval_output: Any = None

    _default_kept: ClassVar[tuple[str, ...]] = (
        "total_step",
        "train_epoch",
        "train_iter",
        "last_eval_iter",
        "last_eval_value",
    )
