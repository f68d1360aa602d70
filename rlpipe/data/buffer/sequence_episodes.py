"""Which sequences a push of steps completes: each env's open episode, followed across pushes.

Rows come from many envs at once (a vector step is one row per env) and interleave in the
buffer's ring, so an episode's rows are not adjacent there. :class:`EpisodeTracker` follows each
env's current episode and, for every push, returns the sequences the push completes, with the
row ids of their steps:

- sequences start at episode steps ``0, stride, 2 * stride, ...`` and never cross an episode's end;
- a sequence is complete when it has ``sequence_len`` steps (the row of its last step completes it),
  or when its episode ends first (an ended episode's row completes every sequence still open in it,
  each shorter than ``sequence_len``).

Per env it keeps three numbers and the row ids of its last ``sequence_len`` steps (a *lane*, a ring
by the env's step count): a completed sequence's older steps are read from the lane, its newer ones
from the push. A push is processed without a Python loop over its rows: rows are grouped by env (a
stable sort), and episode positions come from a running maximum over the group.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np


class Completed(NamedTuple):
    """Sequences a push completed, in the order they completed (their last row's, then by start)."""

    rows: np.ndarray
    """int64 [M, T]: row id of each step; -1 after a sequence's length."""
    length: np.ndarray
    """int64 [M]: real steps of each sequence (1..T)."""

    @property
    def first_row(self) -> np.ndarray:
        """int64 [M]: row id of each sequence's first step."""
        return self.rows[:, 0]

    def flat_rows(self, keep: np.ndarray) -> np.ndarray:
        """The real row ids of the ``keep`` sequences, one sequence after the other."""
        rows = self.rows[keep]
        return rows[rows >= 0]


class _Grouped(NamedTuple):
    """A push's rows sorted by env (``order``), each env's rows in time order."""

    order: np.ndarray
    g: np.ndarray
    """Group (index into the push's distinct envs) of each sorted row."""
    env_rows: np.ndarray
    """Per-env array row of each group."""
    sizes: np.ndarray
    group_start: np.ndarray
    rank: np.ndarray
    """Each sorted row's place in its group."""
    env: np.ndarray
    """Per-env array row of each sorted row."""
    steps_before: np.ndarray
    """Each group's env step count before this push."""
    k: np.ndarray
    """Each sorted row's step count in its env."""
    row_ids: np.ndarray


class EpisodeTracker:
    """Each env's open episode: how many steps it has, and the row ids of its last steps."""

    _dense: dict[int, int]
    _env_ids: np.ndarray
    _steps: np.ndarray
    _episode_start: np.ndarray
    _lane: np.ndarray

    def __init__(self, sequence_len: int, stride: int) -> None:
        self.sequence_len = sequence_len
        self.stride = stride
        self.clear()

    @property
    def envs(self) -> int:
        """Envs seen since the last clear."""
        return len(self._dense)

    def _dense_rows(self, env_ids: np.ndarray) -> np.ndarray:
        """Rows of the per-env arrays for ``env_ids`` (distinct), added for envs not seen yet."""
        new = [int(env) for env in env_ids.tolist() if int(env) not in self._dense]
        if new:
            start = len(self._dense)
            for i, env in enumerate(new):
                self._dense[env] = start + i
            self._grow(start + len(new))
            self._env_ids[start : start + len(new)] = new
        return np.array([self._dense[int(env)] for env in env_ids.tolist()], dtype=np.int64)

    def _grow(self, needed: int) -> None:
        capacity = len(self._steps)
        if needed <= capacity:
            return
        capacity = max(needed, 2 * capacity, 8)
        old = len(self._steps)
        self._env_ids = np.resize(self._env_ids, capacity)
        self._steps = np.concatenate([self._steps, np.zeros(capacity - old, dtype=np.int64)])
        self._episode_start = np.concatenate([self._episode_start, np.zeros(capacity - old, dtype=np.int64)])
        lane = np.full((capacity, self.sequence_len), -1, dtype=np.int64)
        lane[:old] = self._lane
        self._lane = lane

    def push(self, env_id: np.ndarray, done: np.ndarray, first_row: int) -> Completed:
        """Follow rows ``first_row, first_row + 1, ...`` of envs ``env_id`` (int64 [N]), each ending
        its episode where ``done`` (bool [N]); rows of one env are in time order. Returns the
        sequences they complete."""
        T, stride = self.sequence_len, self.stride
        gr = self._group(env_id, first_row)
        ended = done[gr.order]
        # Episode position: steps since the latest episode start. A row right after an ended row starts an
        # episode at its rank (> 0 within a group; rank 0, a group's first row, reads as "no start in this
        # push"). A running maximum carries the latest start forward; an offset of g * (n + 1) per group
        # keeps one group's starts from leaking into the next.
        after_end = np.zeros(len(ended), dtype=bool)
        after_end[1:] = ended[:-1]
        offset = gr.g * (len(ended) + 1)
        started = np.maximum.accumulate(np.where(after_end, gr.rank, 0) + offset) - offset
        position = np.where(started > 0, gr.rank - started, gr.k - self._episode_start[gr.env])

        full = np.flatnonzero((position >= T - 1) & ((position - (T - 1)) % stride == 0))
        ends, starts = self._short(np.flatnonzero(ended), position)
        at = np.concatenate([full, ends])
        start = np.concatenate([position[full] - (T - 1), starts])
        length = position[at] - start + 1
        by_completion = np.lexsort((start, gr.order[at]))
        at, length = at[by_completion], length[by_completion]
        rows = self._rows(gr, at, length)

        last = gr.group_start + gr.sizes - 1  # each env's newest row
        self._steps[gr.env_rows] += gr.sizes
        self._episode_start[gr.env_rows] = np.where(ended[last], gr.k[last] + 1, gr.k[last] - position[last])
        recent = gr.rank >= gr.sizes[gr.g] - T  # each env's last T rows: distinct lane cells
        self._lane[gr.env[recent], gr.k[recent] % T] = gr.row_ids[recent]
        return Completed(rows, length)

    def _group(self, env_id: np.ndarray, first_row: int) -> _Grouped:
        """The push's rows grouped by env (a stable sort keeps each env's rows in time order)."""
        uniq, group_of = np.unique(env_id, return_inverse=True)
        group_of = group_of.reshape(-1)
        env_rows = self._dense_rows(uniq)
        order = np.argsort(group_of, kind="stable")
        g = group_of[order]
        sizes = np.bincount(group_of, minlength=len(uniq))
        group_start = np.cumsum(sizes) - sizes
        rank = np.arange(len(env_id)) - group_start[g]
        env = env_rows[g]
        steps_before = self._steps[env_rows]
        k = steps_before[g] + rank
        return _Grouped(order, g, env_rows, sizes, group_start, rank, env, steps_before, k, first_row + order)

    def _short(self, ended: np.ndarray, position: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For rows ``ended`` (that end their episode), each sequence they cut short: the row that
        completes it (repeated per sequence) and its start position. A sequence of full length that
        such a row completes is not one of them."""
        T, stride = self.sequence_len, self.stride
        last = position[ended]
        first_start = -(-np.maximum(last - T + 2, 0) // stride)  # ceil: the oldest start still open
        count = np.maximum(last // stride - first_start + 1, 0)
        rows = np.repeat(ended, count)
        within = np.arange(len(rows)) - np.repeat(np.cumsum(count) - count, count)
        return rows, (np.repeat(first_start, count) + within) * stride

    def _rows(self, gr: _Grouped, at: np.ndarray, length: np.ndarray) -> np.ndarray:
        """Row ids [M, T] of the sequences ending at grouped rows ``at``: steps from before this push
        come from the env's lane, the others from the push."""
        T = self.sequence_len
        t = np.arange(T)
        before = gr.steps_before[gr.g[at]][:, None]
        step = (gr.k[at] - length + 1)[:, None] + t
        in_push = np.clip(gr.group_start[gr.g[at]][:, None] + (step - before), 0, max(len(gr.k) - 1, 0))
        from_lane = self._lane[gr.env[at][:, None], step % T]
        rows = np.where(step >= before, gr.row_ids[in_push], from_lane)
        rows[t >= length[:, None]] = -1
        return rows

    def clear(self) -> None:
        """Forget every env's episode (the next row of an env starts a new one)."""
        self._dense = {}
        """env id -> row of the per-env arrays."""
        self._env_ids = np.zeros(0, dtype=np.int64)
        self._steps = np.zeros(0, dtype=np.int64)
        """Rows each env has pushed (its step count)."""
        self._episode_start = np.zeros(0, dtype=np.int64)
        """The step count at which each env's current episode started."""
        self._lane = np.full((0, self.sequence_len), -1, dtype=np.int64)
        """Row id of each env's step ``k`` at ``[env, k % sequence_len]`` (its last T steps)."""

    # ---- state -----------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Each env's id, step count, episode start and lane (numpy arrays)."""
        n = self.envs
        return {
            "env_ids": self._env_ids[:n].copy(),
            "steps": self._steps[:n].copy(),
            "episode_start": self._episode_start[:n].copy(),
            "lane": self._lane[:n].copy(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` returned; ValueError (changing nothing) if it does not fit."""
        env_ids = np.asarray(state["env_ids"])
        n = len(env_ids)
        shapes = {"env_ids": (n,), "steps": (n,), "episode_start": (n,), "lane": (n, self.sequence_len)}
        for key, shape in shapes.items():
            value = np.asarray(state[key])
            if value.shape != shape or value.dtype.kind not in "iu":
                raise ValueError(f"episode state '{key}' has {value.dtype} of shape {value.shape}, expected {shape}")
        if len(set(env_ids.tolist())) != n:
            raise ValueError("episode state 'env_ids' repeats an env")
        self.clear()
        self._grow(n)
        self._dense = {int(env): i for i, env in enumerate(env_ids.tolist())}
        self._env_ids[:n] = env_ids
        self._steps[:n] = state["steps"]
        self._episode_start[:n] = state["episode_start"]
        self._lane[:n] = state["lane"]
