"""Preallocated ring storage: per-field columns over ring slots, and the id <-> slot bookkeeping.

A :class:`Table` keeps one array per field, allocated for every ring slot when the field
is first written. Numeric values of one fixed shape live in a typed column; anything else
(strings, lists, variable-length episode arrays, arbitrary objects) in an object column. A
typed column that meets a value it cannot hold becomes an object column, once.

A large data table is *packed*: the numeric fields of its first write lie side by side in
one record per slot (a structured array without padding, so no memory beyond the raw
bytes), and each of those columns is a strided view of one record field. Sampling a batch
from a buffer much larger than the CPU caches is mostly cache misses, and a record is one
or two cache lines where separate columns are one line per field (6 for a CartPole
transition). A small one is not: there the gather hits the cache either way, and copying
each field out of the gathered records costs more than one ``take`` per column.

:class:`RingStorage` hands out ids (a monotonic int64 counter) and maps them to slots:
``slot = (id - base) % capacity``, so lookups are O(1) and need no dictionary. ``base`` is
the first id after the last :meth:`RingStorage.clear`.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Mapping
from typing import Any, NamedTuple

import numpy as np

from rlpipe.data.buffer.sampling import choose

try:
    from rlpipe.data.buffer import _storage_kernels as _kernels
except ImportError:
    _kernels = None  # type: ignore[assignment]

PACK_MIN_BYTES = 32 * 2**20
"""Records from this size on (capacity x record bytes). Measured (2 cores, 2 MiB L2 each) with
CartPole transitions: a packed gather of 64 or 256 took 0.3-3 us longer up to 500k slots
(23 MB), about the same at 700k, and 0.2-1.7 us less at 1M-2M, where a priority-replay round
also ran 8% faster (fewer cache lines for the sum tree to compete with)."""

BACKENDS = ("numpy", "numba")
DEFAULT_BACKEND = "numba" if _kernels is not None else "numpy"
_NUMERIC_KINDS = frozenset("biufc")
OPAQUE = "__item__"
"""Field name under which data that is not a dict of fields is kept."""


class Located(NamedTuple):
    """Where ids live: their slots, whether each still names a stored item, and how many do."""

    slots: np.ndarray
    exists: np.ndarray
    found: int

    @property
    def all_found(self) -> bool:
        """Every id names a stored item (the usual case: no rows to leave out)."""
        return self.found == len(self.exists)


def _numeric(value: Any) -> np.ndarray | None:
    """``value`` as a numeric array if it can live in a typed column, else None."""
    if isinstance(value, np.ndarray):
        return value if value.dtype.kind in _NUMERIC_KINDS else None
    if isinstance(value, (bool, int, float, np.bool_, np.number)):
        return np.asarray(value)
    return None


def take_rows(col: np.ndarray, slots: np.ndarray) -> np.ndarray:
    """``col[slots]``. ``take`` is the faster way, but it first copies a strided column whole."""
    return col.take(slots, axis=0) if col.flags.c_contiguous else col[slots]


def _slot_list(slots: np.ndarray | slice, capacity: int) -> list[int]:
    """``slots`` (an array or a slice of the ring) as a list of ints."""
    if isinstance(slots, slice):
        return list(range(capacity)[slots])
    return slots.tolist()


class Table:
    """Named columns over ``capacity`` slots; which slots are valid is the ring's business.

    A column is *dense* while every write has included it; only then may it skip a presence
    mask. A write that omits an existing column (or a column born after the first write)
    makes it *sparse*: it gets a mask of the slots that hold a value.
    ``pack_min_bytes``: pack the numeric fields of the first write into one record per slot
    when all the records take at least this many bytes (None: never).
    """

    def __init__(self, capacity: int, pack_min_bytes: int | None = None) -> None:
        self.capacity = capacity
        self.pack_min_bytes = pack_min_bytes
        self.columns: dict[str, np.ndarray] = {}
        self.present: dict[str, np.ndarray] = {}
        self.written = False
        self.records: np.ndarray | None = None
        self.in_records: set[str] = set()
        """The columns that are still fields of ``records`` (one that turned object is not)."""
        self._record_views: dict[str, np.ndarray] = {}  # packed fields whose column is not made yet

    def _pack(self, fields: Mapping[str, tuple[np.dtype, tuple[int, ...]]]) -> None:
        """Allocate the records for ``fields`` (name -> (dtype, row shape)) if they are large enough.

        Each field's column becomes its view of the records when :meth:`_new_column` makes it,
        so columns keep the order of the write. Names numpy's structured dtypes cannot hold
        (non-strings, "") keep separate columns.
        """
        row_bytes = sum(np.dtype(dtype).itemsize * int(np.prod(shape)) for dtype, shape in fields.values())
        if self.pack_min_bytes is None or not fields or row_bytes * self.capacity < self.pack_min_bytes:
            return
        if not all(isinstance(key, str) and key for key in fields):
            return
        self.records = np.zeros(self.capacity, dtype=[(key, dtype, shape) for key, (dtype, shape) in fields.items()])
        self._record_views = {key: self.records[key] for key in fields}
        self.in_records = set(fields)

    def _pack_first_write(self, examples: Mapping[str, np.ndarray | None]) -> None:
        """Pack the fields of the first write that have a numeric example row (if large enough)."""
        self._pack({key: (ex.dtype, ex.shape) for key, ex in examples.items() if ex is not None})

    # ---- writing -------------------------------------------------------------------
    def write_row(self, slot: int, row: Mapping[str, Any], replace: bool = True) -> None:
        """Store one item's fields at ``slot``; ``replace``: fields not in ``row`` become absent."""
        if self.pack_min_bytes is not None and not self.columns:
            self._pack_first_write({key: _numeric(value) for key, value in row.items()})
        for key, value in row.items():
            self._put(key, slot, value)
        if replace:
            self._mark(slot, row.keys())

    def write_rows(
        self,
        slots: np.ndarray | slice,
        batch: Mapping[str, Any],
        rows: slice | np.ndarray,
        replace: bool = True,
    ) -> None:
        """Store rows ``rows`` of a columnar batch at ``slots`` (one slot per selected row)."""
        count = len(slots) if isinstance(slots, np.ndarray) else len(range(self.capacity)[slots])
        if self.pack_min_bytes is not None and not self.columns:
            arrays = {key: np.asarray(value) for key, value in batch.items()}
            numeric = {key: arr.dtype.kind in _NUMERIC_KINDS and len(arr) > 0 for key, arr in arrays.items()}
            self._pack_first_write({key: arr[0] if numeric[key] else None for key, arr in arrays.items()})
        # ``rows`` selecting every row (the usual push) needs no view per field
        every_row = isinstance(rows, slice) and rows in (slice(None), slice(0, count))
        for key, value in batch.items():
            arr = np.asarray(value)
            if not (every_row and len(arr) == count):
                arr = arr[rows]
            if arr.shape[0] != count:
                raise ValueError(f"field '{key}' has {arr.shape[0]} rows, expected {count}")
            col = self.columns.get(key)
            if col is None or not (arr.dtype == col.dtype and arr.shape[1:] == col.shape[1:]):
                col = self._column_for(key, arr)  # first write, or a value of another dtype/shape
            if col.dtype == object:
                for slot, value_row in zip(_slot_list(slots, self.capacity), arr, strict=True):
                    col[slot] = value_row.copy() if isinstance(value_row, np.ndarray) else value_row
            else:
                col[slots] = arr
            mask = self.present.get(key)
            if mask is not None:
                mask[slots] = True
        if replace:
            self._mark(slots, batch.keys())

    def _column_for(self, key: str, arr: np.ndarray) -> np.ndarray:
        """The column that can hold ``arr``'s rows: new, the existing one, or it turned object."""
        col = self.columns.get(key)
        kind_ok = arr.dtype.kind in _NUMERIC_KINDS
        if col is None:
            return self._new_column(key, arr[0] if kind_ok else None)
        if col.dtype != object and (
            not kind_ok or arr.shape[1:] != col.shape[1:] or not np.can_cast(arr.dtype, col.dtype, "same_kind")
        ):
            return self._to_object(key)
        return col

    def _put(self, key: str, slot: int, value: Any) -> None:
        col = self.columns.get(key)
        if (
            isinstance(value, (np.ndarray, np.generic))
            and col is not None
            and value.dtype == col.dtype
            and value.shape == col.shape[1:]
            and col.dtype != object
        ):  # fast path (one env step's field): nothing to convert or check
            col[slot] = value
        else:
            self._put_converted(key, slot, value, col)
        mask = self.present.get(key)
        if mask is not None:
            mask[slot] = True

    def _put_converted(self, key: str, slot: int, value: Any, col: np.ndarray | None) -> None:
        """Store ``value`` after finding (or making) a column that can hold it."""
        arr = _numeric(value)
        if col is None:
            col = self._new_column(key, arr)
        elif col.dtype != object and (
            arr is None or arr.shape != col.shape[1:] or not np.can_cast(arr.dtype, col.dtype, "same_kind")
        ):
            col = self._to_object(key)
        if col.dtype == object:
            col[slot] = value.copy() if isinstance(value, np.ndarray) else value
        else:
            col[slot] = arr

    def _mark(self, slots: int | np.ndarray | slice, keys: Collection[str]) -> None:
        """Record which columns the rows just written at ``slots`` (with fields ``keys``) lack."""
        self.written = True
        if len(keys) == len(self.columns):  # every column was just written
            return
        for key in self.columns.keys() - set(keys):
            mask = self.present.get(key)
            if mask is None:
                mask = self.present[key] = np.ones(self.capacity, dtype=bool)
            mask[slots] = False

    def _new_column(self, key: str, example: np.ndarray | None) -> np.ndarray:
        col = self._record_views.pop(key, None)
        if col is None:
            col = np.empty(self.capacity, dtype=object) if example is None else np.zeros(
                (self.capacity, *example.shape), dtype=example.dtype
            )
        self.columns[key] = col
        if self.written:
            self.present[key] = np.zeros(self.capacity, dtype=bool)
        return col

    def _to_object(self, key: str) -> np.ndarray:
        old = self.columns[key]
        new = np.empty(self.capacity, dtype=object)
        for slot in range(self.capacity):
            new[slot] = old[slot].copy() if old.ndim > 1 else old[slot]
        self.columns[key] = new
        self.in_records.discard(key)
        return new

    # ---- reading -------------------------------------------------------------------
    def row(self, slot: int) -> dict[str, Any]:
        """The fields stored at ``slot`` (typed columns give views / numpy scalars)."""
        out = {}
        for key, col in self.columns.items():
            mask = self.present.get(key)
            if mask is None or mask[slot]:
                out[key] = col[slot]
        return out

    def gather(self, slots: np.ndarray, what: str = "field") -> dict[str, np.ndarray]:
        """Collate the columns at ``slots``; every column must hold a value for every slot."""
        out = {}
        # one gather of whole records; each field is then copied out of the (cached) rows
        records = self.records.take(slots) if self.records is not None and self.in_records else None
        for key, col in self.columns.items():
            mask = self.present.get(key)
            if mask is not None:
                have = mask[slots]
                if not have.any():
                    continue
                if not have.all():
                    raise ValueError(
                        f"{what} '{key}' is missing from {int((~have).sum())} of the selected items"
                    )
            if records is not None and key in self.in_records:
                out[key] = records[key].copy()
            else:
                out[key] = col.take(slots, axis=0)
        return out

    def column(self, key: str, slots: np.ndarray, what: str = "meta key") -> np.ndarray:
        """One column at ``slots``; ValueError naming ``key`` if some slot lacks it."""
        col = self.columns.get(key)
        mask = self.present.get(key)
        if col is None or (mask is not None and not mask[slots].all()):
            missing = len(slots) if col is None else int((~mask[slots]).sum())  # type: ignore[index]
            raise ValueError(f"{what} '{key}' is missing from {missing} of {len(slots)} stored items")
        return take_rows(col, slots)

    # ---- forgetting ----------------------------------------------------------------
    def release(self, slots: np.ndarray) -> None:
        """Drop references held by object columns at ``slots`` (their items are gone)."""
        for col in self.columns.values():
            if col.dtype == object:
                col[slots] = None

    def clear(self) -> None:
        """Forget every value; typed columns stay allocated for reuse."""
        for key, col in self.columns.items():
            if col.dtype == object:
                self.columns[key] = np.empty(self.capacity, dtype=object)
        self.present.clear()
        self.written = False

    def restore(self, fields: Mapping[str, tuple[np.ndarray, np.ndarray, bool]], written: bool) -> None:
        """Replace every column by saved values: ``name -> (values, their slots, sparse)``.

        ``written``: whether any slot holds an item (a column born later is then sparse). A
        table that may pack packs the dense numeric fields again.
        """
        self.columns.clear()
        self.present.clear()
        self.written = False  # the columns made here get their masks from ``fields``
        self.records, self.in_records, self._record_views = None, set(), {}
        self._pack(
            {
                key: (values.dtype, values.shape[1:])
                for key, (values, _, sparse) in fields.items()
                if not sparse and values.dtype.kind in _NUMERIC_KINDS
            }
        )
        for key, (values, slots, sparse) in fields.items():
            col = self._new_column(key, None if values.dtype == object else np.zeros(values.shape[1:], values.dtype))
            col[slots] = values
            if sparse:
                mask = self.present[key] = np.zeros(self.capacity, dtype=bool)
                mask[slots] = True
        self.written = written


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
        self.meta = Table(self.capacity)
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
