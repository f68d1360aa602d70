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
    """Running return and length of each env's episode, and the last :data:`WINDOW` finished ones.

    :meth:`add` runs at every vector step, so it does as little as it can there: one array
    addition for the returns, and lengths taken from the step each episode began at (a plain
    counter) rather than a length array incremented at every step.
    """

    def __init__(self, num_envs: int) -> None:
        self._return = np.zeros(num_envs, dtype=np.float64)
        self._steps = 0  # vector steps folded in so far
        self._start = np.zeros(num_envs, dtype=np.int64)  # ``_steps`` when each env's episode began
        self._finished: deque[FinishedEpisode] = deque(maxlen=WINDOW)
        self.episodes = 0
        """Episodes finished since the start."""

    def add(self, reward: np.ndarray, done: np.ndarray, success: np.ndarray | None = None) -> list[FinishedEpisode]:
        """Fold in one vector step and return the episodes it ended.

        ``success`` holds one flag per done env (in env order), or None when not reported.
        """
        self._return += reward
        self._steps += 1
        rows = done.nonzero()[0]  # not done.any() + np.flatnonzero: 0.2 us instead of 1.9 us
        if not len(rows):  # nothing ended
            return []
        flags = [None] * len(rows) if success is None else [bool(flag) for flag in success]
        ended = []
        # env by env, not with fancy indexing: one or two episodes end per vector step, and one
        # takes 1.9 us instead of 3.2 us this way (all 8 of 8 envs at once: 5.9 us instead of 4.8)
        for env, flag in zip(rows.tolist(), flags, strict=True):
            ended.append(FinishedEpisode(env, float(self._return[env]), self._steps - int(self._start[env]), flag))
            self._return[env] = 0.0
            self._start[env] = self._steps
        self._finished.extend(ended)
        self.episodes += len(rows)
        return ended

    def restart(self) -> None:
        """Forget the episodes in progress (the envs were reset); finished ones stay."""
        self._return[:] = 0.0
        self._start[:] = self._steps

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
