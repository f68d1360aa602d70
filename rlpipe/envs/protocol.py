"""What the pipeline needs from a vector environment (the :class:`VectorEnv` protocol), and what a
backend must give (the :class:`CoreVectorEnv` protocol).

The collectors, the evaluator, the pipeline builders and the remote collectors talk to
:class:`VectorEnv` only. A backend (gymnasium's vector envs in :mod:`rlpipe.envs.vector`, ale-py's
``AtariVectorEnv`` in :mod:`rlpipe.envs.ale_vector`, another one through
:mod:`rlpipe.envs.backends`) implements only :class:`CoreVectorEnv`, stepping and resetting; the
wrappers of :mod:`rlpipe.envs.vector_wrappers` add what every backend needs (episode figures,
NaN checks, an ALE game's life-loss episodes) and make it a :class:`VectorEnv`.

The contract, beyond the signatures: ``num_envs`` environments step together with same-step
auto-reset. :meth:`VectorEnv.step` returns one columnar batch (``obs``, ``action``, ``reward``
(float32), ``next_obs``, ``terminated``, ``truncated``, ``env_id`` and ``env_error``, each with a
leading ``num_envs`` axis) in which an ended episode's ``next_obs`` is its real last
observation, while :attr:`VectorEnv.obs` already holds the next episode's first one. Actions
and observations are in the spaces the policy sees (bounded actions in [-1, 1]).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import gymnasium as gym
import numpy as np

from rlpipe.envs.episode_stats import EpisodeStats, FinishedEpisode

__all__ = ["CoreStep", "CoreVectorEnv", "VectorEnv"]


@dataclass(frozen=True)
class CoreStep:
    """One step of a backend's environments, each field with a leading ``num_envs`` axis."""

    next_obs: np.ndarray
    """Each env's observation to act on next: a new episode's first where one ended."""
    final_obs: np.ndarray
    """Each env's observation after this step in its episode: the real last one where an episode
    ended (``next_obs`` itself where none did)."""
    reward: np.ndarray
    """In the backend's float dtype (episode returns add it up so; the batches hold it as float32)."""
    terminated: np.ndarray
    truncated: np.ndarray
    failed: np.ndarray
    """Steps that failed (the env raised: a truncated step with a placeholder observation)."""
    success: np.ndarray | None = None
    """One flag per ended episode, in env order, where the env reports success (None: it does not)."""
    lives: np.ndarray | None = None
    """Each env's lives (ALE games; a new game's where one ended), None where the envs have none."""
    restarted: bool = False
    """The backend restarted its workers (a hang or a death): every row failed, every episode was
    cut, and ``next_obs`` holds fresh episodes' first observations."""


@runtime_checkable
class CoreVectorEnv(Protocol):
    """What a vector backend implements: ``num_envs`` environments stepped together with same-step
    auto-reset, reset whole or env by env. Spaces are one env's; actions arrive in the spaces the
    policy sees (bounded actions in [-1, 1])."""

    @property
    def num_envs(self) -> int: ...

    @property
    def observation_space(self) -> gym.Space: ...

    @property
    def action_space(self) -> gym.Space: ...

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """Fresh episodes everywhere (seeded ``seed, seed+1, ...`` when given); observations and the
        envs' info (``lives`` for ALE games)."""

    def reset_envs(self, mask: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        """Fresh episodes in the envs of ``mask``; their rows of the observations and info hold them."""

    def step(self, action: np.ndarray) -> CoreStep:
        """Step every environment once."""

    def close(self) -> None: ...


@runtime_checkable
class VectorEnv(Protocol):
    """``num_envs`` environments stepped together; any object with these members is one."""

    @property
    def num_envs(self) -> int:
        """How many environments step together (the leading axis of every array)."""

    @property
    def observation_space(self) -> gym.Space:
        """The space of one environment's observation."""

    @property
    def action_space(self) -> gym.Space:
        """The space of one environment's action."""

    @property
    def obs(self) -> np.ndarray:
        """The current observation of every environment (what the next :meth:`step` acts on)."""

    @property
    def episode_stats(self) -> EpisodeStats:
        """Return, length and success of the latest finished episodes (the collectors' figures)."""

    @property
    def finished_episodes(self) -> list[FinishedEpisode]:
        """The episodes the latest :meth:`step` ended (what the evaluator counts)."""

    @property
    def failed_steps(self) -> int:
        """Env steps that failed so far (raised, hung, died or skipped for a NaN)."""

    def reset(self, seed: int | None = None) -> np.ndarray:
        """Start fresh episodes everywhere: seeded ``seed, seed+1, ...`` when given, else on the
        environments' own random streams; returns (and sets) :attr:`obs`."""

    def step(self, action: np.ndarray) -> dict[str, np.ndarray]:
        """Step every environment once with ``action`` (``[num_envs, ...]``); returns the transitions."""

    def random_actions(self) -> np.ndarray:
        """One uniformly random action per environment, from a stream seeded with the env."""

    def close(self) -> None:
        """Release the environments (and their processes)."""
