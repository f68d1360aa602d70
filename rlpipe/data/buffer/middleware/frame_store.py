"""FrameStore: stacked-frame observations kept one frame at a time, stacks rebuilt when read.

An Atari transition holds two stacks of 4 frames (``obs`` and ``next_obs``, ``uint8 [4, 84, 84]``)
but brings one new frame: consecutive stacks share 3 frames, and ``next_obs`` is the next
``obs``. This middleware replaces each stack field by the ring slots ``int32 [K]`` of its
frames and writes only the frames it does not hold yet (:class:`~rlpipe.data.buffer.frames.FrameRing`,
found by content, checked byte for byte), so a transition costs about one frame. Reading
(``get``, ``sample``, ``sample_batch``) gathers the frames back into stacks: exactly the
arrays pushed, whatever the env's frame stack did at an episode's start (padding with the
reset frame or with zeros), at an episode's end (``next_obs`` is the final observation, also
when truncated) or with n-step rows (``next_obs`` n steps later). Content, not ``env_id``,
links the frames: rows of many envs, or of several collectors whose env ids repeat, need no
bookkeeping, and equal frames of different envs are stored once.

Freeing: frames are overwritten in ring order. A transition may use frames written up to
``window`` frames before it, so the frame ring holds ``frame_capacity`` = ``size + size // 50 +
window`` frames by default: enough while episodes average 50 steps or more (an episode brings
one frame per step and one more, its first or last). When shorter episodes need more, the
**oldest transitions are deleted before their frames are overwritten**: the buffer then holds
fewer than ``size`` transitions (``evicted`` counts them, and the first eviction is logged
with the advice to raise ``frame_capacity``). A stored transition never shows an overwritten
frame.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from rlpipe.data.buffer.base import BufferedData, BufferMiddleware, Chain, SampledBatch, SlotBuffer, flat_items
from rlpipe.data.buffer.frames import FramePlan, FrameRing
from rlpipe.data.buffer.persist import BufferFileError

DEFAULT_WINDOW = 2048
"""Frames looked back for a match: at least (stack + n-step + 1) x the envs whose rows interleave."""

logger = logging.getLogger(__name__)


def default_frame_capacity(size: int, window: int = DEFAULT_WINDOW) -> int:
    """Frames a store for ``size`` transitions holds by default (see the module docstring)."""
    return int(size) + int(size) // 50 + int(window)


def frame_store_nbytes(
    size: int, frame_shape: Sequence[int], stack: int, itemsize: int = 1, frame_capacity: int | None = None
) -> int:
    """Bytes a full store takes for its frames and frame columns (not the other fields): for a
    memory check before anything is allocated."""
    frames = default_frame_capacity(size) if frame_capacity is None else int(frame_capacity)
    frame_bytes = int(np.prod(frame_shape, dtype=np.int64)) * itemsize
    return frames * frame_bytes + size * (2 * stack * 4 + 8)  # two slot columns, one floor each


def _rows(batch: Mapping[str, Any], part: slice) -> dict[str, Any]:
    return {key: value[part] for key, value in batch.items()}


def _one_frame_apart(first: np.ndarray, second: np.ndarray) -> bool:
    """Whether each stack of ``second`` (slots ``[..., K]``) is the same row's stack of ``first``
    moved on by one frame, as a 1-step row's ``next_obs`` is its ``obs``."""
    return first.shape == second.shape and first.shape[-1] > 1 and np.array_equal(first[..., 1:], second[..., :-1])


def _stack_part(window: np.ndarray, axis: int, start: int) -> np.ndarray:
    """The K stacked frames from ``start`` of each row's K + 1 frames in ``window`` (a view)."""
    part = [slice(None)] * window.ndim
    part[axis] = slice(start, start + window.shape[axis] - 1)
    return window[tuple(part)]


