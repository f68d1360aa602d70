"""Ring storage: tables with sparse and object columns, id <-> slot bookkeeping."""

from __future__ import annotations

import numpy as np
import pytest

from rlpipe.data.buffer.storage import DEFAULT_BACKEND, RingStorage, Table

BACKENDS = ["numpy"] + (["numba"] if DEFAULT_BACKEND == "numba" else [])


def test_table_sparse_columns_and_object_fallback() -> None:
    table = Table(4)
    table.write_row(0, {"a": 1.0, "b": np.zeros(2)})
    table.write_row(1, {"a": 2.0})
    assert table.row(1) == {"a": 2.0} and "b" in table.present
    table.write_row(2, {"a": "text", "c": [1]})
    assert table.columns["a"].dtype == object and table.row(0)["a"] == 1.0
    assert table.row(2) == {"a": "text", "c": [1]}


def test_table_write_row_keeps_the_column_dtype_and_shape() -> None:
    table = Table(3)
    table.write_row(0, {"obs": np.ones(2, dtype=np.float32), "done": np.bool_(True)})
    table.write_row(1, {"obs": np.full(2, 2.0), "done": np.bool_(False)})  # float64: cast, same kind
    assert table.columns["obs"].dtype == np.float32 and table.row(1)["obs"].tolist() == [2.0, 2.0]
    table.write_row(2, {"obs": np.zeros(3, dtype=np.float32), "done": True})  # another shape: object
    assert table.columns["obs"].dtype == object and table.row(2)["obs"].shape == (3,)
    assert table.columns["done"].tolist() == [True, False, True]


def test_ring_ids_map_to_slots_after_wrap_and_clear() -> None:
    ring = RingStorage(3)
    ids, slots, kept = ring.alloc(5)
    assert slots.tolist() == [2, 0, 1]
    assert ids.tolist() == [0, 1, 2, 3, 4] and kept == slice(2, 5)
    assert ring.locate(np.array([1, 2, 4]))[1].tolist() == [False, True, True]
    ring.clear()
    new_id, slot = ring.alloc_one()
    assert (new_id, slot) == (5, 0) and ring.slot_of(5) == 0 and ring.slot_of(2) is None
    ids, slots, kept = ring.alloc(2)  # no wrap: the slots are a slice
    assert ids.tolist() == [6, 7] and slots == slice(1, 3) and ring.count == 3
    assert ring.locate(np.array([5, 6, 7, -1]))[1].tolist() == [True, True, True, False]


def test_table_write_rows_to_a_slice_and_object_columns() -> None:
    table = Table(4)
    table.write_rows(slice(1, 3), {"x": np.array([1.0, 2.0]), "s": np.array(["a", "b"], dtype=object)}, slice(None))
    assert table.columns["x"][1:3].tolist() == [1.0, 2.0] and table.row(2) == {"x": 2.0, "s": "b"}
    table.write_rows(np.array([0]), {"x": np.array([[1, 2]])}, slice(None))  # another shape: object
    assert table.columns["x"].dtype == object and table.row(0)["x"].tolist() == [1, 2]
    assert table.row(1)["x"] == 1.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_locate_finds_exactly_the_stored_ids(backend: str) -> None:
    ring = RingStorage(5, backend=backend)
    ring.alloc(7)  # ids 0..6; 0 and 1 were overwritten
    ring.remove(ring.locate(np.array([4]))[0])
    queries = np.array([-1, 0, 1, 2, 3, 4, 5, 6, 7, 12])
    slots, exists = ring.locate(queries)
    assert exists.tolist() == [False, False, False, True, True, False, True, True, False, False]
    assert slots[exists].tolist() == [2, 3, 0, 1]
    ring.clear()  # ids 0..6 are gone for good, even though their slots' arithmetic still works
    ring.alloc(1)
    assert ring.locate(np.array([2, 7, -1]))[1].tolist() == [False, True, False]


def test_unknown_storage_backend_is_rejected() -> None:
    with pytest.raises(ValueError, match="backend 'gpu' is not available"):
        RingStorage(4, backend="gpu")
