"""Preallocated ring storage: data and meta tables over ring slots, and the id <-> slot bookkeeping.

:class:`RingStorage` hands out ids (a monotonic int64 counter) and maps them to slots:
``slot = (id - base) % capacity``, so lookups are O(1) and need no dictionary. ``base`` is
the first id after the last :meth:`RingStorage.clear`.
The tables' columns are described in :mod:`rlpipe.data.buffer.table`.
"""

from __future__ import annotations

import threading
from typing import NamedTuple

import numpy as np

from rlpipe.data.buffer.sampling import choose
from rlpipe.data.buffer.table import PACK_MIN_BYTES, Table

try:
    from rlpipe.data.buffer import _storage_kernels as _kernels
except ImportError:
    _kernels = None  # type: ignore[assignment]

BACKENDS = ("numpy", "numba")
DEFAULT_BACKEND = "numba" if _kernels is not None else "numpy"


class Located(NamedTuple):
    """Where ids live: their slots, whether each still names a stored item, and how many do."""

    slots: np.ndarray
    exists: np.ndarray
    found: int

    @property
    def all_found(self) -> bool:
        """Every id names a stored item (the usual case: no rows to leave out)."""
        return self.found == len(self.exists)


class RingStorage:
    """Ring of ``capacity`` slots holding data and meta tables, shared by a buffer and its views.

    ``backend`` ("numba" when installed, else "numpy") picks how ids are looked up.
    """

    def __init__(self, capacity: int, backend: str | None = None) -> None:
        backend = backend or DEFAULT_BACKEND
        if backend not in BACKENDS or (backend == "numba" and _kernels is None):
            raise ValueError(f"RingStorage backend {backend!r} is not available (have: {DEFAULT_BACKEND})")
        self.backend = backend
        self.capacity = int(capacity)
        self.data = Table(self.capacity, pack_min_bytes=PACK_MIN_BYTES)
        self.meta = Table(self.capacity, label="meta key")
        self.ids = np.full(self.capacity, -1, dtype=np.int64)
        self.base = 0
        self.next_id = 0
        self.count = 0
        self.version = 0
        self.lock = threading.RLock()
        self._order_cache: tuple[int, np.ndarray] | None = None

    # ---- ids and slots -------------------------------------------------------------
    def alloc_one(self) -> tuple[int, int]:
        """Reserve the next id and its slot (overwriting the oldest item when full)."""
        new_id = self.next_id
        slot = (new_id - self.base) % self.capacity
        if new_id - self.base < self.capacity or self.ids[slot] < 0:  # a slot never or no longer used
            self.count += 1
        self.ids[slot] = new_id
        self.next_id += 1
        self.version += 1
        return new_id, slot

    def alloc(self, n: int) -> tuple[np.ndarray, np.ndarray | slice, slice]:
        """Reserve ``n`` ids; returns them, the slots of the rows that stay, and those rows.

        The slots are a slice when they do not wrap around the ring's end: writing a
        column slice costs less than scattering to an index array (a small batch's
        push is mostly such per-call costs).
        """
        new_ids = np.arange(self.next_id, self.next_id + n, dtype=np.int64)
        kept = slice(max(0, n - self.capacity), n)
        first = (self.next_id + kept.start - self.base) % self.capacity
        stop = first + kept.stop - kept.start
        slots = slice(first, stop) if stop <= self.capacity else (new_ids[kept] - self.base) % self.capacity
        if self.next_id + n - self.base <= self.capacity:  # still filling: every slot is new
            self.count += n
        else:
            self.count += int(np.count_nonzero(self.ids[slots] < 0))
        self.ids[slots] = new_ids[kept]
        self.next_id += n
        self.version += 1
        return new_ids, slots, kept

    def locate(self, ids: np.ndarray) -> Located:
        """Slots of ``ids`` (flattened) and whether each id still names a stored item."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        if self.backend == "numba":
            slots, exists = np.empty(len(ids), dtype=np.int64), np.empty(len(ids), dtype=bool)
            found = _kernels.locate(self.ids, self.base, ids, slots, exists)
            return Located(slots, exists, found)
        slots = ids - self.base
        slots %= self.capacity
        exists = self.ids[slots] == ids
        exists &= ids >= self.base  # an id below base (e.g. -1) could match an empty slot's -1
        return Located(slots, exists, int(np.count_nonzero(exists)))

    def slot_of(self, index: int) -> int | None:
        """Slot of one id, or None when the id matches no stored item."""
        slot = (int(index) - self.base) % self.capacity
        return slot if index >= self.base and self.ids[slot] == index else None

    @property
    def filled(self) -> int:
        """Slots written since the last clear (valid or deleted)."""
        return min(self.next_id - self.base, self.capacity)

    def ordered_slots(self) -> np.ndarray:
        """Slots of the stored items, oldest first (cached until the next change)."""
        cached = self._order_cache
        if cached is not None and cached[0] == self.version:
            return cached[1]
        pushed = self.next_id - self.base
        if pushed <= self.capacity:
            order = np.arange(pushed, dtype=np.int64)
        else:
            order = (pushed + np.arange(self.capacity, dtype=np.int64)) % self.capacity
        if self.count < len(order):
            order = order[self.ids[order] >= 0]
        self._order_cache = (self.version, order)
        return order

    def random_slots(self, rng: np.random.Generator, size: int, replace: bool) -> np.ndarray:
        """``size`` slots of stored items, uniformly (caller checked there are enough)."""
        filled = self.filled
        if self.count == filled:
            return choose(rng, filled, size, replace)
        valid = self.ordered_slots()
        return valid[choose(rng, len(valid), size, replace)]

    def adopt(self, data: dict[str, np.ndarray], meta: dict[str, np.ndarray]) -> None:
        """Hold ``data`` and ``meta`` columns of ``capacity`` rows each as items 0..capacity-1, without
        copying them (:meth:`Table.adopt`): a full ring that nothing has been pushed to."""
        self.data.adopt(data)
        self.meta.adopt(meta)
        self.ids = np.arange(self.capacity, dtype=np.int64)
        self.base, self.next_id, self.count = 0, self.capacity, self.capacity
        self.version += 1

    # ---- removal -------------------------------------------------------------------
    def remove(self, slots: np.ndarray) -> None:
        """Forget the items at ``slots`` (all must be valid)."""
        slots = np.unique(slots)
        self.ids[slots] = -1
        self.count -= len(slots)
        self.data.release(slots)
        self.meta.release(slots)
        self.version += 1

    def clear(self) -> None:
        """Forget everything; ids keep counting up."""
        self.ids[:] = -1
        self.base = self.next_id
        self.count = 0
        self.data.clear()
        self.meta.clear()
        self.version += 1