class FrameStore(BufferMiddleware):
    """Keeps the frames of stacked observation fields once; see the module docstring.

    ``fields``: the stack fields (each ``[K, *frame]``, one shape and dtype for all). The stack
    shape is taken from the first push (``push_batch``: a field's shape after the batch dim;
    ``push``: its shape) unless ``stack_shape`` is given; later values may add leading dims
    (e.g. a whole episode ``[T, K, *frame]`` pushed as one item). Use it on the buffer it is
    given; with priority replay it may come before or after it in the chain. The buffer must be
    a FIFO ring like ``DequeBuffer``: indices count up, and an item ``size`` indices older than
    the newest is gone (the store keeps one int64 per item at ``index % size``).
    """

    def __init__(
        self,
        buffer: SlotBuffer,
        frame_capacity: int | None = None,
        window: int = DEFAULT_WINDOW,
        fields: Sequence[str] = ("obs", "next_obs"),
        stack_shape: Sequence[int] | None = None,
    ) -> None:
        if not fields:
            raise ValueError("FrameStore needs at least one stack field")
        self.buffer = buffer
        self.fields = tuple(fields)
        self.ring = FrameRing(default_frame_capacity(buffer.size, window) if frame_capacity is None
                              else int(frame_capacity), window)
        self.stack_shape: tuple[int, ...] | None = None if stack_shape is None else tuple(stack_shape)
        self.torch_fields: set[str] = set()
        # per stored transition (by index % size): the oldest frame id it may use
        self._floor = np.zeros(buffer.size, dtype=np.int64)
        self._cursor = 0  # transitions below this index were freed or are gone
        self._next_index = 0  # one past the newest index pushed through here
        self.evicted = 0
        """Transitions deleted before the buffer's ring reached them, to free their frames."""

    @classmethod
    def reading(cls, buffer: SlotBuffer, frames: np.ndarray, fields: Sequence[str],
                stack_shape: Sequence[int]) -> FrameStore:
        """A store over ``frames`` already written (a dataset's, read-only): ``buffer``'s stack fields
        hold indices into them. For reading; nothing is pushed through it."""
        store = cls(buffer, frame_capacity=len(frames), window=0, fields=fields, stack_shape=stack_shape)
        store.ring.adopt(frames)
        return store

    # ---- writing -------------------------------------------------------------------
    def _stacks(self, data: Mapping[str, Any], batched: bool) -> dict[str, np.ndarray]:
        """The stack fields of ``data`` as numpy; ValueError naming a field that is missing or
        not a stack of the store's shape and dtype."""
        out = {}
        shape = self.stack_shape
        dtype = None if self.ring.frames is None else self.ring.frames.dtype
        for key in self.fields:
            if key not in data:
                raise ValueError(f"FrameStore: pushed data has no field '{key}' (its stacked frames)")
            value = data[key]
            if isinstance(value, torch.Tensor):
                self.torch_fields.add(key)
                value = value.numpy(force=True)
            value = np.asarray(value)
            if shape is None:
                shape = value.shape[1:] if batched else value.shape
            if len(shape) < 2 or value.shape[value.ndim - len(shape) :] != shape:
                raise ValueError(
                    f"FrameStore: field '{key}' has shape {value.shape}; expected stacks of shape "
                    f"{shape} (frames, *frame shape), e.g. (4, 84, 84)"
                )
            if dtype is None:
                dtype = value.dtype
            if value.dtype != dtype:
                raise ValueError(f"FrameStore: field '{key}' has dtype {value.dtype}, the stored frames are {dtype}")
            out[key] = value
        if self.ring.frames is None:
            assert shape is not None and dtype is not None
            self.stack_shape = shape
            self.ring.allocate(shape[1:], dtype)
        return out

    def _plan(self, stacks: Mapping[str, np.ndarray]) -> tuple[np.ndarray, FramePlan]:
        """The frames of ``stacks`` [M, *frame] in field order, and where each goes."""
        frame_shape = self.ring.frame_shape
        assert frame_shape is not None
        parts = [value.reshape(-1, *frame_shape) for value in stacks.values()]
        frames = np.ascontiguousarray(parts[0] if len(parts) == 1 else np.concatenate(parts))
        return frames, self.ring.plan(frames)

    @property
    def max_new_frames(self) -> int:
        """The most new frames one write may add: its transitions may use frames up to
        ``window`` back, which its own frames must not overwrite."""
        return self.ring.capacity - self.ring.window

    def _store(
        self, stacks: Mapping[str, np.ndarray], frames: np.ndarray, plan: FramePlan
    ) -> tuple[dict[str, np.ndarray], int]:
        """Write the new frames of ``plan`` (freeing transitions whose frames they overwrite);
        returns each field's slot array ``int32 [..., K]`` and the floor of these transitions."""
        ring = self.ring
        if plan.added > self.max_new_frames:
            raise ValueError(
                f"FrameStore: one pushed row or item brings {plan.added} new frames, more than the "
                f"{self.max_new_frames} a write may add (frame_capacity - window): raise frame_capacity"
            )
        floor = max(ring.next_id - ring.window, ring.base)  # the oldest frame a match may be
        self._free_before(ring.next_id + plan.added - ring.capacity)
        ring.commit(plan, frames)
        return self._slot_fields(stacks, plan), floor

    def _slot_fields(self, stacks: Mapping[str, np.ndarray], plan: FramePlan) -> dict[str, np.ndarray]:
        slots = self.ring.slots(plan.ids)
        out, start = {}, 0
        stack_ndim = len(self.ring.frame_shape or ())
        for key, value in stacks.items():
            lead = value.shape[: value.ndim - stack_ndim]
            count = int(np.prod(lead, dtype=np.int64))
            out[key] = slots[start : start + count].reshape(lead)
            start += count
        return out

    def _free_before(self, oldest: int) -> None:
        """Delete the stored transitions that may use frames with ids below ``oldest``.

        Floors never decrease with the index, so those transitions are the oldest ones: a
        binary search finds where they end.
        """
        size = self.buffer.size
        low = max(self._cursor, self._next_index - size)
        if low >= self._next_index or self._floor[low % size] >= oldest:
            self._cursor = low
            return
        lo, hi = low + 1, self._next_index  # the first index whose floor is >= oldest is in [lo, hi]
        while lo < hi:
            mid = (lo + hi) // 2
            if self._floor[mid % size] < oldest:
                lo = mid + 1
            else:
                hi = mid
        before = self.buffer.count()
        self.buffer.delete(np.arange(low, lo, dtype=np.int64))
        freed = before - self.buffer.count()
        if freed and not self.evicted:
            logger.warning(
                "FrameStore: the frame ring (%d frames) is full before the buffer's %d transitions: "
                "the oldest transitions are dropped early (episodes are shorter than the default "
                "frame_capacity allows); raise frame_capacity to keep them",
                self.ring.capacity,
                size,
            )
        self.evicted += freed
        self._cursor = lo

    def _record(self, ids: np.ndarray, floor: int) -> None:
        if len(ids):
            self._floor[ids % self.buffer.size] = floor
            self._next_index = max(self._next_index, int(ids[-1]) + 1)

    # ---- reading -------------------------------------------------------------------
    def _expand(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """``data`` with each stack field's slots replaced by the frames (a new dict).

        The fields are gathered into one new array: two arrays of about 1 MB (a batch of 32
        Atari stacks) allocated apart cost glibc fresh pages on every call, 0.8 ms of page
        faults instead of 0.05 ms of copying. When the second field's stacks are the first's
        moved on by one frame (``next_obs`` of 1-step rows), each row's K + 1 frames are gathered
        once and both fields are views of that array (5 frames per Atari row, not 8: a quarter
        less time); write into a copy, not into one field, where the other must stay as it is.
        """
        out = dict(data)
        keys = [key for key in self.fields if key in out]
        if not keys:
            return out
        slots = [np.asarray(out[key].numpy(force=True) if isinstance(out[key], torch.Tensor) else out[key])
                 for key in keys]
        if len(keys) == 2 and _one_frame_apart(*slots):
            window = self.ring.gather(np.concatenate([slots[0], slots[1][..., -1:]], axis=-1))
            axis = slots[0].ndim - 1  # the stack axis of the gathered frames
            gathered = [_stack_part(window, axis, start) for start in (0, 1)]
        elif len({part.shape for part in slots}) == 1:
            gathered = list(self.ring.gather(np.stack(slots)))
        else:
            gathered = [self.ring.gather(part) for part in slots]
        for key, frames in zip(keys, gathered, strict=True):
            out[key] = torch.from_numpy(frames) if key in self.torch_fields else frames
        return out

    def _expand_item(self, item: BufferedData) -> BufferedData:
        if isinstance(item.data, Mapping):
            item.data = self._expand(item.data)
        return item

    # ---- chain links ---------------------------------------------------------------
    def push(self, chain: Chain, data: Any, meta: dict[str, Any] | None) -> BufferedData:
        if not isinstance(data, Mapping):
            raise ValueError(f"FrameStore: pushed item must be a dict of fields, got {type(data).__name__}")
        stacks = self._stacks(data, batched=False)
        slots, floor = self._store(stacks, *self._plan(stacks))
        item = chain({**data, **slots}, meta)
        self._record(np.array([item.index], dtype=np.int64), floor)
        return BufferedData(data, item.index, item.meta)

    def push_batch(
        self, chain: Chain, batch: Mapping[str, np.ndarray], meta: Mapping[str, np.ndarray] | None
    ) -> np.ndarray:
        stacks = self._stacks(batch, batched=True)
        frames, plan = self._plan(stacks)
        n = len(stacks[self.fields[0]])
        if plan.added > self.max_new_frames and n > 1:  # in halves, each freeing what it overwrites
            half = n // 2
            return np.concatenate(
                [self.push_batch(chain, _rows(batch, part), None if meta is None else _rows(meta, part))
                 for part in (slice(0, half), slice(half, n))]
            )
        slots, floor = self._store(stacks, frames, plan)
        ids = chain({**batch, **slots}, meta)
        self._record(ids, floor)
        return ids

    def update(self, chain: Chain, index: int, data: Any, meta: dict[str, Any] | None) -> bool:
        # new frames are newer than the item's floor, which stays a valid bound
        if isinstance(data, Mapping) and any(key in data for key in self.fields):
            stacks = self._stacks(data, batched=False)
            data = {**data, **self._store(stacks, *self._plan(stacks))[0]}
        return chain(index, data, meta)

    def sample(self, chain: Chain, **kwargs: Any) -> list[Any]:
        result = chain(**kwargs)
        for item in flat_items(result):
            self._expand_item(item)
        return result

    def sample_batch(self, chain: Chain, **kwargs: Any) -> SampledBatch:
        batch = chain(**kwargs)
        return SampledBatch(self._expand(batch.data), batch.indices)

    def get(self, chain: Chain, idx: int) -> BufferedData:
        return self._expand_item(chain(idx))

    def get_by_index(self, chain: Chain, index: int) -> BufferedData:
        return self._expand_item(chain(index))

    def clear(self, chain: Chain) -> None:
        chain()
        self.ring.clear()
        self._cursor = self._next_index

    # ---- state ---------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The frame ring's state (its frames as a view: save them before the next push), the
        stack shape and the transitions' floors."""
        state = {f"ring.{key}": value for key, value in self.ring.state_dict().items()}
        state.update(
            {
                "fields": list(self.fields),
                "stack_shape": None if self.stack_shape is None else list(self.stack_shape),
                "torch_fields": sorted(self.torch_fields),
                "floor": self._floor.copy(),
                "cursor": self._cursor,
                "next_index": self._next_index,
                "evicted": self.evicted,
            }
        )
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        saved = (list(state["fields"]), int(state["ring.capacity"]))
        if saved != (list(self.fields), self.ring.capacity):
            raise BufferFileError(
                f"the buffer was saved with a FrameStore of fields {saved[0]} and frame_capacity {saved[1]}; "
                f"this buffer's FrameStore has {list(self.fields)} and {self.ring.capacity}"
            )
        self.ring.load_state_dict({key[5:]: value for key, value in state.items() if key.startswith("ring.")})
        self.stack_shape = None if state["stack_shape"] is None else tuple(state["stack_shape"])
        self.torch_fields = set(state["torch_fields"])
        self._floor[:] = state["floor"]
        self._cursor, self._next_index = int(state["cursor"]), int(state["next_index"])
        self.evicted = int(state["evicted"])
