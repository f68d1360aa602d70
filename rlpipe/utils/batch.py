"""Small helpers on columnar batches (``dict[str, np.ndarray]`` with a leading batch dim)."""
from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

Batch = dict[str, np.ndarray]
logger = logging.getLogger(__name__)


def concat_batches(batches: Sequence[Mapping[str, np.ndarray]]) -> Batch:
    """Concatenate batches with the same fields along the leading dimension."""
    if not batches:
        raise ValueError("concat_batches needs at least one batch")
    return {key: np.concatenate([b[key] for b in batches]) for key in batches[0]}


def stack_rows(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A list of transition dicts (the seed's form) as one columnar batch, converted once.

    Fields that are torch tensors are stacked with ``torch.stack`` (the caller's type is kept),
    anything else with ``np.stack``. Every row must have the same fields.
    """
    if not rows:
        raise ValueError("stack_rows needs at least one row")
    keys = rows[0].keys()
    for i, row in enumerate(rows):
        if row.keys() != keys:
            raise ValueError(f"transition {i} has fields {sorted(row)}, transition 0 has {sorted(keys)}")
    out: dict[str, Any] = {}
    for key in keys:
        values = [row[key] for row in rows]
        out[key] = torch.stack(values) if isinstance(values[0], torch.Tensor) else np.stack(values)
    return out


def batch_nbytes(batch: Mapping[str, Any]) -> int:
    """Bytes held by a batch's arrays (fields without ``nbytes`` count 0)."""
    return sum(int(getattr(value, "nbytes", 0)) for value in batch.values())


def num_rows(batch: Mapping[str, np.ndarray]) -> int:
    """Rows in a batch (the leading dimension of its first field)."""
    return len(next(iter(batch.values())))


FAILED_STEP = "env_error"
"""Column of collected steps: True where the environment raised and was recreated. Such a
row is a placeholder (reward 0, ``next_obs`` = ``obs``), not a transition; see
:func:`end_episodes_at_failed_steps`."""


def reject_failed_steps(batch: Mapping[str, Any], who: str) -> None:
    """ValueError when ``batch`` still holds failed-step placeholders: the collectors resolve
    them (see :mod:`rlpipe.data.failed_steps`), and rows taken straight from a vector env
    would otherwise be stored as real transitions."""
    if FAILED_STEP in batch:
        raise ValueError(
            f"{who} got rows with an '{FAILED_STEP}' column (raw vector-env steps); collect them with "
            "StepCollector or EpisodeCollector, which drop failed steps and end their episodes"
        )


def step_before(env_id: np.ndarray) -> np.ndarray:
    """For each row, the row before it of the same environment (rows in time order per env), or -1."""
    order = np.argsort(env_id, kind="stable")
    same_env = env_id[order][1:] == env_id[order][:-1]
    before = np.full(len(env_id), -1, dtype=np.int64)
    before[order[1:][same_env]] = order[:-1][same_env]
    return before


def end_episodes_at_failed_steps(batch: Mapping[str, np.ndarray]) -> Batch:
    """``batch`` without its failed-step rows and without the :data:`FAILED_STEP` column.

    A failed step's episode ends at the step before: that row of the same ``env_id`` (if it
    is in ``batch``, not failed itself and not already an episode's end) becomes
    ``truncated``, so n-step windows and episodes stop there, and its ``next_obs``, the last
    good observation, is what a learner bootstraps from. Rows must be in time order within
    each environment.
    """
    out = {key: value for key, value in batch.items() if key != FAILED_STEP}
    if FAILED_STEP not in batch:
        return out
    failed = np.asarray(batch[FAILED_STEP], dtype=bool)
    if not failed.any():
        return out
    env = batch["env_id"] if "env_id" in batch else np.zeros(len(failed), dtype=np.int64)
    before = step_before(env)[failed]
    before = before[before >= 0]
    ended = failed | out["terminated"] | out["truncated"]
    truncated = out["truncated"].copy()
    truncated[before[~ended[before]]] = True
    out["truncated"] = truncated
    return {key: value[~failed] for key, value in out.items()}


SEED_DONE_WARNING = (
    "a batch has the seed's 'done' and no 'terminated': read as terminated = done, so episodes cut by a "
    "time limit are not bootstrapped (a bias); give 'terminated' and 'truncated' (gymnasium's step) instead"
)
_warned_done = False


def terminated_of(batch: Mapping[str, Any], who: str) -> Any:
    """The ``terminated`` column of ``batch``, or the seed's ``done`` in its place.

    DI-engine's transitions say ``done``, which mixes the end of an episode by a terminal state
    with a cut by a time limit; read as ``terminated`` the latter is not bootstrapped, so it is
    accepted with one warning per process. A batch with neither is one line naming the fields.
    """
    global _warned_done
    if "terminated" in batch:
        return batch["terminated"]
    if "done" in batch:
        if not _warned_done:
            _warned_done = True
            logger.warning(SEED_DONE_WARNING)
        return batch["done"]
    raise ValueError(f"{who} needs a 'terminated' field (with 'truncated', or the seed's 'done'); "
                     f"the batch has {sorted(batch)}")
