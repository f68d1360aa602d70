"""Ring storage: tables with sparse and object columns, id <-> slot bookkeeping."""

from __future__ import annotations

import numpy as np

from rlpipe.data.buffer.storage import RingStorage, Table


def test_table_sparse_columns_and_object_fallback() -> None:
    table = Table(4)
    table.write_row(0, {"a": 1.0, "b": np.zeros(2)})
    table.write_row(1, {"a": 2.0})
    assert table.row(1) == {"a": 2.0} and "b" in table.present
    table.write_row(2, {"a": "text", "c": [1]})
    assert table.columns["a"].dtype == object and table.row(0)["a"] == 1.0
    assert table.row(2) == {"a": "text", "c": [1]}


def test_ring_ids_map_to_slots_after_wrap_and_clear() -> None:
    ring = RingStorage(3)
    ids, slots, kept = ring.alloc(5)
    assert slots.tolist() == [2, 0, 1]
    assert ids.tolist() == [0, 1, 2, 3, 4] and kept == slice(2, 5)
    assert ring.locate(np.array([1, 2, 4]))[1].tolist() == [False, True, True]
    ring.clear()
    new_id, slot = ring.alloc_one()
    assert (new_id, slot) == (5, 0) and ring.slot_of(5) == 0 and ring.slot_of(2) is None
