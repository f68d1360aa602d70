"""N-step transitions from per-step rows of several environments, computed vectorised.

For step ``t`` of one environment's episode, with ``k = min(n, steps left in the episode)``:

- ``reward`` = ``sum_{i<k} gamma^i r_{t+i}``,
- ``next_obs``, ``terminated``, ``truncated`` (and every ``next_*`` or ``done`` field) are those
  of step ``t+k-1`` -- so ``next_obs`` is the observation at ``t+k``,
- ``value_gamma`` = ``gamma^k``: the discount of the bootstrap value, which the learner
  applies unless ``terminated`` (a truncated episode is bootstrapped).

Other fields are step ``t``'s. Rows of different environments never mix. A step whose
window is not complete yet (fewer than ``n`` steps seen and the episode still running) is
held and emitted by a later call, so the output covers each input step exactly once. Rows
are real transitions: failed environment steps were resolved by the collector
(:mod:`rlpipe.data.failed_steps`).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from rlpipe.utils.batch import reject_failed_steps, terminated_of

Batch = dict[str, np.ndarray]
REQUIRED = ("env_id", "reward", "terminated", "truncated")
_SEQ = "__seq__"


def _last_step_field(name: str) -> bool:
    return name in ("terminated", "truncated", "done") or name.startswith("next_")


class NStepAccumulator:
    """Turns batches of one-step rows into n-step transitions, holding unfinished windows."""

    def __init__(self, nstep: int, gamma: float) -> None:
        if nstep < 1:
            raise ValueError(f"nstep must be >= 1, got {nstep}")
        if not 0 < gamma <= 1:
            raise ValueError(f"discount_factor must be in (0, 1], got {gamma}")
        self.nstep = int(nstep)
        self.gamma = float(gamma)
        self._pending: Batch | None = None
        self._next_seq = 0

    @property
    def pending_count(self) -> int:
        """Steps held until their n-step window completes."""
        return 0 if self._pending is None else len(self._pending[_SEQ])

    def reset(self) -> None:
        """Drop the held steps (e.g. when the environments are reset)."""
        self._pending = None

    def add(self, batch: Mapping[str, np.ndarray]) -> Batch:
        """Add time-ordered rows; return every transition whose window is now complete, oldest first."""
        if "terminated" not in batch and "done" in batch:  # the seed's rows: terminated = done, nothing truncated
            done = np.asarray(terminated_of(batch, "n-step"))
            batch = {**batch, "terminated": done, "truncated": np.zeros_like(done)}
        missing = [key for key in REQUIRED if key not in batch]
        if missing:
            raise ValueError(f"n-step needs fields {REQUIRED}; missing {missing}")
        reject_failed_steps(batch, "n-step")
        rows = {key: np.asarray(value) for key, value in batch.items()}
        n_new = len(rows["reward"])
        rows[_SEQ] = np.arange(self._next_seq, self._next_seq + n_new, dtype=np.int64)
        self._next_seq += n_new
        if self._pending is not None:
            if self._pending.keys() != rows.keys():
                raise ValueError(
                    f"n-step rows changed fields: held {sorted(self._pending)}, got {sorted(rows)}"
                )
            rows = {key: np.concatenate([self._pending[key], rows[key]]) for key in rows}
        ready, held = self._split(rows)
        self._pending = held if len(held[_SEQ]) else None
        out = {key: value for key, value in ready.items() if key != _SEQ}
        return out

    def _split(self, rows: Batch) -> tuple[Batch, Batch]:
        """Compute the n-step transitions that are ready, and the rows still to hold."""
        order = np.argsort(rows["env_id"], kind="stable")  # groups envs, keeps time order
        env = rows["env_id"][order]
        done = (rows["terminated"] | rows["truncated"])[order]
        total = len(order)
        new_segment = np.ones(total, dtype=bool)
        new_segment[1:] = (env[1:] != env[:-1]) | done[:-1]
        segment = np.cumsum(new_segment) - 1
        starts = np.flatnonzero(new_segment)
        ends = np.append(starts[1:], total)  # one past each segment's last row
        seg_end = ends[segment]
        steps = np.minimum(self.nstep, seg_end - np.arange(total))  # k per row
        closed = done[seg_end - 1]
        is_ready = closed | (steps == self.nstep)

        pos = np.arange(total)[is_ready]
        k = steps[is_ready]
        reward = rows["reward"][order]
        n_step_reward = np.zeros(len(pos), dtype=np.float64)
        for i in range(self.nstep):
            within = i < k
            n_step_reward[within] += self.gamma**i * reward[pos[within] + i]
        last = order[pos + k - 1]
        first = order[pos]
        ready = {key: (value[last] if _last_step_field(key) else value[first]) for key, value in rows.items()}
        ready["reward"] = n_step_reward.astype(reward.dtype if reward.dtype.kind == "f" else np.float32)
        ready["value_gamma"] = (self.gamma**k).astype(np.float32)
        by_time = np.argsort(ready[_SEQ], kind="stable")
        ready = {key: value[by_time] for key, value in ready.items()}
        held_rows = np.sort(order[~is_ready])
        held = {key: value[held_rows] for key, value in rows.items()}
        return ready, held
