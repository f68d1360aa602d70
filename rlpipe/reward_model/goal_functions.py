"""How HER calls the goal functions a user gives: per transition (the seed's way) or batched.

The seed (DI-engine) calls ``split_func``, ``merge_func`` and ``goal_reward_func`` once per
transition, with one observation or goal (``[D]``, ``[S]``, ``[G]``), and its users write them
that way: ``torch.chunk(x, 2)``, ``x[:n]``, a reward of ``torch.FloatTensor([1])``. rlpipe calls
a user's function the same way unless it is batched (``HerRewardModel(..., batched=True)``,
or the function is marked with :func:`rlpipe.batched`); then it is called once on the whole
batch (``[B, D]``, ...). The HER core itself works on numpy columns ``[B, ...]``: the adapters
here give it batched numpy functions either way.

Per transition, a function receives one row of the episode's kind (a numpy row, or a torch
tensor row for tensor episodes) and may return numpy arrays, torch tensors or anything
``np.asarray`` reads; a reward may be a number, a bool, or a 0-d or 1-element array or
tensor. Rows are stacked back into columns (``torch.stack`` when every row is a tensor). The
cost is one Python call per row and function (``benchmarks/her.py`` measures it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
import torch

__all__ = [
    "GoalRewardFunc",
    "MergeFunc",
    "Rows",
    "SplitFunc",
    "as_numpy",
    "numpy_rows",
    "per_row_merge",
    "per_row_reward",
    "per_row_split",
    "tensor_batched",
    "tensor_rows",
]

# Goal functions take and return arrays of the episode's kind: numpy arrays, or torch tensors
# for tensor episodes; per transition they take one row, batched a leading batch axis.
SplitFunc = Callable[[Any], tuple[Any, Any, Any]]
MergeFunc = Callable[[Any, Any], Any]
GoalRewardFunc = Callable[[Any, Any], Any]
Rows = Callable[[np.ndarray], Iterable[Any]]
"""The rows of a numpy column, in the kind a per-transition function receives."""

_ROW_BLOCK = 1024

def as_numpy(value: Any) -> np.ndarray:
    """A numpy array of an array, a tensor (a view when it is on the CPU) or a Python value."""
    if isinstance(value, np.ndarray):  # first: the pipeline's own data, on the hot path
        return value
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    return np.asarray(value)


def numpy_rows(column: np.ndarray) -> Iterable[np.ndarray]:
    """Rows of a numpy column as numpy views (for numpy episodes)."""
    return iter(column)


def tensor_rows(column: np.ndarray) -> Iterator[torch.Tensor]:
    """Rows of a numpy column as CPU tensor views (for tensor episodes), made a block at a time:
    a whole column of live row tensors makes Python's garbage collector rescan them again and
    again (twice the time of the per-row calls on 15,000 rows)."""
    tensor = torch.from_numpy(column)
    for start in range(0, len(tensor), _ROW_BLOCK):
        yield from tensor[start : start + _ROW_BLOCK].unbind(0)


def tensor_batched(func: Callable[..., Any]) -> Callable[..., Any]:
    """A batched function written for tensors, called with tensor views of numpy columns;
    its result(s) as numpy arrays."""

    def on_numpy(*columns: np.ndarray) -> Any:
        result = func(*(torch.from_numpy(column) for column in columns))
        if isinstance(result, (tuple, list)):
            return tuple(as_numpy(part) for part in result)
        return as_numpy(result)

    return on_numpy


def per_row_split(func: SplitFunc, rows: Rows) -> Callable[[np.ndarray], tuple[np.ndarray, ...]]:
    """``split_func`` written for one observation, applied row by row to ``x [B, D]``."""

    def split(x: np.ndarray) -> tuple[np.ndarray, ...]:
        parts = [func(row) for row in rows(x)]
        for part in parts:
            if not isinstance(part, (tuple, list)) or len(part) != 3:
                got = f"{len(part)} values" if isinstance(part, (tuple, list)) else type(part).__name__
                raise ValueError(
                    f"split_func returned {got} for one observation; expected (state, desired_goal, achieved_goal)"
                )
        return tuple(_stack(column, "split_func") for column in zip(*parts, strict=True))

    return split


def per_row_merge(func: MergeFunc, rows: Rows) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """``merge_func`` written for one state and goal, applied row by row to ``[B, S]``, ``[B, G]``."""

    def merge(state: np.ndarray, goal: np.ndarray) -> np.ndarray:
        return _stack([func(s, g) for s, g in zip(rows(state), rows(goal), strict=True)], "merge_func")

    return merge


def per_row_reward(func: GoalRewardFunc, rows: Rows) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """``goal_reward_func`` written for one achieved and desired goal, applied row by row:
    ``[B, G]``, ``[B, G]`` -> float32 ``[B]``."""

    def reward(achieved_goal: np.ndarray, desired_goal: np.ndarray) -> np.ndarray:
        values = (_scalar(func(a, g)) for a, g in zip(rows(achieved_goal), rows(desired_goal), strict=True))
        return np.fromiter(values, dtype=np.float32, count=len(achieved_goal))

    return reward


def _scalar(value: Any) -> Any:
    """The Python number in one transition's reward: a number, a bool, or a 1-element array/tensor."""
    if isinstance(value, (int, float)):  # bool included
        return value
    try:
        return value.item()  # numpy and torch scalars and 1-element arrays
    except (AttributeError, ValueError, RuntimeError):
        array = np.asarray(value)
    if array.size != 1:
        raise ValueError(
            f"goal_reward_func returned a {type(value).__name__} of shape {tuple(array.shape)} for one "
            f"transition; expected a number, a bool or a 1-element array or tensor (for a function "
            f"that rewards a whole batch, pass batched=True to HerRewardModel or mark it with rlpipe.batched)"
        )
    return array.item()


def _stack(results: Sequence[Any], name: str) -> np.ndarray:
    """Per-row results as one numpy column; rows of different shapes are one clear error."""
    try:
        if all(isinstance(result, torch.Tensor) for result in results):
            return torch.stack(list(results)).detach().cpu().numpy()
        return np.array([as_numpy(result) for result in results])  # faster than np.stack for many rows
    except (RuntimeError, ValueError):
        shapes = sorted({tuple(np.shape(as_numpy(result))) for result in results})
        raise ValueError(
            f"{name} returned rows of different shapes {shapes}; a function written for one "
            f"transition must return the same shape for every row"
        ) from None
