"""Stacked-frame observations at rest: each frame stored once, each row a stack of frame indices.

An Atari row holds two stacks of 4 frames (``obs`` and ``next_obs``, ``uint8 [4, 84, 84]``) that
share 3 frames with each other and with the rows before and after. Written as stacks, a dataset
of 1M such rows is 56 GB; with every frame once (what the replay buffer's
:class:`~rlpipe.data.buffer.FrameStore` keeps) it is about 7 GB. :class:`FrameStacks` is that
form: ``frames`` ``[F, *frame]`` and ``index`` ``int32 [N, K]``, row ``i``'s stack being
``frames[index[i]]``. Indexing it gathers stacks; it is read as an array only where asked.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlpipe.data.buffer.frames import unique_frames
from rlpipe.data.dataset.errors import DatasetError

__all__ = ["FrameStacks", "holds_frame_stacks", "joined_stacks", "to_frame_stacks"]

STACK_FIELDS = ("obs", "next_obs")
"""The columns a dataset keeps as frame stacks (both share one frames array)."""
MAX_FRAMES = 2**31 - 1
"""The most distinct frames a dataset holds: its stack index is int32."""


@dataclass(frozen=True)
class FrameStacks:
    """``N`` stacks of ``K`` frames: ``frames`` ``[F, *frame]`` and ``index`` ``[N, K]`` (row ``i`` is
    ``frames[index[i]]``). It quacks like the ``[N, K, *frame]`` array it stands for: ``shape``,
    ``dtype``, ``len`` and ``stacks[rows]`` (a new array); :meth:`take` keeps the form."""

    frames: np.ndarray
    index: np.ndarray

    def __post_init__(self) -> None:
        if self.index.ndim != 2 or not np.issubdtype(self.index.dtype, np.integer):
            raise ValueError(f"frame stack index must be integers [rows, stack], got {self.index.dtype} "
                             f"{list(self.index.shape)}")

    @property
    def shape(self) -> tuple[int, ...]:
        return (*self.index.shape, *self.frames.shape[1:])

    @property
    def dtype(self) -> np.dtype:
        return self.frames.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, rows: Any) -> np.ndarray:
        return self.frames[self.index[rows]]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        """Every stack as one array (``N x K`` frames in memory: for small data and tests)."""
        stacks = self.frames[self.index]
        return stacks if dtype is None else stacks.astype(dtype, copy=False)

    def take(self, rows: np.ndarray) -> FrameStacks:
        """The stacks of ``rows`` in the same form (the frames are shared, not copied)."""
        return FrameStacks(self.frames, self.index[rows])


def to_frame_stacks(columns: Mapping[str, Any]) -> dict[str, FrameStacks]:
    """``obs`` and ``next_obs`` (stacks ``[N, K, *frame]``) as :class:`FrameStacks` sharing one frames array,
    each distinct frame once (matched by content, checked byte for byte)."""
    stacks = [np.asarray(columns[name]) for name in STACK_FIELDS]
    if stacks[0].shape != stacks[1].shape or stacks[0].ndim < 3:
        raise ValueError(f"frame stacks need obs and next_obs of one shape [rows, stack, *frame], got "
                         f"{stacks[0].shape} and {stacks[1].shape}")
    rows, stack, *frame = stacks[0].shape
    frames, index = unique_frames(np.concatenate([s.reshape(-1, *frame) for s in stacks]))
    index = index.reshape(2, rows, stack)
    return {name: FrameStacks(frames, index[i]) for i, name in enumerate(STACK_FIELDS)}


def joined_stacks(parts: Sequence[Mapping[str, FrameStacks]]) -> dict[str, FrameStacks]:
    """Parts (each ``obs`` and ``next_obs`` sharing one frames array) joined row-wise into one pair over
    one frames array that holds only the frames some row uses, part after part, each part's in the order
    of its own frames array."""
    frames: list[np.ndarray] = []
    indices: dict[str, list[np.ndarray]] = {name: [] for name in STACK_FIELDS}
    offset = 0
    for part in parts:
        pair = [part[name] for name in STACK_FIELDS]
        if pair[0].frames is not pair[1].frames:
            raise ValueError("obs and next_obs of a part must share one frames array")
        used, inverse = np.unique(np.concatenate([p.index.reshape(-1) for p in pair]), return_inverse=True)
        frames.append(pair[0].frames[used])
        inverse = inverse.reshape(2, *pair[0].index.shape).astype(np.int64) + offset
        for i, name in enumerate(STACK_FIELDS):
            indices[name].append(inverse[i])
        offset += len(used)
    if offset > MAX_FRAMES:
        raise DatasetError(f"a dataset holds at most {MAX_FRAMES} distinct frames, these parts use {offset}")
    joined = np.concatenate(frames) if len(frames) > 1 else frames[0]
    return {name: FrameStacks(joined, np.concatenate(indices[name]).astype(np.int32)) for name in STACK_FIELDS}


def holds_frame_stacks(columns: Mapping[str, Any]) -> bool:
    """Whether ``columns`` hold their observations as :class:`FrameStacks`."""
    return any(isinstance(columns.get(name), FrameStacks) for name in STACK_FIELDS)
