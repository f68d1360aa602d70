"""Columns over ring slots: one preallocated array per field, typed or object.

A :class:`Table` keeps one array per field, allocated for every ring slot when the field
is first written. What the first value is decides the column:

- a number, a numeric numpy array or a torch tensor (CPU or not; 0-dim too) makes a *typed*
  column of its dtype and shape. A tensor's values are stored as numpy (``Tensor.numpy``,
  no copy before the column's own), and the column is remembered in ``torch_fields``: reads
  give tensors back (a row: a copy; a gathered batch: ``torch.from_numpy`` of the gather).
  Later values must have that shape and a dtype that casts to it within its kind (float64
  into float32, a Python float, int into float); anything else is a ValueError naming the
  field and both dtypes and shapes, and nothing of that write is stored;
- anything else (strings, lists, dicts, arbitrary objects), and always the data of an item
  that is not a dict of fields (:data:`OPAQUE`), makes an *object* column, which takes
  whatever comes later.

One exception keeps whole episodes storable (``EpisodeCollector`` hands on columnar dicts
whose length varies): an item whose every field is an array of one common length T (a
*sequence*) may differ from the typed column only in that length; the column then becomes
a *ragged* object column holding one array per item, once. A single transition is no
sequence (it has a scalar or 0-dim field, or fields of different lengths), so a wrong
shape in one is an error, never a quiet change of the column.

A large data table is *packed*: the numeric fields of its first write lie side by side in
one record per slot (a structured array without padding, so no memory beyond the raw
bytes), and each of those columns is a strided view of one record field. Sampling a batch
from a buffer much larger than the CPU caches is mostly cache misses, and a record is one
or two cache lines where separate columns are one line per field (6 for a CartPole
transition). A small one is not: there the gather hits the cache either way, and copying
each field out of the gathered records costs more than one ``take`` per column.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import numpy as np
import torch

PACK_MIN_BYTES = 32 * 2**20
"""Records from this size on (capacity x record bytes). Measured (2 cores, 2 MiB L2 each) with
CartPole transitions: a packed gather of 64 or 256 took 0.3-3 us longer up to 500k slots
(23 MB), about the same at 700k, and 0.2-1.7 us less at 1M-2M, where a priority-replay round
also ran 8% faster (fewer cache lines for the sum tree to compete with)."""

_NUMERIC_KINDS = frozenset("biufc")
OPAQUE = "__item__"
"""Field name under which data that is not a dict of fields is kept."""


Spec = tuple[np.dtype, tuple[int, ...]]
"""A typed column's row dtype and row shape."""

_ARRAYS = (np.ndarray, np.generic)


def tensor_values(tensor: torch.Tensor, key: str, label: str = "field") -> np.ndarray:
    """A tensor's values as numpy (sharing a CPU tensor's memory); ValueError naming the
    ``label`` ``key`` for a dtype numpy lacks (e.g. bfloat16)."""
    try:
        return tensor.numpy(force=True)
    except (TypeError, RuntimeError) as err:
        raise ValueError(
            f"{label} '{key}' is a {tensor.dtype} tensor, which numpy cannot hold ({err}); "
            "convert it first, e.g. .float()"
        ) from None


def _numeric(value: Any, key: str, label: str) -> np.ndarray | np.generic | None:
    """``value`` as numpy if a typed column can hold it (it is numeric), else None."""
    if isinstance(value, _ARRAYS):
        return value if value.dtype.kind in _NUMERIC_KINDS else None
    if isinstance(value, torch.Tensor):
        return tensor_values(value, key, label)
    if isinstance(value, (bool, int, float, complex)):
        arr = np.asarray(value)
        return arr if arr.dtype.kind in _NUMERIC_KINDS else None  # an int beyond int64 is an object
    return None


def _owned(value: Any) -> Any:
    """``value`` as an object column keeps it: arrays and tensors copied (their owner may reuse them)."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    return value


def _is_sequence(row: Mapping[str, Any]) -> bool:
    """Every field of ``row`` is an array or tensor, all of one leading length (e.g. an episode)."""
    lengths = {
        value.shape[0] if isinstance(value, (np.ndarray, torch.Tensor)) and value.ndim else None
        for value in row.values()
    }
    return len(lengths) == 1 and None not in lengths


def _describe(value: Any, arr: np.ndarray | np.generic | None) -> str:
    """``value``'s dtype and shape (or type) for an error message."""
    if isinstance(value, (torch.Tensor, *_ARRAYS)):
        return f"{value.dtype} of shape {tuple(value.shape)}"
    if arr is not None:
        return f"a Python {type(value).__name__} ({arr.dtype})"
    return f"a {type(value).__name__}"


