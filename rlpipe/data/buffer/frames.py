"""A ring of frames stored once each, found by content: the storage behind :class:`FrameStore`.

Glossary
--------
frame
    One image of a stack (``uint8 [H, W]`` for Atari). A stacked observation ``[K, H, W]``
    is K frames; consecutive stacks of an episode share K-1 of them.
frame id
    A monotonic int64 given to each frame written; it lives in ring slot ``id % capacity``
    until ``capacity`` later frames overwrite it.
window
    How far back (in frame ids) a new frame is looked up by content. A frame equal to one of
    the last ``window`` frames is not written again: its id is reused. So every id a write
    hands out is at least ``next_id - window`` (taken before the write) -- the bound that
    lets :class:`FrameStore` free transitions before their frames are overwritten.

Content is matched by a 64-bit multilinear hash of the frame's bytes, and every match is
then checked byte for byte: a hash collision costs a frame written twice, never a wrong one.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

_HASH_SEED = 0x5EED_F4A3E
"""Seeds the hash's multipliers: fixed, so a frame hashes alike in every process."""


def frame_hashes(frames: np.ndarray, multipliers: np.ndarray) -> np.ndarray:
    """uint64 hash [M] of each frame of ``frames`` [M, ...] (C-contiguous).

    ``sum_i a_i w_i mod 2^64`` over the frame's 32-bit words ``w_i`` (bytes when its size is not
    a multiple of 4) with odd random ``a_i``: two frames differing in one word never collide.
    """
    rows = frames.reshape(len(frames), -1).view(np.uint8)
    words = rows.view(np.uint32) if rows.shape[1] % 4 == 0 else rows
    return (words * multipliers).sum(axis=1, dtype=np.uint64)


def hash_multipliers(frame_bytes: int) -> np.ndarray:
    """The odd uint64 multipliers :func:`frame_hashes` uses for frames of ``frame_bytes`` bytes."""
    n = frame_bytes // 4 if frame_bytes % 4 == 0 else frame_bytes
    rng = np.random.default_rng(_HASH_SEED)
    return rng.integers(0, 2**63, size=n, dtype=np.uint64) * np.uint64(2) + np.uint64(1)


