"""save_data / load_data: exact round trip, no pickle, clear errors for unsafe data."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from rlpipe.data import DequeBuffer, PriorityExperienceReplay, use_time_check


def build(seed=3):
    buf = DequeBuffer(6, seed=seed)
    per = PriorityExperienceReplay(buf, priority_power_factor=1.0)
    buf.use(per)
    buf.use(use_time_check(buf, max_use=5))
    return buf, per


def test_round_trip_restores_everything(tmp_path, layout: str) -> None:
    buf, per = build()
    ids = buf.push_batch(
        {"obs": np.arange(16, dtype=np.float32).reshape(8, 2), "done": np.arange(8) % 3 == 0},
        {"env": np.arange(8) % 2},
    )
    buf.update_batch(ids, {"priority": np.arange(8, dtype=float) + 1})
    buf.push({"obs": np.ones(2, dtype=np.float32), "done": True}, {"episode": "ep-7"})
    buf.delete(4)
    buf.sample_batch(2)
    path = tmp_path / "buffer.npz"
    buf.save_data(str(path))

    other, other_per = build(seed=99)
    other.push({"junk": 1})
    other.load_data(str(path))
    assert other.count() == buf.count()
    assert other.storage.data.in_records == ({"obs", "done"} if layout == "records" else set())
    for i in range(buf.count()):
        a, b = buf.get(i), other.get(i)
        assert a.index == b.index and a.meta.keys() == b.meta.keys()
        for key in a.data:
            np.testing.assert_array_equal(a.data[key], b.data[key])
        assert {k: str(v) for k, v in a.meta.items()} == {k: str(v) for k, v in b.meta.items()}
    np.testing.assert_array_equal(per.tree.sums, other_per.tree.sums)
    np.testing.assert_array_equal(per.tree.mins, other_per.tree.mins)
    assert other_per.max_priority == per.max_priority and other_per.sample_calls == per.sample_calls
    np.testing.assert_array_equal(other.middleware[1].use_count, buf.middleware[1].use_count)
    # same ring position and RNG: the next operations agree exactly
    assert (
        other.push({"obs": np.zeros(2, dtype=np.float32), "done": False}).index
        == buf.push({"obs": np.zeros(2, dtype=np.float32), "done": False}).index
    )
    a, b = buf.sample_batch(3), other.sample_batch(3)
    np.testing.assert_array_equal(a.indices, b.indices)
    np.testing.assert_array_equal(a.data["weight"], b.data["weight"])
    with np.load(path, allow_pickle=False) as npz:  # loads without pickle
        assert "__header__" in npz.files


def test_episodes_and_strings_are_saved_ragged(tmp_path) -> None:
    buf = DequeBuffer(4)
    buf.push({"obs": np.zeros((3, 2)), "goal": np.ones((3, 2))}, {"name": "a"})  # episodes: fields [T, ...]
    buf.push({"obs": np.ones((5, 2)), "goal": np.ones((5, 2))}, {"name": "bb"})
    buf.push(np.arange(4))  # whole items that are not dicts of fields
    buf.push(np.arange(6))
    buf.save_data(str(tmp_path / "ep.npz"))
    other = DequeBuffer(4)
    other.load_data(str(tmp_path / "ep.npz"))
    np.testing.assert_array_equal(other.get(1).data["obs"], np.ones((5, 2)))
    assert other.get(0).meta == {"name": "a"}
    np.testing.assert_array_equal(other.get(3).data, np.arange(6))


def test_unsafe_data_fails_at_save_and_bad_files_fail_at_load(tmp_path) -> None:
    buf = DequeBuffer(4)
    buf.push({"info": {"nested": 1}})
    with pytest.raises(ValueError, match="cannot save data field 'info' safely: it holds dict"):
        buf.save_data(str(tmp_path / "bad.npz"))
    assert not (tmp_path / "bad.npz").exists()
    assert list(tmp_path.iterdir()) == []
    np.savez(tmp_path / "other.npz", x=np.zeros(2))
    with pytest.raises(ValueError, match="not a saved rlpipe buffer"):
        buf.load_data(str(tmp_path / "other.npz"))
    ok = DequeBuffer(4)
    ok.push({"x": 1})
    ok.save_data(str(tmp_path / "ok.npz"))
    with pytest.raises(ValueError, match="size 4, this one has 5"):
        DequeBuffer(5).load_data(str(tmp_path / "ok.npz"))
    with_per = DequeBuffer(4)
    with_per.use(PriorityExperienceReplay(with_per))
    with pytest.raises(ValueError, match="middleware"):
        with_per.load_data(str(tmp_path / "ok.npz"))


def test_tensor_data_round_trips_as_tensors_without_pickle(tmp_path) -> None:
    def transition(i: int) -> dict[str, torch.Tensor]:
        return {
            "obs": torch.arange(4, dtype=torch.float32) + i,
            "action": torch.tensor([i]),
            "reward": torch.tensor([0.5 * i]),
            "done": torch.tensor(i % 2 == 1),
        }

    buf = DequeBuffer(8, seed=1)
    buf.push(transition(0), {"env": 0})
    rows = [transition(i) for i in range(1, 4)]
    buf.push_batch({key: torch.stack([row[key] for row in rows]) for key in rows[0]}, {"env": np.arange(1, 4)})
    buf.push({"episode": torch.ones(3, 2)})  # a later, sparse field
    buf.push(torch.arange(5))  # a whole item that is a tensor
    path = tmp_path / "tensors.npz"
    buf.save_data(str(path))
    other = DequeBuffer(8)
    other.load_data(str(path))
    for i in range(4):
        data = other.get(i).data
        for key, value in transition(i).items():
            assert isinstance(data[key], torch.Tensor) and data[key].dtype == value.dtype
            assert torch.equal(data[key], value)
    assert torch.equal(other.get(4).data["episode"], torch.ones(3, 2))
    assert torch.equal(other.get(5).data, torch.arange(5))
    batch = other.sample_batch(3, indices=np.array([0, 2, 3]))
    assert isinstance(batch.data["obs"], torch.Tensor) and batch.data["obs"].shape == (3, 4)
    assert other.get(1).meta == {"env": 1}
    with np.load(path, allow_pickle=False) as npz:
        header = json.loads(str(npz["__header__"]))
        assert all(npz[name].dtype != object for name in npz.files)
    torch_fields = {key for key, info in header["data"].items() if info["torch"]}
    assert torch_fields == {"obs", "action", "reward", "done", "episode"}
    assert header["data"]["__item__"]["kind"] == "tensors"