def _as_tensor(value: Any) -> Any:
    """A stored value of a torch column as a tensor of its own (a row view may be unaligned)."""
    return torch.from_numpy(np.array(value)) if isinstance(value, _ARRAYS) else value


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
    when all the records take at least this many bytes (None: never). ``label`` names a
    column in errors ("field", "meta key").

    Writing is two steps, so that a write that fails changes no stored item: ``prepare_*``
    checks every value (ValueError if one does not fit) and only then makes missing columns
    (or turns one ragged), returning the values to store; ``put_*`` stores them. The ring
    allocates slots in between. ``write_row``/``write_rows`` do both.
    """

    def __init__(self, capacity: int, pack_min_bytes: int | None = None, label: str = "field") -> None:
        self.capacity = capacity
        self.pack_min_bytes = pack_min_bytes
        self.label = label
        self.columns: dict[str, np.ndarray] = {}
        self.specs: dict[str, Spec] = {}
        """Row dtype and shape of each typed column (the per-step check reads only this)."""
        self.torch_fields: set[str] = set()
        """Columns whose first value was a torch tensor: they are read back as tensors."""
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

    # ---- writing -------------------------------------------------------------------
    def prepare_row(self, row: Mapping[str, Any]) -> Mapping[str, Any]:
        """Check one item's fields (see the class docstring); returns the values :meth:`put_row` stores.

        The per-step fast path: when every value is already a numpy value of its column's
        dtype and shape, ``row`` itself comes back, checked and nothing else.
        """
        specs = self.specs
        for key, value in row.items():
            spec = specs.get(key)
            if spec is None or not isinstance(value, _ARRAYS) or value.dtype != spec[0] or value.shape != spec[1]:
                return self._fit_row(row)
        return row

    def _fit_row(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """:meth:`prepare_row` for a row that converts, casts, or needs new or ragged columns."""
        values: dict[str, Any] = {}
        new: dict[str, Spec | None] = {}
        ragged = []
        for key, value in row.items():
            col = self.columns.get(key)
            if col is not None and key not in self.specs:  # an object column holds anything
                torch_values = key in self.torch_fields and isinstance(value, torch.Tensor)  # ragged torch column
                values[key] = tensor_values(value, key, self.label).copy() if torch_values else _owned(value)
                continue
            spec = self.specs.get(key)
            if spec is not None and isinstance(value, _ARRAYS) and value.dtype == spec[0] and value.shape == spec[1]:
                values[key] = value  # this field is on the fast path
                continue
            arr = None if key == OPAQUE else _numeric(value, key, self.label)
            if spec is None:
                new[key] = None if arr is None else (arr.dtype, arr.shape)
                values[key] = _owned(value) if arr is None else arr
                continue
            dtype, shape = spec
            if arr is not None and np.can_cast(arr.dtype, dtype, "same_kind"):
                if arr.shape == shape:
                    values[key] = arr
                    continue
                if arr.ndim == len(shape) > 0 and arr.shape[1:] == shape[1:] and _is_sequence(row):
                    ragged.append(key)
                    values[key] = np.array(arr)  # another length of a sequence (e.g. an episode)
                    continue
            raise ValueError(
                f"{self._what(key)} expects {self._dtype_name(key, dtype)} of shape {shape}, got "
                f"{_describe(value, arr)} (a field keeps one shape, and a value's dtype must cast to the "
                "field's within its kind, e.g. float64 to float32)"
            )
        # every value fits: only now change columns
        if self.pack_min_bytes is not None and not self.columns:
            self._pack({key: spec for key, spec in new.items() if spec is not None})
        for key, spec in new.items():
            self._new_column(key, spec, from_torch=spec is not None and isinstance(row[key], torch.Tensor))
        for key in ragged:
            self._to_object(key)
        return values

    def put_row(self, slot: int, values: Mapping[str, Any], replace: bool = True) -> None:
        """Store what :meth:`prepare_row` returned at ``slot``; ``replace``: other fields become absent."""
        columns = self.columns
        for key, value in values.items():
            columns[key][slot] = value
        present = self.present
        if present:
            for key in values:
                mask = present.get(key)
                if mask is not None:
                    mask[slot] = True
        if replace:
            self._mark(slot, values.keys())

    def write_row(self, slot: int, row: Mapping[str, Any], replace: bool = True) -> None:
        """Store one item's fields at ``slot`` (ValueError, storing nothing, if one does not fit)."""
        self.put_row(slot, self.prepare_row(row), replace)

    def prepare_rows(self, batch: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Check the fields of a columnar batch (arrays or tensors with one leading length).

        Returns them as numpy arrays for :meth:`put_rows`, after making the columns that are
        missing; ValueError naming the field when one does not fit, and then nothing changed.
        """
        arrays: dict[str, np.ndarray] = {}
        new: dict[str, Spec | None] = {}
        length = None
        specs = self.specs
        for key, value in batch.items():
            if isinstance(value, np.ndarray):
                arr = value
            elif isinstance(value, torch.Tensor):
                arr = tensor_values(value, key, self.label)
            else:
                arr = np.asarray(value)
            if arr.ndim == 0:
                raise ValueError(f"{self._what(key)} has no batch dimension (shape ())")
            if length is None:
                length = len(arr)
            elif len(arr) != length:
                raise ValueError(f"{self._what(key)} has {len(arr)} rows, expected {length}")
            spec = specs.get(key)
            if spec is None:
                if key not in self.columns:
                    numeric = arr.dtype.kind in _NUMERIC_KINDS and key != OPAQUE
                    new[key] = (arr.dtype, arr.shape[1:]) if numeric else None
            elif not (
                arr.shape[1:] == spec[1]
                and (
                    arr.dtype == spec[0]
                    or (arr.dtype.kind in _NUMERIC_KINDS and np.can_cast(arr.dtype, spec[0], "same_kind"))
                )
            ):
                raise ValueError(
                    f"{self._what(key)} expects rows of {self._dtype_name(key, spec[0])} of shape {spec[1]}, got "
                    f"{value.dtype if isinstance(value, torch.Tensor) else arr.dtype} of shape {arr.shape[1:]} "
                    "(a field keeps one shape, and a value's dtype must cast "
                    "to the field's within its kind, e.g. float64 to float32)"
                )
            arrays[key] = arr
        if new:
            if self.pack_min_bytes is not None and not self.columns:
                self._pack({key: spec for key, spec in new.items() if spec is not None})
            for key, spec in new.items():
                self._new_column(key, spec, from_torch=spec is not None and isinstance(batch[key], torch.Tensor))
        return arrays

    def put_rows(
        self,
        slots: np.ndarray | slice,
        arrays: Mapping[str, np.ndarray],
        rows: slice | np.ndarray,
        replace: bool = True,
    ) -> None:
        """Store rows ``rows`` of what :meth:`prepare_rows` returned at ``slots`` (one slot per row)."""
        count = len(slots) if isinstance(slots, np.ndarray) else len(range(self.capacity)[slots])
        # ``rows`` selecting every row (the usual push) needs no view per field
        every_row = isinstance(rows, slice) and rows in (slice(None), slice(0, count))
        for key, arr in arrays.items():
            if not (every_row and len(arr) == count):
                arr = arr[rows]
            if arr.shape[0] != count:
                raise ValueError(f"{self._what(key)} has {arr.shape[0]} rows, expected {count}")
            col = self.columns[key]
            if key in self.specs:
                col[slots] = arr
            else:
                for slot, value_row in zip(_slot_list(slots, self.capacity), arr, strict=True):
                    col[slot] = _owned(value_row)
            mask = self.present.get(key)
            if mask is not None:
                mask[slots] = True
        if replace:
            self._mark(slots, arrays.keys())

    def write_rows(
        self,
        slots: np.ndarray | slice,
        batch: Mapping[str, Any],
        rows: slice | np.ndarray,
        replace: bool = True,
    ) -> None:
        """Store rows ``rows`` of a columnar batch at ``slots`` (ValueError, storing nothing, on a misfit)."""
        self.put_rows(slots, self.prepare_rows(batch), rows, replace)

    def _what(self, key: str) -> str:
        return f"{self.label} '{key}'"

    def _dtype_name(self, key: str, dtype: np.dtype) -> str:
        """``dtype`` as the user sees the column's values: a torch dtype for a torch column."""
        return str(torch.from_numpy(np.zeros(0, dtype)).dtype) if key in self.torch_fields else str(dtype)

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

    def _new_column(self, key: str, spec: Spec | None, from_torch: bool = False) -> np.ndarray:
        """Make column ``key``: typed with row dtype and shape ``spec``, or object (None)."""
        col = self._record_views.pop(key, None)
        if col is None:
            col = np.empty(self.capacity, dtype=object) if spec is None else np.zeros(
                (self.capacity, *spec[1]), dtype=spec[0]
            )
        self.columns[key] = col
        if spec is not None:
            self.specs[key] = (col.dtype, col.shape[1:])
        if from_torch:
            self.torch_fields.add(key)
        if self.written:
            self.present[key] = np.zeros(self.capacity, dtype=bool)
        return col

    def _to_object(self, key: str) -> np.ndarray:
        """Turn typed column ``key`` ragged: an object column of one array per slot."""
        old = self.columns[key]
        new = np.empty(self.capacity, dtype=object)
        for slot in range(self.capacity):
            new[slot] = old[slot].copy() if old.ndim > 1 else old[slot]
        self.columns[key] = new
        del self.specs[key]
        self.in_records.discard(key)
        if not self.in_records:  # no column is a view of the records any more
            self.records = None
        return new

    # ---- reading -------------------------------------------------------------------
    def row(self, slot: int) -> dict[str, Any]:
        """The fields stored at ``slot`` (typed numpy columns give views / numpy scalars, torch
        columns tensors of their own)."""
        out = {}
        for key, col in self.columns.items():
            mask = self.present.get(key)
            if mask is None or mask[slot]:
                out[key] = _as_tensor(col[slot]) if key in self.torch_fields else col[slot]
        return out

    def gather(self, slots: np.ndarray, what: str = "field") -> dict[str, Any]:
        """Collate the columns at ``slots``; every column must hold a value for every slot.

        Each typed column gives an array of its own (a torch column: a tensor sharing it), a
        ragged or object column an object array.
        """
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
        if self.torch_fields:
            for key in self.torch_fields & out.keys() & self.specs.keys():
                out[key] = torch.from_numpy(out[key])
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

    def adopt(self, columns: Mapping[str, np.ndarray]) -> None:
        """Make ``columns`` (one row per slot, every slot filled) this table's columns, without copying
        them: a dataset's memory maps become a buffer's storage. Typed columns only; nothing is packed."""
        self.clear()
        self.records, self.in_records, self._record_views = None, set(), {}
        self.columns = dict(columns)
        self.specs = {key: (col.dtype, col.shape[1:]) for key, col in self.columns.items()}
        self.torch_fields = set()
        self.written = True

    def restore(
        self,
        fields: Mapping[str, tuple[np.ndarray, np.ndarray, bool]],
        written: bool,
        torch_fields: Collection[str] = (),
    ) -> None:
        """Replace every column by saved values: ``name -> (values, their slots, sparse)``.

        ``written``: whether any slot holds an item (a column born later is then sparse);
        ``torch_fields``: the columns read back as tensors. A table that may pack packs the
        dense numeric fields again.
        """
        self.columns.clear()
        self.specs.clear()
        self.torch_fields = set(torch_fields) & fields.keys()
        self.present.clear()
        self.written = False  # the columns made here get their masks from ``fields``
        self.records, self.in_records, self._record_views = None, set(), {}
        if OPAQUE in fields and fields[OPAQUE][0].dtype != object:  # saved before OPAQUE was always object
            values, slots, sparse = fields[OPAQUE]
            items = np.empty(len(values), dtype=object)
            for i, value in enumerate(values):
                items[i] = value
            fields = {**fields, OPAQUE: (items, slots, sparse)}
        self._pack(
            {
                key: (values.dtype, values.shape[1:])
                for key, (values, _, sparse) in fields.items()
                if not sparse and values.dtype.kind in _NUMERIC_KINDS
            }
        )
        for key, (values, slots, sparse) in fields.items():
            col = self._new_column(key, None if values.dtype == object else (values.dtype, values.shape[1:]))
            col[slots] = values
            if sparse:
                mask = self.present[key] = np.zeros(self.capacity, dtype=bool)
                mask[slots] = True
        self.written = written