def unique_frames(frames: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each distinct frame of ``frames`` [M, *frame] once, in order of first appearance, and the
    int32 index [M] of each given frame among them (``unique[index]`` equals ``frames``).

    Frames are matched by :func:`frame_hashes` and then byte for byte: a frame whose hash equals
    an earlier frame's but whose bytes differ (a collision) gets an entry of its own.
    """
    frames = np.ascontiguousarray(frames)
    if not len(frames):
        return frames, np.zeros(0, dtype=np.int32)
    hashes = frame_hashes(frames, hash_multipliers(frames[0].nbytes))
    _, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)
    representative = first[inverse.reshape(-1)]  # the first given frame of each one's hash
    clashes = np.flatnonzero((frames != frames[representative]).reshape(len(frames), -1).any(axis=1))
    representative[clashes] = clashes
    kept = np.unique(representative)  # positions of the frames sent, in order of appearance
    index = np.searchsorted(kept, representative).astype(np.int32)
    return frames[kept], index


class FramePlan(NamedTuple):
    """Where the frames of one write go, before anything is written (see :meth:`FrameRing.plan`).

    ``ids`` [M]: the frame id of each given frame. ``new`` [m]: positions (in the given frames)
    of the frames to write, in id order from ``first_id``. ``new_hashes`` [m]: their hashes
    (-1 cast to uint64 for a frame written although its hash is known: a collision).
    """

    ids: np.ndarray
    new: np.ndarray
    new_hashes: np.ndarray
    first_id: int

    @property
    def added(self) -> int:
        """How many frames this write adds."""
        return len(self.new)


class FrameRing:
    """``capacity`` frames of one shape and dtype, each written once per ``window`` of writes.

    Writing takes two steps so that the caller can act between them (free what the write will
    overwrite): :meth:`plan` finds which frames are new and gives every frame its id,
    :meth:`commit` writes the new ones. The ring is allocated on the first plan (``np.empty``:
    the memory of a slot is taken when it is first written).
    """

    def __init__(self, capacity: int, window: int) -> None:
        if window < 0:
            raise ValueError(f"frame window must be >= 0, got {window}")
        if capacity <= window:
            raise ValueError(f"frame_capacity ({capacity}) must be larger than the frame window ({window})")
        if capacity >= 2**31:
            raise ValueError(f"frame_capacity must be below 2**31, got {capacity}")
        self.capacity = int(capacity)
        self.window = int(window)
        self.frames: np.ndarray | None = None
        self.next_id = 0
        self.base = 0
        """The first id written since the last :meth:`clear` (ids below it are gone)."""
        self._multipliers = np.zeros(0, dtype=np.uint64)
        self._by_hash: dict[int, int] = {}
        self._recent: deque[tuple[int, int]] = deque()  # (id, hash) of the window's frames, oldest first

    # ---- shape ---------------------------------------------------------------------
    def allocate(self, frame_shape: tuple[int, ...], dtype: np.dtype) -> None:
        """Allocate the ring for frames of ``frame_shape`` and ``dtype`` (once)."""
        self.frames = np.empty((self.capacity, *frame_shape), dtype=dtype)
        self._multipliers = hash_multipliers(self.frames[0].nbytes)

    def adopt(self, frames: np.ndarray) -> None:
        """Hold ``frames`` (``capacity`` of them, all written; e.g. a dataset's read-only memory map) as the
        ring, without copying: for reading them by slot."""
        if len(frames) != self.capacity:
            raise ValueError(f"a ring of {self.capacity} frames cannot hold {len(frames)}")
        self.frames = frames
        self._multipliers = hash_multipliers(frames[0].nbytes)
        self.base, self.next_id = 0, self.capacity
        self._by_hash.clear()
        self._recent.clear()

    @property
    def frame_shape(self) -> tuple[int, ...] | None:
        return None if self.frames is None else self.frames.shape[1:]

    # ---- writing -------------------------------------------------------------------
    def _forget_before(self, oldest: int) -> None:
        """Drop content lookups of frames with ids below ``oldest``."""
        recent, by_hash = self._recent, self._by_hash
        while recent and recent[0][0] < oldest:
            frame_id, key = recent.popleft()
            if by_hash.get(key) == frame_id:
                del by_hash[key]

    def plan(self, frames: np.ndarray) -> FramePlan:
        """Give each of ``frames`` [M, *frame_shape] an id: that of an equal frame among the last
        ``window`` written or earlier in ``frames``, else a new one. Writes nothing."""
        assert self.frames is not None, "allocate() first"
        self._forget_before(self.next_id - self.window)
        hashes = frame_hashes(frames, self._multipliers)
        unique, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)
        known = np.array([self._by_hash.get(key, -1) for key in unique.tolist()], dtype=np.int64)
        fresh = np.flatnonzero(known < 0)
        fresh = fresh[np.argsort(first[fresh], kind="stable")]  # new frames in order of appearance
        ids_of_unique = known.copy()
        ids_of_unique[fresh] = self.next_id + np.arange(len(fresh))
        ids = ids_of_unique[inverse.reshape(-1)]
        # check each match byte for byte: against the stored frame, or the first equal-hash one given
        stored = known[inverse.reshape(-1)] >= 0
        reference = np.empty_like(frames)
        reference[stored] = self.frames[ids[stored] % self.capacity]
        reference[~stored] = frames[first[inverse.reshape(-1)[~stored]]]
        equal = (reference == frames).reshape(len(frames), -1).all(axis=1)
        new = first[fresh]
        new_hashes = unique[fresh]
        clashes = np.flatnonzero(~equal)
        if len(clashes):  # hash collisions: each such frame is written on its own
            ids[clashes] = self.next_id + len(fresh) + np.arange(len(clashes))
            new = np.concatenate([new, clashes])
            new_hashes = np.concatenate([new_hashes, np.full(len(clashes), np.iinfo(np.uint64).max, np.uint64)])
        return FramePlan(ids, new, new_hashes, self.next_id)

    def commit(self, plan: FramePlan, frames: np.ndarray) -> None:
        """Write the new frames of ``plan`` (made by the last :meth:`plan` of these ``frames``)."""
        assert self.frames is not None and plan.first_id == self.next_id, "commit the latest plan"
        count = plan.added
        if count == 0:
            return
        slots = (self.next_id + np.arange(count)) % self.capacity
        self.frames[slots] = frames[plan.new]
        no_hash = np.iinfo(np.uint64).max
        for offset, key in enumerate(plan.new_hashes.tolist()):
            if key != no_hash:
                self._by_hash[key] = self.next_id + offset
                self._recent.append((self.next_id + offset, key))
        self.next_id += count

    # ---- reading -------------------------------------------------------------------
    def slots(self, ids: np.ndarray) -> np.ndarray:
        """Ring slots (int32) of frame ids."""
        return (ids % self.capacity).astype(np.int32)

    def gather(self, slots: np.ndarray) -> np.ndarray:
        """The frames at ``slots`` (any shape): shape ``[*slots.shape, *frame_shape]``, a new array."""
        assert self.frames is not None
        return self.frames[slots]  # not take(axis=0): 10-30x slower for rows of kilobytes (numpy 2.4)

    @property
    def oldest_live(self) -> int:
        """The oldest frame id still stored."""
        return max(self.base, self.next_id - self.capacity)

    # ---- clear and state -------------------------------------------------------------
    def clear(self) -> None:
        """Forget every frame (ids keep counting up; the ring stays allocated)."""
        self.base = self.next_id
        self._by_hash.clear()
        self._recent.clear()

    def state_dict(self) -> dict[str, Any]:
        """The written part of the ring (a view, not a copy: save it before the next write) and
        the counters. Slots hold frames by id modulo ``capacity``, so only a prefix was ever written."""
        written = 0 if self.next_id == self.base else min(self.capacity, self.next_id)
        state: dict[str, Any] = {"next_id": self.next_id, "base": self.base, "capacity": self.capacity}
        if self.frames is not None:
            state["frames"] = self.frames[:written]
            state["frame_shape"] = list(self.frames.shape[1:])
            state["dtype"] = self.frames.dtype.str
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore what :meth:`state_dict` gave; the content lookups are rebuilt from the last
        ``window`` frames. A full saved ring is taken over as it is (no second copy in memory)."""
        if int(state["capacity"]) != self.capacity:
            raise ValueError(f"saved frame store holds {state['capacity']} frames, this one {self.capacity}")
        self.next_id, self.base = int(state["next_id"]), int(state["base"])
        self._by_hash.clear()
        self._recent.clear()
        if "frames" not in state:
            self.frames = None
            return
        saved = np.asarray(state["frames"])
        shape, dtype = tuple(state["frame_shape"]), np.dtype(state["dtype"])
        if saved.shape[1:] != shape or saved.dtype != dtype:
            raise ValueError(f"saved frames are {saved.shape[1:]} {saved.dtype}, the header says {shape} {dtype}")
        if len(saved) == self.capacity and saved.flags.c_contiguous and saved.flags.writeable:
            self.frames = saved
            self._multipliers = hash_multipliers(saved[0].nbytes)
        else:
            self.allocate(shape, dtype)
            assert self.frames is not None
            self.frames[: len(saved)] = saved
        start = max(self.oldest_live, self.next_id - self.window)
        ids = np.arange(start, self.next_id)
        if len(ids):
            hashes = frame_hashes(self.frames[ids % self.capacity], self._multipliers)
            for frame_id, key in zip(ids.tolist(), hashes.tolist(), strict=True):
                self._by_hash[key] = frame_id
                self._recent.append((frame_id, key))
