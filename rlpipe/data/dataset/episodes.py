"""Episodes in a dataset's transitions: each env's rows in order, cut after every terminated or
truncated row.

A dataset's rows may interleave several envs (a vector env's collection, a run's replay buffer):
``env_id`` says whose each row is, and a row's successor in its episode is the next row of the
same env. Only episodes seen from their first step to their last count; an env's first rows may
continue an episode that started before the data (a replay buffer that wrapped around), and its
last rows may be an episode the data stops inside.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Episodes", "find_episodes"]


@dataclass(frozen=True)
class Episodes:
    """The whole episodes of a dataset: their rows in time order, returns and lengths."""

    rows: list[np.ndarray]
    """Each episode's row indices, first step to last, in the order of their envs and then of time."""
    returns: np.ndarray
    """float64 ``[E]`` undiscounted return of each episode."""

    @property
    def lengths(self) -> np.ndarray:
        return np.array([len(r) for r in self.rows], dtype=np.int64)

    def summary(self) -> dict[str, float | int]:
        """Count, return statistics and mean length (JSON numbers; returns are None without episodes)."""
        if not self.rows:
            return {"count": 0}
        return {"count": len(self.rows), "return_mean": float(self.returns.mean()),
                "return_std": float(self.returns.std()), "return_min": float(self.returns.min()),
                "return_max": float(self.returns.max()), "length_mean": float(self.lengths.mean())}


def find_episodes(env_id: np.ndarray, done: np.ndarray, reward: np.ndarray, first_partial: bool = False) -> Episodes:
    """The whole episodes of rows with ``env_id`` ``[N]``, ``done`` (terminated or truncated) ``[N]`` and
    ``reward`` ``[N]``. ``first_partial``: each env's rows start inside an episode (its first segment is
    not counted)."""
    order = np.argsort(env_id, kind="stable")  # grouped by env, time order kept within each env
    env_sorted, done_sorted = env_id[order], done[order].astype(bool)
    n = len(order)
    if n == 0:
        return Episodes([], np.zeros(0))
    new_env = np.ones(n, dtype=bool)
    new_env[1:] = env_sorted[1:] != env_sorted[:-1]
    after_done = np.zeros(n, dtype=bool)
    after_done[1:] = done_sorted[:-1] & ~new_env[1:]
    starts = np.flatnonzero(new_env | after_done)
    ends = np.append(starts[1:], n) - 1
    whole = done_sorted[ends] & (~new_env[starts] | (not first_partial))
    segment_sums = np.add.reduceat(reward[order].astype(np.float64), starts)
    rows = [order[s:e + 1] for s, e, keep in zip(starts, ends, whole, strict=True) if keep]
    return Episodes(rows, segment_sums[whole])
