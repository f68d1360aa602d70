"""DequeBuffer: the seed's item API, the columnar fast path, ring order and thread safety."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rlpipe.data import BufferedData, DequeBuffer, SampledBatch


def transitions(n: int, start: int = 0, env: int | None = None) -> dict[str, np.ndarray]:
    ids = np.arange(start, start + n)
    batch = {
        "obs": np.stack([ids, -ids]).T.astype(np.float32),
        "action": ids.astype(np.int64),
        "reward": ids.astype(np.float32),
        "terminated": ids % 5 == 4,
    }
    if env is not None:
        batch["env_id"] = np.full(n, env)
    return batch


# ---- push / get / count ---------------------------------------------------------------
def test_push_returns_item_with_monotonic_int_index() -> None:
    buf = DequeBuffer(3)
    items = [buf.push({"x": np.float32(i)}, {"k": i}) for i in range(5)]
    assert [item.index for item in items] == [0, 1, 2, 3, 4]
    assert items[4] == BufferedData({"x": np.float32(4)}, 4, {"k": 4})
    assert buf.count() == 3 == len(buf)


def test_get_is_oldest_first_and_get_by_index_finds_only_stored() -> None:
    buf = DequeBuffer(3)
    for i in range(5):
        buf.push({"x": i})
    assert [int(buf.get(i).data["x"]) for i in range(3)] == [2, 3, 4]
    assert int(buf.get(-1).data["x"]) == 4
    assert int(buf.get_by_index(3).data["x"]) == 3
    with pytest.raises(KeyError, match="index 1 "):
        buf.get_by_index(1)
    with pytest.raises(IndexError, match="item 3 out of range"):
        buf.get(3)


def test_arbitrary_objects_and_episodes_round_trip_through_item_api() -> None:
    buf = DequeBuffer(4)
    episode_a = {"obs": np.zeros((3, 2)), "reward": np.ones(3)}
    episode_b = {"obs": np.ones((5, 2)), "reward": np.zeros(5)}
    buf.push([1, "two", None])
    buf.push(episode_a)
    buf.push(episode_b)
    assert buf.get(0).data == [1, "two", None]
    assert buf.get(1).data["obs"].shape == (3, 2)
    assert buf.get(2).data["obs"].shape == (5, 2)
    np.testing.assert_array_equal(buf.get(2).data["reward"], np.zeros(5))


@settings(max_examples=60, deadline=None)
@given(
    size=st.integers(1, 12),
    pushes=st.lists(st.one_of(st.just(1), st.integers(0, 20)), min_size=1, max_size=12),
)
def test_ring_overwrite_keeps_newest_in_order(size: int, pushes: list[int]) -> None:
    """Mixed single and batch pushes: the buffer holds the last `size` rows, oldest first."""
    buf = DequeBuffer(size)
    total = 0
    for n in pushes:
        if n == 1 and total % 2:
            buf.push({k: v[0] for k, v in transitions(1, total).items()})
        elif n:
            ids = buf.push_batch(transitions(n, total))
            np.testing.assert_array_equal(ids, np.arange(total, total + n))
        total += n
    expected = list(range(max(0, total - size), total))
    assert buf.count() == len(expected)
    assert [buf.get(i).index for i in range(buf.count())] == expected
    assert [int(buf.get(i).data["action"]) for i in range(buf.count())] == expected
    if expected:
        batch = buf.sample_batch(len(expected))
        np.testing.assert_array_equal(np.sort(batch.indices), expected)
        np.testing.assert_array_equal(batch.data["action"], batch.indices)


# ---- fast path ------------------------------------------------------------------------
def test_sample_batch_is_collated_with_contract_dtypes() -> None:
    buf = DequeBuffer(10, seed=0)
    buf.push_batch(transitions(6))
    batch = buf.sample_batch(4)
    assert isinstance(batch, SampledBatch)
    assert batch.indices.dtype == np.int64 and batch.indices.shape == (4,)
    assert len(set(batch.indices.tolist())) == 4
    assert batch.data["obs"].shape == (4, 2) and batch.data["obs"].dtype == np.float32
    assert batch.data["terminated"].dtype == bool
    np.testing.assert_array_equal(batch.data["reward"], batch.indices.astype(np.float32))


def test_sample_batch_shortage_names_both_numbers() -> None:
    buf = DequeBuffer(10)
    buf.push_batch(transitions(3))
    with pytest.raises(ValueError, match=r"cannot sample 5 .*only 3 available"):
        buf.sample_batch(5)
    assert buf.sample_batch(5, replace=True).indices.shape == (5,)


def test_push_batch_rejects_ragged_fields_without_storing() -> None:
    buf = DequeBuffer(10)
    bad = transitions(3)
    bad["reward"] = np.zeros(2)
    with pytest.raises(ValueError, match="field 'reward' has 2 rows"):
        buf.push_batch(bad)
    with pytest.raises(ValueError, match="meta has 1 rows, batch has 3"):
        buf.push_batch(transitions(3), {"k": np.zeros(1)})
    assert buf.count() == 0


def test_push_batch_larger_than_capacity_keeps_last_rows() -> None:
    buf = DequeBuffer(4)
    ids = buf.push_batch(transitions(10))
    np.testing.assert_array_equal(ids, np.arange(10))
    assert [buf.get(i).index for i in range(4)] == [6, 7, 8, 9]
    np.testing.assert_array_equal(buf.update_batch(ids, {"p": np.ones(10)}), np.arange(10) >= 6)


def test_update_batch_sets_meta_and_reports_missing() -> None:
    buf = DequeBuffer(4)
    ids = buf.push_batch(transitions(4), {"env": np.arange(4)})
    buf.delete(ids[1])
    ok = buf.update_batch(np.array([0, 1, 2, 99]), {"priority": np.array([1.0, 2.0, 3.0, 4.0])})
    np.testing.assert_array_equal(ok, [True, False, True, False])
    assert buf.get_by_index(2).meta == {"env": 2, "priority": 3.0}
    assert buf.get_by_index(3).meta == {"env": 3}


def test_update_batch_takes_indices_of_any_shape() -> None:
    buf = DequeBuffer(4)
    buf.push_batch(transitions(4))
    ok = buf.update_batch(np.array([[0, 1], [2, 9]]), {"priority": np.array([[1.0, 2.0], [3.0, 4.0]])})
    assert ok.tolist() == [[True, True], [True, False]]
    assert [buf.get_by_index(i).meta["priority"] for i in range(3)] == [1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match=r"meta 'priority' has shape \(4,\), indices have shape \(2, 2\)"):
        buf.update_batch(np.array([[0, 1], [2, 3]]), {"priority": np.ones(4)})


def test_a_value_that_does_not_fit_its_field_raises_and_stores_nothing() -> None:
    buf = DequeBuffer(2)
    buf.push({"obs": np.zeros(2), "info": 1}, {"k": 0})
    buf.push({"obs": np.ones(2), "info": 2}, {"k": 1})  # full
    with pytest.raises(ValueError, match=r"field 'obs' expects float64 of shape \(2,\), got float64 of shape \(3,\)"):
        buf.push({"obs": np.zeros(3), "info": 3})
    with pytest.raises(ValueError, match=r"field 'info' expects int64 of shape \(\), got a str"):
        buf.push({"obs": np.zeros(2), "info": "text"})
    with pytest.raises(ValueError, match=r"meta key 'k' expects int64 of shape \(\), got a Python float"):
        buf.push({"obs": np.zeros(2), "info": 3}, {"k": 0.5})
    with pytest.raises(ValueError, match=r"field 'info' expects rows of int64 of shape \(\), got <U1"):
        buf.push_batch({"obs": np.zeros((1, 2)), "info": np.array(["a"])})
    assert buf.count() == 2 and buf.storage.next_id == 2  # nothing stored, nothing evicted
    assert [(float(buf.get(i).data["obs"][0]), int(buf.get(i).data["info"])) for i in range(2)] == [(0, 1), (1, 2)]
    with pytest.raises(ValueError, match="field 'obs'"):
        buf.update(0, data={"obs": np.zeros(3), "info": 1}, meta={"k": 5})
    assert buf.get_by_index(0).meta == {"k": 0}  # the meta was not written either


def test_sample_batch_with_missing_field_names_it() -> None:
    buf = DequeBuffer(4, seed=0)
    buf.push({"a": 1.0, "b": 2.0})
    buf.push({"a": 1.0})
    assert buf.get(1).data.keys() == {"a"}
    with pytest.raises(ValueError, match="field 'b' is missing from 1 of the selected items"):
        buf.sample_batch(2)


# ---- seed sample arguments -------------------------------------------------------------
def test_sample_size_indices_replace_and_errors() -> None:
    buf = DequeBuffer(10, seed=1)
    buf.push_batch(transitions(5))
    assert sorted(item.index for item in buf.sample(5)) == [0, 1, 2, 3, 4]
    assert [item.index for item in buf.sample(indices=[3, 1])] == [3, 1]
    assert len(buf.sample(12, replace=True)) == 12
    assert len(buf.sample(8, ignore_insufficient=True)) == 5
    with pytest.raises(ValueError, match=r"cannot sample 6 items without replacement: only 5 available"):
        buf.sample(6)
    with pytest.raises(ValueError, match=r"1 indices are not in the buffer, e\.g\. 7"):
        buf.sample(indices=[1, 7])
    assert [item.index for item in buf.sample(indices=[1, 7], ignore_insufficient=True)] == [1]
    with pytest.raises(ValueError, match="size or indices"):
        buf.sample()
    with pytest.raises(ValueError, match="not both"):
        buf.sample(2, indices=[1])
    with pytest.raises(ValueError, match="must be >= 0"):
        buf.sample(-1)
    empty = DequeBuffer(3)
    with pytest.raises(ValueError, match="0 available"):
        empty.sample(1, replace=True)
    assert empty.sample(1, replace=True, ignore_insufficient=True) == []


def test_sample_range_slices_oldest_first() -> None:
    buf = DequeBuffer(10, seed=0)
    buf.push_batch(transitions(10))
    assert {item.index for item in buf.sample(3, sample_range=slice(-3, None))} == {7, 8, 9}
    assert {item.index for item in buf.sample(2, sample_range=slice(0, 2))} == {0, 1}
    with pytest.raises(ValueError, match="only 2 available"):
        buf.sample(3, sample_range=slice(0, 2))
    batch = buf.sample_batch(3, sample_range=slice(-3, None))
    assert set(batch.indices.tolist()) == {7, 8, 9}


def _interleaved(buf: DequeBuffer, steps: int) -> None:
    """Two envs stepped together: rows alternate env 0, env 1."""
    for t in range(steps):
        buf.push_batch({"t": np.array([t, t]), "env_id": np.array([0, 1])}, {"env": np.array([0, 1])})


def test_groupby_returns_whole_groups_in_push_order() -> None:
    buf = DequeBuffer(20, seed=0)
    _interleaved(buf, 4)
    groups = buf.sample(2, groupby="env")
    assert sorted(int(g[0].meta["env"]) for g in groups) == [0, 1]
    for group in groups:
        assert [int(item.data["t"]) for item in group] == [0, 1, 2, 3]
        assert len({int(item.meta["env"]) for item in group}) == 1
    with pytest.raises(ValueError, match="cannot sample 3 groups"):
        buf.sample(3, groupby="env")
    with pytest.raises(ValueError, match="meta key 'episode' is missing"):
        buf.sample(1, groupby="episode")


@settings(max_examples=30, deadline=None)
@given(
    steps=st.integers(1, 12), unroll=st.integers(1, 5), capacity=st.integers(4, 30), seed=st.integers(0, 99)
)
def test_unroll_runs_are_consecutive_and_from_one_group(
    steps: int, unroll: int, capacity: int, seed: int
) -> None:
    buf = DequeBuffer(capacity, seed=seed)
    _interleaved(buf, steps)
    stored = buf.count()
    per_env = [sum(1 for i in range(stored) if int(buf.get(i).meta["env"]) == e) for e in (0, 1)]
    runs_available = sum(max(0, n - unroll + 1) for n in per_env)
    assert buf.count_runs(unroll, "env") == runs_available
    if runs_available == 0:
        with pytest.raises(ValueError, match=f"runs of {unroll}"):
            buf.sample(1, groupby="env", unroll_len=unroll)
        return
    runs = buf.sample(runs_available, groupby="env", unroll_len=unroll)
    assert len({tuple(item.index for item in run) for run in runs}) == runs_available
    for run in runs:
        assert len(run) == unroll
        assert len({int(item.meta["env"]) for item in run}) == 1
        ts = [int(item.data["t"]) for item in run]
        assert ts == list(range(ts[0], ts[0] + unroll))
    batch = buf.sample_batch(runs_available, groupby="env", unroll_len=unroll)
    assert batch.indices.shape == (runs_available, unroll)
    assert batch.data["t"].shape == (runs_available, unroll)
    np.testing.assert_array_equal(np.diff(batch.data["t"], axis=1), 1)
    assert (batch.data["env_id"] == batch.data["env_id"][:, :1]).all()


def test_sample_batch_groupby_needs_unroll_len() -> None:
    buf = DequeBuffer(8)
    _interleaved(buf, 2)
    with pytest.raises(ValueError, match="only with unroll_len"):
        buf.sample_batch(1, groupby="env")


# ---- update / delete / clear / view ----------------------------------------------------
def test_update_replaces_data_and_merges_meta() -> None:
    buf = DequeBuffer(4)
    item = buf.push({"x": 1}, {"a": 1, "b": 2})
    assert buf.update(item.index, data={"x": 5}, meta={"b": 3})
    stored = buf.get_by_index(item.index)
    assert int(stored.data["x"]) == 5 and stored.meta == {"a": 1, "b": 3}
    assert not buf.update(99, meta={"a": 0})


def test_delete_keeps_lookups_consistent_and_slots_reusable() -> None:
    buf = DequeBuffer(5, seed=0)
    buf.push_batch(transitions(5))
    buf.delete([1, 3, 42])
    buf.delete(1)
    assert buf.count() == 3
    assert [buf.get(i).index for i in range(3)] == [0, 2, 4]
    assert {item.index for item in buf.sample(3)} == {0, 2, 4}
    assert set(buf.sample_batch(3).indices.tolist()) == {0, 2, 4}
    with pytest.raises(ValueError, match="only 3 available"):
        buf.sample(4)
    buf.push_batch(transitions(2, 5))  # overwrites slots of ids 0 (valid) and 1 (deleted)
    assert [buf.get(i).index for i in range(buf.count())] == [2, 4, 5, 6]
    assert int(buf.get_by_index(6).data["action"]) == 6


def test_clear_empties_but_indices_keep_counting() -> None:
    buf = DequeBuffer(3)
    buf.push_batch(transitions(3))
    buf.clear()
    assert buf.count() == 0
    with pytest.raises(KeyError):
        buf.get_by_index(0)
    assert buf.push({"x": 1}).index == 3
    assert buf.get(0).data == {"x": 1}


def test_view_shares_storage_with_its_own_middleware() -> None:
    buf = DequeBuffer(5)
    seen = []

    def spy(action, chain, *args, **kwargs):
        seen.append(action)
        return chain(*args, **kwargs)

    view = buf.view().use(spy)
    buf.push({"x": 1})
    assert view.count() == 1 and seen == []
    view.push({"x": 2})
    assert buf.count() == 2 and seen == ["push"]
    assert buf.middleware == []


def test_concurrent_push_and_sample_stay_consistent() -> None:
    buf = DequeBuffer(64, seed=0)
    buf.push_batch(transitions(64))
    errors: list[BaseException] = []

    def pusher() -> None:
        try:
            for i in range(300):
                buf.push_batch(transitions(4, 64 + 4 * i))
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)

    def sampler() -> None:
        try:
            for _ in range(300):
                batch = buf.sample_batch(32)
                np.testing.assert_array_equal(batch.data["action"], batch.indices)
                assert len(set(batch.indices.tolist())) == 32
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [
        threading.Thread(target=pusher),
        threading.Thread(target=sampler),
        threading.Thread(target=sampler),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert buf.count() == 64 and buf.get(-1).index == 64 + 4 * 300 - 1


# ---- torch tensors (the seed's transitions) ---------------------------------------------
def tensor_transition(i: int) -> dict[str, torch.Tensor]:
    return {
        "obs": torch.arange(4, dtype=torch.float32) + i,
        "action": torch.tensor([i], dtype=torch.int64),
        "reward": torch.tensor([0.5 * i], dtype=torch.float32),
        "done": torch.tensor(i % 3 == 2),
    }


def tensor_batch(n: int, start: int = 0) -> dict[str, torch.Tensor]:
    rows = [tensor_transition(i) for i in range(start, start + n)]
    return {key: torch.stack([row[key] for row in rows]) for key in rows[0]}


EXPECTED = {"obs": (torch.float32, (4,)), "action": (torch.int64, (1,)), "reward": (torch.float32, (1,)),
            "done": (torch.bool, ())}  # fmt: skip


def assert_is_transition(data: dict[str, Any], i: int) -> None:
    assert data.keys() >= EXPECTED.keys()
    for key, (dtype, shape) in EXPECTED.items():
        assert isinstance(data[key], torch.Tensor) and data[key].dtype == dtype and data[key].shape == shape, key
        assert torch.equal(data[key], tensor_transition(i)[key]), key


def test_tensor_transitions_come_back_as_tensors() -> None:
    buf = DequeBuffer(8, seed=0)
    for i in range(3):
        pushed = tensor_transition(i)
        item = buf.push(pushed, {"env": i})
        assert item.data is pushed
    ids = buf.push_batch(tensor_batch(3, start=3), {"env": torch.arange(3, 6)})
    assert ids.tolist() == [3, 4, 5]
    for i in range(6):
        assert_is_transition(buf.get(i).data, i)
        assert_is_transition(buf.get_by_index(i).data, i)
        assert buf.get(i).meta == {"env": i}  # meta pushed as tensors comes back as tensors too
    for item in buf.sample(4):
        assert_is_transition(item.data, item.index)
    stored = buf.storage.data.columns
    assert all(stored[key].dtype != object for key in EXPECTED)  # typed numpy columns underneath
    got = buf.get(0).data["obs"]
    got += 100  # a row read is the caller's own tensor
    assert_is_transition(buf.get(0).data, 0)


@pytest.mark.parametrize("unroll_len", [None, 2])
def test_sample_batch_of_tensor_fields_is_stacked_tensors(unroll_len: int | None) -> None:
    buf = DequeBuffer(16, seed=0)
    buf.push_batch({**tensor_batch(6), "env_id": np.zeros(6, dtype=np.int64)})  # a numpy field too
    for i in range(6, 8):
        buf.push({**tensor_transition(i), "env_id": np.int64(0)})
    batch = buf.sample_batch(4, unroll_len=unroll_len)
    lead = (4,) if unroll_len is None else (4, 2)
    assert batch.indices.shape == lead
    for key, (dtype, shape) in EXPECTED.items():
        value = batch.data[key]
        assert isinstance(value, torch.Tensor) and value.dtype == dtype and value.shape == lead + shape, key
        expected = torch.stack([tensor_transition(i)[key] for i in batch.indices.reshape(-1).tolist()])
        assert torch.equal(value.reshape(-1, *shape), expected)
    assert isinstance(batch.data["env_id"], np.ndarray) and batch.data["env_id"].dtype == np.int64
    again = buf.sample_batch(1, indices=batch.indices.reshape(-1)[:1])
    again.data["obs"] += 100  # a batch is the caller's own: the buffer is unchanged
    assert_is_transition(buf.get_by_index(int(batch.indices.reshape(-1)[0])).data, int(batch.indices.reshape(-1)[0]))


def test_a_tensor_that_does_not_fit_its_field_names_field_and_both_dtypes_and_shapes() -> None:
    buf = DequeBuffer(4)
    buf.push(tensor_transition(0))
    expects = r"field 'obs' expects torch.float32 of shape \(4,\), got torch.float32 of shape \(3,\)"
    with pytest.raises(ValueError, match=expects):
        buf.push({**tensor_transition(1), "obs": torch.zeros(3)})
    expects = r"field 'action' expects torch.int64 of shape \(1,\), got torch.float32 of shape \(1,\)"
    with pytest.raises(ValueError, match=expects):
        buf.push({**tensor_transition(1), "action": torch.tensor([1.5])})
    expects = r"field 'action' expects rows of torch.int64 of shape \(1,\), got torch.float32 of shape \(1,\)"
    with pytest.raises(ValueError, match=expects):
        buf.push_batch({**tensor_batch(2), "action": torch.zeros(2, 1)})
    with pytest.raises(ValueError, match=r"field 'obs' expects rows of torch.float32 of shape \(4,\), got .* \(5,\)"):
        buf.push_batch({**tensor_batch(2), "obs": torch.zeros(2, 5)})
    with pytest.raises(ValueError, match=r"field 'x' is a torch.bfloat16 tensor, which numpy cannot hold"):
        buf.push({**tensor_transition(1), "x": torch.zeros(2, dtype=torch.bfloat16)})
    assert buf.count() == 1 and "x" not in buf.storage.data.columns
    buf.push({**tensor_transition(1), "obs": np.arange(4.0) + 1, "done": False})  # castable values are fine
    assert_is_transition(buf.get(1).data, 1)


def test_tensor_episodes_of_varying_length_and_whole_tensor_items() -> None:
    buf = DequeBuffer(4)
    for length in (3, 5):
        buf.push({"obs": torch.ones(length, 2), "reward": torch.zeros(length)})  # every field [T, ...]
    assert [tuple(buf.get(i).data["obs"].shape) for i in range(2)] == [(3, 2), (5, 2)]
    assert isinstance(buf.get(1).data["reward"], torch.Tensor)
    item = torch.arange(3)
    buf.push(item)  # not a dict of fields: kept as the object it is (a copy)
    assert torch.equal(buf.get(2).data, item) and buf.get(2).data is not item


def test_update_and_delete_of_unknown_indices_change_nothing() -> None:
    buf = DequeBuffer(3)
    for i in range(4):  # id 0 is overwritten by id 3
        buf.push(tensor_transition(i), {"k": i})
    for unknown in (0, 99, -1, "abc", None, 1.5, True, np.float64(2.0)):  # stale, never pushed, foreign
        assert buf.update(unknown, data=tensor_transition(9), meta={"k": 9}) is False
        assert buf.delete(unknown) is None
        assert buf.count() == 3
    assert buf.update([1], meta={"k": 9}) is False  # a list is not one index
    assert [buf.get(i).meta["k"] for i in range(3)] == [1, 2, 3]
    assert_is_transition(buf.get_by_index(1).data, 1)
    with pytest.raises(KeyError, match="index 'abc' is not in the buffer"):
        buf.get_by_index("abc")
    buf.delete([2, "abc", None, 99])  # the stored one among foreign ones goes
    assert [buf.get(i).index for i in range(buf.count())] == [1, 3]
    with pytest.raises(ValueError, match="indices must be integers"):
        buf.update_batch(np.array(["abc"]), {"k": np.zeros(1)})
    with pytest.raises(ValueError, match="indices must be integers"):
        buf.update_batch([1.5], {"k": np.zeros(1)})
    assert buf.update_batch(np.array([0, 1]), {"k": np.array([7, 8])}).tolist() == [False, True]
