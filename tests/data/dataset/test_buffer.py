"""A dataset as the learner's buffer: sampled like a replay buffer, read-only, resumed by its sampler alone."""
from __future__ import annotations

import numpy as np
import pytest

from rlpipe.data import DequeBuffer
from rlpipe.data.buffer.persist import BufferFileError
from rlpipe.data.dataset import DatasetBuffer, DatasetError, write_dataset
from tests.data.dataset.conftest import ACTION_SPACE, OBS_SPACE, interleaved_columns


@pytest.fixture
def dataset(tmp_path, columns):
    return write_dataset(tmp_path / "data", columns, OBS_SPACE, ACTION_SPACE, "Toy-v0", {})


def test_batches_are_rows_of_the_dataset(dataset, columns):
    buffer = DatasetBuffer(dataset, seed=0)
    assert buffer.count() == 120
    batch = buffer.sample_batch(32)
    rows = batch.indices
    for name, values in columns.items():
        np.testing.assert_array_equal(batch.data[name], values[rows])
    items = buffer.sample(4)  # the seed's item API reads it too
    assert len(items) == 4 and set(items[0].data) == set(columns)


def test_it_refuses_every_write_in_one_line(dataset, columns):
    buffer = DatasetBuffer(dataset, seed=0)
    for write in (lambda: buffer.push_batch(columns), lambda: buffer.push({"obs": 1}), lambda: buffer.delete(3),
                  lambda: buffer.clear(), lambda: buffer.update(0, meta={"x": 1})):
        with pytest.raises(DatasetError, match=f"dataset {dataset.path} is read-only"):
            write()
    assert buffer.count() == 120


def test_its_saved_sampler_resumes_the_same_batches_and_holds_no_rows(dataset, tmp_path):
    buffer = DatasetBuffer(dataset, seed=3)
    buffer.sample_batch(8)
    buffer.save_data(str(tmp_path / "sampler.npz"))
    expected = [buffer.sample_batch(8).indices for _ in range(3)]
    resumed = DatasetBuffer(dataset, seed=99)
    resumed.load_data(str(tmp_path / "sampler.npz"))
    assert all((resumed.sample_batch(8).indices == e).all() for e in expected)
    assert (tmp_path / "sampler.npz").stat().st_size < 4096


def test_a_sampler_of_another_dataset_is_refused(dataset, tmp_path):
    DatasetBuffer(dataset, seed=0).save_data(str(tmp_path / "sampler.npz"))
    other = write_dataset(tmp_path / "other", interleaved_columns(seed=5), OBS_SPACE, ACTION_SPACE, "Toy-v0", {})
    with pytest.raises(DatasetError, match=f"not on {other.path}"):
        DatasetBuffer(other, seed=0).load_data(str(tmp_path / "sampler.npz"))
    (tmp_path / "junk.npz").write_bytes(b"not a file")
    with pytest.raises(BufferFileError, match="is damaged or not a dataset sampler's"):
        DatasetBuffer(other, seed=0).load_data(str(tmp_path / "junk.npz"))


def test_offline_to_online_the_online_buffers_saved_state_resumes_both(dataset, columns, tmp_path):
    def pair(seed):
        online = DequeBuffer(500, seed=seed)
        return online, DatasetBuffer(dataset, rng=online.rng)  # the dataset draws from the online buffer's generator

    online, data = pair(7)
    online.push_batch({k: v[:50] for k, v in columns.items()})
    data.sample_batch(4)
    online.save_data(str(tmp_path / "online.npz"))
    expected = [(data.sample_batch(4).indices, online.sample_batch(4).indices) for _ in range(3)]
    online, data = pair(0)
    online.load_data(str(tmp_path / "online.npz"))
    for from_data, from_online in expected:
        assert (data.sample_batch(4).indices == from_data).all()
        assert (online.sample_batch(4).indices == from_online).all()
