"""DequeBuffer: a fixed-size FIFO buffer on preallocated ring columns, with the seed's API.

Items are pushed one at a time (``push``: any object, or a dict of fields) or a whole
columnar batch at once (``push_batch``). When full, each push overwrites the oldest item.
Every public operation holds the storage's lock, so one thread may push while another
samples, and runs through the middleware chain (see :mod:`rlpipe.data.buffer.base`).
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from rlpipe.data.buffer.base import (
    Buffer,
    BufferedData,
    SampledBatch,
    batch_length,
    check_size,
    index_array,
)
from rlpipe.data.buffer.persist import load_buffer, save_buffer
from rlpipe.data.buffer.sampling import choose
from rlpipe.data.buffer.storage import Located, RingStorage
from rlpipe.data.buffer.table import OPAQUE


def _as_id(index: Any) -> int | None:
    """``index`` as an item id, or None if it cannot be one (a string, None, a float, a bool)."""
    if isinstance(index, (bool, np.bool_)):
        return None
    try:
        return operator.index(index)
    except TypeError:
        return None


def _ids_of(index: Any) -> np.ndarray:
    """``index`` (one id or many) as int64 ids, leaving out what cannot be an id: it names no item."""
    if isinstance(index, np.ndarray) and index.dtype.kind in "iu":
        return index.astype(np.int64, copy=False).reshape(-1)
    if isinstance(index, Iterable) and not isinstance(index, (str, bytes, Mapping)):
        values = list(index)
        try:
            ids = np.asarray(values)
        except ValueError:  # ragged nesting
            ids = np.asarray(None)
        if ids.dtype.kind in "iu":
            return ids.astype(np.int64, copy=False).reshape(-1)
    else:
        values = [index]
    return np.array([i for i in map(_as_id, values) if i is not None], dtype=np.int64)


def _flatten_leading(key: str, value: Any, shape: tuple[int, ...]) -> np.ndarray:
    """``value`` (leading dims ``shape``) with those dims flattened into one; ValueError naming ``key``."""
    value = np.asarray(value)
    if value.shape[: len(shape)] != shape:
        raise ValueError(f"meta '{key}' has shape {value.shape}, indices have shape {shape}")
    return value.reshape(-1, *value.shape[len(shape) :])


class DequeBuffer(Buffer):
    """FIFO replay buffer of ``size`` items. ``seed`` seeds its sampling generator."""

    def __init__(self, size: int, seed: int | None = None) -> None:
        super().__init__(size)
        self.storage = RingStorage(self.size)
        self.rng = np.random.default_rng(seed)
        self._group_cache: tuple[tuple[int, str | None], tuple[np.ndarray, np.ndarray]] | None = None

    def view(self) -> DequeBuffer:
        """A new buffer sharing this one's storage (and lock) with an empty middleware chain.

        Middleware keep their own state: use a view to sample differently, and push through
        the buffer whose chain holds the stateful middleware (e.g. priority replay).
        """
        other = DequeBuffer.__new__(DequeBuffer)
        Buffer.__init__(other, self.size)
        other.storage = self.storage
        other.rng = self.rng.spawn(1)[0]
        other._group_cache = None
        return other

    # ---- push ----------------------------------------------------------------------
    def push(self, data: Any, meta: dict[str, Any] | None = None) -> BufferedData:
        """Store one item (a dict of fields, or any object); returns it with its new index."""
        with self.storage.lock:
            return self._apply("push", self._push, data, meta)

    def _push(self, data: Any, meta: dict[str, Any] | None) -> BufferedData:
        st = self.storage
        is_row = isinstance(data, Mapping) and all(isinstance(key, str) for key in data)
        # checked before a slot is taken: a value that does not fit stores nothing, evicts nothing
        values = st.data.prepare_row(data if is_row else {OPAQUE: data})
        meta_values = st.meta.prepare_row(meta or {})
        index, slot = st.alloc_one()
        st.data.put_row(slot, values)
        st.meta.put_row(slot, meta_values)
        return BufferedData(data, index, meta if meta is not None else {})

    def push_batch(
        self, batch: Mapping[str, np.ndarray], meta: Mapping[str, np.ndarray] | None = None
    ) -> np.ndarray:
        """Store every row of a columnar batch in one call; returns their int64 indices."""
        with self.storage.lock:
            return self._apply("push_batch", self._push_batch, batch, meta)

    def _push_batch(
        self, batch: Mapping[str, np.ndarray], meta: Mapping[str, np.ndarray] | None
    ) -> np.ndarray:
        n = batch_length(batch)
        if meta and batch_length(meta, "meta") != n:
            raise ValueError(f"meta has {batch_length(meta, 'meta')} rows, batch has {n}")
        if n == 0:
            return np.zeros(0, dtype=np.int64)
        st = self.storage
        arrays = st.data.prepare_rows(batch)  # before the ring moves, as in _push
        meta_arrays = st.meta.prepare_rows(meta) if meta else {}
        ids, slots, kept = st.alloc(n)
        st.data.put_rows(slots, arrays, kept)
        st.meta.put_rows(slots, meta_arrays, kept)
        return ids

    # ---- sample --------------------------------------------------------------------
    def sample(
        self,
        size: int | None = None,
        indices: Iterable[int] | None = None,
        replace: bool = False,
        sample_range: slice | None = None,
        ignore_insufficient: bool = False,
        groupby: str | None = None,
        unroll_len: int | None = None,
        **kwargs: Any,
    ) -> list[Any]:
        """Sample items (seed API).

        Give ``size`` or ``indices`` (the items with those indices, in that order). Without
        ``replace``, asking for more than is stored raises ValueError naming both numbers,
        unless ``ignore_insufficient`` (then fewer are returned). ``sample_range`` is a slice
        of the stored items, oldest first. ``groupby`` (a meta key) returns ``size`` groups,
        each the list of that group's items in push order; with ``unroll_len`` each sample is
        a run of ``unroll_len`` consecutive items of one group (one group of everything if
        ``groupby`` is None). Extra keyword arguments are for middleware.
        """
        with self.storage.lock:
            return self._apply(
                "sample",
                self._sample,
                size=size,
                indices=indices,
                replace=replace,
                sample_range=sample_range,
                ignore_insufficient=ignore_insufficient,
                groupby=groupby,
                unroll_len=unroll_len,
                **kwargs,
            )

    def _sample(
        self,
        size: int | None,
        indices: Iterable[int] | None,
        replace: bool,
        sample_range: slice | None,
        ignore_insufficient: bool,
        groupby: str | None,
        unroll_len: int | None,
    ) -> list[Any]:
        if indices is not None:
            if size is not None:
                raise ValueError("give either size or indices to sample, not both")
            return self._items(self._slots_of(indices, skip_missing=ignore_insufficient))
        if size is None:
            raise ValueError("sample needs size or indices")
        if groupby is None and unroll_len in (None, 1):
            return self._items(self._uniform_slots(size, replace, ignore_insufficient, sample_range))
        if unroll_len is None:
            sorted_slots, starts = self._groups(groupby, sample_range)
            n = check_size(size, len(starts), replace, ignore_insufficient, "groups")
            ends = np.append(starts[1:], len(sorted_slots))
            chosen = choose(self.rng, len(starts), n, replace)
            return [self._items(sorted_slots[starts[g] : ends[g]]) for g in chosen.tolist()]
        return [
            self._items(run)
            for run in self._runs(size, groupby, unroll_len, replace, ignore_insufficient, sample_range)
        ]

    def _uniform_slots(
        self, size: int, replace: bool, ignore_insufficient: bool, sample_range: slice | None
    ) -> np.ndarray:
        """Slots of ``size`` stored items (of ``stored[sample_range]``, if given), drawn uniformly."""
        if sample_range is None:
            n = check_size(size, self.storage.count, replace, ignore_insufficient)
            return self.storage.random_slots(self.rng, n, replace)
        pool = self.storage.ordered_slots()[sample_range]
        n = check_size(size, len(pool), replace, ignore_insufficient)
        return pool[choose(self.rng, len(pool), n, replace)]

    def _groups(self, groupby: str | None, sample_range: slice | None) -> tuple[np.ndarray, np.ndarray]:
        """Stored slots sorted by group (push order within one), and where each group starts."""
        key = (self.storage.version, groupby)
        if sample_range is None and self._group_cache is not None and self._group_cache[0] == key:
            return self._group_cache[1]
        order = self.storage.ordered_slots()
        if sample_range is not None:
            order = order[sample_range]
        if groupby is None:
            codes = np.zeros(len(order), dtype=np.int64)
        else:
            values = self.storage.meta.column(groupby, order)
            try:
                codes = np.unique(values, return_inverse=True)[1].reshape(-1)
            except TypeError as err:
                raise ValueError(
                    f"groupby key '{groupby}' has values that cannot be compared: {err}"
                ) from None
        perm = np.argsort(codes, kind="stable")
        sorted_codes = codes[perm]
        starts = (
            np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1]]) if len(order) else order[:0]
        )
        result = (order[perm], starts)
        if sample_range is None:
            self._group_cache = (key, result)
        return result

    def count_runs(self, unroll_len: int, groupby: str | None = None) -> int:
        """How many distinct runs of ``unroll_len`` consecutive items of one group are stored."""
        with self.storage.lock:
            return len(self._run_starts(groupby, unroll_len, None)[1])

    def _run_starts(
        self, groupby: str | None, unroll_len: int, sample_range: slice | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Slots sorted by group, and the positions in it where a whole run fits in one group."""
        if unroll_len < 1:
            raise ValueError(f"unroll_len must be >= 1, got {unroll_len}")
        sorted_slots, starts = self._groups(groupby, sample_range)
        group_of = np.zeros(len(sorted_slots), dtype=np.int64)
        group_of[starts[1:]] = 1
        group_of = np.cumsum(group_of)
        last_start = len(sorted_slots) - unroll_len + 1
        return sorted_slots, np.flatnonzero(group_of[: max(last_start, 0)] == group_of[unroll_len - 1 :])

    def _runs(
        self,
        size: int,
        groupby: str | None,
        unroll_len: int,
        replace: bool,
        ignore_insufficient: bool,
        sample_range: slice | None = None,
    ) -> np.ndarray:
        """Slots [n, unroll_len] of runs of consecutive items of one group, drawn uniformly."""
        sorted_slots, candidates = self._run_starts(groupby, unroll_len, sample_range)
        n = check_size(size, len(candidates), replace, ignore_insufficient, f"runs of {unroll_len}")
        chosen = candidates[choose(self.rng, len(candidates), n, replace)]
        return sorted_slots[chosen[:, None] + np.arange(unroll_len)]

    def sample_batch(
        self,
        size: int,
        replace: bool = False,
        indices: np.ndarray | None = None,
        groupby: str | None = None,
        unroll_len: int | None = None,
        sample_range: slice | None = None,
        **kwargs: Any,
    ) -> SampledBatch:
        """Sample ``size`` rows collated per field (fast path); ValueError if fewer are stored.

        ``indices`` (any shape) picks the rows instead. With ``unroll_len`` each row is a run
        of consecutive items of one ``groupby`` group: fields get shape [size, unroll_len, ...]
        and ``indices`` [size, unroll_len]. ``sample_range`` slices the stored items, oldest
        first. Extra keyword arguments are for middleware.
        """
        with self.storage.lock:
            return self._apply(
                "sample_batch",
                self._sample_batch,
                size=size,
                replace=replace,
                indices=indices,
                groupby=groupby,
                unroll_len=unroll_len,
                sample_range=sample_range,
                **kwargs,
            )

    def _sample_batch(
        self,
        size: int,
        replace: bool,
        indices: np.ndarray | None,
        groupby: str | None,
        unroll_len: int | None,
        sample_range: slice | None,
    ) -> SampledBatch:
        st = self.storage
        if indices is not None:
            ids = index_array(indices, copy=True)  # the batch must not alias the caller's array
            slots = self._slots_of(ids.reshape(-1), skip_missing=False).reshape(ids.shape)
            return SampledBatch(self._gather(slots), ids)
        if unroll_len is not None:
            slots = self._runs(size, groupby, unroll_len, replace, False, sample_range)
        elif groupby is not None:
            raise ValueError(
                "sample_batch groups only with unroll_len; use sample(groupby=...) for whole groups"
            )
        else:
            slots = self._uniform_slots(size, replace, False, sample_range)
        return SampledBatch(self._gather(slots), st.ids[slots])

    def _gather(self, slots: np.ndarray) -> dict[str, Any]:
        """The data fields at ``slots`` (any shape), each shaped [*slots.shape, ...]."""
        data = self.storage.data.gather(slots.reshape(-1))
        if slots.ndim > 1:
            data = {key: value.reshape(*slots.shape, *value.shape[1:]) for key, value in data.items()}
        return data

    # ---- update / delete / clear -----------------------------------------------------
    def update(self, index: Any, data: Any = None, meta: dict[str, Any] | None = None) -> bool:
        """Replace the data and/or set the given meta keys (others kept) of one item.

        Returns False, changing nothing, when ``index`` matches no stored item (overwritten,
        deleted, never pushed, or no index at all, e.g. a string).
        """
        item_id = _as_id(index)
        if item_id is None:
            return False
        with self.storage.lock:
            return self._apply("update", self._update, item_id, data, meta)

    def _update(self, index: int, data: Any, meta: dict[str, Any] | None) -> bool:
        st = self.storage
        slot = st.slot_of(index)
        if slot is None:
            return False
        values = None
        if data is not None:
            is_row = isinstance(data, Mapping) and all(isinstance(key, str) for key in data)
            values = st.data.prepare_row(data if is_row else {OPAQUE: data})
        meta_values = st.meta.prepare_row(meta) if meta else None
        if values is not None:
            st.data.put_row(slot, values)
        if meta_values:
            st.meta.put_row(slot, meta_values, replace=False)
        st.version += 1
        return True

    def update_batch(self, indices: np.ndarray, meta: Mapping[str, np.ndarray]) -> np.ndarray:
        """Set meta fields of many items at once; returns which indices still existed.

        ``indices`` may have any shape (e.g. [B, T] of a sequence batch); each meta value then
        starts with that shape, and the result has it. Indices that are not integers are a
        ValueError (use ``update`` for the seed's forgiving one-item form).
        """
        ids = index_array(indices)
        if ids.ndim != 1:
            meta = {key: _flatten_leading(key, value, ids.shape) for key, value in meta.items()}
        with self.storage.lock:
            exists = self._apply("update_batch", self._update_batch, ids.reshape(-1), meta)
        return exists.reshape(ids.shape)

    def _update_batch(self, indices: np.ndarray, meta: Mapping[str, np.ndarray]) -> np.ndarray:
        if meta and batch_length(meta, "meta") != len(indices):
            raise ValueError(f"meta has {batch_length(meta, 'meta')} rows, indices have {len(indices)}")
        st = self.storage
        slots, exists, found = located = st.locate(indices)
        if meta:
            arrays = st.meta.prepare_rows(meta)
            if located.all_found:  # the usual case: no rows to leave out, so no masked copies
                st.meta.put_rows(slots, arrays, slice(None), replace=False)
            elif found:
                st.meta.put_rows(slots[exists], arrays, exists, replace=False)
            if found:
                st.version += 1
        return exists

    def update_priority(self, indices: Any, priority: Any) -> None:
        """See :meth:`Buffer.update_priority` (a no-op without priority replay in the chain)."""
        with self.storage.lock:
            super().update_priority(indices, priority)

    def delete(self, index: Any) -> None:
        """Remove the items with these indices (one or many); any that match nothing (or are no
        index at all, e.g. a string) are ignored."""
        ids = _ids_of(index)
        with self.storage.lock:
            self._apply("delete", self._delete, ids)

    def _delete(self, indices: np.ndarray) -> None:
        slots, exists, found = self.storage.locate(indices)
        if found:
            self.storage.remove(slots[exists])

    def clear(self) -> None:
        """Remove every item (indices keep counting up)."""
        with self.storage.lock:
            self._apply("clear", self.storage.clear)

    # ---- lookup --------------------------------------------------------------------
    def count(self) -> int:
        """Number of stored items."""
        return self.storage.count

    def get(self, idx: int) -> BufferedData:
        """The ``idx``-th stored item, oldest first (negative counts from the newest)."""
        with self.storage.lock:
            return self._apply("get", self._get, idx)

    def _get(self, idx: int) -> BufferedData:
        order = self.storage.ordered_slots()
        if not -len(order) <= idx < len(order):
            raise IndexError(f"item {idx} out of range for a buffer of {len(order)} items")
        return self._items(order[[idx]])[0]

    def get_by_index(self, index: Any) -> BufferedData:
        """The item with this index; KeyError if it was overwritten, deleted or never pushed."""
        with self.storage.lock:
            return self._apply("get_by_index", self._get_by_index, index)

    def _get_by_index(self, index: Any) -> BufferedData:
        item_id = _as_id(index)
        slot = None if item_id is None else self.storage.slot_of(item_id)
        if slot is None:
            raise KeyError(f"index {index!r} is not in the buffer")
        return self._items(np.array([slot]))[0]

    def _slots_of(self, indices: Iterable[int], skip_missing: bool) -> np.ndarray:
        ids = index_array(list(indices) if not isinstance(indices, np.ndarray) else indices)
        slots, exists, _ = located = self.storage.locate(ids)
        if not located.all_found:
            if not skip_missing:
                missing = ids.reshape(-1)[~exists]
                raise ValueError(f"{len(missing)} indices are not in the buffer, e.g. {int(missing[0])}")
            slots = slots[exists]
        return slots

    def _items(self, slots: np.ndarray) -> list[BufferedData]:
        st = self.storage
        out = []
        for slot, index in zip(slots.tolist(), st.ids[slots].tolist(), strict=True):
            row = st.data.row(slot)
            data = row.get(OPAQUE, row)
            out.append(BufferedData(data, index, st.meta.row(slot)))
        return out

    # ---- slots, for middleware (see SlotBuffer) -------------------------------------
    @property
    def holds_tensors(self) -> bool:
        """Whether some data fields were pushed as torch tensors (they are returned as tensors)."""
        return bool(self.storage.data.torch_fields)

    def locate(self, ids: np.ndarray) -> Located:
        """Slots of ``ids`` (flattened) and whether each still names a stored item."""
        return self.storage.locate(ids)

    def ids_at(self, slots: np.ndarray) -> np.ndarray:
        """The indices of the items at ``slots``."""
        return self.storage.ids[slots]

    def ordered_slots(self) -> np.ndarray:
        """Slots of the stored items, oldest first."""
        return self.storage.ordered_slots()

    def stored_rows(self, ids: np.ndarray) -> dict[str, Any]:
        """The data fields of the stored items ``ids`` (1-D) as the storage holds them: no
        middleware reads them, so a :class:`~rlpipe.data.buffer.FrameStore`'s stack fields stay
        ring slots. For copying a buffer out without rebuilding what its middleware packed."""
        with self.storage.lock:
            return self._gather(self._slots_of(ids, skip_missing=False))

    @property
    def overwritten(self) -> bool:
        """Whether more items were pushed since the last clear than the buffer holds (the oldest
        were overwritten, so what is stored may start inside an episode)."""
        return self.storage.next_id - self.storage.base > self.storage.capacity

    def meta_column(self, key: str, slots: np.ndarray) -> np.ndarray:
        """Meta ``key`` of the items at ``slots``; ValueError naming ``key`` if some lack it."""
        return self.storage.meta.column(key, slots)

    # ---- persistence -----------------------------------------------------------------
    def save_data(self, file_name: str) -> None:
        """Write data, meta, indices, ring position, RNG and middleware state to one .npz file."""
        with self.storage.lock:
            save_buffer(self, file_name)

    def load_data(self, file_name: str) -> None:
        """Replace this buffer's contents with what :meth:`save_data` wrote (no code is run)."""
        with self.storage.lock:
            load_buffer(self, file_name)
