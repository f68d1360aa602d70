"""Ring storage: tables with sparse and object columns, id <-> slot bookkeeping."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlpipe.data.buffer.storage import DEFAULT_BACKEND, RingStorage
from rlpipe.data.buffer.table import OPAQUE, Table

BACKENDS = ["numpy"] + (["numba"] if DEFAULT_BACKEND == "numba" else [])


def test_table_sparse_columns_and_object_columns() -> None:
    table = Table(4)
    table.write_row(0, {"a": 1.0, "b": np.zeros(2)})
    table.write_row(1, {"a": 2.0})
    assert table.row(1) == {"a": 2.0} and "b" in table.present
    with pytest.raises(ValueError, match=r"field 'a' expects float64 of shape \(\), got a str"):
        table.write_row(2, {"a": "text", "c": [1]})  # a numeric column never turns object
    assert table.columns["a"].dtype == np.float64 and "c" not in table.columns  # nothing was written
    table.write_row(2, {"a": 3, "c": [1]})  # a Python int casts to float64; a list makes an object column
    table.write_row(3, {"a": 4.0, "c": "text"})  # and an object column takes anything
    assert table.row(2) == {"a": 3.0, "c": [1]} and table.row(3) == {"a": 4.0, "c": "text"}


def test_table_write_row_keeps_the_column_dtype_and_shape() -> None:
    table = Table(3)
    table.write_row(0, {"obs": np.ones(2, dtype=np.float32), "done": np.bool_(True)})
    table.write_row(1, {"obs": np.full(2, 2.0), "done": np.bool_(False)})  # float64: cast, same kind
    assert table.columns["obs"].dtype == np.float32 and table.row(1)["obs"].tolist() == [2.0, 2.0]
    with pytest.raises(ValueError, match=r"field 'obs' expects float32 of shape \(2,\), got float32 of shape \(3,\)"):
        table.write_row(2, {"done": True, "obs": np.zeros(3, dtype=np.float32)})  # another shape
    assert table.columns["obs"].dtype == np.float32 and table.columns["done"].tolist() == [True, False, False]
    table.write_row(2, {"obs": np.zeros(2, dtype=np.float16), "done": True})
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
    with pytest.raises(ValueError, match=r"field 'x' expects rows of float64 of shape \(\), got int64 of shape \(2,\)"):
        table.write_rows(np.array([0]), {"s": np.array(["c"], dtype=object), "x": np.array([[1, 2]])}, slice(None))
    assert table.columns["s"][0] is None  # nothing was written
    table.write_rows(np.array([0]), {"x": np.array([3.0]), "s": np.array([[1, 2]])}, slice(None))
    assert table.columns["x"].dtype == np.float64 and table.row(0)["s"].tolist() == [1, 2]
    assert table.row(1)["x"] == 1.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_locate_finds_exactly_the_stored_ids(backend: str) -> None:
    ring = RingStorage(5, backend=backend)
    ring.alloc(7)  # ids 0..6; 0 and 1 were overwritten
    ring.remove(ring.locate(np.array([4]))[0])
    queries = np.array([-1, 0, 1, 2, 3, 4, 5, 6, 7, 12])
    slots, exists, found = ring.locate(queries)
    assert exists.tolist() == [False, False, False, True, True, False, True, True, False, False]
    assert slots[exists].tolist() == [2, 3, 0, 1]
    assert found == 4 and not ring.locate(queries).all_found and ring.locate(np.array([5, 6])).all_found
    ring.clear()  # ids 0..6 are gone for good, even though their slots' arithmetic still works
    ring.alloc(1)
    assert ring.locate(np.array([2, 7, -1]))[1].tolist() == [False, True, False]


def cartpole_like(n: int = 4) -> dict[str, np.ndarray]:
    return {
        "obs": np.arange(2 * n, dtype=np.float32).reshape(n, 2),
        "action": np.arange(n)[::-1].copy(),
        "done": np.arange(n) % 2 == 0,
        "tag": np.array([f"t{i}" for i in range(n)], dtype=object),
    }


@pytest.mark.parametrize("first_write", ["row", "rows"])
def test_packed_table_keeps_the_first_numeric_fields_in_one_record(first_write: str) -> None:
    batch = cartpole_like()
    table = Table(4, pack_min_bytes=0)
    if first_write == "row":
        for slot in range(4):
            table.write_row(slot, {key: values[slot] for key, values in batch.items()})
    else:
        table.write_rows(slice(0, 4), batch, slice(None))
    assert table.in_records == {"obs", "action", "done"}  # the strings stay an object column
    assert table.records is not None and table.records.dtype.itemsize == 2 * 4 + 8 + 1  # no padding
    assert np.shares_memory(table.columns["obs"], table.records)
    slots = np.array([3, 0, 3])
    got = table.gather(slots)
    assert list(got) == list(batch)  # fields keep their order
    for key, values in batch.items():
        np.testing.assert_array_equal(got[key], values[slots])
        assert got[key].flags.c_contiguous and not np.shares_memory(got[key], table.records)
    np.testing.assert_array_equal(table.column("obs", slots), batch["obs"][slots])


def test_packing_keeps_the_field_order_and_skips_names_a_record_cannot_hold() -> None:
    batch = {"tag": np.array(["a", "b"], dtype=object), "obs": np.zeros((2, 2), np.float32), "act": np.arange(2)}
    table = Table(2, pack_min_bytes=0)
    table.write_rows(slice(0, 2), batch, slice(None))
    assert table.in_records == {"obs", "act"} and list(table.columns) == ["tag", "obs", "act"]
    assert list(table.gather(np.array([1]))) == ["tag", "obs", "act"]
    for odd in ({1: np.zeros(2), "a": np.ones(2)}, {"f1": np.zeros(2), "": np.ones(2)}):
        table = Table(2, pack_min_bytes=0)
        table.write_rows(slice(0, 2), odd, slice(None))
        assert table.records is None and table.gather(np.array([0])).keys() == odd.keys()


def test_packed_fields_that_turn_ragged_or_come_later_are_kept_apart() -> None:
    """Items that are sequences (e.g. episodes: every field of one length T) may vary in T."""
    table = Table(3, pack_min_bytes=0)
    episodes = {"obs": np.ones((2, 2, 4), np.float32), "r": np.zeros((2, 2))}  # two episodes of length 2
    table.write_rows(slice(0, 2), episodes, slice(None))
    table.write_row(2, {"obs": np.zeros((3, 4), np.float32), "r": np.ones(3), "extra": np.arange(3)})  # T = 3
    assert table.in_records == set() and table.records is None  # no column is a view of it any more
    assert table.columns["obs"].dtype == object and table.columns["r"].dtype == object
    assert table.specs.keys() == {"extra"}
    assert "extra" in table.present  # born after the first write: sparse
    assert table.row(2)["obs"].shape == (3, 4) and table.row(1)["obs"].shape == (2, 4)
    got = table.gather(np.array([1, 0]))  # "extra" is in neither: left out
    assert got.keys() == {"obs", "r"} and got["obs"][0].tolist() == [[1.0] * 4] * 2 and got["r"][1].tolist() == [0, 0]
    with pytest.raises(ValueError, match=r"field 'extra' expects int64 of shape \(3,\), got int64 of shape \(4,\)"):
        table.write_row(0, {"obs": np.zeros((2, 4), np.float32), "r": np.ones(2), "extra": np.arange(4)})  # no sequence
    with pytest.raises(ValueError, match="field 'extra' is missing from 1 of the selected items"):
        table.gather(np.array([0, 2]))


def test_restore_packs_the_dense_numeric_fields_again() -> None:
    table = Table(4, pack_min_bytes=0)
    slots = np.array([2, 0])
    table.restore(
        {
            "obs": (np.ones((2, 3), np.float32), slots, False),
            "name": (np.array(["a", "b"], dtype=object), slots, False),
            "hint": (np.array([7]), np.array([2]), True),
        },
        written=True,
    )
    assert table.in_records == {"obs"} and np.shares_memory(table.columns["obs"], table.records)
    row = table.row(2)
    assert row["obs"].tolist() == [1.0] * 3 and (row["name"], row["hint"]) == ("a", 7)
    assert table.row(0).keys() == {"obs", "name"} and table.columns["name"][1] is None
    table.write_row(1, {"obs": np.zeros(3, np.float32), "name": "c", "late": 1.0})
    assert "late" in table.present and not table.present["late"][0]  # born after items existed: sparse
    assert RingStorage(2).meta.pack_min_bytes is None


def test_a_table_smaller_than_pack_min_bytes_keeps_separate_columns() -> None:
    table = Table(4, pack_min_bytes=4 * 17 + 1)  # one byte more than 4 records of 17 bytes
    table.write_rows(slice(0, 4), cartpole_like(), slice(None))
    assert table.records is None and not table.in_records and table.columns["obs"].flags.c_contiguous
    assert table.gather(np.array([1]))["obs"].tolist() == [[2.0, 3.0]]


def test_unknown_storage_backend_is_rejected() -> None:
    with pytest.raises(ValueError, match="backend 'gpu' is not available"):
        RingStorage(4, backend="gpu")


@pytest.mark.parametrize("pack", [None, 0])
def test_tensor_columns_are_typed_numpy_read_back_as_tensors(pack: int | None) -> None:
    table = Table(4, pack_min_bytes=pack)
    obs = torch.arange(4, dtype=torch.float32)
    table.write_row(0, {"obs": obs, "done": torch.tensor(True), "n": np.int64(1)})
    batch = {"obs": torch.ones(2, 4), "done": torch.zeros(2, dtype=torch.bool), "n": [2, 3]}
    table.write_rows(slice(1, 3), batch, slice(None))
    table.write_row(3, {"obs": np.full(4, 2.0), "done": False, "n": 4})  # castable numpy and Python values too
    assert table.specs == {"obs": (np.float32, (4,)), "done": (np.bool_, ()), "n": (np.int64, ())}
    assert table.torch_fields == {"obs", "done"} and table.columns["obs"].dtype == np.float32
    obs += 1  # the caller's tensor is not the stored values
    row = table.row(0)
    assert torch.equal(row["obs"], torch.arange(4, dtype=torch.float32))
    assert row["done"].shape == () and row["done"].item() is True
    assert isinstance(row["n"], np.integer)
    assert not np.shares_memory(row["obs"].numpy(), table.columns["obs"])  # a row is a copy
    got = table.gather(np.array([3, 0]))
    assert isinstance(got["obs"], torch.Tensor) and got["obs"].shape == (2, 4) and got["obs"].dtype == torch.float32
    assert got["done"].tolist() == [False, True] and got["done"].dtype == torch.bool
    assert isinstance(got["n"], np.ndarray) and got["n"].tolist() == [4, 1]


def test_prepare_row_passes_a_fitting_row_through_and_checks_before_changing_anything() -> None:
    table = Table(2)
    table.write_row(0, {"x": np.zeros(2, np.float32), "y": np.int64(1)})
    row = {"x": np.ones(2, np.float32), "y": np.int64(2)}
    assert table.prepare_row(row) is row  # the per-step fast path: nothing converted, nothing copied
    with pytest.raises(ValueError, match="field 'y' expects int64"):
        table.prepare_row({"new": 1.0, "x": np.ones(2, np.float32), "y": 0.5})
    assert "new" not in table.columns  # a failed check makes no column
    values = table.prepare_row({OPAQUE: np.arange(3)})
    assert table.columns[OPAQUE].dtype == object and values[OPAQUE].tolist() == [0, 1, 2]  # always an object column
