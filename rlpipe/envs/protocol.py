"""What the pipeline needs from a vector environment: the :class:`VectorEnv` protocol.

The collectors, the evaluator, the pipeline builders and the remote collectors talk to this
interface only, so a vector env of another kind (a native one such as ale-py's
``AtariVectorEnv``, behind an adapter) plugs in through :mod:`rlpipe.envs.backends` without a
change to them. :class:`~rlpipe.envs.vector.VectorEnvManager` (gymnasium's vector envs) is the
one implementation today.

The contract, beyond the signatures: ``num_envs`` environments step together with same-step
auto-reset. :meth:`VectorEnv.step` returns one columnar batch (``obs``, ``action``, ``reward``
(float32), ``next_obs``, ``terminated``, ``truncated``, ``env_id`` and ``env_error``, each with a
leading ``num_envs`` axis) in which an ended episode's ``next_obs`` is its real last
observation, while :attr:`VectorEnv.obs` already holds the next episode's first one. Actions
and observations are in the spaces the policy sees (bounded actions in [-1, 1]).
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable

import gymnasium as gym
import numpy as np

from rlpipe.envs.episode_stats import EpisodeStats, FinishedEpisode

__all__ = ["VectorEnv"]


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
