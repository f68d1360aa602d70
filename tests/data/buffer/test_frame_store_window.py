"""The frame store's shared gather: 1-step rows' ``obs`` and ``next_obs`` read from one window of
K + 1 frames per row (views of one array); other rows gathered field by field."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlpipe.data import DequeBuffer, FrameStore, PriorityExperienceReplay
from tests.data.buffer.frame_envs import vector_rows


def filled(nstep: int, torch_obs: bool = False) -> tuple[DequeBuffer, dict[int, tuple[np.ndarray, np.ndarray]]]:
    buf = DequeBuffer(1000, seed=0)
    buf.use(FrameStore(buf))
    pushed: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for rows in vector_rows(4, 120, nstep=nstep, distinct=True):
        if torch_obs:
            rows = {**rows, "obs": torch.from_numpy(rows["obs"]), "next_obs": torch.from_numpy(rows["next_obs"])}
        for i, index in enumerate(buf.push_batch(rows).tolist()):
            pushed[index] = (np.asarray(rows["obs"][i]), np.asarray(rows["next_obs"][i]))
    return buf, pushed


def check(data: dict, indices: np.ndarray, pushed: dict[int, tuple[np.ndarray, np.ndarray]]) -> None:
    np.testing.assert_array_equal(np.asarray(data["obs"]), np.stack([pushed[i][0] for i in indices.tolist()]))
    np.testing.assert_array_equal(np.asarray(data["next_obs"]), np.stack([pushed[i][1] for i in indices.tolist()]))


def test_one_step_rows_share_one_window_and_equal_what_was_pushed() -> None:
    buf, pushed = filled(nstep=1)
    batch = buf.sample_batch(64)
    obs, next_obs = batch.data["obs"], batch.data["next_obs"]
    assert obs.shape == next_obs.shape == (64, 4, 6, 5) and obs.dtype == np.uint8
    assert np.shares_memory(obs, next_obs)  # one gather of 5 frames a row, not two of 4
    np.testing.assert_array_equal(obs[:, 1:], next_obs[:, :-1])
    check(batch.data, batch.indices, pushed)
    item = buf.get(3)  # one item: the same window, without the batch dim
    assert np.shares_memory(item.data["obs"], item.data["next_obs"])
    np.testing.assert_array_equal(item.data["obs"], pushed[item.index][0])
    np.testing.assert_array_equal(item.data["next_obs"], pushed[item.index][1])
    all_ids = np.array(sorted(pushed)[-buf.count():], dtype=np.int64)
    check(buf.sample_batch(0, indices=all_ids).data, all_ids, pushed)  # episode starts and ends included


def test_tensor_fields_come_back_as_tensors_over_the_window() -> None:
    buf, pushed = filled(nstep=1, torch_obs=True)
    batch = buf.sample_batch(32)
    assert isinstance(batch.data["obs"], torch.Tensor) and isinstance(batch.data["next_obs"], torch.Tensor)
    check(batch.data, batch.indices, pushed)
    images = batch.data["obs"].to(torch.float32)  # what an image encoder does first: a dense copy
    assert images.is_contiguous() and torch.equal(images, batch.data["obs"].contiguous().float())


@pytest.mark.parametrize("nstep", [2, 3])
def test_n_step_rows_are_gathered_field_by_field(nstep: int) -> None:
    buf, pushed = filled(nstep=nstep)
    batch = buf.sample_batch(64)
    assert not np.shares_memory(batch.data["obs"], batch.data["next_obs"])
    check(batch.data, batch.indices, pushed)


def test_window_over_a_wrapped_ring_with_priority_replay_and_zero_padding() -> None:
    """The ring went round several times, stacks at episode starts are zero-padded, rows of 3
    envs interleave, and priority replay draws the rows: every window still equals the pushed stacks."""
    buf = DequeBuffer(100, seed=2)
    buf.use(PriorityExperienceReplay(buf, IS_weight_anneal_train_iter=10))
    fs = FrameStore(buf, frame_capacity=200, window=32)
    buf.use(fs)
    pushed: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for rows in vector_rows(3, 400, padding="zero", distinct=True):
        for i, index in enumerate(buf.push_batch(rows).tolist()):
            pushed[index] = (rows["obs"][i], rows["next_obs"][i])
    assert fs.ring.next_id > 3 * fs.ring.capacity and fs.evicted == 0
    all_ids = np.array(sorted(pushed)[-buf.count():], dtype=np.int64)
    everything = buf.sample_batch(0, indices=all_ids).data
    assert np.shares_memory(everything["obs"], everything["next_obs"])
    check(everything, all_ids, pushed)
    batch = buf.sample_batch(32)
    assert batch.data["weight"].shape == (32,)
    check(batch.data, batch.indices, pushed)
