"""Figures of the latest finished episodes of a vector environment: return, length, success."""
from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

WINDOW = 100
"""Finished episodes the figures are taken over (SB3's ``ep_rew_mean`` window)."""


SUCCESS_KEYS = ("is_success", "success")
"""Info keys of an episode's success: gymnasium-robotics' Fetch envs and most others report
``is_success``, its maze envs (PointMaze, AntMaze) ``success``."""


def final_success(info: Mapping[str, Any], rows: np.ndarray) -> np.ndarray | None:
    """Success (see :data:`SUCCESS_KEYS`) of the episodes that ended in ``rows`` (gymnasium's
    same-step ``final_info``), or None when the env does not report it for all of them."""
    final = info.get("final_info")
    if not isinstance(final, Mapping):
        return None
    key = next((key for key in SUCCESS_KEYS if key in final), None)
    if key is None:
        return None
    reported = np.asarray(final.get(f"_{key}", np.ones(len(final[key]), dtype=bool)))[rows]
    return np.asarray(final[key], dtype=bool)[rows] if reported.all() else None


class FinishedEpisode(NamedTuple):
    """One episode that ended: which env ran it, its return and length, and ``is_success`` (None: not reported)."""

    env: int
    episode_return: float
    length: int
    success: bool | None


class EpisodeStats:
    """Running return and length of each env's episode, and the last :data:`WINDOW` finished ones."""

    def __init__(self, num_envs: int) -> None:
        self._return = np.zeros(num_envs, dtype=np.float64)
        self._length = np.zeros(num_envs, dtype=np.int64)
        self._finished: deque[FinishedEpisode] = deque(maxlen=WINDOW)
        self.episodes = 0
        """Episodes finished since the start."""

    def add(self, reward: np.ndarray, done: np.ndarray, success: np.ndarray | None = None) -> list[FinishedEpisode]:
        """Fold in one vector step and return the episodes it ended.

        ``success`` holds one flag per done env (in env order), or None when not reported.
        """
        self._return += reward
        self._length += 1
        if not done.any():  # most steps: nothing ended
            return []
        rows = np.flatnonzero(done)
        returns, lengths = self._return[rows].tolist(), self._length[rows].tolist()
        flags = [None] * len(rows) if success is None else [bool(flag) for flag in success]
        ended = list(map(FinishedEpisode, rows.tolist(), returns, lengths, flags))
        self._finished.extend(ended)
        self.episodes += len(rows)
        self._return[rows] = 0.0
        self._length[rows] = 0
        return ended

    def restart(self) -> None:
        """Forget the episodes in progress (the envs were reset); finished ones stay."""
        self._return[:] = 0.0
        self._length[:] = 0

    def summary(self) -> dict[str, float]:
        """Mean return and length over the window, and the success rate where every episode in it
        reported ``is_success``; empty before the first episode ends."""
        if not self._finished:
            return {}
        _, returns, lengths, flags = zip(*self._finished, strict=True)
        n = len(returns)  # plain sums: the collector asks every call, np.mean on 100 floats costs 5x more
        out = {"episode_return_mean": sum(returns) / n, "episode_length_mean": sum(lengths) / n}
        if None not in flags:
            out["success_rate"] = sum(flags) / n
        return out
